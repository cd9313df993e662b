/*
 * kern_rk_mm.c — repacking into the row-interleaved K-quant types (kern_rk.h)
 * and the matmul driver of their integer (act_quant) path; the leaves are
 * kern_rk.c (scalar), kern_rk_avx2.c and kern_rk_vnni.c.
 *
 * The driver is kern_r8_mm.c's with Q8_K activations (one or more weights
 * of one input, cf_kernels.matmul_n): each token is quantized once per call
 * to n_in/256 ggml block_q8_K (threads split the tokens) into thread 0's
 * pool scratch after kern_scratch_bytes(n_ctx) (292 bytes per 256 elements
 * and token, inside the 4 bytes per element kern_scratch_bytes_act
 * reserves), or a stack buffer without a pool; one token (decode): every
 * pool slot converts its own copy into its own scratch (rk_mm_worker).
 * Threads take ranges of row groups (kern_r8.h "takes") and walk them in
 * blocks of RK_WBLOCK weight bytes x RK_ABLOCK activation bytes (both
 * L2-resident).
 * Every (row, token) result is one leaf's sum over all super-blocks in
 * order, so it depends neither on the thread count nor on the token count.
 */
#include "kern_rk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "kern_q8.h"
#include "kern_r8.h"

#define RK_WBLOCK (256 * 1024)
#define RK_ABLOCK (192 * 1024)
#define RK_STACK_BYTES (128 * 1024)
#define RK_PAR_MIN_WORK 32768L
/* gemm2 (two row groups per call) wins on prompt tiles but loses 35 % on a
 * one-token decode (336M Q4_K_M tg, 1 thread: 46 vs 72 t/s): below this many
 * tokens the 8-row leaf runs.  Both give the scalar reference's bits. */
#define RK_GEMM2_MIN_TOK 4

static const char *rk_name(int type) {
    return type == CF_Q4_K_R8 ? "q4_k_r8" : type == CF_Q5_K_R8 ? "q5_k_r8" : type == CF_Q6_K_R8 ? "q6_k_r8"
         : type == CF_IQ4_XS_R8 ? "iq4_xs_r8" : "?";
}

/* ==== repack ========================================================================== */

int kern_rk_repack(int dst_type, int src_type, const void *src, int n_rows, int n_cols, void *dst,
                   char *err, size_t err_len) {
    const int bb = kern_rk_block_bytes(dst_type);
    if (!bb || n_rows <= 0 || n_cols <= 0 || n_rows % 8 || n_cols % KERN_QK_K) {
        if (err && err_len)
            snprintf(err, err_len, "repack to %s: %d x %d not supported (rows %% 8 == 0, columns %% 256 == 0)",
                     rk_name(dst_type), n_rows, n_cols);
        return -1;
    }
    const int nb = n_cols / KERN_QK_K;
    const size_t total = (size_t)(n_rows / 8) * nb * bb;
    if (src_type == dst_type) {
        memcpy(dst, src, total);
        return 0;
    }
    if (src_type != kern_rk_native(dst_type)) {
        if (err && err_len)
            snprintf(err, err_len, "repack to %s: source type %d is not its native K-quant (lossless repacks only)",
                     rk_name(dst_type), src_type);
        return -1;
    }
    const size_t nbytes = (size_t)bb / 8, rb = (size_t)nb * nbytes;
    for (int g = 0; g < n_rows / 8; g++)
        for (int b = 0; b < nb; b++) {
            const void *rows[8];
            for (int r = 0; r < 8; r++) rows[r] = (const uint8_t *)src + (size_t)(8 * g + r) * rb + (size_t)b * nbytes;
            kern_rk_pack(dst_type, rows, (uint8_t *)dst + ((size_t)g * nb + b) * bb);
        }
    return 0;
}

/* ==== the integer (act_quant) driver ==================================================== */

/* One weight of a call (kern_rk_matmul_n: up to CF_MATMUL_N_MAX, one input). */
typedef struct {
    kern_rk_gemm_fn gemm, gemm2; /* gemm2: two groups per call, or NULL */
    float *y;
    const uint8_t *w;
    int n_out, bb;
    long g0; /* its first row group in the call's numbering (the weights' groups in order) */
} rk_part;

typedef struct {
    int isa; /* quantizer */
    const float *x;
    kern_block_q8_k *a; /* n_tok rows of nb blocks */
    int n_in, n_tok, nb, n_part;
    int own_act;        /* decode: each pool slot converts the token into its own scratch */
    pool *pool;
    size_t act_off;     /* ... at this offset */
    rk_part part[CF_MATMUL_N_MAX];
    kern_r8_takes takes;
} rk_job;

/* What one slot's takes read: the job and the activations (own_act: NULL
 * until its first take converts them into dst). */
typedef struct {
    const rk_job *j;
    const kern_block_q8_k *a;
    kern_block_q8_k *dst;
} rk_slot;

/* tokens [t0, t1) to Q8_K rows in a */
static void rk_quant_rows(const rk_job *j, kern_block_q8_k *a, long t0, long t1) {
    /* every ISA's quantizer writes the same bytes; NEON uses the scalar one */
    const kern_quant_fn quant = j->isa == KERN_ISA_SIMD ? KERN_SIMD(kern_avx2_quantize_q8_k, kern_sc_quantize_q8_k)
                                                        : kern_sc_quantize_q8_k;
    for (long t = t0; t < t1; t++) quant(j->x + (size_t)t * j->n_in, a + (size_t)t * j->nb, j->n_in);
}

static void rk_quant_worker(void *arg, int ith, int nth) {
    const rk_job *j = arg;
    rk_quant_rows(j, j->a, (long)j->n_tok * ith / nth, (long)j->n_tok * (ith + 1) / nth);
}

/* Row groups [g0, g1) of one weight, every token. */
static void rk_part_range(const rk_job *j, const kern_block_q8_k *a, const rk_part *pt, long g0, long g1) {
    const size_t grp = (size_t)j->nb * pt->bb, tok = (size_t)j->nb * sizeof(kern_block_q8_k);
    long gstep = (long)(RK_WBLOCK / grp);
    if (gstep < 1) gstep = 1;
    if (pt->gemm2) gstep = gstep < 2 ? 2 : gstep & ~1L;
    int tstep = (int)(RK_ABLOCK / tok);
    if (tstep < KERN_RK_NT) tstep = KERN_RK_NT;
    tstep -= tstep % KERN_RK_NT;
    for (long gb = g0; gb < g1; gb += gstep) {
        const long ge = gb + gstep < g1 ? gb + gstep : g1;
        for (int tb = 0; tb < j->n_tok; tb += tstep) {
            const int te = tb + tstep < j->n_tok ? tb + tstep : j->n_tok;
            for (long g = gb; g < ge;) {
                const int two = pt->gemm2 && g + 1 < ge;
                const kern_rk_gemm_fn fn = two ? pt->gemm2 : pt->gemm;
                for (int t = tb; t < te; t += KERN_RK_NT) {
                    const int nt = te - t < KERN_RK_NT ? te - t : KERN_RK_NT;
                    fn(pt->w + (size_t)g * grp, a + (size_t)t * j->nb, (size_t)j->nb, j->nb, nt,
                       pt->y + (size_t)t * pt->n_out + 8 * g, (size_t)pt->n_out);
                }
                g += two ? 2 : 1;
            }
        }
    }
}

/* Groups [g0, g1) of the call: the parts of the weights they cover. */
static void rk_mm_range(void *slot, long g0, long g1) {
    rk_slot *sl = slot;
    const rk_job *j = sl->j;
    if (!sl->a) {
        rk_quant_rows(j, sl->dst, 0, 1);
        sl->a = sl->dst;
    }
    for (int i = 0; i < j->n_part; i++) {
        const rk_part *pt = &j->part[i];
        const long lo = g0 > pt->g0 ? g0 : pt->g0, e = pt->g0 + pt->n_out / 8, hi = g1 < e ? g1 : e;
        if (lo < hi) rk_part_range(j, sl->a, pt, lo - pt->g0, hi - pt->g0);
    }
}

/* Row groups in takes from the thread's own segment, then the others'
 * (kern_r8.h "takes"); own_act (decode): each slot converts the token into
 * its own scratch, slot 0 first thing, the others at their first take
 * (kern_r8_mm.c r8_mm_worker: why). */
static void rk_mm_worker(void *arg, int ith, int nth) {
    rk_job *j = arg;
    (void)nth;
    rk_slot sl = {j, j->a, NULL};
    if (j->own_act && ith == 0) rk_quant_rows(j, j->a, 0, 1);
    else if (j->own_act) {
        sl.dst = (kern_block_q8_k *)((uint8_t *)pool_scratch(j->pool, ith, NULL) + j->act_off);
        sl.a = NULL;
    }
    kern_r8_takes_run(&j->takes, ith, rk_mm_range, &sl);
}

static void rk_run(cf_env *E, long work, void (*fn)(void *, int, int), void *arg) {
    if (work < RK_PAR_MIN_WORK || !E->pool) fn(arg, 0, 1);
    else pool_run((pool *)E->pool, fn, arg);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static void rk_q8_matmul(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                         const int *type, const int *n_out, int n_in, int n_tok) {
    const int nb = n_in / KERN_QK_K;
    const size_t tok = (size_t)nb * sizeof(kern_block_q8_k);
    const kern_rk_leaves *lv = kern_rk_leaves_for(impl);
    rk_job j = {.isa = impl == KERN_R8_SCALAR ? KERN_ISA_SCALAR : KERN_ISA_SIMD,
                .x = x, .n_in = n_in, .n_tok = n_tok, .nb = nb, .n_part = n};
    long n_groups = 0, rows = 0;
    int pairs = 0;
    for (int i = 0; i < n; i++) {
        const int ti = kern_rk_index(type[i]);
        j.part[i] = (rk_part){.gemm = lv->gemm[ti] ? lv->gemm[ti] : kern_rk_scalar_leaves()->gemm[ti],
                              .gemm2 = lv->gemm[ti] && n_tok >= RK_GEMM2_MIN_TOK ? lv->gemm2[ti] : NULL,
                              .w = w[i], .n_out = n_out[i], .bb = kern_rk_block_bytes(type[i])};
        if (j.part[i].gemm2) n_groups = (n_groups + 1) & ~1L; /* pairs stay pairs (a group number unused) */
        j.part[i].g0 = n_groups;
        n_groups += n_out[i] / 8;
        rows += n_out[i];
        pairs |= j.part[i].gemm2 != NULL;
    }
    size_t have = 0;
    uint8_t *p = E->pool ? pool_scratch((pool *)E->pool, 0, &have) : NULL;
    const size_t off = align64(kern_scratch_bytes(E->n_ctx));
    long fit = p && have >= off + tok ? (long)((have - off) / tok) : 0;
#ifdef CINFER_TEST_BUILD
    if (E->pool && fit < n_tok && !kern_test_allow_small_scratch) {
        fprintf(stderr, "kern: pool scratch %zu bytes < %zu needed for act_quant; call pool_reserve(pool, "
                        "kern_scratch_bytes_act(n_ctx, n_batch, n_in_max))\n", have, off + tok * n_tok);
        abort();
    }
    if (E->pool && fit < n_tok) kern_test_note_fallback();
#endif
    _Alignas(64) uint8_t stack_buf[RK_STACK_BYTES];
    uint8_t *buf = p ? p + off : NULL;
    if (fit < 1) {
        fit = (long)(sizeof stack_buf / tok);
        buf = stack_buf;
        if (fit < 1) { /* one token does not fit (n_in > ~114k): exact f32 activations */
            kern_matmul_f32act_n(j.isa, E, n, y, x, w, type, n_out, n_in, 0, n_tok);
            return;
        }
    }
    const int chunk = fit >= n_tok ? n_tok : (int)fit;
    /* own_act needs one token in every slot's scratch, after the same offset */
    const int own_fits = p && buf == p + off && kern_r8_slots_fit((pool *)E->pool, off, tok);
    j.pool = (pool *)E->pool;
    j.act_off = off;
    for (int t0 = 0; t0 < n_tok; t0 += chunk) {
        const int nt = n_tok - t0 < chunk ? n_tok - t0 : chunk;
        for (int i = 0; i < n; i++) j.part[i].y = y[i] + (size_t)t0 * n_out[i];
        j.x = x + (size_t)t0 * n_in;
        j.n_tok = nt;
        j.a = (kern_block_q8_k *)buf;
        /* the quantize splits by tokens: one token (decode) every slot of
         * the matmul's run converts for itself, first */
        j.own_act = nt == 1 && own_fits;
        if (!j.own_act) rk_run(E, nt > 1 ? (long)nt * n_in * 8 : 0, rk_quant_worker, &j);
        const long work = rows * n_in * nt;
        kern_r8_takes_reset(&j.takes, n_groups,
                            work < RK_PAR_MIN_WORK || !E->pool ? 1 : pool_n_threads((pool *)E->pool), pairs);
        rk_run(E, work, rk_mm_worker, &j);
    }
}

void kern_rk_matmul_n_impl(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                           const int *type, const int *n_out, int n_in, int n_tok) {
    int ok = n >= 1 && n <= CF_MATMUL_N_MAX && n_in % KERN_QK_K == 0 && n_in > 0 && kern_r8_impl_available(impl);
    for (int i = 0; ok && i < n; i++) ok = kern_rk_block_bytes(type[i]) && n_out[i] % 8 == 0 && n_out[i] > 0;
    if (!ok) {
        for (int i = 0; i < n; i++)
            for (long k = 0; k < (long)(n_out[i] > 0 ? n_out[i] : 0) * n_tok; k++) y[i][k] = NAN;
        return;
    }
    if (E->act_quant) {
        rk_q8_matmul(impl, E, n, y, x, w, type, n_out, n_in, n_tok);
        return;
    }
    kern_matmul_f32act_n(impl == KERN_R8_SCALAR ? KERN_ISA_SCALAR : KERN_ISA_SIMD, E, n, y, x, w, type, n_out, n_in,
                         0, n_tok);
}

void kern_rk_matmul_impl(int impl, cf_env *E, float *y, const float *x, const void *w, int type, int n_out,
                         int n_in, int n_tok) {
    kern_rk_matmul_n_impl(impl, E, 1, &y, x, &w, &type, &n_out, n_in, n_tok);
}

void kern_rk_matmul_n(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                      const int *type, const int *n_out, int n_in, int n_tok) {
    kern_rk_matmul_n_impl(kern_r8_impl_for_isa(isa), E, n, y, x, w, type, n_out, n_in, n_tok);
}

void kern_rk_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type, int n_out, int n_in,
                    int n_tok) {
    kern_rk_matmul_impl(kern_r8_impl_for_isa(isa), E, y, x, w, type, n_out, n_in, n_tok);
}
