/*
 * kern_moe.c — mixture of experts: routing, the expert matmul, the weighted
 * sum; and the per-head matmul of multi-head latent attention (kern_moe.h).
 *
 * Routing follows llama.cpp's build_moe_ffn step by step (probabilities,
 * biased selection scores, group limit, top-k, weights from the unbiased
 * probabilities, softmax over the chosen, renormalisation clamped at F16's
 * smallest normal, scale), with ggml's softmax numerics (max subtracted,
 * exponentials summed in double, scaled by the float of 1/sum).
 *
 * The expert matmul reads only the chosen experts' matrices.  The (token,
 * slot) rows are grouped by expert (a counting sort of the route): each
 * chosen expert's token rows are gathered into scratch, multiplied by the
 * dense driver (kern_mm.h: the mat-vec for one row, mat-mat tiles, 4-token
 * integer blocks, R8 GEMM for more) — so the expert's weights are streamed
 * once for all its rows — and scattered back.  A decoded token takes the
 * same path with one row per chosen expert, so by the dense kernels' batch
 * invariance (kern.h) a token's result is the same bits whatever tokens
 * share the call, and the arithmetic does not depend on the thread count.
 */
#include "kern_moe.h"

#include <math.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"
#include "kern_mm.h"
#include "kern_q8.h"
#include "kern_r8.h"

#define PAR_MIN_WORK 32768L /* as kern.c: below this many multiply-adds, one thread */

static void run(cf_env *E, long work, void (*fn)(void *, int, int), void *arg) {
    if (work < PAR_MIN_WORK) fn(arg, 0, 1);
    else pool_run((pool *)E->pool, fn, arg);
}

static void fill_nan(float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = NAN;
}

static const kern_isa_ops *isa_ops(int isa) {
    return isa == KERN_ISA_SIMD ? KERN_SIMD(&kern_avx2_ops, &kern_neon_ops) : &kern_scalar_ops;
}

int kern_route_id(const float *route_row, int k, int j) {
    int32_t id;
    memcpy(&id, route_row + k + j, sizeof id);
    return id;
}

long kern_moe_scratch_floats(int n_tok, int n_in, int n_out, int k) {
    long per_tok = (long)n_tok * k * (n_in + n_out + 1);
    /* one token: k converted activation rows; an R8 quad takes 5.5 bytes per
     * element (kern_block_q8x4 holds 4 tokens, one is used) */
    long one = 2L * k * n_in + 64;
    return per_tok > one ? per_tok : one;
}

/* ==== routing ===================================================================== */

/* p[i] = softmax(x)[i] as ggml_soft_max computes it. */
static void softmax_ggml(float *p, const float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        p[i] = expf(x[i] - max);
        sum += (double)p[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) p[i] *= inv;
}

/* Index of the largest s[i] among i < n with used[i] == 0 (lowest index on
 * ties); 0 when every one is used (callers never ask then). */
static int argmax_unused(const float *s, const unsigned char *used, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!used[i] && (best < 0 || s[i] > s[best])) best = i;
    return best < 0 ? 0 : best;
}

static void route_token(float *out, const float *lg, const float *bias, int n_expert, int k,
                        int gating, int norm, float scale, int n_group, int n_group_used) {
    float p[KERN_MOE_MAX_EXPERTS], sel[KERN_MOE_MAX_EXPERTS];
    unsigned char used[KERN_MOE_MAX_EXPERTS];
    if (gating == CF_GATING_SOFTMAX) softmax_ggml(p, lg, n_expert);
    else if (gating == CF_GATING_SIGMOID)
        for (int i = 0; i < n_expert; i++) p[i] = 1.0f / (1.0f + expf(-lg[i]));
    else memcpy(p, lg, (size_t)n_expert * sizeof *p);
    for (int i = 0; i < n_expert; i++) sel[i] = bias ? p[i] + bias[i] : p[i];
    if (n_group > 1) { /* keep the n_group_used groups with the best top-2 sums */
        const int per = n_expert / n_group;
        float gs[KERN_MOE_MAX_EXPERTS];
        for (int g = 0; g < n_group; g++) {
            memset(used, 0, (size_t)per);
            const int a = argmax_unused(sel + g * per, used, per);
            used[a] = 1;
            const int b = argmax_unused(sel + g * per, used, per);
            gs[g] = per > 1 ? sel[g * per + a] + sel[g * per + b] : sel[g * per + a];
        }
        memset(used, 0, (size_t)n_group);
        for (int u = 0; u < n_group_used; u++) used[argmax_unused(gs, used, n_group)] = 1;
        for (int g = 0; g < n_group; g++)
            if (!used[g])
                for (int i = 0; i < per; i++) sel[g * per + i] = -INFINITY;
    }
    memset(used, 0, (size_t)n_expert);
    float w[KERN_MOE_MAX_K];
    int32_t id[KERN_MOE_MAX_K];
    for (int j = 0; j < k; j++) {
        id[j] = argmax_unused(sel, used, n_expert);
        used[id[j]] = 1;
        w[j] = p[id[j]];
    }
    if (gating == CF_GATING_SOFTMAX_WEIGHT) {
        float t[KERN_MOE_MAX_K];
        softmax_ggml(t, w, k);
        memcpy(w, t, (size_t)k * sizeof *w);
    }
    if (norm) {
        float sum = 0.0f;
        for (int j = 0; j < k; j++) sum += w[j];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f; /* as llama.cpp: F16's smallest normal */
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= scale;
    memcpy(out, w, (size_t)k * sizeof *w);
    memcpy(out + k, id, (size_t)k * sizeof *id);
}

void kern_moe_route(cf_env *E, float *route, const float *logits, const float *bias,
                    int n_expert, int k, int gating, int norm, float scale, int n_group,
                    int n_group_used, int n_tok) {
    (void)E;
    const int grouped = n_group > 1;
    if (n_expert < 1 || n_expert > KERN_MOE_MAX_EXPERTS || k < 1 || k > KERN_MOE_MAX_K ||
        k > n_expert || gating < CF_GATING_SOFTMAX || gating > CF_GATING_SOFTMAX_WEIGHT ||
        (grouped && (n_expert % n_group || n_group_used < 1 || n_group_used > n_group ||
                     n_group_used * (n_expert / n_group) < k))) {
        fill_nan(route, 2L * (k > 0 ? k : 0) * n_tok); /* ids read as NaN bits: out of range */
        return;
    }
    for (int t = 0; t < n_tok; t++)
        route_token(route + (size_t)t * 2 * k, logits + (size_t)t * n_expert, bias, n_expert, k,
                    gating, norm, scale, n_group, n_group_used);
}

void kern_moe_sum(cf_env *E, float *y, const float *x, const float *route,
                  const float *expert_scale, int n, int k, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        const float *w = route + (size_t)t * 2 * k, *xt = x + (size_t)t * k * n;
        float *yt = y + (size_t)t * n;
        if (expert_scale) { /* ggml: (experts · down_exps_s[e]) · weight, then the sum */
            for (int j = 0; j < k; j++) {
                const float s = expert_scale[kern_route_id(w, k, j)];
                for (int i = 0; i < n; i++) {
                    const float v = xt[(size_t)j * n + i] * s * w[j];
                    yt[i] = j ? yt[i] + v : v;
                }
            }
            continue;
        }
        for (int i = 0; i < n; i++) yt[i] = xt[i] * w[0];
        for (int j = 1; j < k; j++)
            for (int i = 0; i < n; i++) yt[i] += xt[(size_t)j * n + i] * w[j];
    }
}

/* ==== the expert matmul ================================================================ */

/* F16/BF16 weights with act_quant: llama.cpp rounds the activations to the
 * weight's format; round them, then the f32 leaves run (as kern_q8_mm.c). */
static void round_acts(int isa, int vdt, const float *x, float *dst, int n) {
    uint16_t h[256];
    for (int k0 = 0; k0 < n; k0 += 256) {
        const int kc = n - k0 < 256 ? n - k0 : 256;
        if (vdt == CF_BF16) {
            kern_sc_quantize_bf16(x + k0, h, kc);
            for (int i = 0; i < kc; i++) dst[k0 + i] = bf16_to_f32(h[i]);
        } else {
            (isa == KERN_ISA_SIMD ? KERN_SIMD(kern_avx2_quantize_f16, kern_sc_quantize_f16)
                                  : kern_sc_quantize_f16)(x + k0, h, kc);
            kern_f16_to_f32_row(isa, h, dst + k0, kc);
        }
    }
}

/* The (token, slot) rows sorted by expert (a counting sort,
 * token order kept within an expert), gathered into scratch in that order by
 * all threads, each expert's contiguous block multiplied by the dense driver
 * (its weights streamed once for all its rows), the results scattered back
 * (+ bias) by all threads. */
typedef struct {
    float *y;
    const float *x, *ys, *bias;
    float *xs;
    const int32_t *order, *expert; /* (n_tok * k): source row, its expert; by sorted position */
    int n_in, n_out, k, x_per_slot;
    long n_rows;
} moe_move_job;

static void moe_gather_worker(void *arg, int ith, int nth) {
    const moe_move_job *j = arg;
    for (long r = j->n_rows * ith / nth; r < j->n_rows * (ith + 1) / nth; r++) {
        const long src = j->x_per_slot ? j->order[r] : j->order[r] / j->k; /* slot row or token row */
        memcpy(j->xs + (size_t)r * j->n_in, j->x + (size_t)src * j->n_in, (size_t)j->n_in * sizeof(float));
    }
}

static void moe_scatter_worker(void *arg, int ith, int nth) {
    const moe_move_job *j = arg;
    for (long r = j->n_rows * ith / nth; r < j->n_rows * (ith + 1) / nth; r++) {
        float *yr = j->y + (size_t)j->order[r] * j->n_out;
        const float *src = j->ys + (size_t)r * j->n_out;
        if (!j->bias) {
            memcpy(yr, src, (size_t)j->n_out * sizeof(float));
            continue;
        }
        const float *b = j->bias + (size_t)j->expert[r] * j->n_out;
        for (int i = 0; i < j->n_out; i++) yr[i] = src[i] + b[i];
    }
}

static void moe_grouped(int isa, cf_env *E, float *y, const float *x, const float *route,
                        const uint8_t *w, size_t eb, int type, int n_out, int n_in, int n_expert, int k,
                        int x_per_slot, const float *bias, float *scratch, int n_tok) {
    const long n_rows = (long)n_tok * k;
    float *xs = scratch, *ys = scratch + (size_t)n_rows * n_in;
    int32_t *order = (int32_t *)(ys + (size_t)n_rows * n_out);
    int32_t *expert;
    int cnt[KERN_MOE_MAX_EXPERTS + 1], fill[KERN_MOE_MAX_EXPERTS];
    memset(cnt, 0, (size_t)(n_expert + 1) * sizeof *cnt);
    for (long i = 0; i < n_rows; i++) cnt[kern_route_id(route + (i / k) * 2 * k, k, (int)(i % k)) + 1]++;
    for (int e = 0; e < n_expert; e++) cnt[e + 1] += cnt[e];
    memcpy(fill, cnt, (size_t)n_expert * sizeof *fill);
    for (long i = 0; i < n_rows; i++)
        order[fill[kern_route_id(route + (i / k) * 2 * k, k, (int)(i % k))]++] = (int32_t)i;
    moe_move_job mj = {y, x, ys, bias, xs, order, NULL, n_in, n_out, k, x_per_slot, n_rows};
    run(E, n_rows * n_in, moe_gather_worker, &mj);
    for (int e = 0; e < n_expert; e++) {
        const int n_e = cnt[e + 1] - cnt[e];
        if (n_e)
            kern_matmul_dispatch(isa, E, ys + (size_t)cnt[e] * n_out, xs + (size_t)cnt[e] * n_in,
                                 w + (size_t)e * eb, type, n_out, n_in, n_e);
    }
    if (bias) { /* the sorted row's expert, into the gathered rows' space (no longer needed) */
        expert = (int32_t *)xs;
        for (int e = 0; e < n_expert; e++)
            for (int r = cnt[e]; r < cnt[e + 1]; r++) expert[r] = e;
        mj.expert = expert;
    }
    run(E, n_rows * n_out, moe_scatter_worker, &mj);
}

void kern_moe_matmul(int isa, cf_env *E, float *y, const float *x, const float *route,
                     const void *w, int type, int n_out, int n_in, int n_expert, int k,
                     int x_per_slot, const float *bias, float *scratch, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    const long n_y = (long)n_tok * k * n_out;
    if (!ty || n_in % ty->blck || (kern_type_is_r8(type) && (n_out % 8 || n_in % 32)) ||
        (!kern_type_is_r8(type) && !ty->dequant[isa]) || k < 1 || k > KERN_MOE_MAX_K ||
        n_expert < 1 || n_expert > KERN_MOE_MAX_EXPERTS) {
        fill_nan(y, n_y);
        return;
    }
    for (long i = 0; i < (long)n_tok * k; i++) { /* a bad route never reads past the tensor */
        const int e = kern_route_id(route + (i / k) * 2 * k, k, (int)(i % k));
        if (e < 0 || e >= n_expert) {
            fill_nan(y, n_y);
            return;
        }
    }
    const size_t eb = (size_t)n_out * kern_row_bytes(type, n_in);
    moe_grouped(isa, E, y, x, route, (const uint8_t *)w, eb, type, n_out, n_in, n_expert, k, x_per_slot, bias,
                scratch, n_tok);
}

/* ==== per-head matmul (MLA) ============================================================= */

typedef struct {
    cf_env *E;
    const kern_isa_ops *ops;
    const kern_type_ops *ty;
    int isa, type;
    float *y;
    const float *x;
    const uint8_t *w;
    int n_out, n_in, n_head, head_rows, row0, n_tok;
    size_t rb;          /* bytes per weight row */
    const uint8_t *a;   /* act_quant: head rows of x in the type's vec_dot_type, arb bytes each */
    size_t arb;
} hmm_job;

static const uint8_t *hmm_row(const hmm_job *j, int h, int r) {
    return j->w + (size_t)((long)h * j->head_rows + j->row0 + r) * j->rb;
}

/* Per-thread tile: the pool's scratch, or NULL (the caller's stack). */
static float *tile_of(cf_env *E, int ith) {
    size_t have = 0;
    float *p = pool_scratch((pool *)E->pool, ith, &have);
    return p && have >= KERN_MM_TILE_BYTES ? p : NULL;
}

/* quantized activations: units are (head, output row), the integer dot per
 * token (KERN_Q8_NT tokens at a time; each token's arithmetic the same
 * whatever nt: batch invariance, kern.h) */
static void hmm_vec_worker(void *arg, int ith, int nth) {
    const hmm_job *j = arg;
    const long total = (long)j->n_head * j->n_out;
    const size_t ys = (size_t)j->n_head * j->n_out, as = (size_t)j->n_head * j->arb;
    for (long u = total * ith / nth; u < total * (ith + 1) / nth; u++) {
        const int h = (int)(u / j->n_out), r = (int)(u % j->n_out);
        float s[KERN_Q8_NT];
        for (int t0 = 0; t0 < j->n_tok; t0 += KERN_Q8_NT) {
            const int nt = j->n_tok - t0 < KERN_Q8_NT ? j->n_tok - t0 : KERN_Q8_NT;
            j->ty->dot_q[j->isa](hmm_row(j, h, r), j->a + t0 * as + (size_t)h * j->arb, as, nt, j->n_in, s);
            for (int t = 0; t < nt; t++) j->y[(t0 + t) * ys + u] = s[t];
        }
    }
}

/* f32 activations, one token or more: units are (head, 16-row tile); per KC
 * slice the tile is dequantized once and multiplied with every token's head
 * row by tile_mm, whose per-(row, token) sum does not depend on the number
 * of tokens (batch invariance, kern.h) */
static void hmm_mat_units(const hmm_job *j, float *tile, long u0, long u1) {
    const long tiles = (j->n_out + KERN_MM_ROWS - 1) / KERN_MM_ROWS;
    const int blck = j->ty->blck, tsz = j->ty->type_size;
    for (long u = u0; u < u1; u++) {
        const int h = (int)(u / tiles), r0 = (int)(u % tiles) * KERN_MM_ROWS;
        const int nr = j->n_out - r0 < KERN_MM_ROWS ? j->n_out - r0 : KERN_MM_ROWS;
        for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
            const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
            const float *wt = tile;
            size_t ws = KERN_MM_KC;
            if (j->type == CF_F32) {
                wt = (const float *)hmm_row(j, h, r0) + k0;
                ws = (size_t)j->n_in;
            } else {
                for (int r = 0; r < nr; r++)
                    j->ty->dequant[j->isa](hmm_row(j, h, r0 + r) + (size_t)(k0 / blck) * tsz,
                                           tile + (size_t)r * KERN_MM_KC, kc);
            }
            j->ops->tile_mm(wt, ws, nr, j->x + (size_t)h * j->n_in + k0, (size_t)j->n_head * j->n_in,
                            j->n_tok, kc, j->y + (size_t)h * j->n_out + r0,
                            (size_t)j->n_head * j->n_out, k0 > 0);
        }
    }
}

static void hmm_mat_worker(void *arg, int ith, int nth) {
    const hmm_job *j = arg;
    const long total = (long)j->n_head * ((j->n_out + KERN_MM_ROWS - 1) / KERN_MM_ROWS);
    const long u0 = total * ith / nth, u1 = total * (ith + 1) / nth;
    if (u0 == u1) return;
    float *tile = tile_of(j->E, ith);
    if (tile) {
        hmm_mat_units(j, tile, u0, u1);
    } else {
        _Alignas(64) float stack_tile[KERN_MM_ROWS * KERN_MM_KC];
        hmm_mat_units(j, stack_tile, u0, u1);
    }
}

/* transposed: y_h = Σ_i x_h[i] · row_i, rows of n_out; units are heads, each
 * row dequantized once (in KC-wide column chunks) for all tokens */
static void hmm_tr_units(const hmm_job *j, float *buf, long h0, long h1) {
    const int blck = j->ty->blck, tsz = j->ty->type_size;
    const size_t ys = (size_t)j->n_head * j->n_out, xs = (size_t)j->n_head * j->n_in;
    for (long h = h0; h < h1; h++) {
        for (int t = 0; t < j->n_tok; t++)
            memset(j->y + t * ys + (size_t)h * j->n_out, 0, (size_t)j->n_out * sizeof(float));
        for (int c0 = 0; c0 < j->n_out; c0 += KERN_MM_KC) {
            const int cc = j->n_out - c0 < KERN_MM_KC ? j->n_out - c0 : KERN_MM_KC;
            for (int i = 0; i < j->n_in; i++) {
                const float *row = buf;
                if (j->type == CF_F32) row = (const float *)hmm_row(j, (int)h, i) + c0;
                else j->ty->dequant[j->isa](hmm_row(j, (int)h, i) + (size_t)(c0 / blck) * tsz, buf, cc);
                for (int t = 0; t < j->n_tok; t++)
                    j->ops->axpy(j->y + t * ys + (size_t)h * j->n_out + c0,
                                 j->x[t * xs + (size_t)h * j->n_in + i], row, cc);
            }
        }
    }
}

static void hmm_tr_worker(void *arg, int ith, int nth) {
    const hmm_job *j = arg;
    const long h0 = (long)j->n_head * ith / nth, h1 = (long)j->n_head * (ith + 1) / nth;
    if (h0 == h1) return;
    float *tile = tile_of(j->E, ith);
    if (tile) {
        hmm_tr_units(j, tile, h0, h1);
    } else {
        _Alignas(64) float stack_buf[KERN_MM_KC];
        hmm_tr_units(j, stack_buf, h0, h1);
    }
}

void kern_head_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                      int n_out, int n_in, int n_head, int head_rows, int row0, int transposed,
                      float *scratch, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    const int row_len = transposed ? n_out : n_in;
    /* transposed rows are dequantized in KC-wide chunks: whole blocks each */
    if (!ty || kern_type_is_r8(type) || !ty->dequant[isa] || row_len % ty->blck ||
        (transposed && n_out > KERN_MM_KC && KERN_MM_KC % ty->blck) ||
        row0 + (transposed ? n_in : n_out) > head_rows) {
        fill_nan(y, (long)n_tok * n_head * n_out);
        return;
    }
    hmm_job j = {E, isa_ops(isa), ty, isa, type, y, x, w, n_out, n_in, n_head, head_rows, row0,
                 n_tok, kern_row_bytes(type, row_len), NULL, 0};
    const long work = (long)n_tok * n_head * n_out * n_in;
    if (transposed) {
        run(E, work, hmm_tr_worker, &j);
        return;
    }
    /* act_quant: each head's row converted like ggml_mul_mat converts src1
     * rows (a per-head matmul there is a batched mul_mat over heads) */
    const long rows = (long)n_tok * n_head;
    if (E->act_quant && ty->vec_dot_type != CF_F32 && kern_act_row_bytes(type, n_in) && scratch) {
        if (ty->dot_q[isa]) {
            j.arb = kern_act_row_bytes(type, n_in);
            for (long r = 0; r < rows; r++)
                kern_quantize_act_row(isa, type, x + (size_t)r * n_in, (uint8_t *)scratch + (size_t)r * j.arb,
                                      n_in);
            j.a = (const uint8_t *)scratch;
            run(E, work, hmm_vec_worker, &j);
            return;
        }
        for (long r = 0; r < rows; r++) /* F16 / BF16: rounded f32 activations */
            round_acts(isa, ty->vec_dot_type, x + (size_t)r * n_in, scratch + (size_t)r * n_in, n_in);
        j.x = scratch;
    }
    run(E, work, hmm_mat_worker, &j);
}
