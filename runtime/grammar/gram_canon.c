/*
 * gram_canon.c — canonical JSON (gram.h gram_canon): any JSON text rewritten
 * into the one byte form the grammars describe (gram_fa.h), so that
 * "the grammar accepts this instance" is a byte-level question.  Used by the
 * schema compiler (const/enum values), the checker and the library API; it
 * depends only on gram_fa's number canonicalisation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram.h"

/* ---- canonical JSON ------------------------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t len, pos;
    char *out;
    size_t n, cap;
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
    if (c->n + n + 1 > c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256;
        while (nc < c->n + n + 1) nc *= 2;
        char *no = realloc(c->out, nc);
        if (!no) {
            cfail(c, "out of memory");
            return;
        }
        c->out = no;
        c->cap = nc;
    }
    memcpy(c->out + c->n, b, n);
    c->n += n;
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

static void put_cp(canon_st *c, uint32_t cp) {
    char b[8];
    int n;
    switch (cp) {
    case '"': cput(c, "\\\"", 2); return;
    case '\\': cput(c, "\\\\", 2); return;
    case 8: cput(c, "\\b", 2); return;
    case 12: cput(c, "\\f", 2); return;
    case 10: cput(c, "\\n", 2); return;
    case 13: cput(c, "\\r", 2); return;
    case 9: cput(c, "\\t", 2); return;
    }
    if (cp < 0x20) {
        n = snprintf(b, sizeof b, "\\u%04x", (unsigned)cp);
        cput(c, b, (size_t)n);
        return;
    }
    if (cp < 0x80) b[0] = (char)cp, n = 1;
    else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F)), b[2] = (char)(0x80 | (cp >> 6 & 0x3F)),
        b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    cput(c, b, (size_t)n);
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
            put_cp(c, cp);
            continue;
        }
        /* raw UTF-8: validate */
        int n = ch < 0x80 ? 1 : (ch >> 5) == 6 ? 2 : (ch >> 4) == 14 ? 3 : (ch >> 3) == 30 ? 4 : 0;
        if (!n || c->pos + (size_t)n > c->len) return cfail(c, "invalid UTF-8");
        uint32_t cp = n == 1 ? ch : ch & (0x3F >> (n - 1));
        for (int i = 1; i < n; i++) {
            uint8_t cc = (uint8_t)c->s[c->pos + (size_t)i];
            if ((cc & 0xC0) != 0x80) return cfail(c, "invalid UTF-8");
            cp = cp << 6 | (cc & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return cfail(c, "invalid UTF-8");
        cput(c, c->s + c->pos, (size_t)n);
        c->pos += (size_t)n;
    }
}

static void cvalue(canon_st *c, int depth) {
    if (depth > 512) return cfail(c, "nesting deeper than 512");
    cws(c);
    if (c->pos >= c->len) return cfail(c, "value expected");
    char ch = c->s[c->pos];
    if (ch == '{') {
        c->pos++;
        cput(c, "{", 1);
        cws(c);
        if (c->pos < c->len && c->s[c->pos] == '}') {
            c->pos++;
            cput(c, "}", 1);
            return;
        }
        for (int first = 1; !c->failed; first = 0) {
            if (!first) cput(c, ",", 1);
            cws(c);
            if (c->pos >= c->len || c->s[c->pos] != '"') return cfail(c, "object key expected");
            cstring(c);
            cws(c);
            if (c->pos >= c->len || c->s[c->pos] != ':') return cfail(c, "':' expected");
            c->pos++;
            cput(c, ":", 1);
            cvalue(c, depth + 1);
            cws(c);
            if (c->pos < c->len && c->s[c->pos] == ',') {
                c->pos++;
                continue;
            }
            if (c->pos < c->len && c->s[c->pos] == '}') {
                c->pos++;
                cput(c, "}", 1);
                return;
            }
            return cfail(c, "',' or '}' expected");
        }
        return;
    }
    if (ch == '[') {
        c->pos++;
        cput(c, "[", 1);
        cws(c);
        if (c->pos < c->len && c->s[c->pos] == ']') {
            c->pos++;
            cput(c, "]", 1);
            return;
        }
        for (int first = 1; !c->failed; first = 0) {
            if (!first) cput(c, ",", 1);
            cvalue(c, depth + 1);
            cws(c);
            if (c->pos < c->len && c->s[c->pos] == ',') {
                c->pos++;
                continue;
            }
            if (c->pos < c->len && c->s[c->pos] == ']') {
                c->pos++;
                cput(c, "]", 1);
                return;
            }
            return cfail(c, "',' or ']' expected");
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
        char small[256];
        char *buf = small;
        size_t cap = sizeof small;
        long n;
        for (;;) {
            n = gram_canon_number(c->s + st, c->pos - st, buf, cap);
            if (n != -2 || cap > (1u << 20)) break;
            cap *= 16;
            char *nb = buf == small ? malloc(cap) : realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        if (n < 0) {
            c->pos = st;
            cfail(c, n == -1 ? "malformed number" : "number too large to write out");
        } else cput(c, buf, (size_t)n);
        if (buf != small) free(buf);
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
        free(c.out);
        return -1;
    }
    c.out[c.n] = 0;
    *out = c.out;
    *out_len = c.n;
    return 0;
}
