/*
 * tok.c — SentencePiece-style (SPM) tokenizer, a C port of what llama.cpp
 * does for `tokenizer.ggml.model = "llama"` vocabularies (src/llama-vocab.cpp:
 * llm_tokenizer_spm_session, llama_vocab::impl::{load, tokenize,
 * tokenizer_st_partition, token_to_piece, detokenize}).
 *
 * The vocabulary copies the pieces out of the GGUF mapping into one pool, so
 * it outlives the gguf_file.  Piece → id lookups go through an open-addressing
 * hash table (XXH3, linear probing, 32 more hash bits stored per slot so a
 * probe only compares bytes on a near-certain hit).  Decoded pieces (▁ → ' ',
 * <0xXX> → byte) are precomputed once, so decoding is a table lookup.
 *
 * Encoding allocates one scratch block per call, sized from the input; the
 * merge loop itself never allocates.  Before merging, a fragment is cut where
 * two adjacent bytes form a pair that occurs in no piece: no merge can cross
 * such a cut, so merging the runs one by one gives llama.cpp's result while
 * the heap stays small (4x faster on 1 MB of English with the 32k vocab).  The SPM merge queue is a binary heap
 * ordered by (score desc, left index asc), llama.cpp's llm_bigram_spm
 * comparator.  That order is total over the entries that can be live at the
 * same time (see spm_heap_before), so the result matches std::priority_queue
 * exactly, whatever the heap implementation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "tok.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define TOK_ATTR_EOG_ (1u << 14) /* private: end-of-generation */

struct tok_vocab {
    int32_t n_vocab;
    char *text;          /* pool of raw pieces, each NUL-terminated */
    uint32_t *text_off;  /* (n_vocab) */
    uint32_t *text_len;  /* (n_vocab) bytes, without the NUL */
    char *dec;           /* pool of decoded pieces (special rendering), NUL-terminated */
    uint32_t *dec_off;   /* (n_vocab) */
    uint32_t *dec_len;   /* (n_vocab) */
    float *score;        /* (n_vocab) */
    uint16_t *attr;      /* (n_vocab) TOK_ATTR_* | TOK_ATTR_EOG_ */

    int32_t *slot_id;    /* (slot_mask + 1) piece → id table; -1 = empty */
    uint32_t *slot_hash; /* (slot_mask + 1) high 32 bits of the slot's XXH3 */
    uint32_t slot_mask;

    int32_t byte_id[256]; /* byte fallback: <0xXX>, else the 1-byte piece, else unk, else -1 */
    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix;
    uint32_t max_text_len; /* longest raw piece, bytes: longer bigrams are not looked up */
    /* bit (a << 8 | b) set when some piece contains byte a followed by byte b.
     * Where the text has a byte pair no piece contains, no merge can ever
     * span it, so the SPM merge runs on each side independently (with the
     * same result) — that keeps the merge heap small and in cache. */
    uint8_t pair_bits[256 * 256 / 8];
    uint32_t max_dec_len;  /* longest decoded piece, bytes */

    int32_t *special;    /* (n_special) control/user-defined/unknown ids, longest text first */
    int n_special;
    int n_special_user;  /* of those, user-defined and neither control nor unknown */
};

/* ---- small helpers --------------------------------------------------------- */

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

/* Bytes of the UTF-8 sequence a lead byte announces, by its high nibble
 * (llama.cpp unicode_len_utf8): continuation and invalid bytes count as 1. */
static const uint8_t utf8_len_tab[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

static inline uint64_t piece_hash(const char *s, size_t n) { return XXH3_64bits(s, n); }

static inline int32_t vocab_find(const tok_vocab *v, const char *s, size_t n) {
    uint64_t h = piece_hash(s, n);
    uint32_t check = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & v->slot_mask;; i = (i + 1) & v->slot_mask) {
        int32_t id = v->slot_id[i];
        if (id < 0) return -1;
        if (v->slot_hash[i] == check && v->text_len[id] == n &&
            memcmp(v->text + v->text_off[id], s, n) == 0)
            return id;
    }
}

/* Insert id; returns the id already holding the same text, or -1. */
static int32_t vocab_insert(tok_vocab *v, int32_t id) {
    const char *s = v->text + v->text_off[id];
    size_t n = v->text_len[id];
    uint64_t h = piece_hash(s, n);
    uint32_t check = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & v->slot_mask;; i = (i + 1) & v->slot_mask) {
        int32_t o = v->slot_id[i];
        if (o < 0) {
            v->slot_id[i] = id;
            v->slot_hash[i] = check;
            return -1;
        }
        if (v->slot_hash[i] == check && v->text_len[o] == n && memcmp(v->text + v->text_off[o], s, n) == 0)
            return o;
    }
}

static int32_t find_cstr(const tok_vocab *v, const char *s) { return vocab_find(v, s, strlen(s)); }

/* ---- loading ----------------------------------------------------------------- */

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

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

static int cmp_special(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    /* longest first (llama.cpp sorts by text size, descending); ties by id so
     * the order does not depend on the sort implementation */
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Well-known end-of-turn pieces (llama.cpp load(): special_eot_id detection and
 * the special_eog_ids list, as far as they concern SPM vocabularies). */
static const char *const eot_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
};
static const char *const eog_extra_names[] = {"<|eom_id|>"};

static void mark_eog(tok_vocab *v, int32_t id) {
    if (id >= 0 && id < v->n_vocab) v->attr[id] |= TOK_ATTR_EOG_;
}

static int build_decoded(tok_vocab *v) {
    size_t total = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) total += (size_t)v->text_len[i] + 1;
    v->dec = malloc(total);
    v->dec_off = malloc((size_t)v->n_vocab * sizeof *v->dec_off);
    v->dec_len = malloc((size_t)v->n_vocab * sizeof *v->dec_len);
    if (!v->dec || !v->dec_off || !v->dec_len) return TOK_ENOMEM;
    size_t o = 0;
    v->max_dec_len = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        const char *t = v->text + v->text_off[i];
        uint32_t n = v->text_len[i], m = 0;
        char *d = v->dec + o;
        unsigned a = v->attr[i];
        if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            memcpy(d, t, n);
            m = n;
        } else if (a & TOK_ATTR_NORMAL) { /* llama_unescape_whitespace */
            for (uint32_t j = 0; j < n;) {
                if (j + 3 <= n && (uint8_t)t[j] == 0xE2 && (uint8_t)t[j + 1] == 0x96 &&
                    (uint8_t)t[j + 2] == 0x81) {
                    d[m++] = ' ';
                    j += 3;
                } else {
                    d[m++] = t[j++];
                }
            }
        } else if (a & TOK_ATTR_BYTE) { /* token_to_byte: strtol(text.substr(3, 2), 16) */
            char hex[3] = {0, 0, 0};
            if (n > 3) hex[0] = t[3];
            if (n > 4) hex[1] = t[4];
            d[m++] = (char)strtol(hex, NULL, 16);
        } /* unused / undefined: nothing */
        d[m] = 0;
        v->dec_off[i] = (uint32_t)o;
        v->dec_len[i] = m;
        if (m > v->max_dec_len) v->max_dec_len = m;
        o += (size_t)m + 1;
    }
    return 0;
}

static int load(const gguf_file *g, tok_vocab *v, char *err, size_t err_len) {
    int rc;
    const gguf_value *model = gguf_get(g, "tokenizer.ggml.model");
    if (!model) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.model missing (no vocabulary in this file)");
    if (model->type != GGUF_VT_STRING)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.model: type %s, expected string",
                    gguf_vtype_name(model->type));
    if (!gguf_str_eq(model->v.str, "llama"))
        return fail(err, err_len, TOK_EUNSUPPORTED,
                    "tok: tokenizer.ggml.model '%.*s' not supported (only SPM 'llama')",
                    (int)(model->v.str.len > 64 ? 64 : model->v.str.len), model->v.str.ptr);

    const gguf_value *toks;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, err, err_len) != 0) return TOK_EFORMAT;
    uint64_t n = toks->v.arr.n;
    if (n == 0 || n > (uint64_t)INT32_MAX / 2)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.tokens: %llu tokens, expected 1..%d",
                    (unsigned long long)n, INT32_MAX / 2);
    v->n_vocab = (int32_t)n;

    const gguf_value *scores, *types;
    if ((rc = opt_num_arr(g, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, GGUF_VT_INT32, n, &scores, err, err_len)))
        return rc;
    if ((rc = opt_num_arr(g, "tokenizer.ggml.token_type", GGUF_VT_INT32, GGUF_VT_INT32, n, &types, err, err_len)))
        return rc;

    /* text pool: empty pieces become "[EMPTY_<id>]" as in llama.cpp */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += (toks->v.arr.strs[i].len ? toks->v.arr.strs[i].len : 20) + 1;
    if (total > UINT32_MAX)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.tokens: %llu bytes of text, limit %u",
                    (unsigned long long)total, UINT32_MAX);
    v->text = malloc(total);
    v->text_off = malloc(n * sizeof *v->text_off);
    v->text_len = malloc(n * sizeof *v->text_len);
    v->score = malloc(n * sizeof *v->score);
    v->attr = malloc(n * sizeof *v->attr);
    uint32_t n_slots = 16;
    while (n_slots < 2 * n) n_slots *= 2;
    v->slot_mask = n_slots - 1;
    v->slot_id = malloc((size_t)n_slots * sizeof *v->slot_id);
    v->slot_hash = malloc((size_t)n_slots * sizeof *v->slot_hash);
    if (!v->text || !v->text_off || !v->text_len || !v->score || !v->attr || !v->slot_id || !v->slot_hash)
        return fail(err, err_len, TOK_ENOMEM, "tok: out of memory for %llu tokens", (unsigned long long)n);
    memset(v->slot_id, 0xff, (size_t)n_slots * sizeof *v->slot_id);

    static const uint16_t type_attr[7] = {
        TOK_ATTR_UNDEFINED, TOK_ATTR_NORMAL, TOK_ATTR_UNKNOWN, TOK_ATTR_CONTROL,
        TOK_ATTR_USER_DEFINED, TOK_ATTR_UNUSED, TOK_ATTR_BYTE,
    };
    size_t o = 0;
    v->max_text_len = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        gguf_str s = toks->v.arr.strs[i];
        v->text_off[i] = (uint32_t)o;
        if (s.len) {
            memcpy(v->text + o, s.ptr, s.len);
            v->text_len[i] = (uint32_t)s.len;
        } else {
            v->text_len[i] = (uint32_t)snprintf(v->text + o, 21, "[EMPTY_%d]", (int)i);
        }
        v->text[o + v->text_len[i]] = 0;
        o += (size_t)v->text_len[i] + 1;
        if (v->text_len[i] > v->max_text_len) v->max_text_len = v->text_len[i];

        if (!scores) v->score[i] = 0.0f;
        else if (scores->v.arr.type == GGUF_VT_FLOAT32) {
            uint32_t bits = rd_u32(scores->v.arr.data, (uint64_t)i);
            memcpy(&v->score[i], &bits, 4);
        } else {
            v->score[i] = (float)(int32_t)rd_u32(scores->v.arr.data, (uint64_t)i);
        }
        if (!types) v->attr[i] = TOK_ATTR_NORMAL;
        else {
            int32_t t = (int32_t)rd_u32(types->v.arr.data, (uint64_t)i);
            v->attr[i] = (t >= 0 && t < 7) ? type_attr[t] : TOK_ATTR_UNDEFINED;
        }
        const uint8_t *t = (const uint8_t *)v->text + v->text_off[i];
        for (uint32_t j = 1; j < v->text_len[i]; j++) {
            unsigned pb = (unsigned)t[j - 1] << 8 | t[j];
            v->pair_bits[pb >> 3] |= (uint8_t)(1u << (pb & 7));
        }
        int32_t dup = vocab_insert(v, i);
        if (dup >= 0)
            return fail(err, err_len, TOK_EFORMAT, "tok: duplicate token in vocabulary: '%.*s' has ids %d and %d",
                        (int)(v->text_len[i] > 64 ? 64 : v->text_len[i]), v->text + v->text_off[i], (int)dup, (int)i);
    }

    /* flags: SPM defaults, then the GGUF keys */
    v->add_bos = true;
    v->add_eos = false;
    v->add_space_prefix = true;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err, err_len))) return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err, err_len))) return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err, err_len))) return rc;

    /* special ids: SPM defaults; a default out of range is disabled, a key
     * value out of range keeps the default (llama.cpp warns and does the same) */
    struct { const char *key; int32_t *id; } specials[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},     {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},     {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk}, {"tokenizer.ggml.padding_token_id", &v->pad},
    };
    v->bos = 1, v->eos = 2, v->unk = 0, v->eot = -1, v->eom = -1, v->pad = -1;
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        int32_t *id = specials[k].id;
        if (*id >= v->n_vocab) *id = -1;
        uint32_t val;
        bool found;
        if ((rc = opt_u32(g, specials[k].key, &val, &found, err, err_len))) return rc;
        if (found && val < (uint32_t)v->n_vocab) *id = (int32_t)val;
    }
    if (v->add_bos && v->bos < 0)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.add_bos_token is true, but there is no BOS token");
    if (v->add_eos && v->eos < 0)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.add_eos_token is true, but there is no EOS token");

    /* end of generation: EOT by text when not given; the well-known names are
     * EOG and, when they are not control tokens, become control tokens */
    for (size_t k = 0; k < sizeof eot_names / sizeof eot_names[0]; k++) {
        int32_t id = find_cstr(v, eot_names[k]);
        if (id < 0) continue;
        if (v->eot < 0) v->eot = id;
        v->attr[id] |= TOK_ATTR_CONTROL;
        mark_eog(v, id);
    }
    for (size_t k = 0; k < sizeof eog_extra_names / sizeof eog_extra_names[0]; k++) {
        int32_t id = find_cstr(v, eog_extra_names[k]);
        if (id < 0) continue;
        if (v->eom < 0) v->eom = id;
        v->attr[id] |= TOK_ATTR_CONTROL;
        mark_eog(v, id);
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, v->eom);

    /* the special-token cache of tokenizer_st_partition */
    v->n_special = 0;
    v->n_special_user = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) v->n_special++;
    v->special = malloc((size_t)(v->n_special ? v->n_special : 1) * sizeof *v->special);
    if (!v->special) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    v->n_special = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        unsigned a = v->attr[i];
        if (!(a & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))) continue;
        v->special[v->n_special++] = i;
        if (!(a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) v->n_special_user++;
    }
    len_id *order = malloc((size_t)(v->n_special ? v->n_special : 1) * sizeof *order);
    if (!order) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    for (int k = 0; k < v->n_special; k++) order[k] = (len_id){v->text_len[v->special[k]], v->special[k]};
    qsort(order, (size_t)v->n_special, sizeof *order, cmp_special);
    for (int k = 0; k < v->n_special; k++) v->special[k] = order[k].id;
    free(order);

    /* per-model attribute fix-ups llama.cpp applies by name: Phi-3 strips
     * whitespace right of its special tokens */
    const gguf_value *name = gguf_get(g, "general.name");
    if (name && name->type == GGUF_VT_STRING) {
        char low[256];
        size_t m = name->v.str.len < sizeof low - 1 ? name->v.str.len : sizeof low - 1;
        for (size_t i = 0; i < m; i++) low[i] = (char)tolower((unsigned char)name->v.str.ptr[i]);
        low[m] = 0;
        if (strstr(low, "phi-3") || strstr(low, "phi3")) {
            for (int k = 0; k < v->n_special; k++) v->attr[v->special[k]] |= TOK_ATTR_RSTRIP;
            int32_t id = find_cstr(v, "</s>");
            if (id >= 0) v->attr[id] |= TOK_ATTR_RSTRIP;
            static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (size_t k = 0; k < 3; k++)
                if ((id = find_cstr(v, keep[k])) >= 0) v->attr[id] &= (uint16_t)~TOK_ATTR_RSTRIP;
        }
    }

    /* byte fallback (llama_vocab::byte_to_token) */
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = find_cstr(v, hex);
        if (id < 0) {
            char one = (char)b;
            id = vocab_find(v, &one, 1);
        }
        v->byte_id[b] = id >= 0 ? id : v->unk;
    }

    if (build_decoded(v)) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    return 0;
}

int tok_load_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = 0;
    if (!out) return fail(err, err_len, TOK_EINVAL, "tok: out is NULL");
    *out = NULL;
    if (!g) return fail(err, err_len, TOK_EINVAL, "tok: gguf file is NULL");
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    int rc = load(g, v, err, err_len);
    if (rc) {
        tok_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
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
    free(v);
}

/* ---- queries ----------------------------------------------------------------- */

int tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
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
    int32_t *ids;       /* output */
    size_t n_max, n;
    bool bad_byte;      /* a byte the vocab cannot represent */
} spm_ctx;

static inline void emit(spm_ctx *c, int32_t id) {
    if (c->n < c->n_max) c->ids[c->n] = id;
    c->n++;
}

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
            emit(c, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) { /* byte fallback */
            int32_t bid = v->byte_id[(uint8_t)c->esc[y->off + j]];
            if (bid < 0) c->bad_byte = true;
            else emit(c, bid);
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

    /* merge each run of symbols between "unmergeable" byte pairs on its own */
    int32_t start = 0;
    for (int32_t i = 1; i <= ns; i++) {
        if (i < ns) {
            unsigned pb = (unsigned)(uint8_t)e[c->sym[i].off - 1] << 8 | (uint8_t)e[c->sym[i].off];
            if (v->pair_bits[pb >> 3] & (1u << (pb & 7))) continue;
            c->sym[i - 1].next = -1;
            c->sym[i].prev = -1;
        }
        spm_merge(c, start, i - start);
        start = i;
    }
}

/* tokenizer_st_partition: carve special tokens out of the raw text, longest
 * token first, each token's occurrences left to right.  frags/tmp hold
 * (2 * len + 1) entries; returns the fragment count. */
static size_t partition(const tok_vocab *v, const char *text, size_t len, bool parse_special,
                        frag *frags, frag *tmp) {
    size_t nf = 0;
    if (len) frags[nf++] = (frag){0, (uint32_t)len, -1};
    for (int k = 0; k < v->n_special; k++) {
        int32_t sid = v->special[k];
        unsigned a = v->attr[sid];
        if (!parse_special && (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        const char *st = v->text + v->text_off[sid];
        size_t sl = v->text_len[sid];
        size_t no = 0;
        for (size_t f = 0; f < nf; f++) {
            if (frags[f].id >= 0) {
                tmp[no++] = frags[f];
                continue;
            }
            size_t base = frags[f].off, blen = frags[f].len;
            while (blen > 0) {
                const char *p = memmem(text + base, blen, st, sl);
                if (!p) {
                    tmp[no++] = (frag){(uint32_t)base, (uint32_t)blen, -1};
                    break;
                }
                size_t match = (size_t)(p - text);
                size_t left_len = match - base;
                if (a & TOK_ATTR_LSTRIP)
                    while (left_len > 0 && isspace((unsigned char)text[base + left_len - 1])) left_len--;
                if (left_len > 0) tmp[no++] = (frag){(uint32_t)base, (uint32_t)left_len, -1};
                tmp[no++] = (frag){0, 0, sid};
                size_t r_off = match + sl, r_len = base + blen - r_off;
                if (a & TOK_ATTR_RSTRIP)
                    while (r_len > 0 && isspace((unsigned char)text[r_off])) r_off++, r_len--;
                base = r_off;
                blen = r_len;
            }
        }
        memcpy(frags, tmp, no * sizeof *frags);
        nf = no;
    }
    return nf;
}

size_t tok_encode_max(size_t len) {
    /* every byte a byte token, every space ▁ (3 byte tokens when ▁ is no
     * piece), a ▁ prefix per fragment, BOS and EOS */
    return 3 * len + 3 * (len + 1) + 2;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
               int32_t *ids, size_t n_max, size_t *n_ids) {
    if (n_ids) *n_ids = 0;
    if (!v || (!text && len) || !n_ids || (n_max && !ids)) return TOK_EINVAL;
    if (len > UINT32_MAX / 4) return TOK_EINVAL; /* offsets are 32-bit */

    size_t n_space = 0;
    for (size_t i = 0; i < len; i++) n_space += text[i] == ' ';
    size_t esc_cap = len + 2 * n_space + 3;
    bool specials = parse_special ? v->n_special > 0 : v->n_special_user > 0;
    size_t frag_cap = specials ? 2 * len + 1 : 1;

    size_t heap_cap = 2 * esc_cap;
    size_t bytes = esc_cap * sizeof(spm_sym) + heap_cap * sizeof(spm_bigram) +
                   2 * frag_cap * sizeof(frag) + esc_cap;
    char *block = malloc(bytes);
    if (!block) return TOK_ENOMEM;
    spm_ctx c = {
        .v = v,
        .sym = (spm_sym *)block,
        .heap = (spm_bigram *)(block + esc_cap * sizeof(spm_sym)),
        .heap_cap = heap_cap,
        .ids = ids,
        .n_max = n_max,
    };
    frag *frags = (frag *)(block + esc_cap * sizeof(spm_sym) + heap_cap * sizeof(spm_bigram));
    frag *tmp = frags + frag_cap;
    c.esc = (char *)(tmp + frag_cap);

    size_t nf;
    if (specials) {
        nf = partition(v, text, len, parse_special, frags, tmp);
    } else {
        nf = 0;
        if (len) frags[nf++] = (frag){0, (uint32_t)len, -1};
    }

    /* llama_vocab::impl::tokenize, LLAMA_VOCAB_TYPE_SPM */
    bool prev_special = true; /* a space prefix on the first fragment */
    if (add_special && v->add_bos) emit(&c, v->bos);
    for (size_t f = 0; f < nf; f++) {
        if (frags[f].id >= 0) {
            emit(&c, frags[f].id);
            prev_special = true;
        } else {
            spm_fragment(&c, text + frags[f].off, frags[f].len, v->add_space_prefix && prev_special);
            prev_special = false;
        }
    }
    if (add_special && v->add_eos) emit(&c, v->eos);
    free(block);

    if (c.bad_byte) return TOK_EFORMAT;
    *n_ids = c.n;
    return c.n > n_max ? TOK_ETOOSMALL : 0;
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
        if (total + l <= cap) memcpy(buf + total, p, l);
        total += l;
    }
    *n_out = total;
    if (total > cap) return TOK_ETOOSMALL;
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
