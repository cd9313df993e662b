/*
 * gguf.h — read-only, zero-copy GGUF loader.
 *
 * Owns: mapping a GGUF file (v2/v3) into memory, validating every byte of the
 * header, metadata and tensor table, and handing out typed views into the
 * mapping.  Nothing is copied except the small index structures; tensor data
 * pointers point straight into the mmap and stay valid until gguf_close().
 *
 * Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
 * Tensor type ids, block sizes and byte sizes: base/ggml_type.h.
 *
 * Errors: every function that can fail returns 0 on success or a negative
 * GGUF_E* code and writes a one-line message into the caller's err buffer
 * (what, where — byte offset, key or tensor name — and expected vs actual).
 * The library never exits and never prints.
 */
#ifndef CINFER_GGUF_H
#define CINFER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ggml_type.h"

enum {
    GGUF_OK = 0,
    GGUF_EIO = -1,       /* open/stat/mmap failed */
    GGUF_EFORMAT = -2,   /* malformed or hostile file */
    GGUF_ENOTFOUND = -3, /* key or tensor absent */
    GGUF_ETYPE = -4,     /* key present but of another type */
    GGUF_ENOMEM = -5,
};

/* Metadata value types (gguf.md "gguf_metadata_value_type"). */
enum gguf_vtype {
    GGUF_VT_UINT8 = 0, GGUF_VT_INT8 = 1, GGUF_VT_UINT16 = 2, GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4, GGUF_VT_INT32 = 5, GGUF_VT_FLOAT32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_UINT64 = 10, GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT = 13,
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
/* The least general.alignment gguf_open accepts in a .giw (a file with a
 * cinfer.version key); giw.c writes exactly this. */
#define GGUF_GIW_MIN_ALIGNMENT 64

/* A string inside the mapping: NOT NUL-terminated. */
typedef struct {
    uint64_t len;
    const char *ptr;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    uint32_t type; /* enum gguf_vtype */
    union {
        uint64_t u64;   /* UINT8/16/32/64 */
        int64_t i64;    /* INT8/16/32/64 */
        double f64;     /* FLOAT32/64 */
        bool b;         /* BOOL */
        gguf_str str;   /* STRING */
        struct {
            uint32_t type;        /* element type (may be ARRAY: nested) */
            uint64_t n;           /* element count */
            const void *data;     /* raw little-endian elements, fixed-size element types */
            const gguf_str *strs; /* (n) when type == STRING */
            const gguf_value *elems; /* (n) when type == ARRAY */
        } arr;
    } v;
};

typedef struct {
    gguf_str key;
    uint64_t offset; /* byte offset of the key in the file (for messages) */
    gguf_value value;
} gguf_kv;

typedef struct {
    const char *name;  /* NUL-terminated copy owned by the gguf_file */
    uint32_t type;     /* enum ggml_type, known (validated) */
    uint32_t n_dims;   /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ne[0] contiguous; unused dims = 1 */
    uint64_t n_elems;
    uint64_t offset;   /* relative to the start of the data section */
    uint64_t n_bytes;
    const void *data;  /* into the mapping; at a file offset aligned to general.alignment
                          and to the type's element alignment (4 for F32, 2 for F16...) */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Map and validate path.  On success *out owns the mapping. */
int gguf_open(const char *path, gguf_file **out, char *err, size_t err_len);
/* Map and validate the GGUF image held in bytes [offset, offset + size_bytes)
 * of path (a bundle executable carries one after its code).  offset must be a
 * multiple of the page size (mmap); size_bytes 0 means "to the end of the
 * file".  An image running past the end of the file (a truncated copy) is
 * GGUF_EFORMAT: "'x': GGUF image of N bytes at offset O runs past the end of
 * the file (M bytes): truncated?".  Tensor offsets are checked relative to the
 * image, so its alignment must divide offset (pages always do). */
int gguf_open_range(const char *path, uint64_t offset, uint64_t size_bytes, gguf_file **out,
                    char *err, size_t err_len);
/* Validate an in-memory image (not copied: must outlive the handle).  Tensor
 * alignment is checked on file offsets, so the image should start 8-byte
 * aligned (malloc's is) for tensor data to be aligned in memory too. */
int gguf_open_mem(const void *data, size_t size, gguf_file **out, char *err, size_t err_len);
void gguf_close(gguf_file *g); /* NULL is a no-op */

/* ---- files assembled from parts -------------------------------------------
 * A GGUF whose header, metadata and tensor table are an in-memory image and
 * whose tensor data lives elsewhere (formats/hf.h builds one from a Hugging
 * Face folder: the data stays in the safetensors mappings, zero copy).  The
 * image is validated like a file (gguf_open_mem) up to the end of its tensor
 * table and its padding to general.alignment (which the image must hold:
 * gguf_fingerprint hashes it); the data section is virtual: data_bytes long,
 * starting right after that padding, and every tensor's offset and size are
 * checked against it as for a file (bounds, alignment, no overlap).  Tensor i
 * (table order) then points at data[i], which must be aligned as its type
 * needs (gguf_open checks the same on file offsets).  gguf_size() is the
 * image up to the data section plus data_bytes; gguf_file_id() is -1. */
typedef struct {
    const void *base; /* a read-only file mapping (MAP_PRIVATE) */
    uint64_t size;
} gguf_region;

typedef struct {
    const void *const *data;     /* (n_data) tensor data, table order; must stay valid until close */
    uint64_t n_data;             /* must equal the image's tensor count */
    uint64_t data_bytes;         /* size of the virtual data section */
    /* Read-only file mappings some of the data lies in: gguf_populate and
     * gguf_release_pages act on data inside one of them (never list
     * allocated memory here: releasing its pages would zero it). */
    const gguf_region *regions;  /* (n_regions) */
    size_t n_regions;
    void (*release)(void *owner); /* called once by gguf_close (also when the open fails) */
    void *owner;                 /* what release frees: the image, data, mappings */
} gguf_parts;

/* Validate image[0..image_len) with the data of parts (copied; the arrays it
 * points to must outlive the handle).  Errors as gguf_open_mem; on failure
 * parts->release has been called. */
int gguf_open_parts(const void *image, size_t image_len, const gguf_parts *parts, gguf_file **out, char *err,
                    size_t err_len);

uint32_t gguf_version(const gguf_file *g);
uint32_t gguf_alignment(const gguf_file *g);
/* The identity (st_dev, st_ino) of the file gguf_open mapped, so a writer can
 * refuse to replace its own input (gguf_write.h gguf_out_open).  0, or -1 for
 * an image from gguf_open_mem. */
int gguf_file_id(const gguf_file *g, uint64_t *dev, uint64_t *ino);
const void *gguf_base(const gguf_file *g); /* start of the mapping */
uint64_t gguf_size(const gguf_file *g);    /* file size in bytes */
uint64_t gguf_data_offset(const gguf_file *g); /* start of the tensor data section */

uint64_t gguf_n_kv(const gguf_file *g);
const gguf_kv *gguf_kv_at(const gguf_file *g, uint64_t i);
/* Index of key, or -1. */
int64_t gguf_find_key(const gguf_file *g, const char *key);
const gguf_value *gguf_get(const gguf_file *g, const char *key); /* NULL if absent */

/* Typed accessors.  Integer accessors accept any integer value type whose
 * value fits the destination; the float accessor accepts FLOAT32/FLOAT64.
 * Missing key → GGUF_ENOTFOUND, wrong type or out of range → GGUF_ETYPE,
 * each with a message naming the key and the expected vs actual type. */
int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, char *err, size_t err_len);
int gguf_get_u64(const gguf_file *g, const char *key, uint64_t *out, char *err, size_t err_len);
int gguf_get_i64(const gguf_file *g, const char *key, int64_t *out, char *err, size_t err_len);
int gguf_get_f32(const gguf_file *g, const char *key, float *out, char *err, size_t err_len);
int gguf_get_bool(const gguf_file *g, const char *key, bool *out, char *err, size_t err_len);
int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, char *err, size_t err_len);
/* Array of elem_type (GGUF_VT_COUNT = any). */
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type,
                 const gguf_value **out, char *err, size_t err_len);

const char *gguf_vtype_name(uint32_t t);
/* Bytes of one fixed-size value of type t; 0 for STRING, ARRAY and invalid t. */
uint32_t gguf_vtype_size(uint32_t t);
/* Element i of array value arr as a standalone value: a decoded scalar for
 * fixed-size element types, the string for STRING, the sub-array for ARRAY.
 * GGUF_ENOTFOUND when arr is not an array or i >= n.  Pointers inside *out
 * point into the file, valid until gguf_close(). */
int gguf_arr_elem(const gguf_value *arr, uint64_t i, gguf_value *out);
/* llama.cpp's name for a general.file_type value (enum llama_ftype), e.g.
 * 15 → "MOSTLY_Q4_K_M"; "unknown" for ids llama.cpp does not define. */
const char *gguf_file_type_name(uint32_t ftype);
/* True when s equals the NUL-terminated c. */
bool gguf_str_eq(gguf_str s, const char *c);

uint64_t gguf_n_tensors(const gguf_file *g);
const gguf_tensor *gguf_tensor_at(const gguf_file *g, uint64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name); /* NULL if absent */

/* Map the pages of [p, p + n) (inside g's mapping, or one of its parts'
 * regions) now, in one call
 * (madvise MADV_POPULATE_READ, Linux 5.14+): reads what is not in the page
 * cache yet and saves a page fault per 64 KiB on first use.  -1 when g is
 * not a file mapping, the range is outside it or the kernel refuses. */
int gguf_populate(const gguf_file *g, const void *p, uint64_t n);

/* Drop the whole pages inside [p, p + n) from this process's mapping
 * (madvise MADV_DONTNEED): they leave its RSS, stay in the page cache and
 * read back unchanged if touched again.  For tensors copied elsewhere (a
 * compute precision's repacked weights).  -1 as for gguf_populate. */
int gguf_release_pages(const gguf_file *g, const void *p, uint64_t n);

/* 64-bit fingerprint of everything that shapes generated code: the header,
 * metadata and tensor table bytes (not the tensor data) plus the file size.
 * Stable across runs; used as the compile-cache key.  Hex form: 16 chars. */
uint64_t gguf_fingerprint(const gguf_file *g);

#endif
