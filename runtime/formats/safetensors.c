/*
 * safetensors.c — read-only, zero-copy safetensors reader (see safetensors.h).
 *
 * The file is mapped once; the JSON header is parsed with cJSON, validated
 * entry by entry, and copied into a flat table (names and metadata strings
 * copied, since cJSON decodes escapes), after which the cJSON tree is freed.
 * Tensor data stays in the mapping.  Lookup by name is a binary search over a
 * name-sorted permutation built at open (which also finds duplicate names).
 */
#include "safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; uint32_t size; } dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E8M0] = {"F8_E8M0", 1},
    [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4},   [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},         [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},
    [ST_F64] = {"F64", 8},
};

const char *st_dtype_name(uint32_t d) { return d < ST_DTYPE_COUNT ? dtypes[d].name : "unknown"; }
uint32_t st_dtype_size(uint32_t d) { return d < ST_DTYPE_COUNT ? dtypes[d].size : 0; }

struct st_file {
    const uint8_t *base; /* (size) */
    uint64_t size;
    bool mapped;
    uint64_t header_bytes;
    uint64_t n_tensors;
    st_tensor *tensors;  /* (n_tensors) header order */
    uint64_t *by_name;   /* (n_tensors) indexes sorted by name */
    uint64_t n_meta;
    st_meta *meta;       /* (n_meta) */
    char **strings;      /* (n_strings) every copied string, freed at close */
    uint64_t n_strings, cap_strings;
};

static int seterr(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int seterr(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        int k = snprintf(err, err_len, "safetensors: ");
        if (k < 0 || (size_t)k >= err_len) return code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, err_len - (size_t)k, fmt, ap);
        va_end(ap);
        for (char *p = err; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return code;
}

void st_close(st_file *f) {
    if (!f) return;
    if (f->mapped && f->base) munmap((void *)f->base, f->size);
    for (uint64_t i = 0; i < f->n_strings; i++) free(f->strings[i]);
    free(f->strings);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f);
}

static char *keep(st_file *f, const char *s) {
    if (f->n_strings == f->cap_strings) {
        uint64_t cap = f->cap_strings ? f->cap_strings * 2 : 64;
        char **n = realloc(f->strings, cap * sizeof *n);
        if (!n) return NULL;
        f->strings = n;
        f->cap_strings = cap;
    }
    char *c = strdup(s);
    if (c) f->strings[f->n_strings++] = c;
    return c;
}

/* A JSON number that is a non-negative integer exactly representable in a double. */
static bool json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return false;
    *out = (uint64_t)d;
    return true;
}

static int parse_tensor(st_file *f, const cJSON *e, st_tensor *t, uint64_t data_bytes, char *err, size_t err_len) {
    const char *nm = e->string;
    if (!cJSON_IsObject(e))
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': expected an object with dtype, shape, data_offsets", nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': missing or non-string \"dtype\"", nm);
    t->dtype = ST_DTYPE_COUNT;
    for (uint32_t d = 0; d < ST_DTYPE_COUNT; d++)
        if (!strcmp(dt->valuestring, dtypes[d].name)) t->dtype = d;
    if (t->dtype == ST_DTYPE_COUNT)
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': unknown dtype \"%.32s\"", nm, dt->valuestring);
    if (!cJSON_IsArray(sh))
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': missing or non-array \"shape\"", nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS)
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': %d dimensions, at most %d supported", nm, nd, ST_MAX_DIMS);
    t->n_dims = (uint32_t)nd;
    for (int d = 0; d < ST_MAX_DIMS; d++) t->shape[d] = 1;
    uint64_t n_elems = 1;
    bool zero = false;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_uint(x, &v))
            return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': shape[%d] is not a non-negative integer", nm, d);
        if (v == 0) zero = true;
        else if (n_elems > (uint64_t)INT64_MAX / v)
            return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': shape[%d] = %llu makes the element count overflow",
                          nm, d, (unsigned long long)v);
        else n_elems *= v;
        t->shape[d] = (int64_t)v;
    }
    if (zero) n_elems = 0;
    t->n_elems = n_elems;
    uint64_t b, en;
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !json_uint(of->child, &b) ||
        !json_uint(of->child->next, &en))
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': \"data_offsets\" must be [BEGIN, END] integers", nm);
    if (en < b)
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': data_offsets [%llu, %llu): END < BEGIN", nm,
                      (unsigned long long)b, (unsigned long long)en);
    if (en > data_bytes)
        return seterr(err, err_len, ST_EFORMAT,
                      "tensor '%.200s': data_offsets [%llu, %llu) past end of the data section (%llu bytes, file size %llu)",
                      nm, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_bytes,
                      (unsigned long long)f->size);
    uint64_t want = n_elems * dtypes[t->dtype].size; /* n_elems < 2^63, size ≤ 8: may overflow */
    if (n_elems && want / n_elems != dtypes[t->dtype].size)
        return seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': size in bytes overflows 64 bits", nm);
    if (en - b != want)
        return seterr(err, err_len, ST_EFORMAT,
                      "tensor '%.200s': data_offsets [%llu, %llu) hold %llu bytes, expected %llu (%llu elements of %s)", nm,
                      (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b),
                      (unsigned long long)want, (unsigned long long)n_elems, dtypes[t->dtype].name);
    t->offset = b;
    t->n_bytes = en - b;
    t->data = f->base + 8 + f->header_bytes + b;
    t->name = keep(f, nm);
    if (!t->name) return seterr(err, err_len, ST_ENOMEM, "out of memory");
    return 0;
}

typedef struct { uint64_t begin, end, idx; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

typedef struct { const char *name; uint64_t idx; } named;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static int check_layout(st_file *f, char *err, size_t err_len) {
    uint64_t n = f->n_tensors;
    if (!n) return 0;
    span *sp = malloc(n * sizeof *sp);
    named *nm = malloc(n * sizeof *nm);
    f->by_name = malloc(n * sizeof *f->by_name);
    int rc = 0;
    if (!sp || !nm || !f->by_name) {
        rc = seterr(err, err_len, ST_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->n_bytes) sp[k++] = (span){t->offset, t->offset + t->n_bytes, i};
        nm[i] = (named){t->name, i};
    }
    qsort(sp, k, sizeof *sp, cmp_span);
    for (uint64_t i = 0; i + 1 < k; i++)
        if (sp[i].end > sp[i + 1].begin) {
            rc = seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': data_offsets [%llu, %llu) overlap tensor '%.200s' [%llu, %llu)",
                        f->tensors[sp[i + 1].idx].name, (unsigned long long)sp[i + 1].begin,
                        (unsigned long long)sp[i + 1].end, f->tensors[sp[i].idx].name,
                        (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
            goto out;
        }
    qsort(nm, n, sizeof *nm, cmp_named);
    for (uint64_t i = 0; i < n; i++) {
        if (i && !strcmp(nm[i].name, nm[i - 1].name)) {
            rc = seterr(err, err_len, ST_EFORMAT, "tensor '%.200s': duplicate name in the header", nm[i].name);
            goto out;
        }
        f->by_name[i] = nm[i].idx;
    }
out:
    free(sp);
    free(nm);
    return rc;
}

static int parse(st_file *f, char *err, size_t err_len) {
    if (f->size < 8)
        return seterr(err, err_len, ST_EFORMAT, "file is %llu bytes, need at least 8 for the header length",
                      (unsigned long long)f->size);
    uint64_t n;
    memcpy(&n, f->base, 8); /* little-endian host (gguf.c checks the same) */
    if (n > f->size - 8)
        return seterr(err, err_len, ST_EFORMAT, "header length %llu at offset 0 exceeds the %llu bytes after it",
                      (unsigned long long)n, (unsigned long long)(f->size - 8));
    if (n > ST_MAX_HEADER_BYTES)
        return seterr(err, err_len, ST_EFORMAT, "header length %llu exceeds the %u byte limit", (unsigned long long)n,
                      ST_MAX_HEADER_BYTES);
    f->header_bytes = n;
    const char *json = (const char *)f->base + 8;
    if (n < 2 || json[0] != '{')
        return seterr(err, err_len, ST_EFORMAT, "header at offset 8 does not start with '{'");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)n, &end, 0);
    if (!root) {
        uint64_t at = end && end >= json && end <= json + n ? (uint64_t)(end - json) : 0;
        return seterr(err, err_len, ST_EFORMAT, "header JSON malformed near byte %llu (file offset %llu)",
                      (unsigned long long)at, (unsigned long long)(8 + at));
    }
    int rc = 0;
    for (const char *p = end; p < json + n; p++) /* the format pads with spaces */
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            rc = seterr(err, err_len, ST_EFORMAT, "header has trailing bytes after the JSON object at offset %llu",
                        (unsigned long long)(8 + (uint64_t)(p - json)));
            goto out;
        }
    if (!cJSON_IsObject(root)) {
        rc = seterr(err, err_len, ST_EFORMAT, "header is not a JSON object");
        goto out;
    }
    uint64_t n_items = (uint64_t)cJSON_GetArraySize(root);
    f->tensors = calloc(n_items ? n_items : 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = seterr(err, err_len, ST_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t data_bytes = f->size - 8 - n;
    bool seen_meta = false;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (seen_meta || !cJSON_IsObject(e)) {
                rc = seterr(err, err_len, ST_EFORMAT, "\"__metadata__\" must appear once, as an object of strings");
                goto out;
            }
            seen_meta = true;
            uint64_t m = (uint64_t)cJSON_GetArraySize(e);
            f->meta = calloc(m ? m : 1, sizeof *f->meta);
            if (!f->meta) {
                rc = seterr(err, err_len, ST_ENOMEM, "out of memory");
                goto out;
            }
            for (const cJSON *x = e->child; x; x = x->next) {
                if (!cJSON_IsString(x)) {
                    rc = seterr(err, err_len, ST_EFORMAT, "\"__metadata__\" key '%s': expected a string value", x->string);
                    goto out;
                }
                st_meta *mm = &f->meta[f->n_meta];
                mm->key = keep(f, x->string);
                mm->value = keep(f, x->valuestring);
                if (!mm->key || !mm->value) {
                    rc = seterr(err, err_len, ST_ENOMEM, "out of memory");
                    goto out;
                }
                f->n_meta++;
            }
            continue;
        }
        if ((rc = parse_tensor(f, e, &f->tensors[f->n_tensors], data_bytes, err, err_len))) goto out;
        f->n_tensors++;
    }
    rc = check_layout(f, err, err_len);
out:
    cJSON_Delete(root);
    return rc;
}

static int open_image(const void *data, size_t size, bool mapped, st_file **out, char *err, size_t err_len) {
    st_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (mapped) munmap((void *)data, size);
        return seterr(err, err_len, ST_ENOMEM, "out of memory");
    }
    f->base = data;
    f->size = size;
    f->mapped = mapped;
    int rc = parse(f, err, err_len);
    if (rc) {
        st_close(f);
        return rc;
    }
    *out = f;
    return ST_OK;
}

int st_open_mem(const void *data, size_t size, st_file **out, char *err, size_t err_len) {
    static const uint8_t empty[1];
    *out = NULL;
    return open_image(data ? data : empty, data ? size : 0, false, out, err, err_len);
}

int st_open(const char *path, st_file **out, char *err, size_t err_len) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return seterr(err, err_len, ST_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return seterr(err, err_len, ST_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 8) {
        bool reg = S_ISREG(st.st_mode);
        close(fd);
        if (!reg) return seterr(err, err_len, ST_EIO, "'%s' is not a regular file", path);
        return seterr(err, err_len, ST_EFORMAT, "'%s' is %lld bytes, need at least 8 for the header length", path,
                      (long long)st.st_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return seterr(err, err_len, ST_EIO, "cannot mmap '%s': %s", path, strerror(e));
    return open_image(p, (size_t)st.st_size, true, out, err, err_len);
}

uint64_t st_size(const st_file *f) { return f->size; }
const void *st_base(const st_file *f) { return f->base; }
uint64_t st_header_bytes(const st_file *f) { return f->header_bytes; }
uint64_t st_data_offset(const st_file *f) { return 8 + f->header_bytes; }
uint64_t st_n_tensors(const st_file *f) { return f->n_tensors; }
const st_tensor *st_tensor_at(const st_file *f, uint64_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }
uint64_t st_n_meta(const st_file *f) { return f->n_meta; }
const st_meta *st_meta_at(const st_file *f, uint64_t i) { return i < f->n_meta ? &f->meta[i] : NULL; }

const st_tensor *st_find_tensor(const st_file *f, const char *name) {
    uint64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(t->name, name);
        if (!c) return t;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_meta_get(const st_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}
