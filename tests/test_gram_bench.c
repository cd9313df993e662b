/*
 * test_gram_bench.c — the JSONSchemaBench/MaskBench sample
 * (../shared/jsonschemabench/data: 2,007 real-world schemas with valid and
 * invalid instances) against cinfer's grammar, scored the MaskBench way:
 * a test passes when a valid instance is accepted or an invalid one
 * rejected; every test of a schema that does not compile fails.  The bar:
 * no invalid instance accepted.  CINFER_GRAM_REPORT=1 prints the summary
 * (per subset, and the keywords that made schemas fail to compile);
 * CINFER_GRAM_REPORT=2 also lists each failing instance.
 */
#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "grammar/gram_mask.h"
#include "test.h"
#include "test_gram_diff.h"
#include "text/tok.h"

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Wall-clock seconds; with CINFER_BENCH_CLOCK=cpu the calling thread's CPU
 * time instead, which leaves out the time other jobs hold the core (on a
 * shared, oversubscribed machine the wall clock measures the queue). */
static double now_s(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("CINFER_BENCH_CLOCK") && !strcmp(getenv("CINFER_BENCH_CLOCK"), "cpu");
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifndef CINFER_TEST_BUILD
typedef struct {
    char name[64];
    int schemas, compiled, valid, valid_ok, invalid, invalid_ok, tests_in_failed;
} subset_counts;

typedef struct {
    char kw[96];
    int n;
} kw_count;

static int cmp_kw(const void *a, const void *b) { return ((const kw_count *)b)->n - ((const kw_count *)a)->n; }

/* Every stride-th schema of the sample (1: all); `make bench-grammar` (the
 * test runner's gram_diff/jsonschemabench covers the same checks). */
static void maskbench(int stride, int report) {
    NEED_SHARED(dir0, "jsonschemabench/data");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", dir0);
    DIR *d = opendir(dir);
    if (!d) SKIP("cannot open %s", dir);
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".json")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    subset_counts sub[32] = {0};
    int n_sub = 0;
    kw_count kws[256] = {0};
    int n_kw = 0;
    long invalid_accepted = 0;
    double t0 = now_s();
    for (int i = 0; i < n; i += stride) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        double ts = now_s();
        char subset[64];
        snprintf(subset, sizeof subset, "%.*s", (int)strcspn(names[i], "-"), names[i]);
        int si = 0;
        while (si < n_sub && strcmp(sub[si].name, subset)) si++;
        if (si == n_sub && n_sub < 32) snprintf(sub[n_sub++].name, sizeof sub[0].name, "%s", subset);
        subset_counts *sc = &sub[si];
        size_t len;
        char *txt = read_file(path, &len);
        cJSON *doc = txt ? gram_json_parse(txt, len, NULL, 0) : NULL;
        free(txt);
        if (!doc) continue;
        sc->schemas++;
        char *schema = gram_json_print(cJSON_GetObjectItem(doc, "schema"));
        gram_grammar *g = NULL;
        char err[4096];
        int rc = schema ? gram_compile(schema, strlen(schema), NULL, &g, err, sizeof err) : -1;
        free(schema);
        cJSON *tests = cJSON_GetObjectItem(doc, "tests");
        if (rc) {
            sc->tests_in_failed += cJSON_GetArraySize(tests);
            for (cJSON *t = tests ? tests->child : NULL; t; t = t->next) {
                if (cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"))) sc->valid++;
                else sc->invalid++;
            }
            /* count keywords: "unsupported: kw at path; kw at path" */
            char *p = strstr(err, "unsupported:");
            char seen[1024] = "";
            for (p = p ? p + 12 : NULL; p && *p;) {
                while (*p == ' ' || *p == ';') p++;
                const char *at = strstr(p, " at ");
                size_t kl = at ? (size_t)(at - p) : strlen(p);
                char kwb[96];
                snprintf(kwb, sizeof kwb, "%.*s", (int)(kl < 60 ? kl : 60), p);
                /* patterns: keep the keyword only */
                if (!strncmp(kwb, "pattern /", 9)) snprintf(kwb, sizeof kwb, "pattern (unsupported regex)");
                if (!strncmp(kwb, "patternProperties /", 19)) snprintf(kwb, sizeof kwb, "patternProperties (unsupported regex)");
                if (!strncmp(kwb, "oneOf (", 7)) snprintf(kwb, sizeof kwb, "oneOf (overlapping branches)");
                if (!strstr(seen, kwb) && strlen(seen) + strlen(kwb) + 2 < sizeof seen) {
                    strcat(seen, kwb);
                    strcat(seen, "|");
                    int k = 0;
                    while (k < n_kw && strcmp(kws[k].kw, kwb)) k++;
                    if (k == n_kw && n_kw < 256) snprintf(kws[n_kw++].kw, sizeof kws[0].kw, "%s", kwb);
                    if (k < 256) kws[k].n++;
                }
                p = strchr(p, ';');
            }
            if (report > 1) printf("      %s: %s\n", names[i], err);
            cJSON_Delete(doc);
            if (report > 2 || now_s() - ts > 2) printf("      %s: %.2f s (not compiled)\n", names[i], now_s() - ts);
            continue;
        }
        sc->compiled++;
        for (cJSON *t = tests ? tests->child : NULL; t; t = t->next) {
            int valid = cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"));
            char *inst = gram_json_print(cJSON_GetObjectItem(t, "data"));
            char *canon = NULL;
            size_t cl;
            int acc = 0;
            if (inst && !gram_canon(inst, strlen(inst), &canon, &cl, err, sizeof err)) acc = gram_check(g, canon, cl, err, sizeof err) == 1;
            if (valid) sc->valid++, sc->valid_ok += acc;
            else sc->invalid++, sc->invalid_ok += !acc;
            if (!valid && acc) {
                invalid_accepted++;
                test_fail(__FILE__, __LINE__, "%s: invalid instance accepted: %.300s", names[i], inst);
            }
            if (valid && !acc && report > 1) printf("      %s: valid rejected: %s\n        %.300s\n", names[i], err, inst);
            free(canon);
            free(inst);
        }
        gram_free(g);
        cJSON_Delete(doc);
        if (report > 2 || now_s() - ts > 2) printf("      %s: %.2f s\n", names[i], now_s() - ts);
    }
    double secs = now_s() - t0;
    subset_counts tot = {.name = "total"};
    for (int s = 0; s < n_sub; s++) {
        tot.schemas += sub[s].schemas, tot.compiled += sub[s].compiled, tot.valid += sub[s].valid;
        tot.valid_ok += sub[s].valid_ok, tot.invalid += sub[s].invalid, tot.invalid_ok += sub[s].invalid_ok;
    }
    if (report) {
        printf("    %-16s %8s %8s %14s %16s %12s\n", "subset", "schemas", "compiled", "valid accepted", "invalid rejected", "tests passed");
        for (int s = 0; s <= n_sub; s++) {
            subset_counts *c = s < n_sub ? &sub[s] : &tot;
            printf("    %-16s %8d %8d %8d/%-5d %10d/%-5d %6d/%-5d\n", c->name, c->schemas, c->compiled, c->valid_ok, c->valid,
                   c->invalid_ok, c->invalid, c->valid_ok + c->invalid_ok, c->valid + c->invalid);
        }
        qsort(kws, (size_t)n_kw, sizeof *kws, cmp_kw);
        printf("    schemas not compiled, by reason (a schema may have several):\n");
        for (int k = 0; k < n_kw && k < 40; k++) printf("      %5d  %s\n", kws[k].n, kws[k].kw);
        printf("    %.1f s\n", secs);
    }
    EXPECT_EQ_I(invalid_accepted, 0);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

#endif

/* ---- mask timing ------------------------------------------------------------------------------ */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static void dpush(dvec *d, double x) {
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4096;
        d->v = realloc(d->v, d->cap * sizeof *d->v);
    }
    d->v[d->n++] = x;
}

static void dstats(const char *what, dvec *d, const char *unit) {
    if (!d->n) return;
    qsort(d->v, d->n, sizeof *d->v, cmp_dbl);
    double sum = 0;
    for (size_t i = 0; i < d->n; i++) sum += d->v[i];
    printf("    %-34s n=%-7zu mean %8.1f  p50 %8.1f  p99 %9.1f  max %10.1f %s\n", what, d->n, sum / (double)d->n,
           d->v[d->n / 2], d->v[(size_t)((double)(d->n - 1) * 0.99)], d->v[d->n - 1], unit);
}

/* Every valid instance of every compiling schema (stride: every stride-th
 * schema), tokenized by the model's tokenizer: the mask at each token, timed;
 * each token must be in its mask.  Then the same instances again (warm). */
static void mask_timing(const char *vocab_rel, int stride, int report) {
    NEED_SHARED(vp, vocab_rel);
    NEED_SHARED(dir0, "jsonschemabench/data");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", dir0);
    gguf_file *gf;
    char err[4096];
    if (gguf_open(vp, &gf, err, sizeof err)) SKIP("%s", err);
    tok_vocab *tv = NULL;
    if (tok_load_gguf(gf, &tv, err, sizeof err)) {
        gguf_close(gf);
        SKIP("%s", err);
    }
    gguf_close(gf);
    double t0 = now_s();
    gram_vocab *gv;
    if (gram_vocab_new(tv, &gv)) {
        tok_free(tv);
        SKIP("out of memory");
    }
    double trie_ms = (now_s() - t0) * 1e3;
    int nv = gram_vocab_n_vocab(gv), nw = (nv + 31) / 32;
    uint32_t *bits = malloc((size_t)nw * 4), *scratch = malloc((size_t)nw * 4);
    dvec cold = {0}, warm = {0}, comp = {0}, comp_only = {0}, tok_per_inst = {0}, apply_old = {0}, apply_new = {0},
         ids_new = {0};
    float *logits = malloc((size_t)nv * sizeof *logits), *work = malloc((size_t)nv * sizeof *work);
    int32_t *allowed = malloc(((size_t)nv + 1) * sizeof *allowed);
    for (int i = 0; i < nv; i++) logits[i] = (float)((i * 2654435761u) % 1000) / 100.0f;
    int32_t *ids = malloc(1 << 20);
    long not_allowed = 0, n_inst = 0;
    const char *ov = getenv("CINFER_GRAM_BENCH_OPEN");
    int open_objects = ov && atoi(ov) > 0;
    DIR *d = opendir(dir);
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".json")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i += stride) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len;
        char *txt = read_file(path, &len);
        cJSON *doc = txt ? gram_json_parse(txt, len, NULL, 0) : NULL;
        free(txt);
        if (!doc) continue;
        char *schema = gram_json_print(cJSON_GetObjectItem(doc, "schema"));
        gram_grammar *g = NULL;
        /* compiled as for generation (cinfer_grammar_from_schema with a model), then the first mask;
         * CINFER_GRAM_BENCH_OPEN=1 keeps validation semantics for objects (the figures before
         * generation semantics: any key order, undeclared keys allowed) */
        gram_options go = {.gen_limits = 1, .gen_objects = !open_objects};
        double tc = now_s();
        int rc = schema ? gram_compile(schema, strlen(schema), &go, &g, err, sizeof err) : -1;
        double tcc = now_s();
        gram_masker *mk = NULL;
        gram_matcher *m0 = NULL;
        if (!rc) rc = gram_masker_new(g, gv, &mk) || gram_matcher_new(g, &m0) || gram_mask(mk, m0, bits, scratch) < 0;
        double compile_ms = (now_s() - tc) * 1e3;
        gram_matcher_free(m0);
        free(schema);
        if (rc) {
            gram_masker_free(mk);
            gram_free(g);
            cJSON_Delete(doc);
            continue;
        }
        dpush(&comp, compile_ms);
        dpush(&comp_only, (tcc - tc) * 1e3);
        if (compile_ms > 20 && report > 1) printf("      %s: compile + first mask %.1f ms\n", names[i], compile_ms);
        for (int pass = 0; pass < 2; pass++)
            for (cJSON *t = cJSON_GetObjectItem(doc, "tests") ? cJSON_GetObjectItem(doc, "tests")->child : NULL; t; t = t->next) {
                if (!cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"))) continue;
                char *inst = gram_json_print(cJSON_GetObjectItem(t, "data"));
                char *canon = NULL;
                size_t cl;
                if (!inst || gram_canon(inst, strlen(inst), &canon, &cl, err, sizeof err) || gram_check(g, canon, cl, err, sizeof err) != 1) {
                    free(inst);
                    free(canon);
                    continue;
                }
                size_t n_ids = 0;
                if (tok_encode(tv, canon, cl, false, false, ids, (1 << 20) / sizeof *ids, &n_ids)) n_ids = 0;
                gram_matcher *m;
                if (gram_matcher_new(g, &m)) break;
                if (!pass) n_inst++, dpush(&tok_per_inst, (double)n_ids);
                for (size_t k = 0; k <= n_ids; k++) {
                    double ts = now_s();
                    int na = gram_mask(mk, m, bits, scratch);
                    double us = (now_s() - ts) * 1e6;
                    dpush(pass ? &warm : &cold, us);
                    if (na < 0) break;
                    if (!pass && (cold.n & 15) == 0) {
                        /* applying it: the old per-token loop, word-level -inf, the allowed-id list */
                        memcpy(work, logits, (size_t)nv * sizeof *work);
                        double ta = now_s();
                        for (int w = 0; w < nw; w++) {
                            uint32_t b = bits[w];
                            if (b == 0xFFFFFFFFu) continue;
                            int base = w * 32, lim = base + 32 < nv ? base + 32 : nv;
                            for (int x = base; x < lim; x++)
                                if (!(b >> (x - base) & 1)) work[x] = -INFINITY;
                        }
                        double tb = now_s();
                        memcpy(work, logits, (size_t)nv * sizeof *work);
                        double tc2 = now_s();
                        gram_mask_apply(bits, work, nv);
                        double td = now_s();
                        gram_mask_ids(bits, nv, allowed);
                        double te = now_s();
                        dpush(&apply_old, (tb - ta) * 1e6);
                        dpush(&apply_new, (td - tc2) * 1e6);
                        dpush(&ids_new, (te - td) * 1e6);
                    }
                    if (k == n_ids) break;
                    if (!(bits[ids[k] >> 5] >> (ids[k] & 31) & 1)) {
                        if (!pass && not_allowed++ < 5)
                            test_fail(__FILE__, __LINE__, "%s: token %d (#%zu) of a valid instance not in its mask", names[i], ids[k], k);
                        break;
                    }
                    if (gram_accept_token(gv, m, ids[k])) break;
                }
                gram_matcher_free(m);
                free(inst);
                free(canon);
            }
        gram_masker_free(mk);
        gram_free(g);
        cJSON_Delete(doc);
    }
    if (report) {
        printf("    vocabulary %s: %d tokens, trie built in %.1f ms\n", vocab_rel, nv, trie_ms);
        printf("    %ld valid instances, %zu masks per pass\n", n_inst, cold.n);
        dstats("mask, first pass (cold caches), us", &cold, "us");
        dstats("mask, second pass (warm), us", &warm, "us");
        dstats("compile + first mask per schema, ms", &comp, "ms");
        dstats("  of which compile, ms", &comp_only, "ms");
        dstats("mask applied, per token (old), us", &apply_old, "us");
        dstats("mask applied, word-level -inf, us", &apply_new, "us");
        dstats("allowed ids (samp_sample_ids), us", &ids_new, "us");
        dstats("tokens per instance", &tok_per_inst, "");
    }
    EXPECT_EQ_I(not_allowed, 0);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(ids);
    free(bits);
    free(scratch);
    free(cold.v);
    free(warm.v);
    free(comp.v);
    free(comp_only.v);
    free(apply_old.v);
    free(apply_new.v);
    free(ids_new.v);
    free(logits);
    free(work);
    free(allowed);
    free(tok_per_inst.v);
    gram_vocab_free(gv);
    tok_free(tv);
}

#ifdef CINFER_TEST_BUILD
/* (The instance checks over the whole sample are gram_diff/jsonschemabench's, at -O2.) */

/* Sanitized: masks for every 80th schema's valid instances, each token must be allowed. */
TEST(gram_bench, masks_qwen3_sample) {
    const char *rep = getenv("CINFER_GRAM_REPORT");
    mask_timing("models/chat/qwen3-chat.gguf", 80, rep ? atoi(rep) : 0);
}
#else
/* ---- `make bench-grammar`: the full runs, -O2, not sanitized ---------------------------- */
static int g_failed;
void test_register(const char *name, test_fn fn) { (void)name, (void)fn; }
void test_fail(const char *file, int line, const char *fmt, ...) {
    if (g_failed++ >= 20) return; /* the count is what matters after the first few */
    va_list ap;
    va_start(ap, fmt);
    printf("    %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}
void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("    skipped: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}
bool test_failed(void) { return g_failed > 0; }
const char *shared_root(void) {
    const char *root = getenv("CINFER_SHARED");
    return root && *root ? root : "../shared";
}
const char *shared_path(const char *rel) {
    static char ring[8][1024];
    static int k;
    const char *root = shared_root();
    char *p = ring[k++ & 7];
    snprintf(p, sizeof ring[0], "%s/%s", root, rel);
    FILE *f = fopen(p, "r");
    if (!f) return NULL;
    fclose(f);
    return p;
}
char *read_file(const char *path, size_t *len) {
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

int run_cmd(const char *cmd, bool merge_stderr, char **out) {
    char full[16384];
    snprintf(full, sizeof full, "%s%s", cmd, merge_stderr ? " 2>&1" : "");
    if (out) *out = NULL;
    FILE *f = popen(full, "r");
    if (!f) return -1;
    size_t cap = 4096, len = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + len, 1, cap - len - 1, f)) > 0)
        if ((len += r) + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    int st = pclose(f);
    if (buf) buf[len] = 0;
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* same layout as in test_gram_gen.c */
typedef struct {
    int runs, complete, self_ok, validated, validated_ok, tokens;
} gen_counts;
int gram_gen_schemas(const char *model_rel, const char *prompt, int n_seeds, float temp, const char *dir, int verbose,
                     gen_counts *out);
int gram_validator_available(void);

static void gen_all(int seeds) {
    static const struct {
        const char *model, *prompt;
    } models[] = {
        {"models/stories260K/stories260K.gguf", "Once upon a time"},
        {"models/chat/qwen3-chat.gguf", "Return the JSON object:"},
        /* (TinyStories-656K's 2048 pieces have no byte fallback and no '{': it cannot spell JSON objects) */
    };
    char dir[] = "/tmp/cinfer-gram-gen-XXXXXX";
    if (!mkdtemp(dir)) return;
    printf("    validator: %s\n", gram_validator_available() ? "tests/data/gram/validate.py (python3-jsonschema)"
                                                             : "absent (python3-jsonschema not installed)");
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        gen_counts c;
        double t0 = now_s();
        if (gram_gen_schemas(models[i].model, models[i].prompt, seeds, 1.0f, dir, 0, &c) < 0) {
            printf("    %s: absent\n", models[i].model);
            continue;
        }
        printf("    %-58s %4d runs: complete %4d, grammar-valid %4d, validator-valid %4d/%-4d  (%d tokens, %.0f s)\n",
               models[i].model, c.runs, c.complete, c.self_ok, c.validated_ok, c.validated, c.tokens, now_s() - t0);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("    could not remove %s\n", dir);
}

/* bench_gram [all|maskbench|masks|gen|diff] [STRIDE, SEEDS or MUTANTS] */
int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    if (!strcmp(what, "stress")) {
        /* bench_gram stress [STRIDE [MAX_TOKENS]] */
        int stride = argc > 2 ? atoi(argv[2]) : 1;
        if (stride < 1) stride = 1;
        int max_tokens = argc > 3 ? atoi(argv[3]) : 256;
        const char *dir = shared_path("jsonschemabench/data");
        if (!dir) {
            printf("    skipped: ../shared/jsonschemabench/data absent\n");
            return 0;
        }
        char d[1024], batch[] = "/tmp/cinfer-gram-stress-XXXXXX";
        snprintf(d, sizeof d, "%s", dir);
        int fd = mkstemp(batch);
        if (fd < 0) return 1;
        close(fd);
        printf("Generation stress test, Qwen3 (random weights), every %d-th schema, temperature 1.0, closing tokens favoured:\n",
               stride);
        double t0 = now_s();
        gram_stress_counts sc;
        if (gram_stress_run("models/chat/qwen3-chat.gguf", d, stride, max_tokens, batch, &sc)) {
            printf("    skipped: ../shared/models/chat/qwen3-chat.gguf absent\n");
            unlink(batch);
            return 0;
        }
        gram_stress_report(&sc);
        gram_diff_counts c = {0};
        if (gram_diff_validator()) gram_diff_validate(batch, 0, &c);
        printf("    validated %ld, invalid %d (the validator could not evaluate %d); %.0f s\n", c.validated, c.invalid,
               c.unverified, now_s() - t0);
        printf("RESULT schemas=%d compiled=%d complete=%d incomplete=%d failed=%d validated=%ld invalid=%d validator=%d "
               "failures=%d\n",
               sc.schemas, sc.compiled, sc.complete, sc.incomplete, sc.failed, c.validated, c.invalid, gram_diff_validator(),
               g_failed);
        unlink(batch);
        return g_failed || c.invalid ? 1 : 0;
    }
    if (!strcmp(what, "diff")) {
        /* `make test-grammar-full`: every schema, MUTANTS (default 64) mutants per valid instance,
         * flexible whitespace on every schema */
        int n_mut = argc > 2 ? atoi(argv[2]) : 64, flex_every = argc > 3 ? atoi(argv[3]) : 1;
        const char *dir = shared_path("jsonschemabench/data");
        if (!dir) {
            printf("    skipped: ../shared/jsonschemabench/data absent\n");
            return 0;
        }
        char d[1024], batch[] = "/tmp/cinfer-gram-diff-XXXXXX";
        snprintf(d, sizeof d, "%s", dir);
        int fd = mkstemp(batch);
        if (fd < 0) return 1;
        close(fd);
        printf("Differential test, JSONSchemaBench sample, %d mutants per valid instance, flexible whitespace on every"
               " %d-th schema:\n", n_mut, flex_every);
        gram_diff_counts c;
        if (gram_diff_run(d, n_mut, flex_every, batch, 1, &c)) return 1;
        int validator = gram_diff_validator();
        if (validator) gram_diff_validate(batch, 1, &c);
        else printf("    python3-jsonschema absent: accepted mutants not validated\n");
        gram_diff_report(&c);
        /* for tests/test_gram_diff.c, which runs this and checks the counts */
        printf("RESULT schemas=%d compiled=%d valid=%d valid_ok=%d invalid_inst=%d invalid_inst_acc=%d mutants=%ld "
               "accepted=%ld validated=%ld invalid=%d unverified=%d validator=%d gen_compiled=%d gen_valid_ok=%d "
               "gen_not_subset=%d failures=%d\n",
               c.schemas, c.compiled, c.valid, c.valid_ok, c.invalid_inst, c.invalid_inst_acc, c.mutants, c.mutants_acc,
               c.validated, c.invalid, c.unverified, validator, c.gen_compiled, c.gen_valid_ok, c.gen_not_subset,
               g_failed);
        unlink(batch);
        return g_failed || c.invalid || c.invalid_inst_acc ? 1 : 0;
    }
    int stride = argc > 2 ? atoi(argv[2]) : 1;
    if (stride < 1) stride = 1;
    if (!strcmp(what, "all") || !strcmp(what, "maskbench")) {
        printf("JSONSchemaBench (MaskBench sample):\n");
        const char *rep = getenv("CINFER_GRAM_REPORT");
        maskbench(stride, rep ? atoi(rep) : 1);
    }
    if (!strcmp(what, "all") || !strcmp(what, "masks")) {
        printf("\nToken masks, Qwen3 vocabulary, over the sample's valid instances:\n");
        const char *rep = getenv("CINFER_GRAM_REPORT"); /* 2: also each schema above 20 ms */
        mask_timing("models/chat/qwen3-chat.gguf", stride, rep ? atoi(rep) : 1);
    }
    if (!strcmp(what, "all") || !strcmp(what, "gen")) {
        int seeds = argc > 2 ? atoi(argv[2]) : 100;
        printf("\nConstrained generation, tests/data/gram/schemas x %d seeds, temperature 1.0:\n", seeds);
        gen_all(seeds);
    }
    return g_failed ? 1 : 0;
}
#endif
