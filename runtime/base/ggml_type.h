/*
 * ggml_type.h — the GGML tensor type vocabulary: type ids, block sizes and
 * bytes per block, as ggml defines them (ggml.h enum ggml_type, ggml.c
 * type_traits), plus cinfer's own repacked types.
 *
 * Shared by every layer that speaks about tensor types — the GGUF reader and
 * writer, the kernels, the compiler — so none of them has to include another
 * for it (docs/architecture.md, "Layers").
 */
#ifndef CINFER_GGML_TYPE_H
#define CINFER_GGML_TYPE_H

#include <stdint.h>

/* ggml tensor type ids (ggml.h enum ggml_type).  Gaps are ids ggml removed. */
enum ggml_type {
    GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17, GGML_TYPE_IQ3_XXS = 18, GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20, GGML_TYPE_IQ3_S = 21, GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25, GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_IQ1_M = 29, GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34, GGML_TYPE_TQ2_0 = 35, GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40,
};

/* cinfer's own repacked weight types (templates/prelude.h CF_Q4_0_R8 / CF_Q8_0_R8,
 * layouts in runtime/kernels/kern.h): ids GGUF_CINFER_TYPE_FIRST..LAST, which ggml
 * does not define.  gguf_open accepts them only in a file that carries a
 * `cinfer.version` key (a .giw bundle, runtime/engine/giw.h); anywhere else they are
 * an unknown-type error, as in llama.cpp.  Tensors of these types need a row
 * count (ne[1]·ne[2]·ne[3]) that is a multiple of GGUF_CINFER_TYPE_ROWS: they
 * store groups of 8 rows interleaved, in exactly the bytes of the 8 plain rows
 * (Q4_0_R8: 18 bytes per 32 elements, Q8_0_R8: 34; the K-quant ones per 256:
 * Q4_K_R8 144, Q5_K_R8 176, Q6_K_R8 210, IQ4_XS_R8 136). */
enum {
    GGUF_CINFER_TYPE_Q4_0_R8 = 100,
    GGUF_CINFER_TYPE_Q8_0_R8 = 101,
    GGUF_CINFER_TYPE_Q4_K_R8 = 102,
    GGUF_CINFER_TYPE_Q5_K_R8 = 103,
    GGUF_CINFER_TYPE_Q6_K_R8 = 104,
    GGUF_CINFER_TYPE_IQ4_XS_R8 = 105,
    GGUF_CINFER_TYPE_FIRST = 100,
    GGUF_CINFER_TYPE_LAST = 109,
    GGUF_CINFER_TYPE_ROWS = 8,
};

typedef struct {
    const char *name;   /* "Q4_K"; NULL for ids ggml removed */
    uint32_t blck_size; /* elements per block (1 for plain types) */
    uint32_t type_size; /* bytes per block */
} ggml_type_info;

/* Type table entry for id t (a ggml type, or a cinfer repacked type above),
 * or NULL when t is unknown/removed. */
const ggml_type_info *ggml_type_get(uint32_t t);
/* "Q4_K", or "unknown" */
const char *ggml_type_name(uint32_t t);
/* Bytes of one row of n elements of type t; 0 when t is unknown or n is not a
 * multiple of the block size. */
uint64_t ggml_row_bytes(uint32_t t, uint64_t n);

#endif
