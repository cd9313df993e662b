/*
 * fuzz_tokjson.c — libFuzzer target for tokenizer.json loading
 * (tok_load_hf_json_mem) and what a loaded vocabulary then does: encode the
 * rest of the input with and without special-token parsing, decode, stream.
 * Built and run by `make fuzz-tokjson`.
 *
 * An input starting with '{' is taken as tokenizer.json text as it is.  Any
 * other input drives a small generator instead, so the fuzzer reaches the
 * loader's logic without first having to discover JSON: the bytes pick the
 * pre-tokenizer (the known ones, a garbage Split regex, unknown types), the
 * normalizer, the post-processor, extra tokens and merges made of existing
 * tokens (in both merge syntaxes), added tokens with their flags, and the
 * text to encode.
 *
 * Beyond "no crash, no sanitizer report" it checks the contracts: an error
 * is one line beginning "tok: tokenizer.json" or "tok: " and leaves no
 * vocabulary; ids are in range; the count reported for a too-small buffer is
 * the count a big enough one gets; the stream hands out only valid UTF-8.
 */
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok.h"
#include "text/unicode.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} src;

static unsigned take(src *s, unsigned mod) {
    if (!s->n || !mod) return 0;
    unsigned v = *s->p++;
    s->n--;
    return v % mod;
}

static const char *const regexes[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};

/* A string of 1..4 GPT-2 byte characters (or raw bytes, sometimes). */
static void token_text(src *s, char *out) {
    size_t o = 0, n = 1 + take(s, 4);
    bool raw = take(s, 16) == 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)take(s, 256);
        if (raw) out[o++] = (char)(b ? b : 'x');
        else o += uni_encode(uni_byte_to_cpt(b), out + o);
    }
    out[o] = 0;
}

static char *generate(src *s) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray();
    char texts[64][20];
    int n_tok = 0;
    for (int i = 0; i < 256; i++) {
        char u[4] = {0};
        uni_encode(uni_byte_to_cpt((uint8_t)i), u);
        if (take(s, 64) == 0) continue; /* sometimes a byte lacks its token */
        cJSON_AddNumberToObject(vocab, u, i);
    }
    int n_extra = (int)take(s, 32);
    for (int k = 0; k < n_extra && n_tok < 64; k++) {
        token_text(s, texts[n_tok]);
        if (!cJSON_GetObjectItemCaseSensitive(vocab, texts[n_tok]))
            cJSON_AddNumberToObject(vocab, texts[n_tok], 256 + k + (int)take(s, 2) * 300);
        n_tok++;
    }
    int n_merge = (int)take(s, 24);
    for (int k = 0; k < n_merge; k++) {
        char a[20], b[20];
        if (n_tok && take(s, 2)) snprintf(a, sizeof a, "%s", texts[take(s, (unsigned)n_tok)]);
        else token_text(s, a);
        token_text(s, b);
        if (take(s, 2)) {
            const char *pair[2] = {a, b};
            cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
        } else {
            char m[48];
            snprintf(m, sizeof m, "%s%s%s", a, take(s, 8) ? " " : "", b);
            cJSON_AddItemToArray(merges, cJSON_CreateString(m));
        }
    }
    static const char *const added_texts[] = {"<|endoftext|>", "<|im_end|>", "<think>", "<|fim_pad|>", "[X]", " ", "a"};
    int n_added = (int)take(s, 5);
    for (int k = 0; k < n_added; k++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", 600 + (int)take(s, 8));
        cJSON_AddStringToObject(a, "content", added_texts[take(s, 7)]);
        cJSON_AddBoolToObject(a, "special", take(s, 2));
        cJSON_AddBoolToObject(a, "lstrip", take(s, 4) == 0);
        cJSON_AddBoolToObject(a, "rstrip", take(s, 4) == 0);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddStringToObject(model, "type", take(s, 16) ? "BPE" : "Unigram");
    cJSON_AddBoolToObject(model, "ignore_merges", take(s, 2));
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    cJSON_AddItemToObject(root, "added_tokens", added);

    cJSON *pre;
    unsigned kind = take(s, 7);
    if (kind == 0) {
        pre = cJSON_Parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}");
    } else if (kind <= 4) {
        char rx[64];
        const char *r = kind <= 3 ? regexes[kind - 1] : rx;
        if (kind == 4) { /* a regex that is not one of the known ones */
            size_t l = take(s, 16);
            for (size_t i = 0; i < l; i++) rx[i] = (char)(32 + take(s, 95));
            rx[l] = 0;
        }
        pre = cJSON_CreateObject();
        cJSON_AddStringToObject(pre, "type", "Sequence");
        cJSON *arr = cJSON_AddArrayToObject(pre, "pretokenizers"), *split = cJSON_CreateObject();
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddItemToObject(split, "pattern", cJSON_CreateObject());
        cJSON_AddStringToObject(cJSON_GetObjectItem(split, "pattern"), "Regex", r);
        cJSON_AddStringToObject(split, "behavior", take(s, 8) ? "Isolated" : "Removed");
        cJSON_AddBoolToObject(split, "invert", take(s, 8) == 0);
        cJSON_AddItemToArray(arr, split);
        cJSON_AddItemToArray(arr, cJSON_Parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}"));
    } else if (kind == 5) {
        pre = cJSON_CreateNull();
    } else {
        pre = cJSON_Parse("{\"type\": \"Whitespace\"}");
    }
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    static const char *const norms[] = {"null", "{\"type\": \"NFC\"}", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}]}",
                                        "{\"type\": \"Lowercase\"}"};
    cJSON_AddItemToObject(root, "normalizer", cJSON_Parse(norms[take(s, 4)]));
    static const char *const posts[] = {
        "null",
        "{\"type\": \"ByteLevel\"}",
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"B\"}}, {\"Sequence\": {\"id\": \"A\"}}],"
        " \"special_tokens\": {\"B\": {\"ids\": [600]}}}",
        "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\"}},"
        " {\"SpecialToken\": {\"id\": \"E\"}}], \"special_tokens\": {\"E\": {\"ids\": [5]}}}]}",
        "{\"type\": \"RobertaProcessing\"}",
    };
    cJSON_AddItemToObject(root, "post_processor", cJSON_Parse(posts[take(s, 5)]));
    cJSON_AddItemToObject(root, "decoder", cJSON_Parse("{\"type\": \"ByteLevel\"}"));
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

static bool utf8_ok(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        size_t k;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return false;
        if (i + k >= n) return false;
        for (size_t j = 1; j <= k; j++)
            if (p[i + j] < (j == 1 ? lo : 0x80) || p[i + j] > (j == 1 ? hi : 0xBF)) return false;
        i += k + 1;
    }
    return true;
}

static void exercise(const tok_vocab *v, const char *text, size_t len) {
    int n_vocab = tok_n_vocab(v);
    for (int ps = 0; ps < 2; ps++) {
        size_t cap = tok_encode_max(len), n = 0, n2 = 0;
        int32_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
        CHECK(ids);
        int rc = tok_encode(v, text, len, ps, ps, ids, cap, &n);
        CHECK(rc == 0 && n <= cap);
        for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < n_vocab);
        if (n) { /* too small: the same count, the first ids */
            int32_t first;
            CHECK(tok_encode(v, text, len, ps, ps, &first, 1, &n2) == (n > 1 ? TOK_ETOOSMALL : 0));
            CHECK(n2 == n && first == ids[0]);
        }
        size_t need, nout;
        rc = tok_decode(v, ids, n, ps ? TOK_SPECIAL : 0, NULL, 0, &need);
        CHECK(rc == (need ? TOK_ETOOSMALL : 0));
        char *buf = malloc(need + 1);
        CHECK(buf);
        CHECK(tok_decode(v, ids, n, ps ? TOK_SPECIAL : 0, buf, need + 1, &nout) == 0 && nout <= need);
        tok_stream *st;
        CHECK(tok_stream_new(v, ps ? TOK_SPECIAL : TOK_TEXT_START, &st) == 0);
        for (size_t i = 0; i < n; i++) {
            size_t l;
            const char *o = tok_stream_put(st, ids[i], &l);
            CHECK(o && utf8_ok((const uint8_t *)o, l));
        }
        size_t l;
        const char *o = tok_stream_flush(st, &l);
        CHECK(utf8_ok((const uint8_t *)o, l));
        tok_stream_free(st);
        free(buf);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    tok_vocab *v = (tok_vocab *)1;
    const char *text;
    size_t text_len;
    int rc;
    if (size && data[0] == '{') {
        rc = tok_load_hf_json_mem((const char *)data, size, NULL, 0, &v, err, sizeof err);
        text = "Hello <|im_end|> w\xc3\xb6rld 123 \xf0\x9f\xa6\x99";
        text_len = strlen(text);
    } else {
        src s = {data, size};
        char *json = generate(&s);
        CHECK(json);
        rc = tok_load_hf_json_mem(json, strlen(json), NULL, 0, &v, err, sizeof err);
        free(json);
        text = (const char *)s.p;
        text_len = s.n;
    }
    if (rc) {
        CHECK(v == NULL);
        CHECK(!strncmp(err, "tok: ", 5) && !strchr(err, '\n'));
        return 0;
    }
    CHECK(v && tok_type(v) == TOK_TYPE_BPE);
    exercise(v, text, text_len);
    tok_free(v);
    return 0;
}
