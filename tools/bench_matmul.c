/*
 * bench_matmul.c — one matmul of each weight shape of the 336M llama-shape
 * bench model (dim 1024, ffn 2816, kv 256; DESIGN.md §7), native ggml type
 * vs its row-interleaved repack (kern.h CF_*_R8: Q4_0, Q8_0, Q4_K, Q5_K,
 * Q6_K, IQ4_XS), through cf_kernels.matmul
 * with the thread pool, as `make bench-matmul` runs it.  Not a test.
 *
 *   bench_matmul [-t THREADS] [-n TOKENS] [-r REPS] [-f] [-A] [-i IMPL]
 *     -A: only the attention line (16 heads, 4 kv heads, head_dim 64)
 *     -f: f32 activations (act_quant 0) instead of Q8_0 (act_quant 1)
 *     -i: pin the R8 impl (scalar|avx2|vnni); default the best one
 *
 * With -t 1 the times are the thread's CPU time, otherwise wall time.
 * Reports per shape the median of REPS timings as GFLOP/s (2·n_out·n_in·n_tok
 * per call), and the sum over one layer's 7 matmuls (q, k, v, o, gate, up,
 * down) as "layer".  Weights are random, quantized with ggml's reference
 * quantizer (quant_row) and repacked with kern_repack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kern.h"
#include "kernels/kern_r8.h"
#include "base/pool.h"
#include "kernels/quant.h"

#include "bench_util.h"


static double time_mm(const cf_kernels *K, cf_env *E, float *y, const float *x, const void *w, int type,
                      int n_out, int n_in, int n_tok, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    K->matmul(E, y, x, w, type, n_out, n_in, n_tok); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        K->matmul(E, y, x, w, type, n_out, n_in, n_tok);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    int n_thr = 2, n_tok = 512, reps = 5, f32act = 0, att_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) n_thr = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-f")) f32act = 1;
        else if (!strcmp(argv[i], "-A")) att_only = 1;
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            if (pin_impl("bench_matmul", argv[++i])) return 1;
        } else {
            fprintf(stderr, "usage: bench_matmul [-t THREADS] [-n TOKENS] [-r REPS] [-f] [-A] [-i scalar|avx2|vnni]\n");
            return 1;
        }
    }
    if (n_thr < 1 || n_tok < 1 || reps < 1) {
        fprintf(stderr, "bench_matmul: -t, -n, -r must be >= 1\n");
        return 1;
    }
    g_cpu_clock = n_thr == 1;
    const int isa = kern_best_isa();
    const cf_kernels *K = kern_table(isa);
    pool *P = NULL;
    if (pool_new(n_thr, &P) || pool_reserve(P, kern_scratch_bytes_act(0, n_tok, 2816))) {
        fprintf(stderr, "bench_matmul: pool\n");
        return 1;
    }
    cf_env E = {.K = K, .pool = P, .n_ctx = 0, .act_quant = !f32act};
    printf("isa %s, r8 impl %s, %d threads, %d tokens, %s activations, median of %d\n", kern_isa_name(isa),
           kern_r8_impl_name(kern_r8_impl_for_isa(isa)), n_thr, n_tok, f32act ? "f32" : "q8_0", reps);

    static const struct { const char *name; int n_out, n_in, count; } shapes[] = {
        {"q/o 1024x1024", 1024, 1024, 2}, {"k/v 256x1024", 256, 1024, 2},
        {"gate/up 2816x1024", 2816, 1024, 2}, {"down 1024x2816", 1024, 2816, 1}};
    static const struct { int native, r8; const char *name; } types[] = {
        {CF_Q4_0, CF_Q4_0_R8, "q4_0"}, {CF_Q8_0, CF_Q8_0_R8, "q8_0"},
        {12 /* Q4_K */, CF_Q4_K_R8, "q4_k"}, {13 /* Q5_K */, CF_Q5_K_R8, "q5_k"}, {14 /* Q6_K */, CF_Q6_K_R8, "q6_k"},
        {23 /* IQ4_XS */, CF_IQ4_XS_R8, "iq4_xs"}};
    float *x = malloc((size_t)n_tok * 2816 * sizeof(float));
    float *y = malloc((size_t)n_tok * 2816 * sizeof(float));
    float *wf = malloc((size_t)2816 * 1024 * sizeof(float));
    if (!x || !y || !wf) return 1;
    for (long i = 0; i < (long)n_tok * 2816; i++) x[i] = rnd();
    for (long i = 0; i < 2816L * 1024; i++) wf[i] = rnd() * 0.05f;
    for (size_t ti = 0; ti < (att_only ? 0 : sizeof types / sizeof types[0]); ti++) {
        double layer[2] = {0, 0}, flops_layer = 0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int n_out = shapes[si].n_out, n_in = shapes[si].n_in;
            const size_t rb = kern_row_bytes(types[ti].native, n_in);
            uint8_t *wn = malloc((size_t)n_out * rb), *wr = malloc(kern_repack_bytes(types[ti].r8, n_out, n_in));
            char err[200];
            for (int r = 0; r < n_out; r++) quant_row(types[ti].native, wf + (size_t)r * n_in, wn + (size_t)r * rb, n_in);
            if (kern_repack(types[ti].r8, types[ti].native, wn, n_out, n_in, wr, err, sizeof err)) {
                fprintf(stderr, "bench_matmul: %s\n", err);
                return 1;
            }
            const double fl = 2.0 * n_out * n_in * n_tok;
            const double tn = time_mm(K, &E, y, x, wn, types[ti].native, n_out, n_in, n_tok, reps);
            const double tr = time_mm(K, &E, y, x, wr, types[ti].r8, n_out, n_in, n_tok, reps);
            printf("%-5s %-18s native %7.1f GFLOP/s  r8 %7.1f GFLOP/s  (%.2fx)  [%.3f / %.3f ms]\n",
                   types[ti].name, shapes[si].name, fl / tn * 1e-9, fl / tr * 1e-9, tn / tr, tn * 1e3, tr * 1e3);
            layer[0] += tn * shapes[si].count;
            layer[1] += tr * shapes[si].count;
            flops_layer += fl * shapes[si].count;
            free(wn);
            free(wr);
        }
        printf("%-5s %-18s native %7.1f GFLOP/s  r8 %7.1f GFLOP/s  (%.2fx)  24 layers: %.1f / %.1f ms = %.0f / %.0f tok/s (matmuls only)\n",
               types[ti].name, "layer", flops_layer / layer[0] * 1e-9, flops_layer / layer[1] * 1e-9,
               layer[0] / layer[1], 24 * layer[0] * 1e3, 24 * layer[1] * 1e3, n_tok / (24 * layer[0]),
               n_tok / (24 * layer[1]));
    }
    /* F16 / BF16 weights (no interleaved form: one column) */
    static const struct { int type; const char *name; } wide[] = {{CF_F16, "f16"}, {CF_BF16, "bf16"}};
    for (size_t ti = 0; ti < (att_only ? 0 : sizeof wide / sizeof wide[0]); ti++) {
        double layer = 0, flops_layer = 0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int n_out = shapes[si].n_out, n_in = shapes[si].n_in;
            const size_t rb = kern_row_bytes(wide[ti].type, n_in);
            uint8_t *wn = malloc((size_t)n_out * rb);
            for (int r = 0; r < n_out; r++) quant_row(wide[ti].type, wf + (size_t)r * n_in, wn + (size_t)r * rb, n_in);
            const double fl = 2.0 * n_out * n_in * n_tok;
            const double tn = time_mm(K, &E, y, x, wn, wide[ti].type, n_out, n_in, n_tok, reps);
            printf("%-5s %-18s native %7.1f GFLOP/s  [%.3f ms]\n", wide[ti].name, shapes[si].name, fl / tn * 1e-9,
                   tn * 1e3);
            layer += tn * shapes[si].count;
            flops_layer += fl * shapes[si].count;
            free(wn);
        }
        printf("%-5s %-18s native %7.1f GFLOP/s  24 layers: %.1f ms = %.0f tok/s (matmuls only)\n", wide[ti].name,
               "layer", flops_layer / layer * 1e-9, 24 * layer * 1e3, n_tok / (24 * layer));
    }
    {   /* causal attention of the bench model: 16 heads, 4 kv heads, head_dim 64, n_tok tokens from pos 0 */
        const int nh = 16, nkv = 4, hd = 64;
        float *kc = calloc((size_t)n_tok * nkv * hd, sizeof(float)), *vc = calloc((size_t)n_tok * nkv * hd, sizeof(float));
        float *q = malloc(sizeof(float) * (size_t)n_tok * nh * hd), *o = malloc(sizeof(float) * (size_t)n_tok * nh * hd);
        for (long i = 0; i < (long)n_tok * nh * hd; i++) q[i] = rnd();
        for (long i = 0; i < (long)n_tok * nkv * hd; i++) kc[i] = rnd(), vc[i] = rnd();
        void *kvk[1] = {kc}, *kvv[1] = {vc};
        cf_env EA = {.K = K, .pool = P, .n_ctx = n_tok, .kv_k = kvk, .kv_v = kvv};
        if (pool_reserve(P, kern_scratch_bytes_act(n_tok, n_tok, 2816))) return 1;
        double t[64];
        for (int r = 0; r < reps && r < 64; r++) {
            double t0 = now();
            K->attention(&EA, o, q, kc, vc, NULL, 0, nh, nkv, hd, hd, 0.125f, 0, 0.0f, n_tok);
            t[r] = now() - t0;
        }
        qsort(t, (size_t)(reps < 64 ? reps : 64), sizeof t[0], cmp_d);
        const double tm = t[(reps < 64 ? reps : 64) / 2];
        const double fl = 4.0 * nh * hd * ((double)n_tok * (n_tok + 1) / 2);
        printf("attention %d tokens: %.3f ms/layer, %.1f GFLOP/s, 24 layers %.1f ms\n", n_tok, tm * 1e3,
               fl / tm * 1e-9, 24 * tm * 1e3);
        free(kc), free(vc), free(q), free(o);
    }
    free(x);
    free(y);
    free(wf);
    pool_free(P);
    return 0;
}
