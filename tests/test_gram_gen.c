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

#include "cinfer.h"
#include "test.h"

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
#endif
