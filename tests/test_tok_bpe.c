/* test_tok_bpe.c — byte-level BPE, WordPiece, tokenizer.json and the Unicode
 * tables: the generated tables, the pre-tokenizer regex engine (against
 * llama.cpp's hand-written splitters on random text), merges on a small
 * in-memory vocabulary, special tokens and end-of-generation, decoding, and
 * the real Qwen3 / Llama 3 tokenizers against llama.cpp's references. */
#include "test.h"

#include <cJSON.h>
#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "formats/gguf.h"
#include "text/tok.h"
#include "text/tok_impl.h"
#include "text/unicode.h"

/* ---- helpers ------------------------------------------------------------------ */

static int32_t *enc(const tok_vocab *v, const char *s, size_t len, bool add_special, bool parse_special, size_t *n) {
    size_t cap = tok_encode_max(len);
    int32_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
    int rc = tok_encode(v, s, len, add_special, parse_special, ids, cap, n);
    if (rc != 0) {
        test_fail(__FILE__, __LINE__, "tok_encode rc %d", rc);
        *n = 0;
    }
    return ids;
}

static void ids_str(const int32_t *ids, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && o + 16 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? " %d" : "%d", ids[i]);
}

static bool ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void expect_ids_(const tok_vocab *v, const char *text, bool add_special, bool parse_special, const int32_t *want,
                        size_t nw, int line) {
    size_t n;
    int32_t *got = enc(v, text, strlen(text), add_special, parse_special, &n);
    if (!ids_eq(got, n, want, nw)) {
        char a[1024], b[1024];
        ids_str(got, n, a, sizeof a);
        ids_str(want, nw, b, sizeof b);
        test_fail(__FILE__, line, "\"%s\": got %s, expected %s", text, a, b);
    }
    free(got);
}
#define EXPECT_IDS(v, text, add, ps, ...)                                                   \
    do {                                                                                    \
        const int32_t w_[] = {__VA_ARGS__};                                                 \
        expect_ids_(v, text, add, ps, w_, sizeof w_ / sizeof w_[0], __LINE__);              \
    } while (0)

static size_t json_ids(const cJSON *arr, int32_t *out, size_t cap) {
    size_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) if (n < cap) out[n++] = (int32_t)it->valueint;
    return n;
}

static bool utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return false;
        if (i + k >= n) return false;
        for (size_t j = 1; j <= k; j++) {
            unsigned b = s[i + j];
            if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) return false;
        }
        i += k + 1;
    }
    return true;
}

/* ---- the Unicode tables ------------------------------------------------------------ */

TEST(tok_unicode, flags) {
    static const struct { uint32_t cp; uint16_t want; } cases[] = {
        {'A', UNI_LETTER}, {'5', UNI_NUMBER}, {' ', UNI_SEPARATOR | UNI_WHITESPACE},
        {'\t', UNI_CONTROL | UNI_WHITESPACE}, {'!', UNI_PUNCT}, {'$', UNI_SYMBOL}, {'~', UNI_SYMBOL},
        {0x85, UNI_CONTROL | UNI_WHITESPACE}, {0xA0, UNI_SEPARATOR | UNI_WHITESPACE},
        {0x3000, UNI_SEPARATOR | UNI_WHITESPACE}, {0x4E00, UNI_LETTER}, {0xAC00, UNI_LETTER},
        {0x1F600, UNI_SYMBOL}, {0xE000, UNI_CONTROL}, {0xD800, UNI_CONTROL}, {0x0378, UNI_UNDEFINED},
        {0x0663, UNI_NUMBER}, {0x110000, UNI_UNDEFINED}, {0x10FFFD, UNI_CONTROL}, {0x10FFFF, UNI_UNDEFINED},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        EXPECT_MSG((uni_flags(cases[k].cp) & ~UNI_NFC_MAYBE) == cases[k].want, "U+%04X: flags 0x%x, expected 0x%x",
                   cases[k].cp, uni_flags(cases[k].cp), cases[k].want);
    EXPECT(uni_flags(0x0301) & UNI_MARK);
    EXPECT(uni_flags(0x0301) & UNI_NFC_MAYBE);
    EXPECT(!(uni_flags(0xE9) & UNI_NFC_MAYBE));
    EXPECT_STR_EQ(uni_version, "15.0.0");
}

TEST(tok_unicode, case_and_decomposition) {
    EXPECT_EQ_I(uni_tolower('A'), 'a');
    EXPECT_EQ_I(uni_tolower('z'), 'z');
    EXPECT_EQ_I(uni_tolower(0xC4), 0xE4);     /* Ä */
    EXPECT_EQ_I(uni_tolower(0x130), 'i');     /* İ, simple mapping */
    EXPECT_EQ_I(uni_tolower(0x3A3), 0x3C3);   /* Σ */
    EXPECT_EQ_I(uni_tolower(0x212A), 'k');    /* Kelvin sign */
    EXPECT_EQ_I(uni_tolower(0x4E00), 0x4E00);
    EXPECT_EQ_I(uni_nfd_first(0xE9), 'e');    /* é */
    EXPECT_EQ_I(uni_nfd_first(0x212B), 'A');  /* Å (Angstrom) → U+00C5 → A */
    EXPECT_EQ_I(uni_nfd_first(0x1EAD), 'a');  /* ậ: two marks */
    EXPECT_EQ_I(uni_nfd_first(0xAC00), 0x1100); /* 가 → ᄀ */
    EXPECT_EQ_I(uni_nfd_first('x'), 'x');
    EXPECT_EQ_I(uni_ccc(0x301), 230);
    EXPECT_EQ_I(uni_ccc(0x323), 220);
    EXPECT_EQ_I(uni_ccc('a'), 0);
}

static void expect_nfc(const uint32_t *in, size_t n, const uint32_t *want, size_t nw, int line) {
    uint32_t out[64];
    size_t m = uni_nfc(in, n, out);
    if (m != nw || memcmp(out, want, m * sizeof *out))
        test_fail(__FILE__, line, "NFC: %zu code points (first U+%04X), expected %zu (first U+%04X)", m, m ? out[0] : 0,
                  nw, want[0]);
}
#define EXPECT_NFC(in, ...)                                                                         \
    do {                                                                                            \
        const uint32_t i_[] = in, w_[] = {__VA_ARGS__};                                             \
        expect_nfc(i_, sizeof i_ / sizeof i_[0], w_, sizeof w_ / sizeof w_[0], __LINE__);           \
    } while (0)
#define L(...) {__VA_ARGS__}

TEST(tok_unicode, nfc) {
    EXPECT_NFC(L('e', 0x301), 0xE9);
    EXPECT_NFC(L('A', 0x30A, 'b'), 0xC5, 'b');
    EXPECT_NFC(L(0x212B), 0xC5);                      /* singleton */
    EXPECT_NFC(L('a', 0x302, 0x323), 0x1EAD);         /* marks out of canonical order */
    EXPECT_NFC(L('a', 0x323, 0x302), 0x1EAD);
    EXPECT_NFC(L(0x1100, 0x1161, 0x11A8), 0xAC01);    /* Hangul L V T */
    EXPECT_NFC(L(0xAC00, 0x11A8), 0xAC01);            /* LV + T */
    EXPECT_NFC(L(0x958), 0x915, 0x93C);               /* composition exclusion */
    EXPECT_NFC(L(0x301, 'e'), 0x301, 'e');            /* a leading mark stays */
    EXPECT_NFC(L('x', 'y'), 'x', 'y');
    uint32_t in[] = {'e', 0x301}, out[8];
    EXPECT(!uni_is_nfc(in, 2));
    EXPECT(uni_is_nfc(out, uni_nfc(in, 2, out)));
}

TEST(tok_unicode, utf8_and_byte_map) {
    size_t i = 0;
    EXPECT_EQ_I(uni_decode("\xe2\x82\xac", 3, &i), 0x20AC);
    EXPECT_EQ_I(i, 3);
    i = 0;
    EXPECT_EQ_I(uni_decode("\xe2\x82", 2, &i), UNI_REPLACEMENT); /* cut short: one byte consumed */
    EXPECT_EQ_I(i, 1);
    i = 0;
    EXPECT_EQ_I(uni_decode("\xc0\x80", 2, &i), 0); /* llama.cpp does not reject overlong forms */
    EXPECT_EQ_I(i, 2);
    i = 0;
    EXPECT_EQ_I(uni_decode("\x80", 1, &i), UNI_REPLACEMENT);
    i = 0;
    uint32_t big = uni_decode("\xf5\x80\x80\x80", 4, &i);
    EXPECT(big > UNI_MAX_CPT);
    char u[4];
    EXPECT_EQ_I(uni_encode(big, u), 3);
    EXPECT(!memcmp(u, "\xef\xbf\xbd", 3));
    EXPECT_EQ_I(uni_encode(0x1F600, u), 4);
    EXPECT(!memcmp(u, "\xf0\x9f\x98\x80", 4));
    /* GPT-2 bytes_to_unicode: a bijection; printable bytes as themselves */
    bool seen[0x200] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t c = uni_byte_to_cpt((uint8_t)b);
        EXPECT(c < 0x200 && !seen[c]);
        if (c < 0x200) seen[c] = true;
        EXPECT_EQ_I(uni_cpt_to_byte(c), b);
    }
    EXPECT_EQ_I(uni_byte_to_cpt(' '), 0x120); /* Ġ */
    EXPECT_EQ_I(uni_byte_to_cpt('\n'), 0x10A); /* Ċ */
    EXPECT_EQ_I(uni_byte_to_cpt('a'), 'a');
    EXPECT_EQ_I(uni_byte_to_cpt(0xAD), 0x143);
    EXPECT_EQ_I(uni_cpt_to_byte(0x144), -1);
    EXPECT_EQ_I(uni_cpt_to_byte(' '), -1);
}

/* ---- the pre-tokenizer regex engine --------------------------------------------------- */

/* Pieces of text under one stage, joined with '|'. */
static void split_str(const pre_stage *st, const char *text, char *out, size_t cap) {
    size_t len = strlen(text), n = 0;
    uint32_t *cps = malloc((len + 1) * sizeof *cps), *in = malloc((len + 1) * sizeof *in), *pc = malloc((len + 1) * sizeof *pc);
    uint16_t *fl = malloc((len + 1) * sizeof *fl);
    for (size_t i = 0; i < len;) cps[n++] = uni_decode(text, len, &i);
    for (size_t i = 0; i < n; i++) fl[i] = uni_flags(cps[i]);
    tok_scratch *s = tok_scratch_new();
    size_t np = 0, o = 0, off = 0;
    in[0] = (uint32_t)n;
    if (n) EXPECT_EQ_I(tok_pre_split(st, s, cps, fl, in, 1, pc, &np), 0);
    out[0] = 0;
    for (size_t k = 0; k < np && o + 8 < cap; k++) {
        if (k) out[o++] = '|';
        for (uint32_t j = 0; j < pc[k] && o + 8 < cap; j++) o += uni_encode(cps[off + j], out + o);
        off += pc[k];
    }
    out[o] = 0;
    EXPECT_EQ_I(off, n);
    tok_scratch_free(s);
    free(cps);
    free(in);
    free(pc);
    free(fl);
}

static void expect_split(const char *pattern, const char *text, const char *want, int line) {
    char err[256], got[1024];
    pre_stage st = {.kind = PRE_STAGE_REGEX};
    if (tok_regex_compile(pattern, &st.re, err, sizeof err)) {
        test_fail(__FILE__, line, "compile '%s': %s", pattern, err);
        return;
    }
    split_str(&st, text, got, sizeof got);
    if (strcmp(got, want)) test_fail(__FILE__, line, "/%s/ on \"%s\": got \"%s\", expected \"%s\"", pattern, text, got, want);
    tok_regex_free(st.re);
}
#define EXPECT_SPLIT(p, t, w) expect_split(p, t, w, __LINE__)

TEST(tok_regex, split) {
    EXPECT_SPLIT("[\r\n]", "a\nb\r\n", "a|\n|b|\r|\n");
    EXPECT_SPLIT("\\s+$", "ab  ", "ab|  ");
    EXPECT_SPLIT("\\s+$", "a  b", "a  b");
    EXPECT_SPLIT("\\p{N}", "a12b", "a|1|2|b");
    EXPECT_SPLIT("\\p{N}+", "x\u0663\u0664y", "x|\u0663\u0664|y"); /* Arabic-Indic digits are \\p{N} */
    EXPECT_SPLIT("[0-9][0-9][0-9]", "12345", "123|45");
    EXPECT_SPLIT("\\s?\\p{L}+", " h\u00e9llo w\u00f6rld", " h\u00e9llo| w\u00f6rld");
    EXPECT_SPLIT("a|ab", "ab", "a|b");               /* first alternative, not longest */
    EXPECT_SPLIT("ab|a", "ab", "ab");
    EXPECT_SPLIT("x(?=y)", "xyxz", "x|yxz");
    EXPECT_SPLIT("x(?!y)", "xyxz", "xy|x|z");
    EXPECT_SPLIT("\\s+(?!\\S)|\\s+", "a   b", "a|  | |b"); /* backtracks to leave one space */
    EXPECT_SPLIT("a{2,3}", "aaaaaaa", "aaa|aaa|a");
    EXPECT_SPLIT("a{2}", "aaaaa", "aa|aa|a");
    EXPECT_SPLIT("a{2,}", "aaaaab", "aaaaa|b");
    EXPECT_SPLIT("a+?", "aaa", "a|a|a");
    EXPECT_SPLIT("(?:ab)+", "ababa", "abab|a");
    EXPECT_SPLIT("(a|b)c", "acbcc", "ac|bc|c");
    EXPECT_SPLIT("[^a-c]+", "abxyzc", "ab|xyz|c");
    EXPECT_SPLIT("\\d+\\.\\d+", "pi=3.14!", "pi=|3.14|!");
    EXPECT_SPLIT("\\w+", "foo_bar-baz", "foo_bar|-|baz");
    EXPECT_SPLIT("\\x41\\u0042", "zAB", "z|AB");
    /* llama.cpp's collapsed categories: '~' is no \\p{S}, '$' and '+' are */
    EXPECT_SPLIT("[\\p{S}]+", "$+~", "$+|~");
    EXPECT_SPLIT("\\p{P}+", "a,.!b", "a|,.!|b");
    EXPECT_SPLIT("\\p{P}+", "\u3002\u3001x", "\u3002\u3001|x"); /* CJK punctuation */
    /* no categories: matched on code points; non-ASCII whitespace is \\s */
    EXPECT_SPLIT("[\u4e00-\u9fa5]+", "\u6211\u60f3apple", "\u6211\u60f3|apple");
    EXPECT_SPLIT("\\s+", "a\u3000\u00a0b", "a|\u3000\u00a0|b");
    EXPECT_SPLIT(".", "ab", "a|b");
    EXPECT_SPLIT("^a", "aa", "a|a");
}

TEST(tok_regex, errors) {
    static const char *const bad[] = {
        "",          /* matches empty */
        "a*",        /* matches empty */
        "(a*)*",     /* empty loop body */
        "\\1",       /* back-reference */
        "(?i:a)",    /* inline flags */
        "[z-a]",     /* range order */
        "a**",       /* nested quantifier */
        "(ab",       /* unbalanced */
        "ab)",       /* unbalanced */
        "*a",        /* nothing to repeat */
        "\\p{Han}+", /* a property llama.cpp does not collapse */
        "\\p{L}\u00e9", /* categories with non-ASCII */
        "[[:alpha:]]",
        "\\bx",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char err[256] = "";
        tok_regex *re = (tok_regex *)1;
        EXPECT_MSG(tok_regex_compile(bad[k], &re, err, sizeof err) != 0, "'%s' compiled", bad[k]);
        EXPECT(re == NULL);
        EXPECT_MSG(strncmp(err, "tok: regex", 10) == 0, "'%s': %s", bad[k], err);
    }
}

/* llama.cpp's regexes for the three hand-written splitters. */
#define RX_GPT2_T "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3_T                                                                                    \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2_T                                                                                     \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* The splitters (which llama.cpp uses for GPT-2 and Llama 3, and this code
 * also for Qwen2) give the same pieces as the regex run like std::regex, on
 * random text over characters that exercise every branch. */
TEST(tok_regex, splitters_equal_regex) {
    static const char *const alphabet[] = {
        "a", "Z", "s", "t", "l", "v", "e", "r", "m", "d", "S", "T", "L", "E", "D", "\u00e9", "\u044f", "\u4e2d",
        "\uac00", "5", "0", "\u0663", "\u00bd", " ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "\xc2\x85", "'",
        "'", "!", ".", "~", "$", "_", "-", "\U0001f600", "\u0301", "\u200d", "\u0378", "\x01", "\xff",
    };
    const size_t na = sizeof alphabet / sizeof alphabet[0];
    struct { const char *rx; pre_stage custom; } pairs[] = {
        {RX_GPT2_T, {.kind = PRE_STAGE_GPT2}},
        {RX_LLAMA3_T, {.kind = PRE_STAGE_LLAMA3, .max_digits = 3}},
        {RX_QWEN2_T, {.kind = PRE_STAGE_LLAMA3, .max_digits = 1}},
    };
    uint64_t r = 12345;
    for (size_t p = 0; p < 3; p++) {
        char err[256];
        pre_stage rx = {.kind = PRE_STAGE_REGEX};
        if (tok_regex_compile(pairs[p].rx, &rx.re, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s", err);
            continue;
        }
        int n_diff = 0;
        for (int iter = 0; iter < 1500 && n_diff < 3; iter++) {
            char text[512];
            size_t o = 0;
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            size_t len = (r >> 33) % 24;
            for (size_t k = 0; k < len; k++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                const char *c = alphabet[(r >> 33) % na];
                memcpy(text + o, c, strlen(c));
                o += strlen(c);
            }
            text[o] = 0;
            char a[2048], b[2048];
            split_str(&pairs[p].custom, text, a, sizeof a);
            split_str(&rx, text, b, sizeof b);
            if (strcmp(a, b)) {
                test_fail(__FILE__, __LINE__, "stage %zu on \"%s\": splitter \"%s\", regex \"%s\"", p, text, a, b);
                n_diff++;
            }
        }
        tok_regex_free(rx.re);
    }
}

/* ---- a byte-level BPE vocabulary built in memory (no ../shared needed) ---------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} gbuf;

static void gb_put(gbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u32(gbuf *b, uint32_t x) { gb_put(b, &x, 4); }
static void gb_u64(gbuf *b, uint64_t x) { gb_put(b, &x, 8); }
static void gb_str(gbuf *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}
static void gb_kv_str(gbuf *b, const char *k, const char *v) {
    gb_str(b, k);
    gb_u32(b, GGUF_VT_STRING);
    gb_str(b, v);
}
static void gb_kv_strs(gbuf *b, const char *k, const char *const *v, size_t n) {
    gb_str(b, k);
    gb_u32(b, GGUF_VT_ARRAY);
    gb_u32(b, GGUF_VT_STRING);
    gb_u64(b, n);
    for (size_t i = 0; i < n; i++) gb_str(b, v[i]);
}

/* ids 0..255: the GPT-2 characters of bytes 0..255; then these: */
static const char *const bpe_extra[] = {
    "he", "\xc4\xa0t", "\xc4\xa0the", "ab", "xyz", "<|endoftext|>", "<|im_end|>", "<think>", "<|fim_pad|>",
    "\xe2\x82\xac", /* a normal token no byte shows: decodes to [UNK_BYTE_..] */
    "abc",
};
enum { BPE_HE = 256, BPE_GT, BPE_GTHE, BPE_AB, BPE_XYZ, BPE_EOT, BPE_IMEND, BPE_THINK, BPE_FIMPAD, BPE_EURO, BPE_ABC,
       BPE_N };
static const char *const bpe_merges[] = {
    "h e", "\xc4\xa0 t", "\xc4\xa0t he", "a b", "x y", "xy z", /* "xy" is no token: interned */
};

static gbuf bpe_gguf(const char *model, const char *pre, bool with_merges, int add_bos) {
    gbuf b = {0};
    char toks[BPE_N][16];
    const char *tp[BPE_N];
    for (int i = 0; i < 256; i++) {
        char u[4];
        size_t k = uni_encode(uni_byte_to_cpt((uint8_t)i), u);
        memcpy(toks[i], u, k);
        toks[i][k] = 0;
        tp[i] = toks[i];
    }
    for (int i = 256; i < BPE_N; i++) tp[i] = bpe_extra[i - 256];
    int n_kv = 4 + (pre != NULL) + with_merges + (add_bos >= 0);
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 0);
    gb_u64(&b, (uint64_t)n_kv);
    gb_kv_str(&b, "tokenizer.ggml.model", model);
    if (pre) gb_kv_str(&b, "tokenizer.ggml.pre", pre);
    gb_kv_strs(&b, "tokenizer.ggml.tokens", tp, BPE_N);
    gb_str(&b, "tokenizer.ggml.token_type");
    gb_u32(&b, GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_INT32);
    gb_u64(&b, BPE_N);
    for (int i = 0; i < BPE_N; i++) gb_u32(&b, i == BPE_EOT || i == BPE_IMEND ? 3 : i == BPE_THINK ? 4 : 1);
    if (with_merges) gb_kv_strs(&b, "tokenizer.ggml.merges", bpe_merges, sizeof bpe_merges / sizeof bpe_merges[0]);
    gb_str(&b, "tokenizer.ggml.eos_token_id");
    gb_u32(&b, GGUF_VT_UINT32);
    gb_u32(&b, BPE_EOT);
    if (add_bos >= 0) {
        gb_str(&b, "tokenizer.ggml.add_bos_token");
        gb_u32(&b, GGUF_VT_BOOL);
        uint8_t x = (uint8_t)add_bos;
        gb_put(&b, &x, 1);
    }
    return b;
}

static int bpe_load(const char *model, const char *pre, bool with_merges, int add_bos, tok_vocab **v, char *err,
                    size_t err_len) {
    gbuf b = bpe_gguf(model, pre, with_merges, add_bos);
    gguf_file *g = NULL;
    int rc = gguf_open_mem(b.p, b.n, &g, err, err_len);
    if (rc == 0) rc = tok_load_gguf(g, v, err, err_len);
    else test_fail(__FILE__, __LINE__, "gguf_open_mem: %s", err);
    gguf_close(g);
    free(b.p);
    return rc;
}

TEST(tok_bpe, mini_merges) {
    char err[256];
    tok_vocab *v;
    if (bpe_load("gpt2", "gpt-2", true, -1, &v, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    EXPECT_EQ_I(tok_type(v), TOK_TYPE_BPE);
    EXPECT_EQ_I(tok_n_vocab(v), BPE_N);
    EXPECT_IDS(v, "he", false, false, BPE_HE);
    EXPECT_IDS(v, " the", false, false, BPE_GTHE);         /* Ġ t, h e, Ġt he */
    EXPECT_IDS(v, "the", false, false, 't', BPE_HE);
    EXPECT_IDS(v, "abab", false, false, BPE_AB, BPE_AB);
    EXPECT_IDS(v, "xyz", false, false, BPE_XYZ);            /* through the interned "xy" */
    EXPECT_IDS(v, "xy", false, false, 'x', 'y');            /* "xy" is no token: its bytes */
    EXPECT_IDS(v, "abc", false, false, BPE_AB, 'c');        /* gpt-2: merges only */
    EXPECT_IDS(v, "a b", false, false, 'a', ' ', 'b');      /* " b": Ġ b, ids are the bytes */
    tok_free(v);
    /* llama3 ignores merges for a word that is a token */
    if (bpe_load("gpt2", "llama-bpe", true, 0, &v, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    EXPECT_STR_EQ(tok_pre_name(v), "llama3");
    EXPECT_IDS(v, "abc", false, false, BPE_ABC);
    EXPECT_IDS(v, "abcd", false, false, BPE_AB, 'c', 'd');
    tok_free(v);
}

TEST(tok_bpe, mini_specials_and_eog) {
    char err[256];
    tok_vocab *v;
    if (bpe_load("gpt2", "qwen2", true, 1, &v, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    EXPECT(tok_add_bos(v));
    EXPECT_EQ_I(tok_bos(v), 11); /* BPE default BOS id */
    EXPECT_EQ_I(tok_eos(v), BPE_EOT);
    EXPECT_EQ_I(tok_eot(v), BPE_IMEND); /* by name: <|im_end|> before <|endoftext|> */
    EXPECT(tok_is_eog(v, BPE_EOT) && tok_is_eog(v, BPE_IMEND) && tok_is_eog(v, BPE_FIMPAD));
    EXPECT(!tok_is_eog(v, BPE_THINK) && !tok_is_eog(v, 'a'));
    EXPECT(tok_attr(v, BPE_FIMPAD) & TOK_ATTR_CONTROL); /* FIM pad found by name: made control */
    EXPECT(tok_attr(v, BPE_THINK) & TOK_ATTR_USER_DEFINED);
    EXPECT_IDS(v, "a<|im_end|>b", false, true, 'a', BPE_IMEND, 'b');
    EXPECT_IDS(v, "a<think>b", false, false, 'a', BPE_THINK, 'b'); /* user-defined: always */
    size_t n;
    int32_t *ids = enc(v, "a<|im_end|>", 11, false, false, &n);
    EXPECT_EQ_I(n, 11); /* not parsed: 'a' and the 10 bytes of the text */
    for (size_t i = 0; i < n; i++) EXPECT(ids[i] != BPE_IMEND);
    free(ids);
    EXPECT_IDS(v, "he", true, false, 11, BPE_HE); /* add_bos */
    tok_free(v);
}

TEST(tok_bpe, mini_decode_and_stream) {
    char err[256];
    tok_vocab *v;
    if (bpe_load("gpt2", "gpt-2", true, 0, &v, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    char buf[256];
    EXPECT_EQ_I(tok_decode_token(v, BPE_GTHE, false, buf, sizeof buf), 4);
    EXPECT_STR_EQ(buf, " the");
    EXPECT_EQ_I(tok_decode_token(v, '\n' + 0, false, buf, sizeof buf), 1); /* id 10 is byte 0x0A's character */
    EXPECT_EQ_I(buf[0], '\n');
    int n = tok_decode_token(v, BPE_EURO, false, buf, sizeof buf);
    EXPECT(n > 0);
    EXPECT_STR_EQ(buf, "[UNK_BYTE_0xe282ac\xe2\x82\xac]");
    EXPECT_EQ_I(tok_decode_token(v, BPE_IMEND, false, buf, sizeof buf), 0);
    EXPECT_EQ_I(tok_decode_token(v, BPE_IMEND, true, buf, sizeof buf), 10);
    /* gpt-2 cleans spaces on decode as llama.cpp does (" ?" → "?", " 's" → "'s") */
    size_t nids, nout;
    int32_t *ids = enc(v, "he ? it 's", 10, false, false, &nids);
    EXPECT_EQ_I(tok_decode(v, ids, nids, 0, buf, sizeof buf, &nout), 0);
    EXPECT_STR_EQ(buf, "he? it's");
    free(ids);
    /* streaming: "é" as its two byte tokens is held until complete */
    tok_stream *s;
    EXPECT_EQ_I(tok_stream_new(v, 0, &s), 0);
    size_t l;
    const char *o = tok_stream_put(s, 0xC3, &l);
    EXPECT(o && l == 0);
    o = tok_stream_put(s, 0xA9, &l);
    EXPECT(o && l == 2 && !memcmp(o, "\xc3\xa9", 2));
    o = tok_stream_put(s, BPE_GTHE, &l);
    EXPECT_STR_EQ(o, " the");
    tok_stream_free(s);
    tok_free(v);
    /* qwen2 does not clean spaces */
    if (bpe_load("gpt2", "qwen2", true, 0, &v, err, sizeof err) == 0) {
        ids = enc(v, "he ? it 's", 10, false, false, &nids);
        EXPECT_EQ_I(tok_decode(v, ids, nids, 0, buf, sizeof buf, &nout), 0);
        EXPECT_STR_EQ(buf, "he ? it 's");
        free(ids);
        tok_free(v);
    }
}

TEST(tok_bpe, mini_load_errors) {
    char err[256];
    tok_vocab *v = NULL;
    EXPECT_EQ_I(bpe_load("gpt2", "no-such-pre", true, -1, &v, err, sizeof err), TOK_EUNSUPPORTED);
    EXPECT_MSG(strstr(err, "'no-such-pre'"), "%s", err);
    EXPECT_EQ_I(bpe_load("gpt2", "gpt-2", false, -1, &v, err, sizeof err), TOK_EFORMAT);
    EXPECT_MSG(strstr(err, "merges"), "%s", err);
    EXPECT(v == NULL);
    /* no pre key: llama.cpp's "default" (4 regexes) */
    EXPECT_EQ_I(bpe_load("gpt2", NULL, true, -1, &v, err, sizeof err), 0);
    if (v) EXPECT_STR_EQ(tok_pre_name(v), "default");
    tok_free(v);
    /* every pre-tokenizer in the table compiles */
    static const char *const pres[] = {
        "default", "llama3", "dbrx", "smaug-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "mpt",
        "starcoder", "refact", "command-r", "smollm", "gpt-2", "olmo", "trillion", "qwen2", "stablelm2",
        "poro-chat", "bloom", "viking",
    };
    for (size_t k = 0; k < sizeof pres / sizeof pres[0]; k++) {
        v = NULL;
        int rc = bpe_load("gpt2", pres[k], true, -1, &v, err, sizeof err);
        EXPECT_MSG(rc == 0, "%s: %s", pres[k], err);
        tok_free(v);
    }
}

/* ---- tokenizer.json --------------------------------------------------------------- */

/* A small tokenizer.json: the 256 byte characters, the merges of the mini
 * vocab (alternately as "a b" and ["a", "b"]), added tokens, and the given
 * pre_tokenizer / normalizer / post_processor JSON. */
typedef struct {
    int id;
    const char *s;
    bool special, lstrip, rstrip;
} added_tok;

static char *mini_json_added(const char *pre, const char *normalizer, const char *post, const char *model_extra,
                             const added_tok *adds, int n_adds);

static char *mini_json(const char *pre, const char *normalizer, const char *post, const char *model_extra) {
    static const added_tok adds[] = {
        {BPE_EOT, "<|endoftext|>", true, false, false},
        {BPE_IMEND, "<|im_end|>", true, false, false},
        {BPE_THINK, "<think>", false, false, false},
    };
    return mini_json_added(pre, normalizer, post, model_extra, adds, 3);
}

static char *mini_json_added(const char *pre, const char *normalizer, const char *post, const char *model_extra,
                             const added_tok *adds, int n_adds) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray();
    for (int i = 0; i < BPE_N; i++) {
        if (i == BPE_EOT || i == BPE_IMEND || i == BPE_THINK) continue; /* added tokens (or gaps) */
        char u[8] = {0};
        if (i < 256) uni_encode(uni_byte_to_cpt((uint8_t)i), u);
        cJSON_AddNumberToObject(vocab, i < 256 ? u : bpe_extra[i - 256], i);
    }
    for (size_t k = 0; k < sizeof bpe_merges / sizeof bpe_merges[0]; k++) {
        if (k % 2) {
            char a[32];
            snprintf(a, sizeof a, "%s", bpe_merges[k]);
            char *sp = strchr(a, ' ');
            *sp = 0;
            const char *pair[2] = {a, sp + 1};
            cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
        } else {
            cJSON_AddItemToArray(merges, cJSON_CreateString(bpe_merges[k]));
        }
    }
    for (int k = 0; k < n_adds; k++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", adds[k].id);
        cJSON_AddStringToObject(a, "content", adds[k].s);
        cJSON_AddBoolToObject(a, "special", adds[k].special);
        cJSON_AddBoolToObject(a, "lstrip", adds[k].lstrip);
        cJSON_AddBoolToObject(a, "rstrip", adds[k].rstrip);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddItemToObject(root, "pre_tokenizer", pre ? cJSON_Parse(pre) : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "normalizer", normalizer ? cJSON_Parse(normalizer) : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "post_processor", post ? cJSON_Parse(post) : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "decoder", cJSON_Parse("{\"type\": \"ByteLevel\"}"));
    if (model_extra) {
        cJSON *x = cJSON_Parse(model_extra), *it;
        cJSON_ArrayForEach(it, x) cJSON_AddItemToObject(model, it->string, cJSON_Duplicate(it, true));
        cJSON_Delete(x);
    }
    cJSON_AddItemToObject(root, "model", model);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

#define PRE_QWEN2_JSON                                                                                            \
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "                \
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|" \
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "                    \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]}"
#define POST_BOS                                                                                                  \
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|endoftext|>\", \"type_id\": 0}}, " \
    "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<|endoftext|>\": {\"id\": "          \
    "\"<|endoftext|>\", \"ids\": [261], \"tokens\": [\"<|endoftext|>\"]}}}"

static int json_load(const char *json, tok_vocab **v, char *err, size_t err_len) {
    return tok_load_hf_json_mem(json, strlen(json), NULL, 0, v, err, err_len);
}

TEST(tok_hf, mini_json) {
    char err[512];
    tok_vocab *v;
    char *j = mini_json(PRE_QWEN2_JSON, "{\"type\": \"NFC\"}", POST_BOS, NULL);
    int rc = json_load(j, &v, err, sizeof err);
    free(j);
    EXPECT_MSG(rc == 0, "%s", err);
    if (rc) return;
    EXPECT_EQ_I(tok_type(v), TOK_TYPE_BPE);
    EXPECT_STR_EQ(tok_pre_name(v), "qwen2");
    EXPECT_EQ_I(tok_n_vocab(v), BPE_N);
    EXPECT(tok_add_bos(v) && !tok_add_eos(v));
    EXPECT_EQ_I(tok_bos(v), BPE_EOT);
    EXPECT_IDS(v, " the", false, false, BPE_GTHE);
    EXPECT_IDS(v, "xyz", false, false, BPE_XYZ);
    EXPECT_IDS(v, "he", true, false, BPE_EOT, BPE_HE);
    EXPECT_IDS(v, "<|im_end|><think>", false, true, BPE_IMEND, BPE_THINK);
    EXPECT(tok_is_eog(v, BPE_EOT) && tok_is_eog(v, BPE_IMEND));
    /* NFC: e + combining acute is the same text as é */
    size_t n1, n2;
    int32_t *a = enc(v, "e\xcc\x81", 3, false, false, &n1), *b = enc(v, "\xc3\xa9", 2, false, false, &n2);
    EXPECT(ids_eq(a, n1, b, n2));
    EXPECT_EQ_I(n2, 2);
    free(a);
    free(b);
    tok_free(v);
    /* unused ids in a gap become [PAD<id>] */
    j = mini_json(PRE_QWEN2_JSON, NULL, NULL, NULL);
    cJSON *root = cJSON_Parse(j);
    free(j);
    cJSON *added = cJSON_GetObjectItem(root, "added_tokens");
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "id", BPE_N + 3);
    cJSON_AddStringToObject(x, "content", "<extra>");
    cJSON_AddBoolToObject(x, "special", true);
    cJSON_AddItemToArray(added, x);
    j = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    rc = json_load(j, &v, err, sizeof err);
    free(j);
    EXPECT_MSG(rc == 0, "%s", err);
    if (rc) return;
    EXPECT_EQ_I(tok_n_vocab(v), BPE_N + 4);
    size_t l;
    EXPECT_STR_EQ(tok_piece(v, BPE_N + 1, &l), "[PAD268]");
    EXPECT(tok_attr(v, BPE_N + 1) & TOK_ATTR_UNUSED);
    EXPECT_EQ_I(tok_find(v, "<extra>", 7), BPE_N + 3);
    tok_free(v);
}

TEST(tok_hf, mini_json_errors) {
    static const struct {
        const char *pre, *norm, *post, *model_extra;
        int rc;
        const char *msg;
    } cases[] = {
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}", NULL, NULL, NULL, 0, ""},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, "
         "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
         "\"use_regex\": false}]}",
         NULL, NULL, NULL, TOK_EUNSUPPORTED, "'\\w+'"},
        {"{\"type\": \"Whitespace\"}", NULL, NULL, NULL, TOK_EUNSUPPORTED, "'Whitespace'"},
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": true}", NULL, NULL, NULL,
         TOK_EUNSUPPORTED, "add_prefix_space"},
        {NULL, NULL, NULL, NULL, TOK_EUNSUPPORTED, "pre_tokenizer"},
        {PRE_QWEN2_JSON, "{\"type\": \"Lowercase\"}", NULL, NULL, TOK_EUNSUPPORTED, "'Lowercase'"},
        {PRE_QWEN2_JSON, NULL, "{\"type\": \"BertProcessing\"}", NULL, TOK_EUNSUPPORTED, "'BertProcessing'"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"type\": \"WordPiece\"}", TOK_EUNSUPPORTED, "'WordPiece'"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"byte_fallback\": true}", TOK_EUNSUPPORTED, "byte_fallback"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"dropout\": 0.1}", TOK_EUNSUPPORTED, "dropout"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"merges\": [\"a b c\"]}", TOK_EFORMAT, "model.merges[0]"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"merges\": [[\"a\"]]}", TOK_EFORMAT, "model.merges[0]"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"vocab\": {\"a\": 0, \"b\": 0}}", TOK_EFORMAT, "used twice"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"vocab\": {\"a\": -1}}", TOK_EFORMAT, "model.vocab['a']"},
        {PRE_QWEN2_JSON, NULL, NULL, "{\"vocab\": {\"a\": 100000000}}", TOK_EFORMAT, "largest id"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char err[512] = "";
        tok_vocab *v = (tok_vocab *)1;
        char *j = mini_json(cases[k].pre, cases[k].norm, cases[k].post, NULL);
        if (cases[k].model_extra) { /* replace model members */
            cJSON *root = cJSON_Parse(j), *model = cJSON_GetObjectItem(root, "model");
            cJSON *x = cJSON_Parse(cases[k].model_extra), *it;
            cJSON_ArrayForEach(it, x) {
                if (cJSON_GetObjectItem(model, it->string))
                    cJSON_ReplaceItemInObject(model, it->string, cJSON_Duplicate(it, true));
                else
                    cJSON_AddItemToObject(model, it->string, cJSON_Duplicate(it, true));
            }
            cJSON_Delete(x);
            free(j);
            j = cJSON_PrintUnformatted(root);
            cJSON_Delete(root);
        }
        int rc = json_load(j, &v, err, sizeof err);
        free(j);
        EXPECT_MSG(rc == cases[k].rc, "case %zu: rc %d (%s), expected %d", k, rc, err, cases[k].rc);
        if (rc) {
            EXPECT(v == NULL);
            EXPECT_MSG(strstr(err, cases[k].msg) && !strncmp(err, "tok: tokenizer.json", 19), "case %zu: %s", k, err);
        } else {
            tok_free(v);
        }
    }
    char err[256];
    tok_vocab *v;
    EXPECT_EQ_I(json_load("{\"model\": [1, 2", &v, err, sizeof err), TOK_EFORMAT);
    EXPECT_MSG(strstr(err, "JSON syntax error at byte"), "%s", err);
    EXPECT_EQ_I(json_load("[]", &v, err, sizeof err), TOK_EFORMAT);
    EXPECT_EQ_I(tok_load_hf_json("/nonexistent/tokenizer.json", &v, err, sizeof err), TOK_EFORMAT);
    EXPECT(strstr(err, "cannot read"));
}

/* llama.cpp's tokenizer_st_partition as it is written (one search of the
 * text per special token, longest first), to check tok.c's one-pass version. */
typedef struct {
    size_t off, len;
    int32_t id;
} rfrag;

static size_t partition_ref(const tok_vocab *v, const char *text, size_t len, bool parse_special, rfrag *frags,
                            rfrag *tmp) {
    size_t nf = 0;
    if (len) frags[nf++] = (rfrag){0, len, -1};
    for (int k = 0; k < v->n_special; k++) {
        int32_t sid = v->special[k];
        unsigned a = tok_attr(v, sid);
        if (!parse_special && (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        size_t sl;
        const char *st = tok_piece(v, sid, &sl);
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
                    tmp[no++] = (rfrag){base, blen, -1};
                    break;
                }
                size_t match = (size_t)(p - text), left_len = match - base;
                if (a & TOK_ATTR_LSTRIP)
                    while (left_len > 0 && isspace((unsigned char)text[base + left_len - 1])) left_len--;
                if (left_len > 0) tmp[no++] = (rfrag){base, left_len, -1};
                tmp[no++] = (rfrag){0, 0, sid};
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

TEST(tok_hf, special_partition_matches_llama_cpp) {
    /* overlapping specials of equal and different lengths, with strip flags */
    static const added_tok adds[] = {
        {BPE_EOT, "<a>", true, false, true},      {BPE_IMEND, "<a><b>", true, false, false},
        {BPE_THINK, "ax", false, true, false},    {BPE_N, "xa", false, false, false},
        {BPE_N + 1, "<b>", false, true, true},    {BPE_N + 2, "b b", true, false, false},
    };
    char err[512];
    tok_vocab *v;
    char *j = mini_json_added(PRE_QWEN2_JSON, NULL, NULL, NULL, adds, 6);
    int rc = json_load(j, &v, err, sizeof err);
    free(j);
    EXPECT_MSG(rc == 0, "%s", err);
    if (rc) return;
    static const char *const parts[] = {"<a>", "<b>", "<a><b>", "ax", "xa", "a", "b", " ", "  ", "\t", "x", "<", ">"};
    uint64_t r = 99;
    for (int iter = 0; iter < 1200; iter++) {
        char text[256];
        size_t o = 0;
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int n = (int)((r >> 33) % 12);
        for (int k = 0; k < n; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = parts[(r >> 33) % (sizeof parts / sizeof parts[0])];
            memcpy(text + o, p, strlen(p));
            o += strlen(p);
        }
        text[o] = 0;
        for (int ps = 0; ps < 2; ps++) {
            rfrag frags[600], tmp[600];
            size_t nf = partition_ref(v, text, o, ps, frags, tmp), nw = 0;
            int32_t want[1024];
            for (size_t f = 0; f < nf; f++) {
                if (frags[f].id >= 0) {
                    want[nw++] = frags[f].id;
                    continue;
                }
                size_t m;
                int32_t *ids = enc(v, text + frags[f].off, frags[f].len, false, false, &m);
                for (size_t i = 0; i < m && nw < 1024; i++) want[nw++] = ids[i];
                free(ids);
            }
            size_t ng;
            int32_t *got = enc(v, text, o, false, ps, &ng);
            if (!ids_eq(got, ng, want, nw)) {
                char a[2048], b[2048];
                ids_str(got, ng, a, sizeof a);
                ids_str(want, nw, b, sizeof b);
                test_fail(__FILE__, __LINE__, "\"%s\" parse_special %d: got %s, llama.cpp's partition %s", text, ps, a, b);
                iter = 1200;
            }
            free(got);
        }
    }
    tok_free(v);
}

/* ---- the real Qwen3 vocabulary (qwen3-chat.gguf) --------------------------------------- */

typedef struct {
    gguf_file *g;
    tok_vocab *v;
} vfile;

static bool vopen(const char *path, vfile *f) {
    char err[512];
    f->g = NULL;
    f->v = NULL;
    size_t l = strlen(path);
    int rc;
    if (l > 5 && !strcmp(path + l - 5, ".json")) {
        rc = tok_load_hf_json(path, &f->v, err, sizeof err);
    } else {
        rc = gguf_open(path, &f->g, err, sizeof err);
        if (!rc) rc = tok_load_gguf(f->g, &f->v, err, sizeof err);
    }
    if (rc) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, err);
        tok_free(f->v);
        gguf_close(f->g);
    }
    return rc == 0;
}

static void vclose(vfile *f) {
    tok_free(f->v);
    gguf_close(f->g);
}

static void expect_json_ids(const tok_vocab *v, const char *what, const char *text, const cJSON *want_arr,
                            bool add_special, size_t skip) {
    int32_t want[4096];
    size_t nw = json_ids(want_arr, want, 4096), n;
    int32_t *got = enc(v, text, strlen(text), add_special, true, &n);
    if (skip > nw) skip = nw;
    if (!ids_eq(got, n, want + skip, nw - skip)) {
        char a[8192], b[8192];
        ids_str(got, n, a, sizeof a);
        ids_str(want + skip, nw - skip, b, sizeof b);
        test_fail(__FILE__, __LINE__, "%s: \"%.60s\"\n      got      %s\n      expected %s", what, text, a, b);
    }
    free(got);
}

/* prompt_ids of qwen3-chat.json and qwen3-chat.rendered.json on one vocabulary */
static void qwen3_references(const tok_vocab *v, const char *what) {
    NEED_SHARED(rp_, "reference/chat/qwen3-chat.json");
    cJSON *ref = read_json(rp_);
    NEED_SHARED(rr_, "reference/chat/qwen3-chat.rendered.json");
    cJSON *ren = read_json(rr_);
    EXPECT(ref && ren);
    if (ref) {
        const cJSON *settings = cJSON_GetObjectItem(ref, "settings");
        EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(settings, "parse_special")));
        int n = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(ref, "prompts")) {
            expect_json_ids(v, what, cJSON_GetStringValue(cJSON_GetObjectItem(p, "prompt")),
                            cJSON_GetObjectItem(p, "prompt_ids"), true, 0);
            n++;
        }
        EXPECT_EQ_I(n, 3);
    }
    if (ren) {
        int n = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(ren, "cases")) {
            expect_json_ids(v, what, cJSON_GetStringValue(cJSON_GetObjectItem(c, "llama_cpp_prompt")),
                            cJSON_GetObjectItem(c, "prompt_ids"), true, 0);
            n++;
        }
        EXPECT_EQ_I(n, 2);
    }
    cJSON_Delete(ref);
    cJSON_Delete(ren);
}

TEST(tok_qwen3, gguf_references) {
    NEED_SHARED(path, "models/chat/qwen3-chat.gguf");
    vfile f;
    if (!vopen(path, &f)) return;
    const tok_vocab *v = f.v;
    EXPECT_EQ_I(tok_n_vocab(v), 151936);
    EXPECT_STR_EQ(tok_pre_name(v), "qwen2");
    EXPECT(!tok_add_bos(v) && !tok_add_eos(v));
    EXPECT_EQ_I(tok_bos(v), 151643);
    EXPECT_EQ_I(tok_eos(v), 151645);
    EXPECT_EQ_I(tok_eot(v), 151645);
    /* end of generation, as both llama.cpp builds report (manifest.json) */
    int32_t eog[8];
    int n_eog = 0;
    for (int32_t id = 0; id < tok_n_vocab(v); id++)
        if (tok_is_eog(v, id) && n_eog < 8) eog[n_eog++] = id;
    EXPECT_EQ_I(n_eog, 5);
    const int32_t want_eog[] = {151643, 151645, 151662, 151663, 151664};
    EXPECT(ids_eq(eog, (size_t)n_eog, want_eog, 5));
    EXPECT(tok_attr(v, 151667) & TOK_ATTR_USER_DEFINED); /* <think> */
    EXPECT(tok_attr(v, 151700) & TOK_ATTR_UNUSED);       /* [PAD151700] */
    qwen3_references(v, "qwen3-chat.gguf");

    /* greedy_text_hex: the generated ids' pieces (special = false) */
    NEED_SHARED(rp, "reference/chat/qwen3-chat.json");
    cJSON *ref = read_json(rp);
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(ref, "prompts")) {
        const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(p, "greedy_text_hex"));
        char got[8192], want[8192];
        size_t ng = 0, nw = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(p, "greedy_ids")) {
            int k = tok_decode_token(v, id->valueint, false, got + ng, sizeof got - ng);
            EXPECT(k >= 0);
            if (k > 0) ng += (size_t)k;
        }
        for (size_t i = 0; hex && hex[2 * i] && hex[2 * i + 1]; i++) {
            unsigned b;
            sscanf(hex + 2 * i, "%2x", &b);
            want[nw++] = (char)b;
        }
        EXPECT(hex != NULL);
        EXPECT_EQ_I(ng, nw);
        EXPECT(ng == nw && memcmp(got, want, ng) == 0);
    }

    /* streaming the CJK + emoji prompt: every chunk complete UTF-8, all of it the prompt */
    const cJSON *p2 = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "prompts"), 1);
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(p2, "prompt"));
    int32_t ids[256];
    size_t n_ids = json_ids(cJSON_GetObjectItem(p2, "prompt_ids"), ids, 256);
    tok_stream *s;
    EXPECT_EQ_I(tok_stream_new(v, TOK_TEXT_START, &s), 0);
    char out[1024];
    size_t no = 0, held = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t l;
        const char *o = tok_stream_put(s, ids[i], &l);
        EXPECT(o && utf8_valid((const unsigned char *)o, l));
        held += l == 0;
        if (no + l < sizeof out) memcpy(out + no, o, l);
        no += l;
    }
    out[no < sizeof out ? no : sizeof out - 1] = 0;
    EXPECT_STR_EQ(out, text);
    EXPECT(held >= 2); /* 🦙 and 👩 are split across byte tokens */
    tok_stream_free(s);
    size_t nout;
    EXPECT_EQ_I(tok_decode(v, ids, n_ids, 0, out, sizeof out, &nout), 0);
    EXPECT_STR_EQ(out, text); /* qwen2: no clean-up */
    cJSON_Delete(ref);
    vclose(&f);
}

/* The tokenizer.json the GGUF was converted from gives the same ids. */
TEST(tok_qwen3, hf_json_matches_gguf) {
    NEED_SHARED(jp, "vocab/hf/qwen3/tokenizer.json");
    char jpath[1024];
    snprintf(jpath, sizeof jpath, "%s", jp);
    NEED_SHARED(gp, "models/chat/qwen3-chat.gguf");
    vfile fj, fg;
    if (!vopen(jpath, &fj)) return;
    if (!vopen(gp, &fg)) {
        vclose(&fj);
        return;
    }
    EXPECT_EQ_I(tok_n_vocab(fj.v), 151669);
    EXPECT_EQ_I(tok_eos(fj.v), 151645); /* tokenizer_config.json eos_token */
    EXPECT(!tok_add_bos(fj.v));
    for (int32_t id = 151643; id < 151669; id++) {
        EXPECT_MSG(tok_attr(fj.v, id) == tok_attr(fg.v, id), "id %d: attr %u vs %u", id, tok_attr(fj.v, id),
                   tok_attr(fg.v, id));
        EXPECT_EQ_I(tok_is_eog(fj.v, id), tok_is_eog(fg.v, id));
    }
    qwen3_references(fj.v, "qwen3 tokenizer.json");
    /* the vector inputs, with and without special-token parsing */
    NEED_SHARED(ip, "vocab/llama.cpp/ggml-vocab-qwen2.gguf.inp");
    size_t ilen;
    char *inp = read_file(ip, &ilen);
    for (char *c = inp, *e; c && *c; c = e) {
        e = strstr(c, "\n__ggml_vocab_test__\n");
        size_t cl = e ? (size_t)(e - c) : strlen(c);
        for (int ps = 0; ps < 2; ps++) {
            size_t na, nb;
            int32_t *a = enc(fj.v, c, cl, true, ps, &na), *b = enc(fg.v, c, cl, true, ps, &nb);
            EXPECT_MSG(ids_eq(a, na, b, nb), "\"%.*s\" differs", (int)(cl > 40 ? 40 : cl), c);
            free(a);
            free(b);
        }
        if (!e) break;
        e += 21;
    }
    free(inp);
    vclose(&fj);
    vclose(&fg);
}

/* Llama 3 tokenizer.json (Meta's first revision: no BOS in the post-processor)
 * on the rendered Llama 3 chat prompt: llama.cpp's ids after its BOS. */
TEST(tok_llama3, hf_json_chat_prompt) {
    NEED_SHARED(jp, "vocab/hf/llama3/tokenizer.json");
    char jpath[1024];
    snprintf(jpath, sizeof jpath, "%s", jp);
    NEED_SHARED(rp, "reference/chat/llama3-chat.rendered.json");
    cJSON *ren = read_json(rp);
    vfile f;
    if (!ren || !vopen(jpath, &f)) {
        cJSON_Delete(ren);
        return;
    }
    const tok_vocab *v = f.v;
    EXPECT_EQ_I(tok_n_vocab(v), 128256);
    EXPECT_STR_EQ(tok_pre_name(v), "llama3");
    EXPECT(!tok_add_bos(v));
    EXPECT_EQ_I(tok_bos(v), 128000);
    EXPECT_EQ_I(tok_eos(v), 128001);
    EXPECT_EQ_I(tok_eot(v), 128009);
    int n_eog = 0;
    for (int32_t id = 0; id < tok_n_vocab(v); id++) n_eog += tok_is_eog(v, id);
    EXPECT_EQ_I(n_eog, 2);
    EXPECT(tok_is_eog(v, 128001) && tok_is_eog(v, 128009));
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ren, "cases")) {
        const cJSON *ids = cJSON_GetObjectItem(c, "prompt_ids");
        EXPECT_EQ_I(cJSON_GetArrayItem(ids, 0)->valueint, 128000);
        expect_json_ids(v, "llama3 tokenizer.json", cJSON_GetStringValue(cJSON_GetObjectItem(c, "llama_cpp_prompt")),
                        ids, false, 1);
        n++;
    }
    EXPECT(n >= 1);
    cJSON_Delete(ren);
    vclose(&f);
}

TEST(tok_wpm, bert_special_and_decode) {
    NEED_SHARED(path, "vocab/llama.cpp/ggml-vocab-bert-bge.gguf");
    vfile f;
    if (!vopen(path, &f)) return;
    const tok_vocab *v = f.v;
    EXPECT_EQ_I(tok_type(v), TOK_TYPE_WPM);
    EXPECT_EQ_I(tok_bos(v), 101);
    EXPECT_EQ_I(tok_sep(v), 102);
    EXPECT_IDS(v, "Hello, World!", true, false, 101, 7592, 1010, 2088, 999, 102);
    EXPECT_IDS(v, "F\xc3\xbchrer", false, false, 11865, 17875); /* accent stripped, lowercased */
    size_t nx;
    int32_t *x = enc(v, "x", 1, false, false, &nx);
    EXPECT_EQ_I(nx, 1);
    if (nx == 1) EXPECT_IDS(v, "[CLS] x", false, true, 101, x[0]);
    free(x);
    char buf[256];
    size_t nout;
    int32_t ids[] = {101, 7592, 1010, 2088, 999, 102};
    EXPECT_EQ_I(tok_decode(v, ids, 6, 0, buf, sizeof buf, &nout), 0);
    EXPECT_STR_EQ(buf, " hello, world!"); /* clean_spaces, as llama.cpp */
    vclose(&f);
}

/* ---- cinfer tokenize on a tokenizer.json and a vocab-only GGUF ---------------------------- */

static int run_cli(int argc, char **argv, char *out, size_t cap) {
    char *s = NULL;
    int rc = run_captured(cli_tokenize, argc, argv, &s);
    snprintf(out, cap, "%s", s ? s : "");
    free(s);
    return rc;
}

TEST(tok_cli, tokenize_json_and_vocab_gguf) {
    char json[1024], out[4096];
    snprintf(json, sizeof json, "%s/tokenizer.json", test_tmpdir());
    char *j = mini_json(PRE_QWEN2_JSON, NULL, POST_BOS, NULL);
    FILE *f = fopen(json, "w");
    EXPECT(f != NULL);
    if (!f) {
        free(j);
        return;
    }
    fputs(j, f);
    fclose(f);
    free(j);
    char *a1[] = {"tokenize", json, " the<|im_end|><think>", "--parse-special", NULL};
    EXPECT_EQ_I(run_cli(4, a1, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "261 258 262 263\n"); /* BOS from the post-processor */
    char *a2[] = {"tokenize", json, " the<|im_end|>", "--no-bos", NULL};
    EXPECT_EQ_I(run_cli(4, a2, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "258 60 124 105 109 95 101 110 100 124 62\n"); /* not parsed: the bytes */
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/bad.json", test_tmpdir());
    FILE *fb = fopen(bad, "w");
    if (fb) {
        fputs("{\"model\": {\"type\": \"Unigram\"}}", fb);
        fclose(fb);
    }
    char *a3[] = {"tokenize", bad, "x", NULL};
    EXPECT_EQ_I(run_cli(3, a3, out, sizeof out), 1);
    NEED_SHARED(gp, "vocab/llama.cpp/ggml-vocab-gpt-2.gguf");
    char gguf[1024];
    snprintf(gguf, sizeof gguf, "%s", gp);
    char *a4[] = {"tokenize", gguf, "Hello world", NULL};
    EXPECT_EQ_I(run_cli(3, a4, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "15496 995\n");
}
