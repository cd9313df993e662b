/*
 * bench_decode.c — how close the decode matmuls come to the memory bound,
 * measured without a model file and without the scheduler's noise.  Not a
 * test; `make bench-decode` runs it.
 *
 * It lays out every matmul weight of a llama-shape bench model (-s: the
 * 336M one of DESIGN.md §7, dim 1024, 24 layers, kv 256, ffn 2816, vocab
 * 32000; or make bench's 1B or 7B shapes) in the
 * compiled type of `--quant auto` (Q4_0_R8, Q8_0_R8, or Q4_K_M's mix of
 * Q4_K_R8 and Q6_K_R8; with -N the native ggml types instead), in one anonymous region with transparent huge pages
 * (as runtime/engine/engine.c binds repacked weights), and runs one decode
 * step's matmuls (q, k, v, o, gate, up, down per layer, then the output
 * projection) through cf_kernels.matmul with the thread pool.  Alternating
 * with it, the same threads sum a buffer of the same size (membw's loop), so
 * both see the same machine.  Reported: GB/s of each and their ratio, the
 * "matmul fraction of the bound".
 *
 *   bench_decode [-t THREADS] [-q q4_0|q8_0|q4_k_m] [-s 336m|1b|7b] [-N] [-i IMPL] [-r ROUNDS] [-n STEPS] [-4k]
 *     -s: the model shape (default 336m; 1b: dim 2048, 16 layers, kv 512,
 *         ffn 8192, vocab 128256; 7b: dim 4096, 32 layers, kv 4096, ffn
 *         11008, vocab 32000)
 *     -N: the native ggml types (Q4_0, Q8_0, Q4_K/Q6_K), not repacked
 *     -i: pin the R8/RK impl (scalar|avx2|vnni; default the best one; not
 *         with -N)
 *     -4k: weights and the sum buffer on 4 KiB pages (no MADV_HUGEPAGE)
 *
 * Times: with -t 1, the thread's CPU time (a descheduled thread costs
 * nothing, so a loaded machine shows the kernel's own speed); otherwise
 * wall time.  Each round times -n steps of each and also prints the
 * process's CPU time per step (with several threads, CPU spent beyond the
 * 1-thread figure is waiting: spinning at the pool's fork-joins); the
 * medians are printed last.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/pool.h"
#include "kernels/kern.h"
#include "kernels/kern_r8.h"
#include "kernels/quant.h"

#include "bench_util.h"

static double proc_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


typedef struct {
    int n_out, n_in, native, type;
    const void *w;
} mm_op;

static size_t op_bytes(const mm_op *o) {
    return o->type == o->native ? kern_row_bytes(o->native, o->n_in) * (size_t)o->n_out
                                : kern_repack_bytes(o->type, o->n_out, o->n_in);
}

/* ---- the read-bandwidth loop (membw's), split over the pool ---- */
typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum[64][8];
} sum_job;

static void sum_worker(void *arg, int ith, int nth) {
    sum_job *j = arg;
    const size_t lo = j->n * (size_t)ith / (size_t)nth, hi = j->n * (size_t)(ith + 1) / (size_t)nth;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    for (; i < hi; i++) s0 += j->p[i];
    j->sum[ith][0] = s0 + s1 + s2 + s3;
}

static void *region(size_t bytes, int huge) {
    void *r = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    (void)madvise(r, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return r;
}

int main(int argc, char **argv) {
    int n_thr = 1, rounds = 5, steps = 8, huge = 1, use_native = 0;
    const char *quant = "q4_0", *shape = "336m";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) n_thr = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-q") && i + 1 < argc) quant = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "-N")) use_native = 1;
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            if (pin_impl("bench_decode", argv[++i])) return 1;
        } else if (!strcmp(argv[i], "-4k")) huge = 0;
        else {
            fprintf(stderr, "usage: bench_decode [-t THREADS] [-q q4_0|q8_0|q4_k_m] [-s 336m|1b|7b] [-N] "
                            "[-i scalar|avx2|vnni] [-r ROUNDS] [-n STEPS] [-4k]\n");
            return 1;
        }
    }
    if (n_thr < 1 || n_thr > 64 || rounds < 1 || rounds > 64 || steps < 1) {
        fprintf(stderr, "bench_decode: -t 1..64, -r 1..64, -n >= 1\n");
        return 1;
    }
    g_cpu_clock = n_thr == 1;
    /* the shape: dim, kv (n_head_kv x head_dim), ffn, layers, vocab */
    int dim, kv, ffn, NL, vocab;
    if (!strcmp(shape, "336m")) dim = 1024, kv = 256, ffn = 2816, NL = 24, vocab = 32000;
    else if (!strcmp(shape, "1b")) dim = 2048, kv = 512, ffn = 8192, NL = 16, vocab = 128256;
    else if (!strcmp(shape, "7b")) dim = 4096, kv = 4096, ffn = 11008, NL = 32, vocab = 32000;
    else {
        fprintf(stderr, "bench_decode: -s 336m, 1b or 7b\n");
        return 1;
    }
    /* per layer: q, k, v, o, gate, up, down; Q4_K_M has attn_v and ffn_down
     * in Q6_K on llama-quantize's use_more_bits layers (the first and last
     * eighth, every third between), output.weight in Q6_K */
    const int shp[7][2] = {{dim, dim}, {kv, dim}, {kv, dim}, {dim, dim}, {ffn, dim}, {ffn, dim}, {dim, ffn}};
    mm_op *ops = malloc(sizeof *ops * (size_t)(NL * 7 + 1));
    if (!ops) return 1;
    int n_ops = 0;
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 7; k++) {
            int native, type;
            if (!strcmp(quant, "q8_0")) native = CF_Q8_0, type = CF_Q8_0_R8;
            else if (!strcmp(quant, "q4_k_m")) {
                const int more = l < NL / 8 || l >= 7 * NL / 8 || (l - NL / 8) % 3 == 2;
                const int q6 = more && (k == 2 || k == 6);
                native = q6 ? 14 : 12, type = q6 ? CF_Q6_K_R8 : CF_Q4_K_R8;
            } else native = CF_Q4_0, type = CF_Q4_0_R8;
            ops[n_ops++] = (mm_op){shp[k][0], shp[k][1], native, type, NULL};
        }
    {
        const int q = !strcmp(quant, "q8_0") ? 0 : !strcmp(quant, "q4_k_m") ? 2 : 1;
        ops[n_ops++] = (mm_op){vocab, dim, q == 0 ? CF_Q8_0 : q == 2 ? 14 : CF_Q4_0,
                               q == 0 ? CF_Q8_0_R8 : q == 2 ? CF_Q6_K_R8 : CF_Q4_0_R8, NULL};
    }
    if (use_native)
        for (int i = 0; i < n_ops; i++) ops[i].type = ops[i].native;
    size_t total = 0;
    for (int i = 0; i < n_ops; i++) total += (op_bytes(&ops[i]) + 63) & ~(size_t)63;
    uint8_t *wr = region(total, huge);
    uint64_t *buf = region(total, huge);
    if (!wr || !buf) {
        fprintf(stderr, "bench_decode: out of memory for 2 x %zu bytes\n", total);
        return 1;
    }
    /* one source matrix per distinct (type, shape), repacked into every slot */
    /* every matrix has at most max(vocab, ffn) x dim elements */
    const size_t rows_max = (size_t)(vocab > ffn ? vocab : ffn), big = rows_max * (size_t)dim;
    float *wf = malloc(big * sizeof(float));
    uint8_t *wn = malloc(kern_row_bytes(CF_Q8_0, dim) * rows_max);
    if (!wf || !wn) return 1;
    for (size_t i = 0; i < big; i++) wf[i] = rnd() * 0.05f;
    size_t off = 0;
    char err[256];
    for (int i = 0; i < n_ops; i++) {
        mm_op *o = &ops[i];
        int same = -1;
        for (int k = 0; k < i && same < 0; k++)
            if (ops[k].type == o->type && ops[k].native == o->native && ops[k].n_out == o->n_out && ops[k].n_in == o->n_in)
                same = k;
        if (same >= 0) { /* the bytes of an earlier slot of this type and shape */
            memcpy(wr + off, ops[same].w, op_bytes(o));
            o->w = wr + off;
            off += (op_bytes(o) + 63) & ~(size_t)63;
            continue;
        }
        const size_t rb = kern_row_bytes(o->native, o->n_in);
        for (int r = 0; r < o->n_out; r++) quant_row(o->native, wf + (size_t)r * o->n_in, wn + (size_t)r * rb, o->n_in);
        if (o->type == o->native) memcpy(wr + off, wn, op_bytes(o));
        else if (kern_repack(o->type, o->native, wn, o->n_out, o->n_in, wr + off, err, sizeof err)) {
            fprintf(stderr, "bench_decode: %s\n", err);
            return 1;
        }
        o->w = wr + off;
        off += (op_bytes(o) + 63) & ~(size_t)63;
    }
    free(wf);
    free(wn);
    for (size_t i = 0; i < total / 8; i++) buf[i] = i;

    pool *P = NULL;
    if (pool_new(n_thr, &P) || pool_reserve(P, kern_scratch_bytes_act(0, 1, ffn > dim ? ffn : dim))) {
        fprintf(stderr, "bench_decode: pool\n");
        return 1;
    }
    const int isa = kern_best_isa();
    const cf_kernels *K = kern_table(isa);
    cf_env E = {.K = K, .pool = P, .n_ctx = 0, .act_quant = 1};
    float *x = malloc(rows_max * sizeof(float)), *y = malloc(rows_max * sizeof(float));
    if (!x || !y) return 1;
    for (size_t i = 0; i < rows_max; i++) x[i] = rnd();
    sum_job *sj = calloc(1, sizeof *sj);
    sj->p = buf;
    sj->n = total / 8;

    printf("bench_decode: %s%s, shape %s, isa %s (%s), %d thread(s), %s pages, %.1f MiB of matmul weights per step, "
           "%d rounds x %d steps, %s\n", quant, use_native ? " native" : "", shape, kern_isa_name(isa),
           use_native ? "native kernels" : kern_r8_impl_name(kern_r8_impl_for_isa(isa)), n_thr, huge ? "huge" : "4 KiB",
           total / 1048576.0, rounds, steps, g_cpu_clock ? "thread CPU time" : "wall time");
    double t_mm[64], t_sum[64];
    for (int r = 0; r < rounds; r++) {
        double t0 = now(), c0 = proc_cpu();
        for (int s = 0; s < steps; s++)
            for (int i = 0; i < n_ops; i++)
                K->matmul(&E, y, x, ops[i].w, ops[i].type, ops[i].n_out, ops[i].n_in, 1);
        t_mm[r] = (now() - t0) / steps;
        const double c_mm = (proc_cpu() - c0) / steps;
        t0 = now(), c0 = proc_cpu();
        for (int s = 0; s < steps; s++) pool_run(P, sum_worker, sj);
        t_sum[r] = (now() - t0) / steps;
        const double c_sum = (proc_cpu() - c0) / steps;
        printf("  round %d: matmuls %.2f ms/step (cpu %.2f ms) = %.2f GB/s, sum %.2f GB/s (cpu %.2f ms), ratio %.3f\n",
               r + 1, t_mm[r] * 1e3, c_mm * 1e3, total / t_mm[r] * 1e-9, total / t_sum[r] * 1e-9, c_sum * 1e3,
               t_sum[r] / t_mm[r]);
    }
    double ratio[64];
    for (int r = 0; r < rounds; r++) ratio[r] = t_sum[r] / t_mm[r];
    qsort(t_mm, (size_t)rounds, sizeof t_mm[0], cmp_d);
    qsort(t_sum, (size_t)rounds, sizeof t_sum[0], cmp_d);
    qsort(ratio, (size_t)rounds, sizeof ratio[0], cmp_d);
    printf("median: matmuls %.2f GB/s (%.1f steps/s), sum %.2f GB/s, matmul fraction of the bound %.3f "
           "(per-round ratio median)\n", total / t_mm[rounds / 2] * 1e-9, 1 / t_mm[rounds / 2],
           total / t_sum[rounds / 2] * 1e-9, ratio[rounds / 2]);
    (void)sj->sum;
    pool_free(P);
    free(ops);
    return 0;
}
