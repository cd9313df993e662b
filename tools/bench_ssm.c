/*
 * bench_ssm.c — the recurrent-layer kernels on realistic shapes, as `make
 * bench-ssm` runs them.  Not a test.
 *
 *   bench_ssm [-t THREADS] [-n TOKENS] [-r REPS]
 *
 * Per shape, the median of REPS timings of one layer's call over TOKENS
 * tokens (a prompt batch) and over 1 token (decode):
 *   delta rule  Qwen3-Next-80B-A3B's gated DeltaNet (16 k heads, 32 v heads,
 *               d_k = d_v = 128) and a smaller one (8/16 heads of 64, the
 *               Qwen3.5-class shape): the chunked form (KERN_DN_CHUNKED)
 *               against the token-by-token recurrence (KERN_DN_RECURRENT),
 *               the same numbers (tests/test_kern_ssm.c) — prompt tokens/s of
 *               each and the speed-up;
 *   Mamba-2     Granite-4.0-H-1B's SSD scan (48 heads of 64, d_state 128) and
 *               its conv (3328 channels, kernel 4);
 *   Mamba-1     a Mamba-1.4B-like scan (d_inner 4096, d_state 16).
 * Inputs are random; the state carries over between repetitions.  With -t 1
 * the times are the thread's CPU time, otherwise wall time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/pool.h"
#include "kernels/kern.h"
#include "kernels/kern_ssm.h"

#include "bench_util.h"

static float *rnd_array(long n, float lo, float hi) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_ssm: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++) {
        g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
        x[i] = lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
    }
    return x;
}

static int g_reps = 5;

typedef void (*call_fn)(void *arg, int n_tok);

/* Median seconds of g_reps calls (after one warm-up). */
static double timed(call_fn fn, void *arg, int n_tok) {
    double t[64];
    int reps = g_reps > 64 ? 64 : g_reps;
    fn(arg, n_tok);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(arg, n_tok);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

/* ---- delta rule ------------------------------------------------------------------ */

typedef struct {
    int isa, mode, nk, nv, dk, dv;
    cf_env *E;
    float *o, *qkv, *ba, *A, *dtb, *state, *scratch;
} dn_arg;

static void dn_call(void *p, int n_tok) {
    dn_arg *a = p;
    kern_drv_delta_net(a->isa, a->E, a->o, a->qkv, a->ba, a->A, a->dtb, a->state, a->nk, a->nv, a->dk, a->dv,
                       1e-6f, a->scratch, n_tok, a->mode);
}

static void bench_delta(cf_env *E, int isa, const char *name, int nk, int nv, int dk, int dv, int n_tok) {
    const int width = 2 * nk * dk + nv * dv;
    dn_arg a = {isa, 0, nk, nv, dk, dv, E, rnd_array((long)n_tok * nv * dv, 0, 0), rnd_array((long)n_tok * width, -1, 1),
                rnd_array((long)n_tok * 2 * nv, -2, 2), rnd_array(nv, -0.5f, -0.01f), rnd_array(nv, -1, 1),
                rnd_array((long)nv * dv * dk, -0.1f, 0.1f), NULL};
    a.scratch = rnd_array(kern_delta_net_scratch_floats(nv, dk, dv), 0, 0);
    a.mode = KERN_DN_RECURRENT;
    double rec = timed(dn_call, &a, n_tok), dec = timed(dn_call, &a, 1);
    a.mode = KERN_DN_CHUNKED;
    double chk = timed(dn_call, &a, n_tok);
    printf("| delta rule, %s (%d/%d heads, d_k %d, d_v %d) | %.1f | %.1f | %.2fx | %.3f |\n", name, nk, nv, dk, dv,
           n_tok / rec, n_tok / chk, rec / chk, dec * 1e3);
    free(a.o), free(a.qkv), free(a.ba), free(a.A), free(a.dtb), free(a.state), free(a.scratch);
}

/* ---- scans and conv ----------------------------------------------------------------- */

typedef struct {
    int isa, n_head, head_dim, d_state, a_per_state;
    cf_env *E;
    float *y, *x, *dt, *bc, *A, *D, *dtb, *state;
} scan_arg;

static void scan_call(void *p, int n_tok) {
    scan_arg *a = p;
    kern_drv_ssm_scan(a->isa, a->E, a->y, a->x, a->dt, a->bc, a->A, a->D, a->dtb, a->state, a->n_head, a->head_dim,
                      a->d_state, 1, a->a_per_state, n_tok);
}

static void bench_scan(cf_env *E, int isa, const char *name, int n_head, int head_dim, int d_state, int a_per_state,
                       int n_tok) {
    const long n = (long)n_head * head_dim;
    scan_arg a = {isa, n_head, head_dim, d_state, a_per_state, E, rnd_array(n_tok * n, 0, 0), rnd_array(n_tok * n, -1, 1),
                  rnd_array((long)n_tok * (a_per_state ? n : n_head), -4, 0), rnd_array((long)n_tok * 2 * d_state, -1, 1),
                  rnd_array(a_per_state ? n * d_state : n_head, -2, -0.5f), rnd_array(n_head, 0.5f, 1.5f),
                  a_per_state ? NULL : rnd_array(n_head, -1, 0), rnd_array(n * d_state, -0.1f, 0.1f)};
    double pp = timed(scan_call, &a, n_tok), tg = timed(scan_call, &a, 1);
    printf("| %s scan (%d heads x %d, d_state %d) | %.1f | | | %.3f |\n", name, n_head, head_dim, d_state, n_tok / pp,
           tg * 1e3);
    free(a.y), free(a.x), free(a.dt), free(a.bc), free(a.A), free(a.D), free(a.dtb), free(a.state);
}

typedef struct {
    int isa, n, d_conv;
    cf_env *E;
    float *y, *x, *w, *b, *state;
} conv_arg;

static void conv_call(void *p, int n_tok) {
    conv_arg *a = p;
    kern_drv_ssm_conv(a->isa, a->E, a->y, a->x, a->w, a->b, a->state, a->n, a->d_conv, CF_ACT_SILU, n_tok);
}

static void bench_conv(cf_env *E, int isa, int n, int d_conv, int n_tok) {
    conv_arg a = {isa, n, d_conv, E, rnd_array((long)n_tok * n, 0, 0), rnd_array((long)n_tok * n, -1, 1),
                  rnd_array((long)n * d_conv, -1, 1), rnd_array(n, -0.1f, 0.1f), rnd_array((long)(d_conv - 1) * n, -1, 1)};
    double pp = timed(conv_call, &a, n_tok), tg = timed(conv_call, &a, 1);
    printf("| conv (%d channels, kernel %d) | %.1f | | | %.3f |\n", n, d_conv, n_tok / pp, tg * 1e3);
    free(a.y), free(a.x), free(a.w), free(a.b), free(a.state);
}

int main(int argc, char **argv) {
    int threads = 2, n_tok = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) g_reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ssm [-t THREADS] [-n TOKENS] [-r REPS]\n");
            return 2;
        }
    }
    if (threads < 1 || n_tok < 1 || g_reps < 1) {
        fprintf(stderr, "bench_ssm: -t, -n and -r must be >= 1\n");
        return 2;
    }
    g_cpu_clock = threads == 1;
    pool *p = NULL;
    if (pool_new(threads, &p)) {
        fprintf(stderr, "bench_ssm: cannot start %d threads\n", threads);
        return 1;
    }
    cf_env E = {.pool = p};
    const int isa = kern_best_isa();
    printf("bench_ssm: %s, %d thread(s) (%s), %d-token prompt batch, median of %d\n\n", kern_cpu_label(), threads,
           g_cpu_clock ? "CPU time" : "wall time", n_tok, g_reps);
    printf("| kernel (one layer) | recurrent prompt tok/s | chunked prompt tok/s | chunked speed-up | decode ms/token |\n");
    printf("|---|---:|---:|---:|---:|\n");
    bench_delta(&E, isa, "Qwen3-Next-80B", 16, 32, 128, 128, n_tok);
    bench_delta(&E, isa, "smaller", 8, 16, 64, 64, n_tok);
    bench_scan(&E, isa, "Mamba-2, Granite-4.0-H-1B", 48, 64, 128, 0, n_tok);
    bench_conv(&E, isa, 3072 + 256, 4, n_tok);
    bench_scan(&E, isa, "Mamba-1, 1.4B", 4096, 1, 16, 1, n_tok);
    pool_free(p);
    return 0;
}
