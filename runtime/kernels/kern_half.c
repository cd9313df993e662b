/*
 * kern_half.c — the BF16 act_quant matmul on AVX512_BF16 (kern_half.h): the
 * driver (threads, tiles, slices), the activation layout and the portable
 * definition of its sums (kern_half_dot_ref).  Compiled without ISA flags;
 * the AVX-512 code is behind kern_half_available.
 *
 * Mat-mat (n_tok > 1): threads take 16-row tiles; per tile and KERN_MM_KC
 * slice the rows go into the thread's scratch tile once, in vdpbf16ps's
 * pair order (kern_avx512bf16_pack), and the leaf multiplies it with every
 * token, 4 row pairs x 4 tokens per block.  Mat-vec (n_tok == 1):
 * contiguous row ranges per thread, 4 rows at a time a quarter of the range
 * apart (one sequential stream each, every slice of a row before the next
 * row: kern.c mm_vec_rows), straight from the weights.  Both add the slices to y in order, so every output is
 * kern_half_dot_ref's bits.
 */
#include "kern_half.h"

#include <math.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"
#include "kern_q8.h"

#define HALF_ROWS 16 /* rows per mat-mat tile: 16 x KERN_MM_KC bf16 = half of KERN_MM_TILE_BYTES */
#define HALF_LANES 8
#define HALF_PAR_MIN_WORK 32768L /* as kern.c: below this, the calling thread alone */

int kern_half_available(int isa, int type) {
#if defined(__x86_64__)
    if (isa != KERN_ISA_AVX2 || !kern_isa_available(isa)) return 0;
    if (type == CF_BF16) return kern_cpu_avx512bf16();
#else
    (void)isa, (void)type;
#endif
    return 0;
}

/* ==== the activation layout ===================================================== */

size_t kern_half_act_bytes(int n) { return n > 0 ? (size_t)((n + 15) & ~15) * sizeof(uint16_t) : 0; }

/* Where element k of a row sits in kern_half's layout. */
static int act_pos(int k) { return (k & ~15) + ((k & 15) < 8 ? 2 * (k & 7) + 1 : 2 * (k & 7)); }

void kern_half_pack_act(const float *x, void *dst, int n) {
    uint16_t *d = dst, h[256];
    const int n16 = (n + 15) & ~15;
    for (int k = n; k < n16; k++) d[act_pos(k)] = 0;
    for (int k0 = 0; k0 < n; k0 += 256) {
        const int kc = n - k0 < 256 ? n - k0 : 256;
        kern_sc_quantize_bf16(x + k0, h, kc); /* ggml's rounding: the act_format of kern_q8_mm.c */
        for (int k = 0; k < kc; k++) d[act_pos(k0 + k)] = h[k];
    }
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

static float bf(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* One slice: w natural, a in kern_half's layout, both at the slice start. */
static float slice_bf16(const uint16_t *w, const uint16_t *a, int kc) {
    const int kc8 = kc & ~7;
    float acc[HALF_LANES] = {0};
    for (int k = 0; k < kc8; k++) {
        float *l = &acc[k % HALF_LANES]; /* one rounding: the product is exact but for underflow */
        *l = flush(fmaf(flush(bf(w[k])), flush(bf(a[act_pos(k)])), *l));
    }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int k = kc8; k < kc; k++) s += bf(w[k]) * bf(a[act_pos(k)]);
    return s;
}

float kern_half_dot_ref(int type, const void *w_row, const void *a_row, int n) {
    if (type != CF_BF16) return NAN;
    float y = 0.0f;
    for (int k0 = 0; k0 < n; k0 += KERN_MM_KC) {
        const int kc = n - k0 < KERN_MM_KC ? n - k0 : KERN_MM_KC;
        const float s = slice_bf16((const uint16_t *)w_row + k0, (const uint16_t *)a_row + k0, kc);
        y = k0 ? y + s : s;
    }
    return y;
}

/* ==== the driver ================================================================ */

#if defined(__x86_64__)
typedef struct {
    cf_env *E;
    float *y;
    const uint16_t *a, *w;
    size_t as; /* activation row stride, elements */
    int n_out, n_in, n_tok;
} half_job;

static void mat_tiles(const half_job *j, uint16_t *tile, long tl0, long tl1) {
    for (long tl = tl0; tl < tl1; tl++) {
        const long r0 = tl * HALF_ROWS;
        const int nr = j->n_out - r0 < HALF_ROWS ? (int)(j->n_out - r0) : HALF_ROWS;
        for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
            const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
            const uint16_t *wr = j->w + (size_t)r0 * j->n_in + k0;
            kern_avx512bf16_pack(wr, (size_t)j->n_in, nr, kc, tile);
            kern_avx512bf16_mm(tile, wr, (size_t)j->n_in, nr, j->a + k0, j->as, j->n_tok, kc, j->y + r0,
                               (size_t)j->n_out, k0 > 0);
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
        _Alignas(64) uint16_t stack_tile[HALF_ROWS * KERN_MM_KC];
        mat_tiles(j, stack_tile, t0, t1);
    }
}

/* Rows r, r + stride, r + 2 stride, ... (nr <= 4 of them), every slice. */
static void vec_rows(const half_job *j, long r, long stride, int nr) {
    for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
        const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
        kern_avx512bf16_mv(j->w + (size_t)r * j->n_in + k0, (size_t)stride * j->n_in, nr, j->a + k0, kc,
                           j->y + r, (size_t)stride, k0 > 0);
    }
}

static void vec_worker(void *arg, int ith, int nth) {
    const half_job *j = arg;
    const long r0 = (long)j->n_out * ith / nth, r1 = (long)j->n_out * (ith + 1) / nth;
    const long part = (r1 - r0) / 4; /* 4 streams a part apart (kern.c, mm_vec_rows) */
    for (long r = r0; r < r0 + part; r++) vec_rows(j, r, part, 4);
    for (long r = r0 + 4 * part; r < r1; r += 4) vec_rows(j, r, 1, r1 - r < 4 ? (int)(r1 - r) : 4);
}
#endif

void kern_half_matmul(int isa, cf_env *E, float *y, const void *a, const void *w, int type, int n_out,
                      int n_in, int n_tok) {
#if defined(__x86_64__)
    if (kern_half_available(isa, type) && n_out > 0 && n_in > 0 && n_tok > 0) {
        half_job j = {E, y, a, w, kern_half_act_bytes(n_in) / sizeof(uint16_t), n_out, n_in, n_tok};
        void (*fn)(void *, int, int) = n_tok == 1 ? vec_worker : mat_worker;
        if ((long)n_out * n_in * n_tok < HALF_PAR_MIN_WORK || !E->pool) fn(&j, 0, 1);
        else pool_run((pool *)E->pool, fn, &j);
        return;
    }
#else
    (void)isa, (void)E, (void)a, (void)w, (void)type, (void)n_in;
#endif
    for (long i = 0; i < (long)n_out * n_tok; i++) y[i] = NAN;
}
