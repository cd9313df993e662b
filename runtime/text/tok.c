/*
 * tok.c — the tokenizer models on top of the vocabulary (tok_vocab.c), a C
 * port of llama.cpp's src/llama-vocab.cpp (llama_vocab::impl::{load,
 * tokenize, tokenizer_st_partition, token_to_piece, detokenize}): loading
 * from GGUF (SPM "llama", BPE "gpt2", WordPiece "bert"), the SPM merge
 * (llm_tokenizer_spm_session), special-token partitioning, decoding and
 * streaming.  Byte-level BPE and WordPiece encoding live in tok_bpe.c,
 * tokenizer.json loading in tok_hf.c; tok_impl.h is their shared view of the
 * vocabulary.
 *
 * Encoding allocates one scratch block per call, sized from the input; the
 * merge loop itself never allocates.  Before merging, an SPM fragment is cut
 * where two adjacent bytes form a pair that occurs in no piece: no merge can
 * cross such a cut, so merging the runs one by one gives llama.cpp's result
 * while the heap stays small (4x faster on 1 MB of English with the 32k
 * vocab).  The SPM merge queue is a binary heap ordered by (score desc, left
 * index asc), llama.cpp's llm_bigram_spm comparator.  That order is total over
 * the entries that can be live at the same time (see spm_heap_before), so the
 * result matches std::priority_queue exactly, whatever the heap
 * implementation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "tok.h"

#include <ctype.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tok_impl.h"
#include "unicode.h"

#define fail tok_fail
#define vocab_find tok_vocab_find

/* Bytes of the UTF-8 sequence a lead byte announces, by its high nibble
 * (llama.cpp unicode_len_utf8): continuation and invalid bytes count as 1. */
static const uint8_t utf8_len_tab[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

/* ---- loading from GGUF ------------------------------------------------------------ */

/* Optional u32 key: *found false when absent; a wrong type is an error. */
static int opt_u32(const gguf_file *g, const char *key, uint32_t *out, bool *found, char *err,
                   size_t err_len) {
    *found = false;
    if (!gguf_get(g, key)) return 0;
    if (gguf_get_u32(g, key, out, err, err_len) != 0) return TOK_EFORMAT;
    *found = true;
    return 0;
}

static int opt_bool(const gguf_file *g, const char *key, bool *out, char *err, size_t err_len) {
    if (!gguf_get(g, key)) return 0;
    return gguf_get_bool(g, key, out, err, err_len) != 0 ? TOK_EFORMAT : 0;
}

/* Numeric array key with at least n elements of one of two element types. */
static int opt_num_arr(const gguf_file *g, const char *key, uint32_t t1, uint32_t t2, uint64_t n,
                       const gguf_value **out, char *err, size_t err_len) {
    *out = NULL;
    const gguf_value *val = gguf_get(g, key);
    if (!val) return 0;
    if (val->type != GGUF_VT_ARRAY || (val->v.arr.type != t1 && val->v.arr.type != t2))
        return fail(err, err_len, TOK_EFORMAT, "tok: %s: type %s[%s], expected an array of %s%s%s", key,
                    gguf_vtype_name(val->type),
                    val->type == GGUF_VT_ARRAY ? gguf_vtype_name(val->v.arr.type) : "-",
                    gguf_vtype_name(t1), t2 != t1 ? " or " : "", t2 != t1 ? gguf_vtype_name(t2) : "");
    if (val->v.arr.n < n)
        return fail(err, err_len, TOK_EFORMAT, "tok: %s: %llu elements, expected >= %llu (n_vocab)", key,
                    (unsigned long long)val->v.arr.n, (unsigned long long)n);
    *out = val;
    return 0;
}

static uint32_t rd_u32(const void *base, uint64_t i) {
    uint32_t x;
    memcpy(&x, (const char *)base + 4 * i, 4); /* GGUF is little-endian, as are our hosts */
    return x;
}

static int load_gguf(const gguf_file *g, tok_vocab *v, char *err, size_t err_len) {
    int rc;
    const gguf_value *model = gguf_get(g, "tokenizer.ggml.model");
    if (!model)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.model missing (no vocabulary in this file; a "
                    "Hugging Face folder carries one in tokenizer.json)");
    if (model->type != GGUF_VT_STRING)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.model: type %s, expected string",
                    gguf_vtype_name(model->type));
    gguf_str ms = model->v.str;
    const pre_def *pre = NULL;
    const bool gemma4 = gguf_str_eq(ms, "gemma4");
    if (gguf_str_eq(ms, "llama")) v->type = TOK_TYPE_SPM;
    else if (gguf_str_eq(ms, "gpt2") || gemma4) v->type = TOK_TYPE_BPE;
    else if (gguf_str_eq(ms, "bert")) v->type = TOK_TYPE_WPM;
    else if (gguf_str_eq(ms, "t5")) v->type = TOK_TYPE_UGM;
    else
        return fail(err, err_len, TOK_EUNSUPPORTED,
                    "tok: tokenizer.ggml.model '%.*s' not supported (SPM 'llama', BPE 'gpt2', WordPiece 'bert', "
                    "UGM 't5', 'gemma4')",
                    (int)(ms.len > 64 ? 64 : ms.len), ms.ptr);
    if (gemma4) { /* llama.cpp: the "gemma4" model always uses its own pre-tokenizer */
        pre = tok_pre_lookup("gemma4", 6);
    } else if (v->type == TOK_TYPE_BPE) {
        const gguf_value *pv = gguf_get(g, "tokenizer.ggml.pre");
        const char *pname = "default";
        size_t plen = 7;
        if (pv) {
            if (pv->type != GGUF_VT_STRING)
                return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.pre: type %s, expected string",
                            gguf_vtype_name(pv->type));
            pname = pv->v.str.ptr;
            plen = pv->v.str.len;
        }
        v->pre_defaulted = pv == NULL;
        pre = tok_pre_lookup(pname, plen);
        if (!pre)
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: pre-tokenizer tokenizer.ggml.pre = '%.*s' not supported",
                        (int)(plen > 64 ? 64 : plen), pname);
    }

    const gguf_value *toks;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, err, err_len) != 0) return TOK_EFORMAT;
    uint64_t n = toks->v.arr.n;
    if (n == 0 || n > (uint64_t)INT32_MAX / 4)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.tokens: %llu tokens, expected 1..%d",
                    (unsigned long long)n, INT32_MAX / 4);
    const gguf_value *scores, *types;
    if ((rc = opt_num_arr(g, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, GGUF_VT_INT32, n, &scores, err, err_len)))
        return rc;
    if ((rc = opt_num_arr(g, "tokenizer.ggml.token_type", GGUF_VT_INT32, GGUF_VT_INT32, n, &types, err, err_len)))
        return rc;
    if ((rc = tok_vocab_alloc(v, (int32_t)n, err, err_len))) return rc;

    static const uint16_t type_attr[7] = {
        TOK_ATTR_UNDEFINED, TOK_ATTR_NORMAL, TOK_ATTR_UNKNOWN, TOK_ATTR_CONTROL,
        TOK_ATTR_USER_DEFINED, TOK_ATTR_UNUSED, TOK_ATTR_BYTE,
    };
    for (int32_t i = 0; i < v->n_vocab; i++) {
        gguf_str s = toks->v.arr.strs[i];
        float score = 0.0f;
        if (scores && scores->v.arr.type == GGUF_VT_FLOAT32) {
            uint32_t bits = rd_u32(scores->v.arr.data, (uint64_t)i);
            memcpy(&score, &bits, 4);
        } else if (scores) {
            score = (float)(int32_t)rd_u32(scores->v.arr.data, (uint64_t)i);
        }
        uint16_t attr = TOK_ATTR_NORMAL;
        if (types) {
            int32_t t = (int32_t)rd_u32(types->v.arr.data, (uint64_t)i);
            attr = (t >= 0 && t < 7) ? type_attr[t] : TOK_ATTR_UNDEFINED;
        }
        if ((rc = tok_vocab_set(v, i, s.ptr, s.len, score, attr, err, err_len))) return rc;
    }

    /* defaults per tokenizer model (llama_vocab::impl::load), then the keys */
    switch (v->type) {
    case TOK_TYPE_SPM:
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_bos = true, v->add_space_prefix = true;
        break;
    case TOK_TYPE_BPE:
        v->bos = 11, v->eos = 11;
        if (gemma4) v->bos = v->eos = -1; /* read from the keys */
        if (pre->no_bos) v->bos = -1;
        v->add_bos = pre->add_bos, v->clean_spaces = pre->clean_spaces, v->ignore_merges = pre->ignore_merges;
        v->raw_symbols = pre->raw_symbols;
        snprintf(v->pre_name, sizeof v->pre_name, "%s", pre->names[0]);
        break;
    case TOK_TYPE_WPM:
        v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0;
        v->add_bos = true, v->add_sep = true, v->clean_spaces = true;
        break;
    case TOK_TYPE_UGM:
        v->eos = 1, v->unk = 2, v->pad = 0;
        v->add_eos = true;
        break;
    }
    if ((rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err, err_len))) return rc;

    /* special ids: a default out of range is disabled, a key value out of
     * range keeps the default (llama.cpp warns and does the same) */
    struct { const char *key; int32_t *id; } specials[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},         {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},         {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},     {"tokenizer.ggml.seperator_token_id", &v->sep},
        {"tokenizer.ggml.padding_token_id", &v->pad},     {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf}, {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad}, {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep}, {"tokenizer.ggml.prefix_token_id", &v->fim_pre},
        {"tokenizer.ggml.suffix_token_id", &v->fim_suf}, {"tokenizer.ggml.middle_token_id", &v->fim_mid},
    };
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        int32_t *id = specials[k].id;
        if (*id >= v->n_vocab) *id = -1;
        uint32_t val;
        bool found;
        if ((rc = opt_u32(g, specials[k].key, &val, &found, err, err_len))) return rc;
        if (found && val < (uint32_t)v->n_vocab) *id = (int32_t)val;
    }
    if ((rc = opt_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err, err_len))) return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err, err_len))) return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_sep_token", &v->add_sep, err, err_len))) return rc;
    if (v->raw_symbols) v->add_bos = true; /* llama.cpp overrides add_bos_token false for Gemma 4 */

    if (v->type == TOK_TYPE_UGM) {
        if ((rc = opt_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &v->ugm_remove_extra_ws, err, err_len)))
            return rc;
        const gguf_value *cm = gguf_get(g, "tokenizer.ggml.precompiled_charsmap");
        if (cm) {
            if (cm->type != GGUF_VT_ARRAY || (cm->v.arr.type != GGUF_VT_UINT8 && cm->v.arr.type != GGUF_VT_INT8))
                return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.precompiled_charsmap: expected an array of "
                            "uint8 or int8");
            if ((rc = tok_ugm_set_charsmap(v, cm->v.arr.data, (size_t)cm->v.arr.n, err, err_len))) return rc;
        }
    }

    if (v->type == TOK_TYPE_BPE) {
        const gguf_value *merges;
        if (!gguf_get(g, "tokenizer.ggml.merges"))
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.merges missing (required for a BPE vocabulary)");
        if (gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_VT_STRING, &merges, err, err_len) != 0) return TOK_EFORMAT;
        if ((rc = tok_merge_reserve(v, merges->v.arr.n, err, err_len))) return rc;
        for (uint64_t i = 0; i < merges->v.arr.n; i++) {
            gguf_str m = merges->v.arr.strs[i];
            /* llama.cpp: split at the first space after the first byte */
            const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
            size_t na = sp ? (size_t)(sp - m.ptr) : 0;
            if ((rc = tok_merge_add(v, m.ptr, na, sp ? sp + 1 : "", sp ? m.len - na - 1 : 0, err, err_len))) return rc;
        }
        if ((rc = tok_pre_init(v, pre, err, err_len))) return rc;
    }

    const gguf_value *name = gguf_get(g, "general.name");
    bool has_name = name && name->type == GGUF_VT_STRING;
    rc = tok_vocab_finish(v, has_name ? name->v.str.ptr : NULL, has_name ? name->v.str.len : 0, err, err_len);
    if (!rc && v->type == TOK_TYPE_BPE) tok_bpe_finish(v);
    if (!rc && v->type == TOK_TYPE_UGM) {
        /* llm_tokenizer_ugm: the unknown score, the longest user-defined token */
        float min_score = FLT_MAX;
        for (int32_t i = 0; i < v->n_vocab; i++) {
            if ((v->attr[i] & TOK_ATTR_NORMAL) && v->score[i] < min_score) min_score = v->score[i];
            if ((v->attr[i] & TOK_ATTR_USER_DEFINED) && v->text_len[i] > v->ugm_user_max) v->ugm_user_max = v->text_len[i];
        }
        v->ugm_unk_score = (double)(min_score - 10.0f);
    }
    return rc;
}

int tok_load_ggml(const gguf_file *g, tok_vocab **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = 0;
    if (!out) return fail(err, err_len, TOK_EINVAL, "tok: out is NULL");
    *out = NULL;
    if (!g) return fail(err, err_len, TOK_EINVAL, "tok: gguf file is NULL");
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    int rc = load_gguf(g, v, err, err_len);
    if (rc) {
        tok_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    tok_bpe_free(v);
    free(v->ugm_map);
    free(v->text);
    free(v->text_off);
    free(v->text_len);
    free(v->dec);
    free(v->dec_off);
    free(v->dec_len);
    free(v->score);
    free(v->attr);
    free(v->slot_id);
    free(v->slot_hash);
    free(v->special);
    free(v->trie);
    free(v);
}

/* ---- queries ----------------------------------------------------------------- */

int tok_type(const tok_vocab *v) { return v->type; }
const char *tok_pre_name(const tok_vocab *v) { return v->pre_name; }
const char *tok_pre_note(const tok_vocab *v) {
    return v->pre_defaulted ? "this GGUF has no tokenizer.ggml.pre: the BPE pre-tokenizer defaults to GPT-2's, so "
                              "token ids (and output quality) may differ from the model's own tokenizer; re-convert "
                              "it with a current llama.cpp convert_hf_to_gguf.py"
                            : NULL;
}
int tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
int32_t tok_sep(const tok_vocab *v) { return v->sep; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos; }
bool tok_add_eos(const tok_vocab *v) { return v->add_eos; }
bool tok_add_space_prefix(const tok_vocab *v) { return v->add_space_prefix; }

bool tok_is_eog(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_vocab && (v->attr[id] & TOK_ATTR_EOG_);
}

unsigned tok_attr(const tok_vocab *v, int32_t id) {
    return (id >= 0 && id < v->n_vocab) ? (v->attr[id] & ~TOK_ATTR_EOG_) : 0;
}

float tok_score(const tok_vocab *v, int32_t id) {
    return (id >= 0 && id < v->n_vocab) ? v->score[id] : 0.0f;
}

int32_t tok_find(const tok_vocab *v, const char *s, size_t len) {
    if (!s && len) return -1;
    return vocab_find(v, s ? s : "", len);
}

/* ---- SPM encoding ---------------------------------------------------------------- */

typedef struct {
    int32_t prev, next; /* linked list over live symbols; -1 ends */
    uint32_t off, n;    /* bytes [off, off+n) of the escaped fragment; n 0 once merged away */
} spm_sym;

typedef struct {
    int32_t left, right; /* symbol indices */
    float score;         /* score of the merged piece */
    uint32_t size;       /* bytes of the merged piece: stale when the symbols changed */
} spm_bigram;

typedef struct {
    uint32_t off, len; /* raw text bytes of a text fragment */
    int32_t id;        /* >= 0: a special token matched in the text */
} frag;

typedef struct {
    const tok_vocab *v;
    char *esc;          /* (esc_cap) escaped fragment: optional ▁ prefix, ' ' → ▁ */
    spm_sym *sym;       /* (esc_cap) */
    spm_bigram *heap;   /* (2 * esc_cap): live entries never exceed 2 symbols' worth */
    size_t heap_n, heap_cap;
    tok_out *out;
    bool bad_byte;      /* a byte the vocab cannot represent */
    bool last_unk;      /* the last id emitted was a fused unk (spm_fuse_unk) */
} spm_ctx;

/* llm_bigram_spm::comparator inverted: a pops before b.  Entries equal under
 * it share (score, left); of those at most one is valid (a symbol's right
 * neighbour only changes by merging it, and sizes only grow), so the merge
 * sequence does not depend on how the heap orders equal entries. */
static inline bool spm_heap_before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_ctx *c, spm_bigram b) {
    if (c->heap_n == c->heap_cap) return; /* cannot happen: see the bound in tok_encode */
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!spm_heap_before(&b, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = b;
}

static spm_bigram heap_pop(spm_ctx *c) {
    spm_bigram top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, best;
        if (l >= n) break;
        best = (l + 1 < n && spm_heap_before(&c->heap[l + 1], &c->heap[l])) ? l + 1 : l;
        if (!spm_heap_before(&c->heap[best], &last)) break;
        c->heap[i] = c->heap[best];
        i = best;
    }
    if (n) c->heap[i] = last;
    return top;
}

static inline void try_add_bigram(spm_ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t size = c->sym[left].n + c->sym[right].n;
    if (size > c->v->max_text_len) return;
    if (c->v->spm_ranks) { /* HF BPE: the pair must be a merge; the lowest rank goes first */
        int32_t a = tok_sym_find(c->v, c->esc + c->sym[left].off, c->sym[left].n);
        int32_t b = tok_sym_find(c->v, c->esc + c->sym[right].off, c->sym[right].n);
        int32_t rank, merged;
        if (a < 0 || b < 0 || !tok_merge_find(c->v, a, b, &rank, &merged)) return;
        heap_push(c, (spm_bigram){left, right, -(float)rank, size}); /* ranks < 2^24: exact */
        return;
    }
    int32_t id = vocab_find(c->v, c->esc + c->sym[left].off, size);
    if (id < 0) return;
    heap_push(c, (spm_bigram){left, right, c->v->score[id], size});
}

/* The merge loop and resegment of llm_tokenizer_spm_session::tokenize over
 * the symbols [first, first + n), a list of its own. */
static void spm_merge(spm_ctx *c, int32_t first, int32_t n) {
    const tok_vocab *v = c->v;
    c->heap_n = 0;
    for (int32_t i = first + 1; i < first + n; i++) try_add_bigram(c, i - 1, i);
    while (c->heap_n) {
        spm_bigram b = heap_pop(c);
        spm_sym *L = &c->sym[b.left], *R = &c->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) c->sym[R->next].prev = b.left;
        try_add_bigram(c, L->prev, b.left);
        try_add_bigram(c, b.left, L->next);
    }

    for (int32_t i = first; i != -1; i = c->sym[i].next) {
        const spm_sym *y = &c->sym[i];
        int32_t id = vocab_find(v, c->esc + y->off, y->n);
        if (id >= 0) {
            tok_emit(c->out, id);
            c->last_unk = false;
            continue;
        }
        if (v->spm_ranks) { /* HF byte_fallback: <0xXX> for every byte, else one unk (fused) */
            bool all = true;
            for (uint32_t j = 0; j < y->n && all; j++) {
                int32_t bid = v->byte_id[(uint8_t)c->esc[y->off + j]];
                all = bid >= 0 && (v->attr[bid] & TOK_ATTR_BYTE);
            }
            if (!all) {
                if (v->unk < 0) c->bad_byte = true;
                else if (!(v->spm_fuse_unk && c->last_unk)) tok_emit(c->out, v->unk);
                c->last_unk = true;
                continue;
            }
            c->last_unk = false;
        }
        for (uint32_t j = 0; j < y->n; j++) { /* byte fallback */
            int32_t bid = v->byte_id[(uint8_t)c->esc[y->off + j]];
            if (bid < 0) c->bad_byte = true;
            else tok_emit(c->out, bid);
        }
    }
}

/* llm_tokenizer_spm_session::tokenize for one raw-text fragment.  (llama.cpp's
 * rev_merge path in resegment is unreachable: every merged symbol is a piece,
 * and a single-character symbol is never a key of rev_merge.) */
static void spm_fragment(spm_ctx *c, const char *s, size_t n, bool space_prefix) {
    const tok_vocab *v = c->v;
    char *e = c->esc;
    size_t m = 0;
    if (space_prefix) e[m++] = (char)0xE2, e[m++] = (char)0x96, e[m++] = (char)0x81;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') e[m++] = (char)0xE2, e[m++] = (char)0x96, e[m++] = (char)0x81;
        else e[m++] = s[i];
    }
    if (m == 0) return;

    int32_t ns = 0;
    for (size_t off = 0; off < m;) {
        size_t l = utf8_len_tab[(uint8_t)e[off] >> 4];
        if (l > m - off) l = m - off;
        c->sym[ns] = (spm_sym){ns - 1, off + l == m ? -1 : ns + 1, (uint32_t)off, (uint32_t)l};
        off += l;
        ns++;
    }

    /* merge each run of symbols between "unmergeable" byte pairs on its own
     * (and, for a Metaspace split, before every U+2581: words never merge) */
    int32_t start = 0;
    c->last_unk = false;
    for (int32_t i = 1; i <= ns; i++) {
        if (i < ns) {
            unsigned pb = (unsigned)(uint8_t)e[c->sym[i].off - 1] << 8 | (uint8_t)e[c->sym[i].off];
            bool word = v->spm_split && c->sym[i].n == 3 && !memcmp(e + c->sym[i].off, "\xE2\x96\x81", 3);
            if (!word && (v->pair_bits[pb >> 3] & (1u << (pb & 7)))) continue;
            c->sym[i - 1].next = -1;
            c->sym[i].prev = -1;
        }
        spm_merge(c, start, i - start);
        start = i;
    }
}

/* tokenizer_st_partition: carve special tokens out of the raw text, longest
 * token first, each token's occurrences left to right, whitespace next to an
 * LSTRIP/RSTRIP token dropped.  llama.cpp searches the text once per token;
 * this finds every occurrence of every token in one pass over the trie, then
 * replays the same decisions token by token on a map of the claimed bytes:
 * an occurrence is taken when its bytes are all unclaimed (it lies inside one
 * of llama.cpp's remaining fragments) and it starts at or after the end of
 * the token's previous one.  frags holds 2 * len + 1 entries; returns the
 * fragment count, or -1 when out of memory. */
typedef struct {
    int32_t k;    /* index in v->special */
    uint32_t pos; /* byte offset */
} occ;

static int cmp_occ(const void *a, const void *b) {
    const occ *x = a, *y = b;
    if (x->k != y->k) return x->k < y->k ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_occ_pos(const void *a, const void *b) {
    const occ *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static long partition(const tok_vocab *v, const char *text, size_t len, bool parse_special, frag *frags) {
    const uint8_t *t = (const uint8_t *)text;
    size_t n_occ = 0, cap_occ = 64;
    occ *oc = malloc(cap_occ * sizeof *oc);
    uint8_t *claimed = calloc(len ? len : 1, 1);
    if (!oc || !claimed) goto oom;
    for (size_t p = 0; p < len; p++) {
        size_t i = p;
        for (int32_t node = v->trie_root[t[p]]; node >= 0;) {
            int32_t k = v->trie[node].k;
            if (k >= 0 && (parse_special || !(v->attr[v->special[k]] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))) {
                if (n_occ == cap_occ) {
                    occ *o = realloc(oc, 2 * cap_occ * sizeof *oc);
                    if (!o) goto oom;
                    oc = o;
                    cap_occ *= 2;
                }
                oc[n_occ++] = (occ){k, (uint32_t)p};
            }
            if (++i >= len) break;
            for (node = v->trie[node].child; node >= 0 && v->trie[node].byte != t[i];) node = v->trie[node].sibling;
        }
    }
    qsort(oc, n_occ, sizeof *oc, cmp_occ);
    size_t n_acc = 0; /* accepted occurrences, compacted to the front of oc */
    for (size_t a = 0; a < n_occ;) {
        int32_t k = oc[a].k, id = v->special[k];
        unsigned attr = v->attr[id];
        size_t sl = v->text_len[id], last_end = 0;
        /* a tokenizer.json "normalized" token under a Prepend normalizer is
         * matched as U+2581 + its text in the normalized text: at the start,
         * or taking the space before it (HF normalizes the token's content) */
        bool need_space = v->prefix_mode == TOK_PREFIX_RUN && v->add_space_prefix && (attr & TOK_ATTR_NORMALIZED_);
        for (; a < n_occ && oc[a].k == k; a++) {
            size_t p = oc[a].pos;
            if (p < last_end || p + sl > len) continue;
            if (need_space && p > 0 && (t[p - 1] != ' ' || claimed[p - 1])) continue;
            size_t j;
            for (j = 0; j < sl && !claimed[p + j]; j++) {}
            if (j < sl) continue;
            memset(claimed + p, 1, sl);
            if (need_space && p > 0) claimed[p - 1] = 1;
            if (attr & TOK_ATTR_LSTRIP)
                for (j = p; j > 0 && !claimed[j - 1] && isspace(t[j - 1]); j--) claimed[j - 1] = 1;
            last_end = p + sl;
            if (attr & TOK_ATTR_RSTRIP)
                for (; last_end < len && !claimed[last_end] && isspace(t[last_end]); last_end++) claimed[last_end] = 1;
            oc[n_acc++] = (occ){id, (uint32_t)p}; /* k now holds the token id */
        }
    }
    /* accepted occurrences in text order (they are disjoint: positions are
     * unique); a sort, since the groups per token interleave in the text */
    qsort(oc, n_acc, sizeof *oc, cmp_occ_pos);
    size_t nf = 0, ai = 0;
    for (size_t p = 0; p < len;) {
        if (ai < n_acc && oc[ai].pos == p) {
            frags[nf++] = (frag){0, 0, oc[ai].k};
            p += v->text_len[oc[ai].k];
            ai++;
        } else if (claimed[p]) {
            p++; /* stripped whitespace */
        } else {
            size_t start = p;
            while (p < len && !claimed[p]) p++;
            frags[nf++] = (frag){(uint32_t)start, (uint32_t)(p - start), -1};
        }
    }
    free(oc);
    free(claimed);
    return (long)nf;
oom:
    free(oc);
    free(claimed);
    return -1;
}

size_t tok_encode_max(size_t len) {
    /* SPM: every byte a byte token, every space ▁ (3 byte tokens when ▁ is no
     * piece), a ▁ prefix per fragment; BPE: an invalid byte becomes U+FFFD, 3
     * tokens at most; WordPiece: "▁" + a 1-byte word, 4; UGM: the charsmap's
     * NFKC expansions (U+FDFA, 3 bytes, becomes 18 code points), at most a
     * token each, and a ▁ before each word; plus BOS/EOS/SEP */
    return 8 * len + 8;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
               int32_t *ids, size_t n_max, size_t *n_ids) {
    if (n_ids) *n_ids = 0;
    if (!v || (!text && len) || !n_ids || (n_max && !ids)) return TOK_EINVAL;
    if (len > UINT32_MAX / 4) return TOK_EINVAL; /* offsets are 32-bit */

    bool spm = v->type == TOK_TYPE_SPM;
    size_t n_space = 0;
    if (spm)
        for (size_t i = 0; i < len; i++) n_space += text[i] == ' ';
    size_t esc_cap = spm ? len + 2 * n_space + 3 : 0;
    bool specials = parse_special ? v->n_special > 0 : v->n_special_user > 0;
    size_t frag_cap = specials ? 2 * len + 1 : 1;

    size_t heap_cap = 2 * esc_cap;
    size_t bytes = esc_cap * sizeof(spm_sym) + heap_cap * sizeof(spm_bigram) + frag_cap * sizeof(frag) + esc_cap;
    char *block = malloc(bytes);
    if (!block) return TOK_ENOMEM;
    tok_out out = {ids, n_max, 0};
    spm_ctx c = {
        .v = v,
        .sym = (spm_sym *)block,
        .heap = (spm_bigram *)(block + esc_cap * sizeof(spm_sym)),
        .heap_cap = heap_cap,
        .out = &out,
    };
    frag *frags = (frag *)(block + esc_cap * sizeof(spm_sym) + heap_cap * sizeof(spm_bigram));
    c.esc = (char *)(frags + frag_cap);

    size_t nf;
    if (specials) {
        long r = partition(v, text, len, parse_special, frags);
        if (r < 0) {
            free(block);
            return TOK_ENOMEM;
        }
        nf = (size_t)r;
    } else {
        nf = 0;
        if (len) frags[nf++] = (frag){0, (uint32_t)len, -1};
    }

    int rc = 0;
    if (spm) { /* llama_vocab::impl::tokenize, LLAMA_VOCAB_TYPE_SPM */
        bool prev_special = true; /* a space prefix on the first fragment */
        if (add_special && v->add_bos) tok_emit(&out, v->bos);
        for (size_t f = 0; f < nf; f++) {
            if (frags[f].id >= 0) {
                tok_emit(&out, frags[f].id);
                /* TOK_PREFIX_RUN: a non-normalized added token ends the run, so
                 * the next text starts one; a normalized one took the U+2581
                 * (or the space) before it and the run goes on */
                bool norm = v->attr[frags[f].id] & TOK_ATTR_NORMALIZED_;
                prev_special = v->prefix_mode == TOK_PREFIX_RUN ? !norm : true;
            } else {
                bool prefix = v->prefix_mode == TOK_PREFIX_FIRST ? frags[f].off == 0 : prev_special;
                if (v->prefix_unless_space && frags[f].len && text[frags[f].off] == ' ') prefix = false;
                spm_fragment(&c, text + frags[f].off, frags[f].len, v->add_space_prefix && prefix);
                prev_special = false;
            }
        }
        if (add_special && v->add_eos) tok_emit(&out, v->eos);
        if (c.bad_byte) rc = TOK_EFORMAT;
    } else if (v->type == TOK_TYPE_UGM) { /* LLAMA_VOCAB_TYPE_UGM */
        if (add_special && v->add_bos && v->bos >= 0) tok_emit(&out, v->bos);
        for (size_t f = 0; f < nf && !rc; f++) {
            if (frags[f].id >= 0) tok_emit(&out, frags[f].id);
            else rc = tok_ugm_fragment(v, text + frags[f].off, frags[f].len, &out);
        }
        if (add_special && v->add_eos && v->eos >= 0) tok_emit(&out, v->eos);
    } else { /* LLAMA_VOCAB_TYPE_BPE and _WPM */
        bool wpm = v->type == TOK_TYPE_WPM;
        tok_scratch *s = tok_scratch_new();
        if (!s) rc = TOK_ENOMEM;
        /* WordPiece adds [CLS] ... [SEP] whatever add_bos says (llama.cpp) */
        if (add_special && (wpm || v->add_bos) && v->bos >= 0) tok_emit(&out, v->bos);
        for (size_t f = 0; f < nf && !rc; f++) {
            if (frags[f].id >= 0) tok_emit(&out, frags[f].id);
            else if (wpm) rc = tok_wpm_fragment(v, s, text + frags[f].off, frags[f].len, &out);
            else rc = tok_bpe_fragment(v, s, text + frags[f].off, frags[f].len, &out);
        }
        if (add_special && wpm && v->sep >= 0) tok_emit(&out, v->sep);
        if (add_special && !wpm && v->add_eos) tok_emit(&out, v->eos);
        tok_scratch_free(s);
    }
    free(block);
    if (rc) return rc;
    *n_ids = out.n;
    return out.n > n_max ? TOK_ETOOSMALL : 0;
}

/* ---- decoding ------------------------------------------------------------------ */

const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->text_len[id];
    return v->text + v->text_off[id];
}

const char *tok_token_bytes(const tok_vocab *v, int32_t id, bool special, size_t *len) {
    if (!v || id < 0 || id >= v->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    const char *p = v->dec + v->dec_off[id];
    if (!special && (v->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
        *len = 0;
        return p + v->dec_len[id]; /* the NUL: an empty string */
    }
    *len = v->dec_len[id];
    return p;
}

int tok_decode_token(const tok_vocab *v, int32_t id, bool special, char *buf, size_t cap) {
    size_t n;
    const char *p = tok_token_bytes(v, id, special, &n);
    if (!p) return TOK_EINVAL;
    if (n <= cap && buf) {
        memcpy(buf, p, n);
        if (n < cap) buf[n] = 0;
    }
    return (int)n;
}

/* llama_vocab::impl::detokenize's clean_spaces passes, in place; returns the new length. */
static size_t clean_spaces(char *t, size_t total) {
    /* " ?", " !", " .", " ," lose the space */
    size_t n1 = total, o = total ? 1 : 0;
    for (size_t i = 1; i < n1; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o--;
        t[o++] = x;
    }
    /* " ' " → "'" */
    size_t n2 = o;
    o = n2 ? 1 : 0;
    for (size_t i = 1; i < n2; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
            o--;
            t[++i] = 0;
        }
        t[o++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space */
    size_t n3 = o;
    o = n3 ? 1 : 0;
    for (size_t i = 1; i < n3; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') o--;
            else if (i + 2 < n3 && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) o--;
        }
        t[o++] = x;
    }
    return o;
}

int tok_decode(const tok_vocab *v, const int32_t *ids, size_t n_ids, unsigned flags, char *buf,
               size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || (!ids && n_ids) || !n_out || (cap && !buf)) return TOK_EINVAL;
    bool special = flags & TOK_SPECIAL;
    bool remove_space = v->add_space_prefix;
    size_t i0 = 0, n = n_ids;
    if ((flags & TOK_REMOVE_SPECIAL) && v->add_bos && n > 0 && ids[0] == v->bos) {
        remove_space = false;
        i0 = 1;
    }
    if ((flags & TOK_REMOVE_SPECIAL) && v->add_eos && n > i0 && ids[n - 1] == v->eos) n--;
    size_t total = 0;
    for (size_t i = i0; i < n; i++) {
        size_t l;
        const char *p = tok_token_bytes(v, ids[i], special, &l);
        if (!p) return TOK_EINVAL;
        if (remove_space && l && p[0] == ' ') p++, l--;
        remove_space = false;
        if (l && total + l <= cap) memcpy(buf + total, p, l);
        total += l;
    }
    if (total > cap) {
        *n_out = total;
        return TOK_ETOOSMALL;
    }
    if (v->clean_spaces) total = clean_spaces(buf, total);
    *n_out = total;
    if (total < cap) buf[total] = 0;
    return 0;
}

/* ---- streaming detokenization ---------------------------------------------------- */

struct tok_stream {
    const tok_vocab *v;
    unsigned flags;
    bool first;        /* nothing fed since new/reset */
    uint8_t pend[4];   /* bytes of an unfinished UTF-8 sequence */
    uint8_t n_pend, need;
    char *out;         /* (cap) */
    size_t cap, n;
};

int tok_stream_new(const tok_vocab *v, unsigned flags, tok_stream **out) {
    if (!out) return TOK_EINVAL;
    *out = NULL;
    if (!v) return TOK_EINVAL;
    tok_stream *s = calloc(1, sizeof *s);
    if (!s) return TOK_ENOMEM;
    /* per put: at most 3 held bytes plus one piece, each input byte giving at
     * most 3 output bytes (U+FFFD), plus the NUL */
    s->cap = 3 * ((size_t)v->max_dec_len + 3) + 1;
    s->out = malloc(s->cap);
    if (!s->out) {
        free(s);
        return TOK_ENOMEM;
    }
    s->v = v;
    s->flags = flags;
    tok_stream_reset(s);
    *out = s;
    return 0;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->out);
    free(s);
}

void tok_stream_reset(tok_stream *s) {
    s->first = true;
    s->n_pend = 0;
    s->need = 0;
    s->n = 0;
}

static inline void out_fffd(tok_stream *s) {
    s->out[s->n++] = (char)0xEF;
    s->out[s->n++] = (char)0xBF;
    s->out[s->n++] = (char)0xBD;
}

/* One byte through the UTF-8 validator (Unicode Table 3-7 well-formed
 * sequences; an ill-formed maximal subpart becomes one U+FFFD). */
static void stream_byte(tok_stream *s, uint8_t b) {
    for (;;) {
        if (s->n_pend == 0) {
            if (b < 0x80) {
                s->out[s->n++] = (char)b;
            } else if (b >= 0xC2 && b <= 0xDF) {
                s->pend[0] = b, s->n_pend = 1, s->need = 2;
            } else if (b >= 0xE0 && b <= 0xEF) {
                s->pend[0] = b, s->n_pend = 1, s->need = 3;
            } else if (b >= 0xF0 && b <= 0xF4) {
                s->pend[0] = b, s->n_pend = 1, s->need = 4;
            } else {
                out_fffd(s);
            }
            return;
        }
        uint8_t lo = 0x80, hi = 0xBF;
        if (s->n_pend == 1) {
            switch (s->pend[0]) {
            case 0xE0: lo = 0xA0; break;
            case 0xED: hi = 0x9F; break;
            case 0xF0: lo = 0x90; break;
            case 0xF4: hi = 0x8F; break;
            default: break;
            }
        }
        if (b >= lo && b <= hi) {
            s->pend[s->n_pend++] = b;
            if (s->n_pend == s->need) {
                memcpy(s->out + s->n, s->pend, s->n_pend);
                s->n += s->n_pend;
                s->n_pend = 0;
            }
            return;
        }
        out_fffd(s); /* the held prefix is ill-formed; b starts afresh */
        s->n_pend = 0;
    }
}

const char *tok_stream_put(tok_stream *s, int32_t id, size_t *len) {
    size_t l;
    const char *p = tok_token_bytes(s->v, id, s->flags & TOK_SPECIAL, &l);
    s->n = 0;
    if (!p) {
        *len = 0;
        return NULL;
    }
    if (s->first && (s->flags & TOK_TEXT_START) && s->v->add_space_prefix && l && p[0] == ' ') p++, l--;
    s->first = false;
    for (size_t i = 0; i < l; i++) stream_byte(s, (uint8_t)p[i]);
    s->out[s->n] = 0;
    *len = s->n;
    return s->out;
}

const char *tok_stream_flush(tok_stream *s, size_t *len) {
    s->n = 0;
    if (s->n_pend) {
        out_fffd(s);
        s->n_pend = 0;
    }
    s->out[s->n] = 0;
    *len = s->n;
    return s->out;
}
