/*
 * tok_bpe.c — byte-level BPE and WordPiece encoding, as llama.cpp does them
 * (src/llama-vocab.cpp llm_tokenizer_bpe{,_session}, llm_tokenizer_wpm_session;
 * src/unicode.cpp unicode_regex_split).
 *
 * BPE text goes through three steps:
 *  1. pre-tokenization: the pre-tokenizer named by tokenizer.ggml.pre is a
 *     list of regexes applied in turn, each cutting every piece the previous
 *     one left (matches and the gaps between them both become pieces).  Like
 *     llama.cpp, the GPT-2 and Llama 3 regexes run as hand-written splitters
 *     (ports of unicode_regex_split_custom_gpt2/_llama3), and so does Qwen2's,
 *     which is Llama 3's with single digits (llama.cpp runs it through
 *     std::regex; the splitter gives the same pieces, and a test compares the
 *     two on random text).  Every other regex runs in the small backtracking
 *     regex engine below, with llama.cpp's std::regex semantics: a pattern
 *     with \p{..} categories is rewritten and matched against one byte per
 *     code point (llama.cpp's "collapsed" text, so for instance '~' is not
 *     \p{S} there), any other against code points.
 *  2. each piece is re-encoded as UTF-8 and every byte replaced by its GPT-2
 *     character (unicode_byte_encoding_process);
 *  3. the merge: symbols start as single bytes, the adjacent pair with the
 *     lowest merge rank (ties: leftmost) merges until none is left; a word
 *     that is a token is taken whole when the pre-tokenizer says
 *     ignore_merges (llama3).
 * Merging works on string ids: a hash maps (left id, right id) to (rank,
 * merged id), and the queue is a binary heap ordered by (rank, left index),
 * llm_bigram_bpe's comparator; stale entries are skipped when their symbols
 * changed, as llama.cpp does by comparing texts.
 *
 * WordPiece (at the end) is llm_tokenizer_wpm_session: BERT's normalisation
 * and split, then greedy longest match of "▁" + word.
 *
 * Scratch buffers grow with the longest text or word seen and are reused;
 * nothing is allocated per word or per token.  The regex engine backtracks
 * as std::regex does, so an adversarial piece can cost time quadratic in its
 * length with a pattern like deepseek-llm's \s+$ (a long run of spaces
 * before non-space), exactly as in llama.cpp; the hand-written splitters
 * (GPT-2, Llama 3, Qwen2) are linear.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"
#include "unicode.h"

#define fail tok_fail

/* ---- llama.cpp's pre-tokenizers (llm_tokenizer_bpe, llama_vocab::impl::load) ---- */

#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3_HF                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3                                                                                      \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2_HF                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                       \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CJK "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
#define RX_PORO " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"

static const char *const rx_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const rx_gpt2[] = {RX_GPT2, NULL};
static const char *const rx_llama3[] = {RX_LLAMA3, NULL};
static const char *const rx_qwen2[] = {RX_QWEN2, NULL};
static const char *const rx_starcoder[] = {"\\p{N}", RX_GPT2, NULL};
static const char *const rx_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const rx_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373"
    "\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F"
    "\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D"
    "\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4"
    "\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D"
    "\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A"
    "\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2"
    "\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    RX_CJK,
    "\\p{N}+",
    NULL,
};
static const char *const rx_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}", NULL};
static const char *const rx_deepseek_v3[] = {
    "\\p{N}{1,3}",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const rx_poro[] = {RX_PORO, NULL};
static const char *const rx_viking[] = {RX_PORO, "\\p{N}", NULL};
/* Mistral's tekken (llama.cpp's rewrite of [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] as a letter that
 * is not a-z, and [\p{Ll}\p{Lm}\p{Lo}\p{M}] as one that is not A-Z) */
static const char *const rx_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])"
    "([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const rx_seed_coder[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
    "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
/* Gemma 4: no word split but lines (BPE merges never see a newline) */
static const char *const rx_lines[] = {"[^\\n]+|[\\n]+", NULL};

#define NAMES(...) (const char *const[]){__VA_ARGS__, NULL}
/* {names, regexes, clean_spaces, ignore_merges, add_bos[, no_bos, raw_symbols]}, from
 * llama_vocab::impl::load of llama.cpp de3ff815 (v0.5.0) */
static const pre_def pre_defs[] = {
    {NAMES("default"), rx_default, true, false, false, false, false},
    {NAMES("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"), rx_llama3, true,
     true, true, false, false},
    {NAMES("dbrx", "smaug-bpe"), rx_llama3, true, false, false, false, false},
    {NAMES("deepseek-llm"), rx_deepseek_llm, false, false, false, false, false},
    {NAMES("deepseek-coder"), rx_deepseek_coder, false, false, false, false, false},
    {NAMES("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"), rx_deepseek_v3, false, false, false, false, false},
    {NAMES("falcon"), rx_falcon, true, false, false, false, false},
    {NAMES("mpt"), rx_gpt2, true, false, false, false, false},
    {NAMES("starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"), rx_starcoder, true, false, false, false, false},
    {NAMES("command-r", "smollm"), rx_starcoder, false, false, false, false, false},
    {NAMES("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "olmo", "jais", "exaone4",
           "a.x-4.0", "mellum", "modern-bert"),
     rx_gpt2, true, false, false, false, false},
    {NAMES("trillion", "granite-docling"), rx_gpt2, false, false, false, false, false},
    {NAMES("qwen2", "deepseek-r1-qwen", "hunyuan"), rx_qwen2, false, false, false, false, false},
    {NAMES("stablelm2", "megrez"), rx_qwen2, true, false, false, false, false},
    {NAMES("poro-chat"), rx_poro, false, false, false, false, false},
    {NAMES("bloom", "gpt3-finnish"), rx_poro, true, false, false, false, false},
    {NAMES("viking"), rx_viking, false, false, false, false, false},
    {NAMES("tekken"), rx_tekken, false, true, true, false, false},
    {NAMES("glm4", "chatglm-bpe"), rx_llama3, true, false, false, true, false},
    {NAMES("seed-coder"), rx_seed_coder, false, false, false, false, false},
    {NAMES("jina-v1-en", "jina-v2-code", "roberta-bpe"), rx_gpt2, true, false, false, false, false},
    {NAMES("gemma4"), rx_lines, true, false, false, false, true},
};
#undef NAMES

const pre_def *tok_pre_lookup(const char *name, size_t len) {
    for (size_t d = 0; d < sizeof pre_defs / sizeof pre_defs[0]; d++)
        for (const char *const *n = pre_defs[d].names; *n; n++)
            if (strlen(*n) == len && memcmp(*n, name, len) == 0) return &pre_defs[d];
    return NULL;
}

const pre_def *tok_pre_for_hf_regex(const char *pattern) {
    if (!strcmp(pattern, RX_GPT2)) return tok_pre_lookup("gpt-2", 5);
    if (!strcmp(pattern, RX_LLAMA3_HF) || !strcmp(pattern, RX_LLAMA3)) return tok_pre_lookup("llama3", 6);
    if (!strcmp(pattern, RX_QWEN2_HF) || !strcmp(pattern, RX_QWEN2)) return tok_pre_lookup("qwen2", 5);
    return NULL;
}

int tok_pre_init(tok_vocab *v, const pre_def *def, char *err, size_t err_len) {
    v->n_pre = 0;
    for (const char *const *rx = def->regex; *rx; rx++) {
        if (v->n_pre == TOK_MAX_PRE_STAGES) return fail(err, err_len, TOK_EINVAL, "tok: too many pre-tokenizer stages");
        pre_stage *st = &v->pre[v->n_pre++];
        memset(st, 0, sizeof *st);
        /* unicode_regex_split_custom: the regexes llama.cpp does by hand */
        if (!strcmp(*rx, RX_GPT2)) {
            st->kind = PRE_STAGE_GPT2;
        } else if (!strcmp(*rx, RX_LLAMA3) || !strcmp(*rx, RX_LLAMA3_HF)) {
            st->kind = PRE_STAGE_LLAMA3;
            st->max_digits = 3;
        } else if (!strcmp(*rx, RX_QWEN2) || !strcmp(*rx, RX_QWEN2_HF)) {
            st->kind = PRE_STAGE_LLAMA3; /* equivalent to llama.cpp's std::regex run, see the top */
            st->max_digits = 1;
        } else {
            st->kind = PRE_STAGE_REGEX;
            int rc = tok_regex_compile(*rx, &st->re, err, err_len);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ---- the regex engine ------------------------------------------------------------
 *
 * Patterns parse to a small tree, which compiles to a program for a
 * backtracking machine (Thompson's instructions run depth-first, as in Russ
 * Cox's "backtrack" VM): CHAR, CLASS, ANY, SPLIT x y (try x, then y), JMP,
 * anchors, LOOK (run a sub-program at the current position: lookahead), MATCH.
 * SPLIT's preference order gives ECMAScript's priorities: leftmost
 * alternative first, greedy quantifiers longest first.  Supported syntax:
 * literals, escapes (\s \S \d \D \w \W \r \n \t \f \v \0 \xHH \uHHHH and
 * identity escapes), classes with ranges and negation, (..), (?:..), (?=..),
 * (?!..), ^, $, ., and the quantifiers ? * + {n} {n,} {n,m} (lazy with ?).
 * \s, \d, \w mean ASCII only, as std::regex in the C locale.  A loop whose
 * body can match empty, and a pattern that can match empty, are refused (no
 * llama.cpp pattern has either).
 */

enum { R_CHAR, R_CLASS, R_ANY, R_BOL, R_EOL, R_CAT, R_ALT, R_REP, R_LOOK, R_EMPTY };
enum { I_CHAR, I_CLASS, I_ANY, I_SPLIT, I_JMP, I_BOL, I_EOL, I_LOOK, I_MATCH };
#define RE_MAX_PROG 65536
#define RE_MAX_NODES 65536

typedef struct {
    uint8_t type;
    bool greedy, neg;
    uint32_t c; /* R_CHAR: the char; R_CLASS: class index */
    int32_t a, b;
    int32_t min, max; /* R_REP; max -1 = unbounded */
} rnode;

typedef struct {
    uint8_t op, neg;
    uint32_t c;   /* I_CHAR char, I_CLASS index */
    int32_t x, y; /* jump targets; I_LOOK: x = after the sub-program */
} rinst;

typedef struct {
    uint32_t bits[8]; /* members below 256 */
    int32_t off, n;   /* sorted disjoint ranges [lo, hi] pairs in ranges[] */
} rclass;

struct tok_regex {
    bool collapsed, wide_any; /* wide_any: '.' also excludes U+2028/U+2029 */
    int32_t first;            /* class of the units a match can start with */
    rinst *prog;
    int32_t n_prog;
    rclass *cls;
    int32_t n_cls;
    uint32_t *ranges; /* (2 * n_ranges) */
    int32_t n_ranges;
};

typedef struct {
    const uint32_t *p;
    size_t n, i;
    rnode *nodes;
    int32_t n_nodes, cap_nodes;
    uint32_t *tmp; /* class being built: pairs */
    int32_t n_tmp, cap_tmp;
    tok_regex *re;
    int32_t cap_cls, cap_ranges;
    char *err;
    size_t err_len;
    int rc;
} rparse;

static int32_t rp_err(rparse *P, const char *msg) {
    if (!P->rc) {
        P->rc = TOK_EINVAL;
        fail(P->err, P->err_len, TOK_EINVAL, "tok: regex: %s at offset %zu", msg, P->i);
    }
    return -1;
}

static int32_t rp_node(rparse *P, rnode nd) {
    if (P->rc) return -1;
    if (P->n_nodes == P->cap_nodes) {
        if (P->cap_nodes >= RE_MAX_NODES) return rp_err(P, "pattern too large");
        int32_t cap = P->cap_nodes ? 2 * P->cap_nodes : 64;
        rnode *nn = realloc(P->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            P->rc = TOK_ENOMEM;
            fail(P->err, P->err_len, TOK_ENOMEM, "tok: out of memory");
            return -1;
        }
        P->nodes = nn;
        P->cap_nodes = cap;
    }
    P->nodes[P->n_nodes] = nd;
    return P->n_nodes++;
}

static void rp_range(rparse *P, uint32_t lo, uint32_t hi) {
    if (P->rc) return;
    if (P->n_tmp + 2 > P->cap_tmp) {
        int32_t cap = P->cap_tmp ? 2 * P->cap_tmp : 64;
        uint32_t *t = realloc(P->tmp, (size_t)cap * sizeof *t);
        if (!t) {
            P->rc = TOK_ENOMEM;
            fail(P->err, P->err_len, TOK_ENOMEM, "tok: out of memory");
            return;
        }
        P->tmp = t;
        P->cap_tmp = cap;
    }
    P->tmp[P->n_tmp++] = lo;
    P->tmp[P->n_tmp++] = hi;
}

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Turn the pairs in P->tmp into a class (sorted, merged, complemented when neg). */
static int32_t rp_class_end(rparse *P, bool neg) {
    if (P->rc) return -1;
    size_t np = (size_t)P->n_tmp / 2;
    qsort(P->tmp, np, 2 * sizeof(uint32_t), cmp_pair);
    size_t m = 0;
    for (size_t k = 0; k < np; k++) {
        uint32_t lo = P->tmp[2 * k], hi = P->tmp[2 * k + 1];
        if (m && (uint64_t)lo <= (uint64_t)P->tmp[2 * m - 1] + 1) {
            if (hi > P->tmp[2 * m - 1]) P->tmp[2 * m - 1] = hi;
        } else {
            P->tmp[2 * m] = lo;
            P->tmp[2 * m + 1] = hi;
            m++;
        }
    }
    P->n_tmp = (int32_t)(2 * m);
    if (neg) { /* complement over [0, UINT32_MAX] */
        uint32_t *src = malloc((2 * m + 2) * sizeof *src);
        if (!src) return rp_err(P, "out of memory");
        memcpy(src, P->tmp, 2 * m * sizeof *src);
        P->n_tmp = 0;
        uint64_t next = 0;
        for (size_t k = 0; k < m; k++) {
            if (src[2 * k] > next) rp_range(P, (uint32_t)next, src[2 * k] - 1);
            next = (uint64_t)src[2 * k + 1] + 1;
        }
        if (next <= UINT32_MAX) rp_range(P, (uint32_t)next, UINT32_MAX);
        free(src);
        if (P->rc) return -1;
        m = (size_t)P->n_tmp / 2;
    }
    tok_regex *re = P->re;
    if (re->n_cls == P->cap_cls) {
        int32_t cap = P->cap_cls ? 2 * P->cap_cls : 16;
        rclass *c = realloc(re->cls, (size_t)cap * sizeof *c);
        if (!c) return rp_err(P, "out of memory");
        re->cls = c;
        P->cap_cls = cap;
    }
    if (re->n_ranges + (int32_t)m > P->cap_ranges) {
        int32_t cap = P->cap_ranges ? 2 * P->cap_ranges : 64;
        while (cap < re->n_ranges + (int32_t)m) cap *= 2;
        uint32_t *r = realloc(re->ranges, (size_t)cap * 2 * sizeof *r);
        if (!r) return rp_err(P, "out of memory");
        re->ranges = r;
        P->cap_ranges = cap;
    }
    rclass *c = &re->cls[re->n_cls];
    memset(c, 0, sizeof *c);
    c->off = re->n_ranges;
    c->n = (int32_t)m;
    memcpy(re->ranges + 2 * re->n_ranges, P->tmp, 2 * m * sizeof(uint32_t));
    re->n_ranges += (int32_t)m;
    for (size_t k = 0; k < m; k++)
        for (uint64_t ch = P->tmp[2 * k]; ch <= P->tmp[2 * k + 1] && ch < 256; ch++)
            c->bits[ch >> 5] |= 1u << (ch & 31);
    P->n_tmp = 0;
    return re->n_cls++;
}

static inline bool class_has(const tok_regex *re, uint32_t k, uint32_t ch) {
    const rclass *c = &re->cls[k];
    if (ch < 256) return c->bits[ch >> 5] >> (ch & 31) & 1;
    const uint32_t *r = re->ranges + 2 * c->off;
    size_t lo = 0, hi = (size_t)c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ch < r[2 * mid]) hi = mid;
        else if (ch > r[2 * mid + 1]) lo = mid + 1;
        else return true;
    }
    return false;
}

static bool is_class_letter(uint32_t c) {
    return c == 's' || c == 'S' || c == 'd' || c == 'D' || c == 'w' || c == 'W';
}

static int hexval(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* Class escape letter → its ASCII ranges (C-locale std::regex); false if not one. */
static bool rp_class_escape(rparse *P, uint32_t e) {
    if (!is_class_letter(e)) return false;
    bool neg = e == 'S' || e == 'D' || e == 'W';
    uint32_t lo = e | 0x20;
    static const uint32_t s_r[] = {0x09, 0x0D, 0x20, 0x20}, d_r[] = {'0', '9'},
                          w_r[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
    const uint32_t *r = lo == 's' ? s_r : lo == 'd' ? d_r : w_r;
    size_t n = lo == 's' ? 2 : lo == 'd' ? 1 : 4;
    if (!neg) {
        for (size_t k = 0; k < n; k++) rp_range(P, r[2 * k], r[2 * k + 1]);
        return true;
    }
    uint64_t next = 0;
    for (size_t k = 0; k < n; k++) {
        if (r[2 * k] > next) rp_range(P, (uint32_t)next, r[2 * k] - 1);
        next = (uint64_t)r[2 * k + 1] + 1;
    }
    rp_range(P, (uint32_t)next, UINT32_MAX);
    return true;
}

/* A character escape after '\' (P->i at the letter); returns the char or -1 (error set). */
static int64_t rp_char_escape(rparse *P, bool in_class) {
    if (P->i >= P->n) return rp_err(P, "trailing backslash");
    uint32_t e = P->p[P->i++];
    switch (e) {
    case 't': return '\t';
    case 'n': return '\n';
    case 'v': return '\v';
    case 'f': return '\f';
    case 'r': return '\r';
    case '0': return 0;
    case 'b':
        if (in_class) return '\b';
        return rp_err(P, "\\b (word boundary) not supported");
    case 'x':
    case 'u': {
        int nd = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < nd; k++) {
            int h = P->i < P->n ? hexval(P->p[P->i]) : -1;
            if (h < 0) return rp_err(P, "bad hex escape");
            v = v << 4 | (uint32_t)h;
            P->i++;
        }
        return v;
    }
    case 'p':
    case 'P': return rp_err(P, "unicode property not supported");
    case 'B': return rp_err(P, "\\B not supported");
    case 'c': return rp_err(P, "\\c not supported");
    default:
        if (e >= '1' && e <= '9') return rp_err(P, "back-reference not supported");
        return e; /* identity escape */
    }
}

static int32_t rp_alt(rparse *P, int depth);

static int32_t rp_class(rparse *P) {
    /* P->i just past '[' */
    bool neg = P->i < P->n && P->p[P->i] == '^';
    if (neg) P->i++;
    P->n_tmp = 0;
    for (;;) {
        if (P->i >= P->n) return rp_err(P, "unterminated [");
        uint32_t c = P->p[P->i];
        if (c == ']') {
            P->i++;
            break;
        }
        int64_t lo;
        P->i++;
        if (c == '\\') {
            if (P->i < P->n && rp_class_escape(P, P->p[P->i])) {
                P->i++;
                continue;
            }
            if ((lo = rp_char_escape(P, true)) < 0) return -1;
        } else {
            if (c == '[' && P->i < P->n && (P->p[P->i] == ':' || P->p[P->i] == '.' || P->p[P->i] == '='))
                return rp_err(P, "POSIX class syntax not supported");
            lo = c;
        }
        int64_t hi = lo;
        if (P->i + 1 < P->n && P->p[P->i] == '-' && P->p[P->i + 1] != ']') {
            P->i++;
            uint32_t d = P->p[P->i++];
            if (d == '\\') {
                if (P->i < P->n && is_class_letter(P->p[P->i])) return rp_err(P, "class escape as a range end");
                if ((hi = rp_char_escape(P, true)) < 0) return -1;
            } else {
                hi = d;
            }
            if (hi < lo) return rp_err(P, "range out of order");
        }
        rp_range(P, (uint32_t)lo, (uint32_t)hi);
    }
    int32_t k = rp_class_end(P, neg);
    if (k < 0) return -1;
    return rp_node(P, (rnode){.type = R_CLASS, .c = (uint32_t)k});
}

static int32_t rp_atom(rparse *P, int depth) {
    uint32_t c = P->p[P->i++];
    switch (c) {
    case '(': {
        int type = R_EMPTY; /* plain group */
        bool neg = false;
        if (P->i < P->n && P->p[P->i] == '?') {
            uint32_t k = P->i + 1 < P->n ? P->p[P->i + 1] : 0;
            if (k == ':') type = R_EMPTY;
            else if (k == '=') type = R_LOOK;
            else if (k == '!') type = R_LOOK, neg = true;
            else return rp_err(P, "unsupported group (only (?:, (?=, (?!)");
            P->i += 2;
        }
        int32_t in = rp_alt(P, depth + 1);
        if (in < 0) return -1;
        if (P->i >= P->n || P->p[P->i] != ')') return rp_err(P, "missing )");
        P->i++;
        if (type == R_LOOK) return rp_node(P, (rnode){.type = R_LOOK, .neg = neg, .a = in});
        return in;
    }
    case '[': return rp_class(P);
    case '.': return rp_node(P, (rnode){.type = R_ANY});
    case '^': return rp_node(P, (rnode){.type = R_BOL});
    case '$': return rp_node(P, (rnode){.type = R_EOL});
    case '*':
    case '+':
    case '?':
    case '{': P->i--; return rp_err(P, "nothing to repeat");
    case '\\': {
        if (P->i < P->n && rp_class_escape(P, P->p[P->i])) {
            P->i++;
            int32_t k = rp_class_end(P, false);
            return k < 0 ? -1 : rp_node(P, (rnode){.type = R_CLASS, .c = (uint32_t)k});
        }
        int64_t e = rp_char_escape(P, false);
        if (e < 0) return -1;
        return rp_node(P, (rnode){.type = R_CHAR, .c = (uint32_t)e});
    }
    default: return rp_node(P, (rnode){.type = R_CHAR, .c = c});
    }
}

static bool rp_number(rparse *P, int32_t *out) {
    if (P->i >= P->n || P->p[P->i] < '0' || P->p[P->i] > '9') return false;
    int64_t v = 0;
    while (P->i < P->n && P->p[P->i] >= '0' && P->p[P->i] <= '9') {
        v = v * 10 + (P->p[P->i++] - '0');
        if (v > 1000) return false;
    }
    *out = (int32_t)v;
    return true;
}

static int32_t rp_rep(rparse *P, int depth) {
    int32_t a = rp_atom(P, depth);
    if (a < 0 || P->i >= P->n) return a;
    uint32_t c = P->p[P->i];
    int32_t min, max;
    if (c == '*') min = 0, max = -1;
    else if (c == '+') min = 1, max = -1;
    else if (c == '?') min = 0, max = 1;
    else if (c == '{') {
        P->i++;
        if (!rp_number(P, &min)) return rp_err(P, "bad {n,m}");
        max = min;
        if (P->i < P->n && P->p[P->i] == ',') {
            P->i++;
            max = -1;
            if (P->i < P->n && P->p[P->i] != '}' && !rp_number(P, &max)) return rp_err(P, "bad {n,m}");
        }
        if (P->i >= P->n || P->p[P->i] != '}') return rp_err(P, "bad {n,m}");
        if (max >= 0 && max < min) return rp_err(P, "{n,m} with m < n");
    } else {
        return a;
    }
    P->i++;
    bool greedy = true;
    if (P->i < P->n && P->p[P->i] == '?') {
        greedy = false;
        P->i++;
    }
    if (P->i < P->n && (P->p[P->i] == '*' || P->p[P->i] == '+' || P->p[P->i] == '?' || P->p[P->i] == '{'))
        return rp_err(P, "nested quantifier");
    if (P->nodes[a].type == R_BOL || P->nodes[a].type == R_EOL || P->nodes[a].type == R_LOOK)
        return rp_err(P, "quantified assertion");
    return rp_node(P, (rnode){.type = R_REP, .a = a, .min = min, .max = max, .greedy = greedy});
}

static int32_t rp_cat(rparse *P, int depth) {
    int32_t left = -1;
    while (P->i < P->n && P->p[P->i] != '|' && P->p[P->i] != ')') {
        int32_t r = rp_rep(P, depth);
        if (r < 0) return -1;
        left = left < 0 ? r : rp_node(P, (rnode){.type = R_CAT, .a = left, .b = r});
        if (left < 0) return -1;
    }
    return left < 0 ? rp_node(P, (rnode){.type = R_EMPTY}) : left;
}

static int32_t rp_alt(rparse *P, int depth) {
    if (depth > 64) return rp_err(P, "groups nested too deep");
    int32_t left = rp_cat(P, depth);
    while (left >= 0 && P->i < P->n && P->p[P->i] == '|') {
        P->i++;
        int32_t r = rp_cat(P, depth);
        if (r < 0) return -1;
        left = rp_node(P, (rnode){.type = R_ALT, .a = left, .b = r});
    }
    return left;
}

static bool nullable(const rparse *P, int32_t k) {
    const rnode *nd = &P->nodes[k];
    switch (nd->type) {
    case R_CHAR:
    case R_CLASS:
    case R_ANY: return false;
    case R_CAT: return nullable(P, nd->a) && nullable(P, nd->b);
    case R_ALT: return nullable(P, nd->a) || nullable(P, nd->b);
    case R_REP: return nd->min == 0 || nullable(P, nd->a);
    default: return true; /* anchors, lookahead, empty */
    }
}

/* Add the units node k can start with to P->tmp; returns whether k can match empty. */
static bool first_set(rparse *P, int32_t k) {
    const rnode *nd = &P->nodes[k];
    switch (nd->type) {
    case R_CHAR: rp_range(P, nd->c, nd->c); return false;
    case R_CLASS: {
        const rclass *c = &P->re->cls[nd->c];
        for (int32_t r = 0; r < c->n; r++) rp_range(P, P->re->ranges[2 * (c->off + r)], P->re->ranges[2 * (c->off + r) + 1]);
        return false;
    }
    case R_ANY: rp_range(P, 0, UINT32_MAX); return false;
    case R_CAT: return first_set(P, nd->a) && first_set(P, nd->b);
    case R_ALT: {
        bool a = first_set(P, nd->a);
        return first_set(P, nd->b) || a;
    }
    case R_REP: return first_set(P, nd->a) || nd->min == 0;
    default: return true; /* anchors and lookahead consume nothing: the rest decides */
    }
}

typedef struct {
    rinst *prog;
    int32_t n, cap;
    rparse *P;
} remit;

static int32_t emit(remit *E, rinst in) {
    if (E->P->rc) return -1;
    if (E->n == E->cap) {
        if (E->cap >= RE_MAX_PROG) return rp_err(E->P, "program too large");
        int32_t cap = E->cap ? 2 * E->cap : 64;
        rinst *p = realloc(E->prog, (size_t)cap * sizeof *p);
        if (!p) return rp_err(E->P, "out of memory");
        E->prog = p;
        E->cap = cap;
    }
    E->prog[E->n] = in;
    return E->n++;
}

static void compile_node(remit *E, int32_t k) {
    const rnode nd = E->P->nodes[k];
    if (E->P->rc) return;
    switch (nd.type) {
    case R_CHAR: emit(E, (rinst){.op = I_CHAR, .c = nd.c}); break;
    case R_CLASS: emit(E, (rinst){.op = I_CLASS, .c = nd.c}); break;
    case R_ANY: emit(E, (rinst){.op = I_ANY}); break;
    case R_BOL: emit(E, (rinst){.op = I_BOL}); break;
    case R_EOL: emit(E, (rinst){.op = I_EOL}); break;
    case R_EMPTY: break;
    case R_CAT:
        compile_node(E, nd.a);
        compile_node(E, nd.b);
        break;
    case R_ALT: {
        int32_t s = emit(E, (rinst){.op = I_SPLIT});
        if (s < 0) return;
        E->prog[s].x = E->n;
        compile_node(E, nd.a);
        int32_t j = emit(E, (rinst){.op = I_JMP});
        if (j < 0) return;
        E->prog[s].y = E->n;
        compile_node(E, nd.b);
        E->prog[j].x = E->n;
        break;
    }
    case R_LOOK: {
        int32_t l = emit(E, (rinst){.op = I_LOOK, .neg = nd.neg});
        if (l < 0) return;
        compile_node(E, nd.a);
        emit(E, (rinst){.op = I_MATCH});
        E->prog[l].x = E->n;
        break;
    }
    case R_REP: {
        for (int32_t r = 0; r < nd.min; r++) compile_node(E, nd.a);
        if (nd.max < 0) { /* L: SPLIT body, out; body; JMP L */
            int32_t s = emit(E, (rinst){.op = I_SPLIT});
            if (s < 0) return;
            compile_node(E, nd.a);
            emit(E, (rinst){.op = I_JMP, .x = s});
            if (E->P->rc) return;
            if (nd.greedy) E->prog[s].x = s + 1, E->prog[s].y = E->n;
            else E->prog[s].x = E->n, E->prog[s].y = s + 1;
            break;
        }
        int32_t n_opt = nd.max - nd.min;
        if (n_opt == 0) break;
        int32_t *heads = malloc((size_t)n_opt * sizeof *heads);
        if (!heads) {
            rp_err(E->P, "out of memory");
            return;
        }
        for (int32_t r = 0; r < n_opt && !E->P->rc; r++) { /* SPLIT body, end; body; ... (skips go to the end) */
            heads[r] = emit(E, (rinst){.op = I_SPLIT});
            if (heads[r] >= 0) compile_node(E, nd.a);
        }
        if (!E->P->rc)
            for (int32_t r = 0; r < n_opt; r++) {
                rinst *I = &E->prog[heads[r]];
                if (nd.greedy) I->x = heads[r] + 1, I->y = E->n;
                else I->x = E->n, I->y = heads[r] + 1;
            }
        free(heads);
        break;
    }
    }
}

/* llama.cpp's "collapsed" rewrite of a pattern with unicode categories
 * (unicode_regex_split): \p{X} becomes the byte standing for category X plus
 * the ASCII members of X, inside [] or wrapped in []. */
static const struct {
    const char *name;
    uint8_t byte;
    const char *ascii;
} ucat[] = {
    {"\\p{N}", 0xD1, "0-9"},
    {"\\p{L}", 0xD2, "A-Za-z"},
    {"\\p{P}", 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", 0xD4, ""},
    {"\\p{S}", 0xD5, "\\$\\+<->^`\\|"},
    {"\\p{Lu}", 0xD2, "A-Za-z"},
    {"\\p{Ll}", 0xD2, "A-Za-z"},
    {"\\p{Lt}", 0xD2, "A-Za-z"},
    {"\\p{Lm}", 0xD2, "A-Za-z"},
    {"\\p{Lo}", 0xD2, "A-Za-z"},
};

static bool uses_categories(const char *pattern) {
    for (size_t k = 0; k < sizeof ucat / sizeof ucat[0]; k++)
        if (strstr(pattern, ucat[k].name)) return true;
    return false;
}

/* Pattern units: collapsed bytes, or code points (std::wregex). */
static uint32_t *pattern_units(const char *pattern, bool collapsed, size_t *n_out) {
    size_t len = strlen(pattern);
    uint32_t *u = malloc((len * 16 + 1) * sizeof *u);
    if (!u) return NULL;
    size_t n = 0;
    if (!collapsed) {
        for (size_t i = 0; i < len;) u[n++] = uni_decode(pattern, len, &i);
        *n_out = n;
        return u;
    }
    bool inside = false;
    for (size_t i = 0; i < len; i++) {
        char c = pattern[i];
        if (c == '[' && (i == 0 || pattern[i - 1] != '\\')) {
            u[n++] = '[';
            inside = true;
            continue;
        }
        if (inside && c == ']' && pattern[i - 1] != '\\') {
            u[n++] = ']';
            inside = false;
            continue;
        }
        if (c == '\\' && i + 3 < len && pattern[i + 1] == 'p' && pattern[i + 2] == '{') {
            const char *close = strchr(pattern + i + 3, '}');
            if (close && (size_t)(close - pattern) <= i + 10) {
                size_t pl = (size_t)(close - pattern) - i + 1;
                size_t k;
                for (k = 0; k < sizeof ucat / sizeof ucat[0]; k++)
                    if (strlen(ucat[k].name) == pl && !memcmp(ucat[k].name, pattern + i, pl)) break;
                if (k < sizeof ucat / sizeof ucat[0]) {
                    if (!inside) u[n++] = '[';
                    u[n++] = ucat[k].byte;
                    for (const char *a = ucat[k].ascii; *a; a++) u[n++] = (uint8_t)*a;
                    if (!inside) u[n++] = ']';
                    i += pl - 1;
                    continue;
                }
            }
        }
        u[n++] = (uint8_t)c;
    }
    *n_out = n;
    return u;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
    free(re->prog);
    free(re->cls);
    free(re->ranges);
    free(re);
}

int tok_regex_compile(const char *pattern, tok_regex **out, char *err, size_t err_len) {
    *out = NULL;
    bool collapsed = uses_categories(pattern);
    if (collapsed)
        for (const char *c = pattern; *c; c++)
            if ((uint8_t)*c >= 0x80)
                return fail(err, err_len, TOK_EINVAL,
                            "tok: regex '%.80s': unicode categories and non-ASCII characters together", pattern);
    tok_regex *re = calloc(1, sizeof *re);
    if (!re) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    re->collapsed = collapsed;
    re->wide_any = !collapsed;
    rparse P = {.re = re, .err = err, .err_len = err_len};
    P.p = pattern_units(pattern, collapsed, &P.n);
    if (!P.p) {
        tok_regex_free(re);
        return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    }
    int32_t root = rp_alt(&P, 0);
    if (root >= 0 && P.i < P.n) rp_err(&P, "unmatched )");
    if (!P.rc) {
        for (int32_t k = 0; k < P.n_nodes; k++)
            if (P.nodes[k].type == R_REP && P.nodes[k].max < 0 && nullable(&P, P.nodes[k].a)) {
                rp_err(&P, "loop body can match empty");
                break;
            }
        if (!P.rc && nullable(&P, root)) rp_err(&P, "pattern can match empty");
        P.n_tmp = 0;
        if (!P.rc) {
            first_set(&P, root);
            re->first = rp_class_end(&P, false);
        }
    }
    remit E = {.P = &P};
    if (!P.rc) {
        compile_node(&E, root);
        emit(&E, (rinst){.op = I_MATCH});
    }
    int rc = P.rc;
    if (rc && err && err_len) { /* name the pattern */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", err);
        snprintf(err, err_len, "%s in '%.80s'", msg, pattern);
    }
    free((void *)P.p);
    free(P.nodes);
    free(P.tmp);
    re->prog = E.prog;
    re->n_prog = E.n;
    if (rc) {
        tok_regex_free(re);
        return rc;
    }
    *out = re;
    return 0;
}

/* ---- scratch ------------------------------------------------------------------- */

typedef struct {
    int32_t prev, next; /* live symbols of the word; -1 ends */
    uint32_t off, n;    /* encoded bytes [off, off + n) of the word; n 0 once merged away */
    int32_t id;         /* string id, -1 for a character the vocabulary lacks */
} bpe_sym;

typedef struct {
    int32_t rank, left, right; /* symbol indices */
    int32_t lid, rid;          /* their string ids when queued: stale when changed */
    int32_t merged;
} bpe_bigram;

struct tok_scratch {
    size_t cap;       /* code points the arrays below hold */
    uint32_t *cps;    /* (cap) */
    uint16_t *fl;     /* (cap) uni_flags of cps */
    uint32_t *txt;    /* (cap) text a regex runs on (collapsed or wide) */
    uint32_t *pa, *pb; /* (cap) piece lengths */
    size_t nfc_cap;
    uint32_t *nfc;    /* (nfc_cap) NFC work area */
    uint32_t (*stk)[2]; /* regex backtracking stack: (pc, sp) */
    size_t stk_n, stk_cap;
    bool oom;
    size_t wcap;      /* bytes of one word (after UTF-8 re-encoding) */
    char *word;       /* (2 * wcap) the word's GPT-2 characters / WordPiece word */
    bpe_sym *sym;     /* (wcap) */
    bpe_bigram *heap; /* (3 * wcap) */
    size_t heap_n;
};

tok_scratch *tok_scratch_new(void) { return calloc(1, sizeof(tok_scratch)); }

void tok_scratch_free(tok_scratch *s) {
    if (!s) return;
    free(s->cps);
    free(s->fl);
    free(s->txt);
    free(s->pa);
    free(s->pb);
    free(s->nfc);
    free(s->stk);
    free(s->word);
    free(s->sym);
    free(s->heap);
    free(s);
}

static bool grow(void *pp, size_t n, size_t elem) {
    void *p = realloc(*(void **)pp, n * elem);
    if (!p) return false;
    *(void **)pp = p;
    return true;
}

static int scratch_cps(tok_scratch *s, size_t n) {
    if (n <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < n) cap *= 2;
    if (!grow(&s->cps, cap, sizeof *s->cps) || !grow(&s->fl, cap, sizeof *s->fl) ||
        !grow(&s->txt, cap, sizeof *s->txt) || !grow(&s->pa, cap, sizeof *s->pa) || !grow(&s->pb, cap, sizeof *s->pb))
        return TOK_ENOMEM;
    s->cap = cap;
    return 0;
}

static int scratch_word(tok_scratch *s, size_t nbytes) {
    if (nbytes <= s->wcap) return 0;
    size_t cap = s->wcap ? s->wcap : 64;
    while (cap < nbytes) cap *= 2;
    if (!grow(&s->word, 2 * cap, 1) || !grow(&s->sym, cap, sizeof *s->sym) || !grow(&s->heap, 3 * cap, sizeof *s->heap))
        return TOK_ENOMEM;
    s->wcap = cap;
    return 0;
}

/* ---- regex matching (std::regex_iterator over each piece) ---------------------------- */

static bool stk_push(tok_scratch *s, int32_t pc, size_t sp) {
    if (s->stk_n == s->stk_cap) {
        size_t cap = s->stk_cap ? 2 * s->stk_cap : 1024;
        if (!grow(&s->stk, cap, sizeof *s->stk)) {
            s->oom = true;
            return false;
        }
        s->stk_cap = cap;
    }
    s->stk[s->stk_n][0] = (uint32_t)pc;
    s->stk[s->stk_n][1] = (uint32_t)sp;
    s->stk_n++;
    return true;
}

/* Run the program from pc at t[sp] (t has n units); the first match in
 * priority order sets *end. */
static bool re_run(const tok_regex *re, tok_scratch *s, int32_t pc0, const uint32_t *t, size_t n, size_t sp0,
                   size_t *end) {
    size_t base = s->stk_n;
    if (!stk_push(s, pc0, sp0)) return false;
    while (s->stk_n > base) {
        s->stk_n--;
        int32_t pc = (int32_t)s->stk[s->stk_n][0];
        size_t sp = s->stk[s->stk_n][1];
        for (;;) {
            const rinst *I = &re->prog[pc];
            switch (I->op) {
            case I_CHAR:
                if (sp < n && t[sp] == I->c) {
                    pc++, sp++;
                    continue;
                }
                break;
            case I_CLASS:
                if (sp < n && class_has(re, I->c, t[sp])) {
                    pc++, sp++;
                    continue;
                }
                break;
            case I_ANY:
                if (sp < n && t[sp] != '\n' && t[sp] != '\r' && !(re->wide_any && (t[sp] | 1) == 0x2029)) {
                    pc++, sp++;
                    continue;
                }
                break;
            case I_SPLIT:
                if (!stk_push(s, I->y, sp)) {
                    s->stk_n = base;
                    return false;
                }
                pc = I->x;
                continue;
            case I_JMP: pc = I->x; continue;
            case I_BOL:
                if (sp == 0) {
                    pc++;
                    continue;
                }
                break;
            case I_EOL:
                if (sp == n) {
                    pc++;
                    continue;
                }
                break;
            case I_LOOK: {
                size_t e;
                bool m = re_run(re, s, pc + 1, t, n, sp, &e);
                if (s->oom) {
                    s->stk_n = base;
                    return false;
                }
                if (m != (bool)I->neg) {
                    pc = I->x;
                    continue;
                }
                break;
            }
            case I_MATCH:
                s->stk_n = base;
                *end = sp;
                return true;
            }
            break; /* this thread failed: backtrack */
        }
    }
    return false;
}

/* llama.cpp's view of the text for a regex: the collapsed form (one byte per
 * code point: ASCII as itself, other whitespace 0x0B, N/L/P/M/S as
 * 0xD1..0xD5, anything else 0xD0) or code points with non-ASCII whitespace
 * as 0x0B. */
static void regex_text(const tok_regex *re, const uint32_t *cps, const uint16_t *fl, size_t n, uint32_t *t) {
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cps[i];
        if (c < 128) t[i] = c;
        else if (fl[i] & UNI_WHITESPACE) t[i] = 0x0B;
        else if (!re->collapsed) t[i] = c;
        else {
            switch (fl[i] & UNI_CATEGORY_MASK) {
            case UNI_NUMBER: t[i] = 0xD1; break;
            case UNI_LETTER: t[i] = 0xD2; break;
            case UNI_PUNCT: t[i] = 0xD3; break;
            case UNI_MARK: t[i] = 0xD4; break;
            case UNI_SYMBOL: t[i] = 0xD5; break;
            default: t[i] = 0xD0; break;
            }
        }
    }
}

static size_t split_regex(const tok_regex *re, tok_scratch *s, const uint32_t *t, size_t len, uint32_t *out) {
    size_t n_out = 0, start_idx = 0, pos = 0;
    while (pos < len) {
        size_t k, end = 0;
        bool found = false;
        for (k = pos; k < len; k++)
            if (class_has(re, (uint32_t)re->first, t[k]) && re_run(re, s, 0, t, len, k, &end)) {
                found = true;
                break;
            }
        if (!found) break;
        if (k > start_idx) out[n_out++] = (uint32_t)(k - start_idx);
        out[n_out++] = (uint32_t)(end - k);
        start_idx = pos = end;
    }
    if (start_idx < len) out[n_out++] = (uint32_t)(len - start_idx);
    return n_out;
}

/* ---- llama.cpp's hand-written splitters --------------------------------------------- */

#define OOR 0xFFFFFFFFu
#define FL(p) ((p) < len ? fl[p] : 0)
#define CP(p) ((p) < len ? c[p] : OOR)
#define IS_L(f) ((f) & UNI_LETTER)
#define IS_N(f) ((f) & UNI_NUMBER)
#define IS_WS(f) ((f) & UNI_WHITESPACE)
#define ADD(e) add_piece(out, &n_out, &prev_end, (e))

static inline size_t add_piece(uint32_t *out, size_t *n_out, size_t *prev_end, size_t end) {
    size_t l = end - *prev_end;
    if (l) out[(*n_out)++] = (uint32_t)l;
    *prev_end = end;
    return l;
}

/* unicode_regex_split_custom_gpt2 on one piece:
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t split_gpt2(const uint32_t *c, const uint16_t *fl, size_t len, uint32_t *out) {
    size_t n_out = 0, prev_end = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cpt = c[pos];
        uint16_t f = fl[pos];
        if (cpt == '\'' && pos + 1 < len) {
            uint32_t nx = c[pos + 1];
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += ADD(pos + 2);
                continue;
            }
            if (pos + 2 < len) {
                uint32_t nn = c[pos + 2];
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += ADD(pos + 3);
                    continue;
                }
            }
        }
        uint16_t f2 = cpt == ' ' ? FL(pos + 1) : f;
        if (IS_L(f2)) {
            pos += cpt == ' ';
            while (IS_L(f2)) f2 = FL(pos + 1), pos++;
            ADD(pos);
            continue;
        }
        if (IS_N(f2)) {
            pos += cpt == ' ';
            while (IS_N(f2)) f2 = FL(pos + 1), pos++;
            ADD(pos);
            continue;
        }
        if (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2) {
            pos += cpt == ' ';
            while (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2) f2 = FL(pos + 1), pos++;
            ADD(pos);
            continue;
        }
        size_t nws = 0;
        while (IS_WS(FL(pos + nws))) nws++;
        if (nws > 1 && CP(pos + nws) != OOR) {
            pos += nws - 1;
            ADD(pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            ADD(pos);
            continue;
        }
        ADD(++pos);
    }
    return n_out;
}

/* unicode_regex_split_custom_llama3 on one piece (max_digits 3); with
 * max_digits 1 it is Qwen2's regex:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t split_llama3(const uint32_t *c, const uint16_t *fl, size_t len, size_t max_digits, uint32_t *out) {
    size_t n_out = 0, prev_end = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cpt = c[pos];
        uint16_t f = fl[pos];
        if (cpt == '\'' && pos + 1 < len) {
            uint32_t nx = uni_tolower(c[pos + 1]);
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += ADD(pos + 2);
                continue;
            }
            if (pos + 2 < len) {
                uint32_t nn = uni_tolower(c[pos + 2]);
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += ADD(pos + 3);
                    continue;
                }
            }
        }
        if (!(cpt == '\r' || cpt == '\n' || IS_N(f))) {
            if (IS_L(f) || IS_L(FL(pos + 1))) {
                pos++;
                while (IS_L(FL(pos))) pos++;
                ADD(pos);
                continue;
            }
        }
        if (IS_N(f)) {
            size_t ini = pos;
            while (IS_N(FL(pos))) {
                if (++pos - ini >= max_digits) {
                    ADD(pos);
                    ini = pos;
                }
            }
            ADD(pos);
            continue;
        }
        uint16_t f2 = cpt == ' ' ? FL(pos + 1) : f;
        if (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f) {
            pos += cpt == ' ';
            while (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2) f2 = FL(pos + 1), pos++;
            uint32_t c2 = CP(pos);
            while (c2 == '\r' || c2 == '\n') c2 = CP(pos + 1), pos++;
            ADD(pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (IS_WS(FL(pos + nws))) {
            uint32_t c2 = c[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            ADD(pos);
            continue;
        }
        if (nws > 1 && CP(pos + nws) != OOR) {
            pos += nws - 1;
            ADD(pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            ADD(pos);
            continue;
        }
        ADD(++pos);
    }
    return n_out;
}
#undef OOR
#undef FL
#undef CP
#undef IS_L
#undef IS_N
#undef IS_WS
#undef ADD

int tok_pre_split(const pre_stage *st, tok_scratch *s, const uint32_t *cps, const uint16_t *fl, const uint32_t *in,
                  size_t n_in, uint32_t *out, size_t *n_out) {
    size_t n = 0, off = 0, total = 0;
    for (size_t k = 0; k < n_in; k++) total += in[k];
    if (st->kind == PRE_STAGE_REGEX) {
        if (scratch_cps(s, total)) return TOK_ENOMEM;
        regex_text(st->re, cps, fl, total, s->txt);
    }
    for (size_t k = 0; k < n_in; k++) {
        size_t len = in[k];
        switch (st->kind) {
        case PRE_STAGE_GPT2: n += split_gpt2(cps + off, fl + off, len, out + n); break;
        case PRE_STAGE_LLAMA3: n += split_llama3(cps + off, fl + off, len, (size_t)st->max_digits, out + n); break;
        default: n += split_regex(st->re, s, s->txt + off, len, out + n); break;
        }
        off += len;
    }
    *n_out = n;
    return s->oom ? TOK_ENOMEM : 0;
}

/* ---- merges ---------------------------------------------------------------------------- */

#define MERGE_EMPTY UINT64_MAX

static inline uint32_t merge_hash(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32); }

int tok_merge_reserve(tok_vocab *v, size_t n, char *err, size_t err_len) {
    if (n > (size_t)INT32_MAX / 4) return fail(err, err_len, TOK_EFORMAT, "tok: %zu merges, too many", n);
    uint32_t slots = 16;
    while (slots < 2 * n + 2) slots *= 2;
    free(v->merge_key);
    free(v->merge_val);
    v->merge_key = malloc((size_t)slots * sizeof *v->merge_key);
    v->merge_val = malloc((size_t)slots * sizeof *v->merge_val);
    if (!v->merge_key || !v->merge_val) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory for %zu merges", n);
    memset(v->merge_key, 0xff, (size_t)slots * sizeof *v->merge_key);
    v->merge_mask = slots - 1;
    v->n_merges = 0;
    return 0;
}

static inline bool merge_find(const tok_vocab *v, int32_t l, int32_t r, int32_t *rank, int32_t *merged) {
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint32_t i = merge_hash(key) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        uint64_t k = v->merge_key[i];
        if (k == MERGE_EMPTY) return false;
        if (k == key) {
            *rank = (int32_t)(v->merge_val[i] >> 32);
            *merged = (int32_t)(uint32_t)v->merge_val[i];
            return true;
        }
    }
}

bool tok_merge_find(const tok_vocab *v, int32_t l, int32_t r, int32_t *rank, int32_t *merged) {
    if (!v->merge_key) return false;
    return merge_find(v, l, r, rank, merged);
}


int tok_merge_add(tok_vocab *v, const char *a, size_t na, const char *b, size_t nb, char *err, size_t err_len) {
    int32_t rank = v->n_merges++;
    if (!v->merge_key) return fail(err, err_len, TOK_EINVAL, "tok: merge table not reserved");
    if ((uint32_t)v->n_merges > (v->merge_mask + 1) / 2)
        return fail(err, err_len, TOK_EINVAL, "tok: more merges than reserved");
    if (na == 0 || nb == 0) return 0; /* llama.cpp keeps ("", "") for a merge without a space: never used */
    if (na > UINT32_MAX / 4 || nb > UINT32_MAX / 4) return fail(err, err_len, TOK_EFORMAT, "tok: merge %d too long", rank);
    int32_t l = tok_intern(v, a, na);
    int32_t r = l >= 0 ? tok_intern(v, b, nb) : -1;
    int32_t m = -1;
    if (r >= 0) {
        /* the merged text a + b: look it up without building it when possible */
        char small[256];
        char *ab = na + nb <= sizeof small ? small : malloc(na + nb);
        if (ab) {
            memcpy(ab, a, na);
            memcpy(ab + na, b, nb);
            m = tok_intern(v, ab, na + nb);
            if (ab != small) free(ab);
        }
    }
    if (l < 0 || r < 0 || m < 0) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint32_t i = merge_hash(key) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        if (v->merge_key[i] == key) return 0; /* first rank wins (bpe_ranks.emplace) */
        if (v->merge_key[i] == MERGE_EMPTY) {
            v->merge_key[i] = key;
            v->merge_val[i] = (uint64_t)(uint32_t)rank << 32 | (uint32_t)m;
            return 0;
        }
    }
}

void tok_bpe_finish(tok_vocab *v) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        v->hex_tok[b] = tok_vocab_find(v, hex, 6);
        size_t k = uni_encode(uni_byte_to_cpt((uint8_t)b), v->byte_utf8[b]);
        v->byte_utf8_len[b] = (uint8_t)k;
        v->byte_sym[b] = tok_sym_find(v, v->byte_utf8[b], k);
        char one = (char)b;
        v->byte_tok[b] = tok_vocab_find(v, &one, 1);
    }
}

void tok_bpe_free(tok_vocab *v) {
    for (int k = 0; k < v->n_pre; k++) tok_regex_free(v->pre[k].re);
    v->n_pre = 0;
    free(v->merge_key);
    free(v->merge_val);
    v->merge_key = NULL;
    v->merge_val = NULL;
}

/* ---- BPE encoding --------------------------------------------------------------------------- */

/* llm_bigram_bpe::comparator inverted: a pops before b. */
static inline bool bpe_before(const bpe_bigram *a, const bpe_bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void bpe_push(tok_scratch *s, bpe_bigram b) {
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bpe_before(&b, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = b;
}

static bpe_bigram bpe_pop(tok_scratch *s) {
    bpe_bigram top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t best = (l + 1 < n && bpe_before(&s->heap[l + 1], &s->heap[l])) ? l + 1 : l;
        if (!bpe_before(&s->heap[best], &last)) break;
        s->heap[i] = s->heap[best];
        i = best;
    }
    if (n) s->heap[i] = last;
    return top;
}

static inline void bpe_add(const tok_vocab *v, tok_scratch *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t lid = s->sym[left].id, rid = s->sym[right].id, rank, merged;
    if (lid < 0 || rid < 0 || !merge_find(v, lid, rid, &rank, &merged)) return;
    bpe_push(s, (bpe_bigram){rank, left, right, lid, rid, merged});
}

static void bpe_emit_sym(const tok_vocab *v, const tok_scratch *s, const bpe_sym *y, tok_out *out) {
    if (y->id >= 0 && y->id < v->n_vocab) {
        tok_emit(out, y->id);
        return;
    }
    /* not a token: each byte of its text as a one-byte token (raw symbols:
     * its <0xXX> token), where there is one */
    for (uint32_t j = 0; j < y->n; j++) {
        uint8_t b = (uint8_t)s->word[y->off + j];
        int32_t t = v->raw_symbols ? v->hex_tok[b] : v->byte_tok[b];
        if (t >= 0) tok_emit(out, t);
    }
}

/* One pre-tokenized word (code points) through llm_tokenizer_bpe_session::tokenize. */
static int bpe_word(const tok_vocab *v, tok_scratch *s, const uint32_t *cps, size_t n, tok_out *out) {
    if (scratch_word(s, 4 * n)) return TOK_ENOMEM;
    size_t wl = 0;
    int32_t ns = 0;
    bool newlines = true;
    for (size_t i = 0; i < n; i++) {
        char u[4];
        size_t k = uni_encode(cps[i], u);
        newlines &= cps[i] == '\n';
        if (v->raw_symbols) { /* one symbol per UTF-8 character, no byte encoding */
            memcpy(s->word + wl, u, k);
            s->sym[ns] = (bpe_sym){ns - 1, ns + 1, (uint32_t)wl, (uint32_t)k, tok_sym_find(v, u, k)};
            wl += k;
            ns++;
            continue;
        }
        for (size_t j = 0; j < k; j++) {
            uint8_t b = (uint8_t)u[j];
            uint8_t bl = v->byte_utf8_len[b];
            s->sym[ns] = (bpe_sym){ns - 1, ns + 1, (uint32_t)wl, bl, v->byte_sym[b]};
            memcpy(s->word + wl, v->byte_utf8[b], bl);
            wl += bl;
            ns++;
        }
    }
    if (ns == 0) return 0;
    s->sym[ns - 1].next = -1;
    if (v->raw_symbols && newlines) { /* llama.cpp's Gemma 4 fix: a run of newlines that is a token */
        int32_t id = tok_vocab_find(v, s->word, wl);
        if (id >= 0) {
            tok_emit(out, id);
            return 0;
        }
    }
    if (v->ignore_merges) {
        int32_t id = tok_vocab_find(v, s->word, wl);
        if (id >= 0) {
            tok_emit(out, id);
            return 0;
        }
    }
    s->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) bpe_add(v, s, i - 1, i);
    while (s->heap_n) {
        bpe_bigram b = bpe_pop(s);
        bpe_sym *L = &s->sym[b.left], *R = &s->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->id != b.lid || R->id != b.rid) continue; /* outdated */
        L->n += R->n;
        L->id = b.merged;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s->sym[R->next].prev = b.left;
        bpe_add(v, s, L->prev, b.left);
        bpe_add(v, s, b.left, L->next);
    }
    for (int32_t i = 0; i != -1; i = s->sym[i].next) bpe_emit_sym(v, s, &s->sym[i], out);
    return 0;
}

int tok_bpe_fragment(const tok_vocab *v, tok_scratch *s, const char *text, size_t len, tok_out *out) {
    if (len == 0) return 0;
    if (scratch_cps(s, len)) return TOK_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len;) s->cps[n++] = uni_decode(text, len, &i);
    if (v->nfc && !uni_is_nfc(s->cps, n)) {
        if (s->nfc_cap < UNI_MAX_DECOMP * n) {
            if (!grow(&s->nfc, UNI_MAX_DECOMP * n, sizeof *s->nfc)) return TOK_ENOMEM;
            s->nfc_cap = UNI_MAX_DECOMP * n;
        }
        size_t m = uni_nfc(s->cps, n, s->nfc);
        if (scratch_cps(s, m)) return TOK_ENOMEM;
        memcpy(s->cps, s->nfc, m * sizeof *s->cps);
        n = m;
    }
    if (n == 0) return 0;
    if (v->raw_symbols) /* llama_escape_whitespace */
        for (size_t i = 0; i < n; i++)
            if (s->cps[i] == ' ') s->cps[i] = 0x2581;
    for (size_t i = 0; i < n; i++) s->fl[i] = uni_flags(s->cps[i]);
    size_t np = 1;
    s->pa[0] = (uint32_t)n;
    for (int k = 0; k < v->n_pre; k++) {
        int rc = tok_pre_split(&v->pre[k], s, s->cps, s->fl, s->pa, np, s->pb, &np);
        if (rc) return rc;
        uint32_t *t = s->pa;
        s->pa = s->pb;
        s->pb = t;
    }
    size_t off = 0;
    for (size_t k = 0; k < np; k++) {
        int rc = bpe_word(v, s, s->cps + off, s->pa[k], out);
        if (rc) return rc;
        off += s->pa[k];
    }
    return 0;
}

/* ---- WordPiece -------------------------------------------------------------------------------- */

/* llm_tokenizer_wpm_session::is_chinese_char (with HF's 0x2B920 quirk) */
static bool wpm_is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest-match of "▁" + word (word at s->word + 3, wl bytes). */
static void wpm_word(const tok_vocab *v, tok_scratch *s, size_t wl, tok_out *out) {
    if (wl == 0) return;
    char *w = s->word;
    w[0] = (char)0xE2, w[1] = (char)0x96, w[2] = (char)0x81;
    size_t n = wl + 3, start = out->n;
    for (size_t i = 0; i < n; i++) {
        bool match = false;
        size_t jmax = i + v->max_text_len + 1 < n ? i + v->max_text_len + 1 : n;
        for (size_t j = jmax; j > i; j--) {
            int32_t id = tok_vocab_find(v, w + i, j - i);
            if (id >= 0) {
                tok_emit(out, id);
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) { /* discard the word's tokens */
            out->n = start;
            break;
        }
    }
    if (out->n == start && v->unk >= 0) tok_emit(out, v->unk);
}

int tok_wpm_fragment(const tok_vocab *v, tok_scratch *s, const char *text, size_t len, tok_out *out) {
    /* BertNormalizer as llama.cpp's preprocess: NFD (first code point), drop
     * controls and marks, lowercase, split at whitespace, punctuation, ASCII
     * symbols and CJK ideographs */
    if (scratch_word(s, 4 * len + 8)) return TOK_ENOMEM;
    size_t wl = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c = uni_nfd_first(uni_decode(text, len, &i));
        uint16_t f = uni_flags(c);
        if (f & UNI_WHITESPACE) {
            wpm_word(v, s, wl, out);
            wl = 0;
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & (UNI_CONTROL | UNI_MARK))) continue;
        char u[4];
        size_t k = uni_encode(uni_tolower(c), u);
        if ((f & UNI_PUNCT) || (c < 0x7F && (f & UNI_SYMBOL)) || wpm_is_chinese(c)) {
            wpm_word(v, s, wl, out);
            memcpy(s->word + 3, u, k);
            wpm_word(v, s, k, out);
            wl = 0;
        } else {
            memcpy(s->word + 3 + wl, u, k);
            wl += k;
        }
    }
    wpm_word(v, s, wl, out);
    return 0;
}
