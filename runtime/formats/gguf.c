/*
 * gguf.c — read-only, zero-copy GGUF loader (see gguf.h).
 *
 * The file is mapped once (PROT_READ, MAP_PRIVATE) and parsed front to back by
 * a bounds-checked cursor: every length is compared with the bytes left before
 * it is used and every product is checked for overflow, so a hostile file can
 * neither read outside the mapping nor make us allocate more than a small
 * multiple of its own size.  The first error stops the parse and is reported as
 * one line with the byte offset, the key or tensor involved and expected vs
 * actual.
 *
 * What is allocated: the kv and tensor arrays, an arena holding the string
 * indexes of string arrays (so strs[i] is O(1)), the element tables of nested
 * arrays and NUL-terminated copies of tensor names, and two open-addressing
 * hash tables (keys, tensor names) built once at open.  Everything else —
 * string bytes, fixed-size array payloads, tensor data — points into the
 * mapping and lives until gguf_close().
 *
 * Layout (gguf.md): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv × (string key, u32 type, value), n_tensors × (string name, u32 n_dims,
 * n_dims × i64 ne, u32 type, u64 offset), padding to general.alignment, data.
 * Only little-endian files are read (a big-endian v3 file shows up as a huge
 * version number and is refused with that hint).
 */
#include "gguf.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian GGUF files by memcpy; port the readers for a big-endian host"
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_BYTES 24u     /* magic, version, n_tensors, n_kv */
#define GGUF_MAX_ARRAY_DEPTH 8    /* arrays of arrays nested deeper are refused */
/* Smallest possible encodings, used to refuse counts the bytes left cannot
 * hold before anything is allocated. */
#define GGUF_MIN_KV_BYTES 14u     /* u64 key len + 1 key byte + u32 type + 1 value byte */
#define GGUF_MIN_TENSOR_BYTES 33u /* u64 name len + 1 + u32 n_dims + 1 × i64 + u32 type + u64 offset */
#define GGUF_MIN_STR_BYTES 8u
#define GGUF_MIN_ARR_BYTES 12u    /* u32 elem type + u64 n */

/* llama.cpp enum llama_ftype (general.file_type).  Gaps were removed. */
static const char *const ftype_names[] = {
    [0] = "ALL_F32", [1] = "MOSTLY_F16", [2] = "MOSTLY_Q4_0", [3] = "MOSTLY_Q4_1",
    [4] = "MOSTLY_Q4_1_SOME_F16", [7] = "MOSTLY_Q8_0", [8] = "MOSTLY_Q5_0",
    [9] = "MOSTLY_Q5_1", [10] = "MOSTLY_Q2_K", [11] = "MOSTLY_Q3_K_S",
    [12] = "MOSTLY_Q3_K_M", [13] = "MOSTLY_Q3_K_L", [14] = "MOSTLY_Q4_K_S",
    [15] = "MOSTLY_Q4_K_M", [16] = "MOSTLY_Q5_K_S", [17] = "MOSTLY_Q5_K_M",
    [18] = "MOSTLY_Q6_K", [19] = "MOSTLY_IQ2_XXS", [20] = "MOSTLY_IQ2_XS",
    [21] = "MOSTLY_Q2_K_S", [22] = "MOSTLY_IQ3_XS", [23] = "MOSTLY_IQ3_XXS",
    [24] = "MOSTLY_IQ1_S", [25] = "MOSTLY_IQ4_NL", [26] = "MOSTLY_IQ3_S",
    [27] = "MOSTLY_IQ3_M", [28] = "MOSTLY_IQ2_S", [29] = "MOSTLY_IQ2_M",
    [30] = "MOSTLY_IQ4_XS", [31] = "MOSTLY_IQ1_M", [32] = "MOSTLY_BF16",
    [36] = "MOSTLY_TQ1_0", [37] = "MOSTLY_TQ2_0", [38] = "MOSTLY_MXFP4_MOE",
};

const char *gguf_file_type_name(uint32_t ftype) {
    if (ftype < sizeof ftype_names / sizeof ftype_names[0] && ftype_names[ftype])
        return ftype_names[ftype];
    return "unknown";
}

/* ==== value types ========================================================== */

static const struct { const char *name; uint32_t size; } vtypes[GGUF_VT_COUNT] = {
    [GGUF_VT_UINT8] = {"u8", 1},   [GGUF_VT_INT8] = {"i8", 1},
    [GGUF_VT_UINT16] = {"u16", 2}, [GGUF_VT_INT16] = {"i16", 2},
    [GGUF_VT_UINT32] = {"u32", 4}, [GGUF_VT_INT32] = {"i32", 4},
    [GGUF_VT_FLOAT32] = {"f32", 4}, [GGUF_VT_BOOL] = {"bool", 1},
    [GGUF_VT_STRING] = {"str", 0}, [GGUF_VT_ARRAY] = {"arr", 0},
    [GGUF_VT_UINT64] = {"u64", 8}, [GGUF_VT_INT64] = {"i64", 8},
    [GGUF_VT_FLOAT64] = {"f64", 8},
};

const char *gguf_vtype_name(uint32_t t) { return t < GGUF_VT_COUNT ? vtypes[t].name : "invalid"; }

uint32_t gguf_vtype_size(uint32_t t) { return t < GGUF_VT_COUNT ? vtypes[t].size : 0; }

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

/* Decode one fixed-size little-endian value of type t at p into v. */
static void decode_scalar(uint32_t t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    switch (t) {
    case GGUF_VT_UINT8: v->v.u64 = p[0]; break;
    case GGUF_VT_INT8: v->v.i64 = (int8_t)p[0]; break;
    case GGUF_VT_UINT16: { uint16_t x; memcpy(&x, p, 2); v->v.u64 = x; break; }
    case GGUF_VT_INT16: { int16_t x; memcpy(&x, p, 2); v->v.i64 = x; break; }
    case GGUF_VT_UINT32: { uint32_t x; memcpy(&x, p, 4); v->v.u64 = x; break; }
    case GGUF_VT_INT32: { int32_t x; memcpy(&x, p, 4); v->v.i64 = x; break; }
    case GGUF_VT_FLOAT32: { float x; memcpy(&x, p, 4); v->v.f64 = x; break; }
    case GGUF_VT_BOOL: v->v.b = p[0] != 0; break;
    case GGUF_VT_UINT64: memcpy(&v->v.u64, p, 8); break;
    case GGUF_VT_INT64: memcpy(&v->v.i64, p, 8); break;
    case GGUF_VT_FLOAT64: memcpy(&v->v.f64, p, 8); break;
    default: break;
    }
}

int gguf_arr_elem(const gguf_value *arr, uint64_t i, gguf_value *out) {
    if (!arr || arr->type != GGUF_VT_ARRAY || i >= arr->v.arr.n) return GGUF_ENOTFOUND;
    uint32_t et = arr->v.arr.type;
    memset(out, 0, sizeof *out);
    if (et == GGUF_VT_STRING) {
        out->type = et;
        out->v.str = arr->v.arr.strs[i];
    } else if (et == GGUF_VT_ARRAY) {
        *out = arr->v.arr.elems[i];
    } else {
        decode_scalar(et, (const uint8_t *)arr->v.arr.data + i * vtypes[et].size, out);
    }
    return GGUF_OK;
}

/* ==== the handle =========================================================== */

typedef struct arena_chunk arena_chunk;
struct arena_chunk {
    arena_chunk *next;
    size_t used, cap;
    max_align_t data[]; /* (cap bytes) */
};

struct gguf_file {
    const uint8_t *base; /* (size) the mapping, or the caller's image */
    uint64_t size;
    bool mapped;         /* munmap at close */
    uint64_t dev, ino;   /* st_dev/st_ino of the mapped file (mapped only) */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    gguf_kv *kvs;        /* (n_kv) */
    uint64_t n_tensors;
    gguf_tensor *tensors; /* (n_tensors) */
    uint64_t *key_slots;  /* (key_mask + 1) index + 1, 0 = empty */
    uint64_t key_mask;
    uint64_t *tensor_slots; /* (tensor_mask + 1) index + 1, 0 = empty */
    uint64_t tensor_mask;
    arena_chunk *arena;
    bool has_parts;      /* assembled by gguf_open_parts: data in parts.regions */
    gguf_parts parts;    /* copy of the caller's (pointers stay the caller's until close) */
};

/* Large chunks (the string index of a 150k-token vocabulary is 2.4 MB) come
 * from mmap with MAP_POPULATE: one syscall instead of a page fault per 4 KiB,
 * which on a VM costs several microseconds each. */
#define ARENA_MMAP_BYTES (256u << 10)

static void *arena_alloc(gguf_file *g, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = g->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        if (sizeof *c + cap >= ARENA_MMAP_BYTES) {
            void *m = mmap(NULL, sizeof *c + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                           -1, 0);
            c = m == MAP_FAILED ? NULL : m;
        } else {
            c = malloc(sizeof *c + cap);
        }
        if (!c) return NULL;
        c->next = g->arena;
        c->used = 0;
        c->cap = cap;
        g->arena = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

static uint64_t hash_name(const char *s, size_t n) { return XXH3_64bits(s, n); }

/* Table size: a power of two at least 2n (load factor ≤ 1/2). */
static uint64_t *hash_new(uint64_t n, uint64_t *mask) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    *mask = cap - 1;
    return calloc(cap, sizeof(uint64_t));
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
    if (g->has_parts && g->parts.release) g->parts.release(g->parts.owner);
    for (arena_chunk *c = g->arena, *next; c; c = next) {
        next = c->next;
        if (sizeof *c + c->cap >= ARENA_MMAP_BYTES) munmap(c, sizeof *c + c->cap);
        else free(c);
    }
    free(g->kvs);
    free(g->tensors);
    free(g->key_slots);
    free(g->tensor_slots);
    free(g);
}

/* ==== parser =============================================================== */

typedef struct {
    gguf_file *g;
    const uint8_t *p; /* (size) */
    uint64_t size;
    uint64_t off;     /* cursor */
    char *err;
    size_t err_len;
    uint64_t populated; /* bytes [0, populated) prefaulted (whole image when not mapped) */
} reader;

/* The parse walks the header front to back through a chain of dependent
 * loads (each length gives the next offset), so every page fault stalls it.
 * Ask the kernel to map the pages ahead in 4 MiB steps instead (Linux 5.14+;
 * elsewhere the advice fails harmlessly). */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define PREFAULT_STEP (4u << 20)

static void prefault(reader *r, uint64_t end) {
    while (end > r->populated && r->populated < r->size) {
        uint64_t n = r->size - r->populated < PREFAULT_STEP ? r->size - r->populated : PREFAULT_STEP;
        (void)madvise((void *)(r->p + r->populated), n, MADV_POPULATE_READ);
        r->populated += n;
    }
}

static int seterr(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int seterr(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        int k = snprintf(err, err_len, "gguf: ");
        if (k < 0 || (size_t)k >= err_len) return code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, err_len - (size_t)k, fmt, ap);
        va_end(ap);
        /* One line, always: a name from the file might carry a newline. */
        for (char *q = err; *q; q++)
            if (*q == '\n' || *q == '\r') *q = ' ';
    }
    return code;
}

#define FAIL(r, ...) seterr((r)->err, (r)->err_len, GGUF_EFORMAT, __VA_ARGS__)
#define NOMEM(r, what) seterr((r)->err, (r)->err_len, GGUF_ENOMEM, "out of memory allocating %s", what)

static uint64_t left(const reader *r) { return r->size - r->off; }

/* Quote a name from the file for a message: printable ASCII, at most 64 bytes,
 * anything else as \xNN, so messages stay one readable line. */
static const char *q(const char *s, uint64_t n, char buf[static 280]) {
    size_t k = 0;
    for (uint64_t i = 0; i < n && k < 260; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 64) { k += (size_t)snprintf(buf + k, 8, "..."); break; }
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') buf[k++] = (char)c;
        else k += (size_t)snprintf(buf + k, 8, "\\x%02x", c);
    }
    buf[k] = 0;
    return buf;
}

static int rd_u32(reader *r, uint32_t *v, const char *what, const char *ctx) {
    if (r->off + 4 > r->populated) prefault(r, r->off + 4);
    if (left(r) < 4)
        return FAIL(r, "%s%s at offset %llu: need 4 bytes, %llu left (file size %llu)", ctx, what,
                    (unsigned long long)r->off, (unsigned long long)left(r), (unsigned long long)r->size);
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return 0;
}

static int rd_u64(reader *r, uint64_t *v, const char *what, const char *ctx) {
    if (r->off + 8 > r->populated) prefault(r, r->off + 8);
    if (left(r) < 8)
        return FAIL(r, "%s%s at offset %llu: need 8 bytes, %llu left (file size %llu)", ctx, what,
                    (unsigned long long)r->off, (unsigned long long)left(r), (unsigned long long)r->size);
    memcpy(v, r->p + r->off, 8);
    r->off += 8;
    return 0;
}

static int rd_str(reader *r, gguf_str *s, const char *what, const char *ctx) {
    uint64_t at = r->off, n = 0;
    int rc = rd_u64(r, &n, what, ctx);
    if (rc) return rc;
    if (n > left(r))
        return FAIL(r, "%s%s at offset %llu: length %llu exceeds the %llu bytes left (file size %llu)", ctx,
                    what, (unsigned long long)at, (unsigned long long)n, (unsigned long long)left(r),
                    (unsigned long long)r->size);
    s->len = n;
    s->ptr = (const char *)r->p + r->off;
    r->off += n;
    return 0;
}

static int parse_array(reader *r, gguf_value *v, int depth, const char *ctx);

/* Value of type t at the cursor (t already validated < GGUF_VT_COUNT). */
static int parse_value(reader *r, uint32_t t, gguf_value *v, int depth, const char *ctx) {
    memset(v, 0, sizeof *v);
    v->type = t;
    if (t == GGUF_VT_STRING) return rd_str(r, &v->v.str, "string value", ctx);
    if (t == GGUF_VT_ARRAY) return parse_array(r, v, depth + 1, ctx);
    uint32_t sz = vtypes[t].size;
    if (left(r) < sz)
        return FAIL(r, "%s%s value at offset %llu: need %u bytes, %llu left (file size %llu)", ctx,
                    vtypes[t].name, (unsigned long long)r->off, sz, (unsigned long long)left(r),
                    (unsigned long long)r->size);
    if (t == GGUF_VT_BOOL && r->p[r->off] > 1)
        return FAIL(r, "%sbool value at offset %llu: expected 0 or 1, got %u", ctx,
                    (unsigned long long)r->off, r->p[r->off]);
    decode_scalar(t, r->p + r->off, v);
    r->off += sz;
    return 0;
}

static int parse_array(reader *r, gguf_value *v, int depth, const char *ctx) {
    uint64_t at = r->off;
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return FAIL(r, "%sarray at offset %llu nested %d deep, limit %d", ctx, (unsigned long long)at, depth,
                    GGUF_MAX_ARRAY_DEPTH);
    uint32_t et = 0;
    uint64_t n = 0;
    int rc = rd_u32(r, &et, "array element type", ctx);
    if (!rc) rc = rd_u64(r, &n, "array length", ctx);
    if (rc) return rc;
    if (et >= GGUF_VT_COUNT)
        return FAIL(r, "%sarray at offset %llu: element type %u, expected 0..%d", ctx, (unsigned long long)at,
                    et, GGUF_VT_COUNT - 1);
    v->type = GGUF_VT_ARRAY;
    v->v.arr.type = et;
    v->v.arr.n = n;
    v->v.arr.data = r->p + r->off;
    uint32_t esz = vtypes[et].size;
    uint64_t min_elem = esz ? esz : et == GGUF_VT_STRING ? GGUF_MIN_STR_BYTES : GGUF_MIN_ARR_BYTES;
    if (n > left(r) / min_elem)
        return FAIL(r, "%sarray of %llu %s at offset %llu needs at least %llu bytes per element, %llu bytes left",
                    ctx, (unsigned long long)n, vtypes[et].name, (unsigned long long)at,
                    (unsigned long long)min_elem, (unsigned long long)left(r));
    if (esz) {
        if (et == GGUF_VT_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (r->p[r->off + i] > 1)
                    return FAIL(r, "%sbool array element %llu at offset %llu: expected 0 or 1, got %u", ctx,
                                (unsigned long long)i, (unsigned long long)(r->off + i), r->p[r->off + i]);
        r->off += n * esz;
        return 0;
    }
    if (et == GGUF_VT_STRING) {
        gguf_str *strs = n ? arena_alloc(r->g, n * sizeof *strs) : NULL;
        if (n && !strs) return NOMEM(r, "a string array index");
        for (uint64_t i = 0; i < n; i++)
            if ((rc = rd_str(r, &strs[i], "string array element", ctx))) return rc;
        v->v.arr.strs = strs;
        return 0;
    }
    gguf_value *elems = n ? arena_alloc(r->g, n * sizeof *elems) : NULL;
    if (n && !elems) return NOMEM(r, "a nested array");
    for (uint64_t i = 0; i < n; i++) {
        memset(&elems[i], 0, sizeof elems[i]);
        if ((rc = parse_array(r, &elems[i], depth + 1, ctx))) return rc;
    }
    v->v.arr.elems = elems;
    return 0;
}

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int parse_kvs(reader *r) {
    gguf_file *g = r->g;
    char qb[280], ctx[400];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        kv->offset = r->off;
        snprintf(ctx, sizeof ctx, "kv %llu: ", (unsigned long long)i);
        int rc = rd_str(r, &kv->key, "key", ctx);
        if (rc) return rc;
        if (kv->key.len == 0) return FAIL(r, "kv %llu at offset %llu: empty key", (unsigned long long)i,
                                          (unsigned long long)kv->offset);
        if (memchr(kv->key.ptr, 0, kv->key.len))
            return FAIL(r, "kv %llu at offset %llu: key '%s' contains a NUL byte", (unsigned long long)i,
                        (unsigned long long)kv->offset, q(kv->key.ptr, kv->key.len, qb));
        snprintf(ctx, sizeof ctx, "key '%s' (offset %llu): ", q(kv->key.ptr, kv->key.len, qb),
                 (unsigned long long)kv->offset);
        uint32_t t = 0;
        uint64_t tat = r->off;
        if ((rc = rd_u32(r, &t, "value type", ctx))) return rc;
        if (t >= GGUF_VT_COUNT)
            return FAIL(r, "%svalue type %u at offset %llu, expected 0..%d", ctx, t, (unsigned long long)tat,
                        GGUF_VT_COUNT - 1);
        if ((rc = parse_value(r, t, &kv->value, 0, ctx))) return rc;

        /* Duplicate keys make lookups ambiguous (ggml refuses them too). */
        uint64_t h = hash_name(kv->key.ptr, kv->key.len) & g->key_mask;
        for (;; h = (h + 1) & g->key_mask) {
            uint64_t s = g->key_slots[h];
            if (!s) { g->key_slots[h] = i + 1; break; }
            const gguf_kv *o = &g->kvs[s - 1];
            if (o->key.len == kv->key.len && !memcmp(o->key.ptr, kv->key.ptr, kv->key.len))
                return FAIL(r, "%sduplicate key (first at offset %llu)", ctx, (unsigned long long)o->offset);
        }
    }
    return 0;
}

static int parse_alignment(reader *r) {
    gguf_file *g = r->g;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(g, "general.alignment");
    if (i < 0) return 0;
    const gguf_kv *kv = &g->kvs[i];
    if (kv->value.type != GGUF_VT_UINT32)
        return FAIL(r, "key 'general.alignment' (offset %llu): expected type u32, got %s",
                    (unsigned long long)kv->offset, gguf_vtype_name(kv->value.type));
    if (!is_pow2(kv->value.v.u64))
        return FAIL(r, "key 'general.alignment' (offset %llu): value %llu is not a nonzero power of two",
                    (unsigned long long)kv->offset, (unsigned long long)kv->value.v.u64);
    g->alignment = (uint32_t)kv->value.v.u64;
    return 0;
}

/* A .giw (a file with cinfer.version, runtime/engine/giw.h) is written with
 * general.alignment 64 and its repacked tensors are bound zero-copy by SIMD
 * kernels, so refuse one whose data may sit at smaller alignments. */
static int check_giw_alignment(reader *r) {
    gguf_file *g = r->g;
    if (gguf_find_key(g, "cinfer.version") < 0 || g->alignment >= GGUF_GIW_MIN_ALIGNMENT) return 0;
    int64_t i = gguf_find_key(g, "general.alignment");
    if (i < 0)
        return FAIL(r, "a .giw file (one with a cinfer.version key) needs general.alignment >= %u, the key is "
                    "missing (default %u)", GGUF_GIW_MIN_ALIGNMENT, g->alignment);
    return FAIL(r, "key 'general.alignment' (offset %llu): a .giw file (one with a cinfer.version key) needs "
                ">= %u, got %u", (unsigned long long)g->kvs[i].offset, GGUF_GIW_MIN_ALIGNMENT, g->alignment);
}

/* The alignment a tensor of type t needs for its element or block fields to
 * be read in place without misaligned loads: the largest power of two that
 * divides the element/block size, at most 8 for plain types (F64, I64) and 4
 * for block types (their fields are ggml_half, float or bytes; 4 is a slight
 * over-requirement for some, e.g. Q4_K's ggml_half, never an under-one). */
static uint32_t type_alignment(const ggml_type_info *ti) {
    uint32_t cap = ti->blck_size == 1 ? 8 : 4, a = 1;
    while (a < cap && ti->type_size % (a * 2) == 0) a *= 2;
    return a;
}

static int parse_tensor_infos(reader *r) {
    gguf_file *g = r->g;
    char qb[280], ctx[400];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t at = r->off;
        gguf_str name;
        snprintf(ctx, sizeof ctx, "tensor %llu: ", (unsigned long long)i);
        int rc = rd_str(r, &name, "name", ctx);
        if (rc) return rc;
        if (name.len == 0)
            return FAIL(r, "tensor %llu at offset %llu: empty name", (unsigned long long)i, (unsigned long long)at);
        if (memchr(name.ptr, 0, name.len))
            return FAIL(r, "tensor %llu at offset %llu: name '%s' contains a NUL byte", (unsigned long long)i,
                        (unsigned long long)at, q(name.ptr, name.len, qb));
        char *copy = arena_alloc(g, name.len + 1);
        if (!copy) return NOMEM(r, "a tensor name");
        memcpy(copy, name.ptr, name.len);
        copy[name.len] = 0;
        t->name = copy;
        snprintf(ctx, sizeof ctx, "tensor '%s' (offset %llu): ", q(name.ptr, name.len, qb), (unsigned long long)at);

        uint64_t dat = r->off;
        if ((rc = rd_u32(r, &t->n_dims, "n_dims", ctx))) return rc;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return FAIL(r, "%sn_dims %u at offset %llu, expected 1..%d", ctx, t->n_dims, (unsigned long long)dat,
                        GGUF_MAX_DIMS);
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne = 0, nat = r->off;
            if ((rc = rd_u64(r, &ne, "dimension", ctx))) return rc;
            if ((int64_t)ne < 1)
                return FAIL(r, "%sdimension %u at offset %llu is %lld, expected >= 1", ctx, d,
                            (unsigned long long)nat, (long long)(int64_t)ne);
            /* ggml keeps element counts in int64_t. */
            if (n_elems > (uint64_t)INT64_MAX / ne)
                return FAIL(r, "%sdimension %u (%llu) makes the element count overflow int64", ctx, d,
                            (unsigned long long)ne);
            n_elems *= ne;
            t->ne[d] = (int64_t)ne;
        }
        t->n_elems = n_elems;
        uint64_t tat = r->off;
        if ((rc = rd_u32(r, &t->type, "type", ctx))) return rc;
        const ggml_type_info *ti = ggml_type_get(t->type);
        bool cinfer_type = t->type >= GGUF_CINFER_TYPE_FIRST && t->type <= GGUF_CINFER_TYPE_LAST;
        if (ti && cinfer_type && gguf_find_key(g, "cinfer.version") < 0)
            return FAIL(r, "%stype id %u (%s) at offset %llu is a cinfer repacked type, valid only in a .giw "
                        "file (one with a cinfer.version key)", ctx, t->type, ti->name, (unsigned long long)tat);
        if (!ti)
            return FAIL(r, "%sunknown ggml type id %u at offset %llu (known ids: 0..%d, ids 4, 5, 31-33, 36-38 were "
                        "removed from ggml; cinfer .giw types: %d..%d)", ctx, t->type, (unsigned long long)tat,
                        GGML_TYPE_COUNT - 1, GGUF_CINFER_TYPE_Q4_0_R8, GGUF_CINFER_TYPE_IQ4_XS_R8);
        if (cinfer_type && (n_elems / (uint64_t)t->ne[0]) % GGUF_CINFER_TYPE_ROWS)
            return FAIL(r, "%stype %s: %llu rows, expected a multiple of %d (interleaved groups)", ctx, ti->name,
                        (unsigned long long)(n_elems / (uint64_t)t->ne[0]), GGUF_CINFER_TYPE_ROWS);
        if ((uint64_t)t->ne[0] % ti->blck_size)
            return FAIL(r, "%stype %s: ne[0] = %lld is not a multiple of the block size %u", ctx, ti->name,
                        (long long)t->ne[0], ti->blck_size);
        /* Bytes = rows × row bytes; either can overflow (ggml_row_bytes
         * returns 0 then: ne[0] >= 1 and a multiple of the block otherwise). */
        uint64_t row_bytes = ggml_row_bytes(t->type, (uint64_t)t->ne[0]);
        uint64_t rows = n_elems / (uint64_t)t->ne[0];
        if (row_bytes == 0 || row_bytes > UINT64_MAX / rows)
            return FAIL(r, "%ssize in bytes overflows 64 bits", ctx);
        t->n_bytes = row_bytes * rows;
        if ((rc = rd_u64(r, &t->offset, "data offset", ctx))) return rc;

        uint64_t h = hash_name(copy, name.len) & g->tensor_mask;
        for (;; h = (h + 1) & g->tensor_mask) {
            uint64_t s = g->tensor_slots[h];
            if (!s) { g->tensor_slots[h] = i + 1; break; }
            if (!strcmp(g->tensors[s - 1].name, copy))
                return FAIL(r, "%sduplicate tensor name (first defined as tensor %llu)", ctx,
                            (unsigned long long)(s - 1));
        }
    }
    return 0;
}

typedef struct {
    uint64_t begin, end; /* [begin, end) in the data section */
    uint64_t idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Offsets aligned (to general.alignment and to the tensor type's element
 * alignment), data inside the file, no two tensors overlapping. */
static int validate_layout(reader *r) {
    gguf_file *g = r->g;
    char qb[280], qb2[280];
    uint64_t data_bytes = g->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        const char *nm = q(t->name, strlen(t->name), qb);
        if (t->offset % g->alignment)
            return FAIL(r, "tensor '%s': data offset %llu is not a multiple of the alignment %u", nm,
                        (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_bytes || t->n_bytes > data_bytes - t->offset) {
            if (t->offset > UINT64_MAX - g->data_offset)
                return FAIL(r, "tensor '%s': data offset %llu (relative to the data section at %llu) past end of file (%llu)",
                            nm, (unsigned long long)t->offset, (unsigned long long)g->data_offset,
                            (unsigned long long)g->size);
            return FAIL(r, "tensor '%s': data offset %llu + %llu bytes past end of file (%llu): the file is "
                        "truncated (an interrupted download or copy?); download it again (cinfer pull resumes)", nm,
                        (unsigned long long)(g->data_offset + t->offset), (unsigned long long)t->n_bytes,
                        (unsigned long long)g->size);
        }
        /* general.alignment may be any power of two, down to 1: also need the
         * element alignment (the mapping starts page-aligned, so the file
         * offset decides the address's alignment) */
        const uint32_t ta = type_alignment(ggml_type_get(t->type));
        if (g->has_parts) { /* data elsewhere: its address decides the alignment */
            t->data = g->parts.data[i];
            if (!t->data && t->n_bytes)
                return FAIL(r, "tensor '%s': no data given for it (assembled file)", nm);
            if ((uintptr_t)t->data % ta)
                return FAIL(r, "tensor '%s': data at address %p is not aligned to %u bytes as type %s needs", nm,
                            t->data, ta, ggml_type_name(t->type));
            continue;
        }
        if ((g->data_offset + t->offset) % ta)
            return FAIL(r, "tensor '%s': data at file offset %llu is not aligned to %u bytes as type %s needs "
                        "(general.alignment is %u)", nm, (unsigned long long)(g->data_offset + t->offset), ta,
                        ggml_type_name(t->type), g->alignment);
        t->data = g->base + g->data_offset + t->offset;
    }
    if (g->n_tensors < 2) return 0;
    /* Sorted by start, a tensor can only overlap its successor's start. */
    span *sp = malloc(g->n_tensors * sizeof *sp);
    if (!sp) return NOMEM(r, "the tensor order");
    for (uint64_t i = 0; i < g->n_tensors; i++)
        sp[i] = (span){g->tensors[i].offset, g->tensors[i].offset + g->tensors[i].n_bytes, i};
    qsort(sp, g->n_tensors, sizeof *sp, cmp_span);
    int rc = 0;
    for (uint64_t k = 0; k + 1 < g->n_tensors; k++) {
        if (sp[k].end > sp[k + 1].begin) {
            const gguf_tensor *a = &g->tensors[sp[k].idx], *b = &g->tensors[sp[k + 1].idx];
            rc = FAIL(r, "tensor '%s': data [%llu, %llu) overlaps tensor '%s' [%llu, %llu) (offsets in the data section at %llu)",
                      q(b->name, strlen(b->name), qb), (unsigned long long)sp[k + 1].begin,
                      (unsigned long long)sp[k + 1].end, q(a->name, strlen(a->name), qb2),
                      (unsigned long long)sp[k].begin, (unsigned long long)sp[k].end,
                      (unsigned long long)g->data_offset);
            break;
        }
    }
    free(sp);
    return rc;
}

static int parse(reader *r) {
    gguf_file *g = r->g;
    if (r->size < GGUF_HEADER_BYTES) {
        if (r->size < 4 || memcmp(r->p, GGUF_MAGIC, 4))
            goto bad_magic;
        return FAIL(r, "file is %llu bytes, a GGUF header needs %u", (unsigned long long)r->size, GGUF_HEADER_BYTES);
    }
    if (memcmp(r->p, GGUF_MAGIC, 4)) goto bad_magic;
    r->off = 4;
    uint64_t n_tensors = 0, n_kv = 0;
    rd_u32(r, &g->version, "version", "");
    if (g->version == 1)
        return FAIL(r, "GGUF version 1 at offset 4 is not supported (obsolete 32-bit counts): expected 2 or 3");
    if (g->version != 2 && g->version != 3)
        return FAIL(r, "GGUF version %u at offset 4 is not supported: expected 2 or 3%s", g->version,
                    (g->version & 0xffff) == 0 ? " (a big-endian file?)" : "");
    rd_u64(r, &n_tensors, "n_tensors", "");
    rd_u64(r, &n_kv, "n_kv", "");
    /* Refuse counts the remaining bytes cannot hold before allocating for them. */
    if (n_kv > left(r) / GGUF_MIN_KV_BYTES)
        return FAIL(r, "n_kv %llu at offset 16 is impossible: %llu bytes left, each kv needs at least %u",
                    (unsigned long long)n_kv, (unsigned long long)left(r), GGUF_MIN_KV_BYTES);
    if (n_tensors > (left(r) - n_kv * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES)
        return FAIL(r, "n_tensors %llu at offset 8 is impossible: %llu bytes left after %llu kvs, each tensor "
                    "info needs at least %u", (unsigned long long)n_tensors,
                    (unsigned long long)(left(r) - n_kv * GGUF_MIN_KV_BYTES), (unsigned long long)n_kv,
                    GGUF_MIN_TENSOR_BYTES);
    g->n_kv = n_kv;
    g->n_tensors = n_tensors;
    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->key_slots = hash_new(n_kv, &g->key_mask);
    g->tensor_slots = hash_new(n_tensors, &g->tensor_mask);
    if (!g->kvs || !g->tensors || !g->key_slots || !g->tensor_slots) return NOMEM(r, "the kv and tensor tables");

    int rc;
    if ((rc = parse_kvs(r))) return rc;
    if ((rc = parse_alignment(r)) || (rc = check_giw_alignment(r))) return rc;
    if ((rc = parse_tensor_infos(r))) return rc;

    uint64_t pad = (g->alignment - r->off % g->alignment) % g->alignment;
    if (g->has_parts) {
        /* the image ends with the tables (and their padding, which the
         * fingerprint covers: it must be in the image); the data is elsewhere */
        if (pad > left(r))
            return FAIL(r, "assembled file: the image ends at %llu, inside the padding to the data section at %llu",
                        (unsigned long long)r->size, (unsigned long long)(r->off + pad));
        if (g->parts.n_data != g->n_tensors)
            return FAIL(r, "assembled file: %llu tensors in the image, %llu data pointers",
                        (unsigned long long)g->n_tensors, (unsigned long long)g->parts.n_data);
        if (g->parts.data_bytes > UINT64_MAX - (r->off + pad))
            return FAIL(r, "assembled file: data section of %llu bytes overflows", (unsigned long long)g->parts.data_bytes);
        g->data_offset = r->off + pad;
        g->size = g->data_offset + g->parts.data_bytes;
        return validate_layout(r);
    }
    if (pad > left(r)) {
        /* A file without tensors may end right after its tables (vocab-only
         * files); one with tensors needs its data section. */
        if (g->n_tensors)
            return FAIL(r, "data section would start at offset %llu (tensor table ends at %llu, alignment %u), "
                        "past end of file (%llu): the file is truncated; download it again", (unsigned long long)(r->off + pad),
                        (unsigned long long)r->off, g->alignment, (unsigned long long)r->size);
        pad = left(r);
    }
    g->data_offset = r->off + pad;
    return validate_layout(r);

bad_magic:;
    char qb[280];
    return FAIL(r, "bad magic at offset 0: expected 'GGUF', got '%s'%s", q((const char *)r->p, r->size < 4 ? r->size : 4, qb),
                r->size < 4 ? " (file shorter than 4 bytes)" : "");
}

static int open_image(const void *data, size_t size, bool mapped, const gguf_parts *parts, gguf_file **out,
                      char *err, size_t err_len) {
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) {
        if (mapped) munmap((void *)data, size);
        if (parts && parts->release) parts->release(parts->owner);
        return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    g->base = data;
    g->size = size;
    g->mapped = mapped;
    if (parts) {
        g->has_parts = true;
        g->parts = *parts;
    }
    reader r = {.g = g, .p = data, .size = size, .err = err, .err_len = err_len, .populated = mapped ? 0 : size};
    int rc = parse(&r);
    if (rc) {
        gguf_close(g);
        return rc;
    }
    *out = g;
    return GGUF_OK;
}

int gguf_open_mem(const void *data, size_t size, gguf_file **out, char *err, size_t err_len) {
    *out = NULL;
    if (!data && size) return seterr(err, err_len, GGUF_EIO, "NULL image of %zu bytes", size);
    static const uint8_t empty[1];
    return open_image(data ? data : empty, size, false, NULL, out, err, err_len);
}

int gguf_open_parts(const void *image, size_t image_len, const gguf_parts *parts, gguf_file **out, char *err,
                    size_t err_len) {
    *out = NULL;
    if (!image || !parts || (!parts->data && parts->n_data)) {
        if (parts && parts->release) parts->release(parts->owner);
        return seterr(err, err_len, GGUF_EIO, "assembled file: NULL image or parts");
    }
    return open_image(image, image_len, false, parts, out, err, err_len);
}

int gguf_open(const char *path, gguf_file **out, char *err, size_t err_len) {
    return gguf_open_range(path, 0, 0, out, err, err_len);
}

int gguf_open_range(const char *path, uint64_t offset, uint64_t size_bytes, gguf_file **out,
                    char *err, size_t err_len) {
    *out = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || offset % (uint64_t)page)
        return seterr(err, err_len, GGUF_EIO, "'%s': GGUF image at offset %llu is not page-aligned (%ld)",
                      path, (unsigned long long)offset, page);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return seterr(err, err_len, GGUF_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return seterr(err, err_len, GGUF_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return seterr(err, err_len, GGUF_EIO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return seterr(err, err_len, GGUF_EFORMAT, "'%s' is empty (0 bytes), expected a GGUF header", path);
    }
    uint64_t file_bytes = (uint64_t)st.st_size;
    if (size_bytes == 0) {
        if (offset >= file_bytes) {
            close(fd);
            return seterr(err, err_len, GGUF_EFORMAT, "'%s': offset %llu is past the end of the file (%llu bytes)",
                          path, (unsigned long long)offset, (unsigned long long)file_bytes);
        }
        size_bytes = file_bytes - offset;
    }
    if (offset > file_bytes || size_bytes > file_bytes - offset) {
        close(fd);
        return seterr(err, err_len, GGUF_EFORMAT,
                      "'%s': GGUF image of %llu bytes at offset %llu runs past the end of the file (%llu bytes): truncated?",
                      path, (unsigned long long)size_bytes, (unsigned long long)offset,
                      (unsigned long long)file_bytes);
    }
    if (size_bytes > SIZE_MAX) {
        close(fd);
        return seterr(err, err_len, GGUF_EIO, "'%s' (%llu bytes) does not fit the address space", path,
                      (unsigned long long)size_bytes);
    }
    size_t size = (size_t)size_bytes;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, (off_t)offset);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (p == MAP_FAILED) return seterr(err, err_len, GGUF_EIO, "cannot mmap '%s' (%zu bytes): %s", path, size, strerror(e));
    int rc = open_image(p, size, true, NULL, out, err, err_len);
    if (rc == GGUF_OK) {
        (*out)->dev = (uint64_t)st.st_dev;
        (*out)->ino = (uint64_t)st.st_ino;
    }
    return rc;
}

/* ==== accessors ============================================================ */

/* The mapping [*base, *base + *size) that holds [p, p + n), or false. */
static bool mapping_of(const gguf_file *g, const void *p, uint64_t n, const uint8_t **base, uint64_t *size) {
    const uint8_t *b = p;
    if (g->mapped) {
        *base = g->base;
        *size = g->size;
    } else {
        *base = NULL;
        for (size_t i = 0; g->has_parts && i < g->parts.n_regions; i++) {
            const uint8_t *rb = g->parts.regions[i].base;
            if (b >= rb && (uint64_t)(b - rb) <= g->parts.regions[i].size) {
                *base = rb;
                *size = g->parts.regions[i].size;
                break;
            }
        }
        if (!*base) return false;
    }
    return b >= *base && n <= *size && (uint64_t)(b - *base) <= *size - n;
}

int gguf_populate(const gguf_file *g, const void *p, uint64_t n) {
    const uint8_t *b = p, *base;
    uint64_t size;
    if (!mapping_of(g, p, n, &base, &size)) return -1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)b & ~(page - 1), hi = (uintptr_t)(b + n);
    return madvise((void *)lo, hi - lo, MADV_POPULATE_READ) ? -1 : 0;
}

int gguf_release_pages(const gguf_file *g, const void *p, uint64_t n) {
    const uint8_t *b = p, *base;
    uint64_t size;
    if (!mapping_of(g, p, n, &base, &size)) return -1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)b + page - 1) & ~(page - 1), hi = (uintptr_t)(b + n) & ~(page - 1);
    if (hi <= lo) return 0;
    /* a private read-only file mapping: the pages go back to the page cache and
     * would fault in again, unchanged, on the next read */
    return madvise((void *)lo, hi - lo, MADV_DONTNEED) ? -1 : 0;
}

uint32_t gguf_version(const gguf_file *g) { return g->version; }
uint32_t gguf_alignment(const gguf_file *g) { return g->alignment; }
int gguf_file_id(const gguf_file *g, uint64_t *dev, uint64_t *ino) {
    if (!g->mapped) return -1;
    *dev = g->dev;
    *ino = g->ino;
    return 0;
}
const void *gguf_base(const gguf_file *g) { return g->base; }
uint64_t gguf_size(const gguf_file *g) { return g->size; }
uint64_t gguf_data_offset(const gguf_file *g) { return g->data_offset; }
uint64_t gguf_n_kv(const gguf_file *g) { return g->n_kv; }
uint64_t gguf_n_tensors(const gguf_file *g) { return g->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *g, uint64_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }

const gguf_tensor *gguf_tensor_at(const gguf_file *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

int64_t gguf_find_key(const gguf_file *g, const char *key) {
    size_t n = strlen(key);
    for (uint64_t h = hash_name(key, n) & g->key_mask;; h = (h + 1) & g->key_mask) {
        uint64_t s = g->key_slots[h];
        if (!s) return -1;
        const gguf_kv *kv = &g->kvs[s - 1];
        if (kv->key.len == n && !memcmp(kv->key.ptr, key, n)) return (int64_t)(s - 1);
    }
}

const gguf_value *gguf_get(const gguf_file *g, const char *key) {
    int64_t i = gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kvs[i].value;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name) {
    size_t n = strlen(name);
    for (uint64_t h = hash_name(name, n) & g->tensor_mask;; h = (h + 1) & g->tensor_mask) {
        uint64_t s = g->tensor_slots[h];
        if (!s) return NULL;
        if (!strcmp(g->tensors[s - 1].name, name)) return &g->tensors[s - 1];
    }
}

uint64_t gguf_fingerprint(const gguf_file *g) {
    /* XXH3 of the header, metadata and tensor table, seeded with the file size. */
    return XXH3_64bits_withSeed(g->base, g->data_offset, g->size);
}

/* ---- typed accessors ------------------------------------------------------ */

static const gguf_value *lookup(const gguf_file *g, const char *key, int *rc, char *err, size_t err_len) {
    const gguf_value *v = gguf_get(g, key);
    if (!v) *rc = seterr(err, err_len, GGUF_ENOTFOUND, "key '%s' not found", key);
    else *rc = 0;
    return v;
}

static bool is_uint(uint32_t t) {
    return t == GGUF_VT_UINT8 || t == GGUF_VT_UINT16 || t == GGUF_VT_UINT32 || t == GGUF_VT_UINT64;
}
static bool is_sint(uint32_t t) {
    return t == GGUF_VT_INT8 || t == GGUF_VT_INT16 || t == GGUF_VT_INT32 || t == GGUF_VT_INT64;
}

static int type_err(const char *key, const char *want, const gguf_value *v, char *err, size_t err_len) {
    if (v->type == GGUF_VT_ARRAY)
        return seterr(err, err_len, GGUF_ETYPE, "key '%s': expected %s, got array of %llu %s", key, want,
                      (unsigned long long)v->v.arr.n, gguf_vtype_name(v->v.arr.type));
    return seterr(err, err_len, GGUF_ETYPE, "key '%s': expected %s, got %s", key, want, gguf_vtype_name(v->type));
}

/* Integer value of any integer type, range-checked against [lo, hi]. */
static int get_int(const gguf_file *g, const char *key, const char *want, int64_t lo, uint64_t hi,
                   bool *neg, uint64_t *mag, char *err, size_t err_len) {
    int rc;
    const gguf_value *v = lookup(g, key, &rc, err, err_len);
    if (!v) return rc;
    if (is_uint(v->type)) {
        *neg = false;
        *mag = v->v.u64;
        if (v->v.u64 > hi)
            return seterr(err, err_len, GGUF_ETYPE, "key '%s': value %llu (%s) out of range for %s", key,
                          (unsigned long long)v->v.u64, gguf_vtype_name(v->type), want);
        return 0;
    }
    if (is_sint(v->type)) {
        int64_t x = v->v.i64;
        if (x < lo || (x >= 0 && (uint64_t)x > hi))
            return seterr(err, err_len, GGUF_ETYPE, "key '%s': value %lld (%s) out of range for %s", key,
                          (long long)x, gguf_vtype_name(v->type), want);
        *neg = x < 0;
        *mag = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        return 0;
    }
    return type_err(key, want, v, err, err_len);
}

int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, char *err, size_t err_len) {
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "u32", 0, UINT32_MAX, &neg, &mag, err, err_len);
    if (!rc) *out = (uint32_t)mag;
    return rc;
}

int gguf_get_u64(const gguf_file *g, const char *key, uint64_t *out, char *err, size_t err_len) {
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "u64", 0, UINT64_MAX, &neg, &mag, err, err_len);
    if (!rc) *out = mag;
    return rc;
}

int gguf_get_i64(const gguf_file *g, const char *key, int64_t *out, char *err, size_t err_len) {
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "i64", INT64_MIN, INT64_MAX, &neg, &mag, err, err_len);
    if (!rc) *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return rc;
}

int gguf_get_f32(const gguf_file *g, const char *key, float *out, char *err, size_t err_len) {
    int rc;
    const gguf_value *v = lookup(g, key, &rc, err, err_len);
    if (!v) return rc;
    if (v->type != GGUF_VT_FLOAT32 && v->type != GGUF_VT_FLOAT64) return type_err(key, "f32", v, err, err_len);
    *out = (float)v->v.f64;
    return 0;
}

int gguf_get_bool(const gguf_file *g, const char *key, bool *out, char *err, size_t err_len) {
    int rc;
    const gguf_value *v = lookup(g, key, &rc, err, err_len);
    if (!v) return rc;
    if (v->type != GGUF_VT_BOOL) return type_err(key, "bool", v, err, err_len);
    *out = v->v.b;
    return 0;
}

int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, char *err, size_t err_len) {
    int rc;
    const gguf_value *v = lookup(g, key, &rc, err, err_len);
    if (!v) return rc;
    if (v->type != GGUF_VT_STRING) return type_err(key, "str", v, err, err_len);
    *out = v->v.str;
    return 0;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_value **out, char *err,
                 size_t err_len) {
    int rc;
    const gguf_value *v = lookup(g, key, &rc, err, err_len);
    if (!v) return rc;
    char want[32];
    snprintf(want, sizeof want, "array of %s", elem_type == GGUF_VT_COUNT ? "any" : gguf_vtype_name(elem_type));
    if (v->type != GGUF_VT_ARRAY) return type_err(key, want, v, err, err_len);
    if (elem_type != GGUF_VT_COUNT && v->v.arr.type != elem_type) return type_err(key, want, v, err, err_len);
    *out = v;
    return 0;
}
