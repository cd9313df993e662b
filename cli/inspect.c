/*
 * inspect.c — `cinfer inspect MODEL [--json]`: what is in a model file.
 *
 * Detects the format by content (runtime/modelfile), opens GGUF with
 * runtime/gguf and safetensors with runtime/safetensors, and prints the header
 * facts, every metadata key (long arrays summarised: element type, length,
 * first values), every tensor (name, type, shape, bytes, offset), totals
 * (tensors, parameters, bytes per type) and how long the open+parse took.
 * --json prints the same as one JSON document built with cJSON.
 *
 * Errors are one line on stderr and exit status 1 (2 for usage errors).
 */
#include "cli.h"
#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "formats/safetensors.h"

#include <cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HEAD_ELEMS 8     /* array elements shown */
#define TEXT_STR_MAX 72  /* string bytes shown in text mode */
#define MAX_SHOWN_DEPTH 3

static void usage(FILE *f) {
    fprintf(f, "usage: cinfer inspect MODEL [--json]\n"
               "  MODEL   a .gguf, .giw or .safetensors file (format detected by content),\n"
               "          or REPO[:FILE] pulled with cinfer pull\n"
               "  --json  one JSON document instead of text\n");
}

/* ==== string helpers ======================================================== */

/* Length of the valid UTF-8 sequence at s (of n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return c ? 1 : 0;
    if ((c & 0xe0) == 0xc0) k = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) k = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) k = 4, cp = c & 0x07;
    else return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return k;
}

/* A NUL-terminated, valid UTF-8 copy of s (invalid bytes and NUL → U+FFFD). */
static char *utf8_copy(const char *s, uint64_t n) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (uint64_t i = 0; i < n;) {
        size_t l = utf8_len((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(o + k, s + i, l);
            k += l;
            i += l;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    return o;
}

/* Text mode: a name from a file with control bytes replaced, so each entry
 * stays on one line (buf of n bytes). */
static const char *clean_name(const char *s, char *buf, size_t n) {
    size_t k = 0;
    for (; s[k] && k + 1 < n; k++) buf[k] = (unsigned char)s[k] < 0x20 || s[k] == 0x7f ? '?' : s[k];
    buf[k] = 0;
    return buf;
}

/* Text mode: the width of a name column holding name (as clean_name prints
 * it, at most 255 bytes), at least w. */
static int name_width(const char *name, int w) {
    size_t n = strlen(name);
    if (n > 255) n = 255;
    return (int)n > w ? (int)n : w;
}

/* Text mode: a quoted, escaped string, at most max bytes of it. */
static void print_str(FILE *f, const char *s, uint64_t n, uint64_t max) {
    fputc('"', f);
    for (uint64_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
    if (n > max) fprintf(f, "... (%" PRIu64 " bytes)", n);
}

static void print_shape(FILE *f, const int64_t *ne, uint32_t n_dims) {
    char buf[128];
    size_t k = 0;
    buf[k++] = '[';
    for (uint32_t d = 0; d < n_dims && k < sizeof buf - 24; d++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%" PRId64, d ? ", " : "", ne[d]);
    snprintf(buf + k, sizeof buf - k, "]");
    fprintf(f, "%-22s", buf);
}

static void human_bytes(char *buf, size_t n, uint64_t b) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)b;
    int i = 0;
    while (x >= 1024 && i < 4) x /= 1024, i++;
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", x, u[i]);
}

/* ==== totals ================================================================ */

#define TOTALS_TYPES_ ((int)GGML_TYPE_COUNT > (int)ST_DTYPE_COUNT ? (int)GGML_TYPE_COUNT : (int)ST_DTYPE_COUNT)
#define TOTALS_TYPES (TOTALS_TYPES_ > GGUF_CINFER_TYPE_LAST + 1 ? TOTALS_TYPES_ : GGUF_CINFER_TYPE_LAST + 1)
#define TOTALS_OTHER TOTALS_TYPES

typedef struct {
    uint64_t n_tensors, n_params, n_bytes;
    /* GGUF types, cinfer's repacked types (GGUF_CINFER_TYPE_*, in a .giw) and
     * safetensors dtypes; a type beyond them counts under TOTALS_OTHER. */
    struct { uint64_t n_tensors, n_params, n_bytes; } by_type[TOTALS_TYPES + 1];
} totals;

static void totals_add(totals *t, uint32_t type, uint64_t n_params, uint64_t n_bytes) {
    t->n_tensors++;
    t->n_params += n_params;
    t->n_bytes += n_bytes;
    if (type >= TOTALS_TYPES) type = TOTALS_OTHER;
    t->by_type[type].n_tensors++;
    t->by_type[type].n_params += n_params;
    t->by_type[type].n_bytes += n_bytes;
}

static void print_totals(FILE *f, const totals *t, size_t n_types, const char *(*type_name)(uint32_t)) {
    char hb[32];
    human_bytes(hb, sizeof hb, t->n_bytes);
    fprintf(f, "\ntotals\n  tensors      %" PRIu64 "\n  parameters   %" PRIu64 "\n  bytes        %" PRIu64 " (%s)\n",
            t->n_tensors, t->n_params, t->n_bytes, hb);
    for (size_t i = 0; i < n_types; i++) {
        if (!t->by_type[i].n_tensors) continue;
        human_bytes(hb, sizeof hb, t->by_type[i].n_bytes);
        fprintf(f, "  %-12s %" PRIu64 " tensors, %" PRIu64 " parameters, %" PRIu64 " bytes (%s)\n",
                type_name((uint32_t)i), t->by_type[i].n_tensors, t->by_type[i].n_params, t->by_type[i].n_bytes, hb);
    }
}

static cJSON *json_totals(const totals *t, size_t n_types, const char *(*type_name)(uint32_t)) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n_tensors", (double)t->n_tensors);
    cJSON_AddNumberToObject(o, "n_params", (double)t->n_params);
    cJSON_AddNumberToObject(o, "n_bytes", (double)t->n_bytes);
    cJSON *bt = cJSON_AddObjectToObject(o, "by_type");
    for (size_t i = 0; i < n_types; i++) {
        if (!t->by_type[i].n_tensors) continue;
        cJSON *e = cJSON_AddObjectToObject(bt, type_name((uint32_t)i));
        cJSON_AddNumberToObject(e, "n_tensors", (double)t->by_type[i].n_tensors);
        cJSON_AddNumberToObject(e, "n_params", (double)t->by_type[i].n_params);
        cJSON_AddNumberToObject(e, "n_bytes", (double)t->by_type[i].n_bytes);
    }
    return o;
}

/* ==== GGUF values =========================================================== */

static void text_value(FILE *f, const gguf_value *v, int depth) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        fprintf(f, "%" PRIu64, v->v.u64);
        break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        fprintf(f, "%" PRId64, v->v.i64);
        break;
    case GGUF_VT_FLOAT32: fprintf(f, "%.9g", v->v.f64); break;
    case GGUF_VT_FLOAT64: fprintf(f, "%.17g", v->v.f64); break;
    case GGUF_VT_BOOL: fputs(v->v.b ? "true" : "false", f); break;
    case GGUF_VT_STRING: print_str(f, v->v.str.ptr, v->v.str.len, TEXT_STR_MAX); break;
    case GGUF_VT_ARRAY: {
        if (depth >= MAX_SHOWN_DEPTH) {
            fprintf(f, "[%" PRIu64 " x %s]", v->v.arr.n, gguf_vtype_name(v->v.arr.type));
            break;
        }
        fputc('[', f);
        for (uint64_t i = 0; i < v->v.arr.n && i < HEAD_ELEMS; i++) {
            gguf_value e;
            gguf_arr_elem(v, i, &e);
            if (i) fputs(", ", f);
            if (e.type == GGUF_VT_STRING) print_str(f, e.v.str.ptr, e.v.str.len, 24);
            else text_value(f, &e, depth + 1);
        }
        if (v->v.arr.n > HEAD_ELEMS) fputs(", ...", f);
        fputc(']', f);
        break;
    }
    default: fputs("?", f);
    }
}

static void text_type(char *buf, size_t n, const gguf_value *v) {
    if (v->type != GGUF_VT_ARRAY) {
        snprintf(buf, n, "%s", gguf_vtype_name(v->type));
        return;
    }
    snprintf(buf, n, "arr[%s,%" PRIu64 "]", gguf_vtype_name(v->v.arr.type), v->v.arr.n);
}

static cJSON *json_str(const char *s, uint64_t n) {
    char *c = utf8_copy(s, n);
    cJSON *j = cJSON_CreateString(c ? c : "");
    free(c);
    return j;
}

static cJSON *json_scalar(const gguf_value *v, int depth);

static cJSON *json_array(const gguf_value *v, int depth) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "arr");
    cJSON_AddStringToObject(o, "elem_type", gguf_vtype_name(v->v.arr.type));
    cJSON_AddNumberToObject(o, "n", (double)v->v.arr.n);
    cJSON *head = cJSON_AddArrayToObject(o, "head");
    for (uint64_t i = 0; i < v->v.arr.n && i < HEAD_ELEMS && depth < MAX_SHOWN_DEPTH; i++) {
        gguf_value e;
        gguf_arr_elem(v, i, &e);
        cJSON_AddItemToArray(head, e.type == GGUF_VT_ARRAY ? json_array(&e, depth + 1) : json_scalar(&e, depth + 1));
    }
    return o;
}

/* Numbers beyond 2^53 do not survive a JSON double: those become strings. */
static cJSON *json_scalar(const gguf_value *v, int depth) {
    char buf[32];
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        if (v->v.u64 <= (1ull << 53)) return cJSON_CreateNumber((double)v->v.u64);
        snprintf(buf, sizeof buf, "%" PRIu64, v->v.u64);
        return cJSON_CreateString(buf);
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        if (v->v.i64 <= (1ll << 53) && v->v.i64 >= -(1ll << 53)) return cJSON_CreateNumber((double)v->v.i64);
        snprintf(buf, sizeof buf, "%" PRId64, v->v.i64);
        return cJSON_CreateString(buf);
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: return cJSON_CreateNumber(v->v.f64);
    case GGUF_VT_BOOL: return cJSON_CreateBool(v->v.b);
    case GGUF_VT_STRING: return json_str(v->v.str.ptr, v->v.str.len);
    case GGUF_VT_ARRAY: return json_array(v, depth);
    default: return cJSON_CreateNull();
    }
}

/* ==== GGUF ================================================================== */

static const char *gguf_str_or(const gguf_file *g, const char *key, char *buf, size_t n) {
    const gguf_value *v = gguf_get(g, key);
    if (!v || v->type != GGUF_VT_STRING) return NULL;
    uint64_t len = v->v.str.len < n - 1 ? v->v.str.len : n - 1;
    memcpy(buf, v->v.str.ptr, len);
    buf[len] = 0;
    return buf;
}

static int inspect_gguf(const char *path, bool json) {
    char err[512];
    gguf_file *g = NULL;
    double t0 = cli_now_ms();
    int rc = modelfile_open(path, &g, err, sizeof err); /* a GGUF, or a Hugging Face folder as one */
    double parse_ms = cli_now_ms() - t0;
    if (rc) {
        fprintf(stderr, "cinfer inspect: %s: %s\n", path, err);
        return 1;
    }
    char arch[256], name[256];
    const char *a = gguf_str_or(g, "general.architecture", arch, sizeof arch);
    const char *nm = gguf_str_or(g, "general.name", name, sizeof name);
    uint32_t ftype = 0;
    bool has_ftype = gguf_get_u32(g, "general.file_type", &ftype, NULL, 0) == 0;
    /* a .giw keeps its source's general.file_type; what it holds is cinfer.precision */
    char prec[64];
    const char *giw_prec = gguf_str_or(g, "cinfer.precision", prec, sizeof prec);
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, gguf_fingerprint(g));

    totals *tot = calloc(1, sizeof *tot);
    if (!tot) {
        gguf_close(g);
        fprintf(stderr, "cinfer inspect: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        totals_add(tot, t->type, t->n_elems, t->n_bytes);
    }

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddStringToObject(o, "format", "gguf");
        cJSON_AddNumberToObject(o, "gguf_version", gguf_version(g));
        cJSON_AddItemToObject(o, "architecture", a ? json_str(a, strlen(a)) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "name", nm ? json_str(nm, strlen(nm)) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "file_type", has_ftype ? cJSON_CreateNumber(ftype) : cJSON_CreateNull());
        cJSON_AddStringToObject(o, "file_type_name", has_ftype ? gguf_file_type_name(ftype) : "unknown"); /* text: the same */
        if (giw_prec) cJSON_AddStringToObject(o, "precision", giw_prec); /* a .giw: the weights it holds */
        cJSON_AddNumberToObject(o, "alignment", gguf_alignment(g));
        cJSON_AddNumberToObject(o, "size", (double)gguf_size(g));
        cJSON_AddNumberToObject(o, "data_offset", (double)gguf_data_offset(g));
        cJSON_AddStringToObject(o, "fingerprint", fp);
        cJSON_AddNumberToObject(o, "parse_ms", parse_ms);
        cJSON_AddNumberToObject(o, "n_kv", (double)gguf_n_kv(g));
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
            const gguf_kv *kv = gguf_kv_at(g, i);
            char *key = utf8_copy(kv->key.ptr, kv->key.len);
            cJSON *e;
            if (kv->value.type == GGUF_VT_ARRAY) {
                e = json_array(&kv->value, 0);
            } else {
                e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "type", gguf_vtype_name(kv->value.type));
                cJSON_AddItemToObject(e, "value", json_scalar(&kv->value, 0));
            }
            cJSON_AddItemToObject(md, key ? key : "", e);
            free(key);
        }
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "name", json_str(t->name, strlen(t->name)));
            cJSON_AddStringToObject(e, "type", ggml_type_name(t->type));
            cJSON *sh = cJSON_AddArrayToObject(e, "shape");
            for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
            cJSON_AddNumberToObject(e, "n_elems", (double)t->n_elems);
            cJSON_AddNumberToObject(e, "bytes", (double)t->n_bytes);
            cJSON_AddNumberToObject(e, "offset", (double)t->offset);
            cJSON_AddItemToArray(ts, e);
        }
        cJSON_AddItemToObject(o, "totals", json_totals(tot, TOTALS_TYPES + 1, ggml_type_name));
        char *s = cJSON_Print(o);
        if (s) puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        FILE *f = stdout;
        char hb[32];
        human_bytes(hb, sizeof hb, gguf_size(g));
        fprintf(f, "file          %s\n", path);
        fprintf(f, "format        GGUF v%u\n", gguf_version(g));
        fprintf(f, "architecture  %s\n", a ? a : "(none)");
        fprintf(f, "name          %s\n", nm ? nm : "(none)");
        if (giw_prec)
            fprintf(f, "file type     cinfer .giw, weights repacked for --quant %s (source file type %s)\n", giw_prec,
                    has_ftype ? gguf_file_type_name(ftype) : "unknown");
        else if (has_ftype) fprintf(f, "file type     %s (%u)\n", gguf_file_type_name(ftype), ftype);
        else fprintf(f, "file type     unknown (no general.file_type)\n");
        fprintf(f, "alignment     %u\n", gguf_alignment(g));
        fprintf(f, "size          %" PRIu64 " bytes (%s)\n", gguf_size(g), hb);
        fprintf(f, "data offset   %" PRIu64 "\n", gguf_data_offset(g));
        fprintf(f, "fingerprint   %s\n", fp);
        fprintf(f, "parse time    %.3f ms\n", parse_ms);
        fprintf(f, "\nmetadata: %" PRIu64 " keys\n", gguf_n_kv(g));
        for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
            const gguf_kv *kv = gguf_kv_at(g, i);
            char ty[48];
            text_type(ty, sizeof ty, &kv->value);
            char kb[256], nb[256];
            uint64_t kl = kv->key.len < sizeof kb - 1 ? kv->key.len : sizeof kb - 1;
            memcpy(kb, kv->key.ptr, kl);
            kb[kl] = 0;
            fprintf(f, "  %-44s %-16s ", clean_name(kb, nb, sizeof nb), ty);
            text_value(f, &kv->value, 0);
            fputc('\n', f);
        }
        fprintf(f, "\ntensors: %" PRIu64 "\n", gguf_n_tensors(g));
        int nw = 32; /* name column: as wide as the longest name, so columns stay aligned */
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) nw = name_width(gguf_tensor_at(g, i)->name, nw);
        if (gguf_n_tensors(g))
            fprintf(f, "  %-5s %-*s %-8s %-22s %12s %12s\n", "#", nw, "name", "type", "shape", "bytes", "offset");
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            char nb[256];
            fprintf(f, "  %-5" PRIu64 " %-*s %-8s ", i, nw, clean_name(t->name, nb, sizeof nb), ggml_type_name(t->type));
            print_shape(f, t->ne, t->n_dims);
            fprintf(f, " %12" PRIu64 " %12" PRIu64 "\n", t->n_bytes, t->offset);
        }
        print_totals(f, tot, TOTALS_TYPES + 1, ggml_type_name);
    }
    free(tot);
    gguf_close(g);
    return 0;
}

/* ==== safetensors =========================================================== */

/* config.json next to the file, if any: {"architectures": [A], "model_type": M}. */
static cJSON *read_config(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char cfg[4096];
    if (dir + sizeof "config.json" > sizeof cfg) return NULL;
    memcpy(cfg, path, dir);
    memcpy(cfg + dir, "config.json", sizeof "config.json");
    FILE *f = fopen(cfg, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static const char *st_type_name(uint32_t t) { return st_dtype_name(t); }

static int inspect_safetensors(const char *path, bool json) {
    char err[512];
    st_file *s = NULL;
    double t0 = cli_now_ms();
    int rc = st_open(path, &s, err, sizeof err);
    double parse_ms = cli_now_ms() - t0;
    if (rc) {
        fprintf(stderr, "cinfer inspect: %s: %s\n", path, err);
        return 1;
    }
    cJSON *cfg = read_config(path);
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? archs->child : NULL;
    const char *arch = cJSON_IsString(a0) ? a0->valuestring : NULL;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    const char *model_type = cJSON_IsString(mt) ? mt->valuestring : NULL;

    totals *tot = calloc(1, sizeof *tot);
    if (!tot) {
        cJSON_Delete(cfg);
        st_close(s);
        fprintf(stderr, "cinfer inspect: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < st_n_tensors(s); i++) {
        const st_tensor *t = st_tensor_at(s, i);
        totals_add(tot, t->dtype, t->n_elems, t->n_bytes);
    }

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddStringToObject(o, "format", "safetensors");
        cJSON_AddItemToObject(o, "architecture", arch ? json_str(arch, strlen(arch)) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "model_type", model_type ? json_str(model_type, strlen(model_type)) : cJSON_CreateNull());
        cJSON_AddNumberToObject(o, "size", (double)st_size(s));
        cJSON_AddNumberToObject(o, "header_bytes", (double)st_header_bytes(s));
        cJSON_AddNumberToObject(o, "data_offset", (double)st_data_offset(s));
        cJSON_AddNumberToObject(o, "parse_ms", parse_ms);
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        for (uint64_t i = 0; i < st_n_meta(s); i++) {
            const st_meta *m = st_meta_at(s, i);
            char *k = utf8_copy(m->key, strlen(m->key)), *v = utf8_copy(m->value, strlen(m->value));
            cJSON_AddStringToObject(md, k ? k : "", v ? v : "");
            free(k);
            free(v);
        }
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (uint64_t i = 0; i < st_n_tensors(s); i++) {
            const st_tensor *t = st_tensor_at(s, i);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "name", json_str(t->name, strlen(t->name)));
            cJSON_AddStringToObject(e, "type", st_dtype_name(t->dtype));
            cJSON *sh = cJSON_AddArrayToObject(e, "shape");
            for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
            cJSON_AddNumberToObject(e, "n_elems", (double)t->n_elems);
            cJSON_AddNumberToObject(e, "bytes", (double)t->n_bytes);
            cJSON_AddNumberToObject(e, "offset", (double)t->offset);
            cJSON_AddItemToArray(ts, e);
        }
        cJSON_AddItemToObject(o, "totals", json_totals(tot, TOTALS_TYPES + 1, st_type_name));
        char *str = cJSON_Print(o);
        if (str) puts(str);
        free(str);
        cJSON_Delete(o);
    } else {
        FILE *f = stdout;
        char hb[32];
        human_bytes(hb, sizeof hb, st_size(s));
        fprintf(f, "file          %s\n", path);
        fprintf(f, "format        safetensors\n");
        fprintf(f, "architecture  %s%s%s%s\n", arch ? arch : "(unknown: no config.json next to the file)",
                model_type ? " (model_type " : "", model_type ? model_type : "", model_type ? ")" : "");
        fprintf(f, "size          %" PRIu64 " bytes (%s)\n", st_size(s), hb);
        fprintf(f, "header        %" PRIu64 " bytes JSON\n", st_header_bytes(s));
        fprintf(f, "data offset   %" PRIu64 "\n", st_data_offset(s));
        fprintf(f, "parse time    %.3f ms\n", parse_ms);
        fprintf(f, "\nmetadata: %" PRIu64 " keys\n", st_n_meta(s));
        for (uint64_t i = 0; i < st_n_meta(s); i++) {
            const st_meta *m = st_meta_at(s, i);
            char nb[256];
            fprintf(f, "  %-44s ", clean_name(m->key, nb, sizeof nb));
            print_str(f, m->value, strlen(m->value), TEXT_STR_MAX);
            fputc('\n', f);
        }
        fprintf(f, "\ntensors: %" PRIu64 " (shapes row-major, outermost first)\n", st_n_tensors(s));
        int nw = 40; /* name column: as wide as the longest name, so columns stay aligned */
        for (uint64_t i = 0; i < st_n_tensors(s); i++) nw = name_width(st_tensor_at(s, i)->name, nw);
        if (st_n_tensors(s))
            fprintf(f, "  %-5s %-*s %-8s %-22s %12s %12s\n", "#", nw, "name", "type", "shape", "bytes", "offset");
        for (uint64_t i = 0; i < st_n_tensors(s); i++) {
            const st_tensor *t = st_tensor_at(s, i);
            char nb[256];
            fprintf(f, "  %-5" PRIu64 " %-*s %-8s ", i, nw, clean_name(t->name, nb, sizeof nb), st_dtype_name(t->dtype));
            print_shape(f, t->shape, t->n_dims);
            fprintf(f, " %12" PRIu64 " %12" PRIu64 "\n", t->n_bytes, t->offset);
        }
        print_totals(f, tot, TOTALS_TYPES + 1, st_type_name);
    }
    free(tot);
    cJSON_Delete(cfg);
    st_close(s);
    return 0;
}

/* ==== command =============================================================== */

int cli_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "cinfer inspect: unknown option '%s' (usage: cinfer inspect MODEL [--json])\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "cinfer inspect: more than one MODEL ('%s', '%s'); inspect takes one\n", path, argv[i]);
            return 2;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char err[1024], cached[4096];
    if (cli_resolve_model("inspect", &path, cached, sizeof cached, CLI_MODEL_ANY)) return 1;
    model_format fmt = modelfile_detect(path, err, sizeof err);
    int rc;
    switch (fmt) {
    case MODEL_FORMAT_GGUF: case MODEL_FORMAT_HF_FOLDER: rc = inspect_gguf(path, json); break;
    case MODEL_FORMAT_SAFETENSORS: rc = inspect_safetensors(path, json); break;
    default:
        fprintf(stderr, "cinfer inspect: %s\n", err);
        rc = 1;
    }
    fflush(stdout);
    return rc;
}
