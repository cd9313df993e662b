/*
 * tok_impl.h — internals shared by the tokenizer's files; not a public header.
 *
 *   tok.c      the vocabulary (loading from GGUF, lookups, special tokens, EOG),
 *              special-token partition, SPM encoding, decoding, streaming
 *   tok_bpe.c  byte-level BPE: pre-tokenizers (llama.cpp's regexes and its
 *              hand-written gpt2/llama3 splitters), merges; WordPiece
 *   tok_hf.c   Hugging Face tokenizer.json
 *
 * String ids: [0, n_vocab) are tokens; BPE merge strings that are not tokens
 * (llama.cpp keeps merges by text, so a merge may name a string the vocabulary
 * lacks) are interned after them as [n_vocab, n_strings) so merging can work
 * on ids alone.  tok_vocab_find() sees tokens only, tok_sym_find() both.
 */
#ifndef CINFER_TOK_IMPL_H
#define CINFER_TOK_IMPL_H

#include "tok.h"

#define TOK_ATTR_EOG_ (1u << 14) /* private: end-of-generation */
/* private: a tokenizer.json added token with "normalized": true, matched in
 * the normalized text (it does not start a new normalized run, see prefix_mode) */
#define TOK_ATTR_NORMALIZED_ (1u << 13)

/* Where an SPM vocabulary puts its U+2581 space prefix (with add_space_prefix). */
enum {
    TOK_PREFIX_EACH = 0, /* llama.cpp: the first text fragment and every one after a special token */
    TOK_PREFIX_FIRST,    /* tokenizer.json Metaspace prepend_scheme "first": only a fragment at offset 0 */
    TOK_PREFIX_RUN,      /* tokenizer.json Prepend normalizer: the start of each run of text between
                          * non-normalized added tokens; a run starting with a normalized added
                          * token gets a lone U+2581 before it */
};

/* A pre-tokenizer: how BPE text is cut into words before merging. */
enum {
    PRE_STAGE_GPT2,   /* llama.cpp unicode_regex_split_custom_gpt2 */
    PRE_STAGE_LLAMA3, /* unicode_regex_split_custom_llama3; max_digits 3 (llama3) or 1 (qwen2) */
    PRE_STAGE_REGEX,  /* one of llama.cpp's regexes, run like its std::regex fallback */
};

typedef struct tok_regex tok_regex; /* compiled regex (tok_bpe.c) */

typedef struct {
    int kind;          /* PRE_STAGE_* */
    int max_digits;    /* PRE_STAGE_LLAMA3 */
    tok_regex *re;     /* PRE_STAGE_REGEX, owned */
} pre_stage;

#define TOK_MAX_PRE_STAGES 8

/* llama.cpp's per-pre-tokenizer settings (llama_vocab::impl::load). */
typedef struct {
    const char *const *names; /* tokenizer.ggml.pre values, NULL-terminated */
    const char *const *regex; /* llama.cpp's regex_exprs, NULL-terminated */
    bool clean_spaces;
    bool ignore_merges;
    bool add_bos;
    bool no_bos;      /* no default BOS (glm4: special_bos_id = LLAMA_TOKEN_NULL) */
    bool raw_symbols; /* SentencePiece-style BPE (gemma4): spaces escaped as U+2581, merges over
                       * raw UTF-8 characters, <0xXX> byte fallback, decoding unescapes */
} pre_def;

struct tok_vocab {
    int type;            /* TOK_TYPE_* */
    int32_t n_vocab;
    int32_t n_strings;   /* tokens + interned merge strings */
    int32_t cap_strings;
    char *text;          /* (text_cap) pool of raw strings, each NUL-terminated */
    size_t text_used, text_cap;
    uint32_t *text_off;  /* (cap_strings) */
    uint32_t *text_len;  /* (cap_strings) bytes, without the NUL */
    char *dec;           /* pool of decoded pieces (special rendering), NUL-terminated */
    uint32_t *dec_off;   /* (n_vocab) */
    uint32_t *dec_len;   /* (n_vocab) */
    float *score;        /* (n_vocab) */
    uint16_t *attr;      /* (n_vocab) TOK_ATTR_* | TOK_ATTR_EOG_ */

    int32_t *slot_id;    /* (slot_mask + 1) string → id table; -1 = empty */
    uint32_t *slot_hash; /* (slot_mask + 1) high 32 bits of the slot's XXH3 */
    uint32_t slot_mask;

    int32_t byte_id[256]; /* SPM byte fallback: <0xXX>, else the 1-byte piece, else unk, else -1 */
    int32_t bos, eos, eot, eom, unk, pad, sep;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_sep, add_space_prefix, clean_spaces;
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
    /* trie of the special tokens' texts, to find all their occurrences in one
     * pass (tokenizer_st_partition searches the text once per token) */
    struct tok_trie_node {
        int32_t child, sibling; /* -1 ends */
        int32_t k;              /* index in special[] of the token ending here, -1 */
        uint8_t byte;
    } *trie;
    int32_t n_trie;
    int32_t trie_root[256];     /* node of each first byte, -1 */

    /* ---- SPM from a tokenizer.json (BPE with byte_fallback) ---- */
    bool spm_ranks;      /* merge by merge rank (HF BPE), not by the merged piece's score */
    bool spm_split;      /* Metaspace split: no merge across a U+2581 that starts a word */
    bool spm_fuse_unk;   /* consecutive unknown symbols give one unk id */
    int prefix_mode;     /* TOK_PREFIX_* */
    bool prefix_unless_space; /* Metaspace: no U+2581 prepended to a fragment that starts with a space */

    /* ---- BPE ---- */
    char pre_name[32];   /* tokenizer.ggml.pre as resolved ("llama3", ...) */
    int pre_defaulted;   /* a BPE GGUF without tokenizer.ggml.pre: pre_name is a guess */
    pre_stage pre[TOK_MAX_PRE_STAGES];
    int n_pre;
    bool ignore_merges;  /* a word that is a token is not merged (llama3) */
    bool raw_symbols;    /* pre_def.raw_symbols (gemma4) */
    int32_t hex_tok[256];  /* raw_symbols: the <0xXX> token of each byte, -1 */
    bool nfc;            /* tokenizer.json NFC normalizer */
    int32_t byte_sym[256]; /* string id of the byte's GPT-2 character, -1 when unknown */
    int32_t byte_tok[256]; /* token whose text is the single raw byte, -1 (llama.cpp's last resort) */
    char byte_utf8[256][2]; /* UTF-8 of the byte's GPT-2 character */
    uint8_t byte_utf8_len[256];
    uint64_t *merge_key;   /* (merge_mask + 1) left << 32 | right, ~0 = empty */
    uint64_t *merge_val;   /* (merge_mask + 1) rank << 32 | merged string id */
    uint32_t merge_mask;
    int32_t n_merges;

    /* ---- UGM (tok_ugm.c) ---- */
    uint8_t *ugm_map;      /* (ugm_map_len) tokenizer.ggml.precompiled_charsmap, or NULL */
    size_t ugm_map_len;
    size_t ugm_xcda_n;     /* XCDA entries after the 4-byte header */
    size_t ugm_repl_off;   /* offset of the replacement strings in ugm_map */
    size_t ugm_user_max;   /* longest user-defined token, bytes */
    double ugm_unk_score;  /* lowest normal score - 10 */
    bool ugm_remove_extra_ws; /* tokenizer.ggml.remove_extra_whitespaces */
};

/* ---- tok.c: vocabulary building, shared by the GGUF and tokenizer.json loaders ---- */

int tok_fail(char *err, size_t err_len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Allocate the token arrays and string table for n tokens. */
int tok_vocab_alloc(tok_vocab *v, int32_t n, char *err, size_t err_len);
/* Set token id's text (empty → "[EMPTY_<id>]"), score and attributes, and
 * index it; TOK_EFORMAT for a duplicate. */
int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n, float score, uint16_t attr, char *err,
                  size_t err_len);
/* Intern a string that is not a token; returns its string id or -1 (ENOMEM). */
int32_t tok_intern(tok_vocab *v, const char *s, size_t n);
/* Everything after the tokens, ids and flags are set: EOT/EOG by name,
 * special-token cache, per-model attribute fix-ups (model_name: general.name
 * or NULL), byte fallback, decoded pieces. */
int tok_vocab_finish(tok_vocab *v, const char *model_name, size_t model_name_len, char *err, size_t err_len);

/* tok.c: the vocabulary of GGUF tokenizer.ggml.* metadata (tok_load_gguf
 * without the tokenizer.json fallback). */
int tok_load_ggml(const gguf_file *g, tok_vocab **out, char *err, size_t err_len);
/* tok_hf.c: the vocabulary of the tokenizer.huggingface.* metadata an HF
 * folder carries (formats/hf.h), padded to "<arch>.vocab_size" tokens. */
int tok_load_hf_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len);

int32_t tok_sym_find(const tok_vocab *v, const char *s, size_t n);   /* any string */
int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n); /* tokens only */

/* ---- tok_bpe.c ---- */

/* llama.cpp pre-tokenizer settings for a tokenizer.ggml.pre value; NULL when unknown. */
const pre_def *tok_pre_lookup(const char *name, size_t len);
/* The pre-tokenizer whose one regex is a tokenizer.json Split pattern (GPT-2,
 * Llama 3, Qwen2, in HF's or llama.cpp's spelling); NULL when unknown. */
const pre_def *tok_pre_for_hf_regex(const char *pattern);
/* Compile a pre-tokenizer's stages into v->pre. */
int tok_pre_init(tok_vocab *v, const pre_def *def, char *err, size_t err_len);
/* Add one merge (rank = its index); strings not in the vocabulary are
 * interned.  A repeated pair keeps its first rank, as llama.cpp does. */
int tok_merge_add(tok_vocab *v, const char *a, size_t na, const char *b, size_t nb, char *err, size_t err_len);
/* Size the merge table for n merges (call before tok_merge_add). */
int tok_merge_reserve(tok_vocab *v, size_t n, char *err, size_t err_len);
/* The merge of string ids (l, r): its rank and the merged string id. */
bool tok_merge_find(const tok_vocab *v, int32_t l, int32_t r, int32_t *rank, int32_t *merged);
/* Byte symbols (call after all tokens and merges are in). */
void tok_bpe_finish(tok_vocab *v);
void tok_bpe_free(tok_vocab *v);

/* Scratch for encoding one text; grows, freed by tok_scratch_free. */
typedef struct tok_scratch tok_scratch;
typedef struct {
    int32_t *ids;
    size_t n_max, n;
} tok_out;

static inline void tok_emit(tok_out *o, int32_t id) {
    if (o->n < o->n_max) o->ids[o->n] = id;
    o->n++;
}

tok_scratch *tok_scratch_new(void);
void tok_scratch_free(tok_scratch *s);
/* Encode one raw-text fragment (no special tokens in it) with byte-level BPE
 * or WordPiece, appending ids.  TOK_ENOMEM on allocation failure. */
int tok_bpe_fragment(const tok_vocab *v, tok_scratch *s, const char *text, size_t len, tok_out *out);
int tok_wpm_fragment(const tok_vocab *v, tok_scratch *s, const char *text, size_t len, tok_out *out);

/* ---- tok_ugm.c ---- */

/* Copy and check a precompiled charsmap (n bytes). */
int tok_ugm_set_charsmap(tok_vocab *v, const uint8_t *data, size_t n, char *err, size_t err_len);
/* Encode one raw-text fragment with the unigram model (scratch per call);
 * TOK_ENOMEM, or TOK_EFORMAT for a charsmap that points outside itself. */
int tok_ugm_fragment(const tok_vocab *v, const char *text, size_t len, tok_out *out);

/* A regex run the way llama.cpp's unicode_regex_split runs its pre-tokenizer
 * regexes through std::regex (ECMAScript: leftmost match, alternatives in
 * order, backtracking): a pattern using \p{N}, \p{L}, \p{P}, \p{M}, \p{S}
 * (or \p{Lu}, ...) is rewritten as llama.cpp does and matched against its
 * "collapsed" text, one byte per code point; any other pattern is matched
 * against code points (std::wregex), non-ASCII whitespace seen as U+000B. */
int tok_regex_compile(const char *pattern, tok_regex **out, char *err, size_t err_len);
void tok_regex_free(tok_regex *re);

/* Cut pieces in[0..n_in) (lengths in code points, covering cps[0..) with
 * flags fl = uni_flags(cps)) with one pre-tokenizer stage into out (room for
 * as many pieces as code points); *n_out pieces.  TOK_ENOMEM possible.
 * Exposed for tests. */
int tok_pre_split(const pre_stage *st, tok_scratch *s, const uint32_t *cps, const uint16_t *fl, const uint32_t *in,
                  size_t n_in, uint32_t *out, size_t *n_out);

#endif
