/*
 * gram_struct.c — typed output: a C struct described by a field table
 * (cinfer_field / cinfer_struct_desc in include/cinfer.h) → its JSON Schema,
 * and generated JSON → the struct (with cJSON).
 *
 * The schema is built so that every value it admits fits the C types: int
 * fields carry INT_MIN..INT_MAX, int64 fields ±(2^53 - 1) (what a double
 * holds exactly), char arrays maxLength size - 1, arrays maxItems = capacity,
 * and objects additionalProperties false.  Parsing still checks everything
 * and names the field (its path) in each error.
 */
#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer.h"

#define MAX_SAFE_INT 9007199254740991.0

static int elem_schema(const cinfer_field *f, cinfer_field_type type, size_t size, cJSON *s, char *err, size_t err_len,
                       const char *path, int depth);

static int struct_schema(const cinfer_struct_desc *d, cJSON *s, char *err, size_t err_len, const char *path,
                         int depth) {
    if (depth > 32) return snprintf(err, err_len, "%s: structs nested more than 32 deep", path), CINFER_EARG;
    if (!d || !d->fields || d->n_fields <= 0)
        return snprintf(err, err_len, "%s: struct description without fields", path), CINFER_EARG;
    cJSON_AddStringToObject(s, "type", "object");
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    for (int i = 0; i < d->n_fields; i++) {
        const cinfer_field *f = &d->fields[i];
        char fp[512];
        snprintf(fp, sizeof fp, "%s.%s", path, f->name ? f->name : "?");
        if (!f->name || !*f->name) return snprintf(err, err_len, "%s: field %d has no name", path, i), CINFER_EARG;
        if (f->offset + (f->type == CINFER_FIELD_ARRAY ? 0 : f->size) > d->size)
            return snprintf(err, err_len, "%s: offset %zu + size %zu past the struct's %zu bytes", fp, f->offset, f->size,
                            d->size),
                   CINFER_EARG;
        cJSON *fs = cJSON_CreateObject();
        if (!fs) return CINFER_ENOMEM;
        cJSON_AddItemToObject(props, f->name, fs);
        if (f->description) cJSON_AddStringToObject(fs, "description", f->description);
        int rc;
        if (f->type == CINFER_FIELD_ARRAY) {
            if (f->max_count <= 0 || f->elem_size == 0 || f->min_count < 0 || f->min_count > f->max_count)
                return snprintf(err, err_len, "%s: array needs max_count > 0, elem_size and 0 <= min_count <= max_count", fp),
                       CINFER_EARG;
            if (f->offset + (size_t)f->max_count * f->elem_size > d->size || f->count_offset + sizeof(int) > d->size)
                return snprintf(err, err_len, "%s: %d elements of %zu bytes (or the count) past the struct", fp,
                                f->max_count, f->elem_size),
                       CINFER_EARG;
            cJSON_AddStringToObject(fs, "type", "array");
            cJSON *items = cJSON_AddObjectToObject(fs, "items");
            if ((rc = elem_schema(f, f->elem_type, f->elem_size, items, err, err_len, fp, depth))) return rc;
            cJSON_AddNumberToObject(fs, "minItems", f->min_count);
            cJSON_AddNumberToObject(fs, "maxItems", f->max_count);
        } else if ((rc = elem_schema(f, f->type, f->size, fs, err, err_len, fp, depth)))
            return rc;
        if (!f->optional) cJSON_AddItemToArray(req, cJSON_CreateString(f->name));
    }
    cJSON_AddFalseToObject(s, "additionalProperties");
    return 0;
}

static int elem_schema(const cinfer_field *f, cinfer_field_type type, size_t size, cJSON *s, char *err, size_t err_len,
                       const char *path, int depth) {
    double lo, hi;
    switch (type) {
    case CINFER_FIELD_BOOL:
        cJSON_AddStringToObject(s, "type", "boolean");
        return 0;
    case CINFER_FIELD_INT:
    case CINFER_FIELD_INT64:
        lo = type == CINFER_FIELD_INT ? INT_MIN : -MAX_SAFE_INT;
        hi = type == CINFER_FIELD_INT ? INT_MAX : MAX_SAFE_INT;
        if (f->has_min && f->min > lo) lo = ceil(f->min);
        if (f->has_max && f->max < hi) hi = floor(f->max);
        if (lo > hi) return snprintf(err, err_len, "%s: minimum above maximum", path), CINFER_EARG;
        cJSON_AddStringToObject(s, "type", "integer");
        cJSON_AddNumberToObject(s, "minimum", lo);
        cJSON_AddNumberToObject(s, "maximum", hi);
        return 0;
    case CINFER_FIELD_DOUBLE:
        cJSON_AddStringToObject(s, "type", "number");
        if (f->has_min) cJSON_AddNumberToObject(s, "minimum", f->min);
        if (f->has_max) cJSON_AddNumberToObject(s, "maximum", f->max);
        return 0;
    case CINFER_FIELD_STRING:
        if (size < 1) return snprintf(err, err_len, "%s: a char array needs size >= 1", path), CINFER_EARG;
        cJSON_AddStringToObject(s, "type", "string");
        cJSON_AddNumberToObject(s, "maxLength", (double)(size - 1));
        if (f->pattern) cJSON_AddStringToObject(s, "pattern", f->pattern);
        return 0;
    case CINFER_FIELD_ENUM: {
        if (!f->enum_values || f->n_enum_values <= 0)
            return snprintf(err, err_len, "%s: enum without values", path), CINFER_EARG;
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        for (int i = 0; i < f->n_enum_values; i++) cJSON_AddItemToArray(e, cJSON_CreateString(f->enum_values[i]));
        return 0;
    }
    case CINFER_FIELD_STRUCT:
        if (!f->nested) return snprintf(err, err_len, "%s: struct field without a description", path), CINFER_EARG;
        if (size && size < f->nested->size)
            return snprintf(err, err_len, "%s: %zu bytes for a struct of %zu", path, size, f->nested->size), CINFER_EARG;
        return struct_schema(f->nested, s, err, err_len, path, depth + 1);
    default:
        return snprintf(err, err_len, "%s: unknown field type %d", path, (int)type), CINFER_EARG;
    }
}

int cinfer_struct_schema(const cinfer_struct_desc *d, char **schema, char *err, size_t err_len) {
    char e[512];
    if (!err) err = e, err_len = sizeof e;
    *schema = NULL;
    cJSON *s = cJSON_CreateObject();
    if (!s) return CINFER_ENOMEM;
    cJSON_AddStringToObject(s, "$schema", "https://json-schema.org/draft/2020-12/schema");
    if (d && d->name) cJSON_AddStringToObject(s, "title", d->name);
    int rc = struct_schema(d, s, err, err_len, d && d->name ? d->name : "struct", 0);
    if (!rc) {
        *schema = cJSON_PrintUnformatted(s);
        if (!*schema) rc = CINFER_ENOMEM;
    }
    cJSON_Delete(s);
    return rc;
}

/* ---- parse ------------------------------------------------------------------------------------ */

static int parse_struct(const cinfer_struct_desc *d, const cJSON *o, char *base, char *err, size_t err_len,
                        const char *path, int depth);

static int parse_elem(const cinfer_field *f, cinfer_field_type type, size_t size, const cJSON *v, char *dst, char *err,
                      size_t err_len, const char *path, int depth) {
    switch (type) {
    case CINFER_FIELD_BOOL:
        if (!cJSON_IsBool(v)) return snprintf(err, err_len, "%s: boolean expected", path), CINFER_EFORMAT;
        *(bool *)dst = cJSON_IsTrue(v);
        return 0;
    case CINFER_FIELD_INT:
    case CINFER_FIELD_INT64: {
        double x = v ? v->valuedouble : 0;
        double lo = type == CINFER_FIELD_INT ? INT_MIN : -MAX_SAFE_INT, hi = type == CINFER_FIELD_INT ? INT_MAX : MAX_SAFE_INT;
        if (!cJSON_IsNumber(v) || x != floor(x) || x < lo || x > hi)
            return snprintf(err, err_len, "%s: integer in [%.0f, %.0f] expected", path, lo, hi), CINFER_EFORMAT;
        if (type == CINFER_FIELD_INT) *(int *)dst = (int)x;
        else *(int64_t *)dst = (int64_t)x;
        return 0;
    }
    case CINFER_FIELD_DOUBLE:
        if (!cJSON_IsNumber(v)) return snprintf(err, err_len, "%s: number expected", path), CINFER_EFORMAT;
        *(double *)dst = v->valuedouble;
        return 0;
    case CINFER_FIELD_STRING: {
        if (!cJSON_IsString(v)) return snprintf(err, err_len, "%s: string expected", path), CINFER_EFORMAT;
        size_t n = strlen(v->valuestring);
        if (n + 1 > size)
            return snprintf(err, err_len, "%s: string of %zu bytes does not fit char[%zu]", path, n, size), CINFER_EFORMAT;
        memcpy(dst, v->valuestring, n + 1);
        return 0;
    }
    case CINFER_FIELD_ENUM:
        if (cJSON_IsString(v))
            for (int i = 0; i < f->n_enum_values; i++)
                if (!strcmp(f->enum_values[i], v->valuestring)) {
                    *(int *)dst = i;
                    return 0;
                }
        return snprintf(err, err_len, "%s: one of the enum values expected", path), CINFER_EFORMAT;
    case CINFER_FIELD_STRUCT:
        if (!cJSON_IsObject(v)) return snprintf(err, err_len, "%s: object expected", path), CINFER_EFORMAT;
        return parse_struct(f->nested, v, dst, err, err_len, path, depth + 1);
    default:
        return snprintf(err, err_len, "%s: unknown field type", path), CINFER_EARG;
    }
}

static int parse_struct(const cinfer_struct_desc *d, const cJSON *o, char *base, char *err, size_t err_len,
                        const char *path, int depth) {
    if (depth > 32) return snprintf(err, err_len, "%s: nested too deeply", path), CINFER_EFORMAT;
    for (const cJSON *k = o->child; k; k = k->next) {
        int known = 0;
        for (int i = 0; i < d->n_fields && !known; i++) known = !strcmp(d->fields[i].name, k->string);
        if (!known) return snprintf(err, err_len, "%s: unexpected property \"%s\"", path, k->string), CINFER_EFORMAT;
    }
    for (int i = 0; i < d->n_fields; i++) {
        const cinfer_field *f = &d->fields[i];
        char fp[512];
        snprintf(fp, sizeof fp, "%s.%s", path, f->name);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->name);
        if (!v) {
            if (f->optional) continue;
            return snprintf(err, err_len, "%s: missing", fp), CINFER_EFORMAT;
        }
        int rc;
        if (f->type == CINFER_FIELD_ARRAY) {
            if (!cJSON_IsArray(v)) return snprintf(err, err_len, "%s: array expected", fp), CINFER_EFORMAT;
            int n = cJSON_GetArraySize(v);
            if (n > f->max_count || n < f->min_count)
                return snprintf(err, err_len, "%s: %d elements, %d..%d allowed", fp, n, f->min_count, f->max_count),
                       CINFER_EFORMAT;
            int idx = 0;
            for (const cJSON *e = v->child; e; e = e->next, idx++) {
                char ep[600];
                snprintf(ep, sizeof ep, "%s[%d]", fp, idx);
                if ((rc = parse_elem(f, f->elem_type, f->elem_size, e, base + f->offset + (size_t)idx * f->elem_size, err,
                                     err_len, ep, depth)))
                    return rc;
            }
            *(int *)(base + f->count_offset) = n;
        } else if ((rc = parse_elem(f, f->type, f->size, v, base + f->offset, err, err_len, fp, depth)))
            return rc;
    }
    return 0;
}

int cinfer_struct_parse(const cinfer_struct_desc *d, const char *json, size_t len, void *out, char *err,
                        size_t err_len) {
    char e[512];
    if (!err) err = e, err_len = sizeof e;
    if (!d || !out || !json) return snprintf(err, err_len, "NULL argument"), CINFER_EARG;
    memset(out, 0, d->size);
    cJSON *v = cJSON_ParseWithLength(json, len);
    const char *name = d->name ? d->name : "struct";
    if (!v) return snprintf(err, err_len, "%s: not valid JSON", name), CINFER_EFORMAT;
    int rc = cJSON_IsObject(v) ? parse_struct(d, v, out, err, err_len, name, 0)
                               : (snprintf(err, err_len, "%s: object expected", name), CINFER_EFORMAT);
    cJSON_Delete(v);
    return rc;
}
