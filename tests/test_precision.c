/*
 * test_precision.c — compute precisions (--quant) and .giw files.
 *
 * Accuracy: every precision on real models from ../shared/models, logits at
 * the last prompt position of the three reference prompts compared with
 * ../shared/reference/dequant-f32/<stem>.json (llama.cpp on the exact F32
 * dequantization; for F32 models the plain reference): cosine, and on every
 * prompt the argmax (cinfer's pick is the reference's top or within 0.1 of
 * it, 1e-3 for f32) and the rank of the reference's top (cinfer's first, or
 * for a lossy precision second).  The bounds are the worst measured values
 * with a margin (docs/precisions.md has the measurements); f32 must be exact
 * to float rounding like the parity tests.
 *
 * .giw: a saved file maps without repacking (repack stats 0) and gives
 * bit-identical logits to the in-memory precision; damaged files fail with a
 * message; an interrupted write never leaves a file under the final name.
 */
#include <cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cinfer.h"
#include "compiler/compile.h"
#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "kernels/kern.h"
#include "test.h"

static int open_prec(const char *path, int precision, cinfer_model **m, cinfer_session **s) {
    char err[1024];
    *m = NULL;
    *s = NULL;
    cinfer_model_options mo = {.precision = precision};
    if (cinfer_model_open(path, &mo, m, err, sizeof err) ||
        cinfer_session_new(*m, &(cinfer_session_options){.n_ctx = 512, .n_threads = 1}, s, err,
                           sizeof err)) {
        test_fail(__FILE__, __LINE__, "open %s as %s: %s", path, cinfer_precision_name(precision),
                  err);
        cinfer_model_close(*m);
        *m = NULL;
        return -1;
    }
    return 0;
}

/* Worst cosine and argmax agreement of `precision` on model vs ref over the
 * reference prompts; fails the test below the bounds. */
static void check_precision(const char *model_rel, const char *ref_rel, int precision,
                            double min_cos) {
    const char *mp = shared_path(model_rel);
    if (!mp) SKIP("%s/%s absent", shared_root(), model_rel);
    char model[1024];
    snprintf(model, sizeof model, "%s", mp);
    const char *ref = shared_path(ref_rel);
    if (!ref) SKIP("%s/%s absent", shared_root(), ref_rel);
    cJSON *j = read_json(ref);
    EXPECT_MSG(j, "cannot parse %s", ref);
    if (!j) return;
    cinfer_model *m;
    cinfer_session *s;
    if (open_prec(model, precision, &m, &s)) {
        cJSON_Delete(j);
        return;
    }
    EXPECT_EQ_I(cinfer_model_precision(m), precision);
    int n_vocab = cinfer_model_n_vocab(m), pi = 0, agree = 0;
    double worst = 1;
    cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(j, "prompts")) {
        cJSON *pids = cJSON_GetObjectItem(pr, "prompt_ids");
        cJSON *lref = cJSON_GetObjectItem(pr, "logits_last");
        int n = cJSON_GetArraySize(pids);
        int32_t ids[600];
        for (int i = 0; i < n && i < 600; i++) ids[i] = cJSON_GetArrayItem(pids, i)->valueint;
        char err[512];
        if (cinfer_eval(s, ids, (size_t)n, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
            break;
        }
        const float *lg = cinfer_logits(s);
        double dot = 0, na = 0, nb = 0, best_r = -INFINITY, second_r = -INFINITY;
        int ref_top = 0;
        for (int i = 0; i < n_vocab && i < cJSON_GetArraySize(lref); i++) {
            double r = cJSON_GetArrayItem(lref, i)->valuedouble, x = lg[i];
            dot += r * x;
            na += x * x;
            nb += r * r;
            if (r > best_r) second_r = best_r, best_r = r, ref_top = i;
            else if (r > second_r) second_r = r;
        }
        double cosv = dot / (sqrt(na) * sqrt(nb) + 1e-30);
        if (cosv < worst) worst = cosv;
        int top = argmax_f32(lg, n_vocab), rank = 0; /* rank: of the reference's top token in cinfer's logits */
        for (int i = 0; i < n_vocab; i++) rank += lg[i] > lg[ref_top];
        agree += top == ref_top;
        const cJSON *top_ref = cJSON_GetArrayItem(lref, top);
        const double gap = best_r - (top_ref ? top_ref->valuedouble : INFINITY); /* reference: its top - cinfer's pick */
        EXPECT_MSG(cosv >= min_cos, "%s %s prompt %d: cosine %.6f < bound %.6f", model_rel,
                   cinfer_precision_name(precision), pi, cosv, min_cos);
        /* Every model, every prompt: cinfer's pick is the reference's top or
         * within `tie` of it (a lossy precision may swap a near pair, never
         * a clear winner), and the reference's top is cinfer's first or (lossy)
         * second.  Measured worst: gap 0.045 (stories260K prompt 3, whose top
         * two are 0.045 apart), rank 1; docs/precisions.md. */
        const bool exact = precision == CINFER_PRECISION_F32;
        const double tie = exact ? 1e-3 : 0.1;
        EXPECT_MSG(top == ref_top || gap < tie,
                   "%s %s prompt %d: argmax %d, reference %d: the reference ranks it %.3g below its top (tie %g)",
                   model_rel, cinfer_precision_name(precision), pi, top, ref_top, gap, tie);
        EXPECT_MSG(rank <= (exact ? 0 : 1) || (exact && gap < tie),
                   "%s %s prompt %d: the reference's top token %d is cinfer's number %d", model_rel,
                   cinfer_precision_name(precision), pi, ref_top, rank + 1);
        pi++;
    }
    printf("    %-44s %-8s worst cosine %.6f, argmax %d/%d\n", model_rel,
           cinfer_precision_name(precision), worst, agree, pi);
    cinfer_session_free(s);
    cinfer_model_close(m);
    cJSON_Delete(j);
}

/* Bounds per precision: the worst cosine measured over the models below
 * (docs/precisions.md) with margin. */
static const double min_cos[CINFER_PRECISION_COUNT] = {
    [CINFER_PRECISION_AUTO] = 0.999,    [CINFER_PRECISION_NATIVE] = 0.999,
    [CINFER_PRECISION_F32] = 0.99999,
    [CINFER_PRECISION_INT8] = 0.9995,   [CINFER_PRECISION_INT8INT8] = 0.999,
    [CINFER_PRECISION_INT4] = 0.97,     [CINFER_PRECISION_INT4MIX] = 0.985,
};

static void check_all(const char *model_rel, const char *ref_rel) {
    for (int p = 0; p < CINFER_PRECISION_COUNT; p++) /* native: the parity suite */
        if (p != CINFER_PRECISION_NATIVE) check_precision(model_rel, ref_rel, p, min_cos[p]);
}

TEST(precision, stories260K) {
    check_all("models/stories260K/stories260K.gguf", "reference/stories260K.json");
}
TEST(precision, tinystories_q8_0) {
    check_all("models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf",
              "reference/dequant-f32/TinyStories-656K-Q8_0.json");
}
TEST(precision, synth_q4_0) {
    check_all("models/synthetic/synth-d256-Q4_0.gguf", "reference/dequant-f32/synth-d256-Q4_0.json");
}
TEST(precision, synth_q4_k_m) {
    check_all("models/synthetic/synth-d256-Q4_K_M.gguf",
              "reference/dequant-f32/synth-d256-Q4_K_M.json");
}
TEST(precision, synth_f16) {
    check_all("models/synthetic/synth-d256-F16.gguf", "reference/dequant-f32/synth-d256-F16.json");
}

TEST(precision, names) {
    for (int p = 0; p < CINFER_PRECISION_COUNT; p++)
        EXPECT_EQ_I(cinfer_precision_from_name(cinfer_precision_name(p)), p);
    EXPECT_EQ_I(cinfer_precision_from_name("int3"), -1);
    EXPECT_EQ_I(cinfer_precision_from_name(""), -1);
    EXPECT(cinfer_precision_name(CINFER_PRECISION_COUNT) == NULL);
    EXPECT(cinfer_precision_name(-1) == NULL);
    EXPECT_STR_EQ(cinfer_precision_name(CINFER_PRECISION_INT4MIX), "int4mix");
}

/* The .giw size table in gguf.c and the kernels' layout agree. */
TEST(precision, r8_sizes_match_gguf_table) {
    const int types[] = {CF_Q4_0_R8, CF_Q8_0_R8};
    for (int k = 0; k < 2; k++)
        for (int rows = 8; rows <= 64; rows += 8)
            for (int cols = 32; cols <= 256; cols += 32)
                EXPECT_EQ_I(kern_repack_bytes(types[k], rows, cols),
                            ggml_row_bytes((uint32_t)types[k], (uint64_t)cols) * (uint64_t)rows);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_0_R8, 12, 64), 0); /* rows not a multiple of 8 */
}

TEST(precision, bad_arguments) {
    NEED_SHARED(mp, "models/stories260K/stories260K.gguf");
    char cmd[2048], *out = NULL;
    const char *sub[] = {"run %s --quant int3 -n 1", "bench %s --quant int3", "compile %s --quant int3",
                         "chat %s --quant int3"};
    for (int i = 0; i < 4; i++) {
        char c2[1200];
        snprintf(c2, sizeof c2, sub[i], mp);
        snprintf(cmd, sizeof cmd, "%s %s </dev/null", cinfer_bin(), c2);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st != 0 && st < 128 && out && strstr(out, "--quant 'int3'") &&
                   strstr(out, "int4mix"), "%s -> %d: %s", cmd, st, out ? out : "");
        free(out);
    }
    /* a standalone executable cannot carry a precision of its own */
    snprintf(cmd, sizeof cmd, "%s compile %s --aot --quant int4 -o %s/prog", cinfer_bin(), mp,
             test_tmpdir());
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 2 && out && strstr(out, "from a .giw"), "%s -> %d: %s", cmd, st, out ? out : "");
    free(out);
    cinfer_model *m = NULL;
    char err[512] = "";
    EXPECT_EQ_I(cinfer_model_open(mp, &(cinfer_model_options){.precision = 17}, &m, err, sizeof err),
                CINFER_EARG);
    EXPECT(strstr(err, "precision 17"));
}

/* Native binds the mapping: nothing repacked. */
TEST(precision, native_is_zero_copy) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    cinfer_model *m;
    cinfer_session *s;
    if (open_prec(mp, CINFER_PRECISION_NATIVE, &m, &s)) return;
    int n = -1;
    size_t bytes = 1;
    cinfer_model_repack_stats(m, &n, &bytes, NULL);
    EXPECT_EQ_I(n, 0);
    EXPECT_EQ_I(bytes, 0);
    cinfer_session_free(s);
    cinfer_model_close(m);
    if (open_prec(mp, CINFER_PRECISION_INT4, &m, &s)) return;
    cinfer_model_repack_stats(m, &n, &bytes, NULL);
    EXPECT_MSG(n > 0 && bytes > 0, "int4 repacked %d tensors, %zu bytes", n, bytes);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

/* The generated code names the precision and its types, so the AOT cache key
 * (a hash of the source plus the precision) differs per precision. */
TEST(precision, generated_code_names_precision) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char err[512];
    gguf_file *g;
    if (gguf_open(mp, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    char *src[CINFER_PRECISION_COUNT] = {0};
    for (int p = 0; p < CINFER_PRECISION_COUNT; p++) {
        size_t len;
        cc_options o = {.precision = p};
        EXPECT_MSG(!cc_generate(g, &o, &src[p], &len, err, sizeof err), "%s", err);
    }
    enum { AUTO = CINFER_PRECISION_AUTO, NAT = CINFER_PRECISION_NATIVE, I8 = CINFER_PRECISION_INT8,
           I8I8 = CINFER_PRECISION_INT8INT8, I4 = CINFER_PRECISION_INT4, I4M = CINFER_PRECISION_INT4MIX };
    if (src[AUTO] && src[NAT] && src[I8] && src[I8I8] && src[I4] && src[I4M]) {
        EXPECT(!strstr(src[NAT], "Compute precision"));
        EXPECT(strstr(src[I4], "Compute precision: int4"));
        EXPECT(strstr(src[I4], "100, /* Q4_0_R8 */"));
        EXPECT(!strstr(src[I4], "101, /* Q8_0_R8 */"));
        EXPECT(strstr(src[I4M], "101, /* Q8_0_R8 */") && strstr(src[I4M], "100, /* Q4_0_R8 */"));
        EXPECT(strstr(src[I8], "101, /* Q8_0_R8 */") && strcmp(src[I8], src[I8I8]));
        /* auto on a Q8_0 file: the lossless Q8_0 -> Q8_0_R8 interleave only */
        EXPECT(strstr(src[AUTO], "Compute precision: auto"));
        EXPECT(strstr(src[AUTO], "101, /* Q8_0_R8 */") && !strstr(src[AUTO], "100, /* Q4_0_R8 */"));
        /* the tied token_embd (get_rows + logits) keeps Q8_0 under the lossy
         * precisions (its embeddings would be rounded too), and is interleaved
         * under auto: every weight of this Q8_0 file is then Q8_0_R8 */
        EXPECT(strstr(src[I4], "8, /* Q8_0 */"));
        EXPECT(!strstr(src[AUTO], "8, /* Q8_0 */"));
    }
    for (int p = 0; p < CINFER_PRECISION_COUNT; p++) free(src[p]);
    gguf_close(g);
}

static int logits_of(const char *path, int precision, float *out, int n_max, int *n_rep) {
    cinfer_model *m;
    cinfer_session *s;
    if (open_prec(path, precision, &m, &s)) return -1;
    cinfer_model_repack_stats(m, n_rep, NULL, NULL);
    const int32_t ids[] = {1, 400, 200, 100, 50, 25};
    char err[512];
    int rc = cinfer_eval(s, ids, 6, err, sizeof err);
    int n = cinfer_model_n_vocab(m) < n_max ? cinfer_model_n_vocab(m) : n_max;
    if (!rc) memcpy(out, cinfer_logits(s), (size_t)n * sizeof *out);
    else test_fail(__FILE__, __LINE__, "%s", err);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return rc ? -1 : n;
}

static int save_giw(const char *model, int precision, const char *out) {
    cinfer_model *m;
    char err[1024];
    if (cinfer_model_open(model, &(cinfer_model_options){.precision = precision}, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return -1;
    }
    int rc = cinfer_model_save_giw(m, out, err, sizeof err);
    if (rc) test_fail(__FILE__, __LINE__, "save %s: %s", out, err);
    cinfer_model_close(m);
    return rc;
}

TEST(precision, giw_roundtrip) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char model[1024], giw[1100];
    snprintf(model, sizeof model, "%s", mp);
    static float a[4096], b[4096];
    const int precs[] = {CINFER_PRECISION_INT4, CINFER_PRECISION_INT4MIX, CINFER_PRECISION_F32};
    for (int k = 0; k < 3; k++) {
        int p = precs[k], rep_a = 0, rep_b = -1;
        snprintf(giw, sizeof giw, "%s/m-%s.giw", test_tmpdir(), cinfer_precision_name(p));
        int n = logits_of(model, p, a, 4096, &rep_a);
        if (n < 0 || save_giw(model, p, giw)) return;
        EXPECT_MSG(rep_a > 0, "%s: nothing repacked", cinfer_precision_name(p));
        /* default options: the precision comes from cinfer.precision */
        EXPECT_EQ_I(logits_of(giw, CINFER_PRECISION_AUTO, b, 4096, &rep_b), n);
        EXPECT_EQ_I(rep_b, 0); /* mapped, not repacked */
        EXPECT_MSG(!memcmp(a, b, (size_t)n * sizeof *a), "%s: .giw logits differ from in-memory",
                   cinfer_precision_name(p));
        cinfer_model *m = NULL;
        char err[512] = "";
        EXPECT_EQ_I(cinfer_model_open(giw, NULL, &m, err, sizeof err), 0);
        if (m) EXPECT_EQ_I(cinfer_model_precision(m), p);
        cinfer_model_close(m);
        m = NULL;
        int other = p == CINFER_PRECISION_INT4 ? CINFER_PRECISION_INT8 : CINFER_PRECISION_INT4;
        EXPECT_EQ_I(cinfer_model_open(giw, &(cinfer_model_options){.precision = other}, &m, err,
                                      sizeof err), CINFER_EARG);
        EXPECT_MSG(strstr(err, "source GGUF"), "%s", err);
        cinfer_model_close(m);
    }
    /* the CLI path: compile -o, run the .giw */
    char cmd[6000], *out = NULL;
    snprintf(giw, sizeof giw, "%s/cli.giw", test_tmpdir());
    snprintf(cmd, sizeof cmd, "(%s compile %s --quant int8 -o %s && %s run %s -p 'Once upon' -n 4 "
             "--temp 0 -t 1 -v) 2>&1", cinfer_bin(), model, giw, cinfer_bin(), giw);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0 && out && strstr(out, "wrote") && strstr(out, ", int8 | peak RSS") &&
               !strstr(out, "int8: repacked"), "%d: %s", st, out ? out : "");
    free(out);
}

/* A copy of file src with bytes [off, off+n) replaced by rep (rep NULL:
 * truncated at off). */
static int write_variant(const char *src, const char *dst, size_t off, const void *rep, size_t n) {
    size_t len;
    char *buf = read_file(src, &len);
    if (!buf) return -1;
    FILE *f = fopen(dst, "wb");
    if (!f) return free(buf), -1;
    if (rep) memcpy(buf + off, rep, n);
    size_t w = rep ? len : off;
    int bad = fwrite(buf, 1, w, f) != w;
    bad |= fclose(f) != 0;
    free(buf);
    return bad ? -1 : 0;
}

TEST(precision, giw_damaged) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char giw[1100], bad[1100], err[1024];
    snprintf(giw, sizeof giw, "%s/d.giw", test_tmpdir());
    snprintf(bad, sizeof bad, "%s/bad.giw", test_tmpdir());
    if (save_giw(mp, CINFER_PRECISION_INT4, giw)) return;
    size_t len;
    char *buf = read_file(giw, &len);
    if (!buf) return test_fail(__FILE__, __LINE__, "cannot read %s", giw);
    /* truncated: header only, mid-table, mid-data */
    size_t cuts[] = {20, len / 100, len / 2, len - 1};
    for (int k = 0; k < 4; k++) {
        EXPECT(!write_variant(giw, bad, cuts[k], NULL, 0));
        cinfer_model *m = NULL;
        err[0] = 0;
        int rc = cinfer_model_open(bad, NULL, &m, err, sizeof err);
        EXPECT_MSG(rc == CINFER_EFORMAT && strlen(err) > 10 && !strchr(err, '\n'),
                   "cut at %zu: rc %d: %s", cuts[k], rc, err);
        cinfer_model_close(m);
    }
    /* without its cinfer.version key the repacked types are refused */
    char *k = memmem(buf, len, "cinfer.version", 14);
    EXPECT(k);
    if (k) {
        EXPECT(!write_variant(giw, bad, (size_t)(k - buf), "cinfer.versioX", 14));
        cinfer_model *m = NULL;
        EXPECT_EQ_I(cinfer_model_open(bad, NULL, &m, err, sizeof err), CINFER_EFORMAT);
        EXPECT_MSG(strstr(err, "valid only in a .giw"), "%s", err);
        cinfer_model_close(m);
    }
    /* an unknown precision name */
    char *p = memmem(buf, len, "int4", 4);
    if (p) {
        EXPECT(!write_variant(giw, bad, (size_t)(p - buf), "int9", 4));
        cinfer_model *m = NULL;
        EXPECT_EQ_I(cinfer_model_open(bad, NULL, &m, err, sizeof err), CINFER_EFORMAT);
        EXPECT_MSG(strstr(err, "cinfer.precision 'int9'"), "%s", err);
        cinfer_model_close(m);
    }
    free(buf);
}

/* A write killed part-way (file size limit: SIGXFSZ) leaves nothing under the
 * final name; one that fails (SIGXFSZ ignored: EFBIG) reports it and removes
 * its temporary file. */
TEST(precision, giw_interrupted_write) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char giw[1100], model[1024];
    snprintf(model, sizeof model, "%s", mp);
    for (int ignore = 0; ignore < 2; ignore++) {
        snprintf(giw, sizeof giw, "%s/cut%d.giw", test_tmpdir(), ignore);
        cinfer_model *m;
        char err[1024];
        if (cinfer_model_open(model, &(cinfer_model_options){.precision = CINFER_PRECISION_INT8},
                              &m, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s", err);
            return;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit rl = {64 << 10, 64 << 10};
            setrlimit(RLIMIT_FSIZE, &rl);
            signal(SIGXFSZ, ignore ? SIG_IGN : SIG_DFL);
            int rc = cinfer_model_save_giw(m, giw, err, sizeof err);
            _exit(rc == CINFER_EIO && strstr(err, "write failed") ? 3 : rc == 0 ? 4 : 5);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        cinfer_model_close(m);
        if (ignore) EXPECT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
        else EXPECT_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGXFSZ, "status %#x", st);
        struct stat sb;
        EXPECT_MSG(stat(giw, &sb) != 0, "%s exists after an interrupted write", giw);
        if (ignore) {
            char tmp[1200];
            snprintf(tmp, sizeof tmp, "%s.tmp.%d", giw, (int)pid);
            EXPECT_MSG(stat(tmp, &sb) != 0, "%s left behind", tmp);
        }
    }
}

/* ---- output-path safety and .giw consistency --------------------------------- */

static int copy_file(const char *src, const char *dst) {
    size_t len;
    char *buf = read_file(src, &len);
    if (!buf) return -1;
    FILE *f = fopen(dst, "wb");
    int bad = !f || fwrite(buf, 1, len, f) != len;
    if (f) bad |= fclose(f) != 0;
    free(buf);
    return bad ? -1 : 0;
}

static bool same_bytes(const char *a, const char *b) {
    size_t la, lb;
    char *x = read_file(a, &la), *y = read_file(b, &lb);
    bool eq = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return eq;
}

/* Save model (opened as precision) to out; the rc and message. */
static int try_save(const char *model, int precision, const char *out, char *err, size_t err_len) {
    cinfer_model *m;
    if (cinfer_model_open(model, &(cinfer_model_options){.precision = precision}, &m, err, err_len)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return -100;
    }
    int rc = cinfer_model_save_giw(m, out, err, err_len);
    cinfer_model_close(m);
    return rc;
}

/* A pid that was just alive and is now dead (a reaped child). */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* The writer never replaces what is not a plain output file: the input
 * itself (also through a hard link), a FIFO, a symlink (nor its target), a
 * directory; a symlink planted under the temporary name is not followed;
 * stale OUT.tmp.<dead pid> files are removed, a live writer's are kept. */
TEST(precision, giw_output_path_refusals) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    const char *d = test_tmpdir();
    char in[1100], hard[1100], fifo[1100], link_[1100], target[1100], dir[1100], err[1024], cmd[6000];
    snprintf(in, sizeof in, "%s/gp-src.gguf", d);
    snprintf(hard, sizeof hard, "%s/gp-hard.gguf", d);
    snprintf(fifo, sizeof fifo, "%s/gp-fifo.giw", d);
    snprintf(link_, sizeof link_, "%s/gp-link.giw", d);
    snprintf(target, sizeof target, "%s/gp-target.bin", d);
    snprintf(dir, sizeof dir, "%s/gp-dir.giw", d);
    if (copy_file(mp, in)) return test_fail(__FILE__, __LINE__, "cannot copy %s", mp);
    EXPECT(!link(in, hard));
    EXPECT(!mkfifo(fifo, 0600));
    FILE *f = fopen(target, "wb");
    if (f) fputs("precious", f), fclose(f);
    EXPECT(!symlink(target, link_));
    EXPECT(!mkdir(dir, 0700));
    const struct {
        const char *out, *msg;
    } cases[] = {
        {in, "is the input file"}, {hard, "is the input file"}, {fifo, "is a FIFO"},
        {link_, "is a symbolic link"}, {dir, "is a directory"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        err[0] = 0;
        int rc = try_save(in, CINFER_PRECISION_INT4, cases[k].out, err, sizeof err);
        EXPECT_MSG(rc == CINFER_EIO && strstr(err, cases[k].out) && strstr(err, cases[k].msg) &&
                   !strchr(err, '\n'), "%s: rc %d: %s", cases[k].out, rc, err);
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", cases[k].out, (int)getpid());
        struct stat sb;
        EXPECT_MSG(lstat(tmp, &sb) != 0, "%s left behind", tmp);
    }
    struct stat sb;
    EXPECT(!lstat(fifo, &sb) && S_ISFIFO(sb.st_mode));
    EXPECT(!lstat(link_, &sb) && S_ISLNK(sb.st_mode));
    EXPECT(!lstat(dir, &sb) && S_ISDIR(sb.st_mode));
    EXPECT(same_bytes(in, mp)); /* the input is intact */
    char *t = read_file(target, NULL);
    EXPECT_MSG(t && !strcmp(t, "precious"), "symlink target changed: %s", t ? t : "(gone)");
    free(t);
    /* the CLI reports it and fails */
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s compile %s --quant int4 -o %s 2>&1", cinfer_bin(), in, in);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st != 0 && out && strstr(out, "is the input file"), "%d: %s", st, out ? out : "");
    free(out);
    EXPECT(same_bytes(in, mp));

    /* a regular file is replaced; stale temporaries of dead writers go, a
     * live writer's (the parent's pid) and non-matching names stay; a symlink
     * planted at this process's temporary name is removed, not followed */
    char ok[1100], stale[1200], live[1200], other[1200], planted[1200];
    snprintf(ok, sizeof ok, "%s/gp-ok.giw", d);
    snprintf(stale, sizeof stale, "%s.tmp.%d", ok, (int)dead_pid());
    snprintf(live, sizeof live, "%s.tmp.%d", ok, (int)getppid());
    snprintf(other, sizeof other, "%s.tmp.x1", ok);
    snprintf(planted, sizeof planted, "%s.tmp.%d", ok, (int)getpid());
    const char *mk[] = {ok, stale, live, other};
    for (int k = 0; k < 4; k++) {
        f = fopen(mk[k], "wb");
        if (f) fputs("old", f), fclose(f);
    }
    EXPECT(!symlink(target, planted));
    EXPECT_EQ_I(try_save(in, CINFER_PRECISION_INT4, ok, err, sizeof err), 0);
    EXPECT_MSG(stat(stale, &sb) != 0, "stale %s not removed", stale);
    EXPECT_MSG(stat(live, &sb) == 0, "live writer's %s removed", live);
    EXPECT_MSG(stat(other, &sb) == 0, "%s removed", other);
    EXPECT_MSG(lstat(planted, &sb) != 0, "%s left behind", planted);
    t = read_file(target, NULL);
    EXPECT_MSG(t && !strcmp(t, "precious"), "planted symlink followed: target now %.20s", t ? t : "(gone)");
    free(t);
    cinfer_model *m = NULL;
    EXPECT_EQ_I(cinfer_model_open(ok, NULL, &m, err, sizeof err), 0);
    if (m) EXPECT_EQ_I(cinfer_model_precision(m), CINFER_PRECISION_INT4);
    cinfer_model_close(m);
}

/* A copy of the GGUF src at dst with metadata keys set[] added or replaced,
 * general.alignment = align, every tensor's type and bytes kept. */
static int rewrite_gguf(const char *src, const char *dst, uint32_t align, const gguf_kv_set *set, size_t n_set) {
    gguf_file *g;
    char e[512];
    if (gguf_open(src, &g, e, sizeof e)) return test_fail(__FILE__, __LINE__, "%s", e), -1;
    gguf_kv_set all[8];
    size_t n = 0;
    all[n++] = (gguf_kv_set){"general.alignment", gguf_val_u32(align)};
    for (size_t k = 0; k < n_set && n < 8; k++) all[n++] = set[k];
    gguf_out o;
    if (gguf_out_open(&o, dst, ".partial", g, e, sizeof e)) {
        gguf_close(g);
        return test_fail(__FILE__, __LINE__, "%s", e), -1;
    }
    uint64_t nt = gguf_n_tensors(g), off = 0;
    gguf_w_header(&o.w, g, nt, NULL, NULL, all, n);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_tensor_info(&o.w, t->name, t->n_dims, t->ne, t->type, off);
        off += gguf_align_up(t->n_bytes, align);
    }
    gguf_w_pad(&o.w, align);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_bytes(&o.w, t->data, (size_t)t->n_bytes);
        gguf_w_pad(&o.w, align);
    }
    int rc = gguf_out_commit(&o, e, sizeof e);
    gguf_out_abort(&o);
    gguf_close(g);
    if (rc) test_fail(__FILE__, __LINE__, "%s", e);
    return rc ? -1 : 0;
}

/* Open path with default options: EFORMAT and a one-line message holding
 * want (and not the misleading "not from a .giw"). */
static void expect_refused(const char *path, const char *want, int line) {
    cinfer_model *m = NULL;
    char err[1024] = "";
    int rc = cinfer_model_open(path, NULL, &m, err, sizeof err);
    if (rc != CINFER_EFORMAT || !strstr(err, want) || strchr(err, '\n') || strstr(err, "not from a .giw"))
        test_fail(__FILE__, line, "%s: rc %d, want '%s': %s", path, rc, want, err);
    cinfer_model_close(m);
}

/* cinfer.version newer than this build, cinfer.precision that contradicts the
 * tensor types, a .giw with alignment below 64: refused with clear messages;
 * the unchanged rewrite (control) opens. */
TEST(precision, giw_inconsistent_refused) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char model[1024], giw[1100], bad[1100];
    snprintf(model, sizeof model, "%s", mp);
    snprintf(giw, sizeof giw, "%s/gi-i.giw", test_tmpdir());
    snprintf(bad, sizeof bad, "%s/gi-bad.giw", test_tmpdir());
    if (save_giw(model, CINFER_PRECISION_INT4, giw)) return;
    /* control: the same file rewritten by this helper opens */
    if (rewrite_gguf(giw, bad, 64, NULL, 0)) return;
    cinfer_model *m = NULL;
    char err[1024] = "";
    EXPECT_MSG(!cinfer_model_open(bad, NULL, &m, err, sizeof err), "control: %s", err);
    cinfer_model_close(m);

    /* a newer major version; a malformed one */
    gguf_kv_set v[] = {{"cinfer.version", gguf_val_str("9.9.9")}};
    if (!rewrite_gguf(giw, bad, 64, v, 1)) expect_refused(bad, "newer than this cinfer " CINFER_VERSION, __LINE__);
    v[0].value = gguf_val_str("banana");
    if (!rewrite_gguf(giw, bad, 64, v, 1)) expect_refused(bad, "cinfer.version 'banana' is not a version", __LINE__);
    /* repacked tensors with a precision that writes none or others */
    const char *precs[] = {"native", "f32", "int8", "int8int8"};
    for (int k = 0; k < 4; k++) {
        gguf_kv_set p[] = {{"cinfer.precision", gguf_val_str(precs[k])}};
        if (!rewrite_gguf(giw, bad, 64, p, 1)) expect_refused(bad, "inconsistent .giw", __LINE__);
    }
    /* no repacked types, but the weights are not what the precision computes
     * with: the Q8_0 source labelled as an f32 / int8 .giw */
    const char *plain[] = {"f32", "int8"};
    for (int k = 0; k < 2; k++) {
        gguf_kv_set p[] = {{"cinfer.version", gguf_val_str(CINFER_VERSION)},
                           {"cinfer.precision", gguf_val_str(plain[k])}};
        if (!rewrite_gguf(model, bad, 64, p, 2)) expect_refused(bad, "inconsistent .giw", __LINE__);
    }
    /* a .giw below 64-byte alignment: refused by the loader */
    if (!rewrite_gguf(giw, bad, 32, NULL, 0)) expect_refused(bad, "needs >= 64", __LINE__);
    if (!rewrite_gguf(giw, bad, 1, NULL, 0)) expect_refused(bad, "needs >= 64", __LINE__);
}

/* A writer killed mid-write (by a signal, like SIGKILL: no cleanup runs; here
 * SIGXFSZ at a file size limit, so it dies part-way for sure) leaves
 * OUT.tmp.<pid>; the next write to OUT removes it. */
TEST(precision, giw_stale_tmp_removed_after_kill) {
    NEED_SHARED(mp, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char model[1024], giw[1100], tmp[1200], err[1024];
    snprintf(model, sizeof model, "%s", mp);
    snprintf(giw, sizeof giw, "%s/gk-k.giw", test_tmpdir());
    cinfer_model *m;
    if (cinfer_model_open(model, &(cinfer_model_options){.precision = CINFER_PRECISION_INT8}, &m, err,
                          sizeof err))
        return test_fail(__FILE__, __LINE__, "%s", err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {64 << 10, 64 << 10};
        setrlimit(RLIMIT_FSIZE, &rl);
        signal(SIGXFSZ, SIG_DFL);
        _exit(cinfer_model_save_giw(m, giw, err, sizeof err) == 0 ? 4 : 5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_MSG(WIFSIGNALED(st), "status %#x", st);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", giw, (int)pid);
    struct stat sb;
    EXPECT_MSG(stat(tmp, &sb) == 0, "%s: the killed writer left no temporary file", tmp);
    int rc = cinfer_model_save_giw(m, giw, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    cinfer_model_close(m);
    EXPECT_MSG(stat(tmp, &sb) != 0, "stale %s not removed by the next write", tmp);
    EXPECT(stat(giw, &sb) == 0);
}
