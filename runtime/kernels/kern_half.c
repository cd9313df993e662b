/*
 * kern_half.c — the F16/BF16 act_quant matmul on AVX-512 (kern_half.h):
 * the driver (threads, tiles, slices) and the portable definition of its
 * sums (kern_half_dot_ref).  Compiled without ISA flags; the AVX-512 code
 * is behind kern_half_available.
 *
 * Mat-mat (n_tok > 1): threads take 16-row tiles; per tile and KERN_MM_KC
 * slice the rows go into the thread's scratch tile once — F16 converted to
 * f32 (exact), BF16 copied (rows a few KiB apart would share L1 sets) —
 * and the leaf multiplies it with every token, 4 tokens x 4 rows per block.
 * Mat-vec (n_tok == 1): contiguous row ranges per thread, 4 rows at a time,
 * each a quarter of the range apart (one sequential stream each, as in
 * kern.c mm_vec_rows), straight from the weights.  Both add the slices to y
 * in order, so every output is kern_half_dot_ref's bits.
 */
#include "kern_half.h"

#include <math.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"

#define HALF_ROWS 16 /* rows per mat-mat tile: 16 x KERN_MM_KC floats = KERN_MM_TILE_BYTES */
#define HALF_LANES 16
#define HALF_PAR_MIN_WORK 32768L /* as kern.c: below this, the calling thread alone */

int kern_half_available(int isa, int type) {
#if defined(__x86_64__)
    if (isa != KERN_ISA_AVX2 || !kern_isa_available(isa)) return 0;
    if (type == CF_F16) return kern_cpu_avx512vnni();
    if (type == CF_BF16) return kern_cpu_avx512bf16();
#else
    (void)isa, (void)type;
#endif
    return 0;
}

/* ==== the definition ========================================================== */

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 / f32 subnormals read or written as zero of the same sign (VDPBF16PS DAZ/FTZ) */
static float flush(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x7f800000u) ? f : bits_f32(u & 0x80000000u);
}

static float tree16(float v[HALF_LANES]) {
    for (int h = HALF_LANES / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) v[i] += v[i + h];
    return v[0];
}

static float slice_f16(const uint16_t *w, const float *a, int kc) {
    float acc[HALF_LANES] = {0};
    for (int k = 0; k < kc; k += HALF_LANES)
        for (int i = 0; i < HALF_LANES; i++) {
            const int e = k + i;
            acc[i] = e < kc ? fmaf(f16_to_f32(w[e]), a[e], acc[i]) : fmaf(0.0f, 0.0f, acc[i]);
        }
    return tree16(acc);
}

static float slice_bf16(const uint16_t *w, const uint16_t *a, int kc) {
    float acc[HALF_LANES] = {0};
    for (int k = 0; k < kc; k += 2 * HALF_LANES)
        for (int i = 0; i < HALF_LANES; i++)
            for (int odd = 1; odd >= 0; odd--) {
                const int e = k + 2 * i + odd;
                const float wv = e < kc ? flush(bits_f32((uint32_t)w[e] << 16)) : 0.0f;
                const float av = e < kc ? flush(bits_f32((uint32_t)a[e] << 16)) : 0.0f;
                acc[i] = flush(fmaf(wv, av, flush(acc[i])));
            }
    return tree16(acc);
}

float kern_half_dot_ref(int type, const void *w_row, const void *a_row, int n) {
    if (type != CF_F16 && type != CF_BF16) return NAN;
    float y = 0.0f;
    for (int k0 = 0; k0 < n; k0 += KERN_MM_KC) {
        const int kc = n - k0 < KERN_MM_KC ? n - k0 : KERN_MM_KC;
        const uint16_t *w = (const uint16_t *)w_row + k0;
        const float s = type == CF_F16 ? slice_f16(w, (const float *)a_row + k0, kc)
                                       : slice_bf16(w, (const uint16_t *)a_row + k0, kc);
        y = k0 ? y + s : s;
    }
    return y;
}

/* ==== the driver ================================================================ */

#if defined(__x86_64__)
typedef struct {
    cf_env *E;
    float *y;
    const void *a;
    const uint16_t *w;
    int type, n_out, n_in, n_tok;
} half_job;

static void mat_tiles(const half_job *j, void *tile, long tl0, long tl1) {
    for (long tl = tl0; tl < tl1; tl++) {
        const long r0 = tl * HALF_ROWS;
        const int nr = j->n_out - r0 < HALF_ROWS ? (int)(j->n_out - r0) : HALF_ROWS;
        for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
            const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
            const uint16_t *wr = j->w + (size_t)r0 * j->n_in + k0;
            float *y = j->y + r0;
            if (j->type == CF_F16) {
                float *t = tile;
                for (int r = 0; r < nr; r++) kern_avx2_dequant_f16(wr + (size_t)r * j->n_in, t + (size_t)r * KERN_MM_KC, kc);
                kern_avx512_f16_mm(t, KERN_MM_KC, nr, (const float *)j->a + k0, (size_t)j->n_in, j->n_tok, kc, y,
                                   (size_t)j->n_out, 1, k0 > 0);
            } else {
                uint16_t *t = tile;
                for (int r = 0; r < nr; r++)
                    memcpy(t + (size_t)r * KERN_MM_KC, wr + (size_t)r * j->n_in, (size_t)kc * sizeof *t);
                kern_avx512bf16_mm(t, KERN_MM_KC, nr, (const uint16_t *)j->a + k0, (size_t)j->n_in, j->n_tok, kc,
                                   y, (size_t)j->n_out, 1, k0 > 0);
            }
        }
    }
}

static void mat_worker(void *arg, int ith, int nth) {
    const half_job *j = arg;
    const long n_tiles = (j->n_out + HALF_ROWS - 1) / HALF_ROWS;
    const long t0 = n_tiles * ith / nth, t1 = n_tiles * (ith + 1) / nth;
    if (t0 == t1) return;
    size_t have = 0;
    void *tile = pool_scratch((pool *)j->E->pool, ith, &have);
    if (tile && have >= KERN_MM_TILE_BYTES) {
        mat_tiles(j, tile, t0, t1);
    } else {
        _Alignas(64) float stack_tile[HALF_ROWS * KERN_MM_KC];
        mat_tiles(j, stack_tile, t0, t1);
    }
}

/* Rows r, r + stride, ... (nr of them) of one token, every slice. */
static void vec_rows(const half_job *j, long r, long stride, int nr) {
    for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
        const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
        const uint16_t *w = j->w + (size_t)r * j->n_in + k0;
        const size_t ws = (size_t)stride * j->n_in;
        if (j->type == CF_F16)
            kern_avx512_f16_mv(w, ws, nr, (const float *)j->a + k0, kc, j->y + r, (size_t)stride, k0 > 0);
        else
            kern_avx512bf16_mm(w, ws, nr, (const uint16_t *)j->a + k0, 0, 1, kc, j->y + r, 0, (size_t)stride, k0 > 0);
    }
}

static void vec_worker(void *arg, int ith, int nth) {
    const half_job *j = arg;
    const long r0 = (long)j->n_out * ith / nth, r1 = (long)j->n_out * (ith + 1) / nth;
    const long part = (r1 - r0) / 4; /* 4 streams a part apart */
    for (long r = r0; r < r0 + part; r++) vec_rows(j, r, part, 4);
    for (long r = r0 + 4 * part; r < r1; r++) vec_rows(j, r, 1, 1);
}
#endif

void kern_half_matmul(int isa, cf_env *E, float *y, const void *a, const void *w, int type, int n_out,
                      int n_in, int n_tok) {
#if defined(__x86_64__)
    if (kern_half_available(isa, type) && n_out > 0 && n_in > 0 && n_tok > 0) {
        half_job j = {E, y, a, w, type, n_out, n_in, n_tok};
        void (*fn)(void *, int, int) = n_tok == 1 ? vec_worker : mat_worker;
        if ((long)n_out * n_in * n_tok < HALF_PAR_MIN_WORK) fn(&j, 0, 1);
        else pool_run((pool *)E->pool, fn, &j);
        return;
    }
#else
    (void)isa, (void)E, (void)a, (void)w, (void)type, (void)n_in;
#endif
    for (long i = 0; i < (long)n_out * n_tok; i++) y[i] = NAN;
}
