/*
 * clang_decls.cuh — what NVRTC provides without any header and clang's CUDA
 * front end does not with -nocudainc: the CUDA keywords and the few device
 * built-ins cinfer's kernels use.  Force-included (-include) by the syntax
 * check of make test (tests/test_cuda.c: clang -x cuda -fsyntax-only
 * -nocudainc -nocudalib), never by NVRTC: declarations only, so that a
 * kernel calling something NVRTC would not know fails here too.
 */
#ifndef CINFER_CLANG_CUDA_DECLS
#define CINFER_CLANG_CUDA_DECLS

/* NVRTC defines __CUDACC__ (and __CUDACC_RTC__, left undefined here so that
 * the host half of a generated file is checked too); clang defines it only in
 * the CUDA headers -nocudainc leaves out. */
#define __CUDACC__ 1
#include <__clang_cuda_builtin_vars.h> /* threadIdx, blockIdx, blockDim, gridDim (clang's resource dir) */

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n) __attribute__((launch_bounds(n)))

extern "C" __device__ void __syncthreads(void);
__device__ float __shfl_xor_sync(unsigned int mask, float var, int lane_mask, int width = 32);
__device__ float __shfl_sync(unsigned int mask, float var, int src_lane, int width = 32);
__device__ float __uint_as_float(unsigned int x);
__device__ unsigned int __float_as_uint(float x);
__device__ float __int_as_float(int x);
extern "C" __device__ float expf(float x);
extern "C" __device__ float tanhf(float x);
extern "C" __device__ float sqrtf(float x);
extern "C" __device__ float powf(float x, float y);
extern "C" __device__ float cosf(float x);
extern "C" __device__ float sinf(float x);
extern "C" __device__ float fmaxf(float x, float y);
extern "C" __device__ float fminf(float x, float y);
extern "C" __device__ float floorf(float x);
extern "C" __device__ float ceilf(float x);
extern "C" __device__ float logf(float x);
extern "C" __device__ double log(double x);

#endif
