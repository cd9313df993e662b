/*
 * api.c — the public library (include/cinfer.h) over the loader, compiler,
 * engine, tokenizer and sampler.
 *
 * A model owns the mapping, the vocabulary and the compiled module; a session
 * owns an engine context (KV cache, arena, pool), its token history and the
 * scratch generation needs (a logits copy for the logit processor, the
 * detokenizer stream), all allocated in cinfer_session_new.
 *
 * KV reuse: every evaluation is "make the history equal to these ids": the
 * longest common prefix with the current history stays in the cache and only
 * the rest is evaluated.  Because attention at position p reads only
 * positions <= p, the result equals a cold evaluation exactly (tested).
 */
#include "cinfer.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/pool.h"
#include "compiler/compile.h"
#include "engine/eng_cuda.h"
#include "engine/engine.h"
#include "engine/giw.h"
#include "engine/memplan.h"
#include "engine/samp.h"
#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "formats/modelfile.h"
#include "gpu/cuda.h"
#include "grammar/gram_api.h"
#include "kernels/kern.h"
#include "kernels/precision.h"
#include "text/chat.h"
#include "text/tok.h"

struct cinfer_model {
    gguf_file *g;
    tok_vocab *vocab;
    cc_module *mod;
    eng_model em;
    char arch[64];
    chat_template *chat;  /* tokenizer.chat_template, parsed at open; NULL when absent/broken */
    char chat_err[256];   /* why chat is NULL */
    gram_vocab *gv;       /* token trie for grammars: built on first use (api_gram_vocab) */
    pthread_mutex_t gv_lock;
    int precision;        /* CINFER_PRECISION_* the forward pass computes in */
    char *path;           /* as opened */
    char notes[512];      /* cinfer_model_notes: '\n'-separated */
    char file_type[32];   /* cinfer_model_info.file_type */
    char name[128];       /* general.name */
    uint64_t n_params;
    void (*mod_free)(cc_module *); /* cc_module_free for a compiled module, free for a linked one */
    cuda_dev *gpu;        /* --device cuda: the GPU (closed after the engine and module) */
    char device[384];     /* cinfer_model_device */
    int has_budget;       /* opened with cinfer_model_options.mem_bytes */
    cinfer_plan budget;   /* the plan the budget chose */
    char budget_steps[1024]; /* its ladder steps, '\n'-separated */
    uint8_t *no_penalty;  /* (n_vocab) 1: end-of-generation or control token, which the
                           * repetition penalty leaves alone (samp_params.no_penalty) */
    int kv_type_k, kv_type_v; /* ggml types of its sessions' KV cache rows by default */
};

/* ---- KV cache types: CINFER_KV_* <-> the ggml types of the cache rows ------- */

static const int kv_ggml[CINFER_KV_COUNT] = {
    [CINFER_KV_DEFAULT] = -1, [CINFER_KV_F32] = CF_F32, [CINFER_KV_F16] = CF_F16,
    [CINFER_KV_Q8_0] = CF_Q8_0, [CINFER_KV_Q4_0] = CF_Q4_0};

const char *cinfer_kv_type_name(int kv_type) {
    if (kv_type == CINFER_KV_DEFAULT) return "default";
    return kv_type > 0 && kv_type < CINFER_KV_COUNT ? eng_kv_type_name(kv_ggml[kv_type]) : NULL;
}

int cinfer_kv_type_from_name(const char *name) {
    for (int t = 0; name && t < CINFER_KV_COUNT; t++)
        if (!strcasecmp(name, cinfer_kv_type_name(t))) return t;
    return -1;
}

static int kv_from_ggml(int type) {
    for (int t = 1; t < CINFER_KV_COUNT; t++)
        if (kv_ggml[t] == type) return t;
    return CINFER_KV_DEFAULT;
}

/* CINFER_KV_DEFAULT on the CPU (docs/memory.md: F16 keeps cosine >= 0.9999
 * against the F32-cache references with f32 activations, 0.99987 on
 * TinyStories with q8 ones, as llama.cpp's own F16 cache) and on CUDA. */
#define KV_DEFAULT_CPU CF_F16
#define KV_DEFAULT_CUDA CF_F32

/* The ggml type of a CINFER_KV_* request: def for DEFAULT, -1 out of range. */
static int kv_resolve(int kv_type, int def) {
    if (kv_type == CINFER_KV_DEFAULT) return def;
    return kv_type > 0 && kv_type < CINFER_KV_COUNT ? kv_ggml[kv_type] : -1;
}

/* How model_open gets the forward pass: compiled (cinfer_model_open passes
 * cc_build) or linked into the program (describe/forward).  A function
 * pointer, so that programs that only link theirs (bundles: --gc-sections)
 * never reach the compiler, Lua or libtcc. */
typedef struct {
    int (*build)(const gguf_file *g, const cc_options *o, cc_module **out, char *err, size_t err_len);
    void (*free)(cc_module *m);
} model_compiler;

/* How model_open reads the model: any model file or Hugging Face folder
 * (modelfile_open), or a bundle's payload, a GGUF range of the program's own
 * file.  A function pointer too, so that a bundle never reaches the folder
 * loader (formats/hf.c) and the Lua it runs the mapping tables with. */
typedef int (*model_reader)(const char *path, uint64_t offset, uint64_t n_bytes, gguf_file **out, char *err,
                            size_t err_len);

static int read_any(const char *path, uint64_t offset, uint64_t n_bytes, gguf_file **out, char *err, size_t err_len) {
    (void)offset;
    (void)n_bytes;
    return modelfile_open(path, out, err, err_len); /* GGUF, .giw or Hugging Face folder */
}

static int read_range(const char *path, uint64_t offset, uint64_t n_bytes, gguf_file **out, char *err,
                      size_t err_len) {
    return gguf_open_range(path, offset, n_bytes, out, err, err_len);
}

struct cinfer_session {
    cinfer_model *m;
    eng_ctx *ctx;
    int32_t *tokens;   /* (n_ctx) history */
    float *logits_buf; /* (n_vocab) copy handed to the logit processor */
    tok_stream *ts;
    int evaluated;     /* logits are valid */
    cinfer_progress_fn progress; /* cinfer_session_options.progress */
    void *progress_user;
};

static int fail(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ---- models ----------------------------------------------------------------- */

static int gguf_code(int rc) {
    switch (rc) {
    case GGUF_EIO: return CINFER_EIO;
    case GGUF_ENOMEM: return CINFER_ENOMEM;
    default: return CINFER_EFORMAT;
    }
}

/* Notes, parameter count, file type and name (cinfer_model_get_info). */
static void model_facts(cinfer_model *m) {
    /* llama.cpp warns the same way ("missing pre-tokenizer type, using: 'default'") */
    if (tok_pre_note(m->vocab)) snprintf(m->notes, sizeof m->notes, "%s", tok_pre_note(m->vocab));
    uint64_t bytes[GGML_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < gguf_n_tensors(m->g); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->g, i);
        m->n_params += t->n_elems;
        if (t->type < GGML_TYPE_COUNT && t->n_dims >= 2) bytes[t->type] += t->n_bytes;
    }
    uint32_t ft;
    char e[128];
    if (giw_precision(m->g, e, sizeof e) >= 0)
        snprintf(m->file_type, sizeof m->file_type, "%s", cinfer_precision_name(giw_precision(m->g, e, sizeof e)));
    else if (!gguf_get_u32(m->g, "general.file_type", &ft, NULL, 0))
        snprintf(m->file_type, sizeof m->file_type, "%s", gguf_file_type_name(ft));
    else {
        int best = 0;
        for (int t = 1; t < GGML_TYPE_COUNT; t++)
            if (bytes[t] > bytes[best]) best = t;
        snprintf(m->file_type, sizeof m->file_type, "%s", ggml_type_name((uint32_t)best));
    }
    gguf_str nm;
    if (!gguf_get_str(m->g, "general.name", &nm, NULL, 0))
        snprintf(m->name, sizeof m->name, "%.*s", (int)(nm.len < 127 ? nm.len : 127), nm.ptr);
}

/* cinfer_model_options.progress for the engine's repacking. */
static void repack_progress(void *user, size_t done, size_t total) {
    const cinfer_model_options *o = user;
    (void)o->progress(o->progress_user, "repack", (double)done, (double)total);
}

/* ---- memory plans and the budget ladder --------------------------------------
 * Shared by cinfer_plan_model and a budgeted cinfer_model_open: the file is
 * open and its tokenizer loaded (both measured by the caller); each rung
 * compiles the forward pass in its precision and adds up memplan's parts. */

typedef struct {
    const gguf_file *g;
    const model_compiler *mc;
    cc_options co;             /* .precision is set per rung */
    int fixed;                 /* a .giw: only its own precision */
    int n_threads;
    uint64_t runtime_bytes, tokenizer_bytes;
    uint64_t compiler_bytes;   /* measured at the first compile */
    uint64_t code_bytes;       /* measured after it (memplan_code_unrun) */
    int compiled;
    int stream, stream_ahead;  /* plan streamed weights */
    int moe_cache;             /* streamed MoE: experts per layer (0: n_expert_used) */
    int kv_k, kv_v;            /* the asked KV cache types (ggml ids), the KV step's start */
} plan_ctx;

static uint64_t plan_peak(const cinfer_plan *p) {
    uint64_t run = p->kv_cache_bytes + p->state_bytes + p->arena_bytes + p->scratch_bytes + p->logits_bytes;
    return p->runtime_bytes + p->code_bytes + p->tokenizer_bytes + p->compiler_bytes + p->weights_bytes +
           (p->load_bytes > run ? p->load_bytes : run);
}

/* The act_quant a session of this precision runs with by default (cinfer_session_new). */
static int default_act_quant(int precision) {
    int a = prec_act_quant(precision);
    return a >= 0 ? a : 1;
}

/* <arch>.expert_used_count, 0 when absent. */
static int expert_used_count(const gguf_file *g) {
    gguf_str arch;
    char key[96], e[256];
    uint32_t k = 0;
    if (gguf_get_str(g, "general.architecture", &arch, e, sizeof e)) return 0;
    snprintf(key, sizeof key, "%.*s.expert_used_count", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
    return gguf_find_key(g, key) >= 0 && !gguf_get_u32(g, key, &k, e, sizeof e) ? (int)k : 0;
}

/* Fill *p for the module desc at n_ctx. */
static int plan_fill(plan_ctx *L, const cf_model_desc *d, int precision, int n_ctx, int kv_k, int kv_v,
                     cinfer_plan *p, char *e, size_t el) {
    memplan_parts parts;
    if (eng_kv_types_check(d, kv_k, kv_v, e, el)) return CINFER_EARG;
    if (memplan_parts_of(L->g, d, n_ctx, L->n_threads, default_act_quant(precision), kv_k, kv_v, &parts, e, el))
        return CINFER_EFORMAT;
    memset(p, 0, sizeof *p);
    p->cache_type_k = kv_from_ggml(kv_k);
    p->cache_type_v = kv_from_ggml(kv_v);
    p->precision = precision;
    p->n_ctx = memplan_n_ctx(d, n_ctx);
    p->n_threads = L->n_threads > 0 ? L->n_threads : pool_default_threads();
    p->n_weight_kinds = parts.n_kinds;
    for (int k = 0; k < parts.n_kinds; k++)
        p->weights[k] = (cinfer_plan_weights){parts.kinds[k].type, ggml_type_name((uint32_t)parts.kinds[k].type),
                                              parts.kinds[k].mapped, parts.kinds[k].n_tensors,
                                              parts.kinds[k].bytes};
    p->weights_bytes = parts.weights_bytes;
    if (L->stream) { /* resident: what lies outside layers, and the window of layers */
        uint64_t layer_max, in_layers, global;
        stream_layer_bytes(L->g, d, &layer_max, &in_layers, &global);
        int ahead = L->stream_ahead > 0 ? L->stream_ahead : 1;
        /* the layer being read, `ahead` being read ahead, and the one behind
         * until the helper has dropped it */
        uint64_t window = (uint64_t)(ahead + 2 < d->n_layer ? ahead + 2 : d->n_layer) * layer_max;
        p->streamed_bytes = in_layers;
        p->weights_bytes = parts.weights_bytes - in_layers + (window < in_layers ? window : in_layers);
        /* expert tensors: the LRU's experts in every MoE layer (stream.h) */
        uint64_t per_expert, experts;
        int n_expert, n_moe;
        stream_expert_bytes(L->g, d, &per_expert, &n_expert, &n_moe, &experts);
        if (experts) {
            int cap = L->moe_cache > 0 ? L->moe_cache : expert_used_count(L->g);
            if (cap < 1) cap = 1;
            if (cap > n_expert) cap = n_expert;
            p->moe_cache_experts = cap;
            p->moe_cache_bytes = (uint64_t)n_moe * (uint64_t)cap * per_expert;
            p->streamed_bytes += experts;
            p->weights_bytes = p->weights_bytes - experts + p->moe_cache_bytes;
        }
    }
    p->embd_bytes = parts.embd_bytes;
    p->load_bytes = parts.load_bytes;
    p->kv_cache_bytes = parts.kv_bytes;
    p->arena_bytes = parts.arena_bytes;
    p->scratch_bytes = parts.scratch_bytes;
    p->logits_bytes = parts.logits_bytes;
    p->state_bytes = parts.state_bytes;
    p->tokenizer_bytes = L->tokenizer_bytes;
    p->compiler_bytes = L->compiler_bytes;
    p->runtime_bytes = L->runtime_bytes;
    p->code_bytes = L->code_bytes;
    p->peak_bytes = plan_peak(p);
    return 0;
}

/* Compile for precision (measuring the first compile) into *mod. */
static int plan_compile(plan_ctx *L, int precision, cc_module **mod, char *e, size_t el) {
    cc_options co = L->co;
    co.precision = precision;
    uint64_t before = memplan_rss_now();
    if (L->mc->build(L->g, &co, mod, e, el))
        return strstr(e, "not supported") || strstr(e, "no CPU kernel") ? CINFER_EUNSUPPORTED
                                                                        : CINFER_ECOMPILE;
    if (!L->compiled) {
        uint64_t after = memplan_rss_now();
        L->compiler_bytes = after > before ? after - before : 0;
        L->code_bytes = memplan_code_unrun();
        L->compiled = 1;
    }
    return 0;
}

static void step_line(char *steps, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void step_line(char *steps, size_t cap, const char *fmt, ...) {
    if (!steps || !cap) return;
    size_t n = strlen(steps);
    if (n && n + 1 < cap) steps[n++] = '\n', steps[n] = 0;
    va_list ap;
    va_start(ap, fmt);
    if (n < cap) vsnprintf(steps + n, cap - n, fmt, ap);
    va_end(ap);
}

#define MIB(b) ((double)(b) / 1048576.0)

/* A streamed plan *p fits mem with room left: spend it on more experts in
 * the LRU (when L->moe_cache does not fix their number), then, once every
 * expert fits, on keeping the first layers resident (stream.h). */
static void plan_stream_room(const plan_ctx *L, const cf_model_desc *d, uint64_t mem, cinfer_plan *p) {
    uint64_t layer_max, in_layers, global, per_expert, experts;
    int n_expert, n_moe;
    stream_layer_bytes(L->g, d, &layer_max, &in_layers, &global);
    stream_expert_bytes(L->g, d, &per_expert, &n_expert, &n_moe, &experts);
    uint64_t room = mem > p->peak_bytes ? mem - p->peak_bytes : 0;
    if (experts && L->moe_cache <= 0 && p->moe_cache_experts < n_expert) {
        uint64_t one = (uint64_t)n_moe * per_expert; /* one more expert in every MoE layer */
        uint64_t more = room / one;
        if (more > (uint64_t)(n_expert - p->moe_cache_experts)) more = (uint64_t)(n_expert - p->moe_cache_experts);
        p->moe_cache_experts += (int)more;
        p->moe_cache_bytes += more * one;
        p->weights_bytes += more * one;
        p->peak_bytes += more * one;
        room -= more * one;
    }
    if (experts && p->moe_cache_experts < n_expert) return; /* dense layers kept only when every expert is */
    int keep = 0;
    if (layer_max) keep = (int)(room / layer_max < 1u << 20 ? room / layer_max : 1u << 20);
    if (keep > d->n_layer) keep = d->n_layer;
    p->weights_bytes += (uint64_t)keep * layer_max;
    p->peak_bytes += (uint64_t)keep * layer_max;
    p->stream_keep = keep;
}

/* The ladder (docs/memory.md): the asked precision, then int8, int4mix,
 * int4 — a rung only when its weights are smaller than the last rung's —
 * then halve the context down to PLAN_MIN_CTX.  mem == 0: the first plan.
 * *mod (may be NULL) receives the chosen rung's module; the others are freed.
 * CINFER_ENOMEM when nothing fits: *out holds the smallest plan. */
#define PLAN_MIN_CTX 128
static int plan_ladder(plan_ctx *L, int precision, int n_ctx, uint64_t mem, cinfer_plan *out,
                       cc_module **mod, char *steps, size_t steps_cap, char *err, size_t err_len) {
    char e[1024];
    static const int rungs[] = {CINFER_PRECISION_INT8, CINFER_PRECISION_INT4MIX, CINFER_PRECISION_INT4};
    if (steps && steps_cap) steps[0] = 0;
    cc_module *cur = NULL;
    int rc = plan_compile(L, precision, &cur, e, sizeof e);
    if (!rc) rc = plan_fill(L, cur->desc, precision, n_ctx, L->kv_k, L->kv_v, out, e, sizeof e);
    if (rc) {
        if (cur) L->mc->free(cur);
        return fail(err, err_len, rc, "%s", e);
    }
    out->mem_bytes = mem;
    for (size_t r = 0; mem && out->peak_bytes > mem && !L->fixed && r < sizeof rungs / sizeof *rungs; r++) {
        if (rungs[r] == out->precision) continue;
        cc_module *next = NULL;
        cinfer_plan p;
        if (plan_compile(L, rungs[r], &next, e, sizeof e) ||
            plan_fill(L, next->desc, rungs[r], n_ctx, L->kv_k, L->kv_v, &p, e, sizeof e)) {
            if (next) L->mc->free(next);
            continue; /* a precision this model cannot take is no step */
        }
        if (p.weights_bytes >= out->weights_bytes) {
            L->mc->free(next);
            continue;
        }
        p.mem_bytes = mem;
        step_line(steps, steps_cap, "precision %s -> %s: peak %.1f MiB > budget %.1f MiB (weights %.1f -> %.1f MiB)",
                  prec_name(out->precision), prec_name(p.precision), MIB(out->peak_bytes), MIB(mem),
                  MIB(out->weights_bytes), MIB(p.weights_bytes));
        L->mc->free(cur);
        cur = next;
        *out = p;
    }
    /* the KV step: both caches to F16, then Q8_0, then Q4_0, each type only
     * where it is smaller than the current one */
    static const int kv_rungs[] = {CF_F16, CF_Q8_0, CF_Q4_0};
    for (size_t r = 0; mem && out->peak_bytes > mem && r < sizeof kv_rungs / sizeof *kv_rungs; r++) {
        const int ck = kv_ggml[out->cache_type_k], cv = kv_ggml[out->cache_type_v];
        const int nk = kern_kv_row_bytes(kv_rungs[r], 32) < kern_kv_row_bytes(ck, 32) ? kv_rungs[r] : ck;
        const int nv = kern_kv_row_bytes(kv_rungs[r], 32) < kern_kv_row_bytes(cv, 32) ? kv_rungs[r] : cv;
        if (nk == ck && nv == cv) continue;
        cinfer_plan p;
        if (plan_fill(L, cur->desc, out->precision, out->n_ctx, nk, nv, &p, e, sizeof e)) {
            step_line(steps, steps_cap, "KV cache %s/%s -> %s/%s: not for this model (%s)", eng_kv_type_name(ck),
                      eng_kv_type_name(cv), eng_kv_type_name(nk), eng_kv_type_name(nv), e);
            break; /* the smaller types need the same whole blocks */
        }
        p.mem_bytes = mem;
        step_line(steps, steps_cap, "KV cache %s/%s -> %s/%s: peak %.1f MiB > budget %.1f MiB (KV cache %.1f -> "
                  "%.1f MiB)", eng_kv_type_name(ck), eng_kv_type_name(cv), eng_kv_type_name(nk),
                  eng_kv_type_name(nv), MIB(out->peak_bytes), MIB(mem), MIB(out->kv_cache_bytes),
                  MIB(p.kv_cache_bytes));
        *out = p;
    }
    while (mem && out->peak_bytes > mem && out->n_ctx > PLAN_MIN_CTX) {
        int half = out->n_ctx / 2 > PLAN_MIN_CTX ? out->n_ctx / 2 : PLAN_MIN_CTX;
        cinfer_plan p;
        if (plan_fill(L, cur->desc, out->precision, half, kv_ggml[out->cache_type_k], kv_ggml[out->cache_type_v],
                      &p, e, sizeof e))
            break;
        p.mem_bytes = mem;
        step_line(steps, steps_cap, "context %d -> %d: peak %.1f MiB > budget %.1f MiB (KV cache %.1f -> %.1f MiB)",
                  out->n_ctx, half, MIB(out->peak_bytes), MIB(mem), MIB(out->kv_cache_bytes),
                  MIB(p.kv_cache_bytes));
        *out = p;
    }
    if (mem && out->peak_bytes > mem) {
        char text[2048];
        cinfer_plan_format(out, text, sizeof text);
        L->mc->free(cur);
        char line[2048], *w = line; /* one line: parts joined by "; ", runs of spaces squeezed */
        for (const char *c = text; *c && w < line + sizeof line - 3; c++) {
            if (*c == '\n') *w++ = ';', *w++ = ' ';
            else if (*c != ' ' || (w > line && w[-1] != ' ')) *w++ = *c;
        }
        *w = 0;
        memcpy(text, line, (size_t)(w - line) + 1);
        return fail(err, err_len, CINFER_ENOMEM,
                    "budget %.1f MiB: nothing fits; the smallest plan (%s, KV %s/%s, %d positions) needs %.1f MiB: %s",
                    MIB(mem), prec_name(out->precision), cinfer_kv_type_name(out->cache_type_k),
                    cinfer_kv_type_name(out->cache_type_v), out->n_ctx, MIB(out->peak_bytes), text);
    }
    if (mod) *mod = cur;
    else L->mc->free(cur);
    return 0;
}

void cinfer_plan_format(const cinfer_plan *p, char *buf, size_t cap) {
    if (!buf || !cap) return;
    buf[0] = 0;
    size_t n = 0;
#define PUT(...) do { if (n < cap) { int k_ = snprintf(buf + n, cap - n, __VA_ARGS__); \
                                     if (k_ > 0) n += (size_t)k_; } } while (0)
    PUT("precision %s, n_ctx %d, %d threads\n", prec_name(p->precision), p->n_ctx, p->n_threads);
    for (int k = 0; k < p->n_weight_kinds; k++)
        PUT("weights    %-8s %-9s %4d tensors %10.1f MiB\n", p->weights[k].type_name,
            p->weights[k].mapped ? "mapped" : "converted", p->weights[k].n_tensors, MIB(p->weights[k].bytes));
    if (p->embd_bytes) PUT("  (token_embd read by row: %.1f MiB of that at n_ctx)\n", MIB(p->embd_bytes));
    if (p->streamed_bytes)
        PUT("  (streamed: %.1f MiB of layers, a window of them%s resident)\n", MIB(p->streamed_bytes),
            p->stream_keep ? " and the first ones" : "");
    if (p->stream_keep) PUT("  (the first %d layers stay resident: the budget has room)\n", p->stream_keep);
    if (p->moe_cache_experts)
        PUT("  (experts: %d per layer mapped by the LRU, %.1f MiB of that)\n", p->moe_cache_experts,
            MIB(p->moe_cache_bytes));
    PUT("weights    total %31.1f MiB\n", MIB(p->weights_bytes));
    if (p->load_bytes) PUT("load       sources in flight %19.1f MiB\n", MIB(p->load_bytes));
    PUT("kv cache   K %-4s V %-4s %6d positions %8.1f MiB\n", cinfer_kv_type_name(p->cache_type_k),
        cinfer_kv_type_name(p->cache_type_v), p->n_ctx, MIB(p->kv_cache_bytes));
    if (p->state_bytes) PUT("state      recurrent, + snapshots %15.1f MiB\n", MIB(p->state_bytes));
    PUT("arena      activations %25.1f MiB\n", MIB(p->arena_bytes));
    PUT("scratch    %2d threads %26.1f MiB\n", p->n_threads, MIB(p->scratch_bytes));
    PUT("logits     and token history %19.1f MiB\n", MIB(p->logits_bytes));
    PUT("tokenizer  measured %28.1f MiB\n", MIB(p->tokenizer_bytes));
    PUT("compiler   measured %28.1f MiB\n", MIB(p->compiler_bytes));
    PUT("runtime    measured %28.1f MiB\n", MIB(p->runtime_bytes));
    PUT("code       not run yet, measured %18.1f MiB\n", MIB(p->code_bytes));
    PUT("peak %44.1f MiB", MIB(p->peak_bytes));
    if (p->mem_bytes) PUT(" (budget %.1f MiB)", MIB(p->mem_bytes));
#undef PUT
}

int cinfer_plan_model(const char *path, const cinfer_plan_options *opts, cinfer_plan *out,
                      char *steps, size_t steps_cap, char *err, size_t err_len) {
    static const model_compiler mc = {cc_build, cc_module_free};
    cinfer_plan_options o = opts ? *opts : (cinfer_plan_options){0};
    char e[1024];
    if (steps && steps_cap) steps[0] = 0;
    memset(out, 0, sizeof *out);
    if (o.precision < 0 || o.precision >= CINFER_PRECISION_COUNT || o.n_ctx < 0 || o.n_threads < 0)
        return fail(err, err_len, CINFER_EARG, "plan options: precision %d (0..%d), n_ctx %d, n_threads %d (>= 0)",
                    o.precision, CINFER_PRECISION_COUNT - 1, o.n_ctx, o.n_threads);
    plan_ctx L = {.mc = &mc, .n_threads = o.n_threads, .stream = o.stream_weights != 0,
                  .stream_ahead = o.stream_ahead, .moe_cache = o.moe_cache_experts, .fixed = o.stream_weights != 0,
                  .co = {.mode = CC_JIT, .archspec_path = o.archspec_path},
                  .kv_k = kv_resolve(o.cache_type_k, KV_DEFAULT_CPU), .kv_v = kv_resolve(o.cache_type_v, KV_DEFAULT_CPU)};
    if (L.kv_k < 0 || L.kv_v < 0)
        return fail(err, err_len, CINFER_EARG, "plan: cache types %d/%d: expected CINFER_KV_* (0..%d)",
                    o.cache_type_k, o.cache_type_v, CINFER_KV_COUNT - 1);
    if (o.stream_weights && o.precision != CINFER_PRECISION_AUTO && o.precision != CINFER_PRECISION_NATIVE)
        return fail(err, err_len, CINFER_EARG, "streamed weights are computed from the file mapping: precision %s "
                    "cannot stream (only native, or a .giw)", prec_name(o.precision));
    if (o.stream_weights && o.precision == CINFER_PRECISION_AUTO) o.precision = CINFER_PRECISION_NATIVE;
    L.runtime_bytes = memplan_rss_now();
    const uint64_t anon0 = memplan_anon_now();
    gguf_file *g = NULL;
    tok_vocab *v = NULL;
    int rc = modelfile_open(path, &g, e, sizeof e);
    if (rc) return fail(err, err_len, gguf_code(rc), "%s", e);
    if (tok_load_gguf(g, &v, e, sizeof e)) {
        gguf_close(g);
        return fail(err, err_len, CINFER_EUNSUPPORTED, "%s", e);
    }
    uint64_t after = memplan_anon_now();
    /* the vocabulary's tables, and the header pages its strings live in */
    L.tokenizer_bytes = (after > anon0 ? after - anon0 : 0) + gguf_data_offset(g);
    L.g = g;
    int giw_prec = giw_precision(g, e, sizeof e);
    if (giw_prec == -2) rc = fail(err, err_len, CINFER_EFORMAT, "%s: %s", path, e);
    else if (giw_prec >= 0 && o.precision != CINFER_PRECISION_AUTO && o.precision != giw_prec)
        rc = fail(err, err_len, CINFER_EARG, "%s holds %s weights (a .giw); it cannot run as %s",
                  path, prec_name(giw_prec), prec_name(o.precision));
    else {
        if (giw_prec >= 0) o.precision = giw_prec, L.fixed = 1;
        else if (o.stream_weights) o.precision = CINFER_PRECISION_NATIVE;
        rc = plan_ladder(&L, o.precision, o.n_ctx, o.mem_bytes, out, NULL, steps, steps_cap, err, err_len);
        if (!rc && o.stream_weights && o.mem_bytes) {
            cc_module *mod = NULL; /* the ladder freed its module: the desc again (compiled, cached) */
            if (!plan_compile(&L, out->precision, &mod, e, sizeof e)) {
                plan_stream_room(&L, mod->desc, o.mem_bytes, out);
                L.mc->free(mod);
            }
        }
    }
    tok_free(v);
    gguf_close(g);
    return rc;
}

int cinfer_model_moe_stats(const cinfer_model *m, int *cache_experts, uint64_t *hits, uint64_t *misses,
                           uint64_t *evictions) {
    if (!m->em.stream) return CINFER_EARG;
    stream_stats st;
    stream_get_stats(m->em.stream, &st);
    if (!st.n_expert) return CINFER_EARG;
    *cache_experts = st.moe_cache;
    *hits = st.expert_hits;
    *misses = st.expert_misses;
    *evictions = st.expert_evictions;
    return 0;
}

int cinfer_model_stream_stats(const cinfer_model *m, uint64_t *read_ahead_bytes, uint64_t *dropped_bytes) {
    if (!m->em.stream) return CINFER_EARG;
    stream_stats st;
    stream_get_stats(m->em.stream, &st);
    if (read_ahead_bytes) *read_ahead_bytes = st.populated_bytes;
    if (dropped_bytes) *dropped_bytes = st.dropped_bytes;
    return 0;
}

int cinfer_model_budget(const cinfer_model *m, cinfer_plan *plan, const char **steps) {
    if (!m->has_budget) return CINFER_EARG;
    if (plan) *plan = m->budget;
    if (steps) *steps = m->budget_steps;
    return 0;
}

/* Shared by both open functions: linked == NULL compiles the forward pass. */
static void free_linked(cc_module *m) { free(m); }

static int model_open(const char *path, model_reader reader, uint64_t offset, uint64_t n_bytes,
                      const cinfer_model_options *opts, const model_compiler *mc,
                      const cf_model_desc *(*describe)(void), void (*forward)(cf_env *),
                      cinfer_model **out, char *err, size_t err_len) {
    char e[1024];
    *out = NULL;
    cinfer_model_options o = opts ? *opts : (cinfer_model_options){0};
    const uint64_t rss_start = memplan_rss_now(), anon_start = memplan_anon_now();
    int stream_keep = 0; /* streamed layers the budget keeps resident */
    int moe_cache = o.moe_cache_experts; /* streamed MoE: experts per layer the LRU keeps */
    cinfer_model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    pthread_mutex_init(&m->gv_lock, NULL);
    m->mod_free = mc ? mc->free : free_linked;
    int rc = reader(path, offset, n_bytes, &m->g, e, sizeof e);
    if (rc) {
        free(m);
        return fail(err, err_len, gguf_code(rc), "%s", e);
    }
    gguf_str arch;
    if (gguf_get_str(m->g, "general.architecture", &arch, e, sizeof e)) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s", e);
        goto bad;
    }
    snprintf(m->arch, sizeof m->arch, "%.*s", (int)(arch.len < 63 ? arch.len : 63), arch.ptr);
    if (tok_load_gguf(m->g, &m->vocab, e, sizeof e)) {
        rc = fail(err, err_len, CINFER_EUNSUPPORTED, "%s", e);
        goto bad;
    }
    if (!(m->path = strdup(path))) {
        rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
        goto bad;
    }
    model_facts(m);
    if (o.precision < 0 || o.precision >= CINFER_PRECISION_COUNT) {
        rc = fail(err, err_len, CINFER_EARG, "precision %d: expected CINFER_PRECISION_* (0..%d)",
                  o.precision, CINFER_PRECISION_COUNT - 1);
        goto bad;
    }
    /* A .giw says what it holds; it can only run in that precision. */
    int giw_prec = giw_precision(m->g, e, sizeof e);
    if (giw_prec == -2) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: %s", path, e);
        goto bad;
    }
    if (giw_prec >= 0) {
        if (o.precision != CINFER_PRECISION_AUTO && o.precision != giw_prec) {
            rc = fail(err, err_len, CINFER_EARG, "%s holds %s weights (a .giw); it cannot run as %s: "
                      "use the source GGUF", path, cinfer_precision_name(giw_prec),
                      cinfer_precision_name(o.precision));
            goto bad;
        }
        o.precision = giw_prec;
    } else if (o.stream_weights) {
        if (o.precision != CINFER_PRECISION_AUTO && o.precision != CINFER_PRECISION_NATIVE) {
            rc = fail(err, err_len, CINFER_EARG, "%s: streaming computes from the file mapping: precision %s "
                      "cannot stream (native, or a .giw saved in it)", path, cinfer_precision_name(o.precision));
            goto bad;
        }
        o.precision = CINFER_PRECISION_NATIVE;
    }
    m->precision = o.precision;
    snprintf(m->device, sizeof m->device, "cpu");
    if (o.device != CINFER_DEVICE_CPU && o.device != CINFER_DEVICE_CUDA) {
        rc = fail(err, err_len, CINFER_EARG, "device %d: expected CINFER_DEVICE_CPU (0) or CINFER_DEVICE_CUDA (1)",
                  o.device);
        goto bad;
    }
    m->kv_type_k = kv_resolve(o.cache_type_k, o.device == CINFER_DEVICE_CUDA ? KV_DEFAULT_CUDA : KV_DEFAULT_CPU);
    m->kv_type_v = kv_resolve(o.cache_type_v, o.device == CINFER_DEVICE_CUDA ? KV_DEFAULT_CUDA : KV_DEFAULT_CPU);
    if (m->kv_type_k < 0 || m->kv_type_v < 0) {
        rc = fail(err, err_len, CINFER_EARG, "cache types %d/%d (K/V): expected CINFER_KV_* (0..%d)",
                  o.cache_type_k, o.cache_type_v, CINFER_KV_COUNT - 1);
        goto bad;
    }
    if (o.device == CINFER_DEVICE_CUDA && (m->kv_type_k != CF_F32 || m->kv_type_v != CF_F32)) {
        rc = fail(err, err_len, CINFER_EARG, "--device cuda keeps its KV cache in f32: cache type %s (K) / %s (V) "
                  "runs on the CPU only; drop --cache-type-k/-v", eng_kv_type_name(m->kv_type_k),
                  eng_kv_type_name(m->kv_type_v));
        goto bad;
    }
    if (o.device == CINFER_DEVICE_CUDA) {
        /* both are CPU-memory features: the plan measures this process, streaming maps the file */
        if (o.stream_weights) {
            rc = fail(err, err_len, CINFER_EARG, "--device cuda: --stream-weights streams CPU weights from the file "
                      "mapping; the GPU holds every weight in device memory, drop one of them");
            goto bad;
        }
        if (o.mem_bytes) {
            rc = fail(err, err_len, CINFER_EARG, "--device cuda: --mem plans CPU memory (precision, then context); "
                      "the GPU's weights and KV cache are not planned, drop one of them");
            goto bad;
        }
        if (describe) {
            rc = fail(err, err_len, CINFER_EUNSUPPORTED, "--device cuda: a program with a linked forward pass runs "
                      "on the CPU; use cinfer run MODEL --device cuda");
            goto bad;
        }
        if (giw_prec >= 0) {
            rc = fail(err, err_len, CINFER_EUNSUPPORTED, "--device cuda: %s holds repacked CPU weights (a .giw); "
                      "open the source GGUF", path);
            goto bad;
        }
        if (o.compile == CINFER_AOT) {
            rc = fail(err, err_len, CINFER_EARG, "--aot builds the CPU forward pass; --device cuda compiles its kernels "
                      "with NVRTC (cached), drop --aot");
            goto bad;
        }
        if (cuda_open(o.device_index, &m->gpu, e, sizeof e)) {
            rc = fail(err, err_len, CINFER_EUNSUPPORTED, "--device cuda: %s", e);
            goto bad;
        }
        m->precision = CINFER_PRECISION_NATIVE; /* the GGUF types: the kernels decode them */
        const cuda_dev *d = m->gpu;
        snprintf(m->device, sizeof m->device, "cuda:%d %s (sm_%d%d, %.1f GiB, driver %d.%d, NVRTC %d.%d)",
                 d->ordinal, d->name, d->cc_major, d->cc_minor, d->total_bytes / 1073741824.0,
                 d->driver_version / 1000, d->driver_version % 1000 / 10, d->nvrtc_major, d->nvrtc_minor);
    }
    cc_options co = {.mode = o.compile == CINFER_AOT ? CC_AOT : CC_JIT,
                     .archspec_path = o.archspec_path, .verbose = o.verbose,
                     .precision = o.precision, .device = m->gpu ? CC_DEVICE_CUDA : CC_DEVICE_CPU,
                     .cuda = m->gpu};
    if (describe) {
        char fp[17];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)gguf_fingerprint(m->g));
        if (strcmp(fp, describe()->fingerprint)) {
            rc = fail(err, err_len, CINFER_EFORMAT,
                      "%s: this program was compiled for model fingerprint %s, the file has %s",
                      path, describe()->fingerprint, fp);
            goto bad;
        }
        m->mod = calloc(1, sizeof *m->mod);
        if (!m->mod) {
            rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
            goto bad;
        }
        m->mod->desc = describe();
        m->mod->forward = forward;
    } else if (o.mem_bytes) {
        if (o.n_ctx < 0 || o.n_threads < 0) {
            rc = fail(err, err_len, CINFER_EARG, "budget: n_ctx %d and n_threads %d must be >= 0",
                      o.n_ctx, o.n_threads);
            goto bad;
        }
        uint64_t now = memplan_anon_now();
        plan_ctx L = {.g = m->g, .mc = mc, .co = co, .fixed = giw_prec >= 0 || o.stream_weights,
                      .n_threads = o.n_threads, .stream = o.stream_weights != 0, .stream_ahead = o.stream_ahead,
                      .moe_cache = moe_cache, .runtime_bytes = rss_start,
                      .tokenizer_bytes = (now > anon_start ? now - anon_start : 0) + gguf_data_offset(m->g),
                      .kv_k = m->kv_type_k, .kv_v = m->kv_type_v};
        rc = plan_ladder(&L, o.precision, o.n_ctx, o.mem_bytes, &m->budget, &m->mod, m->budget_steps,
                         sizeof m->budget_steps, err, err_len);
        if (rc) goto bad;
        if (o.stream_weights) {
            plan_stream_room(&L, m->mod->desc, o.mem_bytes, &m->budget);
            stream_keep = m->budget.stream_keep;
            if (m->budget.moe_cache_experts) moe_cache = m->budget.moe_cache_experts;
        }
        m->has_budget = 1;
        m->precision = m->budget.precision;
        m->kv_type_k = kv_ggml[m->budget.cache_type_k];
        m->kv_type_v = kv_ggml[m->budget.cache_type_v];
    } else if (mc->build(m->g, &co, &m->mod, e, sizeof e)) {
        rc = fail(err, err_len, strstr(e, "not supported") || strstr(e, "no CPU kernel")
                                    ? CINFER_EUNSUPPORTED : CINFER_ECOMPILE, "%s", e);
        goto bad;
    }
    if (!m->gpu && eng_kv_types_check(m->mod->desc, m->kv_type_k, m->kv_type_v, e, sizeof e)) {
        rc = fail(err, err_len, CINFER_EARG, "%s: %s", path, e);
        goto bad;
    }
    /* ... and holds every weight in the type that precision computes with */
    if (giw_prec >= 0 && giw_check_bound(m->g, m->mod->desc, giw_prec, e, sizeof e)) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: %s", path, e);
        goto bad;
    }
    if (m->gpu) {
        if (eng_model_bind_cuda(&m->em, m->g, m->mod->desc, m->mod->cuda_forward, &m->mod->cuda_image, m->gpu, e,
                                sizeof e)) {
            rc = fail(err, err_len, strstr(e, "OUT_OF_MEMORY") ? CINFER_ENOMEM : CINFER_ECOMPILE, "--device cuda: %s",
                      e);
            goto bad;
        }
        if (o.verbose)
            fprintf(stderr, "cinfer: %s: %.1f MiB of weights uploaded, kernels from %s (%s)\n", m->device,
                    ecu_model_weight_bytes(m->em.cuda) / 1048576.0, m->mod->cuda_path, m->mod->cuda_image.arch);
    } else if (o.stream_weights ? eng_model_bind_streamed(&m->em, m->g, m->mod->desc, m->mod->forward,
                                                          o.stream_ahead, stream_keep, moe_cache, e, sizeof e)
                                : eng_model_bind_threads(&m->em, m->g, m->mod->desc, m->mod->forward, 0,
                                                         o.progress ? repack_progress : NULL, &o, e, sizeof e)) {
        rc = fail(err, err_len, strstr(e, "out of memory") ? CINFER_ENOMEM : CINFER_EFORMAT, "%s", e);
        goto bad;
    }
    if (o.verbose && m->em.n_repacked)
        fprintf(stderr, "cinfer: %s: repacked %d tensors, %.1f MiB in %.1f ms\n",
                cinfer_precision_name(m->precision), m->em.n_repacked,
                m->em.repacked_bytes / 1048576.0, m->em.repack_ms);
    if (tok_n_vocab(m->vocab) != m->mod->desc->n_vocab) {
        rc = fail(err, err_len, CINFER_EFORMAT, "tokenizer has %d tokens, the output layer %d",
                  tok_n_vocab(m->vocab), m->mod->desc->n_vocab);
        goto bad;
    }
    /* A missing or unparsable chat template only matters to chat calls. */
    if (chat_template_from_gguf(m->g, &m->chat, m->chat_err, sizeof m->chat_err)) m->chat = NULL;
    if (!(m->no_penalty = calloc((size_t)tok_n_vocab(m->vocab), 1))) {
        rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
        goto bad;
    }
    for (int32_t id = 0; id < tok_n_vocab(m->vocab); id++)
        m->no_penalty[id] = tok_is_eog(m->vocab, id) || (tok_attr(m->vocab, id) & TOK_ATTR_CONTROL);
    *out = m;
    return 0;
bad:
    cinfer_model_close(m);
    return rc;
}

int cinfer_model_open(const char *path, const cinfer_model_options *opts, cinfer_model **out,
                      char *err, size_t err_len) {
    static const model_compiler mc = {cc_build, cc_module_free};
    return model_open(path, read_any, 0, 0, opts, &mc, NULL, NULL, out, err, err_len);
}

int cinfer_model_open_linked(const char *path, const cf_model_desc *(*describe)(void),
                             void (*forward)(cf_env *), cinfer_model **out, char *err,
                             size_t err_len) {
    return model_open(path, read_any, 0, 0, NULL, NULL, describe, forward, out, err, err_len);
}

int cinfer_model_open_linked_at(const char *path, uint64_t offset, uint64_t n_bytes,
                                const cf_model_desc *(*describe)(void), void (*forward)(cf_env *),
                                cinfer_model **out, char *err, size_t err_len) {
    if (n_bytes == 0) return fail(err, err_len, CINFER_EARG, "%s: empty GGUF range", path);
    return model_open(path, read_range, offset, n_bytes, NULL, NULL, describe, forward, out, err, err_len);
}

void cinfer_model_close(cinfer_model *m) {
    if (!m) return;
    free(m->path);
    free(m->no_penalty);
    chat_template_free(m->chat);
    eng_model_release(&m->em);
    if (m->mod) m->mod_free(m->mod);
    cuda_close(m->gpu); /* after everything that lives on it */
    tok_free(m->vocab);
    gguf_close(m->g);
    gram_vocab_free(m->gv);
    pthread_mutex_destroy(&m->gv_lock);
    free(m);
}

/* The grammar module's token trie (gram.h); the model is otherwise read-only,
 * so the lazily built cache takes a lock. */
static const gram_vocab *api_gram_vocab(const cinfer_model *cm) {
    cinfer_model *m = (cinfer_model *)cm;
    pthread_mutex_lock(&m->gv_lock);
    if (!m->gv && gram_vocab_new(m->vocab, &m->gv)) m->gv = NULL;
    pthread_mutex_unlock(&m->gv_lock);
    return m->gv;
}

/* Compiling is the grammar module's; binding to this model's token trie is
 * the library's, since the trie lives with the model. */
int cinfer_grammar_from_schema(const cinfer_model *m, const char *schema, size_t len,
                               const cinfer_grammar_options *opts, cinfer_grammar **out, char *err,
                               size_t err_len) {
    char e[2048];
    if (!err) err = e, err_len = sizeof e;
    if (!out) return CINFER_EARG;
    *out = NULL;
    if (!schema) {
        snprintf(err, err_len, "schema is NULL");
        return CINFER_EARG;
    }
    const gram_vocab *gv = m ? api_gram_vocab(m) : NULL;
    if (m && !gv) {
        snprintf(err, err_len, "out of memory (token trie)");
        return CINFER_ENOMEM;
    }
    return gram_api_new(gv, schema, len, opts, out, err, err_len);
}

int cinfer_model_n_vocab(const cinfer_model *m) { return m->mod->desc->n_vocab; }
const char *cinfer_model_device(const cinfer_model *m) { return m->device; }
int cinfer_model_precision(const cinfer_model *m) { return m->precision; }

void cinfer_model_repack_stats(const cinfer_model *m, int *n_tensors, size_t *n_bytes, double *ms) {
    if (n_tensors) *n_tensors = m->em.n_repacked;
    if (n_bytes) *n_bytes = m->em.repacked_bytes;
    if (ms) *ms = m->em.repack_ms;
}

size_t cinfer_model_weight_types(const cinfer_model *m, char *buf, size_t buf_len) {
    const cf_model_desc *d = m->em.desc;
    enum { MAX_KINDS = 16 };
    typedef struct { int type, n; double bytes; } kind;
    kind k[MAX_KINDS];
    int nk = 0, tied = 1;
    for (int i = 0; i < d->n_weights; i++)
        if (!strcmp(d->weight_names[i], "output.weight")) tied = 0;
    for (int i = 0; i < d->n_weights; i++) {
        const long *ne = d->weight_shapes + 4L * i;
        /* norms and biases; an untied token_embd is only a lookup */
        if (ne[1] <= 1 || (!tied && !strcmp(d->weight_names[i], "token_embd.weight"))) continue;
        const int t = d->weight_types[i];
        int j = 0;
        while (j < nk && k[j].type != t) j++;
        if (j == nk) {
            if (nk == MAX_KINDS) continue;
            k[nk++] = (kind){t, 0, 0};
        }
        k[j].n++;
        k[j].bytes += (double)ggml_row_bytes((uint32_t)t, (uint64_t)ne[0]) * (double)ne[1] * (double)(ne[2] ? ne[2] : 1) *
                      (double)(ne[3] ? ne[3] : 1);
    }
    for (int a = 1; a < nk; a++) /* most bytes first */
        for (int b = a; b > 0 && k[b].bytes > k[b - 1].bytes; b--) {
            kind tmp = k[b];
            k[b] = k[b - 1];
            k[b - 1] = tmp;
        }
    size_t len = 0;
    if (buf && buf_len) buf[0] = 0;
    for (int j = 0; j < nk; j++) {
        const size_t room = buf && len < buf_len ? buf_len - len : 0;
        const int w = snprintf(room ? buf + len : NULL, room, "%s%s x%d", j ? ", " : "",
                               ggml_type_name((uint32_t)k[j].type), k[j].n);
        if (w > 0) len += (size_t)w;
    }
    return len;
}

const char *cinfer_precision_name(int p) { return prec_name(p); }
int cinfer_precision_from_name(const char *name) { return prec_from_name(name); }

int cinfer_model_save_giw(const cinfer_model *m, const char *path, char *err, size_t err_len) {
    char e[1024];
    int rc = giw_write(m->g, &m->em, cinfer_precision_name(m->precision), path, e, sizeof e);
    if (rc) return fail(err, err_len, CINFER_EIO, "%s", e);
    return 0;
}
int cinfer_model_n_ctx_train(const cinfer_model *m) { return m->mod->desc->n_ctx_train; }
const char *cinfer_model_notes(const cinfer_model *m) { return m->notes; }

void cinfer_model_get_info(const cinfer_model *m, cinfer_model_info *out) {
    const cf_model_desc *d = m->mod->desc;
    size_t tl = 0;
    *out = (cinfer_model_info){
        .path = m->path,
        .file_bytes = gguf_size(m->g),
        .n_params = m->n_params,
        .file_type = m->file_type,
        .fingerprint = gguf_fingerprint(m->g),
        .n_layer = d->n_layer,
        .n_embd = d->n_embd,
        .n_ctx_train = d->n_ctx_train,
        .n_vocab = d->n_vocab,
        .chat_template = m->chat ? chat_template_source(m->chat, &tl) : NULL,
        .name = m->name[0] ? m->name : NULL,
    };
}

/* One metadata value as JSON; arrays of more than 64 elements (the
 * tokenizer's tables) and nested arrays as null. */
static cJSON *meta_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        return cJSON_CreateNumber((double)v->v.u64);
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        return cJSON_CreateNumber((double)v->v.i64);
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64:
        return isfinite(v->v.f64) ? cJSON_CreateNumber(v->v.f64) : cJSON_CreateNull();
    case GGUF_VT_BOOL: return cJSON_CreateBool(v->v.b);
    case GGUF_VT_STRING: {
        char *t = strndup(v->v.str.ptr, (size_t)v->v.str.len);
        cJSON *s = cJSON_CreateString(t ? t : "");
        free(t);
        return s;
    }
    case GGUF_VT_ARRAY: {
        if (v->v.arr.n > 64 || v->v.arr.type == GGUF_VT_ARRAY) return cJSON_CreateNull();
        cJSON *a = cJSON_CreateArray();
        for (uint64_t i = 0; a && i < v->v.arr.n; i++) {
            gguf_value el;
            if (!gguf_arr_elem(v, i, &el)) cJSON_AddItemToArray(a, meta_value(&el));
        }
        return a;
    }
    default: return cJSON_CreateNull();
    }
}

char *cinfer_model_metadata_json(const cinfer_model *m) {
    cJSON *o = cJSON_CreateObject();
    for (uint64_t i = 0; o && i < gguf_n_kv(m->g); i++) {
        const gguf_kv *kv = gguf_kv_at(m->g, i);
        char *k = strndup(kv->key.ptr, (size_t)kv->key.len);
        if (k) cJSON_AddItemToObject(o, k, meta_value(&kv->value));
        free(k);
    }
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}
const char *cinfer_model_arch(const cinfer_model *m) { return m->arch; }
double cinfer_model_compile_ms(const cinfer_model *m) { return m->mod->compile_ms; }
int32_t cinfer_token_bos(const cinfer_model *m) { return tok_bos(m->vocab); }
int32_t cinfer_token_eos(const cinfer_model *m) { return tok_eos(m->vocab); }

/* ---- tokens ----------------------------------------------------------------- */

int cinfer_tokenize(const cinfer_model *m, const char *text, size_t len, int add_special,
                    int parse_special, int32_t *ids, size_t n_max, size_t *n_ids) {
    int rc = tok_encode(m->vocab, text, len, add_special != 0, parse_special != 0, ids, n_max, n_ids);
    return rc == 0 ? 0 : rc == TOK_ENOMEM ? CINFER_ENOMEM : CINFER_EARG;
}

int cinfer_token_text(const cinfer_model *m, int32_t id, char *buf, size_t cap) {
    int n = tok_decode_token(m->vocab, id, true, buf, cap);
    return n < 0 ? CINFER_EARG : n;
}

int cinfer_detokenize(const cinfer_model *m, const int32_t *ids, size_t n_ids, char *buf,
                      size_t cap, size_t *n_out) {
    int rc = tok_decode(m->vocab, ids, n_ids, 0, buf, cap, n_out);
    return rc == 0 ? 0 : CINFER_EARG;
}

/* ---- sessions ---------------------------------------------------------------- */

int cinfer_session_new(cinfer_model *m, const cinfer_session_options *opts,
                       cinfer_session **out, char *err, size_t err_len) {
    char e[512];
    *out = NULL;
    cinfer_session_options o = opts ? *opts : (cinfer_session_options){0};
    if (o.n_ctx < 0 || o.n_threads < 0)
        return fail(err, err_len, CINFER_EARG, "n_ctx and n_threads must be >= 0");
    if (m->has_budget) { /* the budget planned this context: never more, silently */
        if (o.n_ctx > m->budget.n_ctx)
            return fail(err, err_len, CINFER_EARG, "n_ctx %d: the memory budget (%.1f MiB) planned %d positions",
                        o.n_ctx, MIB(m->budget.mem_bytes), m->budget.n_ctx);
        if (o.n_ctx == 0) o.n_ctx = m->budget.n_ctx;
    }
    const int kv_k = kv_resolve(o.cache_type_k, m->kv_type_k), kv_v = kv_resolve(o.cache_type_v, m->kv_type_v);
    if (kv_k < 0 || kv_v < 0)
        return fail(err, err_len, CINFER_EARG, "cache types %d/%d (K/V): expected CINFER_KV_* (0..%d)",
                    o.cache_type_k, o.cache_type_v, CINFER_KV_COUNT - 1);
    if (m->gpu && (kv_k != CF_F32 || kv_v != CF_F32))
        return fail(err, err_len, CINFER_EARG, "--device cuda keeps its KV cache in f32: cache type %s/%s (K/V) "
                    "runs on the CPU only", eng_kv_type_name(kv_k), eng_kv_type_name(kv_v));
    if (m->has_budget && (kern_kv_row_bytes(kv_k, 32) > kern_kv_row_bytes(m->kv_type_k, 32) ||
                          kern_kv_row_bytes(kv_v, 32) > kern_kv_row_bytes(m->kv_type_v, 32)))
        return fail(err, err_len, CINFER_EARG, "cache types %s/%s: the memory budget (%.1f MiB) planned %s/%s (K/V)",
                    eng_kv_type_name(kv_k), eng_kv_type_name(kv_v), MIB(m->budget.mem_bytes),
                    eng_kv_type_name(m->kv_type_k), eng_kv_type_name(m->kv_type_v));
    if (o.activations < CINFER_ACT_DEFAULT || o.activations > CINFER_ACT_Q8)
        return fail(err, err_len, CINFER_EARG, "activations %d: expected CINFER_ACT_F32 (1), "
                    "CINFER_ACT_Q8 (2) or 0 (default)", o.activations);
    /* default: the precision's own mode (int8 and f32: f32 activations), and
     * for native Q8 (measured faster) */
    const int prec_act = prec_act_quant(m->precision);
    const int act_quant = o.activations == CINFER_ACT_DEFAULT && prec_act >= 0
                              ? prec_act : o.activations != CINFER_ACT_F32;
    cinfer_session *s = calloc(1, sizeof *s);
    if (!s) return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    s->m = m;
    s->progress = o.progress;
    s->progress_user = o.progress_user;
    if (o.n_state_snapshots < 0 || o.n_state_snapshots > ENG_MAX_SNAPSHOTS) {
        free(s);
        return fail(err, err_len, CINFER_EARG, "n_state_snapshots %d: expected 0..%d",
                    o.n_state_snapshots, ENG_MAX_SNAPSHOTS);
    }
    eng_ctx_opts eo = {.n_ctx = o.n_ctx, .n_threads = o.n_threads, .act_quant = act_quant,
                       .n_snapshots = o.n_state_snapshots, .kv_type_k = kv_k, .kv_type_v = kv_v};
    if (eng_kv_types_check(m->mod->desc, kv_k, kv_v, e, sizeof e)) {
        free(s);
        return fail(err, err_len, CINFER_EARG, "%s", e);
    }
    if (eng_ctx_open(&m->em, &eo, &s->ctx, e, sizeof e)) {
        free(s);
        return fail(err, err_len, CINFER_ENOMEM, "%s", e);
    }
    s->tokens = calloc((size_t)s->ctx->n_ctx, sizeof *s->tokens);
    s->logits_buf = calloc((size_t)m->mod->desc->n_vocab, sizeof(float));
    if (!s->tokens || !s->logits_buf || tok_stream_new(m->vocab, 0, &s->ts)) {
        cinfer_session_free(s);
        return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

void cinfer_session_free(cinfer_session *s) {
    if (!s) return;
    tok_stream_free(s->ts);
    free(s->logits_buf);
    free(s->tokens);
    eng_ctx_free(s->ctx);
    free(s);
}

void cinfer_session_reset(cinfer_session *s) {
    eng_truncate(s->ctx, 0);
    s->evaluated = 0;
}

int cinfer_session_n_ctx(const cinfer_session *s) { return s->ctx->n_ctx; }

void cinfer_session_cache_types(const cinfer_session *s, int *cache_type_k, int *cache_type_v) {
    if (cache_type_k) *cache_type_k = kv_from_ggml(s->ctx->kv_type_k);
    if (cache_type_v) *cache_type_v = kv_from_ggml(s->ctx->kv_type_v);
}
int cinfer_session_n_past(const cinfer_session *s) { return s->ctx->n_past; }
const int32_t *cinfer_session_tokens(const cinfer_session *s) { return s->tokens; }
const float *cinfer_logits(const cinfer_session *s) {
    return s->evaluated ? eng_logits(s->ctx) : NULL;
}

/* An encoder embeds; it has no output layer to generate or score with. */
static int no_logits(const cinfer_model *m, char *err, size_t err_len) {
    return fail(err, err_len, CINFER_EUNSUPPORTED,
                "%s is an embedding model (%s, an encoder): it has no logits to generate or score with; "
                "embed with cinfer_embed (cinfer serve: /v1/embeddings)", m->path, m->arch);
}

/* Make the history equal ids[0..n): keep the common prefix, evaluate the rest.
 * At least the last token is evaluated so its logits are current, except
 * when a recurrent model can restore them: a state snapshot of that very
 * position (eng_snapshot keeps the logits with it).
 *
 * Recurrent models (state-space / linear-attention layers) cannot forget the
 * tail of their state, so the kept prefix ends on the nearest snapshot at or
 * before the common prefix (eng_truncate), and the tokens from there are
 * evaluated again.  Snapshots are taken at the end of every evaluated prompt
 * and at marks[0..n_marks) (token counts: e.g. where each chat message
 * ends), so the next prompt that extends this one, or shares its first
 * messages, starts from one.  A prompt that evaluates one token defers its
 * snapshot (eng_snapshot_deferred): a decode loop of one-token cinfer_eval
 * calls copies no state per token. */
static int eval_history(cinfer_session *s, const int32_t *ids, size_t n, const size_t *marks,
                        size_t n_marks, int *n_reused, char *err, size_t err_len) {
    char e[512];
    eng_ctx *c = s->ctx;
    if (s->m->mod->desc->encoder) return no_logits(s->m, err, err_len);
    if (n > (size_t)c->n_ctx)
        return fail(err, err_len, CINFER_ECTX, "%zu tokens do not fit the context of %d", n,
                    c->n_ctx);
    if (n == 0) return fail(err, err_len, CINFER_EARG, "nothing to evaluate (empty token list)");
    const int n_vocab = s->m->mod->desc->n_vocab;
    for (size_t i = 0; i < n; i++) /* before anything is evaluated: no half-done prompt */
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return fail(err, err_len, CINFER_EARG, "token id %d at %zu out of range [0, %d)", ids[i],
                        i, n_vocab);
    int keep = 0;
    while (keep < c->n_past && (size_t)keep < n && s->tokens[keep] == ids[keep]) keep++;
    if ((size_t)keep == n && c->state) {
        /* the whole prompt is the history: current logits, or a snapshot's */
        if (c->n_past == keep && s->evaluated) {
            if (n_reused) *n_reused = keep;
            return 0;
        }
        if (eng_snapshot_at(c, keep) && eng_truncate(c, keep) == keep && c->n_logits > 0) {
            if (n_reused) *n_reused = keep;
            s->evaluated = 1;
            return 0;
        }
    }
    if ((size_t)keep == n) keep--; /* re-evaluate the last token for its logits */
    keep = eng_truncate(c, keep);
    if (n_reused) *n_reused = keep;
    s->evaluated = 0;
    /* in segments: ending at the marks (recurrent models: a snapshot at each,
     * and at the end) and, with a progress callback, one batch (the engine's
     * own split) at a time */
    const size_t total = n - (size_t)keep, step = s->progress ? (size_t)s->m->mod->desc->n_batch : total;
    size_t at = (size_t)keep;
    while (at < n) {
        size_t end = at + step < n ? at + step : n;
        for (size_t i = 0; c->state && i < n_marks; i++)
            if (marks[i] > at && marks[i] < end) end = marks[i];
        int snap = end == n;
        for (size_t i = 0; c->state && i < n_marks; i++) snap |= marks[i] == end;
        if (eng_eval(c, (const int *)ids + at, (int)(end - at), e, sizeof e)) {
            c->n_past = (int)at; /* cannot happen after the checks above */
            return fail(err, err_len, CINFER_EARG, "%s", e);
        }
        memmove(s->tokens + at, ids + at, (end - at) * sizeof *ids);
        at = end;
        /* one token (a caller's decode loop): deferred, copied only if a longer
         * evaluation extends it (eng_snapshot_deferred) */
        if (snap && total == 1 && !n_marks) eng_snapshot_deferred(c);
        else if (snap) eng_snapshot(c);
        if (s->progress && s->progress(s->progress_user, "prompt", (int)(at - (size_t)keep), (int)total) &&
            at < n)
            return fail(err, err_len, CINFER_ECANCEL, "prompt evaluation cancelled after %d of %d tokens",
                        (int)(at - (size_t)keep), (int)total);
    }
    s->evaluated = 1;
    return 0;
}

int cinfer_eval(cinfer_session *s, const int32_t *ids, size_t n_ids, char *err, size_t err_len) {
    return eval_history(s, ids, n_ids, NULL, 0, NULL, err, err_len);
}

/* ---- save / load ------------------------------------------------------------------ */

/* Session files.  CINFSES3: header, the n_past history ids, per layer the
 * K (n_past rows of kv_dim values) and V (n_past rows of kv_dim_v) rows in
 * the cache types the header names (ggml ids kv_type_k, kv_type_v: the
 * rows' bytes as the cache holds them), the recurrent state (state_floats),
 * then the last logits when has_logits.  CINFSES2 is the same without the
 * two types (F32 rows); CINFSES1 (before recurrent models) also lacks
 * state_floats and has_logits (the logits follow whenever n_past > 0).
 * Both are still read. */
#define SESSION_MAGIC_V1 "CINFSES1"
#define SESSION_MAGIC_V2 "CINFSES2"
#define SESSION_MAGIC "CINFSES3"

typedef struct {
    char magic[8];
    uint64_t fingerprint;
    int32_t n_layer, n_past, n_vocab, has_logits;
    int64_t state_floats;
    int32_t kv_type_k, kv_type_v;
} session_header;

int cinfer_session_save(const cinfer_session *s, const char *path, char *err, size_t err_len) {
    if (s->ctx->cuda)
        return fail(err, err_len, CINFER_EUNSUPPORTED, "%s: saving a session is not supported on --device cuda yet "
                    "(its KV cache is in device memory)", path);
    /* atomic, refusing a symlink at path and never following one at the temporary name */
    gguf_out out;
    char e[1024];
    if (gguf_out_open(&out, path, ".tmp", NULL, e, sizeof e)) return fail(err, err_len, CINFER_EIO, "%s", e);
    FILE *f = out.w.f;
    const cf_model_desc *d = s->m->mod->desc;
    const eng_ctx *c = s->ctx;
    session_header h = {.fingerprint = gguf_fingerprint(s->m->g), .n_layer = d->n_layer,
                        .n_past = c->n_past, .n_vocab = d->n_vocab,
                        .has_logits = s->evaluated && c->n_past > 0,
                        .state_floats = c->state_floats, .kv_type_k = c->kv_type_k,
                        .kv_type_v = c->kv_type_v};
    memcpy(h.magic, SESSION_MAGIC, 8);
    int bad = fwrite(&h, sizeof h, 1, f) != 1;
    if (h.n_past) bad |= fwrite(s->tokens, sizeof(int32_t), (size_t)h.n_past, f) != (size_t)h.n_past;
    for (int l = 0; l < d->n_layer && !bad; l++) {
        size_t n = d->kv_dim[l] > 0 ? (size_t)h.n_past * kern_kv_row_bytes(c->kv_type_k, d->kv_dim[l]) : 0;
        size_t nv = d->kv_dim_v[l] > 0 ? (size_t)h.n_past * kern_kv_row_bytes(c->kv_type_v, d->kv_dim_v[l]) : 0;
        if (n) bad |= fwrite(c->kv_k[l], 1, n, f) != n;
        if (nv) bad |= fwrite(c->kv_v[l], 1, nv, f) != nv;
    }
    if (h.state_floats)
        bad |= fwrite(c->state, sizeof(float), (size_t)h.state_floats, f) != (size_t)h.state_floats;
    if (h.has_logits) bad |= fwrite(eng_logits(c), sizeof(float), (size_t)d->n_vocab, f) != (size_t)d->n_vocab;
    int e_close = gguf_out_close(&out);
    if (bad || e_close || gguf_out_commit(&out, e, sizeof e)) {
        gguf_out_abort(&out);
        return fail(err, err_len, CINFER_EIO, "%s: write failed (%s)", path,
                    bad || e_close ? strerror(e_close ? e_close : EIO) : e);
    }
    return 0;
}

int cinfer_session_load(cinfer_session *s, const char *path, char *err, size_t err_len) {
    if (s->ctx->cuda)
        return fail(err, err_len, CINFER_EUNSUPPORTED, "%s: loading a session is not supported on --device cuda yet "
                    "(its KV cache is in device memory)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, err_len, CINFER_EIO, "%s: %s", path, strerror(errno));
    const cf_model_desc *d = s->m->mod->desc;
    eng_ctx *c = s->ctx;
    session_header h = {0};
    const size_t v1_size = offsetof(session_header, state_floats); /* magic .. a reserved int32 */
    int rc = 0;
    const size_t v3_extra = sizeof h - offsetof(session_header, kv_type_k);
    h.kv_type_k = h.kv_type_v = CF_F32; /* v1, v2: F32 rows */
    if (fread(&h, v1_size, 1, f) != 1 ||
        (memcmp(h.magic, SESSION_MAGIC, 8) && memcmp(h.magic, SESSION_MAGIC_V2, 8) &&
         memcmp(h.magic, SESSION_MAGIC_V1, 8))) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: not a cinfer session file", path);
    } else if (!memcmp(h.magic, SESSION_MAGIC_V1, 8)) {
        h.has_logits = h.n_past > 0; /* v1: that int32 was reserved */
        h.state_floats = 0;
    } else if (fread(&h.state_floats, sizeof h.state_floats, 1, f) != 1 ||
               (!memcmp(h.magic, SESSION_MAGIC, 8) && fread(&h.kv_type_k, v3_extra, 1, f) != 1)) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: truncated session header", path);
    }
    if (rc) {
    } else if (h.fingerprint != gguf_fingerprint(s->m->g) || h.n_layer != d->n_layer ||
               h.n_vocab != d->n_vocab) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: saved from another model (fingerprint %016llx)",
                  path, (unsigned long long)h.fingerprint);
    } else if (h.state_floats != c->state_floats) {
        rc = fail(err, err_len, CINFER_EFORMAT, "%s: %lld floats of recurrent state, the model has %ld",
                  path, (long long)h.state_floats, c->state_floats);
    } else if (h.n_past < 0 || h.n_past > c->n_ctx) {
        rc = fail(err, err_len, CINFER_ECTX, "%s: %d saved tokens do not fit n_ctx %d", path,
                  h.n_past, c->n_ctx);
    } else if (h.kv_type_k != c->kv_type_k || h.kv_type_v != c->kv_type_v) {
        const char *sk = eng_kv_type_name(h.kv_type_k), *sv = eng_kv_type_name(h.kv_type_v);
        rc = fail(err, err_len, sk && sv ? CINFER_EARG : CINFER_EFORMAT,
                  "%s: KV cache saved as %s/%s (K/V), this session's is %s/%s: open the session with "
                  "--cache-type-k %s --cache-type-v %s (cinfer_session_options.cache_type_k/_v)", path,
                  sk ? sk : "?", sv ? sv : "?", eng_kv_type_name(c->kv_type_k), eng_kv_type_name(c->kv_type_v),
                  sk ? sk : "?", sv ? sv : "?");
    }
    cinfer_session_reset(s);
    int bad = rc != 0;
    if (!bad && h.n_past) bad = fread(s->tokens, sizeof(int32_t), (size_t)h.n_past, f) != (size_t)h.n_past;
    for (int i = 0; !bad && i < h.n_past; i++) bad = s->tokens[i] < 0 || s->tokens[i] >= d->n_vocab;
    for (int l = 0; l < d->n_layer && !bad; l++) {
        size_t n = d->kv_dim[l] > 0 ? (size_t)h.n_past * kern_kv_row_bytes(c->kv_type_k, d->kv_dim[l]) : 0;
        size_t nv = d->kv_dim_v[l] > 0 ? (size_t)h.n_past * kern_kv_row_bytes(c->kv_type_v, d->kv_dim_v[l]) : 0;
        if (n) bad |= fread(c->kv_k[l], 1, n, f) != n;
        if (nv) bad |= fread(c->kv_v[l], 1, nv, f) != nv;
    }
    if (!bad && h.state_floats)
        bad = fread(c->state, sizeof(float), (size_t)h.state_floats, f) != (size_t)h.state_floats;
    /* logits of the last token; restore them into the engine */
    if (!bad && h.has_logits)
        bad = fread(c->logits, sizeof(float), (size_t)d->n_vocab, f) != (size_t)d->n_vocab;
    fclose(f);
    if (rc) return rc;
    if (bad) {
        cinfer_session_reset(s);
        return fail(err, err_len, CINFER_EFORMAT, "%s: truncated or corrupt session file", path);
    }
    eng_set_history(c, h.n_past, h.has_logits);
    s->evaluated = h.has_logits != 0;
    return 0;
}

/* ---- generation --------------------------------------------------------------- */

/* Stop-string matching across token boundaries: generated text accumulates
 * in pending; everything that cannot be the start of a stop string is
 * emitted, the rest held until it can be decided. */
typedef struct {
    char *buf;
    size_t len, cap;
} pending_text;

static int pending_add(pending_text *p, const char *s, size_t n) {
    if (p->len + n + 1 > p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        while (nc < p->len + n + 1) nc *= 2;
        char *nb = realloc(p->buf, nc);
        if (!nb) return -1;
        p->buf = nb;
        p->cap = nc;
    }
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = 0;
    return 0;
}

/* Index of the first complete stop string in p, or -1; *hold = bytes at the
 * end of p that are a proper prefix of some stop string. */
static long find_stop(const pending_text *p, const char *const *stop, int n_stop, size_t *hold) {
    long first = -1;
    *hold = 0;
    for (int i = 0; i < n_stop; i++) {
        size_t sl = strlen(stop[i]);
        if (!sl) continue;
        const char *hit = p->len >= sl ? memmem(p->buf, p->len, stop[i], sl) : NULL;
        if (hit && (first < 0 || hit - p->buf < first)) first = hit - p->buf;
        for (size_t k = sl - 1 < p->len ? sl - 1 : p->len; k > *hold; k--)
            if (!memcmp(p->buf + p->len - k, stop[i], k)) {
                *hold = k;
                break;
            }
    }
    return first;
}

int cinfer_generate(cinfer_session *s, const char *prompt, const cinfer_gen_options *opts,
                    cinfer_token_cb cb, void *user, cinfer_gen_result *res, char *err,
                    size_t err_len) {
    cinfer_gen_options o = opts ? *opts : (cinfer_gen_options){0};
    const int n_ctx = s->ctx->n_ctx;
    if (res) memset(res, 0, sizeof *res);
    if (!prompt) return fail(err, err_len, CINFER_EARG, "prompt is NULL");
    size_t n_ids = 0;
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids);
    if (!ids) return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    int rc = tok_encode(s->m->vocab, prompt, strlen(prompt), !o.no_special, o.parse_special != 0,
                        ids, (size_t)n_ctx, &n_ids);
    if (rc == TOK_ETOOSMALL)
        rc = fail(err, err_len, CINFER_ECTX, "prompt of %zu tokens does not fit the context of %d",
                  n_ids, n_ctx);
    else if (rc) rc = fail(err, err_len, CINFER_EARG, "cannot tokenize the prompt");
    else rc = cinfer_generate_tokens(s, ids, n_ids, &o, cb, user, res, err, err_len);
    free(ids);
    return rc;
}

/* Evaluate the tokens generated but not yet evaluated (structured output). */
static int eval_pending(cinfer_session *s, int32_t *ids, int *n, char *err, size_t err_len) {
    char e[512];
    int pos = s->ctx->n_past;
    if (eng_eval(s->ctx, (const int *)ids, *n, e, sizeof e)) return fail(err, err_len, CINFER_EARG, "%s", e);
    memcpy(s->tokens + pos, ids, (size_t)*n * sizeof *ids);
    *n = 0;
    return 0;
}

int cinfer_generate_tokens(cinfer_session *s, const int32_t *ids, size_t n_ids,
                           const cinfer_gen_options *opts, cinfer_token_cb cb, void *user,
                           cinfer_gen_result *res, char *err, size_t err_len) {
    cinfer_gen_options o = opts ? *opts : (cinfer_gen_options){0};
    cinfer_gen_result r = {0};
    const cinfer_model *m = s->m;
    const int n_vocab = m->mod->desc->n_vocab, n_ctx = s->ctx->n_ctx;
    if (o.max_tokens < 0 || o.n_stop < 0 || (o.n_stop && !o.stop))
        return fail(err, err_len, CINFER_EARG, "max_tokens and n_stop must be >= 0");
    if (m->mod->desc->encoder) return no_logits(m, err, err_len);

    if (!isfinite(o.temperature))
        return fail(err, err_len, CINFER_EARG, "temperature %g: expected a finite number (0: greedy)",
                    (double)o.temperature);
    if (!(o.top_p >= 0))
        return fail(err, err_len, CINFER_EARG, "top_p %g: expected 0..1 (0: greedy, 1: off)", (double)o.top_p);
    if (!(o.min_p >= 0 && o.min_p <= 1))
        return fail(err, err_len, CINFER_EARG, "min_p %g: expected 0..1 (0: off)", (double)o.min_p);
    if (!(o.repeat_penalty >= 0) || isinf(o.repeat_penalty) || o.repeat_last_n < -1)
        return fail(err, err_len, CINFER_EARG, "repeat_penalty %g / repeat_last_n %d: expected a penalty >= 0 "
                    "(0 or 1: off) and a window >= -1", (double)o.repeat_penalty, o.repeat_last_n);
    samp_params sp = {
        .temp = o.temperature,
        .top_k = o.top_k,
        .top_p = o.top_p,
        .min_p = o.min_p,
        .repeat_penalty = o.repeat_penalty > 0 ? o.repeat_penalty : 1.0f,
        .repeat_last_n = o.repeat_last_n ? o.repeat_last_n : 64,
        .no_penalty = o.repeat_penalty_all ? NULL : m->no_penalty,
        .seed = o.seed,
    };
    samp_state *samp = NULL;
    if (samp_new(&sp, n_vocab, &samp)) return fail(err, err_len, CINFER_ENOMEM, "out of memory");

    int rc = 0;
    pending_text pend = {0};
    /* structured output (gram.h): tokens are evaluated lazily, when logits are
     * next needed, so tokens the grammar forces go through in one batch */
    gram_run *gr = NULL;
    int32_t gpend[64];
    int n_gpend = 0;
    if (o.grammar) {
        if (gram_api_vocab(o.grammar) && gram_api_vocab(o.grammar) != api_gram_vocab(m)) {
            samp_free(samp);
            return fail(err, err_len, CINFER_EARG, "grammar was compiled for another model");
        }
        if ((rc = gram_run_new(o.grammar, o.confidence, &gr, err, err_len))) {
            samp_free(samp);
            return rc;
        }
    }
    double t0 = now_ms();
    r.n_prompt = (int)n_ids;
    if ((rc = eval_history(s, ids, n_ids, o.keep_state_at, o.n_keep_state_at, &r.n_reused, err,
                           err_len)))
        goto done;
    eng_snapshot_flush(s->ctx); /* the end of the prompt stays a snapshot while generating */
    r.prompt_ms = now_ms() - t0;

    t0 = now_ms();
    tok_stream_reset(s->ts);
    r.stop = CINFER_STOP_MAX_TOKENS;
    for (;;) {
        /* a value the last token completed (nothing may follow it) is a grammar stop even
         * when that token was the last the limits allow */
        if (gr && gram_run_done(gr)) {
            r.stop = CINFER_STOP_GRAMMAR;
            break;
        }
        if (o.max_tokens && r.n_generated >= o.max_tokens) break;
        if (s->ctx->n_past + n_gpend >= n_ctx) {
            r.stop = CINFER_STOP_CTX_FULL;
            break;
        }
        int32_t id = -1;
        const float *raw = NULL;
        if (gr) {
            if (n_gpend < (int)(sizeof gpend / sizeof gpend[0])) gram_run_forced(gr, &id, 1);
        }
        if (id < 0) {
            if (n_gpend && (rc = eval_pending(s, gpend, &n_gpend, err, err_len))) break;
            const float *lg = raw = eng_logits(s->ctx);
            if (gr && !o.logit_fn) {
                /* the grammar alone: sample among the allowed tokens (the same draw as
                 * masking the others to -inf, without touching them) */
                const int32_t *allowed = NULL;
                int na = gram_run_allowed(gr, &allowed);
                if (na <= 0) {
                    char exp[128];
                    gram_run_expected(gr, exp, sizeof exp);
                    rc = na < 0 ? fail(err, err_len, CINFER_ENOMEM, "grammar: out of memory computing the token mask")
                                : fail(err, err_len, CINFER_EARG,
                                       "grammar: no token of the vocabulary can continue the value (it needs one of: %s)", exp);
                    break;
                }
                if (allowed) id = samp_sample_ids(samp, lg, allowed, na, s->tokens, s->ctx->n_past);
                else { /* most tokens allowed: mask a copy, sample as usual */
                    memcpy(s->logits_buf, lg, (size_t)n_vocab * sizeof(float));
                    gram_run_apply(gr, s->logits_buf, n_vocab);
                    id = samp_sample(samp, s->logits_buf, s->tokens, s->ctx->n_past);
                }
            } else if (o.logit_fn || gr) {
                memcpy(s->logits_buf, lg, (size_t)n_vocab * sizeof(float));
                if (gr && gram_run_mask(gr, s->logits_buf, n_vocab) <= 0) {
                    char exp[128];
                    gram_run_expected(gr, exp, sizeof exp);
                    rc = fail(err, err_len, CINFER_EARG,
                              "grammar: no token of the vocabulary can continue the value (it needs one of: %s)", exp);
                    break;
                }
                if (o.logit_fn) o.logit_fn(s->logits_buf, n_vocab, s->tokens, s->ctx->n_past, o.logit_user);
                lg = s->logits_buf;
                id = samp_sample(samp, lg, s->tokens, s->ctx->n_past);
            } else id = samp_sample(samp, lg, s->tokens, s->ctx->n_past);
            if (id < 0) {
                rc = fail(err, err_len, CINFER_EARG, "sampling failed");
                break;
            }
        }
        if (gr && gram_run_accept(gr, id, raw)) {
            rc = fail(err, err_len, CINFER_EARG, "grammar: token %d is not allowed here", id);
            break;
        }
        r.n_generated++;
        if (tok_is_eog(m->vocab, id)) {
            r.stop = CINFER_STOP_EOS;
            break;
        }
        size_t len;
        const char *piece = tok_stream_put(s->ts, id, &len);
        if (gr) gpend[n_gpend++] = id; /* evaluated when logits are next needed */
        else {
            char e[512];
            int pos = s->ctx->n_past;
            if (eng_eval(s->ctx, &id, 1, e, sizeof e)) {
                rc = fail(err, err_len, CINFER_EARG, "%s", e);
                break;
            }
            s->tokens[pos] = id;
        }
        if (piece && len && pending_add(&pend, piece, len)) {
            rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
            break;
        }
        size_t hold;
        long at = find_stop(&pend, o.stop, o.n_stop, &hold);
        size_t emit = at >= 0 ? (size_t)at : pend.len - hold;
        int stop_cb = 0;
        if (cb && (emit || at < 0)) stop_cb = cb(pend.buf ? pend.buf : "", emit, id, user) != 0;
        if (pend.len > emit) memmove(pend.buf, pend.buf + emit, pend.len - emit);
        pend.len -= emit;
        if (at >= 0) {
            r.stop = CINFER_STOP_STRING;
            pend.len = 0;
            break;
        }
        if (stop_cb) {
            r.stop = CINFER_STOP_CALLBACK;
            break;
        }
    }
    /* generated tokens join the history; a recurrent model keeps the state here
     * (the end of this turn: the next prompt of a chat starts with it) */
    if (!rc && n_gpend) rc = eval_pending(s, gpend, &n_gpend, err, err_len);
    if (!rc) eng_snapshot(s->ctx);
    /* flush held text (an incomplete stop-string prefix, a partial character) */
    if (!rc && r.stop != CINFER_STOP_STRING && r.stop != CINFER_STOP_CALLBACK && cb) {
        size_t len;
        const char *tail = tok_stream_flush(s->ts, &len);
        if (tail && len) pending_add(&pend, tail, len);
        if (pend.len) cb(pend.buf, pend.len, -1, user);
    }
    r.gen_ms = now_ms() - t0;
done:
    gram_run_free(gr);
    free(pend.buf);
    samp_free(samp);
    if (res) *res = r;
    return rc;
}

/* ---- chat ------------------------------------------------------------------------ */

void cinfer_free(void *p) { free(p); }

int cinfer_chat_prompt_json(const cinfer_model *m, const char *messages_json, const char *tools_json,
                            int add_generation_prompt, char **prompt, char *err, size_t err_len) {
    return cinfer_chat_prompt_vars(m, messages_json, tools_json, NULL, add_generation_prompt, prompt, err, err_len);
}

int cinfer_chat_prompt_vars(const cinfer_model *m, const char *messages_json, const char *tools_json,
                            const char *vars_json, int add_generation_prompt, char **prompt, char *err,
                            size_t err_len) {
    *prompt = NULL;
    if (!m->chat)
        return fail(err, err_len, CINFER_EUNSUPPORTED, "the model has no usable chat template (%s)",
                    m->chat_err[0] ? m->chat_err : "tokenizer.chat_template absent");
    cJSON *msgs = cJSON_Parse(messages_json ? messages_json : "");
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    int rc = 0;
    if (!cJSON_IsArray(msgs)) rc = fail(err, err_len, CINFER_EARG, "messages: expected a JSON array");
    else if (tools_json && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        rc = fail(err, err_len, CINFER_EARG, "tools: expected a JSON array or null");
    if (rc) {
        cJSON_Delete(msgs);
        cJSON_Delete(tools);
        return rc;
    }
    /* bos/eos as the template sees them: the tokens' text */
    size_t bl = 0, el = 0;
    int32_t bos = tok_bos(m->vocab), eos = tok_eos(m->vocab);
    const char *bp = bos >= 0 ? tok_piece(m->vocab, bos, &bl) : NULL;
    const char *ep = eos >= 0 ? tok_piece(m->vocab, eos, &el) : NULL;
    cJSON *ctx = chat_context_new(msgs, cJSON_IsArray(tools) ? tools : NULL,
                                  add_generation_prompt != 0, bp, ep);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    if (!ctx) return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    if (vars_json) { /* chat_template_kwargs: set after the standard variables */
        cJSON *vars = cJSON_Parse(vars_json);
        if (!cJSON_IsObject(vars)) rc = fail(err, err_len, CINFER_EARG, "template variables: expected a JSON object");
        for (cJSON *v = cJSON_IsObject(vars) ? vars->child : NULL; v && !rc; v = v->next) {
            if (!strcmp(v->string, "messages") || !strcmp(v->string, "tools") ||
                !strcmp(v->string, "add_generation_prompt")) {
                rc = fail(err, err_len, CINFER_EARG, "template variable '%s' comes from the request itself, "
                          "not from template variables", v->string);
                break;
            }
            cJSON *copy = cJSON_Duplicate(v, 1);
            if (!copy) rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
            else if (cJSON_GetObjectItemCaseSensitive(ctx, v->string)) cJSON_ReplaceItemInObjectCaseSensitive(ctx, v->string, copy);
            else cJSON_AddItemToObject(ctx, v->string, copy);
        }
        cJSON_Delete(vars);
        if (rc) {
            cJSON_Delete(ctx);
            return rc;
        }
    }
    size_t len;
    char e[512];
    if (chat_template_render(m->chat, ctx, NULL, prompt, &len, e, sizeof e))
        rc = fail(err, err_len, CINFER_EARG, "chat template: %s", e);
    cJSON_Delete(ctx);
    return rc;
}

/* messages[] → the JSON array the template context wants. */
static char *messages_to_json(const cinfer_message *msgs, size_t n) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "role", msgs[i].role ? msgs[i].role : "user") ||
            !cJSON_AddStringToObject(o, "content", msgs[i].content ? msgs[i].content : "")) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return s;
}

int cinfer_chat_prompt(const cinfer_model *m, const cinfer_message *msgs, size_t n,
                       int add_generation_prompt, char **prompt, char *err, size_t err_len) {
    char *json = messages_to_json(msgs, n);
    if (!json) return fail(err, err_len, CINFER_ENOMEM, "out of memory");
    int rc = cinfer_chat_prompt_json(m, json, NULL, add_generation_prompt, prompt, err, err_len);
    free(json);
    return rc;
}

/* The rendered prompt text to tokenize: as llama.cpp's chat code, when the
 * vocabulary adds BOS itself, a BOS the template already wrote is skipped so
 * it appears once. */
static const char *chat_text(const cinfer_model *m, const char *prompt, int no_special) {
    int32_t bos = tok_bos(m->vocab);
    size_t bl = 0;
    const char *bp = bos >= 0 ? tok_piece(m->vocab, bos, &bl) : NULL;
    return !no_special && bp && bl && !strncmp(prompt, bp, bl) ? prompt + bl : prompt;
}

/* Recurrent models: where the conversation's leading messages end in the
 * prompt's ids — the token count of msgs[0..i) rendered without a generation
 * prompt, for each i < n whose rendering tokenizes to a prefix of ids (a
 * template that renders an earlier turn differently once more follow gives
 * no mark there).  These are the prefixes the next prompts share (the same
 * system prompt; the same conversation one turn longer).  Up to cap marks. */
static size_t chat_marks(const cinfer_session *s, const cinfer_message *msgs, size_t n,
                         const int32_t *ids, size_t n_ids, int no_special, size_t *marks,
                         size_t cap) {
    size_t k = 0;
    int32_t *pre = malloc(n_ids * sizeof *pre);
    for (size_t i = 1; pre && i < n && k < cap; i++) {
        char *text = NULL, e[256];
        size_t np = 0;
        if (cinfer_chat_prompt(s->m, msgs, i, 0, &text, e, sizeof e)) break;
        const char *t = chat_text(s->m, text, no_special);
        int rc = tok_encode(s->m->vocab, t, strlen(t), !no_special, 1, pre, n_ids, &np);
        if (!rc && np > 0 && np < n_ids && !memcmp(pre, ids, np * sizeof *pre) &&
            (k == 0 || np > marks[k - 1]))
            marks[k++] = np;
        free(text);
    }
    free(pre);
    return k;
}

int cinfer_chat(cinfer_session *s, const cinfer_message *msgs, size_t n,
                const cinfer_gen_options *opts, cinfer_token_cb cb, void *user,
                cinfer_gen_result *res, char *err, size_t err_len) {
    char *prompt;
    int rc = cinfer_chat_prompt(s->m, msgs, n, 1, &prompt, err, err_len);
    if (rc) return rc;
    cinfer_gen_options o = opts ? *opts : (cinfer_gen_options){0};
    /* As llama.cpp's chat code: the template writes control tokens as text,
     * so parse them. */
    o.parse_special = 1;
    o.no_special = !tok_add_bos(s->m->vocab);
    const char *p = chat_text(s->m, prompt, o.no_special);
    if (!s->ctx->state || o.n_keep_state_at) {
        rc = cinfer_generate(s, p, &o, cb, user, res, err, err_len);
        free(prompt);
        return rc;
    }
    /* a recurrent model: tokenize here to mark where the messages end */
    const int n_ctx = s->ctx->n_ctx;
    size_t n_ids = 0, marks[64];
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids);
    if (!ids) rc = fail(err, err_len, CINFER_ENOMEM, "out of memory");
    else if ((rc = tok_encode(s->m->vocab, p, strlen(p), !o.no_special, 1, ids, (size_t)n_ctx,
                              &n_ids)) == TOK_ETOOSMALL)
        rc = fail(err, err_len, CINFER_ECTX, "prompt of %zu tokens does not fit the context of %d",
                  n_ids, n_ctx);
    else if (rc) rc = fail(err, err_len, CINFER_EARG, "cannot tokenize the prompt");
    else {
        o.keep_state_at = marks;
        o.n_keep_state_at = chat_marks(s, msgs, n, ids, n_ids, o.no_special, marks,
                                       sizeof marks / sizeof *marks);
        if (res) memset(res, 0, sizeof *res);
        rc = cinfer_generate_tokens(s, ids, n_ids, &o, cb, user, res, err, err_len);
    }
    free(ids);
    free(prompt);
    return rc;
}

/* ---- embeddings ------------------------------------------------------------------ */

int cinfer_model_n_embd(const cinfer_model *m) { return m->mod->desc->n_embd; }
int cinfer_model_is_encoder(const cinfer_model *m) { return m->mod->desc->encoder != 0; }
int cinfer_model_n_batch(const cinfer_model *m) { return m->mod->desc->n_batch; }

int cinfer_model_pooling(const cinfer_model *m) {
    char key[96];
    uint32_t t;
    snprintf(key, sizeof key, "%s.pooling_type", m->arch);
    if (gguf_get_u32(m->g, key, &t, NULL, 0)) return -1;
    /* llama.cpp's enum llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank */
    switch (t) {
    case 0: return CINFER_POOL_NONE;
    case 1: return CINFER_POOL_MEAN;
    case 2: return CINFER_POOL_CLS;
    case 3: return CINFER_POOL_LAST;
    default: return -1;
    }
}

/* Scale v (n) to Euclidean norm 1; a zero vector stays zero (llama.cpp's
 * common_embd_normalize with embd_norm = 2). */
static void l2_normalize(float *v, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
    double k = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
    for (int i = 0; i < n; i++) v[i] = (float)(v[i] * k);
}

int cinfer_embed(cinfer_session *s, const int32_t *tokens, int n, int pooling, float *out,
                 int n_out, char *err, size_t err_len) {
    const cf_model_desc *d = s->m->mod->desc;
    const int n_embd = d->n_embd, pool = pooling & ~CINFER_EMBED_RAW;
    if (!tokens || n < 1) return fail(err, err_len, CINFER_EARG, "nothing to embed (%d tokens)", n);
    if (pool < CINFER_POOL_MEAN || pool > CINFER_POOL_NONE)
        return fail(err, err_len, CINFER_EARG, "pooling %#x: expected CINFER_POOL_* [| CINFER_EMBED_RAW]",
                    (unsigned)pooling);
    if (n > s->ctx->n_ctx)
        return fail(err, err_len, CINFER_ECTX, "%d tokens do not fit the context of %d", n, s->ctx->n_ctx);
    if (d->encoder && n > d->n_batch)
        return fail(err, err_len, CINFER_ECTX, "%d tokens: this encoder embeds at most %d at once", n, d->n_batch);
    size_t need = pool == CINFER_POOL_NONE ? (size_t)n * (size_t)n_embd : (size_t)n_embd;
    if (!out || n_out < 0 || (size_t)n_out < need)
        return fail(err, err_len, CINFER_EARG, "output holds %d floats, %zu needed", n_out, need);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= d->n_vocab)
            return fail(err, err_len, CINFER_EARG, "token id %d at %d out of range [0, %d)", tokens[i], i,
                        d->n_vocab);
    /* Every pooling but LAST needs the state of every token, so the whole
     * history is evaluated; LAST keeps the cached common prefix — not for an
     * encoder, whose every state depends on the whole input. */
    int keep = 0;
    if (pool == CINFER_POOL_LAST && !d->encoder) {
        while (keep < s->ctx->n_past && keep < n - 1 && s->tokens[keep] == tokens[keep]) keep++;
    }
    float *h = malloc((size_t)(n - keep) * (size_t)n_embd * sizeof *h);
    if (!h) return fail(err, err_len, CINFER_ENOMEM, "out of memory for %d hidden states", n - keep);
    keep = eng_truncate(s->ctx, keep); /* a recurrent model: the nearest saved state */
    const int rows = n - keep;
    if (rows > 0) {
        float *h2 = realloc(h, (size_t)rows * (size_t)n_embd * sizeof *h);
        if (!h2) {
            free(h);
            return fail(err, err_len, CINFER_ENOMEM, "out of memory for %d hidden states", rows);
        }
        h = h2;
    }
    s->evaluated = 0;
    char e[512];
    int rc = 0;
    /* one forward call per batch: cf_env.hidden receives that batch's rows */
    for (int i = keep; i < n && !rc; i += d->n_batch) {
        int nb = n - i < d->n_batch ? n - i : d->n_batch;
        s->ctx->env.hidden = h + (size_t)(i - keep) * (size_t)n_embd;
        if (eng_eval(s->ctx, (const int *)tokens + i, nb, e, sizeof e)) rc = -1;
    }
    s->ctx->env.hidden = NULL;
    if (rc) {
        eng_truncate(s->ctx, keep);
        free(h);
        return fail(err, err_len, CINFER_EARG, "%s", e);
    }
    memmove(s->tokens + keep, tokens + keep, (size_t)rows * sizeof *tokens);
    s->evaluated = 1;
    switch (pool) {
    case CINFER_POOL_MEAN:
        for (int c = 0; c < n_embd; c++) {
            double acc = 0;
            for (int t = 0; t < rows; t++) acc += h[(size_t)t * (size_t)n_embd + (size_t)c];
            out[c] = (float)(acc / rows);
        }
        break;
    case CINFER_POOL_LAST:
        memcpy(out, h + (size_t)(rows - 1) * (size_t)n_embd, (size_t)n_embd * sizeof *out);
        break;
    case CINFER_POOL_CLS: memcpy(out, h, (size_t)n_embd * sizeof *out); break;
    default: memcpy(out, h, need * sizeof *out); break;
    }
    free(h);
    if (!(pooling & CINFER_EMBED_RAW))
        for (size_t r = 0; r < need / (size_t)n_embd; r++) l2_normalize(out + r * (size_t)n_embd, n_embd);
    return 0;
}
