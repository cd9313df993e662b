/*
 * gram_json.c — canonical JSON text, the strict schema parser and the
 * canonical printer (gram_json.h).
 *
 * The canonicaliser is a recursive-descent pass over the text that writes
 * what it reads in the one spelling the grammars use; its recursion is
 * bounded by GRAM_JSON_DEPTH.  The parser is cJSON (well kept, and what the
 * rest of cinfer uses) wrapped with the checks a schema needs: cJSON accepts
 * trailing bytes, keeps duplicate keys (and finds the first, where Python's
 * json keeps the last), and stores numbers as doubles.
 */
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_fa.h"
#include "gram_json.h"

/* ---- output buffer ------------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} obuf;

static void oput(obuf *o, const char *b, size_t n) {
    if (o->oom) return;
    if (o->n + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 256;
        while (nc < o->n + n + 1) nc *= 2;
        char *np = realloc(o->p, nc);
        if (!np) {
            o->oom = 1;
            return;
        }
        o->p = np;
        o->cap = nc;
    }
    memcpy(o->p + o->n, b, n);
    o->n += n;
    o->p[o->n] = 0;
}

/* One code point as canonical string content. */
static void put_cp(obuf *o, uint32_t cp) {
    char b[8];
    int n;
    switch (cp) {
    case '"': oput(o, "\\\"", 2); return;
    case '\\': oput(o, "\\\\", 2); return;
    case 8: oput(o, "\\b", 2); return;
    case 12: oput(o, "\\f", 2); return;
    case 10: oput(o, "\\n", 2); return;
    case 13: oput(o, "\\r", 2); return;
    case 9: oput(o, "\\t", 2); return;
    }
    if (cp < 0x20) {
        n = snprintf(b, sizeof b, "\\u%04x", (unsigned)cp);
        oput(o, b, (size_t)n);
        return;
    }
    if (cp < 0x80) b[0] = (char)cp, n = 1;
    else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F)), b[2] = (char)(0x80 | (cp >> 6 & 0x3F)),
        b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    oput(o, b, (size_t)n);
}

/* Decode one UTF-8 sequence at s[0..len): its length (1-4), or 0 when it is
 * not valid UTF-8 (overlong forms, surrogates and values above U+10FFFF
 * included). */
static int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char ch = s[0];
    int n = ch < 0x80 ? 1 : (ch >> 5) == 6 ? 2 : (ch >> 4) == 14 ? 3 : (ch >> 3) == 30 ? 4 : 0;
    if (!n || (size_t)n > len) return 0;
    uint32_t v = n == 1 ? ch : ch & (0x3F >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if ((n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* Canonical string literal of raw UTF-8 into o; -1 when s is not UTF-8. */
static int put_string(obuf *o, const char *s, size_t len) {
    oput(o, "\"", 1);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int n = utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (!n) return -1;
        if (n == 1) put_cp(o, cp);
        else oput(o, s + i, (size_t)n);
        i += (size_t)n;
    }
    oput(o, "\"", 1);
    return 0;
}

char *gram_json_string(const char *s, size_t len, size_t *out_len) {
    obuf o = {0};
    if (put_string(&o, s, len) || o.oom) {
        free(o.p);
        return NULL;
    }
    if (out_len) *out_len = o.n;
    return o.p;
}

/* ---- canonical JSON ------------------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t len, pos;
    obuf o;
    char *err;
    size_t err_len;
    int failed;
} canon_st;

static void cfail(canon_st *c, const char *what) {
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->err, c->err_len, "invalid JSON at byte %zu: %s", c->pos, what);
}

static void cput(canon_st *c, const char *b, size_t n) {
    if (c->failed) return;
    oput(&c->o, b, n);
    if (c->o.oom) cfail(c, "out of memory");
}

static void cws(canon_st *c) {
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static void cstring(canon_st *c) {
    c->pos++; /* opening quote */
    cput(c, "\"", 1);
    while (!c->failed) {
        if (c->pos >= c->len) return cfail(c, "unterminated string");
        uint8_t ch = (uint8_t)c->s[c->pos];
        if (ch == '"') {
            c->pos++;
            cput(c, "\"", 1);
            return;
        }
        if (ch < 0x20) return cfail(c, "control character in string");
        if (ch == '\\') {
            if (c->pos + 1 >= c->len) return cfail(c, "unterminated escape");
            char e = c->s[c->pos + 1];
            c->pos += 2;
            uint32_t cp;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = 8; break;
            case 'f': cp = 12; break;
            case 'n': cp = 10; break;
            case 'r': cp = 13; break;
            case 't': cp = 9; break;
            case 'u': {
                if (c->pos + 4 > c->len) return cfail(c, "short \\u escape");
                int v = hex4(c->s + c->pos);
                if (v < 0) return cfail(c, "bad \\u escape");
                c->pos += 4;
                if (v >= 0xD800 && v <= 0xDBFF) {
                    int lo = c->pos + 6 <= c->len && c->s[c->pos] == '\\' && c->s[c->pos + 1] == 'u' ? hex4(c->s + c->pos + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return cfail(c, "lone surrogate (not representable in UTF-8)");
                    c->pos += 6;
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                } else if (v >= 0xDC00 && v <= 0xDFFF) return cfail(c, "lone surrogate (not representable in UTF-8)");
                cp = (uint32_t)v;
                break;
            }
            default: return cfail(c, "unknown escape");
            }
            put_cp(&c->o, cp);
            if (c->o.oom) cfail(c, "out of memory");
            continue;
        }
        uint32_t cp;
        int n = utf8_decode((const unsigned char *)c->s + c->pos, c->len - c->pos, &cp);
        if (!n) return cfail(c, "invalid UTF-8");
        cput(c, c->s + c->pos, (size_t)n);
        c->pos += (size_t)n;
    }
}

static void cvalue(canon_st *c, int depth) {
    if (depth >= GRAM_JSON_DEPTH) return cfail(c, "nesting deeper than 512");
    cws(c);
    if (c->pos >= c->len) return cfail(c, "value expected");
    char ch = c->s[c->pos];
    if (ch == '{' || ch == '[') {
        int obj = ch == '{';
        char close = obj ? '}' : ']';
        c->pos++;
        cput(c, obj ? "{" : "[", 1);
        cws(c);
        if (c->pos < c->len && c->s[c->pos] == close) {
            c->pos++;
            cput(c, obj ? "}" : "]", 1);
            return;
        }
        for (int first = 1; !c->failed; first = 0) {
            if (!first) cput(c, ",", 1);
            if (obj) {
                cws(c);
                if (c->pos >= c->len || c->s[c->pos] != '"') return cfail(c, "object key expected");
                cstring(c);
                cws(c);
                if (c->pos >= c->len || c->s[c->pos] != ':') return cfail(c, "':' expected");
                c->pos++;
                cput(c, ":", 1);
            }
            cvalue(c, depth + 1);
            cws(c);
            if (c->pos < c->len && c->s[c->pos] == ',') {
                c->pos++;
                continue;
            }
            if (c->pos < c->len && c->s[c->pos] == close) {
                c->pos++;
                cput(c, obj ? "}" : "]", 1);
                return;
            }
            return cfail(c, obj ? "',' or '}' expected" : "',' or ']' expected");
        }
        return;
    }
    if (ch == '"') return cstring(c);
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(lits[i]);
        if (c->len - c->pos >= l && !memcmp(c->s + c->pos, lits[i], l)) {
            c->pos += l;
            cput(c, lits[i], l);
            return;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        size_t st = c->pos;
        while (c->pos < c->len && strchr("+-.eE0123456789", c->s[c->pos])) c->pos++;
        char *buf = malloc(GRAM_JSON_NUMBER_MAX + 1);
        long n = buf ? gram_canon_number(c->s + st, c->pos - st, buf, GRAM_JSON_NUMBER_MAX + 1) : -3;
        if (n < 0) {
            c->pos = st;
            cfail(c, n == -1 ? "malformed number" : n == -2 ? "number longer than 4096 digits" : "out of memory");
        } else cput(c, buf, (size_t)n);
        free(buf);
        return;
    }
    cfail(c, "unexpected character");
}

int gram_canon(const char *json, size_t len, char **out, size_t *out_len, char *err, size_t err_len) {
    canon_st c = {.s = json, .len = len, .err = err, .err_len = err_len};
    *out = NULL;
    cvalue(&c, 0);
    cws(&c);
    if (!c.failed && c.pos != c.len) cfail(&c, "trailing characters");
    if (!c.failed) cput(&c, "", 0);
    if (c.failed) {
        free(c.o.p);
        return -1;
    }
    *out = c.o.p;
    *out_len = c.o.n;
    return 0;
}

/* ---- the strict parser -------------------------------------------------------------------- */

/* Each number node, in document order, gets the canonical text of the next
 * number literal outside strings (cJSON keeps children in text order). */
static int attach_numbers(cJSON *v, const char **tok, const char *end, char *buf, int depth) {
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v)) {
            const char *p = *tok;
            while (p < end) {
                if (*p == '"') {
                    for (p++; p < end && *p != '"'; p++)
                        if (*p == '\\') p++;
                    p++;
                    continue;
                }
                if (*p == '-' || (*p >= '0' && *p <= '9')) break;
                p++;
            }
            const char *q = p;
            while (q < end && strchr("+-.eE0123456789", *q)) q++;
            long n = gram_canon_number(p, (size_t)(q - p), buf, GRAM_JSON_NUMBER_MAX + 1);
            *tok = q;
            if (n < 0) return n == -2 ? -2 : -1;
            v->valuestring = strdup(buf);
            if (!v->valuestring) return -3;
        }
        if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && depth < GRAM_JSON_DEPTH) {
            int rc = attach_numbers(v->child, tok, end, buf, depth + 1);
            if (rc) return rc;
        }
    }
    return 0;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* JSON Pointer of child k of the value at path, appended. */
static void ptr_child(char *path, size_t cap, const char *k) {
    size_t n = strlen(path);
    if (n + 2 < cap) path[n++] = '/';
    for (; *k && n + 3 < cap; k++) {
        if (*k == '~' || *k == '/') path[n++] = '~', path[n++] = *k == '~' ? '0' : '1';
        else path[n++] = *k;
    }
    path[n] = 0;
}

/* The first repeated key (depth first), its object's pointer in path. */
static const char *dup_key(const cJSON *v, char *path, size_t cap, int depth) {
    if (depth >= GRAM_JSON_DEPTH || !(cJSON_IsArray(v) || cJSON_IsObject(v))) return NULL;
    if (cJSON_IsObject(v)) {
        int n = 0;
        for (const cJSON *k = v->child; k; k = k->next) n++;
        if (n > 1) {
            const cJSON *small[16], **keys = n <= 16 ? small : malloc((size_t)n * sizeof *keys);
            if (!keys) return "";
            int i = 0;
            for (const cJSON *k = v->child; k; k = k->next) keys[i++] = k;
            qsort(keys, (size_t)n, sizeof *keys, cmp_key);
            const char *dup = NULL;
            for (i = 1; i < n && !dup; i++)
                if (!strcmp(keys[i]->string, keys[i - 1]->string)) dup = keys[i]->string;
            if (keys != small) free(keys);
            if (dup) return dup;
        }
    }
    size_t at = strlen(path);
    int i = 0;
    for (const cJSON *k = v->child; k; k = k->next, i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%d", i);
        ptr_child(path, cap, cJSON_IsObject(v) ? k->string : idx);
        const char *d = dup_key(k, path, cap, depth + 1);
        if (d) return d;
        path[at] = 0;
    }
    return NULL;
}

cJSON *gram_json_parse(const char *text, size_t len, char *err, size_t err_len) {
    char e0[8];
    if (!err) err = e0, err_len = sizeof e0;
    /* nesting first: cJSON's own limit only says "not valid JSON" */
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
        } else if (ch == '"') in_str = 1;
        else if (ch == '{' || ch == '[') {
            if (++depth > GRAM_JSON_DEPTH) {
                snprintf(err, err_len, "nested deeper than %d levels at byte %zu", GRAM_JSON_DEPTH, i);
                return NULL;
            }
        } else if (ch == '}' || ch == ']') depth--;
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!doc) {
        snprintf(err, err_len, "not valid JSON near byte %ld", end ? (long)(end - text) : 0L);
        return NULL;
    }
    size_t pos = end ? (size_t)(end - text) : len;
    while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r')) pos++;
    if (pos < len) {
        snprintf(err, err_len, "bytes after the JSON value at byte %zu", pos);
        cJSON_Delete(doc);
        return NULL;
    }
    char *buf = malloc(GRAM_JSON_NUMBER_MAX + 1);
    const char *tok = text;
    int rc = buf ? attach_numbers(doc, &tok, text + len, buf, 0) : -3;
    free(buf);
    if (rc) {
        snprintf(err, err_len, rc == -2 ? "a number longer than %d digits" : rc == -3 ? "out of memory" : "malformed number",
                 GRAM_JSON_NUMBER_MAX);
        cJSON_Delete(doc);
        return NULL;
    }
    char path[512] = "";
    const char *dup = dup_key(doc, path, sizeof path, 0);
    if (dup) {
        if (*dup) snprintf(err, err_len, "duplicate key \"%.60s\" in the object at %s", dup, *path ? path : "/");
        else snprintf(err, err_len, "out of memory");
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* ---- the canonical printer ---------------------------------------------------------------- */

static int cmp_member(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static int print_value(const cJSON *v, obuf *o, int depth, int sorted) {
    if (depth >= GRAM_JSON_DEPTH) return -1;
    if (cJSON_IsNull(v)) oput(o, "null", 4);
    else if (cJSON_IsTrue(v)) oput(o, "true", 4);
    else if (cJSON_IsFalse(v)) oput(o, "false", 5);
    else if (cJSON_IsNumber(v) && v->valuestring) oput(o, v->valuestring, strlen(v->valuestring));
    else if (cJSON_IsNumber(v)) {
        char t[400];
        long l = gram_canon_double(v->valuedouble, t, sizeof t);
        if (l < 0) return -1;
        oput(o, t, (size_t)l);
    } else if (cJSON_IsString(v)) {
        if (put_string(o, v->valuestring, strlen(v->valuestring))) return -1;
    } else if (cJSON_IsObject(v) && sorted) {
        int n = 0;
        for (const cJSON *k = v->child; k; k = k->next) n++;
        const cJSON **m = malloc(((size_t)n + 1) * sizeof *m);
        if (!m) return -1;
        n = 0;
        for (const cJSON *k = v->child; k; k = k->next) m[n++] = k;
        qsort(m, (size_t)n, sizeof *m, cmp_member);
        oput(o, "{", 1);
        for (int i = 0; i < n; i++) {
            if (i) oput(o, ",", 1);
            if (put_string(o, m[i]->string, strlen(m[i]->string)) || (oput(o, ":", 1), print_value(m[i], o, depth + 1, 1))) {
                free(m);
                return -1;
            }
        }
        free(m);
        oput(o, "}", 1);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int obj = cJSON_IsObject(v);
        oput(o, obj ? "{" : "[", 1);
        for (const cJSON *k = v->child; k; k = k->next) {
            if (k != v->child) oput(o, ",", 1);
            if (obj) {
                if (put_string(o, k->string, strlen(k->string))) return -1;
                oput(o, ":", 1);
            }
            if (print_value(k, o, depth + 1, sorted)) return -1;
        }
        oput(o, obj ? "}" : "]", 1);
    } else return -1;
    return o->oom ? -1 : 0;
}

char *gram_json_print(const cJSON *v) {
    obuf o = {0};
    if (print_value(v, &o, 0, 0) || o.oom || !o.p) {
        free(o.p);
        return NULL;
    }
    return o.p;
}

char *gram_json_value_key(const cJSON *v) {
    obuf o = {0};
    if (print_value(v, &o, 0, 1) || o.oom || !o.p) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
