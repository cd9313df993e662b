/*
 * compile.h — the model compiler driver: GGUF + archspec → IR → C → machine
 * code, in memory with libtcc (JIT) or with the system C compiler (AOT: a
 * cached shared object, or a standalone executable).
 */
#ifndef CINFER_COMPILE_H
#define CINFER_COMPILE_H

#include <stddef.h>

#include "formats/gguf.h"
#include "gpu/cuda.h"
#include "prelude.h"
#include "prelude_cuda.h"

typedef enum { CC_JIT = 0, CC_AOT = 1 } cc_mode;
/* What the forward pass runs on: the CPU kernels (C, templates/forward.c.in)
 * or CUDA (templates/forward.cu.in, docs/cuda.md). */
typedef enum { CC_DEVICE_CPU = 0, CC_DEVICE_CUDA = 1 } cc_device;

typedef struct {
    cc_mode mode;
    const char *archspec_path; /* NULL: archspecs/<general.architecture>.lua (embedded) */
    int n_batch;               /* max tokens per forward call; 0 → 512 (an encoder: its
                                * default context, min(n_ctx_train, 4096)) */
    int verbose;               /* log cache hits/misses and timings to stderr */
    int precision;             /* CINFER_PRECISION_* (cinfer.h); 0 = native: matmul weights
                                * keep their GGUF types */
    int device;                /* cc_device.  CUDA: precision must be auto or native (the
                                * weights keep their GGUF types); mode is ignored */
    const cuda_dev *cuda;      /* CUDA: the GPU cc_build compiles the kernels for with NVRTC;
                                * NULL: cc_build compiles only the host half (tests, planning) */
} cc_options;


typedef struct cc_module {
    const cf_model_desc *desc;
    void (*forward)(cf_env *E);
    cc_mode mode;
    double emit_ms;    /* archspec + IR + emission */
    double compile_ms; /* tcc or cc (0 on an AOT cache hit) */
    int cache_hit;     /* AOT: loaded an existing shared object */
    char so_path[1024];/* AOT: the cached shared object */
    void *handle;      /* TCCState* or dlopen handle */
    /* --device cuda: the host half (libtcc) and the device half (NVRTC) */
    void (*cuda_forward)(cf_cuda_host *H); /* forward is NULL */
    cuda_image cuda_image;   /* cubin or PTX for o->cuda; empty when o->cuda was NULL */
    char cuda_path[1024];    /* where it is cached */
} cc_module;

/* What a CUDA module's cache key depends on besides the source. */
typedef struct {
    const char *name;       /* device name, "NVIDIA H200" */
    int cc_major, cc_minor; /* compute capability */
    int driver_version;     /* cuDriverGetVersion */
    int nvrtc_major, nvrtc_minor;
    const char *arch;       /* NVRTC target: "sm_90" (cubin) or "compute_90" (PTX) */
} cc_cuda_target;

/* Emit the C source for g (o->device CPU) or the CUDA source (o->device
 * CUDA: one .cu translation unit, device and host halves; needs no GPU).
 * *src is malloc'd (caller frees).  Errors: -1 with a message from the
 * archspec (file:line), binding or emitter; for CUDA also what the CUDA
 * kernels do not cover: "not supported on --device cuda: op 'x'
 * (archspecs/y.lua:12)", "... tensor 'blk.0.ffn_down.weight' is Q5_K ...". */
int cc_generate(const gguf_file *g, const cc_options *o, char **src, size_t *src_len, char *err,
                size_t err_len);

/* Generate and compile; *out stays valid until cc_module_free.  AOT results
 * are cached under $XDG_CACHE_HOME/cinfer (default ~/.cache/cinfer) keyed by
 * the model fingerprint, a hash of the generated source, the compiler version
 * and the CPU; a second run loads the cached object without compiling.
 * CUDA: the host half through libtcc (cf_describe, cf_cuda_forward), the
 * device half through NVRTC for o->cuda, cached beside the AOT objects as
 * <fingerprint>-<key>.cubin (or .ptx) with the key of cc_cuda_cache_path. */
int cc_build(const gguf_file *g, const cc_options *o, cc_module **out, char *err, size_t err_len);
void cc_module_free(cc_module *m);

/* Build a standalone executable at out_path: the generated forward pass for
 * g linked with the runtime (libcinfer.a next to the cinfer binary, or
 * $CINFER_LIBDIR).  The program needs only the GGUF file at run time. */
int cc_build_executable(const gguf_file *g, const cc_options *o, const char *out_path, char *err,
                        size_t err_len);

/* Build the program half of a bundle executable at out_path (cinfer bundle,
 * docs/bundle.md): the forward pass for g (a .giw in o->precision) with
 * templates/bundle_main.c.in, compiled for target ("x86_64" or "aarch64")
 * without -march=native (the kernels pick their ISA at start-up), linked with
 * --gc-sections against that target's libcinfer.a and the static archives
 * of libsodium, xxhash and cJSON (and libmicrohttpd with server), so that
 * only the C library is linked dynamically.  Archives: $CINFER_LIBDIR or the
 * cinfer binary's directory: libcinfer.a (x86_64) or aarch64/libcinfer.a,
 * deps/<target>/libcjson.a, deps/<target>/libmicrohttpd.a; libsodium.a and
 * libxxhash.a from the target's system library directory.  build (cap
 * bytes) receives the compiler and flags, for the bundle's trailer.  The
 * payload is appended afterwards (runtime/formats/bundle.h).
 * Errors: -1, "no libcjson.a for aarch64 in build/deps/aarch64: run make bundle-deps". */
int cc_build_bundle_program(const gguf_file *g, const cc_options *o, const char *target, int server,
                            const char *out_path, char *build, size_t cap, char *err, size_t err_len);

/* Read a project file (archspecs/…, templates/…): from $CINFER_SPEC_DIR when
 * set, else the copy embedded in the binary.  *data is malloc'd, NUL-terminated. */
int cc_spec_file(const char *name, char **data, size_t *len, char *err, size_t err_len);
/* The architectures this build has archspecs for, sorted, ", "-separated
 * ("gemma, gemma2, ..."; from $CINFER_SPEC_DIR/archspecs when that is set),
 * truncated to cap bytes. */
void cc_supported_archs(char *buf, size_t cap);

/* 1 when the C compiler AOT builds run ($CC, else "cc") cannot be found
 * (not an executable path, nor a program in $PATH), its name in name[cap];
 * 0 when it is there.  cc_build and cc_build_executable fail with "no C
 * compiler: ..." in that case. */
int cc_compiler_missing(char *name, size_t cap);

/* The architectures this build has archspecs for, sorted, ", "-separated
 * ("gemma, gemma2, ..."; from $CINFER_SPEC_DIR/archspecs when that is set),
 * truncated to cap bytes. */
void cc_supported_archs(char *buf, size_t cap);

/* The cached image's path for a CUDA source: <cache dir>/<fingerprint>-<key>.cubin
 * (.ptx for a compute_ target), key = XXH3 of the source, the kernel headers
 * it includes (runtime/kernels/cuda), CINFER_VERSION and every field of t. */
int cc_cuda_cache_path(const gguf_file *g, const char *src, size_t src_len, const cc_cuda_target *t, char *path,
                       size_t cap, char *err, size_t err_len);

/* The runtime CUDA sources NVRTC gets as headers: their include names
 * ("cf_cuda.cuh", ...) and embedded paths, CC_CUDA_N_HEADERS of each. */
#define CC_CUDA_N_HEADERS 3
extern const char *const cc_cuda_header_names[CC_CUDA_N_HEADERS];
extern const char *const cc_cuda_header_files[CC_CUDA_N_HEADERS];

/* The cache directory (created if missing). */
int cc_cache_dir(char *buf, size_t cap, char *err, size_t err_len);

#endif
