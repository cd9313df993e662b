/*
 * test_api.c — the public library (include/cinfer.h): generation, prefix KV
 * reuse, stop strings, session save/load, context limits, two models on two
 * threads, and the embedding example built against an installed library.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "gguf_edit.h"
#include "test.h"

#define STORIES "models/stories260K/stories260K.gguf"
#define TINY "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf"

typedef struct {
    char text[8192];
    size_t len;
    int calls, stop_after;
} collect;

static int on_piece(const char *piece, size_t len, int32_t token, void *user) {
    collect *c = user;
    (void)token;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, piece, len);
        c->len += len;
        c->text[c->len] = 0;
    }
    c->calls++;
    return c->stop_after && c->calls >= c->stop_after;
}

static cinfer_model *open_model(const char *rel) {
    const char *p = shared_path(rel);
    if (!p) return NULL;
    char err[512];
    cinfer_model *m = NULL;
    if (cinfer_model_open(p, NULL, &m, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    return m;
}

TEST(api, greedy_generation_and_stop_reasons) {
    cinfer_model *m = open_model(STORIES);
    if (!m) SKIP("%s absent", shared_root());
    cinfer_session *s;
    char err[512];
    EXPECT(cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    collect c = {0};
    cinfer_gen_result r;
    cinfer_gen_options o = {.max_tokens = 40};
    EXPECT(cinfer_generate(s, "Once upon a time", &o, on_piece, &c, &r, err, sizeof err) == 0);
    /* llama.cpp's greedy continuation (models/reference/stories260K.once.json) */
    EXPECT_MSG(strncmp(c.text, ", there was a little girl named Lily. She loved to play outside in the park.", 70) == 0,
               "got: %s", c.text);
    EXPECT_EQ_I(r.n_prompt, 5);
    EXPECT_EQ_I(r.n_generated, 40);
    EXPECT_EQ_I(r.stop, CINFER_STOP_MAX_TOKENS);
    EXPECT_EQ_I(cinfer_session_n_past(s), 45);
    /* callback stop */
    collect c2 = {.stop_after = 3};
    EXPECT(cinfer_generate(s, "Once upon a time", &o, on_piece, &c2, &r, err, sizeof err) == 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_CALLBACK);
    EXPECT_EQ_I(c2.calls, 3);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

TEST(api, stop_string_across_tokens) {
    cinfer_model *m = open_model(STORIES);
    if (!m) SKIP("%s absent", shared_root());
    cinfer_session *s;
    char err[512];
    EXPECT(cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    /* "little girl" spans several tokens of the greedy continuation */
    const char *stop[] = {"zzz", "little girl"};
    cinfer_gen_options o = {.max_tokens = 60, .stop = stop, .n_stop = 2};
    collect c = {0};
    cinfer_gen_result r;
    EXPECT(cinfer_generate(s, "Once upon a time", &o, on_piece, &c, &r, err, sizeof err) == 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_STRING);
    EXPECT_STR_EQ(c.text, ", there was a ");
    cinfer_session_free(s);
    cinfer_model_close(m);
}

TEST(api, prefix_reuse_equals_cold_evaluation) {
    cinfer_model *m = open_model(TINY);
    if (!m) SKIP("%s absent", shared_root());
    char err[512];
    cinfer_session *warm, *cold;
    EXPECT(cinfer_session_new(m, NULL, &warm, err, sizeof err) == 0);
    EXPECT(cinfer_session_new(m, NULL, &cold, err, sizeof err) == 0);
    const char *p1 = "Once upon a time, there was a little girl named Lily.";
    const char *p2 = "Once upon a time, there was a little girl named Lily. She lived in a small house";
    cinfer_gen_options o = {.max_tokens = 1};
    cinfer_gen_result r1, r2, r3;
    EXPECT(cinfer_generate(warm, p1, &o, NULL, NULL, &r1, err, sizeof err) == 0);
    EXPECT(cinfer_generate(warm, p2, &o, NULL, NULL, &r2, err, sizeof err) == 0);
    EXPECT(cinfer_generate(cold, p2, &o, NULL, NULL, &r3, err, sizeof err) == 0);
    EXPECT_EQ_I(r1.n_reused, 0);
    int32_t t1[256], t2[256];
    size_t n1, n2, lcp = 0;
    EXPECT(cinfer_tokenize(m, p1, strlen(p1), 1, 0, t1, 256, &n1) == 0);
    EXPECT(cinfer_tokenize(m, p2, strlen(p2), 1, 0, t2, 256, &n2) == 0);
    while (lcp < n1 && lcp < n2 && t1[lcp] == t2[lcp]) lcp++;
    EXPECT_MSG(lcp > 8 && r2.n_reused >= (int)lcp, "reused %d, common token prefix %zu", r2.n_reused, lcp);
    EXPECT_EQ_I(r3.n_reused, 0);
    /* the warm session's logits after the suffix equal the cold ones exactly
     * (same batch split is not guaranteed, so compare with a tight bound) */
    int32_t ids[256];
    size_t n;
    EXPECT(cinfer_tokenize(m, p2, strlen(p2), 1, 0, ids, 256, &n) == 0);
    EXPECT(cinfer_eval(warm, ids, n, err, sizeof err) == 0);
    EXPECT(cinfer_eval(cold, ids, n, err, sizeof err) == 0);
    const float *a = cinfer_logits(warm), *b = cinfer_logits(cold);
    double maxd = 0;
    for (int i = 0; i < cinfer_model_n_vocab(m); i++) maxd = fmax(maxd, fabs(a[i] - b[i]));
    EXPECT_MSG(maxd < 1e-5, "max abs diff %.3g", maxd);
    printf("    prefix reuse: %d of %d prompt tokens reused, prompt %.2f ms warm vs %.2f ms cold\n",
           r2.n_reused, r2.n_prompt, r2.prompt_ms, r3.prompt_ms);
    cinfer_session_free(warm);
    cinfer_session_free(cold);
    cinfer_model_close(m);
}

TEST(api, session_save_and_load) {
    cinfer_model *m = open_model(STORIES);
    if (!m) SKIP("%s absent", shared_root());
    char err[512], path[512];
    snprintf(path, sizeof path, "%s/sess.bin", test_tmpdir());
    cinfer_session *a, *b;
    EXPECT(cinfer_session_new(m, NULL, &a, err, sizeof err) == 0);
    EXPECT(cinfer_session_new(m, NULL, &b, err, sizeof err) == 0);
    cinfer_gen_options o = {.max_tokens = 10};
    EXPECT(cinfer_generate(a, "Once upon a time", &o, NULL, NULL, NULL, err, sizeof err) == 0);
    EXPECT(cinfer_session_save(a, path, err, sizeof err) == 0);
    EXPECT(cinfer_session_load(b, path, err, sizeof err) == 0);
    EXPECT_EQ_I(cinfer_session_n_past(b), cinfer_session_n_past(a));
    /* continuing both gives the same text */
    collect ca = {0}, cb = {0};
    EXPECT(cinfer_generate_tokens(a, cinfer_session_tokens(a), (size_t)cinfer_session_n_past(a), &o,
                                  on_piece, &ca, NULL, err, sizeof err) == 0);
    EXPECT(cinfer_generate_tokens(b, cinfer_session_tokens(b), (size_t)cinfer_session_n_past(b), &o,
                                  on_piece, &cb, NULL, err, sizeof err) == 0);
    EXPECT_STR_EQ(cb.text, ca.text);
    /* a corrupt file is refused, the session stays usable */
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_SET);
    fputc('X', f);
    fclose(f);
    EXPECT(cinfer_session_load(b, path, err, sizeof err) == CINFER_EFORMAT);
    char trunc[600];
    snprintf(trunc, sizeof trunc, "%s/short.bin", test_tmpdir());
    EXPECT(cinfer_session_save(a, trunc, err, sizeof err) == 0);
    f = fopen(trunc, "r+b");
    EXPECT(f && ftruncate(fileno(f), 100) == 0);
    fclose(f);
    EXPECT(cinfer_session_load(b, trunc, err, sizeof err) == CINFER_EFORMAT);
    EXPECT_EQ_I(cinfer_session_n_past(b), 0);
    /* a symlink planted at the temporary name is replaced, never followed; one at the path is refused */
    char victim[600], planted[700], lnk[600];
    snprintf(victim, sizeof victim, "%s/victim.txt", test_tmpdir());
    snprintf(lnk, sizeof lnk, "%s/sv.ses", test_tmpdir());
    snprintf(planted, sizeof planted, "%s.tmp", lnk);
    f = fopen(victim, "w");
    fputs("precious", f);
    fclose(f);
    unlink(planted);
    EXPECT(symlink(victim, planted) == 0);
    EXPECT(cinfer_session_save(a, lnk, err, sizeof err) == 0);
    char buf[16] = "";
    f = fopen(victim, "r");
    EXPECT(f && fread(buf, 1, sizeof buf - 1, f) == 8);
    if (f) fclose(f);
    EXPECT_STR_EQ(buf, "precious");
    EXPECT(cinfer_session_load(b, lnk, err, sizeof err) == 0);
    unlink(lnk);
    EXPECT(symlink(victim, lnk) == 0);
    EXPECT(cinfer_session_save(a, lnk, err, sizeof err) == CINFER_EIO);
    EXPECT_MSG(strstr(err, "symbolic link"), "%s", err);
    cinfer_session_free(a);
    cinfer_session_free(b);
    cinfer_model_close(m);
}

TEST(api, context_full_is_clean) {
    cinfer_model *m = open_model(STORIES);
    if (!m) SKIP("%s absent", shared_root());
    char err[512];
    cinfer_session *s;
    cinfer_session_options so = {.n_ctx = 16};
    EXPECT(cinfer_session_new(m, &so, &s, err, sizeof err) == 0);
    cinfer_gen_result r;
    EXPECT(cinfer_generate(s, "Once upon a time", NULL, NULL, NULL, &r, err, sizeof err) == 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_CTX_FULL);
    EXPECT_EQ_I(cinfer_session_n_past(s), 16);
    const char *long_prompt = "Once upon a time there was a little girl named Lily who loved the park";
    EXPECT(cinfer_generate(s, long_prompt, NULL, NULL, NULL, &r, err, sizeof err) == CINFER_ECTX);
    EXPECT_MSG(strstr(err, "context"), "%s", err);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

TEST(api, bad_input_errors) {
    char err[512];
    cinfer_model *m = NULL;
    EXPECT(cinfer_model_open("/nonexistent.gguf", NULL, &m, err, sizeof err) == CINFER_EIO);
    EXPECT(m == NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/junk.gguf", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("GGUF junk", f);
    fclose(f);
    EXPECT(cinfer_model_open(path, NULL, &m, err, sizeof err) == CINFER_EFORMAT);
    cinfer_model_close(NULL);
    cinfer_session_free(NULL);
    const char *arch = shared_path("models/arch/mamba.gguf");
    if (arch) { /* an architecture no archspec has */
        char rwkv[600];
        snprintf(rwkv, sizeof rwkv, "%s/api-rwkv7.gguf", test_tmpdir());
        const char *k[] = {"general.architecture"}, *v[] = {"rwkv7"};
        EXPECT(gguf_edit_copy(arch, rwkv, NULL, k, v, 1) == 0);
        EXPECT(cinfer_model_open(rwkv, NULL, &m, err, sizeof err) == CINFER_EUNSUPPORTED);
        EXPECT_MSG(strstr(err, "rwkv7"), "%s", err);
    }
}

/* Two models, two threads, at once: same text as one after another. */
typedef struct {
    const char *path;
    char text[4096];
    int rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    char err[512];
    cinfer_model *m;
    cinfer_session *s;
    j->rc = cinfer_model_open(j->path, NULL, &m, err, sizeof err);
    if (j->rc) return NULL;
    cinfer_session_options so = {.n_threads = 1};
    j->rc = cinfer_session_new(m, &so, &s, err, sizeof err);
    if (!j->rc) {
        collect c = {0};
        cinfer_gen_options o = {.max_tokens = 48, .temperature = 0.8f, .top_k = 40, .top_p = 1, .seed = 7};
        j->rc = cinfer_generate(s, "Once upon a time", &o, on_piece, &c, NULL, err, sizeof err);
        memcpy(j->text, c.text, sizeof j->text);
        cinfer_session_free(s);
    }
    cinfer_model_close(m);
    return NULL;
}

TEST(api, two_models_two_threads) {
    const char *p1 = shared_path(STORIES);
    const char *p2 = shared_path(TINY);
    if (!p1 || !p2) SKIP("%s absent", shared_root());
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s", p1);
    snprintf(b, sizeof b, "%s", p2);
    job seq[2] = {{.path = a}, {.path = b}}, par[2] = {{.path = a}, {.path = b}};
    run_job(&seq[0]);
    run_job(&seq[1]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run_job, &par[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ_I(par[i].rc, 0);
        EXPECT_STR_EQ(par[i].text, seq[i].text);
    }
    EXPECT(strlen(seq[0].text) > 20 && strcmp(seq[0].text, seq[1].text) != 0);
}

/* The embedding example prints what `cinfer run` prints for the same seed. */
TEST(api, embed_example_matches_cinfer_run) {
    NEED_SHARED(m, STORIES);
    const char *build = getenv("CINFER_BUILD");
    char cmd[2048], *a = NULL, *b = NULL;
    snprintf(cmd, sizeof cmd, "%s/examples/embed %s 'Once upon a time' 50 42", build ? build : "build", m);
    EXPECT_EQ_I(run_cmd(cmd, false, &a), 0);
    snprintf(cmd, sizeof cmd, "%s run %s -p 'Once upon a time' -n 50 --seed 42 --temp 0.8 --top-k 40 "
             "--top-p 0.95 --min-p 0.05", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, false, &b), 0);
    EXPECT_STR_EQ(a, b);
    EXPECT(a && strlen(a) > 60);
    free(a);
    free(b);
}

/* make install + pkg-config, as a user of the library would build. */
TEST(api, installed_library_with_pkg_config) {
    NEED_SHARED(m, STORIES);
    const char *build = getenv("CINFER_BUILD");
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "make -s install BUILD=%s PREFIX=%s/prefix >/dev/null && "
             "PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig cc -O2 examples/embed/main.c "
             "$(PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig pkg-config --cflags --libs cinfer) -o %s/embed-pc && "
             "%s/embed-pc %s 'Once upon a time' 20 1",
             build ? build : "build", test_tmpdir(), test_tmpdir(), test_tmpdir(), test_tmpdir(),
             test_tmpdir(), m);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0 && out && strncmp(out, "Once upon a time", 16) == 0, "%s", out ? out : "");
    free(out);
}

/* ---- sampling options: edge values, the penalty's scope ------------------------------ */

/* logit processor: EOS 10, token 100 5, everything else -inf */
static void eos_first(float *l, int n_vocab, const int32_t *h, int n_h, void *user) {
    (void)h, (void)n_h;
    const int32_t eos = *(const int32_t *)user;
    for (int i = 0; i < n_vocab; i++) l[i] = -INFINITY;
    l[eos] = 10.0f;
    l[100] = 5.0f;
}

TEST(api, sampling_edges_and_penalty_scope) {
    cinfer_model *m = open_model(STORIES);
    if (!m) SKIP("../shared absent");
    cinfer_session *s;
    char err[512];
    EXPECT(cinfer_session_new(m, NULL, &s, err, sizeof err) == 0);
    /* top_p 0 is greedy at any temperature and seed; top_k -1 is no limit */
    collect greedy = {0};
    cinfer_gen_options g = {.max_tokens = 12};
    EXPECT_EQ_I(cinfer_generate(s, "Once upon a time", &g, on_piece, &greedy, NULL, err, sizeof err), 0);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        collect c = {0};
        cinfer_gen_options o = {.max_tokens = 12, .temperature = 1.5f, .top_k = -1, .top_p = 0, .seed = seed};
        EXPECT_EQ_I(cinfer_generate(s, "Once upon a time", &o, on_piece, &c, NULL, err, sizeof err), 0);
        EXPECT_STR_EQ(c.text, greedy.text);
    }
    /* any finite temperature is accepted; non-finite ones and top_p < 0 are refused by name */
    cinfer_gen_options hot = {.max_tokens = 4, .temperature = 1e6f, .top_k = -1, .top_p = 1, .seed = 5};
    EXPECT_EQ_I(cinfer_generate(s, "Once upon a time", &hot, NULL, NULL, NULL, err, sizeof err), 0);
    hot.temperature = NAN;
    EXPECT_EQ_I(cinfer_generate(s, "Once upon a time", &hot, NULL, NULL, NULL, err, sizeof err), CINFER_EARG);
    EXPECT_MSG(strstr(err, "temperature"), "error: %s", err);
    hot.temperature = 1, hot.top_p = -0.5f;
    EXPECT_EQ_I(cinfer_generate(s, "Once upon a time", &hot, NULL, NULL, NULL, err, sizeof err), CINFER_EARG);
    EXPECT_MSG(strstr(err, "top_p"), "error: %s", err);
    /* the repetition penalty leaves EOS (in the history) alone unless repeat_penalty_all */
    int32_t eos = cinfer_token_eos(m);
    const int32_t ids[] = {cinfer_token_bos(m), 300, eos, 301, eos, 302};
    cinfer_gen_result r;
    cinfer_gen_options pen = {.max_tokens = 3, .repeat_penalty = 4.0f, .repeat_last_n = -1,
                              .logit_fn = eos_first, .logit_user = &eos};
    EXPECT_EQ_I(cinfer_generate_tokens(s, ids, 6, &pen, NULL, NULL, &r, err, sizeof err), 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_EOS); /* 10 unpenalized beats 5 */
    EXPECT_EQ_I(r.n_generated, 1);
    pen.repeat_penalty_all = 1; /* 10 / 4 = 2.5 < 5: token 100; then 5 / 4 < 2.5: EOS */
    EXPECT_EQ_I(cinfer_generate_tokens(s, ids, 6, &pen, NULL, NULL, &r, err, sizeof err), 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_EOS);
    EXPECT_EQ_I(r.n_generated, 2);
    cinfer_session_free(s);
    cinfer_model_close(m);
}
