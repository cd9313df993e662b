/*
 * cuda.h — the CUDA driver API and NVRTC, loaded at run time.
 *
 * cinfer is built without any CUDA toolkit: this module dlopen()s
 * libcuda.so.1 (the driver, installed with the GPU driver) and libnvrtc.so*
 * (the runtime compiler, one library from the CUDA toolkit or its pip/conda
 * redistributable) when a model is opened with --device cuda, and declares
 * the few entry points it uses itself.  Those are stable C ABIs; the
 * versioned names (cuMemAlloc_v2, ...) are the ones the CUDA 11/12/13
 * headers map the plain names to, and the enum values are cuda.h's
 * (checked against NVIDIA's headers; docs/cuda.md).
 *
 * On a machine without them everything else works and cuda_open fails with
 * one line naming the library that is missing and where it was looked for.
 * $CINFER_CUDA_DRIVER and $CINFER_NVRTC name the libraries explicitly (then
 * only that path is tried).
 */
#ifndef CINFER_GPU_CUDA_H
#define CINFER_GPU_CUDA_H

#include <stddef.h>

/* ---- the driver API's types and constants (cuda.h) ------------------------ */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_STREAM_NON_BLOCKING 1
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define NVRTC_SUCCESS 0

/* Every entry point cinfer calls, resolved by cuda_open. */
typedef struct cuda_api {
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr ptr);
    CUresult (*cuMemAllocHost)(void **ptr, size_t bytes);
    CUresult (*cuMemFreeHost)(void *ptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
    CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes);
    CUresult (*cuStreamCreate)(CUstream *s, unsigned int flags);
    CUresult (*cuStreamDestroy)(CUstream s);
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                               unsigned int block_x, unsigned int block_y, unsigned int block_z,
                               unsigned int shared_bytes, CUstream s, void **params, void **extra);
    CUresult (*cuStreamBeginCapture)(CUstream s, int mode);
    CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *graph);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
    CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
    CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
    CUresult (*cuGraphDestroy)(CUgraph graph);
    CUresult (*cuGetErrorName)(CUresult rc, const char **name);
    CUresult (*cuGetErrorString)(CUresult rc, const char **text);
    /* NVRTC */
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name, int n_headers,
                                      const char *const *headers, const char *const *include_names);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int n_options, const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *bytes);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *bytes);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t *bytes);
    nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char *ptx);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
    const char *(*nvrtcGetErrorString)(nvrtcResult rc);
    /* optional (NVRTC 11.2+): the architectures this NVRTC compiles for */
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int *n);
    nvrtcResult (*nvrtcGetSupportedArchs)(int *archs);
} cuda_api;

/* One GPU with its primary context.  Fields are read-only after cuda_open. */
typedef struct cuda_dev {
    cuda_api api;
    void *libcuda, *libnvrtc;     /* dlopen handles */
    char driver_path[512];        /* the names that loaded */
    char nvrtc_path[512];
    CUdevice dev;
    CUcontext ctx;                /* the device's primary context (retained) */
    int ordinal;
    char name[256];               /* "NVIDIA H200" */
    int cc_major, cc_minor;       /* compute capability */
    int n_sm;
    size_t total_bytes;           /* device memory */
    int driver_version;           /* cuDriverGetVersion: 12040 = CUDA 12.4 */
    int nvrtc_major, nvrtc_minor;
} cuda_dev;

/* Load the driver and NVRTC, initialise CUDA and retain device `ordinal`'s
 * primary context.  Errors (-1, one line): "no CUDA driver: libcuda.so.1
 * not found (tried: ...; set CINFER_CUDA_DRIVER to its path): <dlerror>",
 * "no NVRTC: ...", "no CUDA device ...", "cuInit: CUDA_ERROR_... (...)". */
int cuda_open(int ordinal, cuda_dev **out, char *err, size_t err_len);
void cuda_close(cuda_dev *d);

/* NVRTC alone, for a GPU of compute capability cc_major.cc_minor that
 * this machine need not have: a cuda_dev with only the NVRTC entry points,
 * for cuda_target_arch and cuda_compile (ahead-of-time compiles, tests).
 * Close with cuda_close. */
int cuda_open_nvrtc(int cc_major, int cc_minor, cuda_dev **out, char *err, size_t err_len);

/* The library load steps alone (tests, messages): dlopen the driver /
 * NVRTC from $CINFER_CUDA_DRIVER / $CINFER_NVRTC or the search list, the
 * name that loaded in path.  -1 with the "no CUDA driver" / "no NVRTC"
 * message when none loads. */
int cuda_load_driver(void **handle, char *path, size_t path_cap, char *err, size_t err_len);
int cuda_load_nvrtc(void **handle, char *path, size_t path_cap, char *err, size_t err_len);

/* Make d's context current on the calling thread (every thread that uses
 * the device calls this first; cheap). */
int cuda_bind_thread(const cuda_dev *d, char *err, size_t err_len);

/* 0 when rc is CUDA_SUCCESS; else -1 and err = "what: CUDA_ERROR_NAME (text)". */
int cuda_check(const cuda_dev *d, CUresult rc, const char *what, char *err, size_t err_len);

/* A compiled module: a cubin for the device's exact architecture, or PTX
 * for the newest virtual architecture NVRTC has that the device runs (the
 * driver compiles it at load). */
typedef struct {
    unsigned char *data; /* malloc'd; PTX is NUL-terminated */
    size_t len;
    int is_cubin;
    char arch[24];       /* "sm_90" or "compute_90" */
} cuda_image;

/* The NVRTC target for d: "sm_XY" when NVRTC can emit a cubin for it, else
 * "compute_NN" (PTX) for the highest NN <= XY it supports; -1 when none. */
int cuda_target_arch(const cuda_dev *d, char *arch, size_t cap, char *err, size_t err_len);

/* Compile CUDA C++ src (named name in messages) with NVRTC for
 * cuda_target_arch(d), headers[i] available to #include "include_names[i]".
 * Errors: -1, "nvrtc: <first error line of the log>" (the whole log, when
 * log is given, in *log: malloc'd). */
int cuda_compile(const cuda_dev *d, const char *src, const char *name, int n_headers,
                 const char *const *headers, const char *const *include_names, cuda_image *out,
                 char **log, char *err, size_t err_len);
void cuda_image_free(cuda_image *im);

#endif
