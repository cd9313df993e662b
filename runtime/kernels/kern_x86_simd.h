/*
 * kern_x86_simd.h — the small x86 load/broadcast/prefetch helpers the
 * row-interleaved leaves (kern_r8_simd.h, kern_rk_simd.h) and the attention
 * leaves (kern_att_avx2.c, kern_att_avx512.c) share.  Internal to the
 * kernels; included only by those, so only in files built with AVX2 (and,
 * for the zmm helpers, AVX-512: the VNNI builds).
 */
#ifndef CINFER_KERN_X86_SIMD_H
#define CINFER_KERN_X86_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* the 4 bytes at p in every 32-bit lane */
INLINE __m256i bc32(const void *p) {
    int v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
INLINE __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* Ask for every cache line [p, p + bytes) touches: into L1 (prefetcht0),
 * or with l2 into L2 (prefetcht1).  p may lie past the data (the next rows'
 * of a stream that ends): a prefetch never faults, and the address is
 * formed as an integer.  l2 is a constant at every call (the hint must be). */
INLINE void prefetch_lines(const void *p, size_t bytes, const int l2) {
    const uintptr_t end = (uintptr_t)p + bytes;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) {
        if (l2) _mm_prefetch((const char *)a, _MM_HINT_T1);
        else _mm_prefetch((const char *)a, _MM_HINT_T0);
    }
}
/* Decode (one token, or a few): the weights stream through once per token,
 * so each block a one-token leaf reads first asks for the bytes this far
 * further on, into L2 (the next row groups' past a group's end: a take's
 * groups are adjacent).  bench_decode -t 2, in-process rotation of the
 * settings over 7 rounds, GB/s of the matmuls (noisy VM; medians): 7b
 * Q4_K_M: prefetcht0 4 super-blocks ahead 16.8, prefetcht1 16 KiB 28.9,
 * 24 KiB 28.1, 32 KiB 27.9, 40 KiB 28.8; 1b Q4_0: prefetcht0 4 KiB 22.9,
 * prefetcht1 16 KiB 25.5, 24 KiB 28.6, 32 KiB 27.7; 1b Q8_0: none 24.9,
 * prefetcht1 16 KiB 27.5, 24 KiB 25.0, 32 KiB 27.0.  24 KiB: Q4_0's best,
 * within the rounds' noise of the best elsewhere.  (prefetcht0 fills L1's
 * few miss buffers and L1 itself; further ahead it ran slower, not faster.) */
#define KERN_DECODE_PF_BYTES 24576
INLINE void prefetch_decode(const void *blk, size_t bytes) {
    prefetch_lines((const void *)((uintptr_t)blk + KERN_DECODE_PF_BYTES), bytes, 1);
}
/* 8 f16 scales -> 8 floats */
INLINE __m256 dw8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

#ifdef __AVX512F__
/* two row groups in one zmm: 32 bytes of each */
INLINE __m512i ld2(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(loadu(p0)), loadu(p1), 1);
}
/* 8 f16 scales of each group -> 16 floats */
INLINE __m512 dw16(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                                   _mm_loadu_si128((const __m128i *)p1), 1));
}
INLINE __m512i bcz(const void *p) {
    int v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
#endif

#endif
