/*
 * quantize.c — GGUF re-quantization compatible with llama.cpp's
 * llama-quantize (see quantize.h).  The row quantizers are kernels/quant.c.
 *
 * Two parts:
 *   2. The per-tensor type choice of llama-quantize (src/llama-quant.cpp:
 *      tensor_allows_quantization, llama_tensor_get_type_impl,
 *      tensor_type_fallback) for the file types listed in quantize.h.
 *   3. The writer: metadata copied in order, general.quantization_version
 *      and general.file_type re-set (removed and appended, as gguf_set_val
 *      does), tensors in llama.cpp's loader order (non-block tensors by
 *      name, then blocks by number, by name within a block), data aligned,
 *      zero padding, OUT.partial renamed into place (encoding and file
 *      handling in gguf_write.c).  Rows are converted on the thread pool in
 *      slabs of at most QUANT_SLAB_BYTES of output, so memory stays bounded
 *      whatever the model size.
 */
#include "quantize.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/pool.h"
#include "gguf.h"
#include "gguf_write.h"
#include "kernels/kern.h"

#define QUANT_SLAB_BYTES ((size_t)32 << 20)
#define QUANT_ROWS_PER_CLAIM 16
#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define QMAX(a, b) ((a) > (b) ? (a) : (b))

static uint32_t type_blck(int type) {
    const ggml_type_info *ti = ggml_type_get((uint32_t)type);
    return ti ? ti->blck_size : 0;
}

/* ==== 2. file types and llama-quantize's per-tensor choice ====================== */

static const struct {
    const char *name;
    int ftype, base;
} ftypes[] = {
    {"F32", QUANT_FTYPE_ALL_F32, GGML_TYPE_F32},   {"F16", QUANT_FTYPE_F16, GGML_TYPE_F16},
    {"BF16", QUANT_FTYPE_BF16, GGML_TYPE_BF16},    {"Q4_0", QUANT_FTYPE_Q4_0, GGML_TYPE_Q4_0},
    {"Q4_1", QUANT_FTYPE_Q4_1, GGML_TYPE_Q4_1},    {"Q5_0", QUANT_FTYPE_Q5_0, GGML_TYPE_Q5_0},
    {"Q5_1", QUANT_FTYPE_Q5_1, GGML_TYPE_Q5_1},    {"Q8_0", QUANT_FTYPE_Q8_0, GGML_TYPE_Q8_0},
    {"Q2_K", QUANT_FTYPE_Q2_K, GGML_TYPE_Q2_K},    {"Q3_K_S", QUANT_FTYPE_Q3_K_S, GGML_TYPE_Q3_K},
    {"Q3_K_M", QUANT_FTYPE_Q3_K_M, GGML_TYPE_Q3_K}, {"Q3_K_L", QUANT_FTYPE_Q3_K_L, GGML_TYPE_Q3_K},
    {"Q4_K_S", QUANT_FTYPE_Q4_K_S, GGML_TYPE_Q4_K}, {"Q4_K_M", QUANT_FTYPE_Q4_K_M, GGML_TYPE_Q4_K},
    {"Q5_K_S", QUANT_FTYPE_Q5_K_S, GGML_TYPE_Q5_K}, {"Q5_K_M", QUANT_FTYPE_Q5_K_M, GGML_TYPE_Q5_K},
    {"Q6_K", QUANT_FTYPE_Q6_K, GGML_TYPE_Q6_K},     {"IQ4_NL", QUANT_FTYPE_IQ4_NL, GGML_TYPE_IQ4_NL},
    {"IQ4_XS", QUANT_FTYPE_IQ4_XS, GGML_TYPE_IQ4_XS},
    {"MXFP4_MOE", QUANT_FTYPE_MXFP4_MOE, GGML_TYPE_MXFP4},
    /* llama-quantize's aliases */
    {"Q3_K", QUANT_FTYPE_Q3_K_M, GGML_TYPE_Q3_K},   {"Q4_K", QUANT_FTYPE_Q4_K_M, GGML_TYPE_Q4_K},
    {"Q5_K", QUANT_FTYPE_Q5_K_M, GGML_TYPE_Q5_K},
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

int quant_ftype_parse(const char *name, int *ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (!strcasecmp(name, ftypes[i].name)) {
            *ftype = ftypes[i].ftype;
            return 0;
        }
    return QUANT_EARG;
}

const char *quant_ftype_name(int ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype) return ftypes[i].name;
    return NULL;
}

int quant_ftype_base_type(int ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype) return ftypes[i].base;
    return -1;
}

quant_options quant_options_default(void) {
    return (quant_options){.ftype = QUANT_FTYPE_Q8_0, .token_embd_type = -1, .output_type = -1};
}

static int is_quantized(int type) {
    return type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16;
}

enum { CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
       CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER };

/* llama-quant.cpp tensor_get_category: the order of the tests matters. */
static int tensor_category(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return CAT_TOKEN_EMBD;
    static const struct { const char *sub; int cat; } subs[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV}, {"attn_kv_b.weight", CAT_ATTN_KV_B},
        {"attn_v.weight", CAT_ATTN_V},     {"attn_k.weight", CAT_ATTN_K},
        {"attn_q.weight", CAT_ATTN_Q},     {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},            {"ffn_gate", CAT_FFN_GATE},
        {"ffn_down", CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strstr(name, subs[i].sub)) return subs[i].cat;
    return CAT_OTHER;
}

static int cat_is_attn_v(int c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

/* ggml_n_dims: dimensions up to the last one that is not 1 (at least 1). */
static uint32_t n_dims_trimmed(const gguf_tensor *t) {
    for (int i = GGUF_MAX_DIMS - 1; i >= 1; i--)
        if (t->ne[i] > 1) return (uint32_t)i + 1;
    return 1;
}

/* llama-quant.cpp tensor_allows_quantization (quantize_output_tensor on). */
static int allows_quantization(const gguf_tensor *t) {
    if (n_dims_trimmed(t) < 2) return 0;
    const char *name = t->name;
    size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 6, "weight")) return 0;
    static const char *const never_sub[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never_sub / sizeof never_sub[0]; i++)
        if (strstr(name, never_sub[i])) return 0;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return 0;
    return 1;
}

/* quantize_state_impl: the hyperparameters and counters the mixtures use. */
typedef struct {
    int n_attention_wv, i_attention_wv;
    int n_ffn_down, i_ffn_down;
    int has_tied_embeddings;
    int n_expert, n_gqa, is_falcon, is_70b;
    int n_fallback;
} qstate;

static int use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static int qfail(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int qfail(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* llama_tensor_get_type_impl for the file types of enum quant_ftype. */
static int get_type_impl(qstate *qs, int new_type, const gguf_tensor *t, int ftype, int cat,
                         const quant_options *o, char *err, size_t err_len) {
    if (cat == CAT_OUTPUT || (qs->has_tied_embeddings && cat == CAT_TOKEN_EMBD)) {
        if (o->output_type >= 0) {
            new_type = o->output_type;
        } else {
            if (ftype == QUANT_FTYPE_MXFP4_MOE || qs->is_falcon || t->ne[0] % type_blck(new_type))
                new_type = GGML_TYPE_Q8_0;
            else if (new_type != GGML_TYPE_Q8_0) new_type = GGML_TYPE_Q6_K;
        }
    } else if (ftype == QUANT_FTYPE_MXFP4_MOE) { /* experts MXFP4, everything else Q8_0 */
        new_type = t->ne[2] > 1 ? GGML_TYPE_MXFP4 : GGML_TYPE_Q8_0;
    } else if (cat == CAT_TOKEN_EMBD) {
        if (o->token_embd_type >= 0) new_type = o->token_embd_type;
    } else if (cat_is_attn_v(cat)) {
        if (ftype == QUANT_FTYPE_Q2_K) new_type = qs->n_gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        else if (ftype == QUANT_FTYPE_Q3_K_M)
            new_type = qs->i_attention_wv < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        else if (ftype == QUANT_FTYPE_Q3_K_L) new_type = GGML_TYPE_Q5_K;
        else if ((ftype == QUANT_FTYPE_IQ4_NL || ftype == QUANT_FTYPE_IQ4_XS) && qs->n_gqa >= 4)
            new_type = GGML_TYPE_Q5_K;
        else if ((ftype == QUANT_FTYPE_Q4_K_M || ftype == QUANT_FTYPE_Q5_K_M) &&
                 use_more_bits(qs->i_attention_wv, qs->n_attention_wv))
            new_type = GGML_TYPE_Q6_K;
        else if (ftype == QUANT_FTYPE_Q4_K_S && qs->i_attention_wv < 4) new_type = GGML_TYPE_Q5_K;
        if (qs->is_70b && (new_type == GGML_TYPE_Q3_K || new_type == GGML_TYPE_Q4_K))
            new_type = GGML_TYPE_Q5_K;
        if (qs->n_expert == 8) new_type = GGML_TYPE_Q8_0;
        ++qs->i_attention_wv;
    } else if (cat == CAT_ATTN_K) {
        if (qs->n_expert == 8) new_type = GGML_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        int i_layer = qs->i_ffn_down, n_layer = qs->n_ffn_down;
        if (qs->n_expert > 1) { /* experts may be stored out of order: use the name */
            if (sscanf(t->name, "blk.%d.", &i_layer) != 1)
                return qfail(err, err_len, QUANT_EFORMAT, "tensor '%s': cannot determine its layer", t->name);
            if (i_layer < 0 || i_layer >= n_layer)
                return qfail(err, err_len, QUANT_EFORMAT, "tensor '%s': layer %d outside [0, %d)",
                             t->name, i_layer, n_layer);
        }
        if (ftype == QUANT_FTYPE_Q2_K) new_type = GGML_TYPE_Q3_K;
        else if (ftype == QUANT_FTYPE_Q3_K_M)
            new_type = i_layer < n_layer / 16 ? GGML_TYPE_Q5_K
                       : !qs->is_falcon || use_more_bits(i_layer, n_layer) ? GGML_TYPE_Q4_K
                                                                           : GGML_TYPE_Q3_K;
        else if (ftype == QUANT_FTYPE_Q3_K_L) new_type = qs->is_falcon ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_K;
        else if (ftype == QUANT_FTYPE_Q4_K_M) {
            if (qs->is_falcon)
                new_type = i_layer < n_layer / 16 ? GGML_TYPE_Q6_K
                           : use_more_bits(i_layer, n_layer) ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer)) new_type = GGML_TYPE_Q6_K;
        } else if (i_layer < n_layer / 8 &&
                   (ftype == QUANT_FTYPE_IQ4_NL || ftype == QUANT_FTYPE_IQ4_XS)) /* no imatrix */
            new_type = GGML_TYPE_Q5_K;
        else if (ftype == QUANT_FTYPE_Q5_K_M && use_more_bits(i_layer, n_layer))
            new_type = GGML_TYPE_Q6_K;
        else if (ftype == QUANT_FTYPE_Q4_K_S && !qs->is_falcon && i_layer < n_layer / 8)
            new_type = GGML_TYPE_Q5_K;
        ++qs->i_ffn_down;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!qs->is_falcon) {
            if (qs->n_expert == 8) {
                if (ftype == QUANT_FTYPE_Q2_K || ftype == QUANT_FTYPE_Q3_K_S ||
                    ftype == QUANT_FTYPE_Q3_K_M || ftype == QUANT_FTYPE_IQ4_NL ||
                    ftype == QUANT_FTYPE_Q4_K_S || ftype == QUANT_FTYPE_Q4_K_M ||
                    ftype == QUANT_FTYPE_IQ4_XS)
                    new_type = GGML_TYPE_Q5_K;
            } else {
                if (ftype == QUANT_FTYPE_Q2_K) new_type = GGML_TYPE_Q3_K;
                else if (ftype == QUANT_FTYPE_Q3_K_M) new_type = GGML_TYPE_Q4_K;
                else if (ftype == QUANT_FTYPE_Q3_K_L) new_type = GGML_TYPE_Q5_K;
            }
        } else if (ftype == QUANT_FTYPE_Q3_K_L) {
            new_type = GGML_TYPE_Q4_K;
        }
    }
    return new_type;
}

/* llama-quant.cpp tensor_type_fallback: a row length the type cannot hold.
 * 256-blocks demote to a 32-block type; a 32-block type (Q4_0 ... Q8_0,
 * IQ4_NL) has nothing smaller, and a row that no 32-block fits is written
 * as F16, as llama-quantize does ("must use F16 due to unusual shape"). */
static int type_fallback(qstate *qs, const gguf_tensor *t, int type, int *fell_back, char *err,
                         size_t err_len) {
    *fell_back = 0;
    if (t->ne[0] % type_blck(type) == 0) return type;
    int r;
    switch (type) {
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_TQ1_0:
    case GGML_TYPE_TQ2_0: r = GGML_TYPE_Q4_0; break;
    case GGML_TYPE_Q4_K: r = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: r = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: r = GGML_TYPE_Q8_0; break;
    case GGML_TYPE_IQ4_XS: r = GGML_TYPE_IQ4_NL; break;
    default:
        if (type_blck(type) <= 32) {
            r = type;
            break;
        }
        return qfail(err, err_len, QUANT_EUNSUPPORTED,
                     "tensor '%s': row length %lld is not a multiple of %u (block of %s), and %s has no fallback type",
                     t->name, (long long)t->ne[0], type_blck(type), ggml_type_name((uint32_t)type),
                     ggml_type_name((uint32_t)type));
    }
    if (t->ne[0] % type_blck(r)) r = GGML_TYPE_F16;
    qs->n_fallback++;
    *fell_back = 1;
    return r;
}

/* llama_tensor_get_type: the type tensor t is written as (its own type: copied). */
static int choose_type(qstate *qs, const quant_options *o, const gguf_tensor *t, int default_type,
                       int *fell_back, char *err, size_t err_len) {
    *fell_back = 0;
    if (!allows_quantization(t)) return (int)t->type;
    int cat = tensor_category(t->name);
    if (o->token_embd_type >= 0 && cat == CAT_TOKEN_EMBD) return o->token_embd_type;
    if (o->output_type >= 0 && cat == CAT_OUTPUT) return o->output_type;
    int new_type = default_type;
    if (is_quantized(default_type)) {
        if (!o->pure) {
            new_type = get_type_impl(qs, new_type, t, o->ftype, cat, o, err, err_len);
            if (new_type < 0) return new_type;
        }
        new_type = type_fallback(qs, t, new_type, fell_back, err, err_len);
    }
    return new_type;
}

/* ==== 3. the writer ================================================================ */

/* One output tensor. */
typedef struct {
    const gguf_tensor *t;
    int layer;        /* blk.N. → N, else -1 (sort key) */
    int type_out;
    int fallback;
    uint32_t n_dims;
    uint64_t bytes_out;
    uint64_t offset;  /* in the output data section */
} qtensor;

/* llama_model_loader's weight_name_comparer: block number, then name. */
static int qtensor_cmp(const void *a, const void *b) {
    const qtensor *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

/* Conversion of rows [row0, row0 + n_rows) of one tensor into out. */
typedef struct {
    const uint8_t *src;  /* first row */
    uint8_t *out;
    size_t row_in, row_out; /* bytes */
    int64_t n_per_row, n_rows;
    int type_in, type_out, isa;
    atomic_llong next;
} qjob;

typedef struct {
    qjob *j;
    pool *p;
} qjob_ctx;

static void qjob_worker(void *arg, int ith, int nth) {
    (void)nth;
    qjob_ctx *c = arg;
    qjob *j = c->j;
    float *buf = pool_scratch(c->p, ith, NULL);
    for (;;) {
        long long r0 = atomic_fetch_add(&j->next, QUANT_ROWS_PER_CLAIM);
        if (r0 >= j->n_rows) break;
        long long r1 = QMIN(r0 + QUANT_ROWS_PER_CLAIM, (long long)j->n_rows);
        for (long long r = r0; r < r1; r++) {
            const uint8_t *src = j->src + (size_t)r * j->row_in;
            const float *x = (const float *)src;
            if (j->type_in != GGML_TYPE_F32) {
                kern_dequant_row_isa(j->isa, j->type_in, src, buf, (int)j->n_per_row);
                x = buf;
            }
            quant_row(j->type_out, x, j->out + (size_t)r * j->row_out, j->n_per_row);
        }
    }
}

static int64_t hparam_i64(const gguf_file *g, const char *arch, const char *key, int64_t dflt) {
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const gguf_value *v = gguf_get(g, k);
    if (!v) return dflt;
    gguf_value e;
    if (v->type == GGUF_VT_ARRAY) { /* per-layer arrays: llama.cpp's n_gqa() uses layer 0 */
        if (gguf_arr_elem(v, 0, &e)) return dflt;
        v = &e;
    }
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        return (int64_t)v->v.u64;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        return v->v.i64;
    default: return dflt;
    }
}

static void setup_state(const gguf_file *g, const qtensor *ts, size_t n, qstate *qs) {
    memset(qs, 0, sizeof *qs);
    char arch[64] = "";
    const gguf_value *a = gguf_get(g, "general.architecture");
    if (a && a->type == GGUF_VT_STRING)
        snprintf(arch, sizeof arch, "%.*s", (int)(a->v.str.len < 63 ? a->v.str.len : 63), a->v.str.ptr);
    int max_layer = -1;
    qs->has_tied_embeddings = 1;
    for (size_t i = 0; i < n; i++) {
        int c = tensor_category(ts[i].t->name);
        if (cat_is_attn_v(c)) qs->n_attention_wv++;
        if (c == CAT_OUTPUT) qs->has_tied_embeddings = 0;
        if (ts[i].layer > max_layer) max_layer = ts[i].layer;
    }
    qs->n_ffn_down = (int)hparam_i64(g, arch, "block_count", max_layer + 1);
    qs->n_expert = (int)hparam_i64(g, arch, "expert_count", 0);
    int64_t n_head = hparam_i64(g, arch, "attention.head_count", 0);
    int64_t n_head_kv = hparam_i64(g, arch, "attention.head_count_kv", n_head);
    qs->n_gqa = n_head_kv > 0 ? (int)(n_head / n_head_kv) : 0;
    qs->is_falcon = !strcmp(arch, "falcon");
    /* llama.cpp calls an 80-layer llama with GQA "70B" and gives its attn_v more bits */
    qs->is_70b = !strcmp(arch, "llama") && qs->n_ffn_down == 80 && n_head != n_head_kv;
}

int quant_file(const char *in_path, const char *out_path, const quant_options *o, quant_stats *st,
               char *err, size_t err_len) {
    char e[512];
    quant_stats stats = {0};
    if (st) *st = stats;
    const int default_type = quant_ftype_base_type(o->ftype);
    if (default_type < 0)
        return qfail(err, err_len, QUANT_EARG, "file type %d is not one cinfer can write", o->ftype);
    if ((o->token_embd_type >= 0 && !quant_type_supported(o->token_embd_type)) ||
        (o->output_type >= 0 && !quant_type_supported(o->output_type)))
        return qfail(err, err_len, QUANT_EARG, "token-embedding/output type cannot be produced");

    gguf_file *g = NULL;
    int rc = gguf_open(in_path, &g, e, sizeof e);
    if (rc) return qfail(err, err_len, rc == GGUF_EIO ? QUANT_EIO : QUANT_EFORMAT, "%s", e);

    const size_t n = (size_t)gguf_n_tensors(g);
    qtensor *ts = calloc(n ? n : 1, sizeof *ts);
    gguf_out out = {0};
    gguf_writer *w = &out.w;
    pool *p = NULL;
    uint8_t *slab = NULL;
    size_t slab_cap = 0;
    if (!ts) {
        rc = qfail(err, err_len, QUANT_ENOMEM, "out of memory");
        goto done;
    }

    /* tensor order and types */
    for (size_t i = 0; i < n; i++) {
        ts[i].t = gguf_tensor_at(g, i);
        ts[i].layer = -1;
        sscanf(ts[i].t->name, "blk.%d.", &ts[i].layer);
        ts[i].n_dims = n_dims_trimmed(ts[i].t);
    }
    qsort(ts, n, sizeof *ts, qtensor_cmp);
    qstate qs;
    setup_state(g, ts, n, &qs);
    uint32_t align = gguf_alignment(g);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = ts[i].t;
        int ty = choose_type(&qs, o, t, default_type, &ts[i].fallback, e, sizeof e);
        if (ty < 0) {
            rc = qfail(err, err_len, ty, "%s", e);
            goto done;
        }
        ts[i].type_out = ty;
        if ((uint32_t)ty != t->type) {
            if (!quant_type_supported(ty)) {
                rc = qfail(err, err_len, QUANT_EUNSUPPORTED, "tensor '%s': cinfer cannot write type %s",
                           t->name, ggml_type_name((uint32_t)ty));
                goto done;
            }
            if (t->ne[0] % type_blck(ty)) {
                rc = qfail(err, err_len, QUANT_EUNSUPPORTED,
                           "tensor '%s': row length %lld is not a multiple of %u, the block of %s",
                           t->name, (long long)t->ne[0], type_blck(ty), ggml_type_name((uint32_t)ty));
                goto done;
            }
            if (t->type != GGML_TYPE_F32 && !kern_type_supported((int)t->type)) {
                rc = qfail(err, err_len, QUANT_EUNSUPPORTED,
                           "tensor '%s': cannot dequantize type %s (no kernel for it yet) to convert it to %s",
                           t->name, ggml_type_name(t->type), ggml_type_name((uint32_t)ty));
                goto done;
            }
            stats.n_quantized++;
            ts[i].bytes_out = ggml_row_bytes((uint32_t)ty, (uint64_t)t->ne[0]) *
                              (t->n_elems / (uint64_t)t->ne[0]);
        } else {
            ts[i].bytes_out = t->n_bytes;
        }
        ts[i].offset = off;
        off = gguf_align_up(off + ts[i].bytes_out, align);
        stats.bytes_in += t->n_bytes;
        stats.bytes_out += ts[i].bytes_out;
    }
    stats.n_tensors = (int)n;
    stats.n_fallback = qs.n_fallback;

    int n_threads = o->n_threads > 0 ? o->n_threads : pool_default_threads();
    if (pool_new(n_threads, &p)) {
        rc = qfail(err, err_len, QUANT_ENOMEM, "cannot start %d threads", n_threads);
        goto done;
    }
    int64_t max_row = 1;
    for (size_t i = 0; i < n; i++) max_row = QMAX(max_row, ts[i].t->ne[0]);
    if (pool_reserve(p, (size_t)max_row * sizeof(float))) {
        rc = qfail(err, err_len, QUANT_ENOMEM, "out of memory (row scratch)");
        goto done;
    }

    if (gguf_out_open(&out, out_path, ".partial", g, e, sizeof e)) {
        rc = qfail(err, err_len, QUANT_EIO, "%s", e);
        goto done;
    }
    /* header: metadata as in the input minus the keys llama-quantize re-sets
     * (general.quantization_version and general.file_type, appended at the
     * end) and the split.* keys of a shard */
    static const char *const split_keys[] = {"split.no", "split.count", "split.tensors.count", NULL};
    const gguf_kv_set set[] = {{"general.quantization_version", gguf_val_u32(2)},
                               {"general.file_type", gguf_val_u32((uint32_t)o->ftype)}};
    gguf_w_header(w, g, n, gguf_key_in_list, split_keys, set, sizeof set / sizeof set[0]);
    for (size_t i = 0; i < n; i++)
        gguf_w_tensor_info(w, ts[i].t->name, ts[i].n_dims, ts[i].t->ne, (uint32_t)ts[i].type_out,
                           ts[i].offset);
    gguf_w_pad(w, align);
    if (w->err) goto write_error;

    const int isa = kern_best_isa();
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = ts[i].t;
        if (o->on_tensor) {
            quant_tensor_report r = {.name = t->name, .index = (int)i, .n_tensors = (int)n,
                                     .n_dims = ts[i].n_dims, .type_in = (int)t->type,
                                     .type_out = ts[i].type_out, .bytes_in = t->n_bytes,
                                     .bytes_out = ts[i].bytes_out, .fallback = ts[i].fallback};
            memcpy(r.ne, t->ne, sizeof r.ne);
            o->on_tensor(&r, o->user);
        }
        if ((uint32_t)ts[i].type_out == t->type) {
            gguf_w_bytes(w, t->data, (size_t)t->n_bytes);
        } else {
            const int64_t n_per_row = t->ne[0];
            const int64_t n_rows = (int64_t)(t->n_elems / (uint64_t)n_per_row);
            const size_t row_in = (size_t)ggml_row_bytes(t->type, (uint64_t)n_per_row);
            const size_t row_out = (size_t)ggml_row_bytes((uint32_t)ts[i].type_out, (uint64_t)n_per_row);
            int64_t slab_rows = (int64_t)QMAX((size_t)1, QUANT_SLAB_BYTES / row_out);
            if (slab_rows > n_rows) slab_rows = n_rows;
            if ((size_t)slab_rows * row_out > slab_cap) {
                free(slab);
                slab_cap = (size_t)slab_rows * row_out;
                slab = malloc(slab_cap);
                if (!slab) {
                    rc = qfail(err, err_len, QUANT_ENOMEM, "out of memory (%zu bytes for tensor '%s')",
                               slab_cap, t->name);
                    goto done;
                }
            }
            for (int64_t r0 = 0; r0 < n_rows; r0 += slab_rows) {
                qjob j = {.src = (const uint8_t *)t->data + (size_t)r0 * row_in, .out = slab,
                          .row_in = row_in, .row_out = row_out, .n_per_row = n_per_row,
                          .n_rows = QMIN(slab_rows, n_rows - r0), .type_in = (int)t->type,
                          .type_out = ts[i].type_out, .isa = isa};
                atomic_init(&j.next, 0);
                qjob_ctx c = {&j, p};
                pool_run(p, qjob_worker, &c);
                gguf_w_bytes(w, slab, (size_t)j.n_rows * row_out);
                if (w->err) goto write_error;
            }
        }
        gguf_w_pad(w, align);
        if (w->err) goto write_error;
    }
    if (gguf_out_close(&out)) goto write_error;
    stats.file_bytes = w->off;

    /* the written file must read back before it gets the final name */
    gguf_file *chk = NULL;
    if (gguf_open(out.tmp, &chk, e, sizeof e)) {
        rc = qfail(err, err_len, QUANT_EFORMAT, "written file does not read back: %s", e);
        goto done;
    }
    gguf_close(chk);
    if (gguf_out_commit(&out, e, sizeof e)) {
        rc = qfail(err, err_len, QUANT_EIO, "%s", e);
        goto done;
    }
    rc = 0;
    if (st) *st = stats;
    goto done;

write_error:
    rc = qfail(err, err_len, QUANT_EIO, "%s: write failed: %s", out.tmp, strerror(w->err ? w->err : EIO));
done:
    gguf_out_abort(&out);
    free(slab);
    pool_free(p);
    free(ts);
    gguf_close(g);
    return rc;
}
