/*
 * hf.c — Hugging Face checkpoint folders as assembled GGUF files (see hf.h).
 *
 * Order of work in hf_open: config.json → the family's mapping
 * (archspecs/<arch>.hf.lua, run in a sandboxed Lua state with `config` set)
 * → metadata (hparams, constants, checks of `expect`) → the shards (index or
 * model.safetensors) → one output tensor per HF tensor or GPTQ/AWQ module
 * (zero copy where the bytes already are what GGUF wants) → tied embeddings
 * → tokenizer and chat-template metadata → a GGUF header image written to
 * memory with the GGUF writer, validated by gguf_open_parts like any file.
 *
 * The mapping tables themselves (Lua) are hf_map.c's.
 *
 * What is allocated: the mapping state (freed before returning), the shard
 * handles (their mappings stay: the tensors point into them), one buffer per
 * converted tensor, the header image; the assembled file owns them all and
 * gguf_close releases them (hf_owner).
 */
#include "hf_impl.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/f16.h"
#include "gguf_write.h"
#include "kernels/kern.h"
#include "safetensors.h"

/* ==== errors and files ====================================================== */

#define seterr hf_seterr

bool hf_is_folder(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) || !S_ISDIR(st.st_mode)) return false;
    char p[4096];
    if (snprintf(p, sizeof p, "%s/config.json", path) >= (int)sizeof p) return false;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir/name into buf; -1 when it does not fit. */
static int join(char *buf, size_t cap, const char *dir, const char *name) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Read dir/name (at most HF_MAX_JSON_BYTES) into a malloc'd NUL-terminated
 * buffer.  1 = read, 0 = absent, negative = error (message in err). */
static int read_text(const char *dir, const char *name, char **out, size_t *len, char *err, size_t err_len) {
    char path[4096];
    *out = NULL;
    *len = 0;
    if (join(path, sizeof path, dir, name)) return seterr(err, err_len, GGUF_EIO, "%s: path too long", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        return seterr(err, err_len, GGUF_EIO, "%s: cannot open %s: %s", dir, name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return seterr(err, err_len, GGUF_EIO, "%s: %s is not a regular file", dir, name);
    }
    if ((uint64_t)st.st_size > HF_MAX_JSON_BYTES) {
        close(fd);
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s is %lld bytes, more than the %u byte limit", dir, name,
                      (long long)st.st_size, HF_MAX_JSON_BYTES);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return seterr(err, err_len, GGUF_ENOMEM, "%s: out of memory reading %s", dir, name);
    }
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n != (size_t)st.st_size) {
        free(buf);
        return seterr(err, err_len, GGUF_EIO, "%s: short read of %s", dir, name);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 1;
}

/* Parse dir/name as a JSON object.  1 = parsed, 0 = absent, negative = error. */
static int read_json(const char *dir, const char *name, cJSON **out, char **text, size_t *len, char *err,
                     size_t err_len) {
    char *buf;
    size_t n;
    *out = NULL;
    int rc = read_text(dir, name, &buf, &n, err, err_len);
    if (rc <= 0) return rc;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, n, &end, 0);
    if (!j) {
        size_t at = end && end >= buf && end <= buf + n ? (size_t)(end - buf) : 0;
        free(buf);
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s: JSON syntax error near byte %zu", dir, name, at);
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        free(buf);
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s is not a JSON object", dir, name);
    }
    *out = j;
    if (text) {
        *text = buf;
        *len = n;
    } else {
        free(buf);
    }
    return 1;
}

/* ---- matching names ---------------------------------------------------------- */

int hf_match(const char *pat, const char *name, int *layer) {
    *layer = -1;
    const char *d = strstr(pat, "%d");
    if (!d) return strcmp(pat, name) == 0;
    size_t pre = (size_t)(d - pat);
    if (strncmp(pat, name, pre)) return 0;
    const char *p = name + pre;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    long v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        if (v > 1000000) return 0;
    }
    if (strcmp(p, d + 2)) return 0;
    *layer = (int)v;
    return 1;
}

/* pattern with "%d" replaced by layer. */
static void expand(char *buf, size_t cap, const char *pat, int layer) {
    const char *d = strstr(pat, "%d");
    if (!d) snprintf(buf, cap, "%s", pat);
    else snprintf(buf, cap, "%.*s%d%s", (int)(d - pat), pat, layer, d + 2);
}

/* ==== the assembled file's owner ================================================ */

typedef struct {
    st_file **shards;  /* (n_shards) */
    size_t n_shards;
    void **bufs;       /* (n_bufs) converted tensors, each its own allocation */
    size_t n_bufs, cap_bufs;
    char *image;
    const void **data; /* (n) data pointer per output tensor */
    gguf_region *regions;
} hf_owner;

static void owner_free(void *p) {
    hf_owner *o = p;
    if (!o) return;
    for (size_t i = 0; i < o->n_shards; i++) st_close(o->shards[i]);
    free(o->shards);
    for (size_t i = 0; i < o->n_bufs; i++) free(o->bufs[i]);
    free(o->bufs);
    free(o->image);
    free(o->data);
    free(o->regions);
    free(o);
}

/* A 64-byte aligned buffer of n bytes owned by o; NULL when out of memory. */
static void *owner_alloc(hf_owner *o, size_t n) {
    if (o->n_bufs == o->cap_bufs) {
        size_t c = o->cap_bufs ? o->cap_bufs * 2 : 64;
        void **nb = realloc(o->bufs, c * sizeof *nb);
        if (!nb) return NULL;
        o->bufs = nb;
        o->cap_bufs = c;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1)) return NULL;
    o->bufs[o->n_bufs++] = p;
    return p;
}

/* ==== shards ===================================================================== */

/* A shard name from the index: a plain file in the folder. */
static int check_shard_name(const char *dir, const char *name, char *err, size_t err_len) {
    size_t n = strlen(name);
    if (!n || n > 255 || name[0] == '.' || strchr(name, '/') || strchr(name, '\\'))
        return seterr(err, err_len, GGUF_EFORMAT,
                      "%s: model.safetensors.index.json names shard '%.80s': expected a plain file name in the folder "
                      "(no '/', '\\\\' or leading '.')", dir, name);
    return 0;
}

typedef struct {
    const char *name; /* HF tensor name (into the shard) */
    const st_tensor *t;
    size_t shard;
} hf_src;

/* Natural order: digit runs compare as numbers ("layers.2" < "layers.10"). */
static int natcmp(const char *a, const char *b) {
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *x = a, *y = b;
            while (*x == '0') x++;
            while (*y == '0') y++;
            const char *xe = x, *ye = y;
            while (*xe >= '0' && *xe <= '9') xe++;
            while (*ye >= '0' && *ye <= '9') ye++;
            if (xe - x != ye - y) return xe - x < ye - y ? -1 : 1;
            int c = strncmp(x, y, (size_t)(xe - x));
            if (c) return c;
            a = xe;
            b = ye;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int cmp_src(const void *x, const void *y) { return natcmp(((const hf_src *)x)->name, ((const hf_src *)y)->name); }

/* Open the shards (index or model.safetensors) and list every tensor. */
static int open_shards(const char *dir, hf_owner *o, hf_src **srcs, size_t *n_srcs, char *err, size_t err_len) {
    cJSON *idx = NULL;
    char path[4096];
    int rc = read_json(dir, "model.safetensors.index.json", &idx, NULL, NULL, err, err_len);
    if (rc < 0) return rc;
    const char **names = NULL;
    size_t n_names = 0;
    const cJSON *wm = NULL;
    if (rc == 1) {
        wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
        if (!cJSON_IsObject(wm)) {
            cJSON_Delete(idx);
            return seterr(err, err_len, GGUF_EFORMAT, "%s: model.safetensors.index.json has no \"weight_map\" object", dir);
        }
        names = calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof *names);
        if (!names) {
            cJSON_Delete(idx);
            return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        }
        for (const cJSON *e = wm->child; e; e = e->next) {
            if (!cJSON_IsString(e)) {
                seterr(err, err_len, GGUF_EFORMAT, "%s: model.safetensors.index.json: weight_map[\"%.80s\"] is not a file name",
                       dir, e->string ? e->string : "?");
                free(names);
                cJSON_Delete(idx);
                return GGUF_EFORMAT;
            }
            if ((rc = check_shard_name(dir, e->valuestring, err, err_len))) {
                free(names);
                cJSON_Delete(idx);
                return rc;
            }
            size_t k = 0;
            while (k < n_names && strcmp(names[k], e->valuestring)) k++;
            if (k == n_names) names[n_names++] = e->valuestring;
        }
        if (!n_names) {
            free(names);
            cJSON_Delete(idx);
            return seterr(err, err_len, GGUF_EFORMAT, "%s: model.safetensors.index.json: weight_map is empty", dir);
        }
    } else {
        static const char *single = "model.safetensors";
        if (join(path, sizeof path, dir, single)) return seterr(err, err_len, GGUF_EIO, "%s: path too long", dir);
        struct stat st;
        if (stat(path, &st))
            return seterr(err, err_len, GGUF_ENOTFOUND,
                          "%s: no model.safetensors and no model.safetensors.index.json (PyTorch .bin checkpoints are "
                          "not read: unpickling runs code from the file)", dir);
        names = calloc(1, sizeof *names);
        if (!names) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        names[n_names++] = single;
    }
    o->shards = calloc(n_names, sizeof *o->shards);
    o->regions = calloc(n_names, sizeof *o->regions);
    size_t total = 0;
    if (!o->shards || !o->regions) rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    else rc = 0;
    for (size_t i = 0; !rc && i < n_names; i++) {
        char e[1024];
        if (join(path, sizeof path, dir, names[i])) {
            rc = seterr(err, err_len, GGUF_EIO, "%s: path too long", dir);
            break;
        }
        int r = st_open(path, &o->shards[i], e, sizeof e);
        if (r) {
            rc = r == ST_EIO && wm ? seterr(err, err_len, GGUF_ENOTFOUND, "%s: shard %s named by the index: %s", dir,
                                            names[i], e + strlen("safetensors: "))
                                   : seterr(err, err_len, r == ST_ENOMEM ? GGUF_ENOMEM : r == ST_EIO ? GGUF_EIO : GGUF_EFORMAT,
                                            "%s: %s: %s", dir, names[i], e);
            break;
        }
        o->n_shards++;
        total += st_n_tensors(o->shards[i]);
    }
    if (!rc) {
        *srcs = calloc(total ? total : 1, sizeof **srcs);
        if (!*srcs) rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; !rc && i < o->n_shards; i++) {
        st_file *f = o->shards[i];
        o->regions[i] = (gguf_region){st_base(f), st_size(f)};
        for (uint64_t k = 0; k < st_n_tensors(f); k++) {
            const st_tensor *t = st_tensor_at(f, k);
            if (wm) { /* the index says where each tensor lives */
                const cJSON *at = cJSON_GetObjectItemCaseSensitive(wm, t->name);
                if (!at || strcmp(at->valuestring, names[i])) continue;
            }
            (*srcs)[n++] = (hf_src){t->name, t, i};
        }
    }
    if (!rc && wm) /* and every tensor it names is there */
        for (const cJSON *e = wm->child; e && !rc; e = e->next) {
            size_t k = 0;
            while (k < n_names && strcmp(names[k], e->valuestring)) k++;
            if (!st_find_tensor(o->shards[k], e->string))
                rc = seterr(err, err_len, GGUF_EFORMAT, "%s: the index puts tensor '%.120s' in %s, which does not hold it",
                            dir, e->string, names[k]);
        }
    if (!rc) {
        qsort(*srcs, n, sizeof **srcs, cmp_src);
        for (size_t i = 1; i < n && !rc; i++)
            if (!strcmp((*srcs)[i].name, (*srcs)[i - 1].name))
                rc = seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s' is in two shards", dir, (*srcs)[i].name);
        *n_srcs = n;
    }
    if (rc) {
        free(*srcs);
        *srcs = NULL;
    }
    free(names);
    cJSON_Delete(idx);
    return rc;
}

/* ==== output tensors ================================================================ */

typedef struct {
    char name[200];
    uint32_t type;      /* ggml type */
    uint32_t n_dims;
    int64_t ne[4];
    uint64_t n_bytes;
    const void *data;
} hf_out;

typedef struct {
    hf_out *t;
    size_t n, cap;
} out_list;

static hf_out *out_add(out_list *l) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        hf_out *n = realloc(l->t, c * sizeof *n);
        if (!n) return NULL;
        l->t = n;
        l->cap = c;
    }
    hf_out *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    return t;
}

static hf_out *out_find(out_list *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->t[i].name, name)) return &l->t[i];
    return NULL;
}

static float elem_f32(uint32_t dtype, const uint8_t *p, uint64_t i) {
    if (dtype == ST_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return dtype == ST_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

static uint32_t ggml_of_dtype(uint32_t d) {
    return d == ST_F32 ? GGML_TYPE_F32 : d == ST_F16 ? GGML_TYPE_F16 : GGML_TYPE_BF16;
}

/* One plain (not quantized) tensor: the mapping's transform, zero copy when none applies. */
static int plain_tensor(const char *dir, hf_owner *o, out_list *outs, const hf_src *s, const char *gguf_name,
                        const hf_map_tensor *mt, char *err, size_t err_len) {
    const st_tensor *t = s->t;
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s': dtype %s, expected F32, F16 or BF16 (or GPTQ/AWQ parts)",
                      dir, t->name, st_dtype_name(t->dtype));
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s': %u dimensions, expected 1..%d", dir, t->name,
                      t->n_dims, GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (t->shape[d] < 1)
            return seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s': dimension %u is %lld, expected >= 1", dir,
                          t->name, d, (long long)t->shape[d]);
    if (out_find(outs, gguf_name))
        return seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s' maps to '%s', which another tensor already took", dir,
                      t->name, gguf_name);
    hf_out *out = out_add(outs);
    if (!out) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    snprintf(out->name, sizeof out->name, "%s", gguf_name);
    out->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) out->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) out->ne[d] = t->shape[t->n_dims - 1 - d];
    bool vec = t->n_dims == 1, transpose = mt && mt->transpose && t->n_dims == 2, add = mt && mt->add != 0.0f;
    uint32_t esz = st_dtype_size(t->dtype);
    if ((vec && t->dtype != ST_F32) || add) { /* norms and biases: F32, as the archspecs read them */
        float *dst = owner_alloc(o, (size_t)t->n_elems * 4);
        if (!dst) return seterr(err, err_len, GGUF_ENOMEM, "out of memory converting '%s'", t->name);
        if (transpose) { /* (rows, cols) -> (cols, rows) */
            int64_t r = t->shape[0], c = t->shape[1];
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < c; j++) dst[j * r + i] = elem_f32(t->dtype, t->data, (uint64_t)(i * c + j));
            out->ne[0] = r;
            out->ne[1] = c;
        } else {
            for (uint64_t i = 0; i < t->n_elems; i++) dst[i] = elem_f32(t->dtype, t->data, i);
        }
        if (add)
            for (uint64_t i = 0; i < t->n_elems; i++) dst[i] += mt->add;
        out->type = GGML_TYPE_F32;
        out->n_bytes = t->n_elems * 4;
        out->data = dst;
        return 0;
    }
    out->type = ggml_of_dtype(t->dtype);
    out->n_bytes = t->n_bytes;
    if (transpose) {
        uint8_t *dst = owner_alloc(o, (size_t)t->n_bytes);
        if (!dst) return seterr(err, err_len, GGUF_ENOMEM, "out of memory converting '%s'", t->name);
        int64_t r = t->shape[0], c = t->shape[1];
        const uint8_t *src = t->data;
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) memcpy(dst + (size_t)(j * r + i) * esz, src + (size_t)(i * c + j) * esz, esz);
        out->ne[0] = r;
        out->ne[1] = c;
        out->data = dst;
    } else if ((uintptr_t)t->data % esz) { /* the format promises no alignment */
        void *dst = owner_alloc(o, (size_t)t->n_bytes);
        if (!dst) return seterr(err, err_len, GGUF_ENOMEM, "out of memory copying '%s'", t->name);
        memcpy(dst, t->data, (size_t)t->n_bytes);
        out->data = dst;
    } else {
        out->data = t->data; /* zero copy */
    }
    return 0;
}

/* ==== GPTQ / AWQ ====================================================================== */

enum { QM_NONE = 0, QM_GPTQ, QM_AWQ };

typedef struct {
    int method;      /* QM_* */
    int bits;
    int group_size;  /* -1: one group per row */
    int zero_offset; /* GPTQ v1 stores z - 1 */
    char desc[96];   /* for messages */
} quant_cfg;

static int json_int(const cJSON *o, const char *k, int def, bool *ok) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!j || cJSON_IsNull(j)) return def;
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || fabs(j->valuedouble) > 1e9) {
        *ok = false;
        return def;
    }
    return (int)j->valuedouble;
}

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* quantization_config (config.json), quantize_config.json or quant_config.json. */
static int read_quant(const char *dir, const cJSON *cfg, quant_cfg *q, char *err, size_t err_len) {
    memset(q, 0, sizeof *q);
    cJSON *own = NULL;
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config");
    const char *src = "config.json quantization_config";
    int rc = 0;
    if (qc && !cJSON_IsNull(qc) && !cJSON_IsObject(qc))
        return seterr(err, err_len, GGUF_EFORMAT, "%s: config.json quantization_config is not an object", dir);
    if (!qc || cJSON_IsNull(qc)) {
        qc = NULL;
        if ((rc = read_json(dir, "quantize_config.json", &own, NULL, NULL, err, err_len)) < 0) return rc;
        if (rc == 1) src = "quantize_config.json";
        else {
            if ((rc = read_json(dir, "quant_config.json", &own, NULL, NULL, err, err_len)) < 0) return rc;
            if (rc == 1) src = "quant_config.json";
        }
        qc = own;
    }
    if (!qc) return 0;
    const char *method = json_str(qc, "quant_method");
    bool ok = true;
    rc = 0;
    if (!method) method = json_str(qc, "w_bit") || cJSON_GetObjectItemCaseSensitive(qc, "w_bit") ? "awq" : "gptq";
    if (!strcmp(method, "gptq")) {
        q->method = QM_GPTQ;
        q->bits = json_int(qc, "bits", 4, &ok);
        q->group_size = json_int(qc, "group_size", -1, &ok);
        const char *fmt = json_str(qc, "checkpoint_format");
        const cJSON *marlin = cJSON_GetObjectItemCaseSensitive(qc, "is_marlin_format");
        if (cJSON_IsTrue(marlin) || (fmt && strcmp(fmt, "gptq") && strcmp(fmt, "gptq_v2")))
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: checkpoint_format '%s' is not supported (gptq, gptq_v2)", dir,
                        src, cJSON_IsTrue(marlin) ? "marlin" : fmt);
        q->zero_offset = fmt && !strcmp(fmt, "gptq_v2") ? 0 : 1;
        if (!rc && q->bits != 2 && q->bits != 3 && q->bits != 4 && q->bits != 8)
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: bits %d, GPTQ packs 2, 3, 4 or 8", dir, src, q->bits);
        snprintf(q->desc, sizeof q->desc, "GPTQ %d-bit, group %d%s", q->bits, q->group_size,
                 q->zero_offset ? "" : ", v2 zeros");
    } else if (!strcmp(method, "awq")) {
        q->method = QM_AWQ;
        q->bits = json_int(qc, cJSON_GetObjectItemCaseSensitive(qc, "w_bit") ? "w_bit" : "bits", 4, &ok);
        q->group_size = json_int(qc, cJSON_GetObjectItemCaseSensitive(qc, "q_group_size") ? "q_group_size" : "group_size",
                                 -1, &ok);
        const char *ver = json_str(qc, "version");
        const cJSON *zp = cJSON_GetObjectItemCaseSensitive(qc, "zero_point");
        if (ver && strcasecmp(ver, "gemm"))
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: AWQ version '%s' is not supported (gemm)", dir, src, ver);
        else if (zp && cJSON_IsFalse(zp))
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: AWQ without zero_point is not supported", dir, src);
        else if (q->bits != 4)
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: AWQ bits %d, the GEMM packing is 4-bit", dir, src, q->bits);
        snprintf(q->desc, sizeof q->desc, "AWQ %d-bit, group %d", q->bits, q->group_size);
    } else {
        rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: quant_method '%.40s' is not supported (gptq, awq)", dir, src, method);
    }
    if (!rc && !ok) rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: bits/group_size must be integers", dir, src);
    if (!rc && (q->group_size == 0 || q->group_size < -1))
        rc = seterr(err, err_len, GGUF_EFORMAT, "%s: %s: group_size %d, expected -1 or > 0", dir, src, q->group_size);
    cJSON_Delete(own);
    return rc;
}

static uint32_t ld_u32(const void *p, uint64_t i) {
    uint32_t v;
    memcpy(&v, (const uint8_t *)p + 4 * i, 4);
    return v;
}

/* Value j of a little-endian bit stream of `bits`-bit values spread over
 * words w(0), w(1), ... where w(k) = ld_u32(p, base + k * stride): GPTQ's
 * packing for 2, 4 and 8 bits, and the 3-bit one (32 values in 3 words). */
static uint32_t unpack(const void *p, uint64_t base, uint64_t stride, uint64_t j, int bits) {
    uint64_t bit = j * (uint64_t)bits, w = bit / 32;
    unsigned sh = (unsigned)(bit % 32);
    uint32_t v = ld_u32(p, base + w * stride) >> sh;
    if (sh + (unsigned)bits > 32) v |= ld_u32(p, base + (w + 1) * stride) << (32 - sh);
    return v & ((1u << bits) - 1);
}

/* AutoAWQ GEMM: column n of a packed row sits in nibble AWQ_REVERSE[n % 8] of word n / 8. */
static const int awq_reverse[8] = {0, 4, 1, 5, 2, 6, 3, 7};

typedef struct {
    const char *module;        /* HF module name (for messages) */
    const st_tensor *qweight, *qzeros, *scales, *g_idx;
    int64_t K, N;              /* in, out features */
    int64_t n_groups, G;
    int32_t *gidx;             /* (K) group of each input row */
} qmod;

/* Check the parts of module m against the format; fill K, N, groups. */
static int q_check(const char *dir, const quant_cfg *q, qmod *m, char *err, size_t err_len) {
    const st_tensor *qw = m->qweight, *qz = m->qzeros, *sc = m->scales, *gi = m->g_idx;
    const char *mod = m->module;
    if (!qw || !qz || !sc)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': needs qweight, qzeros and scales, has%s%s%s", dir,
                      q->desc, mod, qw ? " qweight" : "", qz ? " qzeros" : "", sc ? " scales" : "");
    if ((qw->dtype != ST_I32 && qw->dtype != ST_U32) || (qz->dtype != ST_I32 && qz->dtype != ST_U32) ||
        qw->n_dims != 2 || qz->n_dims != 2 || sc->n_dims != 2)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': qweight/qzeros must be 2-D I32, scales 2-D "
                      "(qweight %s %uD, qzeros %s %uD, scales %uD)", dir, q->desc, mod, st_dtype_name(qw->dtype),
                      qw->n_dims, st_dtype_name(qz->dtype), qz->n_dims, sc->n_dims);
    if (sc->dtype != ST_F16 && sc->dtype != ST_BF16 && sc->dtype != ST_F32)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': scales dtype %s, expected F16, BF16 or F32", dir,
                      q->desc, mod, st_dtype_name(sc->dtype));
    int b = q->bits;
    if (q->method == QM_GPTQ) {
        m->K = qw->shape[0] * 32 / b;
        m->N = qw->shape[1];
        if ((qw->shape[0] * 32) % b)
            return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': qweight has %lld rows, not a whole number of "
                          "%d-bit inputs", dir, q->desc, mod, (long long)qw->shape[0], b);
    } else {
        m->K = qw->shape[0];
        m->N = qw->shape[1] * 32 / b;
    }
    if (m->K < 1 || m->N < 1 || m->K > 0x7fffffff || m->N > 0x7fffffff)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': %lld inputs x %lld outputs", dir, q->desc, mod,
                      (long long)m->K, (long long)m->N);
    m->G = q->group_size < 0 ? m->K : q->group_size;
    m->n_groups = (m->K + m->G - 1) / m->G;
    int64_t zcols = (m->N * b + 31) / 32;
    if (sc->shape[0] != m->n_groups || sc->shape[1] != m->N || qz->shape[0] != m->n_groups || qz->shape[1] != zcols ||
        (m->N * b) % 32)
        return seterr(err, err_len, GGUF_EFORMAT,
                      "%s: %s module '%.120s': qweight [%lld, %lld] means %lld inputs, %lld outputs, %lld groups: expected "
                      "scales [%lld, %lld] and qzeros [%lld, %lld], got [%lld, %lld] and [%lld, %lld]", dir, q->desc, mod,
                      (long long)qw->shape[0], (long long)qw->shape[1], (long long)m->K, (long long)m->N,
                      (long long)m->n_groups, (long long)m->n_groups, (long long)m->N, (long long)m->n_groups,
                      (long long)zcols, (long long)sc->shape[0], (long long)sc->shape[1], (long long)qz->shape[0],
                      (long long)qz->shape[1]);
    if (gi && q->method == QM_AWQ)
        return seterr(err, err_len, GGUF_EFORMAT, "%s: AWQ module '%.120s' has a g_idx (a GPTQ part)", dir, mod);
    if (gi && (gi->n_dims != 1 || gi->shape[0] != m->K || (gi->dtype != ST_I32 && gi->dtype != ST_I64)))
        return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': g_idx must be I32 [%lld], got %s %uD [%lld]", dir,
                      q->desc, mod, (long long)m->K, st_dtype_name(gi->dtype), gi->n_dims, (long long)gi->shape[0]);
    return 0;
}

/* The fp16 bits of scale (g, n), and whether the value is exactly an fp16. */
static uint16_t scale_f16(const st_tensor *sc, int64_t i, bool *exact) {
    uint16_t h;
    if (sc->dtype == ST_F16) {
        memcpy(&h, (const uint8_t *)sc->data + 2 * i, 2);
        return h;
    }
    float f = elem_f32(sc->dtype, sc->data, (uint64_t)i);
    h = f32_to_f16(f);
    if (!(f16_to_f32(h) == f || (isnan(f) && isnan(f16_to_f32(h))))) *exact = false;
    return h;
}

/* The decoded zero point of every (group, output) of module m: (n_groups, N). */
static int16_t *q_zeros(const quant_cfg *q, const qmod *m) {
    int64_t N = m->N;
    int16_t *Z = malloc((size_t)(m->n_groups * N) * sizeof *Z);
    if (!Z) return NULL;
    for (int64_t g = 0; g < m->n_groups; g++)
        for (int64_t n = 0; n < N; n++) {
            if (q->method == QM_GPTQ)
                Z[g * N + n] = (int16_t)((int)unpack(m->qzeros->data, (uint64_t)(g * m->qzeros->shape[1]), 1, (uint64_t)n,
                                                     q->bits) + q->zero_offset);
            else
                Z[g * N + n] = (int16_t)((ld_u32(m->qzeros->data, (uint64_t)(g * (N / 8) + n / 8)) >>
                                          (4 * awq_reverse[n % 8])) & 15);
        }
    return Z;
}

/* One thread's share of a module: outputs [n_lo, n_hi) (n_lo a multiple of 8). */
typedef struct {
    const quant_cfg *q;
    const qmod *m;
    const int16_t *Z;  /* q_zeros */
    int16_t *D;        /* (N, ld): q − z per weight */
    int64_t ld;
    int64_t n_lo, n_hi;
    int lo, hi;        /* range of q − z seen */
    uint32_t type;     /* encode: the chosen type */
    uint8_t *dst;      /* encode: rows of row_bytes */
    size_t row_bytes;
} q_part;

/* Decode outputs [n_lo, n_hi) into D.  Loops keep both sides in memory
 * order: GPTQ packs inputs along a word (so a word's values go to one row of
 * D, in order), AWQ outputs (so 16 words, a cache line, of each input row
 * feed 128 rows of D in input order); D's rows are padded off a power-of-two
 * stride so that the rows written together do not share cache sets. */
static void q_decode_part(q_part *p) {
    const quant_cfg *q = p->q;
    const qmod *m = p->m;
    int64_t K = m->K, N = m->N, ld = p->ld;
    int b = q->bits, lo = 0, hi = 0;
    uint32_t mask = (1u << b) - 1;
    const uint8_t *qw = m->qweight->data;
    const int16_t *Z = p->Z;
    int16_t *D = p->D;
#define Q_PUT(dst, d)               \
    do {                            \
        int d_ = (d);               \
        (dst) = (int16_t)d_;        \
        lo = d_ < lo ? d_ : lo;     \
        hi = d_ > hi ? d_ : hi;     \
    } while (0)
    if (q->method == QM_AWQ) {
        int64_t wpr = N / 8;
        for (int64_t c0 = p->n_lo / 8; c0 < p->n_hi / 8; c0 += 16) {
            int64_t c1 = c0 + 16 < p->n_hi / 8 ? c0 + 16 : p->n_hi / 8;
            for (int64_t k = 0; k < K; k++) {
                const int16_t *zr = Z + (int64_t)m->gidx[k] * N;
                for (int64_t c = c0; c < c1; c++) {
                    uint32_t v = ld_u32(qw, (uint64_t)(k * wpr + c));
                    for (int i = 0; i < 8; i++) {
                        int64_t n = c * 8 + i;
                        Q_PUT(D[n * ld + k], (int)((v >> (4 * awq_reverse[i])) & 15) - zr[n]);
                    }
                }
            }
        }
    } else if (32 % b == 0) {
        int vpw = 32 / b;
        for (int64_t n0 = p->n_lo; n0 < p->n_hi; n0 += 256) {
            int64_t n1 = n0 + 256 < p->n_hi ? n0 + 256 : p->n_hi;
            for (int64_t w = 0; w < K / vpw; w++) {
                const int16_t *zr[16];
                for (int j = 0; j < vpw; j++) zr[j] = Z + (int64_t)m->gidx[w * vpw + j] * N;
                for (int64_t n = n0; n < n1; n++) {
                    uint32_t v = ld_u32(qw, (uint64_t)(w * N + n));
                    int16_t *dp = D + n * ld + w * vpw;
                    for (int j = 0; j < vpw; j++) Q_PUT(dp[j], (int)((v >> (j * b)) & mask) - zr[j][n]);
                }
            }
        }
    } else { /* 3 bits: values cross word boundaries */
        for (int64_t n0 = p->n_lo; n0 < p->n_hi; n0 += 256) {
            int64_t n1 = n0 + 256 < p->n_hi ? n0 + 256 : p->n_hi;
            for (int64_t k = 0; k < K; k++) {
                const int16_t *zr = Z + (int64_t)m->gidx[k] * N;
                for (int64_t n = n0; n < n1; n++)
                    Q_PUT(D[n * ld + k], (int)unpack(qw, (uint64_t)n, (uint64_t)N, (uint64_t)k, b) - zr[n]);
            }
        }
    }
#undef Q_PUT
    p->lo = lo;
    p->hi = hi;
}

/* Encode outputs [n_lo, n_hi) of D as rows of p->type (d = s, code = q − z). */
static void q_encode_part(q_part *p) {
    const qmod *m = p->m;
    int64_t K = m->K, N = m->N;
    for (int64_t n = p->n_lo; n < p->n_hi; n++) {
        uint8_t *row = p->dst + p->row_bytes * (size_t)n;
        const int16_t *dr = p->D + n * p->ld;
        if (p->type == GGML_TYPE_F32) {
            for (int64_t k = 0; k < K; k++) {
                float s = elem_f32(m->scales->dtype, m->scales->data, (uint64_t)((int64_t)m->gidx[k] * N + n));
                float w = s * (float)dr[k]; /* exact: an fp16-sized mantissa times a small integer */
                memcpy(row + 4 * k, &w, 4);
            }
            continue;
        }
        for (int64_t kb = 0; kb < K / 32; kb++) {
            bool ex = true;
            uint16_t d = scale_f16(m->scales, (int64_t)m->gidx[kb * 32] * N + n, &ex);
            const int16_t *code = dr + kb * 32;
            if (p->type == GGML_TYPE_Q4_0) {
                kern_block_q4_0 *bl = (kern_block_q4_0 *)(row + sizeof *bl * (size_t)kb);
                memcpy(&bl->d, &d, 2);
                for (int j = 0; j < 16; j++) bl->qs[j] = (uint8_t)((code[j] + 8) | (code[j + 16] + 8) << 4);
            } else if (p->type == GGML_TYPE_Q5_0) {
                kern_block_q5_0 *bl = (kern_block_q5_0 *)(row + sizeof *bl * (size_t)kb);
                memcpy(&bl->d, &d, 2);
                uint32_t qh = 0;
                for (int j = 0; j < 16; j++) {
                    int lo = code[j] + 16, hi = code[j + 16] + 16;
                    bl->qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                    qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
                }
                memcpy(bl->qh, &qh, 4);
            } else {
                kern_block_q8_0 *bl = (kern_block_q8_0 *)(row + sizeof *bl * (size_t)kb);
                memcpy(&bl->d, &d, 2);
                for (int j = 0; j < 32; j++) bl->qs[j] = (int8_t)code[j];
            }
        }
    }
}

#define Q_MAX_THREADS 32

static void *q_decode_thread(void *a) {
    q_decode_part(a);
    return NULL;
}
static void *q_encode_thread(void *a) {
    q_encode_part(a);
    return NULL;
}

/* Run fn over parts[0..n) on n threads (the calling thread takes part 0). */
static void q_run(q_part *parts, int n, void *(*fn)(void *)) {
    pthread_t th[Q_MAX_THREADS];
    bool started[Q_MAX_THREADS] = {false};
    for (int i = 1; i < n; i++) started[i] = pthread_create(&th[i], NULL, fn, &parts[i]) == 0;
    fn(&parts[0]);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fn(&parts[i]); /* no thread: do it here */
    }
}

/* Re-express module m as one GGUF tensor (hf.h: Q4_0 / Q5_0 / Q8_0 when
 * exact, else F32), decoding and encoding on up to one thread per CPU. */
static int quant_tensor(const char *dir, hf_owner *o, out_list *outs, const quant_cfg *q, qmod *m, const char *gguf_name,
                        char *err, size_t err_len) {
    int rc = q_check(dir, q, m, err, err_len);
    if (rc) return rc;
    int64_t K = m->K, N = m->N;
    if (out_find(outs, gguf_name))
        return seterr(err, err_len, GGUF_EFORMAT, "%s: module '%.120s' maps to '%s', which another tensor already took", dir,
                      m->module, gguf_name);
    m->gidx = malloc((size_t)K * sizeof *m->gidx);
    int64_t ld = K + 40; /* off a power-of-two stride (q_decode_part) */
    int16_t *D = malloc((size_t)ld * (size_t)N * sizeof *D);
    if (!m->gidx || !D) {
        free(m->gidx);
        free(D);
        return seterr(err, err_len, GGUF_ENOMEM, "out of memory decoding '%s'", m->module);
    }
    for (int64_t k = 0; k < K; k++) {
        int64_t g = k / m->G;
        if (m->g_idx) {
            if (m->g_idx->dtype == ST_I32) {
                int32_t v;
                memcpy(&v, (const uint8_t *)m->g_idx->data + 4 * k, 4);
                g = v;
            } else {
                int64_t v;
                memcpy(&v, (const uint8_t *)m->g_idx->data + 8 * k, 8);
                g = v;
            }
            if (g < 0 || g >= m->n_groups) {
                free(m->gidx);
                free(D);
                return seterr(err, err_len, GGUF_EFORMAT, "%s: %s module '%.120s': g_idx[%lld] = %lld, expected 0..%lld", dir,
                              q->desc, m->module, (long long)k, (long long)g, (long long)m->n_groups - 1);
            }
        }
        m->gidx[k] = (int32_t)g;
    }
    int16_t *Z = q_zeros(q, m);
    if (!Z) {
        free(m->gidx);
        free(D);
        return seterr(err, err_len, GGUF_ENOMEM, "out of memory decoding '%s'", m->module);
    }
    /* parts of whole 128-output strips */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t strips = (N + 127) / 128;
    int n_parts = (int)(cpus < 1 ? 1 : cpus > Q_MAX_THREADS ? Q_MAX_THREADS : cpus);
    if (n_parts > strips) n_parts = (int)strips;
    if ((int64_t)K * N < (1 << 20)) n_parts = 1; /* small: threads cost more than they save */
    q_part parts[Q_MAX_THREADS];
    for (int i = 0; i < n_parts; i++) {
        int64_t a = strips * i / n_parts * 128, e = strips * (i + 1) / n_parts * 128;
        parts[i] = (q_part){.q = q, .m = m, .Z = Z, .D = D, .ld = ld, .n_lo = a, .n_hi = e < N ? e : N};
    }
    q_run(parts, n_parts, q_decode_thread);
    int dmin = 0, dmax = 0;
    for (int i = 0; i < n_parts; i++) {
        dmin = parts[i].lo < dmin ? parts[i].lo : dmin;
        dmax = parts[i].hi > dmax ? parts[i].hi : dmax;
    }
    free(Z);
    /* Which layout holds it exactly? */
    bool blocks = K % 32 == 0, exact = true;
    for (int64_t k = 0; blocks && k < K; k += 32)
        for (int j = 1; j < 32; j++)
            if (m->gidx[k + j] != m->gidx[k]) blocks = false;
    if (blocks)
        for (int64_t i = 0; i < m->n_groups * N && exact; i++) (void)scale_f16(m->scales, i, &exact);
    uint32_t type = GGML_TYPE_F32;
    if (blocks && exact) {
        if (dmin >= -8 && dmax <= 7) type = GGML_TYPE_Q4_0;
        else if (dmin >= -16 && dmax <= 15) type = GGML_TYPE_Q5_0;
        else if (dmin >= -128 && dmax <= 127) type = GGML_TYPE_Q8_0;
    }
    size_t row_bytes = (size_t)ggml_row_bytes(type, (uint64_t)K);
    hf_out *out = out_add(outs);
    uint8_t *dst = out ? owner_alloc(o, row_bytes * (size_t)N) : NULL;
    if (!dst) {
        free(m->gidx);
        free(D);
        return seterr(err, err_len, GGUF_ENOMEM, "out of memory re-expressing '%s'", m->module);
    }
    snprintf(out->name, sizeof out->name, "%s", gguf_name);
    out->type = type;
    out->n_dims = 2;
    out->ne[0] = K;
    out->ne[1] = N;
    out->ne[2] = out->ne[3] = 1;
    out->n_bytes = row_bytes * (uint64_t)N;
    out->data = dst;
    for (int i = 0; i < n_parts; i++) {
        parts[i].type = type;
        parts[i].dst = dst;
        parts[i].row_bytes = row_bytes;
    }
    q_run(parts, n_parts, q_encode_thread);
    free(D);
    free(m->gidx);
    m->gidx = NULL;
    return 0;
}

/* ==== tensors of the checkpoint ========================================================= */

static const char *const quant_parts[] = {"qweight", "qzeros", "scales", "g_idx"};

/* Map HF module name `module` (after strip_prefix) to its GGUF base; NULL when unmapped. */
static const hf_map_tensor *map_module(const hf_map *m, const char *module, char *gguf, size_t cap) {
    for (size_t i = 0; i < m->n_tensors; i++) {
        int layer;
        if (hf_match(m->tensors[i].hf, module, &layer)) {
            expand(gguf, cap, m->tensors[i].gguf, layer);
            return &m->tensors[i];
        }
    }
    return NULL;
}

static const char *strip(const hf_map *m, const char *name) {
    for (size_t i = 0; i < m->n_strip_prefix; i++) {
        size_t n = strlen(m->strip_prefix[i]);
        if (!strncmp(name, m->strip_prefix[i], n)) return name + n;
    }
    return name;
}

static bool ignored(const hf_map *m, const char *name) {
    for (size_t i = 0; i < m->n_ignore; i++) {
        int layer;
        if (hf_match(m->ignore[i], name, &layer)) return true;
    }
    return false;
}

static int build_tensors(const char *dir, const hf_map *m, const quant_cfg *q, hf_owner *o, const hf_src *srcs, size_t n,
                         out_list *outs, char *err, size_t err_len) {
    /* modules holding quantized parts, gathered first (their parts are not tensors of their own) */
    qmod *qm = calloc(n ? n : 1, sizeof *qm);
    char **qnames = calloc(n ? n : 1, sizeof *qnames);
    size_t n_qm = 0;
    int rc = 0;
    if (!qm || !qnames) rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = strip(m, srcs[i].name), *dot = strrchr(name, '.');
        if (!dot) continue;
        int part = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(dot + 1, quant_parts[k])) part = k;
        if (part < 0) continue;
        if (!q->method) {
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s' is a quantized part, but neither config.json "
                        "quantization_config nor quantize_config.json / quant_config.json says how it is packed", dir,
                        srcs[i].name);
            break;
        }
        size_t ml = (size_t)(dot - name), k = 0;
        while (k < n_qm && (strlen(qnames[k]) != ml || strncmp(qnames[k], name, ml))) k++;
        if (k == n_qm) {
            if (!(qnames[k] = strndup(name, ml))) {
                rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
                break;
            }
            qm[k].module = qnames[k];
            n_qm++;
        }
        const st_tensor **slot[4] = {&qm[k].qweight, &qm[k].qzeros, &qm[k].scales, &qm[k].g_idx};
        *slot[part] = srcs[i].t;
    }
    char gname[200], base[160];
    for (size_t k = 0; !rc && k < n_qm; k++) {
        const hf_map_tensor *mt = map_module(m, qm[k].module, base, sizeof base);
        if (!mt) {
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: quantized module '%.120s' has no mapping in %s", dir, qm[k].module,
                        m->file);
            break;
        }
        /* GPTQ/AWQ pack (in, out) whatever the source layer (no transpose);
         * an offset would need the float weights */
        if (mt->add != 0.0f) {
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: module '%.120s' is quantized, but %s adds %g to its weights",
                        dir, qm[k].module, m->file, mt->add);
            break;
        }
        snprintf(gname, sizeof gname, "%s.weight", base);
        rc = quant_tensor(dir, o, outs, q, &qm[k], gname, err, err_len);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = strip(m, srcs[i].name), *dot = strrchr(name, '.');
        if (ignored(m, name)) continue;
        if (dot) {
            bool part = false;
            for (int k = 0; k < 4; k++) part |= !strcmp(dot + 1, quant_parts[k]);
            if (part) continue;
        }
        if (!dot || (strcmp(dot + 1, "weight") && strcmp(dot + 1, "bias"))) {
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s': expected MODULE.weight or MODULE.bias (%s)", dir,
                        srcs[i].name, m->file);
            break;
        }
        char module[160];
        snprintf(module, sizeof module, "%.*s", (int)(dot - name), name);
        const hf_map_tensor *mt = map_module(m, module, base, sizeof base);
        if (!mt) {
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: tensor '%.120s' has no mapping in %s (archspecs/%s.lua does not "
                        "use it)", dir, srcs[i].name, m->file, m->arch);
            break;
        }
        snprintf(gname, sizeof gname, "%s.%s", base, dot + 1);
        rc = plain_tensor(dir, o, outs, &srcs[i], gname, mt, err, err_len);
    }
    for (size_t k = 0; k < n_qm; k++) free(qnames[k]);
    free(qnames);
    free(qm);
    return rc;
}

/* tie_word_embeddings: the embedding projects the logits. */
static int apply_tied(const char *dir, const hf_map *m, const cJSON *cfg, out_list *outs, char *err, size_t err_len) {
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    if (tj && !cJSON_IsBool(tj) && !cJSON_IsNull(tj))
        return seterr(err, err_len, GGUF_EFORMAT, "%s: config.json tie_word_embeddings is not a boolean", dir);
    bool tied = cJSON_IsBool(tj) ? cJSON_IsTrue(tj) : m->tie_default;
    if (!tied) return 0;
    hf_out *emb = out_find(outs, "token_embd.weight"), *head = out_find(outs, "output.weight");
    if (!emb && head) { /* only lm_head stored (safetensors keeps one of two shared tensors) */
        snprintf(head->name, sizeof head->name, "token_embd.weight");
        emb = head;
        head = NULL;
    } else if (emb && head) { /* both stored: tied means the embedding */
        *head = outs->t[--outs->n];
        head = NULL;
        emb = out_find(outs, "token_embd.weight");
    }
    if (emb && m->output_alias) {
        hf_out e = *emb;
        hf_out *a = out_add(outs);
        if (!a) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        *a = e;
        snprintf(a->name, sizeof a->name, "output.weight");
    }
    return 0;
}

/* ==== tokenizer, chat template, names ====================================================== */

static int add_tokenizer(const char *dir, const cJSON *cfg, hf_kv_list *kvs, char *err, size_t err_len) {
    char *text;
    size_t len;
    int rc = read_text(dir, "tokenizer.json", &text, &len, err, err_len);
    if (rc < 0) return rc;
    if (rc == 1) {
        rc = hf_kv_add_str(kvs, "tokenizer.huggingface.json", text, len);
        free(text);
        if (rc) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    cJSON *tc = NULL;
    rc = read_json(dir, "tokenizer_config.json", &tc, &text, &len, err, err_len);
    if (rc < 0) return rc;
    if (rc == 1) {
        rc = hf_kv_add_str(kvs, "tokenizer.huggingface.config", text, len);
        free(text);
        if (rc) {
            cJSON_Delete(tc);
            return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        }
    }
    /* chat template: chat_template.jinja, else tokenizer_config.json, else chat_template.json */
    rc = read_text(dir, "chat_template.jinja", &text, &len, err, err_len);
    const cJSON *ct = tc ? cJSON_GetObjectItemCaseSensitive(tc, "chat_template") : NULL;
    cJSON *ctj = NULL;
    if (rc == 0 && !ct) {
        rc = read_json(dir, "chat_template.json", &ctj, NULL, NULL, err, err_len);
        if (rc == 1) ct = cJSON_GetObjectItemCaseSensitive(ctj, "chat_template");
        rc = rc < 0 ? rc : 0;
    }
    if (rc == 1) {
        rc = hf_kv_add_str(kvs, "tokenizer.chat_template", text, len) ? seterr(err, err_len, GGUF_ENOMEM, "out of memory") : 0;
        free(text);
    } else if (!rc && cJSON_IsString(ct)) {
        rc = hf_kv_add_str(kvs, "tokenizer.chat_template", ct->valuestring, strlen(ct->valuestring))
                 ? seterr(err, err_len, GGUF_ENOMEM, "out of memory") : 0;
    } else if (!rc && cJSON_IsArray(ct)) { /* [{"name": "default", "template": "..."}, ...] */
        for (const cJSON *e = ct->child; e && !rc; e = e->next) {
            const char *nm = json_str(e, "name"), *tp = json_str(e, "template");
            if (!nm || !tp) {
                rc = seterr(err, err_len, GGUF_EFORMAT, "%s: chat_template list entries need \"name\" and \"template\"", dir);
                break;
            }
            char key[160];
            if (!strcmp(nm, "default")) snprintf(key, sizeof key, "tokenizer.chat_template");
            else snprintf(key, sizeof key, "tokenizer.chat_template.%.100s", nm);
            if (hf_kv_add_str(kvs, key, tp, strlen(tp))) rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        }
    } else if (!rc && ct && !cJSON_IsNull(ct)) {
        rc = seterr(err, err_len, GGUF_EFORMAT, "%s: chat_template is neither a string nor a list of named templates", dir);
    }
    cJSON_Delete(ctj);
    cJSON_Delete(tc);
    if (rc) return rc;

    /* end-of-generation ids: generation_config.json, else config.json */
    cJSON *gc = NULL;
    if ((rc = read_json(dir, "generation_config.json", &gc, NULL, NULL, err, err_len)) < 0) return rc;
    const cJSON *eos = gc ? cJSON_GetObjectItemCaseSensitive(gc, "eos_token_id") : NULL;
    if (!eos || cJSON_IsNull(eos)) eos = cJSON_GetObjectItemCaseSensitive(cfg, "eos_token_id");
    int32_t ids[64];
    int n = 0;
    bool bad = false;
    if (cJSON_IsNumber(eos)) {
        ids[n++] = (int32_t)eos->valuedouble;
        bad = eos->valuedouble < 0 || eos->valuedouble > INT32_MAX;
    } else if (cJSON_IsArray(eos)) {
        for (const cJSON *e = eos->child; e && n < 64; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX) bad = true;
            else ids[n++] = (int32_t)e->valuedouble;
        }
    } else if (eos && !cJSON_IsNull(eos)) {
        bad = true;
    }
    cJSON_Delete(gc);
    if (bad) return seterr(err, err_len, GGUF_EFORMAT, "%s: eos_token_id must be a token id or a list of them", dir);
    if (n) {
        int32_t *arr = malloc((size_t)n * sizeof *arr);
        if (!arr) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        memcpy(arr, ids, (size_t)n * sizeof *arr);
        gguf_value v = {.type = GGUF_VT_ARRAY};
        v.v.arr.type = GGUF_VT_INT32;
        v.v.arr.n = (uint64_t)n;
        v.v.arr.data = arr;
        if (hf_kv_add(kvs, "tokenizer.huggingface.eos_token_ids", v, (char *)arr))
            return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    return 0;
}

/* ==== the image ============================================================================= */

static int cmp_out(const void *a, const void *b) { return natcmp(((const hf_out *)a)->name, ((const hf_out *)b)->name); }

static int build_image(const char *dir, const hf_kv_list *kvs, out_list *outs, hf_owner *o, size_t *image_len,
                       uint64_t *data_bytes, char *err, size_t err_len) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return seterr(err, err_len, GGUF_ENOMEM, "out of memory for the header");
    gguf_writer w = {.f = f};
    gguf_w_bytes(&w, "GGUF", 4);
    gguf_w_u32(&w, 3);
    gguf_w_u64(&w, outs->n);
    gguf_w_u64(&w, kvs->n);
    for (size_t i = 0; i < kvs->n; i++) gguf_w_kv(&w, kvs->kv[i].key, &kvs->kv[i].v);
    qsort(outs->t, outs->n, sizeof *outs->t, cmp_out);
    uint64_t off = 0;
    for (size_t i = 0; i < outs->n; i++) {
        hf_out *t = &outs->t[i];
        gguf_w_tensor_info(&w, t->name, t->n_dims, t->ne, t->type, off);
        off = gguf_align_up(off + t->n_bytes, GGUF_DEFAULT_ALIGNMENT);
    }
    /* the image runs to the (virtual) data section: the fingerprint hashes it all */
    gguf_w_pad(&w, GGUF_DEFAULT_ALIGNMENT);
    int werr = w.err;
    if (fclose(f) || werr || !buf) {
        free(buf);
        return seterr(err, err_len, GGUF_ENOMEM, "%s: cannot write the GGUF header in memory", dir);
    }
    o->image = buf;
    *image_len = len;
    *data_bytes = off;
    o->data = calloc(outs->n ? outs->n : 1, sizeof *o->data);
    if (!o->data) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    for (size_t i = 0; i < outs->n; i++) o->data[i] = outs->t[i].data;
    return 0;
}

/* general.name: config.json _name_or_path when it names a model, else the
 * folder's name; a Hugging Face cache snapshot (.../models--ORG--NAME/
 * snapshots/REV) is named ORG/NAME. */
static void model_name(const char *dir, const cJSON *cfg, char *buf, size_t cap) {
    const char *np = json_str(cfg, "_name_or_path");
    if (np && *np && np[0] != '/' && np[0] != '.') {
        snprintf(buf, cap, "%s", np);
        return;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    /* .../models--ORG--NAME/snapshots/REV */
    size_t s_end = b > 0 ? b - 1 : 0, s = s_end;
    while (s > 0 && dir[s - 1] != '/') s--;
    if (b > 0 && s_end - s == 9 && !strncmp(dir + s, "snapshots", 9) && s > 0) {
        size_t m_end = s - 1, m = m_end;
        while (m > 0 && dir[m - 1] != '/') m--;
        if (m_end - m > 8 && !strncmp(dir + m, "models--", 8)) {
            size_t k = 0;
            for (size_t i = m + 8; i < m_end && k + 1 < cap; i++) {
                if (dir[i] == '-' && i + 1 < m_end && dir[i + 1] == '-') {
                    buf[k++] = '/';
                    i++;
                } else {
                    buf[k++] = dir[i];
                }
            }
            buf[k] = 0;
            return;
        }
    }
    snprintf(buf, cap, "%.*s", (int)(n - b), dir + b);
}

int hf_open(const char *dir, gguf_file **out, char *err, size_t err_len) {
    *out = NULL;
    cJSON *cfg = NULL;
    int rc = read_json(dir, "config.json", &cfg, NULL, NULL, err, err_len);
    if (rc == 0) return seterr(err, err_len, GGUF_ENOTFOUND, "%s: no config.json (not a Hugging Face checkpoint folder)", dir);
    if (rc < 0) return rc;
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? archs->child : NULL;
    if (!cJSON_IsString(a0)) {
        cJSON_Delete(cfg);
        return seterr(err, err_len, GGUF_EFORMAT, "%s: config.json \"architectures\" must be a list starting with a "
                      "class name (e.g. [\"LlamaForCausalLM\"])", dir);
    }
    hf_map *m = NULL;
    hf_kv_list kvs = {0};
    out_list outs = {0};
    hf_src *srcs = NULL;
    size_t n_srcs = 0;
    hf_owner *o = calloc(1, sizeof *o);
    quant_cfg q;
    char e2[1024];
    if (!o) {
        rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = hf_map_load(NULL, a0->valuestring, &m, e2, sizeof e2))) {
        seterr(err, err_len, rc, "%s: %s", dir, e2 + strlen("hf: "));
        goto done;
    }
    char name[256];
    model_name(dir, cfg, name, sizeof name);
    if (hf_kv_add_str(&kvs, "general.architecture", m->arch, strlen(m->arch)) ||
        hf_kv_add_str(&kvs, "general.name", name, strlen(name))) {
        rc = seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = hf_map_eval(m, cfg, &kvs, dir, err, err_len)) || (rc = read_quant(dir, cfg, &q, err, err_len)) ||
        (rc = open_shards(dir, o, &srcs, &n_srcs, err, err_len)) ||
        (rc = build_tensors(dir, m, &q, o, srcs, n_srcs, &outs, err, err_len)) ||
        (rc = apply_tied(dir, m, cfg, &outs, err, err_len)) || (rc = add_tokenizer(dir, cfg, &kvs, err, err_len)))
        goto done;
    if (!outs.n) {
        rc = seterr(err, err_len, GGUF_EFORMAT, "%s: the checkpoint holds no tensors", dir);
        goto done;
    }
    size_t image_len = 0;
    uint64_t data_bytes = 0;
    if ((rc = build_image(dir, &kvs, &outs, o, &image_len, &data_bytes, err, err_len))) goto done;
    gguf_parts parts = {.data = o->data, .n_data = outs.n, .data_bytes = data_bytes, .regions = o->regions,
                        .n_regions = o->n_shards, .release = owner_free, .owner = o};
    rc = gguf_open_parts(o->image, image_len, &parts, out, e2, sizeof e2);
    o = NULL; /* released by gguf_close, or already by the failed open */
    if (rc) seterr(err, err_len, rc, "%s: assembled header: %s", dir, e2);
done:
    owner_free(o);
    free(srcs);
    free(outs.t);
    hf_kv_free(&kvs);
    hf_map_free(m);
    cJSON_Delete(cfg);
    return rc;
}

/* ==== writers' helper ======================================================================== */

int hf_permute_rows(const void *src, void *dst, int64_t n_rows, size_t row_bytes, int n_head, bool to_gguf) {
    if (n_head < 1 || n_rows % (2 * n_head)) return -1;
    int64_t hd = n_rows / n_head, half = hd / 2;
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) {
                int64_t g = h * hd + 2 * i + j, f = h * hd + j * half + i;
                int64_t from = to_gguf ? f : g, to = to_gguf ? g : f;
                memcpy(d + (size_t)to * row_bytes, s + (size_t)from * row_bytes, row_bytes);
            }
    return 0;
}
