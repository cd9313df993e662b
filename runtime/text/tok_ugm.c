/*
 * tok_ugm.c — the unigram ("UGM", `tokenizer.ggml.model = "t5"`) tokenizer
 * of SentencePiece models: T5 and the XLM-RoBERTa family (multilingual BERT
 * embedders such as BGE-M3 and multilingual-E5 are general.architecture
 * "bert" with this tokenizer).  A C port of llama.cpp's llm_tokenizer_ugm and
 * llm_tokenizer_ugm_session (src/llama-vocab.cpp):
 *
 *  1. normalization: at each input position, the longest user-defined token
 *     there is kept as it is; else the longest prefix the precompiled
 *     charsmap knows (tokenizer.ggml.precompiled_charsmap: a uint32 blob size,
 *     an XOR-compressed compact double array (XCDA) over bytes whose leaves
 *     index NUL-terminated replacement strings, then those strings — Kanda
 *     2018) is replaced; else one valid UTF-8 character passes, and a byte
 *     that starts none becomes U+FFFD.  Spaces become U+2581 (escaped), a
 *     U+2581 is prepended before the first non-space when add_space_prefix,
 *     and with remove_extra_whitespaces runs of spaces collapse to one
 *     before each word (and trailing ones vanish);
 *  2. Viterbi: the best-scoring segmentation of the normalized bytes into
 *     tokens (normal, user-defined and unused ones; user-defined score 0,
 *     the others their log-probability score), sums in double as
 *     SentencePiece does; a code point no token covers whole costs the
 *     unknown token's score (the lowest normal score - 10), and adjacent
 *     unknown tokens come out as one.
 *
 * Prefix matching uses the vocabulary's string hash (every length up to the
 * longest piece) where llama.cpp walks a trie: the set of matches at each
 * position, and so the result, is the same.  Scratch per call is sized from
 * the text: about 3 bytes of normalized text per input byte and 28 bytes of
 * Viterbi state per normalized byte.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

#define fail tok_fail

/* Bytes of the UTF-8 sequence a lead byte announces (llama.cpp unicode_len_utf8). */
static const uint8_t len_tab[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

/* ---- the precompiled charsmap ----------------------------------------------------- */

int tok_ugm_set_charsmap(tok_vocab *v, const uint8_t *data, size_t n, char *err, size_t err_len) {
    if (n < 4) return fail(err, err_len, TOK_EFORMAT, "tok: precompiled_charsmap has %zu bytes, too small for its header", n);
    uint32_t blob;
    memcpy(&blob, data, 4); /* little-endian, as GGUF and our hosts */
    if ((size_t)blob + 4 >= n || blob % 4)
        return fail(err, err_len, TOK_EFORMAT,
                    "tok: precompiled_charsmap: XCDA of %u bytes does not fit the %zu-byte map (or is not whole entries)",
                    blob, n);
    if (!(v->ugm_map = malloc(n))) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    memcpy(v->ugm_map, data, n);
    v->ugm_xcda_n = blob / 4;
    v->ugm_repl_off = 4 + (size_t)blob;
    v->ugm_map_len = n;
    return 0;
}

static inline int xcda_node(const tok_vocab *v, size_t i, uint32_t *node) {
    if (i >= v->ugm_xcda_n) return -1; /* llama.cpp throws "Index out of array bounds in XCDA array!" */
    memcpy(node, v->ugm_map + 4 + 4 * i, 4);
    return 0;
}

/* normalize_prefix: at text[off..len), what to append (*rep, *rep_len) and
 * how many input bytes that consumes; -1 for a malformed charsmap. */
static int norm_prefix(const tok_vocab *v, const char *text, size_t len, size_t off, const char **rep, size_t *rep_len,
                       size_t *consumed) {
    /* the longest user-defined token at off is kept as it is */
    size_t maxl = len - off < v->ugm_user_max ? len - off : v->ugm_user_max;
    for (size_t l = maxl; l > 0; l--) {
        int32_t id = tok_vocab_find(v, text + off, l);
        if (id >= 0 && (v->attr[id] & TOK_ATTR_USER_DEFINED)) {
            *rep = text + off, *rep_len = *consumed = l;
            return 0;
        }
    }
    size_t best_len = 0, best_off = 0;
    if (v->ugm_xcda_n) {
        uint32_t node, idx;
        if (xcda_node(v, 0, &node)) return -1;
        idx = (node >> 10) << ((node & (1u << 9)) >> 6); /* BASE of the root */
        for (size_t p = off; p < len; p++) {
            uint8_t c = (uint8_t)text[p];
            if (c == 0) break;
            idx ^= c;
            if (xcda_node(v, idx, &node)) return -1;
            if ((node & ((1u << 31) | 0xff)) != c) break; /* LCHECK: not a child */
            bool leaf = (node >> 8) & 1;
            idx ^= (node >> 10) << ((node & (1u << 9)) >> 6);
            if (leaf) {
                if (xcda_node(v, idx, &node)) return -1;
                best_len = p - off + 1;
                best_off = node & ((1u << 31) - 1); /* the replacement's index */
            }
        }
    }
    if (best_len) {
        const char *r = (const char *)v->ugm_map + v->ugm_repl_off;
        size_t rn = v->ugm_map_len - v->ugm_repl_off;
        if (best_off >= rn) return -1;
        const char *e = memchr(r + best_off, 0, rn - best_off);
        if (!e) return -1; /* an unterminated replacement */
        *rep = r + best_off, *rep_len = (size_t)(e - (r + best_off)), *consumed = best_len;
        return 0;
    }
    /* one valid UTF-8 sequence as it is (unicode_cpt_from_utf8), else U+FFFD for one byte */
    const uint8_t *u = (const uint8_t *)text + off;
    size_t n = !(u[0] & 0x80) ? 1 : !(u[0] & 0x40) ? 0 : !(u[0] & 0x20) ? 2 : !(u[0] & 0x10) ? 3 : !(u[0] & 0x08) ? 4 : 0;
    if (n > len - off) n = 0;
    for (size_t k = 1; k < n; k++)
        if ((u[k] & 0xc0) != 0x80) n = 0;
    if (n) {
        *rep = text + off, *rep_len = *consumed = n;
    } else {
        *rep = "\xEF\xBF\xBD", *rep_len = 3, *consumed = 1;
    }
    return 0;
}

/* ---- encoding ------------------------------------------------------------------------ */

typedef struct {
    int32_t id;
    uint32_t from;  /* input offset (normalized bytes) where the token starts */
    double score;   /* best score of a segmentation ending here */
} ugm_best;

int tok_ugm_fragment(const tok_vocab *v, const char *text, size_t len, tok_out *out) {
    if (len == 0) return 0;
    /* normalization: at most 3 bytes out per byte in (U+FFFD, ▁ for a space),
     * plus a ▁ before each word and a replacement of up to a few bytes per
     * matched prefix: bounded by growing when needed */
    size_t cap = 3 * len + 16, m = 0;
    char *nz = malloc(cap);
    if (!nz) return TOK_ENOMEM;
    const bool prepend = v->add_space_prefix, merge = v->ugm_remove_extra_ws;
    bool space_prepended = false, in_word = false;
    for (size_t off = 0; off < len;) {
        const char *r;
        size_t rl, used;
        if (norm_prefix(v, text, len, off, &r, &rl, &used)) {
            free(nz);
            return TOK_EFORMAT;
        }
        if (m + 3 * rl + 3 > cap) {
            size_t nc = 2 * cap + 3 * rl + 3;
            char *nn = realloc(nz, nc);
            if (!nn) {
                free(nz);
                return TOK_ENOMEM;
            }
            nz = nn, cap = nc;
        }
        for (size_t i = 0; i < rl; i++) {
            if (r[i] != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((prepend && !space_prepended) || merge) {
                        memcpy(nz + m, "\xE2\x96\x81", 3), m += 3;
                        space_prepended = true;
                    }
                }
                nz[m++] = r[i];
            } else {
                in_word = false;
                if (!merge) memcpy(nz + m, "\xE2\x96\x81", 3), m += 3;
            }
        }
        off += used;
    }
    if (m == 0) {
        free(nz);
        return 0;
    }
    ugm_best *best = malloc((m + 1) * sizeof *best);
    if (!best) {
        free(nz);
        return TOK_ENOMEM;
    }
    for (size_t i = 0; i <= m; i++) best[i] = (ugm_best){v->unk, 0, -DBL_MAX};
    best[0].score = 0;
    for (size_t off = 0; off < m;) {
        size_t units = len_tab[(uint8_t)nz[off] >> 4];
        if (units > m - off) units = m - off;
        const double cur = best[off].score;
        bool whole = false;
        size_t maxl = m - off < v->max_text_len ? m - off : v->max_text_len;
        for (size_t l = 1; l <= maxl; l++) {
            int32_t id = tok_vocab_find(v, nz + off, l);
            if (id < 0 || !(v->attr[id] & (TOK_ATTR_NORMAL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNUSED))) continue;
            if (l == units) whole = true;
            double s = cur + ((v->attr[id] & TOK_ATTR_USER_DEFINED) ? 0.0 : (double)v->score[id]);
            if (s > best[off + l].score) best[off + l] = (ugm_best){id, (uint32_t)off, s};
        }
        if (!whole) { /* the code point as an unknown token */
            double s = cur + v->ugm_unk_score;
            if (s > best[off + units].score) best[off + units] = (ugm_best){v->unk, (uint32_t)off, s};
        }
        off += units;
    }
    /* backtrack from the end (one unknown for a run of them), then emit in order */
    int32_t *rev = malloc((m + 1) * sizeof *rev);
    if (!rev) {
        free(best);
        free(nz);
        return TOK_ENOMEM;
    }
    size_t nr = 0;
    bool prev_unk = false;
    for (size_t at = m;;) {
        const ugm_best *b = &best[at];
        bool unk = b->id == v->unk;
        if (!(prev_unk && unk)) rev[nr++] = b->id;
        if (b->from == 0) break;
        prev_unk = unk;
        at = b->from;
    }
    while (nr) tok_emit(out, rev[--nr]);
    free(rev);
    free(best);
    free(nz);
    return 0;
}
