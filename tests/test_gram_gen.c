/*
 * test_gram_gen.c — constrained generation through the public API
 * (include/cinfer.h): typed structs round-trip, confidence capture, and
 * the ten schemas of tests/data/gram/schemas generated with the shared
 * models at temperature 1.0, every output checked by cinfer's own grammar
 * and by an independent validator (tests/data/gram/validate.py, Debian's
 * python3-jsonschema; skipped when it is not installed).
 *
 * gram_gen_schemas() is also what `make bench-grammar` runs with 100 seeds.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "cinfer.h"
#include "test.h"
#include "test_gram_diff.h"

#define STORIES "models/stories260K/stories260K.gguf"
#define TINY "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf"
#define QWEN3 "models/chat/qwen3-chat.gguf"
#define SCHEMAS "tests/data/gram/schemas"

typedef struct {
    char *text;
    size_t len, cap;
} sbuf;

static int collect(const char *piece, size_t len, int32_t token, void *user) {
    sbuf *b = user;
    (void)token;
    if (b->len + len + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->len + len + 1) nc *= 2;
        char *nt = realloc(b->text, nc);
        if (!nt) return 1;
        b->text = nt;
        b->cap = nc;
    }
    memcpy(b->text + b->len, piece, len);
    b->len += len;
    b->text[b->len] = 0;
    return 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}

int gram_validator_available(void) {
    return system("/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1") == 0;
}

typedef struct {
    int runs, complete, self_ok, validated, validated_ok, tokens;
} gen_counts;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Generate every schema under tests/data/gram/schemas n_seeds times with
 * model_rel at temperature temp; outputs go to dir.  Returns -1 when the
 * model is absent. */
int gram_gen_schemas(const char *model_rel, const char *prompt, int n_seeds, float temp, const char *dir, int verbose,
                     gen_counts *out) {
    memset(out, 0, sizeof *out);
    const char *mp = shared_path(model_rel);
    if (!mp) return -1;
    char err[2048];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    if (cinfer_model_open(mp, NULL, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
        return -1;
    }
    cinfer_session_options so = {.n_ctx = 2048, .n_threads = 1};
    if (cinfer_session_new(m, &so, &s, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        cinfer_model_close(m);
        return -1;
    }
    DIR *d = opendir(SCHEMAS);
    char *names[64];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 64)
        if (strstr(e->d_name, ".json")) names[n++] = strdup(e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int validator = gram_validator_available();
    const char *base = strrchr(model_rel, '/') ? strrchr(model_rel, '/') + 1 : model_rel;
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SCHEMAS, names[i]);
        size_t len;
        char *schema = slurp(path, &len);
        cinfer_grammar *g = NULL;
        if (!schema || cinfer_grammar_from_schema(m, schema, len, NULL, &g, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s: %s", path, schema ? err : "unreadable");
            free(schema);
            continue;
        }
        free(schema);
        char files[8192] = "";
        size_t fl = 0;
        int batch = 0;
        for (int seed = 0; seed < n_seeds; seed++) {
            sbuf b = {0};
            cinfer_gen_options o = {.max_tokens = 1500, .temperature = temp, .top_p = 1, .seed = (uint64_t)seed + 1, .grammar = g};
            cinfer_gen_result r;
            out->runs++;
            if (cinfer_generate(s, prompt, &o, collect, &b, &r, err, sizeof err)) {
                test_fail(__FILE__, __LINE__, "%s seed %d: %s", names[i], seed, err);
                free(b.text);
                continue;
            }
            out->tokens += r.n_generated;
            int complete = r.stop == CINFER_STOP_GRAMMAR || r.stop == CINFER_STOP_EOS;
            out->complete += complete;
            int ok = complete && b.text && cinfer_grammar_check(g, b.text, b.len, err, sizeof err) == 1;
            out->self_ok += ok;
            if (!ok)
                test_fail(__FILE__, __LINE__, "%s %s seed %d: stop %d, output rejected: %s: %.300s", base, names[i], seed,
                          r.stop, err, b.text ? b.text : "");
            if (verbose > 1) printf("      %s %s seed %d: %s\n", base, names[i], seed, b.text ? b.text : "");
            char op[1024];
            snprintf(op, sizeof op, "%s/%s-%.2s-%03d.json", dir, base, names[i], seed);
            FILE *f = fopen(op, "w");
            if (f) {
                if (b.text) fwrite(b.text, 1, b.len, f);
                fclose(f);
                fl += (size_t)snprintf(files + fl, sizeof files - fl, " %s", op);
                batch++;
            }
            free(b.text);
            /* validate in batches (one python start per batch) */
            if (validator && (batch == 25 || seed == n_seeds - 1) && batch) {
                char cmd[9000], *vout = NULL;
                snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/data/gram/validate.py %s/%s%s", SCHEMAS, names[i], files);
                int vrc = run_cmd(cmd, true, &vout);
                int bad = 0;
                for (const char *p = vout; p && *p; p++) bad += *p == '\n';
                out->validated += batch;
                out->validated_ok += vrc == 0 ? batch : batch - bad;
                if (vrc) test_fail(__FILE__, __LINE__, "validate.py %s (%s): %s", names[i], base, vout ? vout : "");
                free(vout);
                files[0] = 0;
                fl = 0;
                batch = 0;
            }
        }
        cinfer_grammar_free(g);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return 0;
}

/* ---- the generation stress test --------------------------------------------------------------- */

/* The bias toward finishing.  The text generated so far is followed by a
 * small JSON lexer (containers, strings, whether a string is a key).
 * Inside a value string, tokens that are the closing quote and then only
 * ']' or '}' are favoured; inside a key, the next token of a required
 * property name the key is a prefix of (else the closing quote); outside
 * strings, tokens made only of ']' and '}'
 * (and end-of-generation), while tokens with '{', '[' or ',' are
 * disfavoured.  The bias grows with the tokens generated, so values finish
 * inside the budget while the first tokens are still the model's
 * (random-weight) choice. */
typedef struct {
    const cinfer_model *m;
    uint8_t *quote_first; /* (n_vocab) the token is '"' and then only closers */
    int8_t *outside;      /* (n_vocab) outside strings: 1 closes, -1 opens or continues */
    char **req;           /* the schema's required property names */
    int n_req, cap_req;
    int32_t quote_tok;    /* the token '"' */
    char key[256];        /* the key being generated, after its opening quote */
    int key_len;
    char seen[8192];      /* keys finished in the open objects: (depth byte, key text with its quote, NUL)... */
    int seen_len;
    int n_prompt, done, calls;
    int in_str, esc, in_key, expect_key;
    char stack[256];
    int depth;
} close_bias;

static void lex_byte(close_bias *cb, char c) {
    if (cb->in_str) {
        if (cb->in_key && cb->key_len < (int)sizeof cb->key - 1) cb->key[cb->key_len++] = c;
        if (cb->esc) cb->esc = 0;
        else if (c == '\\') cb->esc = 1;
        else if (c == '"') {
            cb->in_str = 0;
            if (cb->in_key && cb->seen_len + cb->key_len + 2 < (int)sizeof cb->seen) {
                cb->seen[cb->seen_len++] = (char)cb->depth;
                memcpy(cb->seen + cb->seen_len, cb->key, (size_t)cb->key_len);
                cb->seen_len += cb->key_len;
                cb->seen[cb->seen_len++] = 0;
            }
        }
        return;
    }
    int obj = cb->depth && cb->stack[cb->depth - 1] == '{';
    switch (c) {
    case '"':
        cb->in_str = 1;
        cb->in_key = obj && cb->expect_key;
        cb->key_len = 0;
        cb->expect_key = 0;
        break;
    case '{':
    case '[':
        if (cb->depth < (int)sizeof cb->stack) cb->stack[cb->depth++] = c;
        cb->expect_key = c == '{';
        break;
    case '}':
    case ']': {
        /* forget the keys of the object that closes */
        int w = 0;
        for (int r = 0; r < cb->seen_len;) {
            int l = (int)strlen(cb->seen + r + 1) + 2;
            if (cb->seen[r] < cb->depth) memmove(cb->seen + w, cb->seen + r, (size_t)l), w += l;
            r += l;
        }
        cb->seen_len = w;
        if (cb->depth) cb->depth--;
        cb->expect_key = 0;
        break;
    }
    case ',': cb->expect_key = obj; break;
    default: break;
    }
}

static void bias_closing(float *logits, int n_vocab, const int32_t *history, int n_history, void *user) {
    close_bias *cb = user;
    if (cb->n_prompt < 0) cb->n_prompt = cb->done = n_history;
    for (; cb->done < n_history; cb->done++) {
        char piece[256];
        size_t n = 0;
        if (cinfer_detokenize(cb->m, &history[cb->done], 1, piece, sizeof piece, &n) || n > sizeof piece) n = 0;
        for (size_t k = 0; k < n; k++) lex_byte(cb, piece[k]);
    }
    float b = 2.0f + (float)cb->calls++ / 6.0f;
    if (cb->in_str && cb->in_key) {
        /* the next token of each required name this key can still become */
        int any = 0;
        for (int r = 0; r < cb->n_req; r++) {
            char want[600];
            int wl = snprintf(want, sizeof want, "%s\"", cb->req[r]);
            if (wl >= (int)sizeof want || cb->key_len > wl || memcmp(want, cb->key, (size_t)cb->key_len)) continue;
            int dup = 0; /* this object has it already */
            for (int q = 0; q < cb->seen_len && !dup; q += (int)strlen(cb->seen + q + 1) + 2)
                dup = cb->seen[q] == cb->depth && !strcmp(cb->seen + q + 1, want);
            if (dup) continue;
            int32_t ids[8];
            size_t n = 0;
            if (cinfer_tokenize(cb->m, want + cb->key_len, (size_t)(wl - cb->key_len), 0, 0, ids, 8, &n) && n <= 8) continue;
            if (n && ids[0] >= 0 && ids[0] < n_vocab) logits[ids[0]] += 2 * b, any = 1;
        }
        if (!any && cb->quote_tok >= 0) logits[cb->quote_tok] += 2 * b;
    } else if (cb->in_str && !cb->esc) {
        for (int i = 0; i < n_vocab; i++)
            if (cb->quote_first[i]) logits[i] += b;
    } else if (!cb->in_str)
        for (int i = 0; i < n_vocab; i++)
            if (cb->outside[i]) logits[i] += cb->outside[i] > 0 ? b : -b / 2;
}

/* the names in every "required" array of the schema */
static void required_names(close_bias *cb, const cJSON *v, int depth) {
    if (depth > 64 || !v) return;
    for (const cJSON *k = v->child; k; k = k->next) {
        if (k->string && !strcmp(k->string, "required") && cJSON_IsArray(k))
            for (const cJSON *x = k->child; x && cb->n_req < 256; x = x->next)
                if (cJSON_IsString(x) && strlen(x->valuestring) < 200) {
                    if (cb->n_req == cb->cap_req) {
                        cb->cap_req = cb->cap_req ? cb->cap_req * 2 : 16;
                        cb->req = realloc(cb->req, (size_t)cb->cap_req * sizeof *cb->req);
                    }
                    cb->req[cb->n_req++] = strdup(x->valuestring);
                }
        if (cJSON_IsObject(k) || cJSON_IsArray(k)) required_names(cb, k, depth + 1);
    }
}

static void put_hex(FILE *f, const char *b, size_t n) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) fputc(hx[(uint8_t)b[i] >> 4], f), fputc(hx[(uint8_t)b[i] & 15], f);
}

int gram_stress_run(const char *model_rel, const char *data_dir, int stride, int max_tokens, const char *batch_path,
                    gram_stress_counts *out) {
    memset(out, 0, sizeof *out);
    const char *mp = shared_path(model_rel);
    if (!mp) return -1;
    char err[4096];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    if (cinfer_model_open(mp, NULL, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
        return -1;
    }
    cinfer_session_options so = {.n_ctx = 1024, .n_threads = 1};
    if (cinfer_session_new(m, &so, &s, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        cinfer_model_close(m);
        return -1;
    }
    int nv = cinfer_model_n_vocab(m);
    close_bias cb = {.m = m, .quote_first = calloc((size_t)nv, 1), .outside = calloc((size_t)nv, 1), .quote_tok = -1};
    for (int32_t id = 0; cb.quote_first && cb.outside && id < nv; id++) {
        char piece[256];
        size_t n = 0;
        if (cinfer_detokenize(m, &id, 1, piece, sizeof piece, &n) || n > sizeof piece) n = 0;
        int closers = 0, openers = 0;
        for (size_t k = 0; k < n; k++) {
            closers += piece[k] == ']' || piece[k] == '}';
            openers += piece[k] == '{' || piece[k] == '[' || piece[k] == ',';
        }
        /* '"' then only closers: the string ends and nothing new begins */
        cb.quote_first[id] = n && piece[0] == '"' && (size_t)closers == n - 1;
        if (n == 1 && piece[0] == '"') cb.quote_tok = id;
        cb.outside[id] = n && (size_t)closers == n ? 1 : openers ? -1 : 0;
    }
    if (cb.outside && cinfer_token_eos(m) >= 0) cb.outside[cinfer_token_eos(m)] = 1;
    static const char prompt[] = "Return the JSON value:";
    int32_t prompt_ids[64];
    size_t n_prompt_ids = 0;
    if (cinfer_tokenize(m, prompt, sizeof prompt - 1, 1, 0, prompt_ids, 64, &n_prompt_ids) || n_prompt_ids > 64)
        test_fail(__FILE__, __LINE__, "tokenizing the prompt failed");
    DIR *d = opendir(data_dir);
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".json")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    FILE *batch = fopen(batch_path, "w");
    for (int i = 0; i < n && batch; i += stride) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", data_dir, names[i]);
        size_t len;
        char *txt = slurp(path, &len);
        cJSON *doc = txt ? cJSON_ParseWithLength(txt, len) : NULL;
        free(txt);
        char *schema = doc ? cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "schema")) : NULL;
        for (int k = 0; k < cb.n_req; k++) free(cb.req[k]);
        cb.n_req = 0;
        required_names(&cb, cJSON_GetObjectItem(doc, "schema"), 0);
        cJSON_Delete(doc);
        if (!schema) continue;
        out->schemas++;
        cinfer_grammar *g = NULL;
        if (cinfer_grammar_from_schema(m, schema, strlen(schema), NULL, &g, err, sizeof err)) {
            out->refused++;
            free(schema);
            continue;
        }
        out->compiled++;
        sbuf b = {0};
        cb.calls = cb.in_str = cb.esc = cb.in_key = cb.expect_key = cb.depth = cb.seen_len = 0;
        /* the lexer starts where the prompt ends: tokens the grammar forces before the first
         * sampled one ('{"name":"' of an object whose first key is required) are text too */
        cb.n_prompt = cb.done = (int)n_prompt_ids;
        cinfer_gen_options o = {.max_tokens = max_tokens, .temperature = 1.0f, .seed = (uint64_t)i + 1, .grammar = g,
                                .logit_fn = bias_closing, .logit_user = &cb};
        cinfer_gen_result r;
        if (cinfer_generate(s, prompt, &o, collect, &b, &r, err, sizeof err)) {
            /* the grammar accepts no token the vocabulary has: a dead end is a bug */
            test_fail(__FILE__, __LINE__, "%s: generation failed: %s", names[i], err);
            out->failed++;
        } else {
            out->tokens += r.n_generated;
            if (r.stop == CINFER_STOP_GRAMMAR || r.stop == CINFER_STOP_EOS) {
                out->complete++;
                if (cinfer_grammar_check_bytes(g, b.text ? b.text : "", b.len, err, sizeof err) != 1)
                    test_fail(__FILE__, __LINE__, "%s: the grammar rejects its own output: %s: %.300s", names[i], err,
                              b.text ? b.text : "");
                fprintf(batch, "S %d %s\nI %d gen/%d ", i, schema, i, i);
                put_hex(batch, b.text ? b.text : "", b.len);
                fputc('\n', batch);
            } else {
                out->incomplete++;
                if (getenv("CINFER_GRAM_STRESS_VERBOSE"))
                    printf("      %s: %d tokens, stop %d, starts \"%.160s\", ends \"%.120s\"\n", names[i], r.n_generated,
                           r.stop, b.text ? b.text : "", b.len > 120 ? b.text + b.len - 120 : b.text ? b.text : "");
            }
        }
        free(b.text);
        cinfer_grammar_free(g);
        free(schema);
    }
    if (batch) fclose(batch);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(cb.quote_first);
    free(cb.outside);
    for (int k = 0; k < cb.n_req; k++) free(cb.req[k]);
    free(cb.req);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return batch ? 0 : -1;
}

void gram_stress_report(const gram_stress_counts *c) {
    printf("    schemas %d: compiled for the model %d, refused %d; generations complete %d, over the token budget %d,"
           " failed %d; %ld tokens\n",
           c->schemas, c->compiled, c->refused, c->complete, c->incomplete, c->failed, c->tokens);
}

#ifdef CINFER_TEST_BUILD
static void gen_quick(const char *model, const char *prompt, int seeds) {
    gen_counts c;
    if (gram_gen_schemas(model, prompt, seeds, 1.0f, test_tmpdir(), 0, &c) < 0) SKIP("../shared/%s absent", model);
    EXPECT_EQ_I(c.complete, c.runs);
    EXPECT_EQ_I(c.self_ok, c.runs);
    EXPECT_EQ_I(c.validated_ok, c.validated);
    if (!gram_validator_available()) printf("    (python3-jsonschema absent: independent validation skipped)\n");
}

TEST(gram_gen, schemas_stories) { gen_quick(STORIES, "Once upon a time", 3); }
TEST(gram_gen, schemas_qwen3) { gen_quick(QWEN3, "Return the JSON object:", 1); }

/* ---- typed structs ------------------------------------------------------------------------- */

typedef struct {
    char name[16];
    int qty;
} item;

typedef struct {
    char title[24];
    int year;
    bool in_print;
    int genre; /* index into genres */
    double rating;
    int64_t isbn;
    item items[3];
    int n_items;
    char tags[2][8];
    int n_tags;
    int note_set;
} book;

static const char *const genres[] = {"fiction", "science", "history"};
static const cinfer_field item_fields[] = {
    {CINFER_FIELD(item, name, CINFER_FIELD_STRING)},
    {CINFER_FIELD(item, qty, CINFER_FIELD_INT), .has_min = 1, .min = 1, .has_max = 1, .max = 9},
};
static const cinfer_struct_desc item_desc = {"item", sizeof(item), item_fields, 2};
static const cinfer_field book_fields[] = {
    {CINFER_FIELD(book, title, CINFER_FIELD_STRING), .description = "the title"},
    {CINFER_FIELD(book, year, CINFER_FIELD_INT), .has_min = 1, .min = 1450, .has_max = 1, .max = 2030},
    {CINFER_FIELD(book, in_print, CINFER_FIELD_BOOL)},
    {CINFER_FIELD(book, genre, CINFER_FIELD_ENUM), .enum_values = genres, .n_enum_values = 3},
    {CINFER_FIELD(book, rating, CINFER_FIELD_DOUBLE), .has_min = 1, .min = 0, .has_max = 1, .max = 5},
    {CINFER_FIELD(book, isbn, CINFER_FIELD_INT64), .optional = 1},
    {.name = "items", .type = CINFER_FIELD_ARRAY, .offset = offsetof(book, items), .elem_type = CINFER_FIELD_STRUCT,
     .nested = &item_desc, .elem_size = sizeof(item), .max_count = 3, .count_offset = offsetof(book, n_items)},
    {.name = "tags", .type = CINFER_FIELD_ARRAY, .offset = offsetof(book, tags), .elem_type = CINFER_FIELD_STRING,
     .elem_size = 8, .max_count = 2, .count_offset = offsetof(book, n_tags), .optional = 1},
};
static const cinfer_struct_desc book_desc = {"book", sizeof(book), book_fields, 8};

TEST(gram_gen, struct_roundtrip) {
    char err[1024], *schema = NULL;
    EXPECT_EQ_I(cinfer_struct_schema(&book_desc, &schema, err, sizeof err), 0);
    if (!schema) return;
    EXPECT(strstr(schema, "\"additionalProperties\":false") && strstr(schema, "\"maxLength\":23"));
    /* parse errors name the field */
    book bk;
    const char *bad = "{\"title\":\"a title that is much too long\",\"year\":2000,\"in_print\":true,\"genre\":\"science\","
                      "\"rating\":4.5,\"items\":[]}";
    EXPECT_EQ_I(cinfer_struct_parse(&book_desc, bad, strlen(bad), &bk, err, sizeof err), CINFER_EFORMAT);
    EXPECT_MSG(strstr(err, "book.title") != NULL, "%s", err);
    const char *bad2 = "{\"title\":\"t\",\"year\":2000,\"in_print\":true,\"genre\":\"science\",\"rating\":4.5,"
                       "\"items\":[{\"name\":\"x\",\"qty\":1.5}]}";
    EXPECT_EQ_I(cinfer_struct_parse(&book_desc, bad2, strlen(bad2), &bk, err, sizeof err), CINFER_EFORMAT);
    EXPECT_MSG(strstr(err, "book.items[0].qty") != NULL, "%s", err);
    /* generate: the output always parses */
    const char *mp = shared_path(STORIES);
    if (!mp) {
        free(schema);
        SKIP("../shared absent");
    }
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    cinfer_grammar *g = NULL;
    EXPECT(cinfer_model_open(mp, NULL, &m, err, sizeof err) == 0);
    EXPECT(m && cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    EXPECT(s && cinfer_grammar_from_schema(m, schema, strlen(schema), NULL, &g, err, sizeof err) == 0);
    for (int seed = 0; g && seed < 5; seed++) {
        sbuf b = {0};
        cinfer_gen_options o = {.max_tokens = 600, .temperature = 1.0f, .top_p = 1, .seed = (uint64_t)seed, .grammar = g};
        cinfer_gen_result r;
        EXPECT(cinfer_generate(s, "Once upon a time", &o, collect, &b, &r, err, sizeof err) == 0);
        EXPECT_EQ_I(r.stop, CINFER_STOP_GRAMMAR);
        /* generated tokens are in the history (forced ones evaluated in batches) */
        EXPECT_EQ_I(cinfer_session_n_past(s), r.n_prompt + r.n_generated);
        EXPECT_MSG(b.text && cinfer_struct_parse(&book_desc, b.text, b.len, &bk, err, sizeof err) == 0, "%s: %s", err,
                   b.text ? b.text : "");
        EXPECT(bk.year >= 1450 && bk.year <= 2030 && bk.genre >= 0 && bk.genre < 3 && bk.n_items <= 3);
        free(b.text);
    }
    cinfer_grammar_free(g);
    cinfer_session_free(s);
    cinfer_model_close(m);
    free(schema);
}

TEST(gram_gen, confidence) {
    const char *mp = shared_path(STORIES);
    if (!mp) SKIP("../shared absent");
    char err[1024];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    cinfer_grammar *g = NULL;
    cinfer_confidence *c = NULL;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\",\"black\"]},"
                         "\"ok\":{\"type\":\"boolean\"},\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},"
                         "\"list\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"minItems\":2,\"maxItems\":2}},"
                         "\"required\":[\"color\",\"ok\",\"n\",\"list\"],\"additionalProperties\":false}";
    EXPECT(cinfer_model_open(mp, NULL, &m, err, sizeof err) == 0);
    EXPECT(cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    EXPECT(cinfer_grammar_from_schema(m, schema, strlen(schema), NULL, &g, err, sizeof err) == 0);
    EXPECT(cinfer_confidence_new(&c) == 0);
    for (int seed = 0; seed < 4 && g; seed++) {
        sbuf b = {0};
        cinfer_gen_options o = {.temperature = 1.0f, .top_p = 1, .seed = (uint64_t)seed, .grammar = g, .confidence = c};
        EXPECT(cinfer_generate(s, "Once upon a time", &o, collect, &b, NULL, err, sizeof err) == 0);
        /* one decision per enum/boolean/integer value: color, ok, n, list/0, list/1 */
        EXPECT_EQ_I(cinfer_confidence_count(c), 5);
        for (int i = 0; i < cinfer_confidence_count(c); i++) {
            const cinfer_decision *d = cinfer_confidence_get(c, i);
            double sum = 0;
            for (int k = 0; k < d->n_choices; k++) sum += d->choices[k].p;
            EXPECT_NEAR(sum, 1.0, 1e-6);
            EXPECT(d->chosen >= 0);
            if (d->chosen >= 0) EXPECT_MSG(strstr(b.text, d->choices[d->chosen].value) != NULL, "%s not in %s",
                                           d->choices[d->chosen].value, b.text);
            if (!strcmp(d->path, "/color")) EXPECT_EQ_I(d->n_choices, 4);
            if (!strcmp(d->path, "/ok")) EXPECT_EQ_I(d->kind, CINFER_DECISION_BOOL);
            if (!strcmp(d->path, "/n")) EXPECT(d->kind == CINFER_DECISION_INT && d->n_choices == 5);
        }
        char *js = cinfer_confidence_json(c);
        EXPECT(js && strstr(js, "\"path\":\"/list/1\""));
        free(js);
        free(b.text);
    }
    cinfer_confidence_free(c);
    cinfer_grammar_free(g);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

/* One grammar, two sessions on two threads: the grammar's caches are shared. */
typedef struct {
    cinfer_model *m;
    const cinfer_grammar *g;
    int seed, ok;
} thread_job;

static void *gen_thread(void *arg) {
    thread_job *j = arg;
    cinfer_session *s = NULL;
    char err[512];
    if (cinfer_session_new(j->m, &(cinfer_session_options){.n_threads = 1}, &s, err, sizeof err)) return NULL;
    j->ok = 1;
    for (int k = 0; k < 4; k++) {
        sbuf b = {0};
        cinfer_gen_options o = {.temperature = 1.0f, .top_p = 1, .seed = (uint64_t)(j->seed * 10 + k), .grammar = j->g};
        if (cinfer_generate(s, "Once upon a time", &o, collect, &b, NULL, err, sizeof err) ||
            cinfer_grammar_check(j->g, b.text ? b.text : "", b.len, err, sizeof err) != 1)
            j->ok = 0;
        free(b.text);
    }
    cinfer_session_free(s);
    return NULL;
}

TEST(gram_gen, shared_grammar_two_threads) {
    const char *mp = shared_path(STORIES);
    if (!mp) SKIP("../shared absent");
    char err[1024], path[256];
    size_t len;
    snprintf(path, sizeof path, "%s/02_order.json", SCHEMAS);
    char *schema = slurp(path, &len);
    cinfer_model *m = NULL;
    cinfer_grammar *g = NULL;
    EXPECT(schema && cinfer_model_open(mp, NULL, &m, err, sizeof err) == 0);
    EXPECT(m && cinfer_grammar_from_schema(m, schema, len, NULL, &g, err, sizeof err) == 0);
    if (g) {
        thread_job jobs[2] = {{m, g, 1, 0}, {m, g, 2, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, gen_thread, &jobs[i]);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        EXPECT(jobs[0].ok && jobs[1].ok);
    }
    cinfer_grammar_free(g);
    cinfer_model_close(m);
    free(schema);
}

TEST(gram_gen, cli_run_json_schema) {
    const char *mp = shared_path(STORIES);
    if (!mp) SKIP("../shared absent");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run %s -p 'Once upon a time' --json-schema %s/02_order.json --temp 1 --seed 7 --confidence",
             cinfer_bin(), mp, SCHEMAS);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    /* stdout is exactly one JSON value and a newline */
    EXPECT_MSG(out && out[0] == '{' && strlen(out) > 2 && out[strlen(out) - 2] == '}', "%s", out ? out : "");
    if (out && gram_validator_available()) {
        char path[1024];
        snprintf(path, sizeof path, "%s/cli.json", test_tmpdir());
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(out, f);
            fclose(f);
            char vc[2048], *vo = NULL;
            snprintf(vc, sizeof vc, "/usr/bin/python3 tests/data/gram/validate.py %s/02_order.json %s", SCHEMAS, path);
            EXPECT_EQ_I(run_cmd(vc, true, &vo), 0);
            free(vo);
        }
    }
    free(out);
}
/* A value the last token max_tokens allows completes is a grammar stop: the
 * completion is noticed after that token, not on a step that never comes.
 * A value that is complete but could still go on (an unbounded integer) is
 * a token-limit stop, as in llama.cpp. */
TEST(gram_gen, complete_on_token_limit) {
    const char *mp = shared_path(STORIES);
    if (!mp) SKIP("../shared absent");
    char err[1024];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    EXPECT(cinfer_model_open(mp, NULL, &m, err, sizeof err) == 0);
    EXPECT(m && cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    static const char *const schemas[] = {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":7}",
                                          "{\"enum\":[\"yes\",\"no\"]}",
                                          "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},"
                                          "\"required\":[\"ok\"]}"};
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0] && s; k++) {
        cinfer_grammar *g = NULL;
        EXPECT(cinfer_grammar_from_schema(m, schemas[k], strlen(schemas[k]), NULL, &g, err, sizeof err) == 0);
        if (!g) continue;
        sbuf b = {0};
        cinfer_gen_result r;
        cinfer_gen_options o = {.seed = 1, .grammar = g};
        EXPECT(cinfer_generate(s, "hi", &o, collect, &b, &r, err, sizeof err) == 0);
        EXPECT_EQ_I(r.stop, CINFER_STOP_GRAMMAR);
        int n = r.n_generated;
        for (int lim = n; lim >= n - 1 && lim > 0; lim--) {
            sbuf c = {0};
            o.max_tokens = lim;
            EXPECT(cinfer_generate(s, "hi", &o, collect, &c, &r, err, sizeof err) == 0);
            EXPECT_MSG(r.stop == (lim == n ? CINFER_STOP_GRAMMAR : CINFER_STOP_MAX_TOKENS),
                       "%s: max_tokens %d (the value takes %d): stop %d", schemas[k], lim, n, (int)r.stop);
            if (lim == n) EXPECT_MSG(b.text && c.text && !strcmp(b.text, c.text), "%s vs %s", b.text, c.text);
            free(c.text);
        }
        free(b.text);
        cinfer_grammar_free(g);
    }
    /* an unbounded integer cut after its first token: complete text perhaps, but it could go on */
    cinfer_grammar *g = NULL;
    EXPECT(cinfer_grammar_from_schema(m, "{\"type\":\"integer\"}", 18, NULL, &g, err, sizeof err) == 0);
    for (int seed = 0; seed < 4 && g && s; seed++) {
        cinfer_gen_result r;
        cinfer_gen_options o = {.seed = (uint64_t)seed, .grammar = g, .max_tokens = 1};
        EXPECT(cinfer_generate(s, "hi", &o, NULL, NULL, &r, err, sizeof err) == 0);
        EXPECT_EQ_I(r.stop, CINFER_STOP_MAX_TOKENS);
    }
    cinfer_grammar_free(g);
    /* the CLI: the trial's command prints the value and exits 0 */
    char path[1024], cmd[2048], *out = NULL;
    snprintf(path, sizeof path, "%s/int57.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(schemas[0], f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s run %s -p hi --json-schema %s -n 1 --seed 1", cinfer_bin(), mp, path);
        EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
        EXPECT_MSG(out && (!strcmp(out, "5\n") || !strcmp(out, "6\n") || !strcmp(out, "7\n")), "%s", out ? out : "");
        free(out);
    }
    cinfer_session_free(s);
    cinfer_model_close(m);
}

/* Generation semantics by default for a model's grammar: only declared keys,
 * in the schema's order, so even a random-weight model ends the object at
 * once; --confidence still reports each boolean/enum/integer decision. */
TEST(gram_gen, closed_objects_by_default) {
    const char *mp = shared_path(STORIES);
    if (!mp) SKIP("../shared absent");
    char err[1024];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    cinfer_grammar *g = NULL, *gv = NULL;
    cinfer_confidence *c = NULL;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"color\":{\"enum\":"
                         "[\"red\",\"blue\"]},\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3}},"
                         "\"required\":[\"ok\",\"color\",\"n\"]}";
    EXPECT(cinfer_model_open(mp, NULL, &m, err, sizeof err) == 0);
    EXPECT(m && cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    EXPECT(m && cinfer_grammar_from_schema(m, schema, strlen(schema), NULL, &g, err, sizeof err) == 0);
    EXPECT(cinfer_grammar_from_schema(NULL, schema, strlen(schema), NULL, &gv, err, sizeof err) == 0);
    EXPECT(cinfer_confidence_new(&c) == 0);
    for (int seed = 0; seed < 4 && g && gv && s; seed++) {
        sbuf b = {0};
        cinfer_gen_result r;
        cinfer_gen_options o = {.temperature = 1.0f, .seed = (uint64_t)seed, .grammar = g, .confidence = c};
        EXPECT(cinfer_generate(s, "Once upon a time", &o, collect, &b, &r, err, sizeof err) == 0);
        EXPECT_EQ_I(r.stop, CINFER_STOP_GRAMMAR);
        /* {"ok":B,"color":"C","n":N}: keys in the schema's order, nothing else */
        EXPECT_MSG(b.text && !strncmp(b.text, "{\"ok\":", 6) && strstr(b.text, ",\"color\":\"") &&
                       strstr(b.text, ",\"n\":") && strstr(b.text, ",\"color\"") < strstr(b.text, ",\"n\""),
                   "%s", b.text ? b.text : "");
        EXPECT_EQ_I(cinfer_grammar_check(gv, b.text ? b.text : "", b.len, err, sizeof err), 1);
        EXPECT_EQ_I(cinfer_confidence_count(c), 3);
        for (int i = 0; i < cinfer_confidence_count(c); i++) {
            const cinfer_decision *d = cinfer_confidence_get(c, i);
            const char *want = i == 0 ? "/ok" : i == 1 ? "/color" : "/n";
            EXPECT_STR_EQ(d->path, want);
            EXPECT_EQ_I(d->n_choices, i == 0 ? 2 : i == 1 ? 2 : 3);
            EXPECT(d->chosen >= 0);
        }
        free(b.text);
    }
    /* the same with validation semantics asked for: extra keys are possible again */
    cinfer_grammar *go = NULL;
    cinfer_grammar_options vo = {.objects = CINFER_OBJECTS_VALIDATION};
    EXPECT(m && cinfer_grammar_from_schema(m, schema, strlen(schema), &vo, &go, err, sizeof err) == 0);
    const char *extra = "{\"n\":1,\"zz\":0,\"ok\":true,\"color\":\"red\"}";
    if (go) EXPECT_EQ_I(cinfer_grammar_check(go, extra, strlen(extra), err, sizeof err), 1);
    if (g) EXPECT_EQ_I(cinfer_grammar_check(g, extra, strlen(extra), err, sizeof err), 0);
    cinfer_grammar_free(go);
    cinfer_confidence_free(c);
    cinfer_grammar_free(g);
    cinfer_grammar_free(gv);
    cinfer_session_free(s);
    cinfer_model_close(m);
}
#endif
