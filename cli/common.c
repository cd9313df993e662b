/*
 * common.c — helpers shared by the `cinfer` subcommands (declared in cli.h):
 * resolving a cached REPO[:FILE] model name and the sampling seed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"
#include "formats/modelfile.h"
#include "hub/pull.h"

int cli_resolve_model(const char *cmd, const char **model, char *buf, size_t cap, int need_gguf) {
    char err[1024];
    if (*model && pull_is_spec(*model)) {
        if (pull_resolve_cached(*model, buf, cap, err, sizeof err)) {
            fprintf(stderr, "cinfer %s: %s\n", cmd, err);
            return -1;
        }
        *model = buf;
    }
    if (!need_gguf || !*model) return 0;
    /* unreadable or unrecognised files are left to the GGUF loader's message */
    switch (modelfile_detect(*model, err, sizeof err)) {
    case MODEL_FORMAT_SAFETENSORS:
        fprintf(stderr, "cinfer %s: %s is a safetensors file; %s needs a GGUF file: convert the Hugging "
                "Face model directory with llama.cpp's convert_hf_to_gguf.py (DIR --outfile model.gguf), "
                "or pull a GGUF build of the model (cinfer pull REPO)\n", cmd, *model, cmd);
        return -1;
    case MODEL_FORMAT_PICKLE:
        fprintf(stderr, "cinfer %s: %s\n", cmd, err);
        return -1;
    default: return 0;
    }
}

uint64_t cli_random_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
    }
    return s;
}

int cli_parse_seed(const char *s, uint64_t *seed, int *is_random) {
    if (!s || !*s) return -1;
    if (!strcmp(s, "-1")) {
        *seed = cli_random_seed();
        *is_random = 1;
        return 0;
    }
    if (*s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return -1;
    *seed = v;
    *is_random = 0;
    return 0;
}

int cli_parse_precision(const char *prog, const char *v) {
    int p = v ? cinfer_precision_from_name(v) : -1;
    if (p >= 0) return p;
    fprintf(stderr, "%s: --quant '%s': expected", prog, v ? v : "");
    for (int i = 0; i < CINFER_PRECISION_COUNT; i++)
        fprintf(stderr, "%s%s", i ? (i == CINFER_PRECISION_COUNT - 1 ? " or " : ", ") : " ",
                cinfer_precision_name(i));
    fputc('\n', stderr);
    return -1;
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

uint64_t cli_peak_rss_bytes(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024;
}
