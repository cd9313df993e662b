/*
 * common.c — helpers shared by the `cinfer` subcommands (declared in cli.h):
 * resolving a cached REPO[:FILE] model name, the sampling seed, warnings for
 * settings that hurt, progress lines for long work, the cache directory.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"

#include "base/readall.h"
#include "formats/modelfile.h"
#include "hub/pull.h"

int cli_resolve_model(const char *cmd, const char **model, char *buf, size_t cap, int kind) {
    char err[1024];
    if (*model && pull_is_spec(*model)) {
        if (pull_resolve_cached(*model, buf, cap, err, sizeof err)) {
            fprintf(stderr, "cinfer %s: %s\n", cmd, err);
            return -1;
        }
        *model = buf;
    }
    if (kind == CLI_MODEL_ANY || !*model) return 0;
    /* unreadable or unrecognised files are left to the loader's message
     * (modelfile_open: GGUF, .giw, a Hugging Face folder or a safetensors
     * file inside one) */
    switch (modelfile_detect(*model, err, sizeof err)) {
    case MODEL_FORMAT_SAFETENSORS:
    case MODEL_FORMAT_HF_FOLDER:
        if (kind != CLI_MODEL_GGUF) return 0;
        fprintf(stderr, "cinfer %s: %s is a safetensors checkpoint; %s reads GGUF files: convert the Hugging "
                "Face folder with llama.cpp's convert_hf_to_gguf.py (DIR --outfile model.gguf), or run the "
                "folder itself with --quant (cinfer run DIR --quant int8)\n", cmd, *model, cmd);
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

int cli_parse_device(const char *prog, const char *v, int *device, int *index) {
    char *end = NULL;
    if (v && !strcmp(v, "cpu")) {
        *device = CINFER_DEVICE_CPU;
        *index = 0;
        return 0;
    }
    if (v && !strncmp(v, "cuda", 4) && (!v[4] || (v[4] == ':' && v[5] >= '0' && v[5] <= '9'))) {
        long n = v[4] ? strtol(v + 5, &end, 10) : 0;
        if (!v[4] || (!*end && n < 1024)) {
            *device = CINFER_DEVICE_CUDA;
            *index = (int)n;
            return 0;
        }
    }
    fprintf(stderr, "%s: --device '%s': expected cpu, cuda or cuda:N\n", prog, v ? v : "");
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

/* ---- warnings ------------------------------------------------------------------- */

int cli_n_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cli_refuse_encoder(const char *prog, const struct cinfer_model *m, const char *model) {
    if (!cinfer_model_is_encoder(m)) return 0;
    fprintf(stderr, "%s: %s is an embedding model (%s, an encoder): it does not generate text; embed with "
            "`cinfer embed %s -p TEXT`, or serve it (`cinfer serve %s`, POST /v1/embeddings)\n", prog, model,
            cinfer_model_arch(m), model, model);
    return 1;
}

void cli_warn_settings(const char *prog, const struct cinfer_model *m, int n_ctx, int n_threads) {
    int n_cpu = cli_n_cpus();
    if (n_threads > n_cpu)
        fprintf(stderr, "%s: warning: -t %d is more threads than the %d CPU%s this process may use; "
                "they will take turns and run slower (use -t %d or less)\n", prog, n_threads, n_cpu,
                n_cpu == 1 ? "" : "s", n_cpu);
    if (!m) return;
    int train = cinfer_model_n_ctx_train(m);
    if (n_ctx > 0 && train > 0 && n_ctx > train)
        fprintf(stderr, "%s: warning: -c %d is above the model's training context (%d tokens); "
                "output past %d tokens is likely to degrade\n", prog, n_ctx, train, train);
    const char *notes = cinfer_model_notes(m);
    while (notes && *notes) {
        const char *nl = strchr(notes, '\n');
        int n = nl ? (int)(nl - notes) : (int)strlen(notes);
        fprintf(stderr, "%s: warning: %.*s\n", prog, n, notes);
        notes += n + (nl != NULL);
    }
}

/* ---- progress ------------------------------------------------------------------- */

void cli_fmt_eta(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 359999) snprintf(buf, cap, "--:--");
    else if (s >= 3600) snprintf(buf, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else snprintf(buf, cap, "%d:%02d", (int)s / 60, (int)s % 60);
}

/* 1234.5 → "1234", 12.34 → "12.3", 0.123 → "0.12": enough digits to move */
static void fmt_amount(double v, char *buf, size_t cap) {
    if (v >= 100) snprintf(buf, cap, "%.0f", v);
    else if (v >= 10) snprintf(buf, cap, "%.1f", v);
    else snprintf(buf, cap, "%.2f", v);
}

void cli_progress_format(char *buf, size_t cap, const char *label, const char *unit, double done,
                         double total, double elapsed_ms) {
    double rate = elapsed_ms > 0 ? done * 1e3 / elapsed_ms : 0;
    char d[32], t[32], r[32], eta[32];
    fmt_amount(done, d, sizeof d);
    fmt_amount(total, t, sizeof t);
    fmt_amount(rate, r, sizeof r);
    if (total > 0) {
        cli_fmt_eta(rate > 0 ? (total - done) / rate : -1, eta, sizeof eta);
        int pct = (int)(100.0 * done / total);
        snprintf(buf, cap, "%s  %s/%s %s  %d%%  %s %s/s  ETA %s", label, d, t, unit, pct > 100 ? 100 : pct, r,
                 unit, eta);
    } else {
        snprintf(buf, cap, "%s  %s %s  %s %s/s", label, d, unit, r, unit);
    }
}

void cli_progress_begin(cli_progress *p, const char *label, const char *unit, double total, double scale) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit;
    p->scale = scale > 0 ? scale : 1;
    p->total = total / p->scale;
    p->t_start = cli_now_ms();
    p->enabled = isatty(STDERR_FILENO);
}

void cli_progress_update(cli_progress *p, double done) {
    if (!p->enabled) return;
    double now = cli_now_ms();
    if (now - p->t_start < CLI_PROGRESS_DELAY_MS || (p->shown && now - p->t_last < 100)) return;
    char line[256];
    cli_progress_format(line, sizeof line, p->label, p->unit, done / p->scale, p->total, now - p->t_start);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    p->shown = 1;
    p->t_last = now;
}

void cli_progress_end(cli_progress *p) {
    if (p->shown) fprintf(stderr, "\r\033[K");
    p->shown = 0;
}

struct cli_ticker {
    const char *label;
    double t_start;
    int stop, shown;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *ticker_main(void *arg) {
    cli_ticker *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        double el = cli_now_ms() - t->t_start;
        if (!t->stop && el >= CLI_PROGRESS_DELAY_MS) {
            fprintf(stderr, "\r\033[K%s  %.1f s", t->label, el / 1e3);
            fflush(stderr);
            t->shown = 1;
        }
    }
    if (t->shown) fprintf(stderr, "\r\033[K");
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

cli_ticker *cli_ticker_start(const char *label) {
    if (!isatty(STDERR_FILENO)) return NULL;
    cli_ticker *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->label = label;
    t->t_start = cli_now_ms();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->th, NULL, ticker_main, t)) {
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t);
        return NULL;
    }
    return t;
}

void cli_ticker_stop(cli_ticker *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* ---- files ---------------------------------------------------------------------- */

int cli_cache_file(const char *file, char *buf, size_t cap) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (x && x[0] == '/') n = snprintf(buf, cap, "%s/cinfer", x);
    else if (home && home[0] == '/') n = snprintf(buf, cap, "%s/.cache/cinfer", home);
    else return -1;
    if (n < 0 || (size_t)n >= cap) return -1;
    for (char *q = buf + 1; *q; q++) /* mkdir -p */
        if (*q == '/') {
            *q = 0;
            (void)mkdir(buf, 0755);
            *q = '/';
        }
    if (mkdir(buf, 0755) && errno != EEXIST) return -1;
    size_t len = strlen(buf);
    n = snprintf(buf + len, cap - len, "/%s", file);
    return n < 0 || (size_t)n >= cap - len ? -1 : 0;
}

char *cli_read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    char *buf = read_all(f, CLI_READ_MAX, len);
    int e = errno;
    if (f != stdin) fclose(f);
    errno = e;
    return buf;
}

int cli_parse_cache_type(const char *prog, const char *flag, const char *v, int *out) {
    const int t = cinfer_kv_type_from_name(v);
    if (t <= CINFER_KV_DEFAULT) {
        fprintf(stderr, "%s: %s '%s': expected f32, f16, q8_0 or q4_0\n", prog, flag, v ? v : "");
        return -1;
    }
    *out = t;
    return 0;
}

int cli_parse_bytes(const char *prog, const char *v, uint64_t *out) {
    /* decimal digits with an optional fraction, then an optional K/M/G/T
     * (binary: 1K = 1024) with an optional "B" or "iB": 480M, 1.5G, 2GiB, 1GB.
     * Hex, exponents, inf/nan and signs are refused (strtod would take them). */
    static const char units[] = "KMGT";
    const char *p = v ? v : "";
    double d = 0, frac = 1;
    int digits = 0, shift = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) d = d * 10 + (*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) d += (*p - '0') * (frac /= 10);
    const char *u = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
    if (u) {
        shift = 10 * (int)(u - units + 1);
        p++;
        if (!strcasecmp(p, "B") || !strcasecmp(p, "iB")) p += strlen(p);
    } else if (!strcasecmp(p, "B")) {
        p++;
    }
    if (!digits || *p || d <= 0 || d * (double)(1ull << shift) >= 1.8e19) {
        fprintf(stderr, "%s: --mem '%s': expected bytes such as 480M, 1.5G or 2GiB\n", prog, v ? v : "");
        return -1;
    }
    *out = (uint64_t)(d * (double)(1ull << shift));
    return 0;
}

void cli_print_budget(const char *prog, const cinfer_model *m, int verbose) {
    cinfer_plan p;
    const char *steps;
    if (cinfer_model_budget(m, &p, &steps)) return;
    for (const char *s = steps; *s;) {
        const char *nl = strchr(s, '\n');
        int n = nl ? (int)(nl - s) : (int)strlen(s);
        fprintf(stderr, "%s: memory: %.*s\n", prog, n, s);
        s += n + (nl != NULL);
    }
    char keep[64] = "";
    if (p.streamed_bytes) snprintf(keep, sizeof keep, ", streamed (first %d layers resident)", p.stream_keep);
    fprintf(stderr, "%s: memory: %s, %d positions%s, planned peak %.1f MiB of %.1f MiB (KV cache %s/%s)\n", prog,
            cinfer_precision_name(p.precision), p.n_ctx, keep, p.peak_bytes / 1048576.0, p.mem_bytes / 1048576.0,
            cinfer_kv_type_name(p.cache_type_k), cinfer_kv_type_name(p.cache_type_v));
    if (verbose) {
        char text[2048];
        cinfer_plan_format(&p, text, sizeof text);
        fprintf(stderr, "%s\n", text);
    }
}

void cli_print_stream_stats(const char *prog, const cinfer_model *m) {
    uint64_t ahead, dropped;
    if (cinfer_model_stream_stats(m, &ahead, &dropped)) return;
    struct rusage ru;
    long majflt = getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_majflt;
    unsigned long long read_bytes = 0;
    int have_io = 0;
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &read_bytes) == 1) have_io = 1;
    if (f) fclose(f);
    char io[64] = "";
    if (have_io) snprintf(io, sizeof io, ", %.1f MiB read from storage", read_bytes / 1048576.0);
    unsigned long long size = 0, resident = 0;
    FILE *sm = fopen("/proc/self/statm", "r");
    if (!sm || fscanf(sm, "%llu %llu", &size, &resident) != 2) resident = 0;
    if (sm) fclose(sm);
    fprintf(stderr, "%s: stream: read ahead %.1f MiB, dropped %.1f MiB, %ld major faults%s, RSS now %.1f MiB\n",
            prog, ahead / 1048576.0, dropped / 1048576.0, majflt, io,
            resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0);
    int cache;
    uint64_t hits, misses, evictions;
    if (!cinfer_model_moe_stats(m, &cache, &hits, &misses, &evictions))
        fprintf(stderr, "%s: stream: experts: %d per layer cached, %llu hits, %llu read in, %llu dropped (hit rate %.1f %%)\n",
                prog, cache, (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)evictions,
                hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 0.0);
}
