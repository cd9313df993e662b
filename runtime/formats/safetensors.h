/*
 * safetensors.h — read-only, zero-copy safetensors reader.
 *
 * Owns: mapping a .safetensors file, parsing and validating its JSON header
 * (per tensor: dtype, shape, data_offsets; plus the optional string map
 * "__metadata__"), and handing out pointers into the mapping.
 *
 * Format (https://github.com/huggingface/safetensors, "Format"):
 *   u64 little-endian N | N bytes of UTF-8 JSON | data
 *   JSON: { "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
 *           ..., "__metadata__": {"k": "v", ...} }
 *   data_offsets are relative to the first byte after the header.
 * Shapes are row-major as PyTorch writes them: shape[0] is the OUTERMOST
 * dimension — the reverse of GGUF's ne[] order.
 *
 * Validated: header length against the file (and a 100 MB cap, as the
 * reference implementation), JSON well-formed and an object, known dtype, shape
 * of non-negative integers (product checked for overflow), data_offsets two
 * integers with BEGIN <= END <= data size, END - BEGIN == product(shape) ×
 * dtype size, no two tensors overlapping, no duplicate names.
 *
 * Errors: 0 or a negative ST_E* code, plus a one-line message in err
 * ("safetensors: tensor 'x': ..." with what, where and expected vs actual).
 * Never exits, never prints.
 */
#ifndef CINFER_SAFETENSORS_H
#define CINFER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

enum {
    ST_OK = 0,
    ST_EIO = -1,      /* open/stat/mmap failed */
    ST_EFORMAT = -2,  /* malformed file */
    ST_ENOTFOUND = -3,
    ST_ENOMEM = -5,
};

/* dtype strings of the safetensors format. */
enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_F8_E8M0, ST_I16, ST_U16, ST_F16, ST_BF16,
    ST_I32, ST_U32, ST_F32, ST_I64, ST_U64, ST_F64,
    ST_DTYPE_COUNT,
};

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER_BYTES 100000000u

typedef struct {
    const char *name;  /* NUL-terminated copy owned by the st_file */
    uint32_t dtype;    /* enum st_dtype */
    uint32_t n_dims;   /* 0..ST_MAX_DIMS (0 = scalar) */
    int64_t shape[ST_MAX_DIMS]; /* row-major, shape[0] outermost; unused = 1 */
    uint64_t n_elems;
    uint64_t offset;   /* BEGIN, relative to the data section */
    uint64_t n_bytes;  /* END - BEGIN */
    const void *data;  /* into the mapping (no alignment guarantee) */
} st_tensor;

typedef struct {
    const char *key, *value; /* NUL-terminated copies owned by the st_file */
} st_meta;

typedef struct st_file st_file;

/* Map and validate path.  On success *out owns the mapping. */
int st_open(const char *path, st_file **out, char *err, size_t err_len);
/* Validate an in-memory image (not copied: must outlive the handle). */
int st_open_mem(const void *data, size_t size, st_file **out, char *err, size_t err_len);
void st_close(st_file *f); /* NULL is a no-op */

uint64_t st_size(const st_file *f);         /* file size in bytes */
const void *st_base(const st_file *f);      /* start of the mapping (or the caller's image) */
uint64_t st_header_bytes(const st_file *f); /* N, the JSON header length */
uint64_t st_data_offset(const st_file *f);  /* 8 + N */

/* Tensors in header order; pointers valid until st_close(). */
uint64_t st_n_tensors(const st_file *f);
const st_tensor *st_tensor_at(const st_file *f, uint64_t i);
const st_tensor *st_find_tensor(const st_file *f, const char *name); /* NULL if absent; O(log n) */

/* "__metadata__" entries in header order. */
uint64_t st_n_meta(const st_file *f);
const st_meta *st_meta_at(const st_file *f, uint64_t i);
const char *st_meta_get(const st_file *f, const char *key); /* NULL if absent */

const char *st_dtype_name(uint32_t dtype); /* "F32", or "unknown" */
uint32_t st_dtype_size(uint32_t dtype);    /* bytes per element; 0 if unknown */

#endif
