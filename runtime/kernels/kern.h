/*
 * kern.h — CPU compute kernels behind the cf_kernels table (templates/prelude.h).
 *
 * Two instruction sets: KERN_ISA_SCALAR (portable C, the reference every
 * other path is tested against) and KERN_ISA_AVX2 (AVX2 + FMA + F16C, in the
 * *_avx2.c files, the only ones built with those flags).  kern_best_isa()
 * picks one from CPUID once at start-up; nothing here executes an AVX2
 * instruction unless the caller chose KERN_ISA_AVX2.  Within KERN_ISA_AVX2
 * some leaves have an AVX-512 variant (*_vnni.c, *_avx512.c: the R8 integer
 * GEMM, 4-head attention) that runs only when CPUID reports AVX-512
 * F/BW/VL/VNNI with ZMM state enabled (kern_r8_impl_available, kern_r8.h).
 *
 * Numerics (the parity target is llama.cpp run on the exact F32
 * dequantization of the weights): activations and accumulators are f32;
 * matmul is dot(dequant(W row), x).  Where ggml uses double (the sum of
 * squares in rms_norm, the sum of exponentials in softmax) so do we; RoPE
 * angles are built like ggml's rope cache (theta *= powf(base, -2/n_rot) in
 * float, cosf/sinf).
 *
 * With cf_env.act_quant = 1 matmul instead does what llama.cpp's CPU backend
 * does: each activation row is converted to the weight type's vec_dot_type
 * (Q8_0/Q8_1/Q8_K, F16, BF16) and multiplied with integer dot products
 * (kern_q8.h); results then match llama.cpp running the quantized file, not
 * its F32 dequantization.  Where those formats would overflow (an F16
 * activation above 65504, a Q8_0/Q8_1 block scale beyond f16) cinfer keeps
 * f32 (kern_q8.h) and llama.cpp gets inf/NaN.
 *
 * Batch invariance: every kernel computes a token's results — each matmul
 * output, its attention output and KV rows, every row-wise op — with the
 * same arithmetic whatever the number of tokens in the call and the token's
 * place among them (kern.c "matmul"; tests/test_kern_batch.c).  A new leaf
 * or path must keep it: a decoded token, a batched one and a reused prefix
 * must give the same bits.
 *
 * Weight types: ggml block layouts (ggml-common.h), see kern_type_supported.
 * Per-type code is one row of a table indexed by type id (kern.c): block
 * size, bytes, and per-ISA leaves (dequant_row, the fused mat-vec, the
 * act_quant dots).  Adding a type is adding that row and its leaf functions.
 *
 * Scratch.  Kernels never allocate.  matmul (n_tokens > 1) and attention use
 * per-thread scratch owned by the pool in E->pool: size it once, outside the
 * token loop, with pool_reserve(pool, kern_scratch_bytes(n_ctx)).  With
 * E->pool == NULL kernels run single-threaded on stack buffers
 * (KERN_MM_TILE_BYTES + 16*n_ctx bytes of stack: scores of up to 4 attention
 * heads; meant for tests and tools).
 * A test build (CINFER_TEST_BUILD) aborts when a non-NULL pool has too
 * little scratch; other builds fall back to the stack (and act_quant matmuls
 * convert their tokens in chunks), which a test build exercises when
 * kern_test_allow_small_scratch is set (below).
 */
#ifndef CINFER_KERN_H
#define CINFER_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "prelude.h"

/* Two slots: the scalar reference and the SIMD ISA of the build's
 * architecture — AVX2+FMA+F16C on x86-64 (*_avx2.c), Advanced SIMD on
 * aarch64 (*_neon.c, with *_dotprod.c leaves where the CPU has the Armv8.2
 * dot product, chosen at start-up: kern_cpu_dotprod).  KERN_ISA_AVX2 and
 * KERN_ISA_NEON both name the SIMD slot, so the drivers and tests are the
 * same on both; a build compiles only its architecture's SIMD files
 * (Makefile ISA flags per file). */
enum { KERN_ISA_SCALAR = 0, KERN_ISA_SIMD = 1, KERN_ISA_COUNT = 2 };
#define KERN_ISA_AVX2 KERN_ISA_SIMD
#define KERN_ISA_NEON KERN_ISA_SIMD
/* KERN_SIMD(avx2_leaf, neon_leaf): the leaf this architecture's SIMD slot uses. */
#if defined(__x86_64__)
#define KERN_SIMD(avx2, neon) avx2
#elif defined(__aarch64__)
#define KERN_SIMD(avx2, neon) neon
#else
#define KERN_SIMD(avx2, neon) 0
#endif
/* 1 on aarch64 when the CPU has the dot-product instructions (HWCAP_ASIMDDP),
 * unless kern_neon_force_dotprod(0) turned them off; 0 elsewhere. */
int kern_cpu_dotprod(void);
/* Tests and benchmarks: 0 runs the plain NEON leaves on a dotprod CPU, 1 the
 * dotprod ones (refused, -1, where the CPU lacks them), -1 the default. */
int kern_neon_force_dotprod(int on);

/* Best ISA this CPU runs: KERN_ISA_AVX2 when it has avx2, fma and f16c (and the
 * OS saves YMM state), from CPUID. */
int kern_best_isa(void);
/* 1 when this CPU can run isa. */
int kern_isa_available(int isa);
/* 1 when the CPU and OS give AVX-512 F/BW/VL/VNNI with ZMM state (and AVX2):
 * the gate of the R8 VNNI GEMM and the 4-head attention (kern_att_avx512.c). */
int kern_cpu_avx512vnni(void);
/* 1 when kern_cpu_avx512vnni() and the CPU has AVX512_BF16 (vdpbf16ps): the
 * gate of the BF16 weight leaves (kern_half.h). */
int kern_cpu_avx512bf16(void);
/* "scalar", "avx2", "neon"; "unknown" otherwise. */
const char *kern_isa_name(int isa);
/* What matmuls on this CPU run, for reports: kern_isa_name(kern_best_isa()),
 * plus "+avx512vnni" when the interleaved (R8) kernels use AVX-512 VNNI. */
const char *kern_cpu_label(void);
/* Kernel table for isa (static storage), or NULL when isa is unknown or this
 * CPU cannot run it. */
const cf_kernels *kern_table(int isa);

/* Bytes of per-thread scratch the kernels need for a KV cache of n_ctx
 * positions (pool_reserve argument). */
size_t kern_scratch_bytes(int n_ctx);
/* The matmul weight tile: KERN_MM_ROWS rows of KERN_MM_KC floats. */
#define KERN_MM_ROWS 16
#define KERN_MM_KC 512
#define KERN_MM_TILE_BYTES ((size_t)KERN_MM_ROWS * KERN_MM_KC * sizeof(float))

/* ---- weight types ---------------------------------------------------------
 * Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, and the
 * 256-element super-block types of kern_kquants.h: Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, Q8_K, IQ4_XS, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0 (ids as in prelude.h CF_* /
 * gguf.h enum ggml_type).  Rows of n elements need n to be a multiple of the
 * block size (32 or 256 for the quantized types, 1 otherwise). */
int kern_type_supported(int type);
/* Elements per block; 0 when unsupported. */
int kern_type_block(int type);
/* Bytes of one row of n elements; 0 when unsupported or n not a multiple of
 * the block size. */
size_t kern_row_bytes(int type, int n);

/* KV cache row types (cf_env.kv_type_k/v): CF_F32, CF_F16, CF_Q8_0, CF_Q4_0. */
int kern_kv_type_supported(int type);
/* Bytes of one cache row of n values of type; 0 when type is not a KV cache
 * type or n is not a multiple of its block (32 for Q8_0/Q4_0). */
size_t kern_kv_row_bytes(int type, int n);

/* dst (n) = exact f32 value of the n elements at src (scalar reference). */
void kern_dequant_row(int type, const void *src, float *dst, int n);
/* The same through isa's implementation (bit-identical to the scalar one). */
void kern_dequant_row_isa(int isa, int type, const void *src, float *dst, int n);
/* Σ dequant(w_row)[i] * x[i] in f32 exactly as isa's f32-activation matmul
 * computes one output of one token (the same bits).  NaN for an unsupported
 * type or isa, and for the R8 types (rows not addressable). */
float kern_dot_row(int isa, int type, const void *w_row, const float *x, int n);

/* ---- quantized activations (cf_env.act_quant = 1; kern_q8.h) ---------------
 * In act_quant mode a matmul first converts each activation row to the
 * weight type's "vec_dot_type", as llama.cpp's CPU backend does, and then
 * multiplies with integer dot products: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1
 * (ggml type 9) for Q4_1/Q5_1, Q8_K (15) for the 256-element types, F16 for
 * F16, BF16 for BF16; F32 and Q8_K weights keep f32 activations.
 * The scratch that mode needs: kern_scratch_bytes_act. */

/* Tokens one kern_dot_q_rows call takes at most (the mat-mat micro-kernel width). */
#define KERN_Q8_NT 4

/* vec_dot_type of weights of `type` (a ggml type id; CF_F32 when activations
 * stay f32); -1 when `type` is unsupported. */
int kern_vec_dot_type(int type);
/* Bytes of one activation row of n elements in the vec_dot_type of `type`
 * (n * 4 for CF_F32); 0 when unsupported or n is not a multiple of its block. */
size_t kern_act_row_bytes(int type, int n);
/* dst (kern_act_row_bytes(type, n) bytes) = x (n) converted to the
 * vec_dot_type of `type` through isa's quantizer (every ISA writes the same
 * bytes).  0, or -1 when unsupported / isa unavailable (dst untouched). */
int kern_quantize_act_row(int isa, int type, const float *x, void *dst, int n);
/* s[t] = Σ_i dequant(w_row)[i] * dequant(a_t)[i], t < nt (1..KERN_Q8_NT),
 * a_t = (const char *)a + t * a_stride holding a row made by
 * kern_quantize_act_row: the integer dot of isa (ggml_vec_dot_<type>_<vdt>).
 * 0, or -1 when `type` has no integer dot (F32, F16, BF16, Q8_K) or isa is
 * unavailable. */
int kern_dot_q_rows(int isa, int type, const void *w_row, const void *a, size_t a_stride,
                    int nt, int n, float *s);
/* Per-thread scratch for every kernel including act_quant matmuls of up to
 * n_batch tokens and n_in_max inputs (pool_reserve argument); thread 0's
 * buffer holds the converted activations after the kern_scratch_bytes(n_ctx)
 * the other kernels use (decode: every thread's, its own copy).  Without it (or without a pool) act_quant matmuls
 * convert tokens in chunks through a 128 KiB stack buffer. */
size_t kern_scratch_bytes_act(int n_ctx, int n_batch, int n_in_max);

#ifdef CINFER_TEST_BUILD
/* Test builds only.  Nonzero: a pool whose scratch is too small takes the
 * fallback other builds take (stack buffers, chunked activations) instead of
 * aborting, so tests can check that those paths compute the same numbers;
 * kern_test_scratch_fallbacks counts the kernel calls (per thread part) that
 * took one.  Set and read them outside kernel calls. */
extern int kern_test_allow_small_scratch;
extern long kern_test_scratch_fallbacks;
void kern_test_note_fallback(void); /* atomic ++kern_test_scratch_fallbacks */
#endif

/* IEEE half <-> float: f16 -> f32 exact; f32 -> f16 round to nearest even. */
float kern_f16_to_f32(uint16_t h);
uint16_t kern_f32_to_f16(float f);
/* Row versions; an isa this CPU lacks runs the scalar code (same results). */
void kern_f16_to_f32_row(int isa, const uint16_t *src, float *dst, int n);
void kern_f32_to_f16_row(int isa, const float *src, uint16_t *dst, int n);

/* ---- mixture of experts (kern_moe.c) ----------------------------------------
 * The largest expert count and top-k the routing and expert kernels take
 * (DeepSeek-V3: 256 experts, top-8); the compiler refuses more, the kernels
 * give NaN outputs. */
#define KERN_MOE_MAX_EXPERTS 1024
#define KERN_MOE_MAX_K 64
/* Scratch floats cf_kernels.moe_matmul needs for n_tok tokens: the greater of
 * n_tok * k * (n_in + n_out + 1) (the rows sorted by expert, their results
 * and the order) and the converted activations of one token's k slots. */
long kern_moe_scratch_floats(int n_tok, int n_in, int n_out, int k);

/* ---- row-interleaved repacked types (compute precisions; kern_r8.c) -------
 * CF_Q4_0_R8 (100) and CF_Q8_0_R8 (101) hold ggml Q4_0 / Q8_0 numerics
 * (w = d * (code - 8), w = d * q) re-laid so that one 256-bit load feeds 8
 * output rows.  A matrix of n_rows x n_cols (n_rows % 8 == 0, n_cols % 32
 * == 0) is n_rows/8 row groups, stored one after the other; group g holds
 * rows 8g..8g+7 as n_cols/32 blocks in column order.  Block b of a group
 * covers columns 32b..32b+31 of its 8 rows, byte by byte:
 *
 *   Q4_0_R8 block, 144 bytes (= 8 ggml block_q4_0):
 *     [  0.. 15]  d[r], r = 0..7: f16 scale of row r (little-endian)
 *     [ 16..143]  4 chunks of 32 bytes; chunk c (0..3), byte 4r+i (r 0..7,
 *                 i 0..3): low nibble = code of (row r, column 4c+i), high
 *                 nibble = code of (row r, column 16+4c+i); code = q + 8.
 *                 (= bytes qs[4c..4c+3] of row r's ggml block: a 4-byte
 *                 interleave, so Q4_0 -> Q4_0_R8 is lossless)
 *   Q8_0_R8 block, 272 bytes (= 8 ggml block_q8_0):
 *     [  0.. 15]  d[r], f16 as above
 *     [ 16..271]  8 chunks of 32 bytes; chunk c (0..7), byte 4r+i: the int8
 *                 q of (row r, column 4c+i)  (= ggml qs[4c..4c+3] of row r)
 *
 * So 32-bit lane r of a chunk loaded into a ymm holds row r's codes for 4
 * consecutive columns: vpdpbusd / vpmaddubsw+vpmaddwd against the 4 matching
 * activation bytes broadcast to every lane give 8 rows' partial dots at once.
 * Size semantics: kern_row_bytes(type, n) is the bytes per row *averaged over
 * a group* (n/32 * 18 or 34, the ggml sizes), so n_rows * kern_row_bytes is
 * the matrix size, but a single row is not addressable on its own: the
 * per-row helpers (kern_dequant_row*, kern_dot_row) refuse these types
 * (NaN); get_rows dequantizes row r out of group r/8 (tied embeddings).  matmul needs n_out % 8 == 0 (else NaN output, never a crash)
 * and runs both act_quant modes: 1 = activations to Q8_0 and integer dots
 * (W4A8/W8A8, llama.cpp's numerics), 0 = f32 activations times the exactly
 * dequantized weights. */
#define KERN_R8_ROWS 8
#define KERN_Q4_0_R8_BLOCK 144
#define KERN_Q8_0_R8_BLOCK 272

/* 1 for CF_Q4_0_R8 / CF_Q8_0_R8. */
int kern_type_is_r8(int type);
/* ---- row-interleaved K-quant types (kern_rk.c, internals in kern_rk.h) -----
 * CF_Q4_K_R8 (102), CF_Q5_K_R8 (103), CF_Q6_K_R8 (104), CF_IQ4_XS_R8 (105)
 * hold ggml Q4_K / Q5_K / Q6_K / IQ4_XS numerics, 8 rows per group like the R8 types above, in super-blocks
 * of 256 columns: group g holds rows 8g..8g+7 as n_cols/256 super-blocks in
 * column order, each exactly the bytes of the 8 native blocks re-laid (so
 * the repack is lossless and the sizes are the native ones).  A "chunk" is
 * 32 bytes whose byte 4r+i (r 0..7, i 0..3) belongs to row r: 32-bit lane r
 * of a ymm holds row r's codes for 4 consecutive columns.
 *
 *   Q4_K_R8 super-block, 1152 bytes (= 8 block_q4_K):
 *     [   0..  15]  d[r] f16        [16..31]  dmin[r] f16
 *     [  32..  95]  byte 8j+r: (sc_j & 15) | (m_j & 15) << 4 of row r
 *                   (sc_j, m_j: the 6-bit scale and min of sub-block j,
 *                   columns 32j..32j+31, ggml get_scale_min_k4)
 *     [  96.. 127]  byte 8(j/2)+r, nibble j&1 (low nibble: even j):
 *                   (sc_j >> 4) | (m_j >> 4) << 2
 *     [ 128..1151]  chunk (p, c) at 128 + 256p + 32c (p 0..3, c 0..7):
 *                   byte 4r+i = row r's ggml qs[32p+4c+i]: low nibble
 *                   column 64p+4c+i, high nibble column 64p+32+4c+i
 *   Q5_K_R8 super-block, 1408 bytes (= 8 block_q5_K): Q4_K_R8's 1152, then
 *     [1152..1407]  chunk c at 1152 + 32c: byte 4r+i = row r's ggml
 *                   qh[4c+i]: bit j = fifth bit of column 32j+4c+i
 *   Q6_K_R8 super-block, 1680 bytes (= 8 block_q6_K):
 *     [   0..  15]  d[r] f16
 *     [  16.. 143]  byte 16k+2r+e: int8 scale sc_(2k+e) of row r (sub-block
 *                   s = columns 16s..16s+15)
 *     [ 144..1167]  chunk (p, c) at 144 + 256p + 32c: byte 4r+i: low nibble
 *                   = low 4 bits of column 64p+4c+i, high nibble = of column
 *                   64p+32+4c+i (a nibble shuffle of ggml's ql)
 *     [1168..1679]  chunk (h, c) at 1168 + 256h + 32c (h 0..1): byte 4r+i =
 *                   row r's ggml qh[32h+4c+i]: bits 2k..2k+1 = high 2 bits
 *                   of column 128h+32k+4c+i
 *   IQ4_XS_R8 super-block, 1088 bytes (= 8 block_iq4_xs):
 *     [   0..  15]  d[r] f16        [16..31]  scales_h[r] u16 (ggml's: bits
 *                   2j..2j+1 = high 2 bits of ls_j)
 *     [  32..  63]  byte 8p+r = row r's ggml scales_l[p] (low nibble: low
 *                   4 bits of ls_2p, high nibble: of ls_2p+1; the sub-block
 *                   scale is ls - 32)
 *     [  64..1087]  chunk (g, c) at 64 + 128g + 32c (g 0..7, c 0..3): byte
 *                   4r+i = row r's ggml qs[16g+4c+i]: low nibble column
 *                   32g+4c+i, high nibble column 32g+16+4c+i (codebook
 *                   indices, kern_iq4nl_values)
 * Like the R8 types: kern_row_bytes is the native row size, single rows are
 * not addressable (per-row helpers refuse them), matmul needs n_out % 8 == 0
 * and runs both act_quant modes (kern_rk.h has the numerics). */
#define CF_Q4_K_R8 102
#define CF_Q5_K_R8 103
#define CF_Q6_K_R8 104
#define CF_IQ4_XS_R8 105
#define KERN_Q4_K_R8_BLOCK 1152
#define KERN_Q5_K_R8_BLOCK 1408
#define KERN_Q6_K_R8_BLOCK 1680
#define KERN_IQ4_XS_R8_BLOCK 1088

/* 1 for CF_Q4_K_R8 / CF_Q5_K_R8 / CF_Q6_K_R8 / CF_IQ4_XS_R8. */
int kern_type_is_rk(int type);
/* Bytes the repacked copy of an n_rows x n_cols matrix takes; 0 when dst_type
 * cannot hold it (not an R8/RK type, n_rows % 8, n_cols % 32 (RK: % 256),
 * non-positive). */
size_t kern_repack_bytes(int dst_type, int n_rows, int n_cols);
/* dst = src (n_rows x n_cols, ggml type src_type, any supported type) re-laid
 * as dst_type.  Q4_0->Q4_0_R8 and Q8_0->Q8_0_R8 (and R8 -> the same R8 type)
 * are byte shuffles (lossless), and so are Q4_K/Q5_K/Q6_K/IQ4_XS -> their RK type
 * (the only source an RK type takes); other R8 sources are dequantized to f32 and
 * quantized with ggml's reference quantizer (quantize_row_q4_0_ref /
 * q8_0_ref rounding, runtime/kernels/quant.c).  0, or -1 with a one-line message in
 * err when the type pair or shape is unsupported or memory runs out. */
int kern_repack(int dst_type, int src_type, const void *src, int n_rows, int n_cols, void *dst,
                char *err, size_t err_len);
/* dst (n_rows x n_cols f32, row-major) = exact values of an R8 matrix
 * (scalar).  0, or -1 for a non-R8 type or bad shape (dst untouched). */
int kern_r8_dequant(int type, const void *src, int n_rows, int n_cols, float *dst);

/* ---- internal: shared between kern.c and kern_avx2.c ----------------------
 * Not for other modules. */

typedef void (*kern_dequant_fn)(const void *src, float *dst, int n);
/* s[t] = dot(w, a_t) over n elements for t < nt (1..KERN_Q8_NT), a_t at
 * (const char *)a + t * a_stride in the type's vec_dot_type (kern_q8.h). */
typedef void (*kern_dot_q_fn)(const void *w, const void *a, size_t a_stride, int nt, int n,
                              float *s);
/* s[0..3] = dot(w, a_t) over n elements for the 4 tokens of a, activation
 * blocks interleaved by token (kern_block_q8x4, kern_q8.h). */
typedef void (*kern_gemm4_fn)(const void *w, const void *a, int n, float *s);
/* s[0..3] = dot(w_r, a) over n elements for the 4 weight rows w_r = (const
 * char *)w + r * w_stride (0: one row four times) and the token in slot 0 of
 * the kern_block_q8x4 blocks a: per row exactly the float work gemm4 does for
 * one of its tokens, so mat-vec and mat-mat results agree bit for bit. */
typedef void (*kern_gemv4_fn)(const void *w, size_t w_stride, const void *a, int n, float *s);
/* Fused mat-vec slice: for rows r < n_rows (row r at (const char *)w + r *
 * row_bytes, pointing at the slice's first block) y[r] = s_r, or y[r] += s_r
 * when accumulate, where s_r = Σ_k dequant(w_r)[k] · x[k] over k < kc is
 * computed exactly as the ISA's tile_mm computes it for one token on the
 * dequantized row (kern.c, "matmul": the batch-invariance contract). */
typedef void (*kern_mv_fn)(const void *w, size_t row_bytes, int n_rows, const float *x, int kc,
                           float *y, int accumulate);

typedef struct {
    const char *name;
    int blck;                              /* elements per block */
    int type_size;                         /* bytes per block */
    kern_dequant_fn dequant[KERN_ISA_COUNT];
    int vec_dot_type;                      /* act_quant: activations' ggml type (CF_F32: none) */
    kern_dot_q_fn dot_q[KERN_ISA_COUNT];   /* act_quant: integer dot; NULL for F32/F16/BF16/Q8_K */
    kern_gemm4_fn gemm4[KERN_ISA_COUNT];   /* act_quant mat-mat, Q8_0/Q8_1 types; NULL: dot_q */
    kern_gemv4_fn gemv4[KERN_ISA_COUNT];   /* act_quant mat-vec, the types with gemm4 */
    kern_mv_fn mv[KERN_ISA_COUNT];         /* f32 mat-vec, fused; NULL: dequantized tile + tile_mm */
} kern_type_ops;

/* The leaves an ISA supplies to the shared drivers in kern.c. */
typedef struct {
    /* y[t*ys + r] (=, or += when accumulate) Σ_k w[r*ws + k] * x[t*xs + k]
     * for r < n_rows, t < n_tok, k < kc.  Each (r, t) is summed the same way
     * whatever n_rows and n_tok are: this order is the one every f32 matmul
     * path reproduces (kern.c "matmul"). */
    void (*tile_mm)(const float *w, size_t ws, int n_rows, const float *x, size_t xs, int n_tok,
                    int kc, float *y, size_t ys, int accumulate);
    float (*dot_f32)(const float *a, const float *b, int n);
    /* y += a * x */
    void (*axpy)(float *y, float a, const float *x, int n);
    /* s[i] = expf(s[i] - max); returns Σ s[i] accumulated in double. */
    double (*softmax_exp)(float *s, int n, float max);
    void (*rms_norm_row)(float *y, const float *x, const float *w, int n, float eps);
    void (*swiglu_row)(float *y, const float *g, const float *u, int n);
    void (*f16_to_f32_row)(const uint16_t *src, float *dst, int n);
    void (*f32_to_f16_row)(const float *src, uint16_t *dst, int n);
} kern_isa_ops;

const kern_type_ops *kern_type_ops_get(int type); /* NULL when unsupported */
/* The f32-activation matmul (what matmul does with act_quant 0); kern_q8.c
 * runs it on rounded activations for F16/BF16 weights. */
void kern_matmul_f32act(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                        int n_out, int n_in, int n_tok);
/* The same for n weights of one input (cf_kernels.matmul_n's arrays), tokens
 * [t0, t0 + nt) only. */
static inline void kern_matmul_f32act_n(int isa, cf_env *E, int n, float *const *y, const float *x,
                                        const void *const *w, const int *type, const int *n_out, int n_in, int t0,
                                        int nt) {
    for (int i = 0; i < n; i++)
        kern_matmul_f32act(isa, E, y[i] + (size_t)t0 * n_out[i], x + (size_t)t0 * n_in, w[i], type[i], n_out[i],
                           n_in, nt);
}

/* The f32 drivers of kern.c (threading, tiling, KV-cache writes) behind the
 * cf_kernels entries of the same names (templates/prelude.h documents the
 * shapes); kern_table.c binds them per ISA. */
void kern_drv_get_rows(int isa, cf_env *E, float *y, const void *w, int type, int n, const int *ids,
                       int n_tok);
void kern_drv_rms_norm(int isa, cf_env *E, float *y, const float *x, const float *w, int n, float eps,
                       int n_tok);
void kern_drv_swiglu(int isa, cf_env *E, float *y, const float *g, const float *u, int n, int n_tok);
void kern_drv_rope(cf_env *E, float *x, int n_head, int head_dim, int n_rot, float freq_base, int mode,
                   float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow,
                   int n_ctx_orig, const float *freq_factors, int n_tok);
void kern_drv_attention(int isa, cf_env *E, float *out, const float *q, const float *k, const float *v,
                        const float *sinks, int layer, int n_head, int n_head_kv, int head_dim,
                        int head_dim_v, float scale, int window, float softcap, int n_tok);
void kern_drv_add(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok);
void kern_drv_last_row(cf_env *E, float *y, const float *x, int n, int n_tok);

/* kern_scalar.c: the scalar reference leaves every SIMD leaf is tested against */
extern const kern_isa_ops kern_scalar_ops;
void kern_sc_dequant_f32(const void *src, float *dst, int n);
void kern_sc_dequant_f16(const void *src, float *dst, int n);
void kern_sc_dequant_bf16(const void *src, float *dst, int n);
void kern_sc_dequant_q4_0(const void *src, float *dst, int n);
void kern_sc_dequant_q4_1(const void *src, float *dst, int n);
void kern_sc_dequant_q5_0(const void *src, float *dst, int n);
void kern_sc_dequant_q5_1(const void *src, float *dst, int n);
void kern_sc_dequant_q8_0(const void *src, float *dst, int n);
void kern_sc_dequant_iq4_nl(const void *src, float *dst, int n);
void kern_sc_dequant_mxfp4(const void *src, float *dst, int n);
/* the kern_isa_ops leaves an ISA without its own may share */
double kern_sc_softmax_exp(float *s, int n, float max);
void kern_sc_rms_norm_row(float *y, const float *x, const float *w, int n, float eps);
void kern_sc_swiglu_row(float *y, const float *g, const float *u, int n);

/* kern_avx2.c */
extern const kern_isa_ops kern_avx2_ops;
void kern_avx2_dequant_f16(const void *src, float *dst, int n);
void kern_avx2_dequant_bf16(const void *src, float *dst, int n);
void kern_avx2_dequant_q4_0(const void *src, float *dst, int n);
void kern_avx2_dequant_q4_1(const void *src, float *dst, int n);
void kern_avx2_dequant_q5_0(const void *src, float *dst, int n);
void kern_avx2_dequant_q5_1(const void *src, float *dst, int n);
void kern_avx2_dequant_q8_0(const void *src, float *dst, int n);
void kern_avx2_dequant_iq4_nl(const void *src, float *dst, int n);
void kern_avx2_dequant_mxfp4(const void *src, float *dst, int n);
#define KERN_AVX2_MV_DECL(t)                                                               \
    void kern_avx2_mv_##t(const void *w, size_t row_bytes, int n_rows, const float *x, int kc, \
                          float *y, int accumulate);
KERN_AVX2_MV_DECL(f16)
KERN_AVX2_MV_DECL(bf16)
KERN_AVX2_MV_DECL(q4_0)
KERN_AVX2_MV_DECL(q4_1)
KERN_AVX2_MV_DECL(q5_0)
KERN_AVX2_MV_DECL(q5_1)
KERN_AVX2_MV_DECL(q8_0)
KERN_AVX2_MV_DECL(iq4_nl)
KERN_AVX2_MV_DECL(mxfp4)
#undef KERN_AVX2_MV_DECL

/* kern_neon.c (aarch64): the f32 row primitives and the F16, Q4_0, Q8_0 leaves */
extern const kern_isa_ops kern_neon_ops;
void kern_neon_dequant_f16(const void *src, float *dst, int n);
void kern_neon_dequant_q4_0(const void *src, float *dst, int n);
void kern_neon_dequant_q8_0(const void *src, float *dst, int n);

/* kern_att_avx2.c: one attention head, head_dim % 8 == 0 (kern.c att_block).
 * scores: s[p] = scale * Σ_d q[d] k[p*ks + d] for p < n; returns max s.
 * wsum: o[d] = Σ_p (s[p] * inv) v[p*vs + d], fma in key order; accumulate:
 * the chain starts from o's values instead of 0 (a later tile of keys).
 * k and v rows hold f32 values, or with f16 != 0 IEEE halves (an F16 cache
 * in place; strides ks, vs in values either way): the same bits as the
 * rows converted to f32 first. */
float kern_avx2_att_scores(const float *q, const void *k, size_t ks, int n, int hd, float scale, float *s,
                           int f16);
void kern_avx2_att_wsum(float *o, const float *s, float inv, const void *v, size_t vs, int n, int hd, int accumulate,
                        int f16);

/* kern_att_avx512.c: 4 query heads sharing a kv head (rows q + h*qs, h < 4),
 * head_dim % 16 == 0; only when kern_r8_impl_available(KERN_R8_VNNI) (the
 * AVX-512 F/BW/VL/VNNI gate, kern_r8.h).  scores4: s[h*ss + p] = scale *
 * q_h·k_p, p < n, and max[h] = max_p of head h's scores.  wsum4: o[h*os + d]
 * = Σ_p (s[h*ss + p] * inv[h]) v[p*vs + d], fma in key order (accumulate: from o's
 * values, as kern_avx2_att_wsum); k, v: f32 or (f16) halves as there. */
void kern_avx512_att_scores4(const float *q, size_t qs, const void *k, size_t ks, int n, int hd,
                             float scale, float *s, size_t ss, float *max, int f16);
void kern_avx512_att_wsum4(float *o, size_t os, const float *s, size_t ss, const float *inv, const void *v,
                           size_t vs, int n, int hd, int accumulate, int f16);

/* ggml block layouts (ggml-common.h); kern.c static_asserts their sizes. */
#define KERN_QK 32
typedef struct { uint16_t d; uint8_t qs[KERN_QK / 2]; } kern_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[KERN_QK / 2]; } kern_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[KERN_QK / 2]; } kern_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[KERN_QK / 2]; } kern_block_q5_1;
typedef struct { uint16_t d; int8_t qs[KERN_QK]; } kern_block_q8_0;
typedef struct { uint16_t d; uint8_t qs[KERN_QK / 2]; } kern_block_iq4_nl;
extern const int8_t kern_iq4nl_values[16];
/* MXFP4 (OCP microscaling FP4, gpt-oss): an E8M0 exponent e and 32 E2M1
 * codes; value = kern_mxfp4_values[code] * 2^(e - 128) (the table holds
 * twice the E2M1 values, so the scale is half of 2^(e - 127)). */
typedef struct { uint8_t e; uint8_t qs[KERN_QK / 2]; } kern_block_mxfp4;
extern const int8_t kern_mxfp4_values[16];
/* ggml_e8m0_to_fp32_half: 2^(e - 128) as f32 (e < 2: the denormals). */
static inline float kern_e8m0_half(uint8_t e) {
    union { uint32_t u; float f; } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

#endif
