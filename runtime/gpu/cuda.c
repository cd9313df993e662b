/*
 * cuda.c — see cuda.h.  dlopen, symbol tables, device discovery, NVRTC.
 *
 * Search order.  The driver: $CINFER_CUDA_DRIVER alone when set, else
 * "libcuda.so.1" through the dynamic loader (LD_LIBRARY_PATH, the
 * ld.so.cache, /lib, /usr/lib) and then the places distributions and WSL put
 * it.  NVRTC: $CINFER_NVRTC alone when set, else the sonames of CUDA 13, 12
 * and 11.2+ through the loader, then the same names under the toolkit's
 * default prefixes.  The messages list exactly what was tried.
 */
#include "cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__)
#define CUDA_TRIPLE "aarch64-linux-gnu"
#define CUDA_TARGET_DIR "sbsa-linux"
#else
#define CUDA_TRIPLE "x86_64-linux-gnu"
#define CUDA_TARGET_DIR "x86_64-linux"
#endif

static const char *const driver_names[] = {
    "libcuda.so.1",
    "/usr/lib/" CUDA_TRIPLE "/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
    NULL,
};

static const char *const nvrtc_sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so",
                                            NULL};
static const char *const nvrtc_dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/" CUDA_TARGET_DIR "/lib",
                                         "/usr/lib/" CUDA_TRIPLE, NULL};

/* Try candidates in order; the first that loads wins.  tried gets the list. */
static void *load_first(const char *const *cands, int n, char *path, size_t path_cap, char *tried,
                        size_t tried_cap, char *last_err, size_t last_cap) {
    size_t tl = 0;
    tried[0] = last_err[0] = 0;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(path, path_cap, "%s", cands[i]);
            return h;
        }
        const char *e = dlerror();
        if (!last_err[0]) snprintf(last_err, last_cap, "%s", e ? e : "dlopen failed"); /* the first: usually the loader's */
        int w = snprintf(tried + tl, tried_cap - tl, "%s%s%s", tl ? ", " : "", cands[i],
                         strchr(cands[i], '/') ? "" : " (via the dynamic loader: LD_LIBRARY_PATH, ld.so.cache)");
        if (w > 0 && (size_t)w < tried_cap - tl) tl += (size_t)w;
    }
    return NULL;
}

int cuda_load_driver(void **handle, char *path, size_t path_cap, char *err, size_t err_len) {
    char tried[2048], last[512];
    const char *env = getenv("CINFER_CUDA_DRIVER");
    const char *one[1] = {env};
    int n = 0;
    while (driver_names[n]) n++;
    *handle = env && *env ? load_first(one, 1, path, path_cap, tried, sizeof tried, last, sizeof last)
                          : load_first(driver_names, n, path, path_cap, tried, sizeof tried, last, sizeof last);
    if (*handle) return 0;
    snprintf(err, err_len, "no CUDA driver: libcuda.so.1 not found (tried %s%s): %s", tried,
             env && *env ? " from CINFER_CUDA_DRIVER" : "; install the NVIDIA driver or set CINFER_CUDA_DRIVER to "
             "the library's path", last);
    return -1;
}

int cuda_load_nvrtc(void **handle, char *path, size_t path_cap, char *err, size_t err_len) {
    char tried[4096], last[512];
    const char *env = getenv("CINFER_NVRTC");
    if (env && *env) {
        const char *one[1] = {env};
        *handle = load_first(one, 1, path, path_cap, tried, sizeof tried, last, sizeof last);
    } else {
        char full[32][256];
        const char *cands[32];
        int n = 0;
        for (int i = 0; nvrtc_sonames[i]; i++) cands[n++] = nvrtc_sonames[i];
        for (int d = 0; nvrtc_dirs[d]; d++)
            for (int i = 0; nvrtc_sonames[i] && n < 32; i++) {
                snprintf(full[n], sizeof full[n], "%s/%s", nvrtc_dirs[d], nvrtc_sonames[i]);
                cands[n] = full[n];
                n++;
            }
        *handle = load_first(cands, n, path, path_cap, tried, sizeof tried, last, sizeof last);
    }
    if (*handle) return 0;
    snprintf(err, err_len, "no NVRTC: libnvrtc.so not found (tried %s%s): %s", tried,
             env && *env ? " from CINFER_NVRTC" : "; install the CUDA toolkit's NVRTC (e.g. Debian's libnvrtc12, "
             "or pip's nvidia-cuda-nvrtc-cu12) or set CINFER_NVRTC to the library's path", last);
    return -1;
}

/* ---- symbols ---------------------------------------------------------------- */

typedef struct {
    const char *name; /* the exported (versioned) symbol */
    size_t off;       /* offset of its pointer in cuda_api */
    int optional;
} sym;

#define S(field, exported) {exported, offsetof(cuda_api, field), 0}
#define OPT(field, exported) {exported, offsetof(cuda_api, field), 1}
static const sym driver_syms[] = {
    S(cuInit, "cuInit"),
    S(cuDriverGetVersion, "cuDriverGetVersion"),
    S(cuDeviceGetCount, "cuDeviceGetCount"),
    S(cuDeviceGet, "cuDeviceGet"),
    S(cuDeviceGetName, "cuDeviceGetName"),
    S(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    S(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    S(cuCtxSetCurrent, "cuCtxSetCurrent"),
    S(cuMemGetInfo, "cuMemGetInfo_v2"),
    S(cuMemAlloc, "cuMemAlloc_v2"),
    S(cuMemFree, "cuMemFree_v2"),
    S(cuMemAllocHost, "cuMemAllocHost_v2"),
    S(cuMemFreeHost, "cuMemFreeHost"),
    S(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    S(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    S(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    S(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    S(cuMemsetD8, "cuMemsetD8_v2"),
    S(cuStreamCreate, "cuStreamCreate"),
    S(cuStreamDestroy, "cuStreamDestroy_v2"),
    S(cuStreamSynchronize, "cuStreamSynchronize"),
    S(cuModuleLoadData, "cuModuleLoadData"),
    S(cuModuleUnload, "cuModuleUnload"),
    S(cuModuleGetFunction, "cuModuleGetFunction"),
    S(cuLaunchKernel, "cuLaunchKernel"),
    S(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
    S(cuStreamEndCapture, "cuStreamEndCapture"),
    S(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    S(cuGraphLaunch, "cuGraphLaunch"),
    S(cuGraphExecDestroy, "cuGraphExecDestroy"),
    S(cuGraphDestroy, "cuGraphDestroy"),
    S(cuGetErrorName, "cuGetErrorName"),
    S(cuGetErrorString, "cuGetErrorString"),
    {NULL, 0, 0},
};
static const sym nvrtc_syms[] = {
    S(nvrtcVersion, "nvrtcVersion"),
    S(nvrtcCreateProgram, "nvrtcCreateProgram"),
    S(nvrtcCompileProgram, "nvrtcCompileProgram"),
    S(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"),
    S(nvrtcGetProgramLog, "nvrtcGetProgramLog"),
    S(nvrtcGetCUBINSize, "nvrtcGetCUBINSize"),
    S(nvrtcGetCUBIN, "nvrtcGetCUBIN"),
    S(nvrtcGetPTXSize, "nvrtcGetPTXSize"),
    S(nvrtcGetPTX, "nvrtcGetPTX"),
    S(nvrtcDestroyProgram, "nvrtcDestroyProgram"),
    S(nvrtcGetErrorString, "nvrtcGetErrorString"),
    OPT(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs"),
    OPT(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs"),
    {NULL, 0, 0},
};
#undef S
#undef OPT

static int resolve(void *lib, const char *path, const sym *tab, cuda_api *api, char *err, size_t err_len) {
    for (const sym *s = tab; s->name; s++) {
        void *f = dlsym(lib, s->name);
        if (!f && !s->optional)
            return snprintf(err, err_len, "%s lacks %s (too old?): %s", path, s->name, dlerror()), -1;
        memcpy((char *)api + s->off, &f, sizeof f);
    }
    return 0;
}

/* ---- errors -------------------------------------------------------------------- */

int cuda_check(const cuda_dev *d, CUresult rc, const char *what, char *err, size_t err_len) {
    if (rc == CUDA_SUCCESS) return 0;
    const char *name = NULL, *text = NULL;
    if (d && d->api.cuGetErrorName) d->api.cuGetErrorName(rc, &name);
    if (d && d->api.cuGetErrorString) d->api.cuGetErrorString(rc, &text);
    snprintf(err, err_len, "%s: %s (%s)", what, name ? name : "CUDA error", text ? text : "unknown");
    return -1;
}

int cuda_bind_thread(const cuda_dev *d, char *err, size_t err_len) {
    return cuda_check(d, d->api.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent", err, err_len);
}

/* ---- devices --------------------------------------------------------------------- */

/* The libraries stay loaded for the life of the process: the driver keeps
 * threads and state that unloading it under them would break, and NVRTC's
 * C++ runtime does not survive dlclose cleanly either (its allocator pools
 * leak).  A second cuda_open finds them already mapped. */
void cuda_close(cuda_dev *d) {
    if (!d) return;
    if (d->ctx) d->api.cuDevicePrimaryCtxRelease(d->dev);
    free(d);
}

int cuda_open_nvrtc(int cc_major, int cc_minor, cuda_dev **out, char *err, size_t err_len) {
    *out = NULL;
    cuda_dev *d = calloc(1, sizeof *d);
    if (!d) return snprintf(err, err_len, "out of memory"), -1;
    if (cuda_load_nvrtc(&d->libnvrtc, d->nvrtc_path, sizeof d->nvrtc_path, err, err_len) ||
        resolve(d->libnvrtc, d->nvrtc_path, nvrtc_syms, &d->api, err, err_len)) {
        free(d);
        return -1;
    }
    if (d->api.nvrtcVersion(&d->nvrtc_major, &d->nvrtc_minor) != NVRTC_SUCCESS) d->nvrtc_major = d->nvrtc_minor = 0;
    d->cc_major = cc_major;
    d->cc_minor = cc_minor;
    d->ordinal = -1;
    snprintf(d->name, sizeof d->name, "sm_%d%d (no device)", cc_major, cc_minor);
    *out = d;
    return 0;
}

int cuda_open(int ordinal, cuda_dev **out, char *err, size_t err_len) {
    *out = NULL;
    cuda_dev *d = calloc(1, sizeof *d);
    if (!d) return snprintf(err, err_len, "out of memory"), -1;
    char e[512];
    int n = 0;
    if (cuda_load_driver(&d->libcuda, d->driver_path, sizeof d->driver_path, err, err_len) ||
        resolve(d->libcuda, d->driver_path, driver_syms, &d->api, err, err_len) ||
        cuda_load_nvrtc(&d->libnvrtc, d->nvrtc_path, sizeof d->nvrtc_path, err, err_len) ||
        resolve(d->libnvrtc, d->nvrtc_path, nvrtc_syms, &d->api, err, err_len))
        goto fail;
    if (cuda_check(d, d->api.cuInit(0), "cuInit", e, sizeof e)) {
        snprintf(err, err_len, "CUDA driver %s loaded but %s", d->driver_path, e);
        goto fail;
    }
    d->api.cuDriverGetVersion(&d->driver_version);
    if (d->api.nvrtcVersion(&d->nvrtc_major, &d->nvrtc_minor) != NVRTC_SUCCESS) d->nvrtc_major = d->nvrtc_minor = 0;
    CUresult rc = d->api.cuDeviceGetCount(&n);
    if (rc == CUDA_ERROR_NO_DEVICE || (rc == CUDA_SUCCESS && n == 0)) {
        snprintf(err, err_len, "no CUDA device (driver %s, CUDA %d.%d, sees none)", d->driver_path,
                 d->driver_version / 1000, d->driver_version % 1000 / 10);
        goto fail;
    }
    if (cuda_check(d, rc, "cuDeviceGetCount", err, err_len)) goto fail;
    if (ordinal < 0 || ordinal >= n) {
        snprintf(err, err_len, "CUDA device %d: there %s %d (0..%d)", ordinal, n == 1 ? "is" : "are", n, n - 1);
        goto fail;
    }
    d->ordinal = ordinal;
    if (cuda_check(d, d->api.cuDeviceGet(&d->dev, ordinal), "cuDeviceGet", err, err_len) ||
        cuda_check(d, d->api.cuDeviceGetName(d->name, (int)sizeof d->name - 1, d->dev), "cuDeviceGetName", err,
                   err_len) ||
        cuda_check(d, d->api.cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev),
                   "cuDeviceGetAttribute", err, err_len) ||
        cuda_check(d, d->api.cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev),
                   "cuDeviceGetAttribute", err, err_len) ||
        cuda_check(d, d->api.cuDeviceGetAttribute(&d->n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev),
                   "cuDeviceGetAttribute", err, err_len) ||
        cuda_check(d, d->api.cuDeviceTotalMem(&d->total_bytes, d->dev), "cuDeviceTotalMem", err, err_len))
        goto fail;
    if (d->cc_major < 6) {
        snprintf(err, err_len, "CUDA device %d (%s) has compute capability %d.%d; cinfer's kernels need 6.0 or newer",
                 ordinal, d->name, d->cc_major, d->cc_minor);
        goto fail;
    }
    if (cuda_check(d, d->api.cuDevicePrimaryCtxRetain(&d->ctx, d->dev), "cuDevicePrimaryCtxRetain", err, err_len)) {
        d->ctx = NULL;
        goto fail;
    }
    if (cuda_bind_thread(d, err, err_len)) goto fail;
    *out = d;
    return 0;
fail:
    cuda_close(d);
    return -1;
}

/* ---- NVRTC ------------------------------------------------------------------------- */

int cuda_target_arch(const cuda_dev *d, char *arch, size_t cap, char *err, size_t err_len) {
    const int want = d->cc_major * 10 + d->cc_minor;
    int n = 0, archs[128];
    if (!d->api.nvrtcGetNumSupportedArchs || !d->api.nvrtcGetSupportedArchs ||
        d->api.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 128 ||
        d->api.nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) {
        snprintf(arch, cap, "sm_%d", want); /* an NVRTC before 11.2: ask for the device's own */
        return 0;
    }
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (archs[i] == want) {
            snprintf(arch, cap, "sm_%d", want);
            return 0;
        }
        if (archs[i] < want && archs[i] > best) best = archs[i];
    }
    if (best < 0)
        return snprintf(err, err_len, "NVRTC %d.%d (%s) cannot compile for compute capability %d.%d or below",
                        d->nvrtc_major, d->nvrtc_minor, d->nvrtc_path, d->cc_major, d->cc_minor), -1;
    snprintf(arch, cap, "compute_%d", best); /* PTX; the driver compiles it for the device */
    return 0;
}

void cuda_image_free(cuda_image *im) {
    if (!im) return;
    free(im->data);
    im->data = NULL;
    im->len = 0;
}

int cuda_compile(const cuda_dev *d, const char *src, const char *name, int n_headers,
                 const char *const *headers, const char *const *include_names, cuda_image *out,
                 char **log, char *err, size_t err_len) {
    const cuda_api *a = &d->api;
    memset(out, 0, sizeof *out);
    if (log) *log = NULL;
    if (cuda_target_arch(d, out->arch, sizeof out->arch, err, err_len)) return -1;
    char opt_arch[48];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", out->arch);
    const char *opts[] = {opt_arch, "--std=c++17"};
    nvrtcProgram prog = NULL;
    nvrtcResult rc = a->nvrtcCreateProgram(&prog, src, name, n_headers, headers, include_names);
    if (rc != NVRTC_SUCCESS)
        return snprintf(err, err_len, "nvrtcCreateProgram: %s", a->nvrtcGetErrorString(rc)), -1;
    rc = a->nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
    size_t log_len = 0;
    char *text = NULL;
    if (a->nvrtcGetProgramLogSize(prog, &log_len) == NVRTC_SUCCESS && log_len > 1 && (text = malloc(log_len + 1))) {
        if (a->nvrtcGetProgramLog(prog, text) != NVRTC_SUCCESS) text[0] = 0;
        text[log_len] = 0;
    }
    if (rc != NVRTC_SUCCESS) {
        /* the first line that says "error", else the first line */
        const char *first = text ? text : "", *hit = text ? strstr(text, "error") : NULL;
        if (hit) {
            while (hit > text && hit[-1] != '\n') hit--;
            first = hit;
        }
        snprintf(err, err_len, "nvrtc (%s, %s): %.*s", out->arch, a->nvrtcGetErrorString(rc),
                 (int)strcspn(first, "\n"), first);
        if (log) *log = text;
        else free(text);
        a->nvrtcDestroyProgram(&prog);
        return -1;
    }
    if (log) *log = text;
    else free(text);
    out->is_cubin = !strncmp(out->arch, "sm_", 3);
    size_t len = 0;
    rc = out->is_cubin ? a->nvrtcGetCUBINSize(prog, &len) : a->nvrtcGetPTXSize(prog, &len);
    if (rc == NVRTC_SUCCESS && len && (out->data = malloc(len + 1))) {
        rc = out->is_cubin ? a->nvrtcGetCUBIN(prog, (char *)out->data) : a->nvrtcGetPTX(prog, (char *)out->data);
        out->data[len] = 0;
        out->len = len;
    }
    a->nvrtcDestroyProgram(&prog);
    if (rc != NVRTC_SUCCESS || !out->data) {
        cuda_image_free(out);
        return snprintf(err, err_len, "nvrtc: cannot read the compiled %s", out->is_cubin ? "cubin" : "PTX"), -1;
    }
    return 0;
}
