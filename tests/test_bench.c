/*
 * test_bench.c — `cinfer bench` output and arguments (never its speed: make
 * test has no timed assertions; `make bench` measures).
 */
#include <cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "test.h"

#define STORIES "models/stories260K/stories260K.gguf"

static const char *const llama_bench_fields[] = {
    "model_filename", "model_type", "model_size", "model_n_params", "n_prompt", "n_gen",
    "n_threads", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns",
    "samples_ts", "cpu_info", "backends", "load_ms", "compile_ms", "peak_rss_bytes",
    "decode_bytes_per_token",
};

/* The JSON of `bench -p 16 -n 4 -r 1`: one object for pp16, one for tg4. */
static void check_json(const char *txt) {
    cJSON *j = cJSON_Parse(txt);
    EXPECT_MSG(j && cJSON_IsArray(j), "not a JSON array: %.300s", txt);
    if (!j) return;
    EXPECT_EQ_I(cJSON_GetArraySize(j), 2);
    for (int k = 0; k < cJSON_GetArraySize(j); k++) {
        cJSON *o = cJSON_GetArrayItem(j, k);
        for (size_t f = 0; f < sizeof llama_bench_fields / sizeof llama_bench_fields[0]; f++)
            EXPECT_MSG(cJSON_GetObjectItem(o, llama_bench_fields[f]), "object %d lacks \"%s\"", k,
                       llama_bench_fields[f]);
        cJSON *np = cJSON_GetObjectItem(o, "n_prompt"), *ng = cJSON_GetObjectItem(o, "n_gen");
        EXPECT_EQ_I(np ? np->valueint : -1, k == 0 ? 16 : 0);
        EXPECT_EQ_I(ng ? ng->valueint : -1, k == 0 ? 0 : 4);
        cJSON *ts = cJSON_GetObjectItem(o, "avg_ts"), *sam = cJSON_GetObjectItem(o, "samples_ts");
        EXPECT(ts && ts->valuedouble > 0);
        EXPECT_EQ_I(cJSON_GetArraySize(sam), 1);
        cJSON *sd = cJSON_GetObjectItem(o, "stddev_ts");
        EXPECT(sd && sd->valuedouble == 0); /* one repetition */
        cJSON *size = cJSON_GetObjectItem(o, "model_size"), *par = cJSON_GetObjectItem(o, "model_n_params");
        /* stories260K: 260K F32 parameters */
        EXPECT(par && par->valuedouble > 2e5 && par->valuedouble < 3e5);
        EXPECT(size && par && size->valuedouble == 4 * par->valuedouble);
        cJSON *th = cJSON_GetObjectItem(o, "n_threads"), *rss = cJSON_GetObjectItem(o, "peak_rss_bytes");
        EXPECT(th && th->valueint == 1);
        EXPECT(rss && rss->valuedouble > 0);
        /* what auto resolved to: stories260K's 36 matmul weights stay F32 */
        cJSON *wt = cJSON_GetObjectItem(o, "weight_types");
        EXPECT_MSG(wt && cJSON_IsString(wt) && !strcmp(wt->valuestring, "F32 x36"), "weight_types %s",
                   wt && cJSON_IsString(wt) ? wt->valuestring : "(absent)");
        cJSON *fn = cJSON_GetObjectItem(o, "model_filename");
        EXPECT(fn && cJSON_IsString(fn) && strstr(fn->valuestring, "stories260K.gguf"));
    }
    cJSON_Delete(j);
}

/* The binary, as a user runs it. */
TEST(bench, json_from_binary) {
    NEED_SHARED(model, STORIES);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -p 16 -n 4 -r 1 -t 1 --json", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    if (out) check_json(out);
    free(out);
}

/* In-process under the sanitizers, stdout captured in a file. */
TEST(bench, json_in_process) {
    NEED_SHARED(model, STORIES);
    char m[1024];
    snprintf(m, sizeof m, "%s", model);
    char *argv[] = {"bench", m, "-p", "16", "-n", "4", "-r", "1", "-t", "1", "-o", "json", NULL};
    char *txt = NULL;
    int rc = run_captured(cli_bench, 12, argv, &txt);
    EXPECT_EQ_I(rc, 0);
    EXPECT(txt != NULL);
    if (txt) check_json(txt);
    free(txt);
}

TEST(bench, table_and_bound) {
    NEED_SHARED(model, STORIES);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -p 8 -n 2 -r 2 -t 1 --bw 10", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "| model file") && strstr(out, "pp8") && strstr(out, "tg2") &&
                   strstr(out, "cpu/") && strstr(out, "peak RSS") && strstr(out, "of the memory-bandwidth bound"),
               "output: %s", out ? out : "");
    free(out);
}

/* --quant int8 repacks what it can: the types are named, most bytes first. */
TEST(bench, weight_types_after_repack) {
    NEED_SHARED(model, STORIES);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -p 8 -n 0 -r 1 -t 1 --quant int8", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "precision int8: ") && strstr(out, "Q8_0_R8 x21"), "output: %s", out ? out : "");
    free(out);
}

TEST(bench, bad_arguments) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench x.gguf -p 0 -n 0", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "nothing to measure"), "output: %s", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench x.gguf -r 0", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench /nonexistent.gguf -p 4 -n 0", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "nonexistent"), "output: %s", out ? out : "");
    free(out);
}

/* -d: each test on top of D cached tokens.  -p 8 -n 4 -d 0,16: pp8, tg4,
 * pp8 @ d16, tg4 @ d16, all in one session of 16 + max(8, 4) positions (an
 * evaluation past it would fail with "do not fit the context"). */
TEST(bench, depth_json) {
    NEED_SHARED(model, STORIES);
    char m[1024];
    snprintf(m, sizeof m, "%s", model);
    char *argv[] = {"bench", m, "-p", "8", "-n", "4", "-d", "0,16", "-r", "2", "-t", "1", "--json", NULL};
    char *txt = NULL;
    int rc = run_captured(cli_bench, 13, argv, &txt);
    EXPECT_EQ_I(rc, 0);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    EXPECT_MSG(j && cJSON_IsArray(j) && cJSON_GetArraySize(j) == 4, "output: %.400s", txt ? txt : "");
    static const int want_p[] = {8, 0, 8, 0}, want_n[] = {0, 4, 0, 4}, want_d[] = {0, 0, 16, 16};
    for (int k = 0; j && k < 4 && k < cJSON_GetArraySize(j); k++) {
        cJSON *o = cJSON_GetArrayItem(j, k);
        cJSON *np = cJSON_GetObjectItem(o, "n_prompt"), *ng = cJSON_GetObjectItem(o, "n_gen"),
              *nd = cJSON_GetObjectItem(o, "n_depth"), *nc = cJSON_GetObjectItem(o, "n_ctx"),
              *ts = cJSON_GetObjectItem(o, "avg_ts"), *bf = cJSON_GetObjectItem(o, "bound_fraction");
        EXPECT_EQ_I(np ? np->valueint : -1, want_p[k]);
        EXPECT_EQ_I(ng ? ng->valueint : -1, want_n[k]);
        EXPECT_EQ_I(nd ? nd->valueint : -1, want_d[k]);
        EXPECT_EQ_I(nc ? nc->valueint : -1, 16 + 8);
        EXPECT(ts && ts->valuedouble > 0);
        EXPECT(bf == NULL); /* no --bw */
        EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItem(o, "samples_ns")), 2);
    }
    cJSON_Delete(j);
    free(txt);
}

/* The table names the depth tests like llama-bench ("pp8 @ d2040"); a depth
 * that with the test does not fit the file's context_length (2048) is refused
 * before the model loads, naming both numbers. */
TEST(bench, depth_table_and_context) {
    NEED_SHARED(model, STORIES);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -p 8 -n 2 -d 2040 -r 1 -t 1 --bw 10", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "pp8 @ d2040") && strstr(out, "tg2 @ d2040") &&
                   !strstr(out, "of the memory-bandwidth bound"), /* the bound is for depth 0 */
               "output: %s", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -p 8 -n 2 -d 0,2041 -r 1 -t 1", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "-d 2041 + -p 8 = 2049 positions exceed the model's context of 2048"),
               "output: %s", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench %s -d 4,x", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "-d: 'x' is not an integer"), "output: %s", out ? out : "");
    free(out);
}
