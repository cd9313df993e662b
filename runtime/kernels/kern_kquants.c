/*
 * kern_kquants.c — scalar reference leaves for the 256-element weight types
 * (kern_kquants.h): the codebooks and dequantize_row of Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, Q8_K, IQ4_XS, IQ3_XXS, IQ3_S, TQ1_0 and TQ2_0.
 *
 * These are the oracles the AVX2 leaves (kern_kquants_avx2.c) and the
 * parity tests are checked against, so they follow ggml's
 * dequantize_row_* (ggml/src/ggml-quants.c) statement by statement, in the
 * same element order and with the same float operations.  The f32 matmul
 * multiplies these values (kern.c); the integer dots are kern_q8.c's.
 *
 * Built without ISA flags (no FMA contraction on x86-64), like kern.c.
 */
#include "kern_kquants.h"

#include <assert.h>
#include <string.h>

#include "base/f16.h"
#include "base/ggml_type.h"
#include "kern.h" /* kern_iq4nl_values (kvalues_iq4nl) */

static_assert(sizeof(kern_block_q2_k) == 84, "block_q2_K is 84 bytes in ggml");
static_assert(sizeof(kern_block_q3_k) == 110, "block_q3_K is 110 bytes in ggml");
static_assert(sizeof(kern_block_q4_k) == 144, "block_q4_K is 144 bytes in ggml");
static_assert(sizeof(kern_block_q5_k) == 176, "block_q5_K is 176 bytes in ggml");
static_assert(sizeof(kern_block_q6_k) == 210, "block_q6_K is 210 bytes in ggml");
static_assert(sizeof(kern_block_q8_k) == 292, "block_q8_K is 292 bytes in ggml");
static_assert(sizeof(kern_block_iq4_xs) == 136, "block_iq4_xs is 136 bytes in ggml");
static_assert(sizeof(kern_block_iq3_xxs) == 98, "block_iq3_xxs is 98 bytes in ggml");
static_assert(sizeof(kern_block_iq3_s) == 110, "block_iq3_s is 110 bytes in ggml");
static_assert(sizeof(kern_block_tq1_0) == 54, "block_tq1_0 is 54 bytes in ggml");
static_assert(sizeof(kern_block_tq2_0) == 66, "block_tq2_0 is 66 bytes in ggml");
#define KQ_SAME_ID(a, b) ((int)(a) == (int)(b))
static_assert(KQ_SAME_ID(KERN_T_Q2_K, GGML_TYPE_Q2_K) && KQ_SAME_ID(KERN_T_Q3_K, GGML_TYPE_Q3_K) &&
                  KQ_SAME_ID(KERN_T_Q4_K, GGML_TYPE_Q4_K) && KQ_SAME_ID(KERN_T_Q5_K, GGML_TYPE_Q5_K) &&
                  KQ_SAME_ID(KERN_T_Q6_K, GGML_TYPE_Q6_K) && KQ_SAME_ID(KERN_T_Q8_K, GGML_TYPE_Q8_K) &&
                  KQ_SAME_ID(KERN_T_IQ3_XXS, GGML_TYPE_IQ3_XXS) &&
                  KQ_SAME_ID(KERN_T_IQ3_S, GGML_TYPE_IQ3_S) &&
                  KQ_SAME_ID(KERN_T_IQ4_XS, GGML_TYPE_IQ4_XS) &&
                  KQ_SAME_ID(KERN_T_TQ1_0, GGML_TYPE_TQ1_0) && KQ_SAME_ID(KERN_T_TQ2_0, GGML_TYPE_TQ2_0),
              "type ids are ggml's");
#undef KQ_SAME_ID

/* ==== codebooks (ggml-common.h: ksigns_iq2xs, iq3xxs_grid, iq3s_grid) ======= */

const uint8_t kern_ksigns_iq2xs[128] = {
      0, 129, 130,   3, 132,   5,   6, 135, 136,   9,  10, 139,  12, 141, 142,  15,
    144,  17,  18, 147,  20, 149, 150,  23,  24, 153, 154,  27, 156,  29,  30, 159,
    160,  33,  34, 163,  36, 165, 166,  39,  40, 169, 170,  43, 172,  45,  46, 175,
     48, 177, 178,  51, 180,  53,  54, 183, 184,  57,  58, 187,  60, 189, 190,  63,
    192,  65,  66, 195,  68, 197, 198,  71,  72, 201, 202,  75, 204,  77,  78, 207,
     80, 209, 210,  83, 212,  85,  86, 215, 216,  89,  90, 219,  92, 221, 222,  95,
     96, 225, 226,  99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
    240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
};

const uint32_t kern_iq3xxs_grid[256] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14,
    0x040c140c, 0x040c142c, 0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404,
    0x04140414, 0x04140424, 0x04140c0c, 0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e,
    0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c, 0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c,
    0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e, 0x04243e1c, 0x04243e2c, 0x042c040c,
    0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04, 0x043e0c24, 0x043e0c34,
    0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c, 0x0c04141c,
    0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04,
    0x0c143e14, 0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c,
    0x0c24042c, 0x0c242c04, 0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414,
    0x0c3e2404, 0x14040404, 0x14040414, 0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434,
    0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c, 0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c,
    0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404, 0x14140414, 0x14140c0c, 0x14140c3e,
    0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c, 0x141c0c04, 0x141c0c24,
    0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c, 0x142c3e24,
    0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c,
    0x1c0c2424, 0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14,
    0x1c1c0c0c, 0x1c1c1c1c, 0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414,
    0x1c2c2c2c, 0x1c340c24, 0x1c341c34, 0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e,
    0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e, 0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404,
    0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424, 0x24242c0c, 0x24243424, 0x242c142c,
    0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04, 0x2c040c14, 0x2c04240c,
    0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14, 0x2c143e14,
    0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c,
    0x340c340c, 0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14,
    0x34341c1c, 0x343e041c, 0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14,
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04,
};

const uint32_t kern_iq3s_grid[512] = {
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905,
    0x0101090b, 0x0101090f, 0x01010b03, 0x01010b07, 0x01010d01, 0x01010d05, 0x01010f03, 0x01010f09,
    0x01010f0f, 0x01030101, 0x01030103, 0x01030105, 0x01030109, 0x01030301, 0x01030303, 0x0103030b,
    0x01030501, 0x01030507, 0x0103050f, 0x01030703, 0x0103070b, 0x01030909, 0x01030d03, 0x01030d0b,
    0x01030f05, 0x01050101, 0x01050103, 0x0105010b, 0x0105010f, 0x01050301, 0x01050307, 0x0105030d,
    0x01050503, 0x0105050b, 0x01050701, 0x01050709, 0x01050905, 0x0105090b, 0x0105090f, 0x01050b03,
    0x01050b07, 0x01050f01, 0x01050f07, 0x01070107, 0x01070303, 0x0107030b, 0x01070501, 0x01070505,
    0x01070703, 0x01070707, 0x0107070d, 0x01070909, 0x01070b01, 0x01070b05, 0x01070d0f, 0x01070f03,
    0x01070f0b, 0x01090101, 0x01090307, 0x0109030f, 0x01090503, 0x01090509, 0x01090705, 0x01090901,
    0x01090907, 0x01090b03, 0x01090f01, 0x010b0105, 0x010b0109, 0x010b0501, 0x010b0505, 0x010b050d,
    0x010b0707, 0x010b0903, 0x010b090b, 0x010b090f, 0x010b0d0d, 0x010b0f07, 0x010d010d, 0x010d0303,
    0x010d0307, 0x010d0703, 0x010d0b05, 0x010d0f03, 0x010f0101, 0x010f0105, 0x010f0109, 0x010f0501,
    0x010f0505, 0x010f050d, 0x010f0707, 0x010f0b01, 0x010f0b09, 0x03010101, 0x03010103, 0x03010105,
    0x03010109, 0x03010301, 0x03010303, 0x03010307, 0x0301030b, 0x0301030f, 0x03010501, 0x03010505,
    0x03010703, 0x03010709, 0x0301070d, 0x03010b09, 0x03010b0d, 0x03010d03, 0x03010f05, 0x03030101,
    0x03030103, 0x03030107, 0x0303010d, 0x03030301, 0x03030309, 0x03030503, 0x03030701, 0x03030707,
    0x03030903, 0x03030b01, 0x03030b05, 0x03030f01, 0x03030f0d, 0x03050101, 0x03050305, 0x0305030b,
    0x0305030f, 0x03050501, 0x03050509, 0x03050705, 0x03050901, 0x03050907, 0x03050b0b, 0x03050d01,
    0x03050f05, 0x03070103, 0x03070109, 0x0307010f, 0x03070301, 0x03070307, 0x03070503, 0x0307050f,
    0x03070701, 0x03070709, 0x03070903, 0x03070d05, 0x03070f01, 0x03090107, 0x0309010b, 0x03090305,
    0x03090309, 0x03090703, 0x03090707, 0x03090905, 0x0309090d, 0x03090b01, 0x03090b09, 0x030b0103,
    0x030b0301, 0x030b0307, 0x030b0503, 0x030b0701, 0x030b0705, 0x030b0b03, 0x030d0501, 0x030d0509,
    0x030d050f, 0x030d0909, 0x030d090d, 0x030f0103, 0x030f0107, 0x030f0301, 0x030f0305, 0x030f0503,
    0x030f070b, 0x030f0903, 0x030f0d05, 0x030f0f01, 0x05010101, 0x05010103, 0x05010107, 0x0501010b,
    0x0501010f, 0x05010301, 0x05010305, 0x05010309, 0x0501030d, 0x05010503, 0x05010507, 0x0501050f,
    0x05010701, 0x05010705, 0x05010903, 0x05010907, 0x0501090b, 0x05010b01, 0x05010b05, 0x05010d0f,
    0x05010f01, 0x05010f07, 0x05010f0b, 0x05030101, 0x05030105, 0x05030301, 0x05030307, 0x0503030f,
    0x05030505, 0x0503050b, 0x05030703, 0x05030709, 0x05030905, 0x05030b03, 0x05050103, 0x05050109,
    0x0505010f, 0x05050503, 0x05050507, 0x05050701, 0x0505070f, 0x05050903, 0x05050b07, 0x05050b0f,
    0x05050f03, 0x05050f09, 0x05070101, 0x05070105, 0x0507010b, 0x05070303, 0x05070505, 0x05070509,
    0x05070703, 0x05070707, 0x05070905, 0x05070b01, 0x05070d0d, 0x05090103, 0x0509010f, 0x05090501,
    0x05090507, 0x05090705, 0x0509070b, 0x05090903, 0x05090f05, 0x05090f0b, 0x050b0109, 0x050b0303,
    0x050b0505, 0x050b070f, 0x050b0901, 0x050b0b07, 0x050b0f01, 0x050d0101, 0x050d0105, 0x050d010f,
    0x050d0503, 0x050d0b0b, 0x050d0d03, 0x050f010b, 0x050f0303, 0x050f050d, 0x050f0701, 0x050f0907,
    0x050f0b01, 0x07010105, 0x07010303, 0x07010307, 0x0701030b, 0x0701030f, 0x07010505, 0x07010703,
    0x07010707, 0x0701070b, 0x07010905, 0x07010909, 0x0701090f, 0x07010b03, 0x07010d07, 0x07010f03,
    0x07030103, 0x07030107, 0x0703010b, 0x07030309, 0x07030503, 0x07030507, 0x07030901, 0x07030d01,
    0x07030f05, 0x07030f0d, 0x07050101, 0x07050305, 0x07050501, 0x07050705, 0x07050709, 0x07050b01,
    0x07070103, 0x07070301, 0x07070309, 0x07070503, 0x07070507, 0x0707050f, 0x07070701, 0x07070903,
    0x07070907, 0x0707090f, 0x07070b0b, 0x07070f07, 0x07090107, 0x07090303, 0x0709030d, 0x07090505,
    0x07090703, 0x07090b05, 0x07090d01, 0x07090d09, 0x070b0103, 0x070b0301, 0x070b0305, 0x070b050b,
    0x070b0705, 0x070b0909, 0x070b0b0d, 0x070b0f07, 0x070d030d, 0x070d0903, 0x070f0103, 0x070f0107,
    0x070f0501, 0x070f0505, 0x070f070b, 0x09010101, 0x09010109, 0x09010305, 0x09010501, 0x09010509,
    0x0901050f, 0x09010705, 0x09010903, 0x09010b01, 0x09010f01, 0x09030105, 0x0903010f, 0x09030303,
    0x09030307, 0x09030505, 0x09030701, 0x0903070b, 0x09030907, 0x09030b03, 0x09030b0b, 0x09050103,
    0x09050107, 0x09050301, 0x0905030b, 0x09050503, 0x09050707, 0x09050901, 0x09050b0f, 0x09050d05,
    0x09050f01, 0x09070109, 0x09070303, 0x09070307, 0x09070501, 0x09070505, 0x09070703, 0x0907070b,
    0x09090101, 0x09090105, 0x09090509, 0x0909070f, 0x09090901, 0x09090f03, 0x090b010b, 0x090b010f,
    0x090b0503, 0x090b0d05, 0x090d0307, 0x090d0709, 0x090d0d01, 0x090f0301, 0x090f030b, 0x090f0701,
    0x090f0907, 0x090f0b03, 0x0b010105, 0x0b010301, 0x0b010309, 0x0b010505, 0x0b010901, 0x0b010909,
    0x0b01090f, 0x0b010b05, 0x0b010d0d, 0x0b010f09, 0x0b030103, 0x0b030107, 0x0b03010b, 0x0b030305,
    0x0b030503, 0x0b030705, 0x0b030f05, 0x0b050101, 0x0b050303, 0x0b050507, 0x0b050701, 0x0b05070d,
    0x0b050b07, 0x0b070105, 0x0b07010f, 0x0b070301, 0x0b07050f, 0x0b070909, 0x0b070b03, 0x0b070d0b,
    0x0b070f07, 0x0b090103, 0x0b090109, 0x0b090501, 0x0b090705, 0x0b09090d, 0x0b0b0305, 0x0b0b050d,
    0x0b0b0b03, 0x0b0b0b07, 0x0b0d0905, 0x0b0f0105, 0x0b0f0109, 0x0b0f0505, 0x0d010303, 0x0d010307,
    0x0d01030b, 0x0d010703, 0x0d010707, 0x0d010d01, 0x0d030101, 0x0d030501, 0x0d03050f, 0x0d030d09,
    0x0d050305, 0x0d050709, 0x0d050905, 0x0d050b0b, 0x0d050d05, 0x0d050f01, 0x0d070101, 0x0d070309,
    0x0d070503, 0x0d070901, 0x0d09050b, 0x0d090907, 0x0d090d05, 0x0d0b0101, 0x0d0b0107, 0x0d0b0709,
    0x0d0b0d01, 0x0d0d010b, 0x0d0d0901, 0x0d0f0303, 0x0d0f0307, 0x0f010101, 0x0f010109, 0x0f01010f,
    0x0f010501, 0x0f010505, 0x0f01070d, 0x0f010901, 0x0f010b09, 0x0f010d05, 0x0f030105, 0x0f030303,
    0x0f030509, 0x0f030907, 0x0f03090b, 0x0f050103, 0x0f050109, 0x0f050301, 0x0f05030d, 0x0f050503,
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101,
};

/* ==== dequantization (ggml-quants.c dequantize_row_*) ======================= */

void kern_sc_dequant_q2_k(const void *src, float *y, int n) {
    const kern_block_q2_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < KERN_QK_K; h += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 32; half += 16) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (float)(sc & 0xf), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

/* The 16 6-bit scales of a Q3_K block, minus 32 (ggml's kmask unpacking:
 * scale j has low 4 bits from byte j%8 (nibble j/8), high 2 bits from byte
 * 8 + j%4 (bits 2*(j/4))). */
static void q3_k_scales(const uint8_t *s12, int8_t *sc) {
    for (int j = 0; j < 16; j++) {
        int lo = (s12[j % 8] >> (4 * (j / 8))) & 0xf;
        int hi = (s12[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

void kern_sc_dequant_q3_k(const void *src, float *y, int n) {
    const kern_block_q3_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d_all = f16_to_f32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int8_t sc[16];
        q3_k_scales(x[i].scales, sc);
        uint8_t m = 1;
        int is = 0;
        for (int h = 0; h < KERN_QK_K; h += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 32; half += 16) {
                    const float dl = d_all * (float)sc[is++];
                    for (int l = half; l < half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

/* ggml get_scale_min_k4: sub-block j's 6-bit scale and min */
static inline void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

void kern_sc_dequant_q4_k(const void *src, float *y, int n) {
    const kern_block_q4_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            int sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void kern_sc_dequant_q5_k(const void *src, float *y, int n) {
    const kern_block_q5_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            int sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void kern_sc_dequant_q6_k(const void *src, float *y, int n) {
    const kern_block_q6_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int h = 0; h < KERN_QK_K; h += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void kern_sc_dequant_q8_k(const void *src, float *y, int n) {
    const kern_block_q8_k *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++)
        for (int j = 0; j < KERN_QK_K; j++) *y++ = x[i].d * (float)x[i].qs[j];
}

void kern_sc_dequant_iq4_xs(const void *src, float *y, int n) {
    const kern_block_iq4_xs *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < KERN_QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j + 0] = dl * (float)kern_iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * (float)kern_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

void kern_sc_dequant_iq3_xxs(const void *src, float *y, int n) {
    const kern_block_iq3_xxs *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs, *scales_and_signs = qs + KERN_QK_K / 4;
        for (int ib32 = 0; ib32 < KERN_QK_K / 32; ib32++, qs += 8) {
            uint32_t aux32;
            memcpy(&aux32, scales_and_signs + 4 * ib32, sizeof aux32);
            const float db = d * (0.5f + (float)(aux32 >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = kern_ksigns_iq2xs[(aux32 >> 7 * l) & 127];
                const uint32_t g1 = kern_iq3xxs_grid[qs[2 * l]], g2 = kern_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j + 0] = db * (float)((g1 >> 8 * j) & 0xff) * (signs & (1u << j) ? -1.f : 1.f);
                    y[j + 4] = db * (float)((g2 >> 8 * j) & 0xff) * (signs & (1u << (j + 4)) ? -1.f : 1.f);
                }
            }
        }
    }
}

void kern_sc_dequant_iq3_s(const void *src, float *y, int n) {
    const kern_block_iq3_s *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        for (int ib32 = 0; ib32 < KERN_QK_K / 32; ib32++, qs += 8, signs += 4) {
            const int s4 = (x[i].scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf;
            const float db = d * (float)(1 + 2 * s4);
            for (int l = 0; l < 4; l++, y += 8) {
                const uint32_t g1 = kern_iq3s_grid[qs[2 * l + 0] | ((qh[ib32] << (8 - 2 * l)) & 256)];
                const uint32_t g2 = kern_iq3s_grid[qs[2 * l + 1] | ((qh[ib32] << (7 - 2 * l)) & 256)];
                for (int j = 0; j < 4; j++) {
                    y[j + 0] = db * (float)((g1 >> 8 * j) & 0xff) * (signs[l] & (1u << j) ? -1.f : 1.f);
                    y[j + 4] = db * (float)((g2 >> 8 * j) & 0xff) * (signs[l] & (1u << (j + 4)) ? -1.f : 1.f);
                }
            }
        }
    }
}

/* trit n of a TQ1_0 byte: the byte is ⌈t·256/243⌉ for a 5-trit number t,
 * so multiplying by 3^n (mod 256) brings trit n to the top. */
static inline int tq1_trit(uint8_t b, int pow3) {
    const uint8_t q = (uint8_t)(b * pow3);
    return (int)(((uint16_t)q * 3) >> 8);
}

void kern_sc_dequant_tq1_0(const void *src, float *y, int n) {
    static const int pow3[6] = {1, 3, 9, 27, 81, 243};
    const kern_block_tq1_0 *x = src;
    const int nqs = (int)sizeof x->qs, n32 = nqs - nqs % 32;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < n32; j += 32)
            for (int k = 0; k < 5; k++)
                for (int m = 0; m < 32; m++) *y++ = (float)(tq1_trit(x[i].qs[j + m], pow3[k]) - 1) * d;
        for (int j = n32; j < nqs; j += 16)
            for (int k = 0; k < 5; k++)
                for (int m = 0; m < 16; m++) *y++ = (float)(tq1_trit(x[i].qs[j + m], pow3[k]) - 1) * d;
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < (int)sizeof x->qh; j++) *y++ = (float)(tq1_trit(x[i].qh[j], pow3[k]) - 1) * d;
    }
}

void kern_sc_dequant_tq2_0(const void *src, float *y, int n) {
    const kern_block_tq2_0 *x = src;
    for (int i = 0; i < n / KERN_QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < (int)sizeof x->qs; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *y++ = (float)(((x[i].qs[j + m] >> (l * 2)) & 3) - 1) * d;
    }
}

