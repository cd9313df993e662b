/*
 * emu.h — CUDA's device environment on the host, for running cinfer's real
 * kernels on the CPU (tests/cuda/mock_cuda.c in execute mode, test_cuda.c
 * "cuda_exec/").  Force-included (g++ -include) into a generated .cu file in
 * place of NVRTC's built-ins: the same source, CUDA keywords mapped to C++,
 * threadIdx & co. read from the scheduler of the stand-in driver, which runs
 * every thread of a block as a coroutine and switches at __syncthreads and at
 * warp shuffles (so the kernels' barriers and shuffles are exercised as
 * written: a barrier some threads never reach is reported as a deadlock).
 *
 * mma.sync is emulated from the PTX ISA's fragment layout of
 * m16n8k16.row.col (f16/bf16 operands, f32 accumulators): the lanes of a warp
 * deposit their fragments, each lane computes its four results
 * (CFK_EMU_MMA in runtime/kernels/cuda/cf_cuda.cuh).  The f16 conversions
 * take the C paths of cfk_quant.cuh (no __CUDA_ARCH__ here).
 *
 * What this cannot show: the hardware's memory model and scheduling,
 * PTX-level behaviour of the inline asm (NVRTC + ptxas check its syntax where
 * present), and speed.
 */
#ifndef CINFER_CUDA_EMU_H
#define CINFER_CUDA_EMU_H

#include <math.h>
#include <string.h>

#define __CUDACC__ 1
#define CFK_EMU_MMA 1

struct emu_dim3 {
    unsigned x, y, z;
};

/* What the stand-in driver hands the module (emu_bind). */
struct emu_rt {
    const emu_dim3 *tid, *bid, *bdim, *gdim;
    void (*sync)(void);                                          /* __syncthreads */
    float (*shfl)(float v, int lane, int is_xor);                 /* the warp's lanes exchange v */
    void (*mma)(float *c, const unsigned *a, const unsigned *b, int bf16); /* mma.sync m16n8k16 */
};
static emu_rt emu;
extern "C" __attribute__((visibility("default"))) void emu_bind(const emu_rt *r) { emu = *r; }

#define threadIdx (*emu.tid)
#define blockIdx (*emu.bid)
#define blockDim (*emu.bdim)
#define gridDim (*emu.gdim)

#define __global__ __attribute__((visibility("default")))
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)

static inline void __syncthreads(void) { emu.sync(); }
static inline float __shfl_xor_sync(unsigned, float v, int m, int = 32) { return emu.shfl(v, m, 1); }
static inline float __shfl_sync(unsigned, float v, int src, int = 32) { return emu.shfl(v, src, 0); }
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline void cfk_emu_mma(float *c, const unsigned *a, const unsigned *b, int bf16) { emu.mma(c, a, b, bf16); }

#endif
