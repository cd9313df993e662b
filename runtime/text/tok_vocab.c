/*
 * tok_vocab.c — the tokenizer's vocabulary (tok_impl.h): the piece pool, the
 * piece -> id hash table, special tokens and end-of-generation detection,
 * decoded pieces and the byte trie.  Built by the loaders (tok.c from GGUF,
 * tok_hf.c from tokenizer.json) and read by every tokenizer model (SPM in
 * tok.c, BPE and WordPiece in tok_bpe.c), so it sits below all of them.
 *
 * The vocabulary copies the pieces out of the GGUF mapping into one pool, so
 * it outlives the gguf_file.  Piece -> id lookups go through an
 * open-addressing hash table (XXH3, linear probing, 32 more hash bits stored
 * per slot so a probe only compares bytes on a near-certain hit).  Decoded
 * pieces (▁ -> ' ', <0xXX> -> byte, GPT-2 characters -> bytes) are
 * precomputed once, so decoding is a table lookup.
 */
#include "tok_impl.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "unicode.h"

/* ---- small helpers --------------------------------------------------------- */

int tok_fail(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}
#define fail tok_fail

static inline uint64_t piece_hash(const char *s, size_t n) { return XXH3_64bits(s, n); }

int32_t tok_sym_find(const tok_vocab *v, const char *s, size_t n) {
    uint64_t h = piece_hash(s, n);
    uint32_t check = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & v->slot_mask;; i = (i + 1) & v->slot_mask) {
        int32_t id = v->slot_id[i];
        if (id < 0) return -1;
        if (v->slot_hash[i] == check && v->text_len[id] == n && memcmp(v->text + v->text_off[id], s, n) == 0)
            return id;
    }
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n) {
    int32_t id = tok_sym_find(v, s, n);
    return id < v->n_vocab ? id : -1;
}
#define vocab_find tok_vocab_find

/* Insert string id (its text is in the pool); returns the id already holding
 * the same text, or -1. */
static int32_t slot_insert(tok_vocab *v, int32_t id) {
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

/* (Re)build the hash for n_slots >= 2 * capacity strings. */
static int slots_build(tok_vocab *v, uint32_t n_slots) {
    int32_t *ids = malloc((size_t)n_slots * sizeof *ids);
    uint32_t *hs = malloc((size_t)n_slots * sizeof *hs);
    if (!ids || !hs) {
        free(ids);
        free(hs);
        return TOK_ENOMEM;
    }
    free(v->slot_id);
    free(v->slot_hash);
    v->slot_id = ids;
    v->slot_hash = hs;
    v->slot_mask = n_slots - 1;
    memset(ids, 0xff, (size_t)n_slots * sizeof *ids);
    for (int32_t i = 0; i < v->n_strings; i++) slot_insert(v, i);
    return 0;
}

static int32_t find_cstr(const tok_vocab *v, const char *s) { return vocab_find(v, s, strlen(s)); }

/* ---- building the vocabulary ---------------------------------------------------- */

int tok_vocab_alloc(tok_vocab *v, int32_t n, char *err, size_t err_len) {
    if (n <= 0 || n > INT32_MAX / 4)
        return fail(err, err_len, TOK_EFORMAT, "tok: %d tokens, expected 1..%d", (int)n, INT32_MAX / 4);
    v->n_vocab = n;
    v->n_strings = 0;
    v->cap_strings = n;
    v->text_cap = (size_t)n * 8 + 64;
    v->text = malloc(v->text_cap);
    v->text_off = malloc((size_t)n * sizeof *v->text_off);
    v->text_len = malloc((size_t)n * sizeof *v->text_len);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->attr = calloc((size_t)n, sizeof *v->attr);
    if (!v->text || !v->text_off || !v->text_len || !v->score || !v->attr)
        return fail(err, err_len, TOK_ENOMEM, "tok: out of memory for %d tokens", (int)n);
    uint32_t n_slots = 16;
    while (n_slots < 2 * (uint32_t)n) n_slots *= 2;
    if (slots_build(v, n_slots)) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->sep = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    return 0;
}

/* Append a string to the pool as string id (== n_strings). */
static int pool_add(tok_vocab *v, const char *s, size_t n) {
    if (n > UINT32_MAX / 2 || v->text_used + n + 1 > UINT32_MAX) return TOK_EFORMAT;
    if (v->text_used + n + 1 > v->text_cap) {
        size_t cap = v->text_cap * 2;
        while (cap < v->text_used + n + 1) cap *= 2;
        char *t = realloc(v->text, cap);
        if (!t) return TOK_ENOMEM;
        v->text = t;
        v->text_cap = cap;
    }
    int32_t id = v->n_strings;
    v->text_off[id] = (uint32_t)v->text_used;
    v->text_len[id] = (uint32_t)n;
    memcpy(v->text + v->text_used, s, n);
    v->text[v->text_used + n] = 0;
    v->text_used += n + 1;
    return 0;
}

int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n, float score, uint16_t attr, char *err,
                  size_t err_len) {
    if (id != v->n_strings || id >= v->n_vocab)
        return fail(err, err_len, TOK_EINVAL, "tok: token %d set out of order", (int)id);
    char empty[24];
    if (n == 0) { /* llama.cpp: empty pieces become "[EMPTY_<id>]" */
        n = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)id);
        s = empty;
    }
    int rc = pool_add(v, s, n);
    if (rc == TOK_ENOMEM) return fail(err, err_len, rc, "tok: out of memory");
    if (rc) return fail(err, err_len, rc, "tok: token %d: %zu bytes, too long", (int)id, n);
    v->n_strings++;
    v->score[id] = score;
    v->attr[id] = attr;
    if (n > v->max_text_len) v->max_text_len = (uint32_t)n;
    const uint8_t *t = (const uint8_t *)s;
    for (size_t j = 1; j < n; j++) {
        unsigned pb = (unsigned)t[j - 1] << 8 | t[j];
        v->pair_bits[pb >> 3] |= (uint8_t)(1u << (pb & 7));
    }
    int32_t dup = slot_insert(v, id);
    if (dup >= 0) {
        v->n_strings--; /* keep the table consistent for tok_free */
        return fail(err, err_len, TOK_EFORMAT, "tok: duplicate token in vocabulary: '%.*s' has ids %d and %d",
                    (int)(n > 64 ? 64 : n), s, (int)dup, (int)id);
    }
    return 0;
}

int32_t tok_intern(tok_vocab *v, const char *s, size_t n) {
    int32_t id = tok_sym_find(v, s, n);
    if (id >= 0) return id;
    if (v->n_strings == INT32_MAX / 2) return -1;
    if (v->n_strings == v->cap_strings) {
        int32_t cap = v->cap_strings * 2;
        uint32_t *o = realloc(v->text_off, (size_t)cap * sizeof *o);
        if (!o) return -1;
        v->text_off = o;
        uint32_t *l = realloc(v->text_len, (size_t)cap * sizeof *l);
        if (!l) return -1;
        v->text_len = l;
        v->cap_strings = cap;
    }
    if ((uint32_t)v->n_strings + 1 > (v->slot_mask + 1) / 2 && slots_build(v, 2 * (v->slot_mask + 1))) return -1;
    if (pool_add(v, s, n)) return -1;
    id = v->n_strings++;
    slot_insert(v, id);
    return id;
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

/* Well-known token texts llama.cpp's load() recognises (as of c392e509, the
 * project reference): end-of-turn candidates for EOT, EOM, the FIM tokens, and
 * the set that ends generation.  A match that is not a control token becomes
 * one, as llama.cpp does.  Candidates are tried in list order (llama.cpp walks
 * an unordered_map; its first hit is what the references show). */
#define FW "\xef\xbd\x9c" /* ｜ */
#define SP "\xe2\x96\x81" /* ▁ */
static const char *const eot_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<" FW "end" SP "of" SP "sentence" FW ">", NULL,
};
static const char *const eom_names[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_names[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<" FW "fim" SP "begin" FW ">", "<PRE>", SP "<PRE>", NULL,
};
static const char *const fim_suf_names[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<" FW "fim" SP "hole" FW ">", "<SUF>", SP "<SUF>", NULL,
};
static const char *const fim_mid_names[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<" FW "fim" SP "end" FW ">", "<MID>", SP "<MID>", NULL,
};
static const char *const fim_pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
static const char *const fim_rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<eos>", "<turn|>", "<|tool_response>", /* the last three: Gemma 4 */ NULL,
};
#undef FW
#undef SP

static void mark_eog(tok_vocab *v, int32_t id) {
    if (id >= 0 && id < v->n_vocab) v->attr[id] |= TOK_ATTR_EOG_;
}

/* When *id is unset, the first of names in the vocabulary becomes it (and a control token). */
static void detect_by_name(tok_vocab *v, int32_t *id, const char *const *names) {
    if (*id >= 0) return;
    for (size_t k = 0; names[k]; k++) {
        int32_t t = find_cstr(v, names[k]);
        if (t < 0) continue;
        *id = t;
        v->attr[t] |= TOK_ATTR_CONTROL;
        return;
    }
}

/* The bytes llama_token_to_piece(special = true) gives for token i; writes
 * them to d when d is not NULL; returns their count. */
static size_t decoded_piece(const tok_vocab *v, int32_t i, char *d) {
    const char *t = v->text + v->text_off[i];
    uint32_t n = v->text_len[i];
    unsigned a = v->attr[i];
    size_t m = 0;
    if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
        if (d) memcpy(d, t, n);
        return n;
    }
    if (a & TOK_ATTR_NORMAL) {
        if (v->type != TOK_TYPE_BPE || v->raw_symbols) { /* llama_unescape_whitespace */
            for (uint32_t j = 0; j < n;) {
                if (j + 3 <= n && (uint8_t)t[j] == 0xE2 && (uint8_t)t[j + 1] == 0x96 && (uint8_t)t[j + 2] == 0x81) {
                    if (d) d[m] = ' ';
                    m++;
                    j += 3;
                } else {
                    if (d) d[m] = t[j];
                    m++;
                    j++;
                }
            }
            return m;
        }
        /* llama_decode_text: each character back to the byte it shows */
        for (size_t j = 0; j < n;) {
            uint32_t cp = uni_decode(t, n, &j);
            int b = uni_cpt_to_byte(cp);
            if (b >= 0) {
                if (d) d[m] = (char)b;
                m++;
                continue;
            }
            char u[4], tmp[64];
            size_t k = uni_encode(cp, u);
            size_t l = (size_t)snprintf(tmp, sizeof tmp, "[UNK_BYTE_0x");
            for (size_t q = 0; q < k; q++) l += (size_t)snprintf(tmp + l, sizeof tmp - l, "%02x", (uint8_t)u[q]);
            if (d) {
                memcpy(d + m, tmp, l);
                memcpy(d + m + l, t, n);
                d[m + l + n] = ']';
            }
            m += l + n + 1;
        }
        return m;
    }
    if (a & TOK_ATTR_BYTE) { /* token_to_byte: strtol(text.substr(3, 2), 16) */
        char hex[3] = {0, 0, 0};
        if (n > 3) hex[0] = t[3];
        if (n > 4) hex[1] = t[4];
        if (d) d[0] = (char)strtol(hex, NULL, 16);
        return 1;
    }
    return 0; /* unused / undefined: nothing */
}

static int build_decoded(tok_vocab *v) {
    size_t total = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        total += decoded_piece(v, i, NULL) + 1;
        if (total > UINT32_MAX) return TOK_EFORMAT;
    }
    v->dec = malloc(total);
    v->dec_off = malloc((size_t)v->n_vocab * sizeof *v->dec_off);
    v->dec_len = malloc((size_t)v->n_vocab * sizeof *v->dec_len);
    if (!v->dec || !v->dec_off || !v->dec_len) return TOK_ENOMEM;
    size_t o = 0;
    v->max_dec_len = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        size_t m = decoded_piece(v, i, v->dec + o);
        v->dec[o + m] = 0;
        v->dec_off[i] = (uint32_t)o;
        v->dec_len[i] = (uint32_t)m;
        if (m > v->max_dec_len) v->max_dec_len = (uint32_t)m;
        o += m + 1;
    }
    return 0;
}

/* The trie over the special tokens' texts (one node per distinct prefix). */
static int build_trie(tok_vocab *v) {
    size_t total = 0;
    for (int k = 0; k < v->n_special; k++) total += v->text_len[v->special[k]];
    if (total > INT32_MAX / 2) return TOK_ENOMEM;
    v->trie = malloc((total ? total : 1) * sizeof *v->trie);
    if (!v->trie) return TOK_ENOMEM;
    v->n_trie = 0;
    for (int b = 0; b < 256; b++) v->trie_root[b] = -1;
    for (int k = 0; k < v->n_special; k++) {
        const uint8_t *t = (const uint8_t *)v->text + v->text_off[v->special[k]];
        uint32_t n = v->text_len[v->special[k]];
        int32_t *link = &v->trie_root[t[0]], node = -1;
        for (uint32_t i = 0; i < n; i++) {
            /* find or add the child for byte t[i] in the list at *link */
            node = *link;
            while (node >= 0 && (i > 0 && v->trie[node].byte != t[i])) {
                link = &v->trie[node].sibling;
                node = *link;
            }
            if (node < 0) {
                node = v->n_trie++;
                v->trie[node] = (struct tok_trie_node){-1, -1, -1, t[i]};
                *link = node;
            }
            link = &v->trie[node].child;
        }
        v->trie[node].k = k; /* texts are unique */
    }
    return 0;
}

int tok_vocab_finish(tok_vocab *v, const char *model_name, size_t model_name_len, char *err, size_t err_len) {
    if (v->n_strings < v->n_vocab)
        return fail(err, err_len, TOK_EINVAL, "tok: %d of %d tokens set", (int)v->n_strings, (int)v->n_vocab);
    if (v->add_bos && v->bos < 0)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.add_bos_token is true, but there is no BOS token");
    if (v->add_eos && v->eos < 0)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.add_eos_token is true, but there is no EOS token");
    if (v->add_sep && v->sep < 0)
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.ggml.add_sep_token is true, but there is no SEP token");

    /* llama.cpp load(): special tokens found by their text */
    detect_by_name(v, &v->eot, eot_names);
    detect_by_name(v, &v->eom, eom_names);
    detect_by_name(v, &v->fim_pre, fim_pre_names);
    detect_by_name(v, &v->fim_suf, fim_suf_names);
    detect_by_name(v, &v->fim_mid, fim_mid_names);
    detect_by_name(v, &v->fim_pad, fim_pad_names);
    detect_by_name(v, &v->fim_rep, fim_rep_names);
    detect_by_name(v, &v->fim_sep, fim_sep_names);
    /* control tokens named "...unused..." are unused */
    for (int32_t i = 0; i < v->n_vocab; i++)
        if ((v->attr[i] & TOK_ATTR_CONTROL) && strstr(v->text + v->text_off[i], "unused")) v->attr[i] |= TOK_ATTR_UNUSED;
    /* end of generation: FIM pad/repo/sep, the well-known names, EOS, EOT, EOM */
    mark_eog(v, v->fim_pad);
    mark_eog(v, v->fim_rep);
    mark_eog(v, v->fim_sep);
    for (size_t k = 0; eog_names[k]; k++) {
        int32_t id = find_cstr(v, eog_names[k]);
        if (id < 0) continue;
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
    len_id *order = malloc((size_t)(v->n_special ? v->n_special : 1) * sizeof *order);
    if (!v->special || !order) {
        free(order);
        return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    }
    v->n_special = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        unsigned a = v->attr[i];
        if (!(a & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))) continue;
        order[v->n_special++] = (len_id){v->text_len[i], i};
        if (!(a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) v->n_special_user++;
    }
    qsort(order, (size_t)v->n_special, sizeof *order, cmp_special);
    for (int k = 0; k < v->n_special; k++) v->special[k] = order[k].id;
    free(order);
    if (build_trie(v)) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");

    /* the token-to-piece cache is made before the per-model fix-ups below,
     * which change only how specials are parsed */
    int rc = build_decoded(v);
    if (rc) return fail(err, err_len, rc, rc == TOK_ENOMEM ? "tok: out of memory" : "tok: decoded vocabulary too large");

    /* per-model attribute fix-ups llama.cpp applies by name: Phi-3 strips
     * whitespace right of its special tokens */
    if (model_name) {
        char low[256];
        size_t m = model_name_len < sizeof low - 1 ? model_name_len : sizeof low - 1;
        for (size_t i = 0; i < m; i++) low[i] = (char)tolower((unsigned char)model_name[i]);
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

    /* byte fallback (llama_vocab::byte_to_token, SPM) */
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
    return 0;
}
