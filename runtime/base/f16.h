/*
 * f16.h — scalar IEEE binary16 and bfloat16 conversions, header-only so the
 * scalar kernels inline them.  No ISA flags needed: these are the reference
 * conversions the F16C paths in kern_avx2.c are tested against.
 *
 * f16 -> f32 is exact for every input (subnormals, inf, NaN keep their class).
 * f32 -> f16 rounds to nearest even, overflows to inf, keeps NaN a (quiet) NaN;
 * the same results as the F16C instruction vcvtps2ph with imm 0.
 * bf16 -> f32 is a shift; f32 -> bf16 rounds to nearest even like ggml's
 * ggml_compute_fp32_to_bf16 (NaN stays NaN).
 */
#ifndef CINFER_F16_H
#define CINFER_F16_H

#include <stdint.h>
#include <string.h>

static inline float f16_bits_to_f32(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t f16_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return f16_bits_to_f32(f16_f32_to_bits(v) | sign);
    }
    if (exp == 31) return f16_bits_to_f32(sign | 0x7f800000u | (man << 13));
    return f16_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f16_f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((x >> 13) & 0x3ffu); /* NaN */
    if (x >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {                       /* below 2^-14: f16 subnormal or 0 */
        if (x <= 0x33000000u) return sign;       /* <= 2^-25 (tie goes to even 0) */
        uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return sign | (uint16_t)r;
    }
    uint32_t r = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++; /* carry may reach inf: correct */
    return sign | (uint16_t)r;
}

static inline float bf16_to_f32(uint16_t h) { return f16_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f16_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64); /* quiet NaN */
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}

#endif
