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
