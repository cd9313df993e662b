/*
 * bench_att.c — one attention call (cf_kernels.attention, kern.c) of a
 * prompt batch or a decoded token at a cache depth, on a KV cache type, with
 * or without a sliding window, through the thread pool.  Not a test.
 *
 *   bench_att [-t THREADS] [-p TOKENS] [-d DEPTH] [-w WINDOW] [-c TYPE[/TYPE]]
 *             [-H HEADS] [-K KV_HEADS] [-D HEAD_DIM] [-r REPS]
 *     -p: tokens of the call (default 512; 1 = decode)
 *     -d: cache positions before it (default 4096), filled with random rows
 *     -w: sliding window in positions (default 0: none)
 *     -c: K[/V] cache type f32 f16 q8_0 q4_0 (default f16)
 *     -H/-K/-D: heads, kv heads, head_dim (default 16, 4, 64: the bench model)
 *
 * With -t 1 the times are the thread's CPU time, otherwise wall time.
 * Prints the median of REPS calls in ms and as tokens/s of one layer, and
 * an FNV-1a hash of the output's bytes (two builds that print the same hash
 * computed the same bits).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/pool.h"
#include "base/ggml_type.h"
#include "kernels/kern.h"
#include "kernels/quant.h"

#include "bench_util.h"


static int type_of(const char *s) {
    const int t = quant_type_parse(s);
    return kern_kv_type_supported(t) ? t : -1;
}

/* Fill rows 0..n-1 of a cache of `type` with random values. */
static void fill_rows(int type, char *dst, size_t rb, int dim, int n) {
    float *x = malloc(sizeof(float) * (size_t)dim);
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < dim; i++) x[i] = rnd();
        quant_row(type, x, dst + (size_t)r * rb, dim);
    }
    free(x);
}

static int usage(void) {
    fprintf(stderr, "usage: bench_att [-t THREADS] [-p TOKENS] [-d DEPTH] [-w WINDOW] [-c TYPE[/TYPE]] "
                    "[-H HEADS] [-K KV_HEADS] [-D HEAD_DIM] [-r REPS]\n");
    return 1;
}

int main(int argc, char **argv) {
    int n_thr = 2, n_tok = 512, depth = 4096, window = 0, nh = 16, nkv = 4, hd = 64, reps = 5;
    int tk = CF_F16, tv = CF_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        i++;
        if (!strcmp(a, "-t")) n_thr = atoi(v);
        else if (!strcmp(a, "-p")) n_tok = atoi(v);
        else if (!strcmp(a, "-d")) depth = atoi(v);
        else if (!strcmp(a, "-w")) window = atoi(v);
        else if (!strcmp(a, "-H")) nh = atoi(v);
        else if (!strcmp(a, "-K")) nkv = atoi(v);
        else if (!strcmp(a, "-D")) hd = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-c")) {
            char buf[32];
            snprintf(buf, sizeof buf, "%s", v);
            char *slash = strchr(buf, '/');
            if (slash) *slash = 0;
            tk = type_of(buf), tv = slash ? type_of(slash + 1) : tk;
            if (tk < 0 || tv < 0) {
                fprintf(stderr, "bench_att: cache type %s: want f32, f16, q8_0 or q4_0 (K/V)\n", v);
                return 1;
            }
        } else return usage();
    }
    if (n_thr < 1 || n_tok < 1 || depth < 0 || reps < 1 || nkv < 1 || nh % nkv || hd < 1) {
        fprintf(stderr, "bench_att: -t, -p, -r, -K, -D >= 1, -d >= 0, heads a multiple of kv heads\n");
        return 1;
    }
    if (reps > 64) reps = 64;
    g_cpu_clock = n_thr == 1;
    const int isa = kern_best_isa(), n_ctx = depth + n_tok, kvd = nkv * hd;
    const size_t kb = kern_kv_row_bytes(tk, kvd), vb = kern_kv_row_bytes(tv, kvd);
    if (!kb || !vb) {
        fprintf(stderr, "bench_att: kv_dim %d is not whole blocks of the cache type\n", kvd);
        return 1;
    }
    pool *P = NULL;
    if (pool_new(n_thr, &P) || pool_reserve(P, kern_scratch_bytes(n_ctx))) {
        fprintf(stderr, "bench_att: pool of %d threads with %zu bytes scratch each\n", n_thr,
                kern_scratch_bytes(n_ctx));
        return 1;
    }
    /* the cache as the engine maps it (eng_ctx_open): anonymous, huge pages */
    char *kc = mmap(NULL, kb * (size_t)n_ctx, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *vc = mmap(NULL, vb * (size_t)n_ctx, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (kc == MAP_FAILED || vc == MAP_FAILED) {
        fprintf(stderr, "bench_att: out of memory for a %d-position cache\n", n_ctx);
        return 1;
    }
    (void)madvise(kc, kb * (size_t)n_ctx, MADV_HUGEPAGE);
    (void)madvise(vc, vb * (size_t)n_ctx, MADV_HUGEPAGE);
    float *q = malloc(sizeof(float) * (size_t)n_tok * nh * hd), *o = malloc(sizeof(float) * (size_t)n_tok * nh * hd);
    float *k = malloc(sizeof(float) * (size_t)n_tok * kvd), *v = malloc(sizeof(float) * (size_t)n_tok * kvd);
    if (!q || !o || !k || !v) {
        fprintf(stderr, "bench_att: out of memory for a %d-position cache\n", n_ctx);
        return 1;
    }
    fill_rows(tk, kc, kb, kvd, depth);
    fill_rows(tv, vc, vb, kvd, depth);
    for (long i = 0; i < (long)n_tok * nh * hd; i++) q[i] = rnd() * 0.5f;
    for (long i = 0; i < (long)n_tok * kvd; i++) k[i] = rnd(), v[i] = rnd();
    void *kk[1] = {kc}, *vv[1] = {vc};
    const cf_kernels *K = kern_table(isa);
    cf_env E = {.K = K, .pool = P, .n_ctx = n_ctx, .pos = depth, .kv_k = kk, .kv_v = vv, .kv_type_k = tk,
                .kv_type_v = tv};
    double t[64];
    K->attention(&E, o, q, k, v, NULL, 0, nh, nkv, hd, hd, 0.125f, window, 0.0f, n_tok); /* warm-up */
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        K->attention(&E, o, q, k, v, NULL, 0, nh, nkv, hd, hd, 0.125f, window, 0.0f, n_tok);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    uint64_t hash = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof(float) * (size_t)n_tok * nh * hd; i++)
        hash = (hash ^ ((const unsigned char *)o)[i]) * 1099511628211ULL;
    const double tm = t[reps / 2];
    printf("isa %s, %d threads, %d/%d heads x %d, cache %s/%s, %d tokens at depth %d, window %d: "
           "%.3f ms/layer = %.0f tok/s per layer (median of %d), out %016llx\n", kern_isa_name(isa), n_thr, nh, nkv, hd,
           ggml_type_name((uint32_t)tk), ggml_type_name((uint32_t)tv), n_tok, depth, window, tm * 1e3, n_tok / tm, reps, (unsigned long long)hash);
    munmap(kc, kb * (size_t)n_ctx), munmap(vc, vb * (size_t)n_ctx);
    free(q), free(o), free(k), free(v);
    pool_free(P);
    return 0;
}
