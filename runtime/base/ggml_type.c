/*
 * ggml_type.c — the GGML type table (see ggml_type.h).
 */
#include "ggml_type.h"

#include <assert.h>
#include <stddef.h>

/* ==== ggml type table ====================================================== */
/*
 * Block sizes and bytes per block as ggml defines them (ggml.c type_traits,
 * block layouts in ggml-common.h).  The byte counts are written as ggml's
 * block-struct formulas and pinned to the literal values by static_asserts, so
 * a typo in either shows up at compile time.
 */
#define QK_K 256
#define K_SCALE_SIZE 12
#define HALF 2 /* sizeof(ggml_half) */

#define SZ_Q4_0 (HALF + 32 / 2)
#define SZ_Q4_1 (2 * HALF + 32 / 2)
#define SZ_Q5_0 (HALF + 4 + 32 / 2)
#define SZ_Q5_1 (2 * HALF + 4 + 32 / 2)
#define SZ_Q8_0 (HALF + 32)
#define SZ_Q8_1 (2 * HALF + 32)
#define SZ_Q2_K (2 * HALF + QK_K / 16 + QK_K / 4)
#define SZ_Q3_K (HALF + QK_K / 4 + QK_K / 8 + 12)
#define SZ_Q4_K (2 * HALF + K_SCALE_SIZE + QK_K / 2)
#define SZ_Q5_K (2 * HALF + K_SCALE_SIZE + QK_K / 2 + QK_K / 8)
#define SZ_Q6_K (HALF + QK_K / 16 + 3 * QK_K / 4)
#define SZ_Q8_K (4 + QK_K + QK_K / 16 * 2)
#define SZ_IQ2_XXS (HALF + QK_K / 8 * 2)
#define SZ_IQ2_XS (HALF + QK_K / 8 * 2 + QK_K / 32)
#define SZ_IQ3_XXS (HALF + 3 * (QK_K / 8))
#define SZ_IQ1_S (HALF + QK_K / 8 + QK_K / 16)
#define SZ_IQ4_NL (HALF + 32 / 2)
#define SZ_IQ3_S (HALF + 13 * (QK_K / 32) + QK_K / 64)
#define SZ_IQ2_S (HALF + QK_K / 4 + QK_K / 16)
#define SZ_IQ4_XS (HALF + 2 + QK_K / 64 + QK_K / 2)
#define SZ_IQ1_M (QK_K / 8 + QK_K / 16 + QK_K / 32)
#define SZ_TQ1_0 (HALF + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5)
#define SZ_TQ2_0 (HALF + QK_K / 4)
#define SZ_MXFP4 (1 + 32 / 2)

static_assert(SZ_Q4_0 == 18 && SZ_Q4_1 == 20 && SZ_Q5_0 == 22 && SZ_Q5_1 == 24, "q4/q5 block size");
static_assert(SZ_Q8_0 == 34 && SZ_Q8_1 == 36, "q8 block size");
static_assert(SZ_Q2_K == 84 && SZ_Q3_K == 110 && SZ_Q4_K == 144, "k-quant block size");
static_assert(SZ_Q5_K == 176 && SZ_Q6_K == 210 && SZ_Q8_K == 292, "k-quant block size");
static_assert(SZ_IQ2_XXS == 66 && SZ_IQ2_XS == 74 && SZ_IQ3_XXS == 98 && SZ_IQ1_S == 50, "iq block size");
static_assert(SZ_IQ4_NL == 18 && SZ_IQ3_S == 110 && SZ_IQ2_S == 82 && SZ_IQ4_XS == 136, "iq block size");
static_assert(SZ_IQ1_M == 56 && SZ_TQ1_0 == 54 && SZ_TQ2_0 == 66 && SZ_MXFP4 == 17, "iq/tq/mxfp4 block size");

static const ggml_type_info type_table[] = {
    [GGML_TYPE_F32] = {"F32", 1, 4},
    [GGML_TYPE_F16] = {"F16", 1, 2},
    [GGML_TYPE_Q4_0] = {"Q4_0", 32, SZ_Q4_0},
    [GGML_TYPE_Q4_1] = {"Q4_1", 32, SZ_Q4_1},
    [4] = {NULL, 0, 0}, /* Q4_2, removed */
    [5] = {NULL, 0, 0}, /* Q4_3, removed */
    [GGML_TYPE_Q5_0] = {"Q5_0", 32, SZ_Q5_0},
    [GGML_TYPE_Q5_1] = {"Q5_1", 32, SZ_Q5_1},
    [GGML_TYPE_Q8_0] = {"Q8_0", 32, SZ_Q8_0},
    [GGML_TYPE_Q8_1] = {"Q8_1", 32, SZ_Q8_1},
    [GGML_TYPE_Q2_K] = {"Q2_K", QK_K, SZ_Q2_K},
    [GGML_TYPE_Q3_K] = {"Q3_K", QK_K, SZ_Q3_K},
    [GGML_TYPE_Q4_K] = {"Q4_K", QK_K, SZ_Q4_K},
    [GGML_TYPE_Q5_K] = {"Q5_K", QK_K, SZ_Q5_K},
    [GGML_TYPE_Q6_K] = {"Q6_K", QK_K, SZ_Q6_K},
    [GGML_TYPE_Q8_K] = {"Q8_K", QK_K, SZ_Q8_K},
    [GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", QK_K, SZ_IQ2_XXS},
    [GGML_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, SZ_IQ2_XS},
    [GGML_TYPE_IQ3_XXS] = {"IQ3_XXS", QK_K, SZ_IQ3_XXS},
    [GGML_TYPE_IQ1_S] = {"IQ1_S", QK_K, SZ_IQ1_S},
    [GGML_TYPE_IQ4_NL] = {"IQ4_NL", 32, SZ_IQ4_NL},
    [GGML_TYPE_IQ3_S] = {"IQ3_S", QK_K, SZ_IQ3_S},
    [GGML_TYPE_IQ2_S] = {"IQ2_S", QK_K, SZ_IQ2_S},
    [GGML_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, SZ_IQ4_XS},
    [GGML_TYPE_I8] = {"I8", 1, 1},
    [GGML_TYPE_I16] = {"I16", 1, 2},
    [GGML_TYPE_I32] = {"I32", 1, 4},
    [GGML_TYPE_I64] = {"I64", 1, 8},
    [GGML_TYPE_F64] = {"F64", 1, 8},
    [GGML_TYPE_IQ1_M] = {"IQ1_M", QK_K, SZ_IQ1_M},
    [GGML_TYPE_BF16] = {"BF16", 1, 2},
    [31] = {NULL, 0, 0}, /* Q4_0_4_4, removed */
    [32] = {NULL, 0, 0}, /* Q4_0_4_8, removed */
    [33] = {NULL, 0, 0}, /* Q4_0_8_8, removed */
    [GGML_TYPE_TQ1_0] = {"TQ1_0", QK_K, SZ_TQ1_0},
    [GGML_TYPE_TQ2_0] = {"TQ2_0", QK_K, SZ_TQ2_0},
    [36] = {NULL, 0, 0}, /* IQ4_NL_4_4, removed */
    [37] = {NULL, 0, 0}, /* IQ4_NL_4_8, removed */
    [38] = {NULL, 0, 0}, /* IQ4_NL_8_8, removed */
    [GGML_TYPE_MXFP4] = {"MXFP4", 32, SZ_MXFP4},
};
static_assert(sizeof type_table / sizeof type_table[0] == GGML_TYPE_COUNT,
              "type_table must have one entry per ggml type id");
static_assert(GGML_TYPE_MXFP4 == 39 && GGML_TYPE_COUNT == 40, "ggml_type ids drifted");

/* cinfer's repacked types (gguf.h): 8 rows interleaved, the bytes of the 8
 * plain rows; block and byte sizes per 32 elements of one row, so row bytes
 * and tensor sizes come out as for the plain type.  kern_repack_bytes must
 * agree (tests/test_precision.c checks it). */
static const ggml_type_info cinfer_type_table[GGUF_CINFER_TYPE_LAST - GGUF_CINFER_TYPE_FIRST + 1] = {
    [GGUF_CINFER_TYPE_Q4_0_R8 - GGUF_CINFER_TYPE_FIRST] = {"Q4_0_R8", 32, SZ_Q4_0},
    [GGUF_CINFER_TYPE_Q8_0_R8 - GGUF_CINFER_TYPE_FIRST] = {"Q8_0_R8", 32, SZ_Q8_0},
    [GGUF_CINFER_TYPE_Q4_K_R8 - GGUF_CINFER_TYPE_FIRST] = {"Q4_K_R8", 256, SZ_Q4_K},
    [GGUF_CINFER_TYPE_Q5_K_R8 - GGUF_CINFER_TYPE_FIRST] = {"Q5_K_R8", 256, SZ_Q5_K},
    [GGUF_CINFER_TYPE_Q6_K_R8 - GGUF_CINFER_TYPE_FIRST] = {"Q6_K_R8", 256, SZ_Q6_K},
    [GGUF_CINFER_TYPE_IQ4_XS_R8 - GGUF_CINFER_TYPE_FIRST] = {"IQ4_XS_R8", 256, SZ_IQ4_XS},
};

const ggml_type_info *ggml_type_get(uint32_t t) {
    if (t >= GGUF_CINFER_TYPE_FIRST && t <= GGUF_CINFER_TYPE_LAST)
        return cinfer_type_table[t - GGUF_CINFER_TYPE_FIRST].name
                   ? &cinfer_type_table[t - GGUF_CINFER_TYPE_FIRST] : NULL;
    if (t >= GGML_TYPE_COUNT || !type_table[t].name) return NULL;
    return &type_table[t];
}

const char *ggml_type_name(uint32_t t) {
    const ggml_type_info *ti = ggml_type_get(t);
    return ti ? ti->name : "unknown";
}

uint64_t ggml_row_bytes(uint32_t t, uint64_t n) {
    const ggml_type_info *ti = ggml_type_get(t);
    if (!ti || n % ti->blck_size) return 0;
    uint64_t blocks = n / ti->blck_size;
    if (blocks > UINT64_MAX / ti->type_size) return 0;
    return blocks * ti->type_size;
}
