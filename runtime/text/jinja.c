/*
 * jinja.c — a Jinja2 interpreter for chat templates (see jinja.h for what it
 * covers and the reference it reproduces).
 *
 * Shape: lexer (a transcription of jinja2/lexer.py tokeniter: its whitespace
 * control, trim_blocks/lstrip_blocks and bracket balancing) → recursive-descent
 * parser (jinja2/parser.py function by function) → AST in one arena owned by
 * the template, annotated with what jinja2's compiler decides statically
 * (scope analysis as in idtracking.py, constant folding as in optimizer.py)
 * → tree-walking interpreter over Python-semantics values.
 *
 * Memory: a render allocates every value, scope and temporary string from one
 * arena (bounded by jinja_limits.max_mem_bytes) and frees it in one go at the
 * end; values are never individually freed, so there is no refcounting.  The
 * sandbox makes values immutable (list.append, dict.update are refused by
 * jinja2's ImmutableSandboxedEnvironment), except namespace attributes and
 * list.pop/clear, which mutate in place as in Python.
 *
 * Errors: parse and render errors unwind with longjmp to the public entry
 * point, as Lua's luaD_throw does.  Nothing is allocated outside the arena
 * (and the one output buffer the entry point owns), so an unwind leaks
 * nothing.  Every recursion (expression nesting, macro calls, printing and
 * comparing nested values) goes through a depth counter, and every statement,
 * expression and loop iteration through a step counter.
 */
#include "jinja.h"

#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================== */
/* errors and the arena                                                         */
/* ========================================================================== */

typedef struct jerr {
    jmp_buf jb;
    int code;
    char msg[512];
} jerr;

static _Noreturn void jthrow(jerr *E, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void jthrow(jerr *E, int code, int line, const char *fmt, ...) {
    int n = snprintf(E->msg, sizeof E->msg, "jinja: line %d: ", line);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof E->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(E->msg + n, sizeof E->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    for (char *p = E->msg; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r') *p = ' ';
    E->code = code;
    longjmp(E->jb, 1);
}

typedef struct arena_blk {
    struct arena_blk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} arena_blk;

typedef struct arena {
    arena_blk *head;
    size_t total, limit;
    jerr *E;
    int *line; /* for the limit error message */
} arena;

static void arena_free(arena *A) {
    arena_blk *b = A->head;
    while (b) {
        arena_blk *nx = b->next;
        free(b);
        b = nx;
    }
    A->head = NULL;
    A->total = 0;
}

static void *amalloc(arena *A, size_t n) {
    if (n > A->limit)
        jthrow(A->E, JINJA_ERR_LIMIT, A->line ? *A->line : 0, "memory limit of %zu bytes exceeded", A->limit);
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    arena_blk *b = A->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (A->total + cap > A->limit)
            jthrow(A->E, JINJA_ERR_LIMIT, A->line ? *A->line : 0, "memory limit of %zu bytes exceeded", A->limit);
        b = malloc(sizeof *b + cap);
        if (!b) jthrow(A->E, JINJA_ERR_NOMEM, A->line ? *A->line : 0, "out of memory");
        b->cap = cap;
        b->used = 0;
        A->total += cap;
        /* a big one-off block goes behind the current one, which keeps its free space */
        if (A->head && cap == n && A->head->cap - A->head->used > 4096) {
            b->next = A->head->next;
            A->head->next = b;
            b->used = n;
            return b->data;
        }
        b->next = A->head;
        A->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static char *astrndup(arena *A, const char *s, size_t n) {
    char *p = amalloc(A, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* A string builder in the arena (growth copies; the old space is garbage
 * until the render ends — at most twice the final size). */
typedef struct sb {
    char *p;
    size_t n, cap;
    arena *A;
} sb;

static void sb_init(sb *b, arena *A) {
    b->p = NULL;
    b->n = b->cap = 0;
    b->A = A;
}

static void sb_grow(sb *b, size_t extra) {
    if (b->cap - b->n >= extra) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap - b->n < extra) cap *= 2;
    char *p = amalloc(b->A, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}
static void sb_put(sb *b, const char *s, size_t n) {
    if (!n) return;
    sb_grow(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_putc(sb *b, char c) { sb_put(b, &c, 1); }
static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    sb_grow(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* ========================================================================== */
/* UTF-8 and Python's character classes                                        */
/* ========================================================================== */

/* Decode one code point; an invalid byte decodes as itself (length 1), so
 * every byte string round-trips. */
static uint32_t u8dec(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[0];
    *len = 1;
    if (c < 0x80) return c;
    if (n < 2) return 0xDC00 | c;
    int k;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07, min = 0x10000;
    else return 0xDC00 | c;
    if ((size_t)k >= n) return 0xDC00 | c;
    for (int i = 1; i <= k; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0xDC00 | c;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xDC00 | c;
    *len = (size_t)k + 1;
    return cp;
}

static size_t u8enc(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* str.isspace() */
static bool py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic. */
static uint32_t cp_lower(uint32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c >= 0x100 && c <= 0x137) return c | 1;
    if (c == 0x130) return 'i';
    if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
    if (c >= 0x14A && c <= 0x177) return c | 1;
    if (c == 0x178) return 0xFF;
    if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static uint32_t cp_upper(uint32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if (c >= 0x100 && c <= 0x137 && c != 0x131) return c & ~1u;
    if (c == 0x131) return 'I';
    if (c >= 0x139 && c <= 0x148) return (c & 1) ? c : c - 1;
    if (c >= 0x14A && c <= 0x177) return c & ~1u;
    if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c : c - 1;
    if (c == 0x17F) return 'S';
    if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static bool cp_islower(uint32_t c) { return cp_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149; }
static bool cp_isupper(uint32_t c) { return cp_lower(c) != c; }
static bool cp_iscased(uint32_t c) { return cp_islower(c) || cp_isupper(c); }
/* str.isalnum / \w for the characters this file knows; other non-ASCII code
 * points count as letters (\w is true for almost all of them). */
static bool cp_isalpha(uint32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
    if (c == 0xD7 || c == 0xF7) return false;
    return !py_isspace(c) && !(c >= 0x2000 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F);
}
static bool cp_isdigit(uint32_t c) { return c >= '0' && c <= '9'; }

/* Python's repr() prints these as escapes (str.isprintable() is false). */
static bool cp_unprintable(uint32_t c) {
    return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
           (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 ||
           (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF0 && c <= 0xFFFB) || c == 0xFFFE ||
           c == 0xFFFF || c >= 0xF0000;
}

/* ========================================================================== */
/* values                                                                       */
/* ========================================================================== */

typedef enum {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_MACRO, V_FUNC, V_METHOD, V_LOOP,
} vkind;

/* What a V_LIST is in Python terms: it decides repr, len, indexing and
 * whether a second iteration sees anything. */
enum { LK_LIST, LK_TUPLE, LK_RANGE, LK_KEYS, LK_VALUES, LK_ITEMS, LK_GEN };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jmacro jmacro;
typedef struct jmethod jmethod;
typedef struct jloop jloop;

typedef struct jv {
    uint8_t k;
    uint8_t safe;   /* V_STR: markupsafe.Markup (the `safe`/`escape` filters) */
    uint8_t unsafe; /* V_UNDEF: an attribute the sandbox refuses */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s; /* V_STR text; V_UNDEF: the hint (what is undefined), may be NULL */
        jlist *l;
        jdict *d; /* V_DICT, V_NS */
        jmacro *m;
        int fn;
        jmethod *me;
        jloop *lp;
    } u;
} jv;

struct jlist {
    jv *a;
    size_t n, cap;
    uint8_t kind;
    size_t pos;            /* LK_GEN: items before pos were consumed */
    const char *err;       /* LK_GEN: the TypeError its first use raises (a lazy generator filter
                            * given a non-iterable) */
    int64_t r0, r1, r2;    /* LK_RANGE: start, stop, step for repr */
};

struct jdict {
    jv *keys, *vals;
    size_t n, cap;
};

struct jmethod {
    jv self;
    int id;
};

typedef struct node node;
typedef struct scope scope;

struct jmacro {
    const node *def; /* S_MACRO or S_CALLBLOCK (caller) */
    scope *closure;
};

struct jloop {
    jv *items;
    size_t n, i;
    jlist *changed_last; /* loop.changed() state */
};

static jv mk_none(void) { return (jv){.k = V_NONE}; }
static jv mk_bool(bool b) { return (jv){.k = V_BOOL, .u.b = b}; }
static jv mk_int(int64_t i) { return (jv){.k = V_INT, .u.i = i}; }
static jv mk_float(double f) { return (jv){.k = V_FLOAT, .u.f = f}; }
static jv mk_str(const char *p, size_t n) { return (jv){.k = V_STR, .u.s = {p, n}}; }
static jv mk_cstr(const char *p) { return mk_str(p, strlen(p)); }
static jv mk_undef(const char *hint) { return (jv){.k = V_UNDEF, .u.s = {hint, hint ? strlen(hint) : 0}}; }

static bool is_num(jv v) { return v.k == V_INT || v.k == V_FLOAT || v.k == V_BOOL; }
static bool is_intlike(jv v) { return v.k == V_INT || v.k == V_BOOL; }
static int64_t as_i(jv v) { return v.k == V_BOOL ? (int64_t)v.u.b : v.u.i; }
static double as_f(jv v) { return v.k == V_FLOAT ? v.u.f : (double)as_i(v); }
static bool is_seq(jv v) { return v.k == V_LIST && (v.u.l->kind == LK_LIST || v.u.l->kind == LK_TUPLE); }

static bool str_eq(jv v, const char *s) {
    size_t n = strlen(s);
    return v.k == V_STR && v.u.s.n == n && memcmp(v.u.s.p, s, n) == 0;
}

/* ========================================================================== */
/* lexer tokens and AST                                                         */
/* ========================================================================== */

enum {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT,
    TK_FLOAT,
    /* operators */
    TK_ADD, TK_SUB, TK_DIV, TK_FLOORDIV, TK_MUL, TK_MOD, TK_POW, TK_TILDE, TK_LBRACKET, TK_RBRACKET,
    TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_EQ, TK_NE, TK_GT, TK_GTEQ, TK_LT, TK_LTEQ, TK_ASSIGN,
    TK_DOT, TK_COLON, TK_PIPE, TK_COMMA, TK_SEMICOLON,
};

typedef struct tok {
    uint8_t t;
    int line;
    const char *p; /* name text, decoded string, data text */
    size_t n;
    int64_t i;
    double f;
} tok;

enum {
    /* expressions */
    E_CONST, E_NAME, E_GETATTR, E_GETITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_CONCAT, E_COMPARE,
    E_AND, E_OR, E_NOT, E_NEG, E_POS, E_COND, E_LIST, E_TUPLE, E_DICT,
    /* statements */
    S_DATA, S_OUTPUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK, S_FILTERBLOCK, S_BREAK,
    S_CONTINUE, S_WITH, S_SCOPE, S_NSREF,
};

/* Arguments of a call, filter or test: f(pos..., name=kwv..., *dyn_args, **dyn_kwargs). */
typedef struct callargs {
    node **pos;
    int npos;
    const char **kwn;
    size_t *kwl;
    node **kwv;
    int nkw;
    node *dyn_args, *dyn_kwargs;
} callargs;

/* Node flags.  jinja2's optimizer folds constant expressions at compile time
 * (nodes.*.as_const), and a folded subscript with a slice goes through
 * Environment.getitem (undefined on failure) where a compiled one is a plain
 * Python subscript (TypeError).  Only that differs, so only subtrees that may
 * be constant (NF_CONST: decided for and/or/if-else by the values, at fold
 * time) and hold a slice (NF_SLICE) are folded, at render time (try_fold). */
enum { NF_CONST = 1, NF_SLICE = 2, NF_FOLD = 3 };

/* Macro flags: which implicit names the body reads (jinja2 find_undeclared). */
enum { MF_VARARGS = 1, MF_KWARGS = 2, MF_CALLER = 4 };

struct node {
    uint8_t t;
    uint8_t op;   /* E_BIN operator; S_MACRO flags */
    uint8_t flags; /* NF_*: what jinja2's optimizer would fold (annotate()) */
    int16_t id;   /* filter/test id */
    int line;
    int sym;      /* E_NAME, S_NSREF, S_MACRO: symbol */
    jv val;       /* E_CONST value; S_DATA text; E_GETATTR/S_NSREF attribute name */
    node *a, *b, *c, *d;
    node **list; /* children: items, body, args */
    int n;
    node **list2; /* else body, dict values, macro defaults */
    int n2;
    uint8_t *ops; /* E_COMPARE operators, one per list entry */
    callargs *ca;
    int *miss, nmiss;   /* frame statements: symbols "missing" until assigned (analyze_frames) */
    int *miss2, nmiss2; /* S_FOR: the same for its else block */
};

/* ========================================================================== */
/* the template                                                                 */
/* ========================================================================== */

typedef struct sym {
    const char *p;
    size_t n;
} sym;

struct jinja_template {
    arena A;     /* AST, symbol names, normalised source */
    jerr E;      /* only for the arena while parsing */
    node **body;
    int n;
    sym *syms;
    int nsyms;
    int sym_loop, sym_varargs, sym_kwargs, sym_caller;
    int *miss, nmiss; /* top level: symbols "missing" until assigned */
};

/* ========================================================================== */
/* lexer (jinja2/lexer.py tokeniter with trim_blocks and lstrip_blocks)         */
/* ========================================================================== */

#define MAX_PARSE_DEPTH 100
#define MAX_BRACKETS 256

typedef struct parser {
    jerr *E;
    arena *A;
    jinja_template *T;
    const char *src; /* normalised: \r\n and \r → \n, one trailing \n dropped */
    size_t len;
    tok *toks; /* malloc'd, freed by jinja_parse */
    size_t ntok, captok, ti;
    int depth, loop_depth;
    node *macros[MAX_PARSE_DEPTH + 1]; /* macro / call-block bodies being parsed */
    int nmacros;
    int *symtab; /* open-addressing hash of symbol ids + 1 */
    size_t symtab_cap;
    int line; /* for arena errors */
    uint64_t work; /* scope analysis effort, bounded */
} parser;

static _Noreturn void perr(parser *P, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void perr(parser *P, int line, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    jthrow(P->E, JINJA_ERR_SYNTAX, line, "%s", buf);
}

static void push_tok(parser *P, tok t) {
    if (P->ntok == P->captok) {
        size_t cap = P->captok ? P->captok * 2 : 256;
        tok *nt = realloc(P->toks, cap * sizeof *nt);
        if (!nt) jthrow(P->E, JINJA_ERR_NOMEM, t.line, "out of memory");
        P->toks = nt;
        P->captok = cap;
    }
    P->toks[P->ntok++] = t;
}

/* Python whitespace (\s, str.isspace) at s[i]; its byte length or 0. */
static size_t ws_len(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return py_isspace(c) ? 1 : 0;
    size_t l;
    uint32_t cp = u8dec(s + i, n - i, &l);
    return (l > 1 && py_isspace(cp)) ? l : 0;
}
static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t l;
    while ((l = ws_len(s, n, i))) i += l;
    return i;
}
/* The code point ending at s[e] (starting at or after lo) and its start. */
static uint32_t prev_cp(const char *s, size_t lo, size_t e, size_t *start) {
    size_t k = e - 1, l;
    while (k > lo && e - k < 4 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    uint32_t c = u8dec(s + k, e - k, &l);
    if (k + l != e) {
        *start = e - 1;
        return u8dec(s + e - 1, 1, &l);
    }
    *start = k;
    return c;
}
/* End of s[b, e) after str.rstrip(). */
static size_t rstrip_end(const char *s, size_t b, size_t e) {
    while (e > b) {
        size_t k;
        if (!py_isspace(prev_cp(s, b, e, &k))) break;
        e = k;
    }
    return e;
}
static bool all_ws(const char *s, size_t b, size_t e) { return b < e && skip_ws(s, e, b) == e; }
static int count_nl(const char *s, size_t b, size_t e) {
    int k = 0;
    for (size_t i = b; i < e; i++) k += s[i] == '\n';
    return k;
}

/* Emit data s[b, e) before a tag, with the tag's whitespace control:
 * '-' strips all whitespace, lstrip_blocks strips the blanks that open the
 * tag's line (not for {{ }}, not with '+'). */
static void emit_data(parser *P, size_t b, size_t e, char sign, bool lstrip_ok, bool line_starting, int line) {
    const char *s = P->src;
    if (sign == '-') {
        e = rstrip_end(s, b, e);
    } else if (sign != '+' && lstrip_ok) {
        size_t lp = e;
        while (lp > b && s[lp - 1] != '\n') lp--;
        if ((lp > b || line_starting) && all_ws(s, lp, e)) e = lp;
    }
    if (e > b) push_tok(P, (tok){.t = TK_DATA, .line = line, .p = s + b, .n = e - b});
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name1(char c) { return is_name0(c) || is_digit(c); }

/* (\d+_)*\d+ at s[i]; returns end or i when absent */
static size_t match_digits(const char *s, size_t n, size_t i) {
    size_t k = i;
    if (k >= n || !is_digit(s[k])) return i;
    for (;;) {
        while (k < n && is_digit(s[k])) k++;
        if (k + 1 < n && s[k] == '_' && is_digit(s[k + 1])) {
            k++;
            continue;
        }
        return k;
    }
}

static size_t match_float(const char *s, size_t n, size_t i) {
    if (i > 0 && s[i - 1] == '.') return i;
    size_t k = match_digits(s, n, i);
    if (k == i) return i;
    size_t f = k;
    if (f < n && s[f] == '.') {
        size_t g = match_digits(s, n, f + 1);
        if (g > f + 1) f = g;
    }
    if (f < n && (s[f] == 'e' || s[f] == 'E')) {
        size_t g = f + 1;
        if (g < n && (s[g] == '+' || s[g] == '-')) g++;
        size_t h = match_digits(s, n, g);
        if (h > g) return h;
    }
    if (f > k) return f; /* fraction without exponent */
    return i;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* integer_re; returns end (== i when absent) and the value */
static size_t match_int(parser *P, const char *s, size_t n, size_t i, int64_t *val, int line) {
    int base = 10;
    size_t k = i;
    if (k + 1 < n && s[k] == '0' && (s[k + 1] == 'b' || s[k + 1] == 'B')) base = 2, k += 2;
    else if (k + 1 < n && s[k] == '0' && (s[k + 1] == 'o' || s[k + 1] == 'O')) base = 8, k += 2;
    else if (k + 1 < n && s[k] == '0' && (s[k + 1] == 'x' || s[k + 1] == 'X')) base = 16, k += 2;
    uint64_t v = 0;
    bool any = false, over = false;
    if (base != 10) {
        for (;;) {
            size_t m = k;
            if (m < n && s[m] == '_') m++;
            int d = m < n ? hexval(s[m]) : -1;
            if (d < 0 || d >= base) break;
            if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) over = true;
            v = v * (uint64_t)base + (uint64_t)d;
            any = true;
            k = m + 1;
        }
        if (!any) { /* "0" followed by a letter: the decimal-zero branch */
            k = i + 1;
            v = 0;
        }
    } else if (s[k] == '0') {
        k++;
        while (k < n && (s[k] == '0' || (s[k] == '_' && k + 1 < n && s[k + 1] == '0'))) k += s[k] == '_' ? 2 : 1;
    } else if (s[k] >= '1' && s[k] <= '9') {
        for (;;) {
            size_t m = k;
            if (m > i && m < n && s[m] == '_') m++;
            if (m >= n || !is_digit(s[m])) break;
            int d = s[m] - '0';
            if (v > (UINT64_MAX - (uint64_t)d) / 10) over = true;
            v = v * 10 + (uint64_t)d;
            k = m + 1;
        }
    } else {
        return i;
    }
    if (over || v > (uint64_t)INT64_MAX)
        jthrow(P->E, JINJA_ERR_UNSUPPORTED, line, "integer literal %.*s is beyond 64 bits", (int)(k - i), s + i);
    *val = (int64_t)v;
    return k;
}

/* Decode a string literal body like Python's
 * .encode("ascii", "backslashreplace").decode("unicode-escape"). */
static void decode_string(parser *P, const char *s, size_t n, tok *t) {
    if (!memchr(s, '\\', n)) {
        t->p = s;
        t->n = n;
        return;
    }
    sb b;
    sb_init(&b, P->A);
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            sb_putc(&b, s[i++]);
            continue;
        }
        if (i + 1 >= n) jthrow(P->E, JINJA_ERR_SYNTAX, t->line, "\\ at end of string");
        unsigned char c = (unsigned char)s[i + 1];
        i += 2;
        uint32_t cp;
        char u8[4];
        switch (c) {
        case '\n': break;
        case '\\': sb_putc(&b, '\\'); break;
        case '\'': sb_putc(&b, '\''); break;
        case '"': sb_putc(&b, '"'); break;
        case 'a': sb_putc(&b, '\a'); break;
        case 'b': sb_putc(&b, '\b'); break;
        case 'f': sb_putc(&b, '\f'); break;
        case 'n': sb_putc(&b, '\n'); break;
        case 'r': sb_putc(&b, '\r'); break;
        case 't': sb_putc(&b, '\t'); break;
        case 'v': sb_putc(&b, '\v'); break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7':
            cp = c - '0';
            for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
            sb_put(&b, u8, u8enc(cp, u8));
            break;
        case 'x': case 'u': case 'U': {
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            cp = 0;
            for (int k = 0; k < nd; k++) {
                int d = i < n ? hexval(s[i]) : -1;
                if (d < 0)
                    jthrow(P->E, JINJA_ERR_SYNTAX, t->line, "truncated \\%cXX escape in string literal", c);
                cp = cp * 16 + (uint32_t)d;
                i++;
            }
            if (cp > 0x10FFFF) jthrow(P->E, JINJA_ERR_SYNTAX, t->line, "illegal Unicode character in string literal");
            if (cp >= 0xD800 && cp <= 0xDFFF)
                jthrow(P->E, JINJA_ERR_UNSUPPORTED, t->line, "surrogate code point in string literal");
            sb_put(&b, u8, u8enc(cp, u8));
            break;
        }
        case 'N': jthrow(P->E, JINJA_ERR_UNSUPPORTED, t->line, "\\N{...} escapes are not supported");
        default:
            if (c >= 0x80) { /* backslashreplace turned the character into \xNN / \uNNNN / \UNNNNNNNN */
                size_t l;
                cp = u8dec(s + i - 1, n - (i - 1), &l);
                i += l - 1;
                sb_putc(&b, '\\');
                if (cp < 0x100) sb_printf(&b, "x%02x", cp);
                else if (cp < 0x10000) sb_printf(&b, "u%04x", cp);
                else sb_printf(&b, "U%08x", cp);
            } else {
                sb_putc(&b, '\\');
                sb_putc(&b, (char)c);
            }
        }
    }
    t->p = b.n ? b.p : "";
    t->n = b.n;
}

static const struct { const char *s; uint8_t t; } k_ops[] = {
    {"//", TK_FLOORDIV}, {"**", TK_POW}, {"==", TK_EQ}, {"!=", TK_NE}, {">=", TK_GTEQ}, {"<=", TK_LTEQ},
    {"+", TK_ADD}, {"-", TK_SUB}, {"/", TK_DIV}, {"*", TK_MUL}, {"%", TK_MOD}, {"~", TK_TILDE},
    {"[", TK_LBRACKET}, {"]", TK_RBRACKET}, {"(", TK_LPAREN}, {")", TK_RPAREN}, {"{", TK_LBRACE},
    {"}", TK_RBRACE}, {">", TK_GT}, {"<", TK_LT}, {"=", TK_ASSIGN}, {".", TK_DOT}, {":", TK_COLON},
    {"|", TK_PIPE}, {",", TK_COMMA}, {";", TK_SEMICOLON},
};

/* Tokens inside {{ }} or {% %} from s[pos] up to and including the end tag;
 * returns the position after it. */
static size_t lex_tag(parser *P, size_t pos, bool block, int *line, bool *line_starting) {
    const char *s = P->src;
    size_t n = P->len;
    char bal[MAX_BRACKETS];
    int nbal = 0;
    while (pos < n) {
        if (nbal == 0) {
            size_t end = 0;
            if (block) {
                if (s[pos] == '+' && pos + 2 < n && s[pos + 1] == '%' && s[pos + 2] == '}') end = pos + 3;
                else if (s[pos] == '-' && pos + 2 < n && s[pos + 1] == '%' && s[pos + 2] == '}') end = skip_ws(s, n, pos + 3);
                else if (s[pos] == '%' && pos + 1 < n && s[pos + 1] == '}') {
                    end = pos + 2;
                    if (end < n && s[end] == '\n') end++; /* trim_blocks */
                }
            } else {
                if (s[pos] == '-' && pos + 2 < n && s[pos + 1] == '}' && s[pos + 2] == '}') end = skip_ws(s, n, pos + 3);
                else if (s[pos] == '}' && pos + 1 < n && s[pos + 1] == '}') end = pos + 2;
            }
            if (end) {
                push_tok(P, (tok){.t = block ? TK_BLOCK_END : TK_VAR_END, .line = *line});
                *line += count_nl(s, pos, end);
                *line_starting = s[end - 1] == '\n';
                return end;
            }
        }
        size_t k;
        if ((k = ws_len(s, n, pos))) {
            k = skip_ws(s, n, pos);
            *line += count_nl(s, pos, k);
            pos = k;
            continue;
        }
        tok t = {.line = *line};
        if ((k = match_float(s, n, pos)) > pos) {
            char buf[64];
            size_t m = 0;
            for (size_t i = pos; i < k && m + 1 < sizeof buf; i++)
                if (s[i] != '_') buf[m++] = s[i];
            buf[m] = 0;
            t.t = TK_FLOAT;
            t.f = strtod(buf, NULL);
            push_tok(P, t);
            pos = k;
            continue;
        }
        int64_t iv;
        if (is_digit(s[pos]) && (k = match_int(P, s, n, pos, &iv, *line)) > pos) {
            t.t = TK_INT;
            t.i = iv;
            push_tok(P, t);
            pos = k;
            continue;
        }
        if (is_name0(s[pos])) {
            k = pos;
            while (k < n && is_name1(s[k])) k++;
            if (k < n && ((unsigned char)s[k] & 0x80))
                jthrow(P->E, JINJA_ERR_UNSUPPORTED, *line, "non-ASCII identifier");
            t.t = TK_NAME;
            t.p = s + pos;
            t.n = k - pos;
            push_tok(P, t);
            pos = k;
            continue;
        }
        if (s[pos] == '\'' || s[pos] == '"') {
            char q = s[pos];
            k = pos + 1;
            while (k < n && s[k] != q) k += (s[k] == '\\' && k + 1 < n) ? 2 : 1;
            if (k < n) {
                t.t = TK_STRING;
                decode_string(P, s + pos + 1, k - pos - 1, &t);
                push_tok(P, t);
                *line += count_nl(s, pos, k);
                pos = k + 1;
                continue;
            }
        }
        bool found = false;
        for (size_t o = 0; o < sizeof k_ops / sizeof k_ops[0]; o++) {
            size_t l = strlen(k_ops[o].s);
            if (pos + l <= n && !memcmp(s + pos, k_ops[o].s, l)) {
                char c = s[pos];
                if (c == '{' || c == '(' || c == '[') {
                    if (nbal == MAX_BRACKETS) jthrow(P->E, JINJA_ERR_LIMIT, *line, "brackets nested too deeply");
                    bal[nbal++] = c == '{' ? '}' : c == '(' ? ')' : ']';
                } else if (c == '}' || c == ')' || c == ']') {
                    if (!nbal) perr(P, *line, "unexpected '%c'", c);
                    if (bal[nbal - 1] != c) perr(P, *line, "unexpected '%c', expected '%c'", c, bal[nbal - 1]);
                    nbal--;
                }
                t.t = k_ops[o].t;
                push_tok(P, t);
                pos += l;
                found = true;
                break;
            }
        }
        if (!found) {
            unsigned char c = (unsigned char)s[pos];
            if (c >= 0x20 && c < 0x7F) perr(P, *line, "unexpected char '%c' at %zu", c, pos);
            perr(P, *line, "unexpected char 0x%02x at %zu", c, pos);
        }
    }
    return pos; /* end of template inside a tag: the parser reports it */
}

static void lex(parser *P) {
    const char *s = P->src;
    size_t n = P->len, pos = 0;
    int line = 1;
    bool line_starting = true;
    while (pos < n) {
        size_t i = pos;
        while (i + 1 < n && !(s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#'))) i++;
        if (i + 1 >= n) {
            push_tok(P, (tok){.t = TK_DATA, .line = line, .p = s + pos, .n = n - pos});
            line += count_nl(s, pos, n);
            break;
        }
        char kind = s[i + 1], sign = 0;
        size_t j = i + 2;
        if (j < n && (s[j] == '-' || s[j] == '+')) sign = s[j++];
        size_t raw_end = 0;
        if (kind == '%') { /* {% raw %} */
            size_t k = skip_ws(s, n, j);
            if (k + 3 <= n && !memcmp(s + k, "raw", 3)) {
                k = skip_ws(s, n, k + 3);
                if (k + 3 <= n && !memcmp(s + k, "-%}", 3)) raw_end = skip_ws(s, n, k + 3);
                else if (k + 2 <= n && !memcmp(s + k, "%}", 2)) raw_end = k + 2;
            }
        }
        emit_data(P, pos, i, sign, kind != '{', line_starting, line);
        line += count_nl(s, pos, i);
        if (raw_end) {
            line += count_nl(s, i, raw_end);
            line_starting = s[raw_end - 1] == '\n';
            pos = raw_end;
            /* {%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?) */
            for (size_t k = pos;; k++) {
                if (k + 1 >= n) perr(P, line, "Missing end of raw directive");
                if (s[k] != '{' || s[k + 1] != '%') continue;
                size_t m = k + 2;
                char sign2 = 0;
                if (m < n && (s[m] == '-' || s[m] == '+')) sign2 = s[m++];
                m = skip_ws(s, n, m);
                if (m + 6 > n || memcmp(s + m, "endraw", 6)) continue;
                m = skip_ws(s, n, m + 6);
                size_t e = 0;
                if (m + 3 <= n && !memcmp(s + m, "+%}", 3)) e = m + 3;
                else if (m + 3 <= n && !memcmp(s + m, "-%}", 3)) e = skip_ws(s, n, m + 3);
                else if (m + 2 <= n && !memcmp(s + m, "%}", 2)) e = m + 2 + (m + 2 < n && s[m + 2] == '\n');
                if (!e) continue;
                emit_data(P, pos, k, sign2, true, line_starting, line);
                line += count_nl(s, pos, e);
                line_starting = s[e - 1] == '\n';
                pos = e;
                break;
            }
            continue;
        }
        if (kind == '#') {
            size_t k = j, e = 0;
            for (;; k++) {
                if (k + 1 >= n) perr(P, line, "Missing end of comment tag");
                if (s[k] == '+' && k + 2 < n && s[k + 1] == '#' && s[k + 2] == '}') e = k + 3;
                else if (s[k] == '-' && k + 2 < n && s[k + 1] == '#' && s[k + 2] == '}') e = skip_ws(s, n, k + 3);
                else if (s[k] == '#' && s[k + 1] == '}') e = k + 2 + (k + 2 < n && s[k + 2] == '\n');
                if (e) break;
            }
            line += count_nl(s, i, e);
            line_starting = s[e - 1] == '\n';
            pos = e;
            continue;
        }
        push_tok(P, (tok){.t = kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, .line = line});
        line_starting = false;
        pos = lex_tag(P, j, kind == '%', &line, &line_starting);
    }
    push_tok(P, (tok){.t = TK_EOF, .line = line});
}

/* ========================================================================== */
/* filter and test names                                                        */
/* ========================================================================== */

/* jinja2 3.1 FILTERS; those after F_NOT_IMPLEMENTED parse (so a template that
 * never reaches them renders) but fail when applied. */
#define FILTERS(X)                                                                                       \
    X(abs) X(attr) X(batch) X(capitalize) X(center) X(count) X(d) X(default) X(dictsort) X(e) X(escape) \
    X(first) X(float) X(forceescape) X(format) X(indent) X(int) X(join) X(last) X(length) X(list)       \
    X(lower) X(items) X(map) X(min) X(max) X(reject) X(rejectattr) X(replace) X(reverse) X(round)       \
    X(safe) X(select) X(selectattr) X(slice) X(sort) X(string) X(sum) X(title) X(trim) X(truncate)      \
    X(unique) X(upper) X(wordcount) X(tojson) X(NOT_IMPLEMENTED) X(filesizeformat) X(groupby) X(pprint) \
    X(random) X(striptags) X(urlencode) X(urlize) X(wordwrap) X(xmlattr)
#define X_ENUM(n) F_##n,
#define X_NAME(n) #n,
enum { FILTERS(X_ENUM) F_COUNT_ };
static const char *const k_filters[] = {FILTERS(X_NAME)};

#define TESTS(X)                                                                                        \
    X(odd, "odd") X(even, "even") X(divisibleby, "divisibleby") X(defined, "defined")                  \
    X(undefined, "undefined") X(filter, "filter") X(test, "test") X(none, "none") X(boolean, "boolean") \
    X(false, "false") X(true, "true") X(integer, "integer") X(float, "float") X(lower, "lower")         \
    X(upper, "upper") X(string, "string") X(mapping, "mapping") X(number, "number")                    \
    X(sequence, "sequence") X(iterable, "iterable") X(callable, "callable") X(sameas, "sameas")         \
    X(escaped, "escaped") X(in, "in") X(eq, "==") X(eq2, "eq") X(eq3, "equalto") X(ne, "!=")          \
    X(ne2, "ne") X(gt, ">") X(gt2, "gt") X(gt3, "greaterthan") X(ge, "ge") X(ge2, ">=") X(lt, "<")     \
    X(lt2, "lt") X(lt3, "lessthan") X(le, "<=") X(le2, "le")
#define X_TENUM(n, s) T_##n,
#define X_TNAME(n, s) s,
enum { TESTS(X_TENUM) T_COUNT_ };
static const char *const k_tests[] = {TESTS(X_TNAME)};

static int lookup_name(const char *const *names, int count, const char *p, size_t n) {
    for (int i = 0; i < count; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], p, n)) return i;
    return -1;
}

/* ========================================================================== */
/* parser (jinja2/parser.py)                                                    */
/* ========================================================================== */

typedef struct nvec {
    node **a;
    int n, cap;
} nvec;

static void nv_push(parser *P, nvec *v, node *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        node **a = amalloc(P->A, (size_t)cap * sizeof *a);
        if (v->n) memcpy(a, v->a, (size_t)v->n * sizeof *a);
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = x;
}

static tok *cur(parser *P) { return &P->toks[P->ti]; }
static tok *look(parser *P) { return &P->toks[P->ti + (P->ti + 1 < P->ntok)]; }
static void advance(parser *P) {
    if (P->ti + 1 < P->ntok) P->ti++;
}
static bool tok_is(const tok *t, const char *name) {
    return t->t == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}
static bool skip_name(parser *P, const char *name) {
    if (!tok_is(cur(P), name)) return false;
    advance(P);
    return true;
}
static bool skip_tok(parser *P, int t) {
    if (cur(P)->t != t) return false;
    advance(P);
    return true;
}

static const char *tok_desc(const tok *t, char *buf, size_t cap) {
    static const char *const names[] = {
        [TK_EOF] = "end of template", [TK_DATA] = "template data", [TK_VAR_BEGIN] = "begin of print statement",
        [TK_VAR_END] = "end of print statement", [TK_BLOCK_BEGIN] = "begin of statement block",
        [TK_BLOCK_END] = "end of statement block", [TK_STRING] = "string", [TK_INT] = "integer",
        [TK_FLOAT] = "float",
    };
    if (t->t == TK_NAME) snprintf(buf, cap, "%.*s", (int)(t->n > 60 ? 60 : t->n), t->p);
    else if (t->t < sizeof names / sizeof names[0] && names[t->t]) snprintf(buf, cap, "%s", names[t->t]);
    else
        for (size_t o = 0; o < sizeof k_ops / sizeof k_ops[0]; o++)
            if (k_ops[o].t == t->t) snprintf(buf, cap, "%s", k_ops[o].s);
    return buf;
}

static void expect(parser *P, int t, const char *what) {
    if (cur(P)->t != t) {
        char b[80];
        if (cur(P)->t == TK_EOF) perr(P, cur(P)->line, "unexpected end of template, expected '%s'", what);
        perr(P, cur(P)->line, "expected token '%s', got '%s'", what, tok_desc(cur(P), b, sizeof b));
    }
    advance(P);
}
static void expect_name(parser *P, const char *name) {
    if (!tok_is(cur(P), name)) {
        char b[80];
        perr(P, cur(P)->line, "expected token '%s', got '%s'", name, tok_desc(cur(P), b, sizeof b));
    }
    advance(P);
}

static node *mk(parser *P, int t, int line) {
    node *x = amalloc(P->A, sizeof *x);
    memset(x, 0, sizeof *x);
    x->t = (uint8_t)t;
    x->line = line;
    return x;
}

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int intern(parser *P, const char *p, size_t n) {
    jinja_template *T = P->T;
    if ((size_t)T->nsyms * 2 + 2 >= P->symtab_cap) {
        size_t cap = P->symtab_cap ? P->symtab_cap * 2 : 64;
        int *tab = amalloc(P->A, cap * sizeof *tab);
        memset(tab, 0, cap * sizeof *tab);
        for (int i = 0; i < T->nsyms; i++) {
            size_t h = hash_bytes(T->syms[i].p, T->syms[i].n) & (cap - 1);
            while (tab[h]) h = (h + 1) & (cap - 1);
            tab[h] = i + 1;
        }
        sym *ns = amalloc(P->A, cap / 2 * sizeof *ns);
        if (T->nsyms) memcpy(ns, T->syms, (size_t)T->nsyms * sizeof *ns);
        T->syms = ns;
        P->symtab = tab;
        P->symtab_cap = cap;
    }
    size_t h = hash_bytes(p, n) & (P->symtab_cap - 1);
    while (P->symtab[h]) {
        sym *s = &T->syms[P->symtab[h] - 1];
        if (s->n == n && !memcmp(s->p, p, n)) return P->symtab[h] - 1;
        h = (h + 1) & (P->symtab_cap - 1);
    }
    T->syms[T->nsyms] = (sym){astrndup(P->A, p, n), n};
    P->symtab[h] = ++T->nsyms;
    return T->nsyms - 1;
}

static void enter(parser *P) {
    if (++P->depth > MAX_PARSE_DEPTH)
        jthrow(P->E, JINJA_ERR_LIMIT, cur(P)->line, "template nested deeper than %d levels", MAX_PARSE_DEPTH);
}
static void leave(parser *P) { P->depth--; }

static node *parse_expression(parser *P, bool with_condexpr);
static node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens);
static node *parse_unary(parser *P, bool with_filter);
static node *parse_primary(parser *P);
static node *parse_postfix(parser *P, node *x);
static node *parse_filter(parser *P, node *x, bool start_inline);

static node *parse_condexpr(parser *P);
static node *parse_or(parser *P);

static node *parse_expression(parser *P, bool with_condexpr) {
    return with_condexpr ? parse_condexpr(P) : parse_or(P);
}

static node *parse_condexpr(parser *P) {
    enter(P);
    int line = cur(P)->line;
    node *e1 = parse_or(P);
    while (skip_name(P, "if")) {
        node *e2 = parse_or(P);
        node *e3 = skip_name(P, "else") ? parse_condexpr(P) : NULL;
        node *x = mk(P, E_COND, line);
        x->a = e1;
        x->b = e2;
        x->c = e3;
        e1 = x;
        line = cur(P)->line;
    }
    leave(P);
    return e1;
}

static node *parse_not(parser *P);
static node *parse_and(parser *P) {
    int line = cur(P)->line;
    node *l = parse_not(P);
    while (skip_name(P, "and")) {
        node *x = mk(P, E_AND, line);
        x->a = l;
        x->b = parse_not(P);
        l = x;
        line = cur(P)->line;
    }
    return l;
}
static node *parse_or(parser *P) {
    int line = cur(P)->line;
    node *l = parse_and(P);
    while (skip_name(P, "or")) {
        node *x = mk(P, E_OR, line);
        x->a = l;
        x->b = parse_and(P);
        l = x;
        line = cur(P)->line;
    }
    return l;
}

static node *parse_compare(parser *P);
static node *parse_not(parser *P) {
    if (tok_is(cur(P), "not")) {
        enter(P);
        node *x = mk(P, E_NOT, cur(P)->line);
        advance(P);
        x->a = parse_not(P);
        leave(P);
        return x;
    }
    return parse_compare(P);
}

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW };

static node *parse_math1(parser *P);
static node *parse_compare(parser *P) {
    int line = cur(P)->line;
    node *first = parse_math1(P);
    nvec ops = {0};
    uint8_t opc[64];
    uint8_t *opv = opc;
    int opcap = 64;
    for (;;) {
        int t = cur(P)->t, op;
        if (t == TK_EQ) op = CMP_EQ;
        else if (t == TK_NE) op = CMP_NE;
        else if (t == TK_LT) op = CMP_LT;
        else if (t == TK_LTEQ) op = CMP_LE;
        else if (t == TK_GT) op = CMP_GT;
        else if (t == TK_GTEQ) op = CMP_GE;
        else if (tok_is(cur(P), "in")) op = CMP_IN;
        else if (tok_is(cur(P), "not") && tok_is(look(P), "in")) {
            op = CMP_NOTIN;
            advance(P);
        } else break;
        advance(P);
        if (ops.n == opcap) {
            uint8_t *nv = amalloc(P->A, (size_t)opcap * 2);
            memcpy(nv, opv, (size_t)opcap);
            opv = nv;
            opcap *= 2;
        }
        opv[ops.n] = (uint8_t)op;
        nv_push(P, &ops, parse_math1(P));
        line = cur(P)->line;
    }
    if (!ops.n) return first;
    node *x = mk(P, E_COMPARE, line);
    x->a = first;
    x->list = ops.a;
    x->n = ops.n;
    x->ops = amalloc(P->A, (size_t)ops.n);
    memcpy(x->ops, opv, (size_t)ops.n);
    return x;
}

static node *mk_bin(parser *P, int op, node *l, node *r, int line) {
    node *x = mk(P, E_BIN, line);
    x->op = (uint8_t)op;
    x->a = l;
    x->b = r;
    return x;
}

static node *parse_concat(parser *P);
static node *parse_math1(parser *P) {
    int line = cur(P)->line;
    node *l = parse_concat(P);
    while (cur(P)->t == TK_ADD || cur(P)->t == TK_SUB) {
        int op = cur(P)->t == TK_ADD ? OP_ADD : OP_SUB;
        advance(P);
        l = mk_bin(P, op, l, parse_concat(P), line);
        line = cur(P)->line;
    }
    return l;
}

static node *parse_math2(parser *P);
static node *parse_concat(parser *P) {
    int line = cur(P)->line;
    node *first = parse_math2(P);
    if (cur(P)->t != TK_TILDE) return first;
    nvec args = {0};
    nv_push(P, &args, first);
    while (skip_tok(P, TK_TILDE)) nv_push(P, &args, parse_math2(P));
    node *x = mk(P, E_CONCAT, line);
    x->list = args.a;
    x->n = args.n;
    return x;
}

static node *parse_pow(parser *P);
static node *parse_math2(parser *P) {
    int line = cur(P)->line;
    node *l = parse_pow(P);
    for (;;) {
        int t = cur(P)->t, op;
        if (t == TK_MUL) op = OP_MUL;
        else if (t == TK_DIV) op = OP_DIV;
        else if (t == TK_FLOORDIV) op = OP_FLOORDIV;
        else if (t == TK_MOD) op = OP_MOD;
        else break;
        advance(P);
        l = mk_bin(P, op, l, parse_pow(P), line);
        line = cur(P)->line;
    }
    return l;
}

static node *parse_pow(parser *P) {
    int line = cur(P)->line;
    node *l = parse_unary(P, true);
    while (skip_tok(P, TK_POW)) {
        l = mk_bin(P, OP_POW, l, parse_unary(P, true), line);
        line = cur(P)->line;
    }
    return l;
}

static node *parse_filter_expr(parser *P, node *x);
static node *parse_unary(parser *P, bool with_filter) {
    enter(P);
    int line = cur(P)->line;
    node *x;
    if (cur(P)->t == TK_SUB || cur(P)->t == TK_ADD) {
        x = mk(P, cur(P)->t == TK_SUB ? E_NEG : E_POS, line);
        advance(P);
        x->a = parse_unary(P, false);
    } else {
        x = parse_primary(P);
    }
    x = parse_postfix(P, x);
    if (with_filter) x = parse_filter_expr(P, x);
    leave(P);
    return x;
}

static node *parse_list_lit(parser *P) {
    int line = cur(P)->line;
    expect(P, TK_LBRACKET, "[");
    nvec items = {0};
    while (cur(P)->t != TK_RBRACKET) {
        if (items.n) expect(P, TK_COMMA, ",");
        if (cur(P)->t == TK_RBRACKET) break;
        nv_push(P, &items, parse_expression(P, true));
    }
    expect(P, TK_RBRACKET, "]");
    node *x = mk(P, E_LIST, line);
    x->list = items.a;
    x->n = items.n;
    return x;
}

static node *parse_dict_lit(parser *P) {
    int line = cur(P)->line;
    expect(P, TK_LBRACE, "{");
    nvec keys = {0}, vals = {0};
    while (cur(P)->t != TK_RBRACE) {
        if (keys.n) expect(P, TK_COMMA, ",");
        if (cur(P)->t == TK_RBRACE) break;
        nv_push(P, &keys, parse_expression(P, true));
        expect(P, TK_COLON, ":");
        nv_push(P, &vals, parse_expression(P, true));
    }
    expect(P, TK_RBRACE, "}");
    node *x = mk(P, E_DICT, line);
    x->list = keys.a;
    x->list2 = vals.a;
    x->n = x->n2 = keys.n;
    return x;
}

static void note_name(parser *P, const tok *t) {
    int f = tok_is(t, "varargs") ? MF_VARARGS : tok_is(t, "kwargs") ? MF_KWARGS : tok_is(t, "caller") ? MF_CALLER : 0;
    if (f)
        for (int i = 0; i < P->nmacros; i++) P->macros[i]->op |= (uint8_t)f;
}

static node *parse_primary(parser *P) {
    tok *t = cur(P);
    node *x;
    char b[80];
    switch (t->t) {
    case TK_NAME:
        x = mk(P, E_CONST, t->line);
        if (tok_is(t, "true") || tok_is(t, "True")) x->val = mk_bool(true);
        else if (tok_is(t, "false") || tok_is(t, "False")) x->val = mk_bool(false);
        else if (tok_is(t, "none") || tok_is(t, "None")) x->val = mk_none();
        else {
            x->t = E_NAME;
            x->sym = intern(P, t->p, t->n);
            note_name(P, t);
        }
        advance(P);
        return x;
    case TK_STRING: {
        x = mk(P, E_CONST, t->line);
        advance(P);
        if (cur(P)->t != TK_STRING) {
            x->val = mk_str(t->p, t->n);
            return x;
        }
        sb s;
        sb_init(&s, P->A);
        sb_put(&s, t->p, t->n);
        while (cur(P)->t == TK_STRING) {
            sb_put(&s, cur(P)->p, cur(P)->n);
            advance(P);
        }
        x->val = mk_str(s.n ? s.p : "", s.n);
        return x;
    }
    case TK_INT:
    case TK_FLOAT:
        x = mk(P, E_CONST, t->line);
        x->val = t->t == TK_INT ? mk_int(t->i) : mk_float(t->f);
        advance(P);
        return x;
    case TK_LPAREN:
        advance(P);
        x = parse_tuple(P, false, true, NULL, true);
        expect(P, TK_RPAREN, ")");
        return x;
    case TK_LBRACKET: return parse_list_lit(P);
    case TK_LBRACE: return parse_dict_lit(P);
    default:
        if (t->t == TK_EOF) perr(P, t->line, "unexpected end of template");
        perr(P, t->line, "unexpected '%s'", tok_desc(t, b, sizeof b));
    }
}

static bool is_tuple_end(parser *P, const char *extra_end) {
    int t = cur(P)->t;
    if (t == TK_VAR_END || t == TK_BLOCK_END || t == TK_RPAREN) return true;
    return extra_end && tok_is(cur(P), extra_end);
}

static node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens) {
    int line = cur(P)->line;
    nvec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect(P, TK_COMMA, ",");
        if (is_tuple_end(P, extra_end)) break;
        node *e = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
        nv_push(P, &args, e);
        if (cur(P)->t == TK_COMMA) is_tuple = true;
        else break;
        line = cur(P)->line;
    }
    if (!is_tuple) {
        if (args.n) return args.a[0];
        if (!explicit_parens) {
            char b[80];
            perr(P, cur(P)->line, "Expected an expression, got '%s'", tok_desc(cur(P), b, sizeof b));
        }
    }
    node *x = mk(P, E_TUPLE, line);
    x->list = args.a;
    x->n = args.n;
    return x;
}

static callargs *parse_call_args(parser *P) {
    int line = cur(P)->line;
    expect(P, TK_LPAREN, "(");
    callargs *ca = amalloc(P->A, sizeof *ca);
    memset(ca, 0, sizeof *ca);
    nvec pos = {0}, kwv = {0};
    const char *kn[256];
    size_t kl[256];
    bool require_comma = false;
    while (cur(P)->t != TK_RPAREN) {
        if (require_comma) {
            expect(P, TK_COMMA, ",");
            if (cur(P)->t == TK_RPAREN) break;
        }
        if (cur(P)->t == TK_MUL) {
            if (ca->dyn_args || ca->dyn_kwargs) perr(P, line, "invalid syntax for function call expression");
            advance(P);
            ca->dyn_args = parse_expression(P, true);
        } else if (cur(P)->t == TK_POW) {
            if (ca->dyn_kwargs) perr(P, line, "invalid syntax for function call expression");
            advance(P);
            ca->dyn_kwargs = parse_expression(P, true);
        } else if (cur(P)->t == TK_NAME && look(P)->t == TK_ASSIGN) {
            if (ca->dyn_kwargs) perr(P, line, "invalid syntax for function call expression");
            if (kwv.n == 256) jthrow(P->E, JINJA_ERR_LIMIT, line, "more than 256 keyword arguments");
            kn[kwv.n] = cur(P)->p;
            kl[kwv.n] = cur(P)->n;
            advance(P);
            advance(P);
            nv_push(P, &kwv, parse_expression(P, true));
        } else {
            if (ca->dyn_args || ca->dyn_kwargs || kwv.n) perr(P, line, "invalid syntax for function call expression");
            nv_push(P, &pos, parse_expression(P, true));
        }
        require_comma = true;
    }
    expect(P, TK_RPAREN, ")");
    ca->pos = pos.a;
    ca->npos = pos.n;
    ca->kwv = kwv.a;
    ca->nkw = kwv.n;
    if (kwv.n) {
        ca->kwn = amalloc(P->A, (size_t)kwv.n * sizeof *ca->kwn);
        ca->kwl = amalloc(P->A, (size_t)kwv.n * sizeof *ca->kwl);
        memcpy(ca->kwn, kn, (size_t)kwv.n * sizeof *kn);
        memcpy(ca->kwl, kl, (size_t)kwv.n * sizeof *kl);
    }
    return ca;
}

static node *parse_subscribed(parser *P) {
    int line = cur(P)->line;
    node *args[3] = {0};
    if (cur(P)->t == TK_COLON) {
        advance(P);
    } else {
        node *e = parse_expression(P, true);
        if (cur(P)->t != TK_COLON) return e;
        advance(P);
        args[0] = e;
    }
    if (cur(P)->t != TK_COLON && cur(P)->t != TK_RBRACKET && cur(P)->t != TK_COMMA) args[1] = parse_expression(P, true);
    if (cur(P)->t == TK_COLON) {
        advance(P);
        if (cur(P)->t != TK_RBRACKET && cur(P)->t != TK_COMMA) args[2] = parse_expression(P, true);
    }
    node *x = mk(P, E_SLICE, line);
    x->b = args[0];
    x->c = args[1];
    x->d = args[2];
    return x;
}

static node *parse_postfix(parser *P, node *x) {
    for (;;) {
        int line = cur(P)->line;
        if (cur(P)->t == TK_DOT) {
            advance(P);
            tok *a = cur(P);
            if (a->t == TK_NAME) {
                node *g = mk(P, E_GETATTR, line);
                g->a = x;
                g->val = mk_str(astrndup(P->A, a->p, a->n), a->n);
                advance(P);
                x = g;
            } else if (a->t == TK_INT) {
                node *g = mk(P, E_GETITEM, line);
                g->a = x;
                g->b = mk(P, E_CONST, line);
                g->b->val = mk_int(a->i);
                advance(P);
                x = g;
            } else {
                perr(P, a->line, "expected name or number");
            }
        } else if (cur(P)->t == TK_LBRACKET) {
            advance(P);
            nvec args = {0};
            while (cur(P)->t != TK_RBRACKET) {
                if (args.n) expect(P, TK_COMMA, ",");
                nv_push(P, &args, parse_subscribed(P));
            }
            expect(P, TK_RBRACKET, "]");
            if (args.n == 0) perr(P, line, "expected subscript expression");
            node *g = mk(P, E_GETITEM, line);
            g->a = x;
            if (args.n == 1) {
                g->b = args.a[0];
            } else {
                g->b = mk(P, E_TUPLE, line);
                g->b->list = args.a;
                g->b->n = args.n;
            }
            x = g;
        } else if (cur(P)->t == TK_LPAREN) {
            node *c = mk(P, E_CALL, line);
            c->a = x;
            c->ca = parse_call_args(P);
            x = c;
        } else {
            return x;
        }
    }
}

static node *parse_filter(parser *P, node *x, bool start_inline) {
    while (cur(P)->t == TK_PIPE || start_inline) {
        if (!start_inline) advance(P);
        tok *t = cur(P);
        if (t->t != TK_NAME) expect(P, TK_NAME, "name");
        const char *name = t->p;
        size_t nl = t->n;
        int line = t->line;
        advance(P);
        bool dotted = false;
        while (cur(P)->t == TK_DOT) {
            advance(P);
            expect(P, TK_NAME, "name");
            dotted = true;
        }
        int id = dotted ? -1 : lookup_name(k_filters, F_COUNT_, name, nl);
        if (id < 0 || id == F_NOT_IMPLEMENTED) perr(P, line, "No filter named '%.*s'.", (int)(nl > 60 ? 60 : nl), name);
        node *f = mk(P, E_FILTER, line);
        f->id = (int16_t)id;
        f->a = x;
        f->ca = cur(P)->t == TK_LPAREN ? parse_call_args(P) : NULL;
        x = f;
        start_inline = false;
    }
    return x;
}

static node *parse_test(parser *P, node *x) {
    int line = cur(P)->line;
    advance(P); /* is */
    bool negated = skip_name(P, "not");
    tok *t = cur(P);
    if (t->t != TK_NAME) expect(P, TK_NAME, "name");
    const char *name = t->p;
    size_t nl = t->n;
    advance(P);
    bool dotted = false;
    while (cur(P)->t == TK_DOT) {
        advance(P);
        expect(P, TK_NAME, "name");
        dotted = true;
    }
    int id = dotted ? -1 : lookup_name(k_tests, T_COUNT_, name, nl);
    if (id < 0) perr(P, line, "No test named '%.*s'.", (int)(nl > 60 ? 60 : nl), name);
    node *te = mk(P, E_TEST, line);
    te->id = (int16_t)id;
    te->a = x;
    int ct = cur(P)->t;
    if (ct == TK_LPAREN) {
        te->ca = parse_call_args(P);
    } else if ((ct == TK_NAME || ct == TK_STRING || ct == TK_INT || ct == TK_FLOAT || ct == TK_LBRACKET ||
                ct == TK_LBRACE) &&
               !tok_is(cur(P), "else") && !tok_is(cur(P), "or") && !tok_is(cur(P), "and")) {
        if (tok_is(cur(P), "is")) perr(P, cur(P)->line, "You cannot chain multiple tests with is");
        node *arg = parse_postfix(P, parse_primary(P));
        te->ca = amalloc(P->A, sizeof *te->ca);
        memset(te->ca, 0, sizeof *te->ca);
        te->ca->pos = amalloc(P->A, sizeof(node *));
        te->ca->pos[0] = arg;
        te->ca->npos = 1;
    }
    if (!negated) return te;
    node *n = mk(P, E_NOT, line);
    n->a = te;
    return n;
}

static node *parse_filter_expr(parser *P, node *x) {
    for (;;) {
        if (cur(P)->t == TK_PIPE) x = parse_filter(P, x, false);
        else if (tok_is(cur(P), "is")) x = parse_test(P, x);
        else if (cur(P)->t == TK_LPAREN) {
            node *c = mk(P, E_CALL, cur(P)->line);
            c->a = x;
            c->ca = parse_call_args(P);
            x = c;
        } else return x;
    }
}

/* ---- constant folding marks ---------------------------------------------------- */

static int node_children(const node *x, node **kids, int max) {
    int k = 0;
#define KID(c) do { if ((c) && k < max) kids[k++] = (c); } while (0)
    KID(x->a); KID(x->b); KID(x->c); KID(x->d);
    for (int i = 0; i < x->n; i++) KID(x->list[i]);
    for (int i = 0; i < x->n2; i++) KID(x->list2[i]);
    if (x->ca) {
        for (int i = 0; i < x->ca->npos; i++) KID(x->ca->pos[i]);
        for (int i = 0; i < x->ca->nkw; i++) KID(x->ca->kwv[i]);
        KID(x->ca->dyn_args);
        KID(x->ca->dyn_kwargs);
    }
#undef KID
    return k;
}
static int node_nchildren(const node *x) {
    int k = (x->a != NULL) + (x->b != NULL) + (x->c != NULL) + (x->d != NULL) + x->n + x->n2;
    if (x->ca) k += x->ca->npos + x->ca->nkw + (x->ca->dyn_args != NULL) + (x->ca->dyn_kwargs != NULL);
    return k;
}

/* Set NF_CONST (nodes.as_const may succeed: no names, calls, context filters
 * or dynamic arguments where they would be evaluated) and NF_SLICE (a slice
 * subscript inside) bottom-up, iteratively: trees can be deep. */
static void annotate(parser *P, node **roots, int nroots) {
    typedef struct { node *x; node **kids; int nk, i; } frame;
    size_t cap = 64, sp = 0;
    frame *st = amalloc(P->A, cap * sizeof *st);
    for (int r = 0; r < nroots; r++) {
        st[sp++] = (frame){roots[r], NULL, -1, 0};
        while (sp) {
            frame *f = &st[sp - 1];
            if (f->nk < 0) {
                int n = node_nchildren(f->x);
                f->kids = n ? amalloc(P->A, (size_t)n * sizeof *f->kids) : NULL;
                f->nk = node_children(f->x, f->kids, n);
            }
            if (f->i < f->nk) {
                node *c = f->kids[f->i++];
                if (sp == cap) {
                    frame *ns = amalloc(P->A, cap * 2 * sizeof *ns);
                    memcpy(ns, st, cap * sizeof *ns);
                    st = ns;
                    cap *= 2;
                }
                st[sp++] = (frame){c, NULL, -1, 0};
                continue;
            }
            node *x = f->x;
            bool kconst = true, kslice = false;
            for (int i = 0; i < f->nk; i++) {
                kconst &= (f->kids[i]->flags & NF_CONST) != 0;
                kslice |= (f->kids[i]->flags & NF_SLICE) != 0;
            }
            switch (x->t) {
            case E_CONST: kconst = true; break;
            case E_NAME: case E_CALL: kconst = false; break;
            case E_FILTER:
                if (!x->a || x->id == F_map || x->id == F_select || x->id == F_reject || x->id == F_selectattr ||
                    x->id == F_rejectattr || x->id == F_random)
                    kconst = false;
                /* fallthrough */
            case E_TEST:
                if (x->ca && (x->ca->dyn_args || x->ca->dyn_kwargs)) kconst = false;
                break;
            case E_COND: /* only the branch the test picks must be constant */
                kconst = (x->b->flags & NF_CONST) &&
                         ((x->a->flags & NF_CONST) || (x->c && (x->c->flags & NF_CONST)));
                break;
            case E_AND: case E_OR: /* the right side may be skipped */
                kconst = (x->a->flags & NF_CONST) != 0;
                break;
            case E_GETITEM: kslice |= x->b->t == E_SLICE; break;
            case E_GETATTR: case E_SLICE: case E_BIN: case E_CONCAT: case E_COMPARE:
            case E_NOT: case E_NEG: case E_POS: case E_LIST: case E_TUPLE: case E_DICT: break;
            default: kconst = false; /* statements */
            }
            x->flags = (uint8_t)((kconst ? NF_CONST : 0) | (kslice ? NF_SLICE : 0));
            sp--;
        }
    }
}

/* ---- scopes: jinja2's idtracking --------------------------------------------------- */

/* jinja2 analyses every frame (the top level, a loop body, a macro, a block
 * set...) before compiling it (idtracking.py).  A name the frame assigns
 * before reading it, that no enclosing frame knows, starts "missing": until
 * the assignment runs, a macro or loop defined in the frame reads it as
 * undefined, not as the render variable of the same name.  A name first read,
 * or assigned only in some branches of an if, reads through to the enclosing
 * frames and the render variables.  This pass finds the "missing" names of
 * each frame; the interpreter binds them to undefined on entering the frame. */

enum { SY_PARAM, SY_RESOLVE, SY_ALIAS, SY_MISSING };

typedef struct symref {
    int sym;
    uint8_t state;
    bool stored; /* assigned in the branch being analysed */
} symref;

typedef struct frame_an {
    const struct frame_an *parent;
    symref *r;
    int n, cap;
} frame_an;

#define MAX_ANALYSIS_WORK 200000000ull
static void fa_work(parser *P, int n) {
    if ((P->work += (uint64_t)n) > MAX_ANALYSIS_WORK)
        jthrow(P->E, JINJA_ERR_LIMIT, 0, "template too large to analyse (more than %llu steps)", MAX_ANALYSIS_WORK);
}
static symref *fa_find(parser *P, frame_an *f, int sym) {
    fa_work(P, f->n);
    for (int i = 0; i < f->n; i++)
        if (f->r[i].sym == sym) return &f->r[i];
    return NULL;
}
static bool fa_known(parser *P, const frame_an *f, int sym) {
    for (; f; f = f->parent) {
        fa_work(P, f->n);
        for (int i = 0; i < f->n; i++)
            if (f->r[i].sym == sym) return true;
    }
    return false;
}
static symref *fa_add(parser *P, frame_an *f, int sym, int state) {
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        symref *r = amalloc(P->A, (size_t)cap * sizeof *r);
        if (f->n) memcpy(r, f->r, (size_t)f->n * sizeof *r);
        f->r = r;
        f->cap = cap;
    }
    f->r[f->n] = (symref){sym, (uint8_t)state, false};
    return &f->r[f->n++];
}
static frame_an fa_copy(parser *P, const frame_an *f) {
    frame_an c = {f->parent, NULL, f->n, f->n};
    if (f->n) {
        c.r = amalloc(P->A, (size_t)f->n * sizeof *c.r);
        memcpy(c.r, f->r, (size_t)f->n * sizeof *c.r);
        for (int i = 0; i < c.n; i++) c.r[i].stored = false;
    }
    return c;
}
static void fa_load(parser *P, frame_an *f, int sym) {
    if (!fa_known(P, f, sym)) fa_add(P, f, sym, SY_RESOLVE);
}
static void fa_store(parser *P, frame_an *f, int sym) {
    symref *r = fa_find(P, f, sym);
    if (!r) r = fa_add(P, f, sym, fa_known(P, f->parent, sym) ? SY_ALIAS : SY_MISSING);
    r->stored = true;
}

/* every name an expression reads (iteratively: expressions can be deep) */
static void fa_loads(parser *P, frame_an *f, node *x) {
    if (!x) return;
    size_t cap = 32, sp = 0;
    node **st = amalloc(P->A, cap * sizeof *st);
    st[sp++] = x;
    while (sp) {
        node *y = st[--sp];
        if (y->t == E_NAME) fa_load(P, f, y->sym);
        int k = node_nchildren(y);
        if (!k) continue;
        if (sp + (size_t)k > cap) {
            while (sp + (size_t)k > cap) cap *= 2;
            node **ns = amalloc(P->A, cap * sizeof *ns);
            memcpy(ns, st, sp * sizeof *ns);
            st = ns;
        }
        sp += (size_t)node_children(y, st + sp, k);
    }
}
static void fa_store_target(parser *P, frame_an *f, node *t) {
    if (t->t == E_NAME) fa_store(P, f, t->sym);
    else if (t->t == S_NSREF) fa_load(P, f, t->sym);
    else
        for (int i = 0; i < t->n; i++) fa_store_target(P, f, t->list[i]);
}

typedef struct frame_job {
    node *owner; /* NULL: the top level */
    int which;   /* 0 body, 1 for-else */
    node **body;
    int n;
    node **params; /* names (or tuples) bound on entry */
    int nparams;
    bool macro;
} frame_job;
typedef struct jobvec {
    frame_job *a;
    int n, cap;
} jobvec;
static void push_job(parser *P, jobvec *v, frame_job j) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        frame_job *a = amalloc(P->A, (size_t)cap * sizeof *a);
        if (v->n) memcpy(a, v->a, (size_t)v->n * sizeof *a);
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = j;
}

static void fa_body(parser *P, frame_an *f, node **body, int n, jobvec *jobs);

/* the branches of an if: body, all elifs, else (nodes.If as jinja2 parses it) */
static void fa_if(parser *P, frame_an *f, node *x, jobvec *jobs) {
    fa_loads(P, f, x->a);
    node *last = x;
    int nelif = 0;
    while (last->n2 == 1 && last->list2[0]->t == S_IF && last->list2[0]->op == 1) {
        last = last->list2[0];
        nelif++;
    }
    frame_an b[3];
    b[0] = fa_copy(P, f);
    fa_body(P, &b[0], x->list, x->n, jobs);
    b[1] = fa_copy(P, f);
    for (node *e = x; e != last;) { /* each elif is an If with no elif/else of its own */
        e = e->list2[0];
        fa_loads(P, &b[1], e->a);
        frame_an t = fa_copy(P, &b[1]);
        fa_body(P, &t, e->list, e->n, jobs);
        for (int i = 0; i < t.n; i++) {
            symref *o = fa_find(P, &b[1], t.r[i].sym);
            if (o) {
                o->stored |= t.r[i].stored;
                continue;
            }
            int st = t.r[i].stored ? (fa_known(P, f->parent, t.r[i].sym) ? SY_ALIAS : SY_RESOLVE) : t.r[i].state;
            fa_add(P, &b[1], t.r[i].sym, st)->stored = t.r[i].stored;
        }
    }
    b[2] = fa_copy(P, f);
    fa_body(P, &b[2], last->list2, last->n2, jobs);
    (void)nelif;
    /* branch_update: refs of every branch join the frame; a name new here and
     * assigned in fewer than all three branches reads through */
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < b[k].n; i++) {
            int sym = b[k].r[i].sym;
            symref *o = fa_find(P, f, sym);
            int stores = 0, st = b[k].r[i].state;
            for (int j = 0; j < 3; j++) {
                symref *r = fa_find(P, &b[j], sym);
                if (r && r->stored) stores++;
                if (r) st = r->state; /* the last branch that has it wins */
            }
            if (o) {
                if (stores) o->stored = true;
                continue;
            }
            if (stores && stores < 3) st = fa_known(P, f->parent, sym) ? SY_ALIAS : SY_RESOLVE;
            fa_add(P, f, sym, st)->stored = stores > 0;
        }
}

static void fa_body(parser *P, frame_an *f, node **body, int n, jobvec *jobs) {
    for (int i = 0; i < n; i++) {
        node *x = body[i];
        switch (x->t) {
        case S_OUTPUT: fa_loads(P, f, x->a); break;
        case S_IF: fa_if(P, f, x, jobs); break;
        case S_FOR:
            fa_loads(P, f, x->a);
            push_job(P, jobs, (frame_job){x, 0, x->list, x->n, &x->b, 1, false});
            push_job(P, jobs, (frame_job){x, 1, x->list2, x->n2, NULL, 0, false});
            break;
        case S_SET:
            fa_loads(P, f, x->a);
            fa_store_target(P, f, x->b);
            break;
        case S_SETBLOCK:
            fa_store_target(P, f, x->b);
            push_job(P, jobs, (frame_job){x, 0, x->list, x->n, NULL, 0, false});
            break;
        case S_MACRO:
            fa_store(P, f, x->sym);
            push_job(P, jobs, (frame_job){x, 0, x->b->list, x->b->n, x->list, x->n, true});
            break;
        case S_CALLBLOCK:
            fa_loads(P, f, x->a);
            push_job(P, jobs, (frame_job){x, 0, x->b->list, x->b->n, x->list, x->n, true});
            break;
        case S_FILTERBLOCK:
            fa_loads(P, f, x->c);
            push_job(P, jobs, (frame_job){x, 0, x->list, x->n, NULL, 0, false});
            break;
        case S_WITH:
            fa_loads(P, f, x->c);
            push_job(P, jobs, (frame_job){x, 0, x->list, x->n, x->list2, x->n2, false});
            break;
        case S_SCOPE: push_job(P, jobs, (frame_job){x, 0, x->list, x->n, NULL, 0, false}); break;
        default: break;
        }
    }
}

static void fa_params(parser *P, frame_an *f, node *t) {
    if (t->t == E_NAME) {
        if (!fa_find(P, f, t->sym)) fa_add(P, f, t->sym, SY_PARAM);
    } else if (t->t == E_TUPLE) {
        for (int i = 0; i < t->n; i++) fa_params(P, f, t->list[i]);
    }
}

/* Analyse a frame, then (with it as their parent) the frames it contains. */
static void analyze_frame(parser *P, const frame_an *parent, frame_job job, int depth) {
    if (depth > MAX_PARSE_DEPTH) jthrow(P->E, JINJA_ERR_LIMIT, 0, "template nested deeper than %d levels", MAX_PARSE_DEPTH);
    frame_an f = {parent, NULL, 0, 0};
    for (int i = 0; i < job.nparams; i++) fa_params(P, &f, job.params[i]);
    if (job.macro) {
        fa_add(P, &f, P->T->sym_caller, SY_PARAM);
        fa_add(P, &f, P->T->sym_varargs, SY_PARAM);
        fa_add(P, &f, P->T->sym_kwargs, SY_PARAM);
    }
    if (job.owner && job.owner->t == S_FOR && job.which == 0) fa_add(P, &f, P->T->sym_loop, SY_PARAM);
    jobvec jobs = {0};
    fa_body(P, &f, job.body, job.n, &jobs);
    int nm = 0;
    for (int i = 0; i < f.n; i++) nm += f.r[i].state == SY_MISSING;
    int *miss = nm ? amalloc(P->A, (size_t)nm * sizeof *miss) : NULL;
    nm = 0;
    for (int i = 0; i < f.n; i++)
        if (f.r[i].state == SY_MISSING) miss[nm++] = f.r[i].sym;
    if (!job.owner) {
        P->T->miss = miss;
        P->T->nmiss = nm;
    } else if (job.which == 1) {
        job.owner->miss2 = miss;
        job.owner->nmiss2 = nm;
    } else {
        job.owner->miss = miss;
        job.owner->nmiss = nm;
    }
    for (int i = 0; i < jobs.n; i++) analyze_frame(P, &f, jobs.a[i], depth + 1);
}

/* ---- statements ------------------------------------------------------------ */

static void subparse(parser *P, const char *const *end_tokens, nvec *body);

static bool at_end_token(parser *P, const char *const *end_tokens) {
    if (!end_tokens) return false;
    for (int i = 0; end_tokens[i]; i++)
        if (tok_is(cur(P), end_tokens[i])) return true;
    return false;
}

static void parse_statements(parser *P, const char *const *end_tokens, bool drop_needle, nvec *body, int line) {
    skip_tok(P, TK_COLON);
    expect(P, TK_BLOCK_END, "%}");
    subparse(P, end_tokens, body);
    if (cur(P)->t == TK_EOF) {
        char want[200] = "";
        for (int i = 0; end_tokens[i]; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", i ? " or " : "", end_tokens[i]);
        perr(P, line, "Unexpected end of template. Jinja was looking for the following tags: %s.", want);
    }
    if (drop_needle) advance(P);
}

/* nodes.Tuple.can_assign: names, or tuples of assignable targets */
static void check_target(parser *P, const node *x, int depth) {
    if (x->t == E_NAME) return;
    if (x->t == E_TUPLE && depth < MAX_PARSE_DEPTH) {
        for (int i = 0; i < x->n; i++) check_target(P, x->list[i], depth + 1);
        return;
    }
    perr(P, x->line, "can't assign to '%s'", x->t == E_CONST ? "const" : x->t == E_TUPLE ? "tuple" : "expression");
}

static node *parse_assign_target(parser *P, bool with_tuple, bool name_only, const char *extra_end, bool with_namespace) {
    tok *t = cur(P);
    if (with_namespace && look(P)->t == TK_DOT) {
        if (t->t != TK_NAME) expect(P, TK_NAME, "name");
        node *x = mk(P, S_NSREF, t->line);
        x->sym = intern(P, t->p, t->n);
        note_name(P, t);
        advance(P);
        advance(P);
        tok *a = cur(P);
        if (a->t != TK_NAME) expect(P, TK_NAME, "name");
        x->val = mk_str(astrndup(P->A, a->p, a->n), a->n);
        advance(P);
        return x;
    }
    node *x;
    if (name_only) {
        if (t->t != TK_NAME) expect(P, TK_NAME, "name");
        x = mk(P, E_NAME, t->line);
        x->sym = intern(P, t->p, t->n);
        advance(P);
    } else {
        x = with_tuple ? parse_tuple(P, true, true, extra_end, false) : parse_primary(P);
    }
    check_target(P, x, 0);
    return x;
}

static void parse_signature(parser *P, node *x) {
    nvec args = {0}, defs = {0};
    expect(P, TK_LPAREN, "(");
    while (cur(P)->t != TK_RPAREN) {
        if (args.n) expect(P, TK_COMMA, ",");
        node *a = parse_assign_target(P, true, true, NULL, false);
        if (skip_tok(P, TK_ASSIGN)) nv_push(P, &defs, parse_expression(P, true));
        else if (defs.n) perr(P, a->line, "non-default argument follows default argument");
        nv_push(P, &args, a);
    }
    expect(P, TK_RPAREN, ")");
    x->list = args.a;
    x->n = args.n;
    x->list2 = defs.a;
    x->n2 = defs.n;
}

/* Parse the body of a macro or call block: loops outside do not reach in. */
static void parse_macro_body(parser *P, node *x, const char *const *end_tokens) {
    int saved_loop = P->loop_depth;
    P->loop_depth = 0;
    P->macros[P->nmacros++] = x;
    nvec body = {0};
    parse_statements(P, end_tokens, true, &body, x->line);
    P->nmacros--;
    P->loop_depth = saved_loop;
    x->b = mk(P, S_SCOPE, x->line);
    x->b->list = body.a;
    x->b->n = body.n;
}

static node *parse_statement(parser *P) {
    tok *t = cur(P);
    int line = t->line;
    if (t->t != TK_NAME) perr(P, line, "tag name expected");
    enter(P);
    node *x = NULL;
    static const char *const k_endfor_else[] = {"endfor", "else", NULL}, *const k_endfor[] = {"endfor", NULL},
                             *const k_if[] = {"elif", "else", "endif", NULL}, *const k_endif[] = {"endif", NULL},
                             *const k_endset[] = {"endset", NULL}, *const k_endmacro[] = {"endmacro", NULL},
                             *const k_endcall[] = {"endcall", NULL}, *const k_endfilter[] = {"endfilter", NULL},
                             *const k_endwith[] = {"endwith", NULL}, *const k_endgen[] = {"endgeneration", NULL};
    if (tok_is(t, "for")) {
        advance(P);
        x = mk(P, S_FOR, line);
        x->b = parse_assign_target(P, true, false, "in", false);
        expect_name(P, "in");
        x->a = parse_tuple(P, false, false, "recursive", false);
        if (skip_name(P, "if")) x->c = parse_expression(P, true);
        if (tok_is(cur(P), "recursive"))
            jthrow(P->E, JINJA_ERR_UNSUPPORTED, line, "recursive for loops are not supported");
        nvec body = {0}, els = {0};
        P->loop_depth++;
        parse_statements(P, k_endfor_else, false, &body, line);
        P->loop_depth--;
        bool has_else = tok_is(cur(P), "else");
        advance(P);
        if (has_else) parse_statements(P, k_endfor, true, &els, line);
        x->list = body.a;
        x->n = body.n;
        x->list2 = els.a;
        x->n2 = els.n;
    } else if (tok_is(t, "if")) {
        advance(P);
        x = mk(P, S_IF, line);
        node *curif = x;
        for (;;) {
            curif->a = parse_tuple(P, false, false, NULL, false);
            nvec body = {0};
            parse_statements(P, k_if, false, &body, line);
            curif->list = body.a;
            curif->n = body.n;
            if (tok_is(cur(P), "elif")) {
                node *e = mk(P, S_IF, cur(P)->line);
                e->op = 1; /* an elif */
                advance(P);
                curif->list2 = amalloc(P->A, sizeof(node *));
                curif->list2[0] = e;
                curif->n2 = 1;
                curif = e;
                continue;
            }
            if (tok_is(cur(P), "else")) {
                advance(P);
                nvec els = {0};
                parse_statements(P, k_endif, true, &els, line);
                curif->list2 = els.a;
                curif->n2 = els.n;
            } else {
                advance(P); /* endif */
            }
            break;
        }
    } else if (tok_is(t, "set")) {
        advance(P);
        node *target = parse_assign_target(P, true, false, NULL, true);
        if (skip_tok(P, TK_ASSIGN)) {
            x = mk(P, S_SET, line);
            x->b = target;
            x->a = parse_tuple(P, false, true, NULL, false);
        } else {
            if (target->t != E_NAME && target->t != S_NSREF)
                jthrow(P->E, JINJA_ERR_UNSUPPORTED, line, "block set to a tuple target is not supported");
            x = mk(P, S_SETBLOCK, line);
            x->b = target;
            x->c = parse_filter(P, NULL, false);
            nvec body = {0};
            parse_statements(P, k_endset, true, &body, line);
            x->list = body.a;
            x->n = body.n;
        }
    } else if (tok_is(t, "macro")) {
        advance(P);
        x = mk(P, S_MACRO, line);
        node *name = parse_assign_target(P, true, true, NULL, false);
        x->sym = name->sym;
        x->val = mk_str(P->T->syms[name->sym].p, P->T->syms[name->sym].n);
        parse_signature(P, x);
        if (P->nmacros >= MAX_PARSE_DEPTH) jthrow(P->E, JINJA_ERR_LIMIT, line, "macros nested too deeply");
        parse_macro_body(P, x, k_endmacro);
    } else if (tok_is(t, "call")) {
        advance(P);
        x = mk(P, S_CALLBLOCK, line);
        if (cur(P)->t == TK_LPAREN) parse_signature(P, x);
        x->val = mk_cstr("caller");
        x->a = parse_expression(P, true);
        if (x->a->t != E_CALL) perr(P, line, "expected call");
        if (P->nmacros >= MAX_PARSE_DEPTH) jthrow(P->E, JINJA_ERR_LIMIT, line, "macros nested too deeply");
        parse_macro_body(P, x, k_endcall);
    } else if (tok_is(t, "filter")) {
        advance(P);
        x = mk(P, S_FILTERBLOCK, line);
        x->c = parse_filter(P, NULL, true);
        nvec body = {0};
        parse_statements(P, k_endfilter, true, &body, line);
        x->list = body.a;
        x->n = body.n;
    } else if (tok_is(t, "with")) {
        advance(P);
        x = mk(P, S_WITH, line);
        nvec targets = {0}, values = {0};
        while (cur(P)->t != TK_BLOCK_END) {
            if (targets.n) expect(P, TK_COMMA, ",");
            nv_push(P, &targets, parse_assign_target(P, true, false, NULL, false));
            expect(P, TK_ASSIGN, "=");
            nv_push(P, &values, parse_expression(P, true));
        }
        x->list2 = targets.a;
        x->n2 = targets.n;
        x->c = mk(P, E_LIST, line);
        x->c->list = values.a;
        x->c->n = values.n;
        nvec body = {0};
        parse_statements(P, k_endwith, true, &body, line);
        x->list = body.a;
        x->n = body.n;
    } else if (tok_is(t, "generation")) { /* transformers' AssistantTracker: renders the body */
        advance(P);
        x = mk(P, S_SCOPE, line);
        nvec body = {0};
        parse_statements(P, k_endgen, true, &body, line);
        x->list = body.a;
        x->n = body.n;
    } else if (tok_is(t, "break") || tok_is(t, "continue")) {
        if (!P->loop_depth) perr(P, line, "'%.*s' outside loop", (int)t->n, t->p);
        x = mk(P, tok_is(t, "break") ? S_BREAK : S_CONTINUE, line);
        advance(P);
    } else if (tok_is(t, "print")) {
        advance(P);
        nvec items = {0};
        while (cur(P)->t != TK_BLOCK_END) {
            if (items.n) expect(P, TK_COMMA, ",");
            node *o = mk(P, S_OUTPUT, line);
            o->a = parse_expression(P, true);
            nv_push(P, &items, o);
        }
        x = mk(P, S_SCOPE, line); /* flattened by the caller */
        x->op = 1;
        x->list = items.a;
        x->n = items.n;
    } else if (tok_is(t, "extends") || tok_is(t, "include") || tok_is(t, "import") || tok_is(t, "from") ||
               tok_is(t, "block") || tok_is(t, "autoescape")) {
        jthrow(P->E, JINJA_ERR_UNSUPPORTED, line, "'%.*s' is not supported in chat templates", (int)t->n, t->p);
    } else {
        perr(P, line, "Encountered unknown tag '%.*s'.", (int)(t->n > 60 ? 60 : t->n), t->p);
    }
    leave(P);
    return x;
}

static void subparse(parser *P, const char *const *end_tokens, nvec *body) {
    for (;;) {
        tok *t = cur(P);
        if (t->t == TK_EOF) return;
        if (t->t == TK_DATA) {
            node *x = mk(P, S_DATA, t->line);
            x->val = mk_str(t->p, t->n);
            nv_push(P, body, x);
            advance(P);
        } else if (t->t == TK_VAR_BEGIN) {
            advance(P);
            node *x = mk(P, S_OUTPUT, t->line);
            x->a = parse_tuple(P, false, true, NULL, false);
            expect(P, TK_VAR_END, "}}");
            nv_push(P, body, x);
        } else if (t->t == TK_BLOCK_BEGIN) {
            advance(P);
            if (at_end_token(P, end_tokens)) return;
            node *x = parse_statement(P);
            if (x->t == S_SCOPE && x->op == 1) { /* print */
                for (int i = 0; i < x->n; i++) nv_push(P, body, x->list[i]);
            } else {
                nv_push(P, body, x);
            }
            expect(P, TK_BLOCK_END, "%}");
        } else {
            char b[80];
            perr(P, t->line, "unexpected '%s'", tok_desc(t, b, sizeof b));
        }
    }
}

/* ========================================================================== */
/* render context                                                               */
/* ========================================================================== */

struct scope {
    scope *parent;
    int *syms;
    jv *vals;
    int n, cap;
};

typedef struct rctx {
    jerr E;
    arena A;
    const jinja_template *T;
    jv *globals; /* by symbol: the render variables, else the builtin globals, else undefined */
    char *out;   /* malloc'd; captures (macros, block set) cut their bytes from its end */
    size_t out_n, out_cap, max_out;
    uint64_t steps, max_steps;
    int depth, max_depth;
    int line;
    jv hole; /* the captured body a filter block / block set feeds to its filter chain */
    bool const_mode; /* evaluating as jinja2's optimizer would at compile time (try_fold) */
    struct tm now;
} rctx;

/* Internal: a constant fold met something only known at render time. */
#define JINJA_IMPOSSIBLE (-100)

static _Noreturn void rfail(rctx *R, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void rfail(rctx *R, int code, const char *fmt, ...) {
    char buf[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    jthrow(&R->E, code, R->line, "%s", buf);
}
#define TYPE_ERROR(...) rfail(R, JINJA_ERR_RUNTIME, __VA_ARGS__)
#define UNSUPPORTED(...) rfail(R, JINJA_ERR_UNSUPPORTED, __VA_ARGS__)

static void step(rctx *R) {
    if (++R->steps > R->max_steps) rfail(R, JINJA_ERR_LIMIT, "step limit of %llu exceeded", (unsigned long long)R->max_steps);
}
/* Charge a linear scan of n items (dict lookup, `in`, list.index...) to the
 * step budget, so big inputs cannot make a render quadratic without bound. */
static void work(rctx *R, size_t n) {
    R->steps += n / 16;
    if (R->steps > R->max_steps) rfail(R, JINJA_ERR_LIMIT, "step limit of %llu exceeded", (unsigned long long)R->max_steps);
}
static void dive(rctx *R) {
    if (++R->depth > R->max_depth) rfail(R, JINJA_ERR_LIMIT, "nesting deeper than %d", R->max_depth);
}
static void surface(rctx *R) { R->depth--; }

static void out_put(rctx *R, const char *p, size_t n) {
    if (!n) return;
    if (R->out_n + n > R->max_out) rfail(R, JINJA_ERR_LIMIT, "output limit of %zu bytes exceeded", R->max_out);
    if (R->out_cap - R->out_n < n) {
        size_t cap = R->out_cap ? R->out_cap : 4096;
        while (cap - R->out_n < n) cap *= 2;
        char *o = realloc(R->out, cap);
        if (!o) rfail(R, JINJA_ERR_NOMEM, "out of memory");
        R->out = o;
        R->out_cap = cap;
    }
    memcpy(R->out + R->out_n, p, n);
    R->out_n += n;
}

/* ---- containers -------------------------------------------------------------- */

static jlist *new_list(rctx *R, size_t cap, int kind) {
    jlist *l = amalloc(&R->A, sizeof *l);
    memset(l, 0, sizeof *l);
    l->kind = (uint8_t)kind;
    if (cap) {
        if (cap > SIZE_MAX / 2 / sizeof *l->a) rfail(R, JINJA_ERR_LIMIT, "a list of %zu items", cap);
        l->a = amalloc(&R->A, cap * sizeof *l->a);
        l->cap = cap;
    }
    return l;
}
static void list_push(rctx *R, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *a = amalloc(&R->A, cap * sizeof *a);
        if (l->n) memcpy(a, l->a, l->n * sizeof *a);
        l->a = a;
        l->cap = cap;
    }
    l->a[l->n++] = v;
}
static jv mk_list(jlist *l) { return (jv){.k = V_LIST, .u.l = l}; }
static jv mk_tuple2(rctx *R, jv a, jv b) {
    jlist *l = new_list(R, 2, LK_TUPLE);
    l->a[0] = a;
    l->a[1] = b;
    l->n = 2;
    return mk_list(l);
}

static jdict *new_dict(rctx *R, size_t cap) {
    jdict *d = amalloc(&R->A, sizeof *d);
    memset(d, 0, sizeof *d);
    if (cap) {
        d->keys = amalloc(&R->A, cap * sizeof *d->keys);
        d->vals = amalloc(&R->A, cap * sizeof *d->vals);
        d->cap = cap;
    }
    return d;
}
static jv mk_dict(jdict *d) { return (jv){.k = V_DICT, .u.d = d}; }

static const char *tname(jv v) {
    switch (v.k) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return v.safe ? "Markup" : "str";
    case V_LIST:
        switch (v.u.l->kind) {
        case LK_TUPLE: return "tuple";
        case LK_RANGE: return "range";
        case LK_KEYS: return "dict_keys";
        case LK_VALUES: return "dict_values";
        case LK_ITEMS: return "dict_items";
        case LK_GEN: return "generator";
        default: return "list";
        }
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_MACRO: return "Macro";
    case V_FUNC: return "function";
    case V_METHOD: return "builtin_function_or_method";
    case V_LOOP: return "LoopContext";
    }
    return "object";
}

static _Noreturn void undef_error(rctx *R, jv v) {
    if (v.unsafe) rfail(R, JINJA_ERR_RUNTIME, "SecurityError: access to attribute '%.*s' is unsafe", (int)v.u.s.n, v.u.s.p);
    if (v.u.s.p) rfail(R, JINJA_ERR_RUNTIME, "UndefinedError: '%.*s' is undefined", (int)(v.u.s.n > 80 ? 80 : v.u.s.n), v.u.s.p);
    rfail(R, JINJA_ERR_RUNTIME, "UndefinedError: value is undefined");
}

static bool hashable(jv v) {
    if (v.k == V_LIST) {
        if (v.u.l->kind != LK_TUPLE) return false;
        for (size_t i = 0; i < v.u.l->n; i++)
            if (!hashable(v.u.l->a[i])) return false;
        return true;
    }
    return v.k != V_DICT;
}

/* ---- equality and ordering (Python semantics) ------------------------------ */

static bool int_eq_float(int64_t i, double f) {
    if (!(f == floor(f)) || f < -9223372036854775808.0 || f >= 9223372036854775808.0) return false;
    return (int64_t)f == i;
}

static bool py_eq(rctx *R, jv a, jv b);

static jv *dict_find(rctx *R, jdict *d, jv key) {
    work(R, d->n);
    for (size_t i = 0; i < d->n; i++)
        if (py_eq(R, d->keys[i], key)) return &d->vals[i];
    return NULL;
}
static jv *dict_find_str(rctx *R, jdict *d, const char *p, size_t n) {
    work(R, d->n);
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].k == V_STR && d->keys[i].u.s.n == n && !memcmp(d->keys[i].u.s.p, p, n)) return &d->vals[i];
    return NULL;
}
static void dict_set(rctx *R, jdict *d, jv key, jv val) {
    jv *p = dict_find(R, d, key);
    if (p) {
        *p = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *k = amalloc(&R->A, cap * sizeof *k), *v = amalloc(&R->A, cap * sizeof *v);
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof *k);
            memcpy(v, d->vals, d->n * sizeof *v);
        }
        d->keys = k;
        d->vals = v;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
}

static bool py_eq(rctx *R, jv a, jv b) {
    if (a.k == V_UNDEF || b.k == V_UNDEF) return a.k == b.k;
    if (is_num(a) && is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) return as_i(a) == as_i(b);
        if (a.k == V_FLOAT && b.k == V_FLOAT) return a.u.f == b.u.f;
        if (a.k == V_FLOAT) return int_eq_float(as_i(b), a.u.f);
        return int_eq_float(as_i(a), b.u.f);
    }
    if (a.k != b.k) return false;
    switch (a.k) {
    case V_NONE: return true;
    case V_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case V_LIST: {
        jlist *x = a.u.l, *y = b.u.l;
        if (x == y) return true;
        if (x->kind != y->kind || x->kind == LK_GEN || x->kind >= LK_KEYS || x->n != y->n) return false;
        bool eq = true;
        dive(R);
        work(R, x->n);
        for (size_t i = 0; i < x->n && eq; i++) eq = py_eq(R, x->a[i], y->a[i]);
        surface(R);
        return eq;
    }
    case V_DICT: {
        jdict *x = a.u.d, *y = b.u.d;
        if (x == y) return true;
        if (x->n != y->n) return false;
        bool eq = true;
        dive(R);
        for (size_t i = 0; i < x->n && eq; i++) {
            jv *v = dict_find(R, y, x->keys[i]);
            eq = v && py_eq(R, x->vals[i], *v);
        }
        surface(R);
        return eq;
    }
    case V_NS: return a.u.d == b.u.d;
    case V_MACRO: return a.u.m == b.u.m;
    case V_FUNC: return a.u.fn == b.u.fn;
    case V_METHOD: return a.u.me == b.u.me;
    case V_LOOP: return a.u.lp == b.u.lp;
    default: return false;
    }
}

static int str_cmp(jv a, jv b) {
    size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
    if (c) return c;
    return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
}

/* a < b as Python evaluates it; TypeError for unordered types */
static bool py_lt(rctx *R, jv a, jv b, const char *opname) {
    if (a.k == V_UNDEF) undef_error(R, a);
    if (b.k == V_UNDEF) undef_error(R, b);
    if (is_num(a) && is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) return as_i(a) < as_i(b);
        return as_f(a) < as_f(b);
    }
    if (a.k == V_STR && b.k == V_STR) return str_cmp(a, b) < 0;
    if (a.k == V_LIST && b.k == V_LIST && a.u.l->kind == b.u.l->kind &&
        (a.u.l->kind == LK_LIST || a.u.l->kind == LK_TUPLE)) {
        jlist *x = a.u.l, *y = b.u.l;
        dive(R);
        for (size_t i = 0; i < x->n && i < y->n; i++)
            if (!py_eq(R, x->a[i], y->a[i])) {
                bool r = py_lt(R, x->a[i], y->a[i], opname);
                surface(R);
                return r;
            }
        surface(R);
        return x->n < y->n;
    }
    TYPE_ERROR("TypeError: '%s' not supported between instances of '%s' and '%s'", opname, tname(a), tname(b));
}

static bool py_compare(rctx *R, jv a, int op, jv b) {
    switch (op) {
    case CMP_EQ: return py_eq(R, a, b);
    case CMP_NE: return !py_eq(R, a, b);
    case CMP_LT: return py_lt(R, a, b, "<");
    case CMP_GT: return py_lt(R, b, a, ">");
    case CMP_LE: return py_lt(R, a, b, "<=") || py_eq(R, a, b);
    case CMP_GE: return py_lt(R, b, a, ">=") || py_eq(R, a, b);
    }
    return false;
}

static bool truthy(jv v) {
    switch (v.k) {
    case V_UNDEF:
    case V_NONE: return false;
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0.0;
    case V_STR: return v.u.s.n > 0;
    case V_LIST: return v.u.l->kind == LK_GEN || v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    case V_LOOP: return v.u.lp->n > 0;
    default: return true;
    }
}

/* ---- Python text forms: str(), repr(), float repr ---------------------------- */

static void float_repr(sb *b, double x) {
    if (isnan(x)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(x)) {
        sb_puts(b, x < 0 ? "-inf" : "inf");
        return;
    }
    char buf[48];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    const char *q = buf;
    if (*q == '-') {
        sb_putc(b, '-');
        q++;
    }
    char dig[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int decpt = exp10 + 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            sb_puts(b, "0.");
            for (int i = 0; i < -decpt; i++) sb_putc(b, '0');
            sb_put(b, dig, (size_t)nd);
        } else if (decpt >= nd) {
            sb_put(b, dig, (size_t)nd);
            for (int i = nd; i < decpt; i++) sb_putc(b, '0');
            sb_puts(b, ".0");
        } else {
            sb_put(b, dig, (size_t)decpt);
            sb_putc(b, '.');
            sb_put(b, dig + decpt, (size_t)(nd - decpt));
        }
    } else {
        sb_putc(b, dig[0]);
        if (nd > 1) {
            sb_putc(b, '.');
            sb_put(b, dig + 1, (size_t)(nd - 1));
        }
        sb_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

static void str_repr(sb *b, const char *p, size_t n) {
    bool sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
    char q = (sq && !dq) ? '"' : '\'';
    sb_putc(b, q);
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t c = u8dec(p + i, n - i, &l);
        if (c == (uint32_t)q || c == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)c);
        } else if (c == '\t') sb_puts(b, "\\t");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (l == 1 && c >= 0x80) sb_printf(b, "\\x%02x", c & 0xFF); /* invalid byte */
        else if (cp_unprintable(c)) {
            if (c < 0x100) sb_printf(b, "\\x%02x", c);
            else if (c < 0x10000) sb_printf(b, "\\u%04x", c);
            else sb_printf(b, "\\U%08x", c);
        } else sb_put(b, p + i, l);
        i += l;
    }
    sb_putc(b, q);
}

static void py_repr(rctx *R, sb *b, jv v);

static void py_str(rctx *R, sb *b, jv v) {
    switch (v.k) {
    case V_UNDEF: return;
    case V_NONE: sb_puts(b, "None"); return;
    case V_BOOL: sb_puts(b, v.u.b ? "True" : "False"); return;
    case V_INT: sb_printf(b, "%lld", (long long)v.u.i); return;
    case V_FLOAT: float_repr(b, v.u.f); return;
    case V_STR: sb_put(b, v.u.s.p, v.u.s.n); return;
    default: py_repr(R, b, v);
    }
}

static void repr_items(rctx *R, sb *b, jlist *l) {
    for (size_t i = 0; i < l->n; i++) {
        if (i) sb_puts(b, ", ");
        py_repr(R, b, l->a[i]);
    }
}

static void py_repr(rctx *R, sb *b, jv v) {
    dive(R);
    switch (v.k) {
    case V_UNDEF: sb_puts(b, "Undefined"); break;
    case V_STR:
        if (v.safe) sb_puts(b, "Markup(");
        str_repr(b, v.u.s.p, v.u.s.n);
        if (v.safe) sb_putc(b, ')');
        break;
    case V_LIST: {
        jlist *l = v.u.l;
        switch (l->kind) {
        case LK_LIST: sb_putc(b, '['); repr_items(R, b, l); sb_putc(b, ']'); break;
        case LK_TUPLE:
            sb_putc(b, '(');
            repr_items(R, b, l);
            sb_puts(b, l->n == 1 ? ",)" : ")");
            break;
        case LK_RANGE:
            if (l->r2 == 1) sb_printf(b, "range(%lld, %lld)", (long long)l->r0, (long long)l->r1);
            else sb_printf(b, "range(%lld, %lld, %lld)", (long long)l->r0, (long long)l->r1, (long long)l->r2);
            break;
        case LK_KEYS: sb_puts(b, "dict_keys(["); repr_items(R, b, l); sb_puts(b, "])"); break;
        case LK_VALUES: sb_puts(b, "dict_values(["); repr_items(R, b, l); sb_puts(b, "])"); break;
        case LK_ITEMS: sb_puts(b, "dict_items(["); repr_items(R, b, l); sb_puts(b, "])"); break;
        default: UNSUPPORTED("printing a generator (Python prints its memory address)");
        }
        break;
    }
    case V_DICT:
    case V_NS:
        if (v.k == V_NS) sb_puts(b, "<Namespace ");
        sb_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) sb_puts(b, ", ");
            py_repr(R, b, v.u.d->keys[i]);
            sb_puts(b, ": ");
            py_repr(R, b, v.u.d->vals[i]);
        }
        sb_putc(b, '}');
        if (v.k == V_NS) sb_putc(b, '>');
        break;
    case V_MACRO: sb_printf(b, "<Macro '%.*s'>", (int)v.u.m->def->val.u.s.n, v.u.m->def->val.u.s.p); break;
    case V_LOOP: sb_printf(b, "<LoopContext %zu/%zu>", v.u.lp->i + 1, v.u.lp->n); break;
    case V_FUNC:
    case V_METHOD: UNSUPPORTED("printing a function (Python prints its memory address)");
    default: py_str(R, b, v);
    }
    surface(R);
}

static jv to_str(rctx *R, jv v) {
    if (v.k == V_STR) return mk_str(v.u.s.p, v.u.s.n);
    sb b;
    sb_init(&b, &R->A);
    py_str(R, &b, v);
    return mk_str(b.n ? b.p : "", b.n);
}

/* markupsafe.escape */
static jv html_escape(rctx *R, jv s) {
    sb b;
    sb_init(&b, &R->A);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        switch (c) {
        case '&': sb_puts(&b, "&amp;"); break;
        case '<': sb_puts(&b, "&lt;"); break;
        case '>': sb_puts(&b, "&gt;"); break;
        case '\'': sb_puts(&b, "&#39;"); break;
        case '"': sb_puts(&b, "&#34;"); break;
        default: sb_putc(&b, c);
        }
    }
    jv r = mk_str(b.n ? b.p : "", b.n);
    r.safe = 1;
    return r;
}

/* ---- json.dumps ---------------------------------------------------------------- */

typedef struct jsonopt {
    bool ensure_ascii, sort_keys;
    bool indent_on;
    jv indent;
    jv item_sep, key_sep;
} jsonopt;

static void json_str(sb *b, const char *p, size_t n, bool ensure_ascii) {
    sb_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (c == '\t') sb_puts(b, "\\t");
        else if (c == '\b') sb_puts(b, "\\b");
        else if (c == '\f') sb_puts(b, "\\f");
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else if (c >= 0x80 && ensure_ascii) {
            size_t l;
            uint32_t cp = u8dec(p + i, n - i, &l);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                sb_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else sb_printf(b, "\\u%04x", cp);
            i += l;
            continue;
        } else sb_putc(b, (char)c);
        i++;
    }
    sb_putc(b, '"');
}

static void json_newline(rctx *R, sb *b, const jsonopt *o, int level) {
    sb_putc(b, '\n');
    for (int i = 0; i < level; i++) py_str(R, b, o->indent);
}

static void json_float(sb *b, double f) {
    if (isnan(f)) sb_puts(b, "NaN");
    else if (isinf(f)) sb_puts(b, f < 0 ? "-Infinity" : "Infinity");
    else float_repr(b, f);
}

static int cmp_keys_ctx_sort(rctx *R, jv a, jv b) {
    if (py_lt(R, a, b, "<")) return -1;
    if (py_lt(R, b, a, "<")) return 1;
    return 0;
}

static void py_json(rctx *R, sb *b, jv v, const jsonopt *o, int level) {
    dive(R);
    step(R);
    switch (v.k) {
    case V_NONE: sb_puts(b, "null"); break;
    case V_BOOL: sb_puts(b, v.u.b ? "true" : "false"); break;
    case V_INT: sb_printf(b, "%lld", (long long)v.u.i); break;
    case V_FLOAT: json_float(b, v.u.f); break;
    case V_STR: json_str(b, v.u.s.p, v.u.s.n, o->ensure_ascii); break;
    case V_LIST:
        if (v.u.l->kind == LK_LIST || v.u.l->kind == LK_TUPLE) {
            jlist *l = v.u.l;
            if (!l->n) {
                sb_puts(b, "[]");
                break;
            }
            sb_putc(b, '[');
            if (o->indent_on) json_newline(R, b, o, level + 1);
            for (size_t i = 0; i < l->n; i++) {
                if (i) {
                    py_str(R, b, o->item_sep);
                    if (o->indent_on) json_newline(R, b, o, level + 1);
                }
                py_json(R, b, l->a[i], o, level + 1);
            }
            if (o->indent_on) json_newline(R, b, o, level);
            sb_putc(b, ']');
            break;
        }
        TYPE_ERROR("TypeError: Object of type %s is not JSON serializable", tname(v));
    case V_DICT: {
        jdict *d = v.u.d;
        if (!d->n) {
            sb_puts(b, "{}");
            break;
        }
        size_t *order = amalloc(&R->A, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) /* insertion sort: stable, and keys are few */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && cmp_keys_ctx_sort(R, d->keys[order[j]], d->keys[order[j - 1]]) < 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        sb_putc(b, '{');
        if (o->indent_on) json_newline(R, b, o, level + 1);
        for (size_t k = 0; k < d->n; k++) {
            jv key = d->keys[order[k]];
            if (k) {
                py_str(R, b, o->item_sep);
                if (o->indent_on) json_newline(R, b, o, level + 1);
            }
            if (key.k == V_STR) json_str(b, key.u.s.p, key.u.s.n, o->ensure_ascii);
            else if (key.k == V_INT) sb_printf(b, "\"%lld\"", (long long)key.u.i);
            else if (key.k == V_FLOAT) {
                sb_putc(b, '"');
                json_float(b, key.u.f);
                sb_putc(b, '"');
            } else if (key.k == V_BOOL) sb_puts(b, key.u.b ? "\"true\"" : "\"false\"");
            else if (key.k == V_NONE) sb_puts(b, "\"null\"");
            else TYPE_ERROR("TypeError: keys must be str, int, float, bool or None, not %s", tname(key));
            py_str(R, b, o->key_sep);
            py_json(R, b, d->vals[order[k]], o, level + 1);
        }
        if (o->indent_on) json_newline(R, b, o, level);
        sb_putc(b, '}');
        break;
    }
    default: TYPE_ERROR("TypeError: Object of type %s is not JSON serializable", tname(v));
    }
    surface(R);
}

/* ---- cJSON → values -------------------------------------------------------------- */

/* The number lexemes of a JSON text in document order.  cJSON keeps numbers
 * only as doubles; with the text at hand, "1.0" stays a float and "1" an int,
 * as Python's json.loads has them. */
typedef struct numlex {
    const char *p;
    size_t n;
} numlex;
typedef struct jsonnums {
    numlex *a;
    size_t n, k;
} jsonnums;

static void json_number_lexemes(rctx *R, const char *s, size_t n, jsonnums *out) {
    size_t cap = 16;
    out->a = amalloc(&R->A, cap * sizeof *out->a);
    out->n = out->k = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i += s[i] == '\\' ? 2 : 1) {}
            i++;
        } else if (c == '-' || is_digit(c)) {
            size_t b = i++;
            while (i < n && (is_digit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-')) i++;
            if (out->n == cap) {
                numlex *a = amalloc(&R->A, cap * 2 * sizeof *a);
                memcpy(a, out->a, cap * sizeof *a);
                out->a = a;
                cap *= 2;
            }
            out->a[out->n++] = (numlex){s + b, i - b};
        } else {
            i++;
        }
    }
}

static jv json_number(rctx *R, const cJSON *j, jsonnums *nums) {
    double d = j->valuedouble;
    if (!nums || nums->k >= nums->n) { /* no text: integral doubles within 2^53 are ints */
        if (isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0) return mk_int((int64_t)d);
        return mk_float(d);
    }
    numlex lx = nums->a[nums->k++];
    for (size_t i = 0; i < lx.n; i++)
        if (lx.p[i] == '.' || lx.p[i] == 'e' || lx.p[i] == 'E') return mk_float(d);
    bool neg = lx.p[0] == '-';
    uint64_t v = 0;
    for (size_t i = neg; i < lx.n; i++) {
        int dg = lx.p[i] - '0';
        if (dg < 0 || dg > 9 || v > (UINT64_MAX - (uint64_t)dg) / 10) UNSUPPORTED("JSON integer %.*s beyond 64 bits", (int)(lx.n > 40 ? 40 : lx.n), lx.p);
        v = v * 10 + (uint64_t)dg;
    }
    if (v > (uint64_t)INT64_MAX + neg) UNSUPPORTED("JSON integer %.*s beyond 64 bits", (int)(lx.n > 40 ? 40 : lx.n), lx.p);
    return mk_int(neg ? (int64_t)(0 - v) : (int64_t)v);
}

static jv from_json(rctx *R, const cJSON *j, jsonnums *nums) {
    dive(R);
    jv v;
    if (cJSON_IsNull(j)) v = mk_none();
    else if (cJSON_IsTrue(j)) v = mk_bool(true);
    else if (cJSON_IsFalse(j)) v = mk_bool(false);
    else if (cJSON_IsNumber(j)) v = json_number(R, j, nums);
    else if (cJSON_IsString(j)) v = mk_cstr(j->valuestring ? j->valuestring : "");
    else if (cJSON_IsArray(j)) {
        jlist *l = new_list(R, (size_t)cJSON_GetArraySize(j), LK_LIST);
        for (const cJSON *c = j->child; c; c = c->next) list_push(R, l, from_json(R, c, nums));
        v = mk_list(l);
    } else if (cJSON_IsObject(j)) {
        jdict *d = new_dict(R, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next)
            dict_set(R, d, mk_cstr(c->string ? c->string : ""), from_json(R, c, nums));
        v = mk_dict(d);
    } else {
        UNSUPPORTED("JSON value of cJSON type %d", j->type);
    }
    surface(R);
    return v;
}

/* ========================================================================== */
/* strings: code points, slicing, case                                         */
/* ========================================================================== */

static bool is_ascii(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] >= 0x80) return false;
    return true;
}
static size_t u8count(const char *p, size_t n) {
    if (is_ascii(p, n)) return n;
    size_t k = 0, l;
    for (size_t i = 0; i < n; i += l, k++) u8dec(p + i, n - i, &l);
    return k;
}
/* byte offsets of every code point, plus the end: offs[0..count] */
static size_t *u8offsets(rctx *R, const char *p, size_t n, size_t *count) {
    size_t c = u8count(p, n);
    size_t *o = amalloc(&R->A, (c + 1) * sizeof *o);
    size_t i = 0, k = 0, l;
    for (; i < n; i += l) {
        o[k++] = i;
        u8dec(p + i, n - i, &l);
    }
    o[k] = n;
    *count = c;
    return o;
}

static jv str_from_sb(sb *b, bool safe) {
    jv r = mk_str(b->n ? b->p : "", b->n);
    r.safe = safe;
    return r;
}

enum { CASE_LOWER, CASE_UPPER, CASE_SWAP, CASE_PYTITLE, CASE_CAPITALIZE };

static void put_cp(sb *b, uint32_t c) {
    char u[4];
    sb_put(b, u, u8enc(c, u));
}
static void put_upper(sb *b, uint32_t c, bool title) {
    if (c == 0xDF) sb_puts(b, title ? "Ss" : "SS");
    else if (c == 0x149) sb_puts(b, "\xCA\xBCN");
    else put_cp(b, cp_upper(c));
}
static void put_lower(sb *b, uint32_t c) {
    if (c == 0x130) sb_puts(b, "i\xCC\x87");
    else put_cp(b, cp_lower(c));
}

static jv str_case(rctx *R, jv s, int mode) {
    sb b;
    sb_init(&b, &R->A);
    bool prev_cased = false, first = true;
    for (size_t i = 0, l; i < s.u.s.n; i += l) {
        uint32_t c = u8dec(s.u.s.p + i, s.u.s.n - i, &l);
        if (l == 1 && c >= 0x80) { /* invalid byte: keep */
            sb_putc(&b, s.u.s.p[i]);
            prev_cased = false;
            first = false;
            continue;
        }
        switch (mode) {
        case CASE_LOWER: put_lower(&b, c); break;
        case CASE_UPPER: put_upper(&b, c, false); break;
        case CASE_SWAP:
            if (cp_isupper(c)) put_lower(&b, c);
            else if (cp_islower(c)) put_upper(&b, c, false);
            else put_cp(&b, c);
            break;
        case CASE_PYTITLE:
            if (cp_iscased(c)) {
                if (prev_cased) put_lower(&b, c);
                else put_upper(&b, c, true);
                prev_cased = true;
            } else {
                put_cp(&b, c);
                prev_cased = false;
            }
            break;
        case CASE_CAPITALIZE:
            if (first) put_upper(&b, c, true);
            else put_lower(&b, c);
            break;
        }
        first = false;
    }
    return str_from_sb(&b, s.safe);
}

/* Python slice semantics (PySlice_AdjustIndices). */
static int64_t slice_arg(rctx *R, jv v) {
    if (!is_intlike(v))
        TYPE_ERROR("TypeError: slice indices must be integers or None or have an __index__ method");
    return as_i(v);
}
static size_t slice_indices(rctx *R, int64_t len, jv jstart, jv jstop, jv jstep, int64_t *start, int64_t *stepp) {
    int64_t step = jstep.k == V_NONE ? 1 : slice_arg(R, jstep);
    if (step == 0) TYPE_ERROR("ValueError: slice step cannot be zero");
    if (step < -INT64_MAX) step = -INT64_MAX;
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? len - 1 : len;
    int64_t st, sp;
    if (jstart.k == V_NONE) st = step < 0 ? upper : lower;
    else {
        st = slice_arg(R, jstart);
        if (st < 0) st = st < -len ? lower : st + len;
        if (st < lower) st = lower;
        else if (st > upper) st = upper;
    }
    if (jstop.k == V_NONE) sp = step < 0 ? lower : upper;
    else {
        sp = slice_arg(R, jstop);
        if (sp < 0) sp = sp < -len ? lower : sp + len;
        if (sp < lower) sp = lower;
        else if (sp > upper) sp = upper;
    }
    int64_t count;
    if (step < 0) count = sp < st ? (st - sp - 1) / (-step) + 1 : 0;
    else count = st < sp ? (sp - st - 1) / step + 1 : 0;
    *start = st;
    *stepp = step;
    return (size_t)count;
}

/* ========================================================================== */
/* scopes, iteration, length                                                    */
/* ========================================================================== */

static scope *scope_new(rctx *R, scope *parent) {
    scope *s = amalloc(&R->A, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}
static jv lookup(rctx *R, scope *s, int sym) {
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (s->syms[i] == sym) return s->vals[i];
    return R->globals[sym];
}
static void scope_set(rctx *R, scope *s, int sym, jv v) {
    for (int i = 0; i < s->n; i++)
        if (s->syms[i] == sym) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 4;
        int *sy = amalloc(&R->A, (size_t)cap * sizeof *sy);
        jv *va = amalloc(&R->A, (size_t)cap * sizeof *va);
        if (s->n) {
            memcpy(sy, s->syms, (size_t)s->n * sizeof *sy);
            memcpy(va, s->vals, (size_t)s->n * sizeof *va);
        }
        s->syms = sy;
        s->vals = va;
        s->cap = cap;
    }
    s->syms[s->n] = sym;
    s->vals[s->n++] = v;
}

/* Bind the names a frame assigns before reading (analyze_frame) to undefined. */
static scope *enter_frame(rctx *R, scope *s, const int *miss, int n) {
    for (int i = 0; i < n; i++) scope_set(R, s, miss[i], (jv){.k = V_UNDEF, .u.s = {R->T->syms[miss[i]].p, R->T->syms[miss[i]].n}});
    return s;
}

typedef struct jiter {
    jv *a;
    size_t n;
} jiter;

static jiter str_chars(rctx *R, jv v) {
    size_t c;
    size_t *o = u8offsets(R, v.u.s.p, v.u.s.n, &c);
    jiter it = {amalloc(&R->A, (c ? c : 1) * sizeof(jv)), c};
    for (size_t i = 0; i < c; i++) it.a[i] = mk_str(v.u.s.p + o[i], o[i + 1] - o[i]);
    return it;
}

static jiter iterate(rctx *R, jv v) {
    switch (v.k) {
    case V_UNDEF: return (jiter){NULL, 0};
    case V_STR: return str_chars(R, v);
    case V_LIST: {
        jlist *l = v.u.l;
        if (l->kind == LK_GEN) { /* one-shot, like the Python generator */
            if (l->err) TYPE_ERROR("TypeError: %s", l->err);
            jiter it = {l->a ? l->a + l->pos : NULL, l->n - l->pos};
            l->pos = l->n;
            return it;
        }
        return (jiter){l->a, l->n};
    }
    case V_DICT: return (jiter){v.u.d->keys, v.u.d->n};
    case V_LOOP: UNSUPPORTED("iterating over a loop object");
    default: TYPE_ERROR("TypeError: '%s' object is not iterable", tname(v));
    }
}

static jv list_of(rctx *R, jiter it, int kind) {
    jlist *l = new_list(R, it.n, kind);
    if (it.n) memcpy(l->a, it.a, it.n * sizeof(jv));
    l->n = it.n;
    return mk_list(l);
}

static int64_t py_len(rctx *R, jv v) {
    switch (v.k) {
    case V_UNDEF: return 0;
    case V_STR: return (int64_t)u8count(v.u.s.p, v.u.s.n);
    case V_LIST:
        if (v.u.l->kind == LK_GEN) break;
        return (int64_t)v.u.l->n;
    case V_DICT: return (int64_t)v.u.d->n;
    case V_LOOP: return (int64_t)v.u.lp->n;
    default: break;
    }
    TYPE_ERROR("TypeError: object of type '%s' has no len()", tname(v));
}

/* ========================================================================== */
/* attributes and items (jinja2 sandbox getattr/getitem)                        */
/* ========================================================================== */

#define STR_METHODS(X)                                                                                 \
    X(capitalize) X(center) X(count) X(endswith) X(find) X(format) X(index) X(isalnum) X(isalpha)     \
    X(isdigit) X(islower) X(isspace) X(isupper) X(join) X(ljust) X(lower) X(lstrip) X(partition)      \
    X(removeprefix) X(removesuffix) X(replace) X(rfind) X(rindex) X(rjust) X(rpartition) X(rsplit)    \
    X(rstrip) X(split) X(splitlines) X(startswith) X(strip) X(swapcase) X(title) X(upper) X(zfill)
#define X_SM(n) M_S_##n,
#define X_SN(n) #n,
enum { STR_METHODS(X_SM) M_S_COUNT_ };
static const char *const k_str_methods[] = {STR_METHODS(X_SN)};
enum { M_D_GET = M_S_COUNT_, M_D_ITEMS, M_D_KEYS, M_D_VALUES, M_D_COPY, M_L_COUNT, M_L_INDEX, M_L_COPY, M_L_POP,
       M_L_CLEAR, M_LOOP_CYCLE, M_LOOP_CHANGED };
static const char *const k_dict_methods[] = {"get", "items", "keys", "values", "copy"};
static const char *const k_list_methods[] = {"count", "index", "copy", "pop", "clear"};

/* Python attributes this interpreter does not implement: an error, not undefined. */
static const char *const k_str_unimpl[] = {"casefold", "encode", "expandtabs", "format_map", "isascii",
                                            "isdecimal", "isidentifier", "isnumeric", "isprintable", "istitle",
                                            "maketrans", "translate", NULL};
static const char *const k_num_unimpl[] = {"real", "imag", "conjugate", "bit_length", "bit_count", "to_bytes",
                                            "from_bytes", "as_integer_ratio", "numerator", "denominator",
                                            "is_integer", "hex", "fromhex", NULL};
/* refused by ImmutableSandboxedEnvironment (modifies_known_mutable) */
static const char *const k_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const k_list_unsafe[] = {"append", "reverse", "insert", "sort", "extend", "remove", NULL};

static bool in_names(const char *const *names, const char *p, size_t n) {
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], p, n)) return true;
    return false;
}

static jv mk_method(rctx *R, jv self, int id) {
    jmethod *m = amalloc(&R->A, sizeof *m);
    m->self = self;
    m->id = id;
    return (jv){.k = V_METHOD, .u.me = m};
}
static jv mk_unsafe(const char *p, size_t n) {
    jv u = {.k = V_UNDEF, .unsafe = 1};
    u.u.s.p = p;
    u.u.s.n = n;
    return u;
}
static jv undef_named(const char *p, size_t n) {
    jv u = {.k = V_UNDEF};
    u.u.s.p = p;
    u.u.s.n = n;
    return u;
}

static jv loop_attr(rctx *R, jv lv, const char *p, size_t n) {
    jloop *lp = lv.u.lp;
#define IS(s) (n == strlen(s) && !memcmp(p, s, n))
    if (IS("index")) return mk_int((int64_t)lp->i + 1);
    if (IS("index0")) return mk_int((int64_t)lp->i);
    if (IS("revindex")) return mk_int((int64_t)(lp->n - lp->i));
    if (IS("revindex0")) return mk_int((int64_t)(lp->n - lp->i - 1));
    if (IS("first")) return mk_bool(lp->i == 0);
    if (IS("last")) return mk_bool(lp->i + 1 == lp->n);
    if (IS("length")) return mk_int((int64_t)lp->n);
    if (IS("depth")) return mk_int(1);
    if (IS("depth0")) return mk_int(0);
    if (IS("previtem")) return lp->i > 0 ? lp->items[lp->i - 1] : mk_undef("there is no previous item");
    if (IS("nextitem")) return lp->i + 1 < lp->n ? lp->items[lp->i + 1] : mk_undef("there is no next item");
    if (IS("cycle")) return mk_method(R, lv, M_LOOP_CYCLE);
    if (IS("changed")) return mk_method(R, lv, M_LOOP_CHANGED);
#undef IS
    return undef_named(p, n);
}

static bool is_dunder(const char *p, size_t n) { return n >= 4 && p[0] == '_' && p[1] == '_' && p[n - 2] == '_' && p[n - 1] == '_'; }

/* The attribute side of a lookup: methods and attributes of the Python
 * object; `found` false means there is no such attribute. */
static jv py_getattr(rctx *R, jv obj, const char *p, size_t n, bool *found) {
    *found = true;
    int id;
    switch (obj.k) {
    case V_STR:
        if ((id = lookup_name(k_str_methods, M_S_COUNT_, p, n)) >= 0) return mk_method(R, obj, id);
        if (in_names(k_str_unimpl, p, n)) UNSUPPORTED("str.%.*s is not supported", (int)n, p);
        break;
    case V_DICT:
        if ((id = lookup_name(k_dict_methods, 5, p, n)) >= 0) return mk_method(R, obj, M_D_GET + id);
        if (in_names(k_dict_unsafe, p, n)) return mk_unsafe(p, n);
        if (n == 8 && !memcmp(p, "fromkeys", 8)) UNSUPPORTED("dict.fromkeys is not supported");
        break;
    case V_LIST: {
        int kind = obj.u.l->kind;
        if (kind == LK_LIST || kind == LK_TUPLE || kind == LK_RANGE) {
            id = lookup_name(k_list_methods, 5, p, n);
            if (id >= 0 && (kind == LK_LIST || id <= 1)) return mk_method(R, obj, M_L_COUNT + id);
            if (kind == LK_LIST && in_names(k_list_unsafe, p, n)) return mk_unsafe(p, n);
        }
        break;
    }
    case V_NS: {
        jv *v = dict_find_str(R, obj.u.d, p, n);
        if (v) return *v;
        break;
    }
    case V_LOOP: {
        jv v = loop_attr(R, obj, p, n);
        if (v.k != V_UNDEF || v.u.s.p != p) return v;
        break;
    }
    case V_MACRO:
        if ((n == 4 && !memcmp(p, "name", 4)) || (n == 9 && !memcmp(p, "arguments", 9)) ||
            (n == 12 && !memcmp(p, "catch_kwargs", 12)) || (n == 13 && !memcmp(p, "catch_varargs", 13)) ||
            (n == 6 && !memcmp(p, "caller", 6)))
            UNSUPPORTED("macro attribute '%.*s' is not supported", (int)n, p);
        break;
    case V_INT:
    case V_FLOAT:
    case V_BOOL:
        if (in_names(k_num_unimpl, p, n)) UNSUPPORTED("number attribute '%.*s' is not supported", (int)n, p);
        break;
    default: break;
    }
    *found = false;
    return undef_named(p, n);
}

/* obj.name: the attribute first, then obj['name'] (Environment.getattr). */
static jv get_attr(rctx *R, jv obj, const char *p, size_t n) {
    if (obj.k == V_UNDEF) undef_error(R, obj);
    if (is_dunder(p, n)) return mk_unsafe(p, n);
    bool found;
    jv v = py_getattr(R, obj, p, n, &found);
    if (found) return v;
    if (obj.k == V_DICT) {
        jv *x = dict_find_str(R, obj.u.d, p, n);
        if (x) return *x;
    }
    return undef_named(p, n);
}

static jv get_slice(rctx *R, jv obj, jv a, jv b, jv c, bool via_getitem) {
    int64_t start, step;
    if (obj.k == V_STR) {
        size_t cnt;
        size_t *o = u8offsets(R, obj.u.s.p, obj.u.s.n, &cnt);
        size_t k = slice_indices(R, (int64_t)cnt, a, b, c, &start, &step);
        if (step == 1) {
            jv r = mk_str(obj.u.s.p + o[start], o[start + (int64_t)k] - o[start]);
            r.safe = obj.safe;
            return r;
        }
        sb s;
        sb_init(&s, &R->A);
        for (size_t i = 0; i < k; i++) {
            int64_t j = start + (int64_t)i * step;
            sb_put(&s, obj.u.s.p + o[j], o[j + 1] - o[j]);
        }
        return str_from_sb(&s, obj.safe);
    }
    if (obj.k == V_LIST && (obj.u.l->kind == LK_LIST || obj.u.l->kind == LK_TUPLE || obj.u.l->kind == LK_RANGE)) {
        jlist *l = obj.u.l;
        size_t k = slice_indices(R, (int64_t)l->n, a, b, c, &start, &step);
        jlist *r = new_list(R, k, l->kind);
        for (size_t i = 0; i < k; i++) r->a[i] = l->a[start + (int64_t)i * step];
        r->n = k;
        if (l->kind == LK_RANGE) {
            r->r0 = l->r0 + start * l->r2;
            r->r2 = l->r2 * step;
            r->r1 = r->r0 + (int64_t)k * r->r2;
        }
        return mk_list(r);
    }
    /* jinja2 compiles slices to a plain Python subscript, not Environment.getitem
     * (which its optimizer uses on constants) */
    if (obj.k == V_UNDEF) undef_error(R, obj);
    if (via_getitem) return mk_undef(NULL);
    if (obj.k == V_DICT) TYPE_ERROR("TypeError: unhashable type: 'slice'");
    TYPE_ERROR("TypeError: '%s' object is not subscriptable", tname(obj));
}

/* obj[key]: the item first, then the attribute for string keys (Environment.getitem). */
static jv get_item(rctx *R, jv obj, jv key) {
    switch (obj.k) {
    case V_UNDEF: undef_error(R, obj);
    case V_DICT:
        if (hashable(key)) {
            jv *v = dict_find(R, obj.u.d, key);
            if (v) return *v;
        }
        break;
    case V_LIST: {
        jlist *l = obj.u.l;
        if (is_intlike(key) && (l->kind == LK_LIST || l->kind == LK_TUPLE || l->kind == LK_RANGE)) {
            int64_t i = as_i(key);
            if (i < 0) i += (int64_t)l->n;
            if (i >= 0 && (size_t)i < l->n) return l->a[i];
            return mk_undef(NULL);
        }
        break;
    }
    case V_STR:
        if (is_intlike(key)) {
            size_t cnt;
            size_t *o = u8offsets(R, obj.u.s.p, obj.u.s.n, &cnt);
            int64_t i = as_i(key);
            if (i < 0) i += (int64_t)cnt;
            if (i < 0 || (size_t)i >= cnt) return mk_undef(NULL);
            jv r = mk_str(obj.u.s.p + o[i], o[i + 1] - o[i]);
            r.safe = obj.safe;
            return r;
        }
        break;
    default: break;
    }
    if (key.k == V_STR) {
        if (is_dunder(key.u.s.p, key.u.s.n)) return mk_unsafe(key.u.s.p, key.u.s.n);
        bool found;
        jv v = py_getattr(R, obj, key.u.s.p, key.u.s.n, &found);
        if (found) return v;
        return undef_named(key.u.s.p, key.u.s.n);
    }
    return mk_undef(NULL);
}

/* make_attrgetter: "a.b.0" → getitem per part, digit parts as ints */
static jv attr_path(rctx *R, jv item, jv attr, jv dflt) {
    if (attr.k != V_STR) {
        item = get_item(R, item, attr);
        if (dflt.k != V_NONE && dflt.k != V_UNDEF && item.k == V_UNDEF) item = dflt;
        return item;
    }
    const char *p = attr.u.s.p, *e = p + attr.u.s.n;
    for (;;) {
        const char *d = memchr(p, '.', (size_t)(e - p));
        if (!d) d = e;
        bool digits = d > p;
        for (const char *q = p; q < d; q++)
            if (!is_digit(*q)) digits = false;
        jv key;
        if (digits && d - p < 18) {
            int64_t v = 0;
            for (const char *q = p; q < d; q++) v = v * 10 + (*q - '0');
            key = mk_int(v);
        } else key = mk_str(p, (size_t)(d - p));
        item = get_item(R, item, key);
        if (dflt.k != V_NONE && dflt.k != V_UNDEF && item.k == V_UNDEF) item = dflt;
        if (d == e) return item;
        p = d + 1;
    }
}

/* ========================================================================== */
/* calls: arguments and binding                                                 */
/* ========================================================================== */

typedef struct args {
    jv *pos;
    int npos;
    const char **kn;
    size_t *kl;
    jv *kv;
    int nkw;
} args;

/* An argument the caller did not pass (distinct from a passed Undefined). */
#define NOT_GIVEN ((jv){.k = V_UNDEF, .unsafe = 0xFF})
static bool given(jv v) { return !(v.k == V_UNDEF && v.unsafe == 0xFF); }

/* Bind a->pos and a->kw to the parameters names[0..np) like a Python call. */
static void bind(rctx *R, const char *fname, const char *const *names, int np, const args *a, jv *out) {
    for (int i = 0; i < np; i++) out[i] = NOT_GIVEN;
    if (a->npos > np) TYPE_ERROR("TypeError: %s() takes at most %d arguments (%d given)", fname, np, a->npos);
    for (int i = 0; i < a->npos; i++) out[i] = a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int i = lookup_name(names, np, a->kn[k], a->kl[k]);
        if (i < 0)
            TYPE_ERROR("TypeError: %s() got an unexpected keyword argument '%.*s'", fname, (int)a->kl[k], a->kn[k]);
        if (given(out[i])) TYPE_ERROR("TypeError: %s() got multiple values for argument '%s'", fname, names[i]);
        out[i] = a->kv[k];
    }
}
static jv arg_or(jv v, jv dflt) { return given(v) ? v : dflt; }

static int64_t want_int(rctx *R, jv v, const char *what) {
    if (!is_intlike(v)) TYPE_ERROR("TypeError: %s must be an integer, not '%s'", what, tname(v));
    return as_i(v);
}
static jv want_str(rctx *R, jv v, const char *what) {
    if (v.k != V_STR) TYPE_ERROR("TypeError: %s must be str, not %s", what, tname(v));
    return v;
}

/* ========================================================================== */
/* str methods                                                                  */
/* ========================================================================== */

static bool cp_in(uint32_t c, jv chars) {
    for (size_t i = 0, l; i < chars.u.s.n; i += l)
        if (u8dec(chars.u.s.p + i, chars.u.s.n - i, &l) == c) return true;
    return false;
}

/* str.strip family: which = 1 left, 2 right, 3 both; chars NOT_GIVEN/None = whitespace */
static jv str_strip(rctx *R, jv s, jv chars, int which) {
    bool ws = !given(chars) || chars.k == V_NONE;
    if (!ws) want_str(R, chars, "strip arg");
    const char *p = s.u.s.p;
    size_t b = 0, e = s.u.s.n;
    if (which & 1)
        while (b < e) {
            size_t l;
            uint32_t c = u8dec(p + b, e - b, &l);
            if (ws ? !py_isspace(c) : !cp_in(c, chars)) break;
            b += l;
        }
    if (which & 2)
        while (e > b) {
            size_t k;
            uint32_t c = prev_cp(p, b, e, &k);
            if (ws ? !py_isspace(c) : !cp_in(c, chars)) break;
            e = k;
        }
    jv r = mk_str(p + b, e - b);
    r.safe = s.safe;
    return r;
}

static const char *memmem_(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    if (hn < nn) return NULL;
    return memmem(h, hn, n, nn);
}
static const char *memrmem_(const char *h, size_t hn, const char *n, size_t nn) {
    if (hn < nn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (!memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

static jv str_split(rctx *R, jv s, jv sep, jv maxsplit, bool right) {
    int64_t maxs = given(maxsplit) ? want_int(R, maxsplit, "maxsplit") : -1;
    jlist *l = new_list(R, 0, LK_LIST);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (!given(sep) || sep.k == V_NONE) {
        if (!right) {
            size_t i = skip_ws(p, n, 0);
            while (i < n) {
                if (maxs >= 0 && (int64_t)l->n == maxs) {
                    list_push(R, l, mk_str(p + i, n - i));
                    break;
                }
                size_t j = i;
                while (j < n && !ws_len(p, n, j)) j++;
                list_push(R, l, mk_str(p + i, j - i));
                i = skip_ws(p, n, j);
            }
        } else {
            size_t e = rstrip_end(p, 0, n);
            jlist *rev = new_list(R, 0, LK_LIST);
            while (e > 0) {
                if (maxs >= 0 && (int64_t)rev->n == maxs) {
                    list_push(R, rev, mk_str(p, e));
                    break;
                }
                size_t b = e, k;
                while (b > 0 && !py_isspace(prev_cp(p, 0, b, &k))) b = k;
                list_push(R, rev, mk_str(p + b, e - b));
                e = rstrip_end(p, 0, b);
            }
            for (size_t i = rev->n; i-- > 0;) list_push(R, l, rev->a[i]);
        }
        return mk_list(l);
    }
    want_str(R, sep, "separator");
    if (!sep.u.s.n) TYPE_ERROR("ValueError: empty separator");
    if (!right) {
        size_t i = 0;
        for (;;) {
            const char *f = (maxs >= 0 && (int64_t)l->n == maxs) ? NULL : memmem_(p + i, n - i, sep.u.s.p, sep.u.s.n);
            if (!f) {
                list_push(R, l, mk_str(p + i, n - i));
                break;
            }
            list_push(R, l, mk_str(p + i, (size_t)(f - (p + i))));
            i = (size_t)(f - p) + sep.u.s.n;
        }
    } else {
        jlist *rev = new_list(R, 0, LK_LIST);
        size_t e = n;
        for (;;) {
            const char *f = (maxs >= 0 && (int64_t)rev->n == maxs) ? NULL : memrmem_(p, e, sep.u.s.p, sep.u.s.n);
            if (!f) {
                list_push(R, rev, mk_str(p, e));
                break;
            }
            size_t fb = (size_t)(f - p);
            list_push(R, rev, mk_str(p + fb + sep.u.s.n, e - fb - sep.u.s.n));
            e = fb;
        }
        for (size_t i = rev->n; i-- > 0;) list_push(R, l, rev->a[i]);
    }
    return mk_list(l);
}

static bool is_linebreak(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}
static jv str_splitlines(rctx *R, jv s, bool keepends) {
    jlist *l = new_list(R, 0, LK_LIST);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, b = 0, i = 0;
    while (i < n) {
        size_t len;
        uint32_t c = u8dec(p + i, n - i, &len);
        if (!is_linebreak(c)) {
            i += len;
            continue;
        }
        size_t e = i + len;
        if (c == '\r' && e < n && p[e] == '\n') e++;
        jv line = mk_str(p + b, (keepends ? e : i) - b);
        line.safe = s.safe;
        list_push(R, l, line);
        b = i = e;
    }
    if (b < n) {
        jv line = mk_str(p + b, n - b);
        line.safe = s.safe;
        list_push(R, l, line);
    }
    return mk_list(l);
}

static jv str_replace(rctx *R, jv s, jv old, jv new_, int64_t count) {
    sb b;
    sb_init(&b, &R->A);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (!old.u.s.n) { /* insert before every code point and at the end */
        int64_t k = 0;
        size_t i = 0;
        for (; i <= n; k++) {
            if (count >= 0 && k >= count) break;
            sb_put(&b, new_.u.s.p, new_.u.s.n);
            if (i == n) {
                i++;
                break;
            }
            size_t l;
            u8dec(p + i, n - i, &l);
            sb_put(&b, p + i, l);
            i += l;
        }
        if (i < n) sb_put(&b, p + i, n - i);
        return str_from_sb(&b, false);
    }
    size_t i = 0;
    for (int64_t k = 0; count < 0 || k < count; k++) {
        const char *f = memmem_(p + i, n - i, old.u.s.p, old.u.s.n);
        if (!f) break;
        sb_put(&b, p + i, (size_t)(f - (p + i)));
        sb_put(&b, new_.u.s.p, new_.u.s.n);
        i = (size_t)(f - p) + old.u.s.n;
    }
    sb_put(&b, p + i, n - i);
    return str_from_sb(&b, false);
}

static jv str_pad(rctx *R, jv s, jv width, jv fill, int mode /* 0 center, 1 ljust, 2 rjust */) {
    int64_t w = want_int(R, width, "width");
    jv f = given(fill) ? want_str(R, fill, "fillchar") : mk_cstr(" ");
    if (u8count(f.u.s.p, f.u.s.n) != 1) TYPE_ERROR("TypeError: The fill character must be exactly one character long");
    int64_t len = (int64_t)u8count(s.u.s.p, s.u.s.n);
    if (w <= len) return s;
    if (w - len > 100000000) rfail(R, JINJA_ERR_LIMIT, "padding too large");
    int64_t marg = w - len, left;
    if (mode == 0) left = marg / 2 + (marg & w & 1);
    else if (mode == 1) left = 0;
    else left = marg;
    sb b;
    sb_init(&b, &R->A);
    for (int64_t i = 0; i < left; i++) sb_put(&b, f.u.s.p, f.u.s.n);
    sb_put(&b, s.u.s.p, s.u.s.n);
    for (int64_t i = 0; i < marg - left; i++) sb_put(&b, f.u.s.p, f.u.s.n);
    return str_from_sb(&b, s.safe);
}

/* str.format: "{}", "{0}", "{name}", with !r/!s; format specs are not supported */
static jv str_format(rctx *R, jv s, const args *a) {
    sb b;
    sb_init(&b, &R->A);
    const char *p = s.u.s.p, *e = p + s.u.s.n;
    int autonum = 0;
    while (p < e) {
        if (*p == '{' && p + 1 < e && p[1] == '{') { sb_putc(&b, '{'); p += 2; continue; }
        if (*p == '}' && p + 1 < e && p[1] == '}') { sb_putc(&b, '}'); p += 2; continue; }
        if (*p == '}') TYPE_ERROR("ValueError: Single '}' encountered in format string");
        if (*p != '{') { sb_putc(&b, *p++); continue; }
        const char *q = ++p;
        while (q < e && *q != '}' && *q != '!' && *q != ':') q++;
        if (q >= e) TYPE_ERROR("ValueError: expected '}' before end of string");
        char conv = 0;
        if (*q == '!') {
            if (q + 1 >= e) TYPE_ERROR("ValueError: end of string while looking for conversion specifier");
            conv = q[1];
            if (conv != 'r' && conv != 's') UNSUPPORTED("format conversion !%c", conv);
            if (q + 2 >= e || q[2] != '}') UNSUPPORTED("format specs in str.format");
        } else if (*q == ':') UNSUPPORTED("format specs in str.format");
        jv v;
        size_t fl = (size_t)(q - p);
        if (fl == 0) {
            if (autonum >= a->npos) TYPE_ERROR("IndexError: Replacement index %d out of range", autonum);
            v = a->pos[autonum++];
        } else if (is_digit(*p)) {
            int idx = 0;
            for (const char *d = p; d < q; d++) {
                if (!is_digit(*d)) UNSUPPORTED("format field '%.*s'", (int)fl, p);
                idx = idx * 10 + (*d - '0');
                if (idx > 100000) break;
            }
            if (idx >= a->npos) TYPE_ERROR("IndexError: Replacement index %d out of range", idx);
            v = a->pos[idx];
        } else {
            for (const char *d = p; d < q; d++)
                if (!is_name1(*d)) UNSUPPORTED("format field '%.*s'", (int)fl, p);
            int k = 0;
            for (; k < a->nkw; k++)
                if (a->kl[k] == fl && !memcmp(a->kn[k], p, fl)) break;
            if (k == a->nkw) TYPE_ERROR("KeyError: '%.*s'", (int)fl, p);
            v = a->kv[k];
        }
        if (conv == 'r') py_repr(R, &b, v);
        else py_str(R, &b, v);
        p = q + (conv ? 3 : 1);
    }
    return str_from_sb(&b, false);
}

static bool str_is(jv s, int what) {
    if (!s.u.s.n) return false;
    bool any_cased = false;
    for (size_t i = 0, l; i < s.u.s.n; i += l) {
        uint32_t c = u8dec(s.u.s.p + i, s.u.s.n - i, &l);
        switch (what) {
        case M_S_isalnum: if (!cp_isalpha(c) && !cp_isdigit(c)) return false; break;
        case M_S_isalpha: if (!cp_isalpha(c)) return false; break;
        case M_S_isdigit: if (!cp_isdigit(c)) return false; break;
        case M_S_isspace: if (!py_isspace(c)) return false; break;
        case M_S_islower: if (cp_isupper(c)) return false; any_cased |= cp_islower(c); break;
        case M_S_isupper: if (cp_islower(c) && c != 0xDF) return false; any_cased |= cp_isupper(c); break;
        }
    }
    return (what == M_S_islower || what == M_S_isupper) ? any_cased : true;
}

static bool affix_match(rctx *R, jv s, jv affix, bool end) {
    if (affix.k == V_LIST && affix.u.l->kind == LK_TUPLE) {
        for (size_t i = 0; i < affix.u.l->n; i++)
            if (affix_match(R, s, want_str(R, affix.u.l->a[i], "tuple for startswith must only contain str")
                                     , end))
                return true;
        return false;
    }
    if (affix.k != V_STR) TYPE_ERROR("TypeError: startswith first arg must be str or a tuple of str, not %s", tname(affix));
    if (affix.u.s.n > s.u.s.n) return false;
    return !memcmp(s.u.s.p + (end ? s.u.s.n - affix.u.s.n : 0), affix.u.s.p, affix.u.s.n);
}

static jv call_str_method(rctx *R, jv s, int id, const args *a) {
    static const char *const k_none[] = {NULL};
    static const char *const k_chars[] = {"chars"}, *const k_split[] = {"sep", "maxsplit"},
                             *const k_sub[] = {"sub", "start", "end"}, *const k_prefix[] = {"prefix", "start", "end"},
                             *const k_replace[] = {"old", "new", "count"}, *const k_width[] = {"width", "fillchar"},
                             *const k_keep[] = {"keepends"}, *const k_iter[] = {"iterable"}, *const k_sep[] = {"sep"};
    jv v[3];
    const char *name = k_str_methods[id];
    if (s.safe && id != M_S_strip && id != M_S_lstrip && id != M_S_rstrip && id != M_S_upper && id != M_S_lower &&
        id != M_S_capitalize && id != M_S_title && id != M_S_swapcase && id != M_S_startswith &&
        id != M_S_endswith && id != M_S_find && id != M_S_rfind && id != M_S_count && !(id >= M_S_isalnum && id <= M_S_isupper))
        UNSUPPORTED("Markup.%s (the result of |safe or |escape)", name);
    switch (id) {
    case M_S_strip: case M_S_lstrip: case M_S_rstrip:
        bind(R, name, k_chars, 1, a, v);
        return str_strip(R, s, v[0], id == M_S_lstrip ? 1 : id == M_S_rstrip ? 2 : 3);
    case M_S_split: case M_S_rsplit:
        bind(R, name, k_split, 2, a, v);
        return str_split(R, s, v[0], v[1], id == M_S_rsplit);
    case M_S_splitlines:
        bind(R, name, k_keep, 1, a, v);
        return str_splitlines(R, s, given(v[0]) && truthy(v[0]));
    case M_S_startswith: case M_S_endswith:
        bind(R, name, k_prefix, 3, a, v);
        if (given(v[1]) || given(v[2])) UNSUPPORTED("%s with start/end", name);
        return mk_bool(affix_match(R, s, v[0], id == M_S_endswith));
    case M_S_find: case M_S_rfind: case M_S_index: case M_S_rindex: case M_S_count: {
        bind(R, name, k_sub, 3, a, v);
        if (given(v[1]) || given(v[2])) UNSUPPORTED("%s with start/end", name);
        jv sub = want_str(R, v[0], "substring");
        if (id == M_S_count) {
            if (!sub.u.s.n) return mk_int((int64_t)u8count(s.u.s.p, s.u.s.n) + 1);
            int64_t k = 0;
            for (size_t i = 0;;) {
                const char *f = memmem_(s.u.s.p + i, s.u.s.n - i, sub.u.s.p, sub.u.s.n);
                if (!f) break;
                k++;
                i = (size_t)(f - s.u.s.p) + sub.u.s.n;
            }
            return mk_int(k);
        }
        bool rev = id == M_S_rfind || id == M_S_rindex;
        const char *f = rev ? memrmem_(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n) : memmem_(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
        if (!f) {
            if (id == M_S_index || id == M_S_rindex) TYPE_ERROR("ValueError: substring not found");
            return mk_int(-1);
        }
        return mk_int((int64_t)u8count(s.u.s.p, (size_t)(f - s.u.s.p)));
    }
    case M_S_replace: {
        bind(R, name, k_replace, 3, a, v);
        jv old = want_str(R, v[0], "replace() argument 1"), nw = want_str(R, v[1], "replace() argument 2");
        return str_replace(R, s, old, nw, given(v[2]) ? want_int(R, v[2], "count") : -1);
    }
    case M_S_upper: bind(R, name, k_none, 0, a, v); return str_case(R, s, CASE_UPPER);
    case M_S_lower: bind(R, name, k_none, 0, a, v); return str_case(R, s, CASE_LOWER);
    case M_S_title: bind(R, name, k_none, 0, a, v); return str_case(R, s, CASE_PYTITLE);
    case M_S_capitalize: bind(R, name, k_none, 0, a, v); return str_case(R, s, CASE_CAPITALIZE);
    case M_S_swapcase: bind(R, name, k_none, 0, a, v); return str_case(R, s, CASE_SWAP);
    case M_S_isalnum: case M_S_isalpha: case M_S_isdigit: case M_S_islower: case M_S_isspace: case M_S_isupper:
        bind(R, name, k_none, 0, a, v);
        return mk_bool(str_is(s, id));
    case M_S_join: {
        bind(R, name, k_iter, 1, a, v);
        if (!given(v[0])) TYPE_ERROR("TypeError: join() takes exactly one argument (0 given)");
        jiter it = iterate(R, v[0]);
        sb b;
        sb_init(&b, &R->A);
        for (size_t i = 0; i < it.n; i++) {
            if (it.a[i].k != V_STR)
                TYPE_ERROR("TypeError: sequence item %zu: expected str instance, %s found", i, tname(it.a[i]));
            if (i) sb_put(&b, s.u.s.p, s.u.s.n);
            sb_put(&b, it.a[i].u.s.p, it.a[i].u.s.n);
        }
        return str_from_sb(&b, false);
    }
    case M_S_center: case M_S_ljust: case M_S_rjust:
        bind(R, name, k_width, 2, a, v);
        if (!given(v[0])) TYPE_ERROR("TypeError: %s expected at least 1 argument, got 0", name);
        return str_pad(R, s, v[0], v[1], id == M_S_center ? 0 : id == M_S_ljust ? 1 : 2);
    case M_S_zfill: {
        bind(R, name, k_width, 1, a, v);
        if (!given(v[0])) TYPE_ERROR("TypeError: zfill() takes exactly one argument (0 given)");
        int64_t w = want_int(R, v[0], "width"), len = (int64_t)u8count(s.u.s.p, s.u.s.n);
        if (w <= len) return s;
        if (w - len > 100000000) rfail(R, JINJA_ERR_LIMIT, "padding too large");
        sb b;
        sb_init(&b, &R->A);
        size_t skip = (s.u.s.n && (s.u.s.p[0] == '+' || s.u.s.p[0] == '-')) ? 1 : 0;
        sb_put(&b, s.u.s.p, skip);
        for (int64_t i = 0; i < w - len; i++) sb_putc(&b, '0');
        sb_put(&b, s.u.s.p + skip, s.u.s.n - skip);
        return str_from_sb(&b, false);
    }
    case M_S_partition: case M_S_rpartition: {
        bind(R, name, k_sep, 1, a, v);
        jv sep = want_str(R, v[0], "separator");
        if (!sep.u.s.n) TYPE_ERROR("ValueError: empty separator");
        const char *f = id == M_S_partition ? memmem_(s.u.s.p, s.u.s.n, sep.u.s.p, sep.u.s.n)
                                            : memrmem_(s.u.s.p, s.u.s.n, sep.u.s.p, sep.u.s.n);
        jlist *l = new_list(R, 3, LK_TUPLE);
        l->n = 3;
        if (!f) {
            l->a[0] = id == M_S_partition ? s : mk_str("", 0);
            l->a[1] = mk_str("", 0);
            l->a[2] = id == M_S_partition ? mk_str("", 0) : s;
        } else {
            size_t o = (size_t)(f - s.u.s.p);
            l->a[0] = mk_str(s.u.s.p, o);
            l->a[1] = sep;
            l->a[2] = mk_str(f + sep.u.s.n, s.u.s.n - o - sep.u.s.n);
        }
        return mk_list(l);
    }
    case M_S_removeprefix: case M_S_removesuffix: {
        bind(R, name, k_prefix, 1, a, v);
        jv af = want_str(R, v[0], name);
        bool end = id == M_S_removesuffix;
        if (!af.u.s.n || !affix_match(R, s, af, end)) return s;
        return mk_str(s.u.s.p + (end ? 0 : af.u.s.n), s.u.s.n - af.u.s.n);
    }
    case M_S_format: return str_format(R, s, a);
    }
    UNSUPPORTED("str.%s", name);
}

/* ========================================================================== */
/* printf-style formatting: str % args and the format filter                    */
/* ========================================================================== */

static jv py_percent(rctx *R, jv fmt, jv argv) {
    jv *av = &argv;
    size_t an = 1, ai = 0;
    jdict *map = NULL;
    if (argv.k == V_LIST && argv.u.l->kind == LK_TUPLE) {
        av = argv.u.l->a;
        an = argv.u.l->n;
    } else if (argv.k == V_DICT) {
        map = argv.u.d;
    }
    /* a non-tuple argument with __getitem__ (list, dict) may go unused */
    bool mapping_like = argv.k == V_DICT || argv.k == V_UNDEF ||
                        (argv.k == V_LIST && argv.u.l->kind != LK_TUPLE && argv.u.l->kind != LK_GEN);
    sb b;
    sb_init(&b, &R->A);
    const char *p = fmt.u.s.p, *e = p + fmt.u.s.n;
    while (p < e) {
        if (*p != '%') {
            sb_putc(&b, *p++);
            continue;
        }
        if (++p >= e) TYPE_ERROR("ValueError: incomplete format");
        jv v;
        bool have_v = false;
        if (*p == '(') {
            const char *q = memchr(p, ')', (size_t)(e - p));
            if (!q) TYPE_ERROR("ValueError: incomplete format key");
            if (argv.k == V_UNDEF) undef_error(R, argv);
            if (!map) TYPE_ERROR("TypeError: format requires a mapping");
            jv *x = dict_find_str(R, map, p + 1, (size_t)(q - p - 1));
            if (!x) TYPE_ERROR("KeyError: '%.*s'", (int)(q - p - 1), p + 1);
            v = *x;
            have_v = true;
            p = q + 1;
        }
        char flags[8];
        int nf = 0;
        while (p < e && *p && strchr("-+ #0", *p) && nf < 7) flags[nf++] = *p++;
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (p < e && *p == '*') UNSUPPORTED("'*' width in %% formatting");
        while (p < e && is_digit(*p)) width = (width < 0 ? 0 : width) * 10 + (*p++ - '0'), width = width > 10001 ? 10001 : width;
        if (width > 10000) rfail(R, JINJA_ERR_LIMIT, "%% format width above 10000");
        if (p < e && *p == '.') {
            prec = 0;
            for (p++; p < e && is_digit(*p); p++) prec = prec * 10 + (*p - '0'), prec = prec > 101 ? 101 : prec;
            if (prec > 100) rfail(R, JINJA_ERR_LIMIT, "%% format precision above 100");
        }
        if (p >= e) TYPE_ERROR("ValueError: incomplete format");
        char conv = *p++;
        if (conv == '%') {
            sb_putc(&b, '%');
            continue;
        }
        if (!have_v) {
            if (map) {
                v = argv;
            } else {
                if (ai >= an) TYPE_ERROR("TypeError: not enough arguments for format string");
                v = av[ai++];
            }
        }
        sb piece;
        sb_init(&piece, &R->A);
        char spec[32];
        switch (conv) {
        case 's': py_str(R, &piece, v); break;
        case 'r': py_repr(R, &piece, v); break;
        case 'd': case 'i':
            if (!is_num(v)) TYPE_ERROR("TypeError: %%%c format: a real number is required, not %s", conv, tname(v));
            if (v.k == V_FLOAT && !(fabs(v.u.f) < 9.2e18)) UNSUPPORTED("%%d of %g", v.u.f);
            sb_printf(&piece, strchr(flags, '+') ? "%+lld" : "%lld", (long long)(v.k == V_FLOAT ? (int64_t)v.u.f : as_i(v)));
            break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
            if (!is_num(v)) TYPE_ERROR("TypeError: must be real number, not %s", tname(v));
            snprintf(spec, sizeof spec, "%%%s.%d%c", strchr(flags, '+') ? "+" : "", prec < 0 ? 6 : prec, conv);
            sb_printf(&piece, spec, as_f(v));
            break;
        default: UNSUPPORTED("%%%c in %% formatting", conv);
        }
        if (prec >= 0 && (conv == 's' || conv == 'r')) {
            size_t cnt;
            size_t *o = u8offsets(R, piece.p ? piece.p : "", piece.n, &cnt);
            if ((size_t)prec < cnt) piece.n = o[prec];
        }
        int64_t len = (int64_t)u8count(piece.p ? piece.p : "", piece.n);
        bool left = strchr(flags, '-') != NULL, zero = strchr(flags, '0') && !left && conv != 's' && conv != 'r';
        if (!left)
            for (int64_t k = len; k < width; k++) sb_putc(&b, zero ? '0' : ' ');
        if (piece.n) sb_put(&b, piece.p, piece.n);
        if (left)
            for (int64_t k = len; k < width; k++) sb_putc(&b, ' ');
    }
    if (!map && ai < an && !(mapping_like && ai == 0))
        TYPE_ERROR("TypeError: not all arguments converted during string formatting");
    return str_from_sb(&b, false);
}

/* ========================================================================== */
/* list, dict and loop methods, builtin globals                                 */
/* ========================================================================== */

enum { FN_RANGE, FN_DICT, FN_NAMESPACE, FN_RAISE, FN_STRFTIME, FN_CYCLER, FN_JOINER, FN_LIPSUM, FN_SELF, FN_COUNT_ };
static const char *const k_globals[] = {"range", "dict", "namespace", "raise_exception", "strftime_now", "cycler",
                                        "joiner", "lipsum", "self"};

static void dict_update_from(rctx *R, jdict *d, jv src) {
    if (src.k == V_DICT || src.k == V_NS) {
        for (size_t i = 0; i < src.u.d->n; i++) dict_set(R, d, src.u.d->keys[i], src.u.d->vals[i]);
        return;
    }
    jiter it = iterate(R, src);
    for (size_t i = 0; i < it.n; i++) {
        jiter kv = iterate(R, it.a[i]);
        if (kv.n != 2)
            TYPE_ERROR("ValueError: dictionary update sequence element #%zu has length %zu; 2 is required", i, kv.n);
        if (!hashable(kv.a[0])) TYPE_ERROR("TypeError: unhashable type: '%s'", tname(kv.a[0]));
        dict_set(R, d, kv.a[0], kv.a[1]);
    }
}

static jv make_dict_from_args(rctx *R, const args *a, const char *fname) {
    if (a->npos > 1) TYPE_ERROR("TypeError: %s expected at most 1 argument, got %d", fname, a->npos);
    jdict *d = new_dict(R, 0);
    if (a->npos) dict_update_from(R, d, a->pos[0]);
    for (int k = 0; k < a->nkw; k++) dict_set(R, d, mk_str(a->kn[k], a->kl[k]), a->kv[k]);
    return mk_dict(d);
}

static jv call_global(rctx *R, int fn, const args *a) {
    switch (fn) {
    case FN_RANGE: {
        if (a->nkw) TYPE_ERROR("TypeError: range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3) TYPE_ERROR("TypeError: range expected at most 3 arguments, got %d", a->npos);
        int64_t v[3];
        for (int i = 0; i < a->npos; i++) {
            if (!is_intlike(a->pos[i]))
                TYPE_ERROR("TypeError: '%s' object cannot be interpreted as an integer", tname(a->pos[i]));
            v[i] = as_i(a->pos[i]);
        }
        int64_t start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], st = a->npos == 3 ? v[2] : 1;
        if (st == 0) TYPE_ERROR("ValueError: range() arg 3 must not be zero");
        double cnt_d = st > 0 ? ((double)stop - (double)start) / (double)st : ((double)start - (double)stop) / -(double)st;
        int64_t cnt = 0;
        if (cnt_d > 100000)
            TYPE_ERROR("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        /* in 128 bits: stop - start and -st overflow 64 for extreme arguments */
        if (cnt_d > 0)
            cnt = (int64_t)(st > 0 ? ((__int128)stop - start + st - 1) / st : ((__int128)start - stop - st - 1) / -(__int128)st);
        if (cnt > 100000)
            TYPE_ERROR("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        jlist *l = new_list(R, (size_t)cnt, LK_RANGE);
        for (int64_t i = 0; i < cnt; i++) l->a[i] = mk_int(start + i * st);
        l->n = (size_t)cnt;
        l->r0 = start;
        l->r1 = stop;
        l->r2 = st;
        return mk_list(l);
    }
    case FN_DICT: return make_dict_from_args(R, a, "dict");
    case FN_NAMESPACE: {
        jv d = make_dict_from_args(R, a, "namespace");
        d.k = V_NS;
        return d;
    }
    case FN_RAISE: {
        jv msg = a->npos ? a->pos[0] : a->nkw ? a->kv[0] : mk_undef(NULL);
        sb b;
        sb_init(&b, &R->A);
        py_str(R, &b, msg);
        jthrow(&R->E, JINJA_ERR_RAISED, R->line, "raise_exception: %.*s", (int)(b.n > 400 ? 400 : b.n), b.n ? b.p : "");
    }
    case FN_STRFTIME: {
        static const char *const k_fmt[] = {"format"};
        jv v[1];
        bind(R, "strftime_now", k_fmt, 1, a, v);
        jv f = want_str(R, v[0], "strftime format");
        sb fm;
        sb_init(&fm, &R->A);
        for (size_t i = 0; i < f.u.s.n; i++) { /* datetime.strftime on a naive time */
            if (f.u.s.p[i] == '%' && i + 1 < f.u.s.n) {
                char c = f.u.s.p[i + 1];
                if (c == 'z' || c == 'Z') { i++; continue; }
                if (c == 'f') { sb_puts(&fm, "000000"); i++; continue; }
                sb_putc(&fm, '%');
                sb_putc(&fm, c);
                i++;
                continue;
            }
            sb_putc(&fm, f.u.s.p[i]);
        }
        sb_putc(&fm, 0);
        size_t cap = fm.n * 8 + 64;
        char *out = amalloc(&R->A, cap);
        locale_t c = newlocale(LC_TIME_MASK, "C", (locale_t)0);
        size_t n = c ? strftime_l(out, cap, fm.p, &R->now, c) : strftime(out, cap, fm.p, &R->now);
        if (c) freelocale(c);
        return mk_str(out, n);
    }
    default: UNSUPPORTED("the global '%s' is not supported", k_globals[fn]);
    }
}

static jv call_method(rctx *R, jmethod *m, const args *a) {
    jv self = m->self, v[2];
    static const char *const k_none[] = {NULL}, *const k_get[] = {"key", "default"}, *const k_x[] = {"value"},
                             *const k_idx[] = {"index"};
    if (m->id < M_S_COUNT_) return call_str_method(R, self, m->id, a);
    switch (m->id) {
    case M_D_GET:
        bind(R, "get", k_get, 2, a, v);
        if (!given(v[0])) TYPE_ERROR("TypeError: get expected at least 1 argument, got 0");
        if (!hashable(v[0])) TYPE_ERROR("TypeError: unhashable type: '%s'", tname(v[0]));
        {
            jv *x = dict_find(R, self.u.d, v[0]);
            return x ? *x : arg_or(v[1], mk_none());
        }
    case M_D_ITEMS: case M_D_KEYS: case M_D_VALUES: {
        bind(R, "items", k_none, 0, a, v);
        jdict *d = self.u.d;
        jlist *l = new_list(R, d->n, m->id == M_D_ITEMS ? LK_ITEMS : m->id == M_D_KEYS ? LK_KEYS : LK_VALUES);
        for (size_t i = 0; i < d->n; i++)
            l->a[i] = m->id == M_D_ITEMS ? mk_tuple2(R, d->keys[i], d->vals[i]) : m->id == M_D_KEYS ? d->keys[i] : d->vals[i];
        l->n = d->n;
        return mk_list(l);
    }
    case M_D_COPY: {
        bind(R, "copy", k_none, 0, a, v);
        jdict *d = new_dict(R, self.u.d->n);
        for (size_t i = 0; i < self.u.d->n; i++) dict_set(R, d, self.u.d->keys[i], self.u.d->vals[i]);
        return mk_dict(d);
    }
    case M_L_COUNT: case M_L_INDEX: {
        bind(R, m->id == M_L_COUNT ? "count" : "index", k_x, 1, a, v);
        if (!given(v[0])) TYPE_ERROR("TypeError: expected 1 argument, got 0");
        int64_t k = 0;
        work(R, self.u.l->n);
        for (size_t i = 0; i < self.u.l->n; i++)
            if (py_eq(R, self.u.l->a[i], v[0])) {
                if (m->id == M_L_INDEX) return mk_int((int64_t)i);
                k++;
            }
        if (m->id == M_L_INDEX) TYPE_ERROR("ValueError: value is not in list");
        return mk_int(k);
    }
    case M_L_COPY: bind(R, "copy", k_none, 0, a, v); return list_of(R, (jiter){self.u.l->a, self.u.l->n}, LK_LIST);
    case M_L_CLEAR: bind(R, "clear", k_none, 0, a, v); self.u.l->n = 0; return mk_none();
    case M_L_POP: {
        bind(R, "pop", k_idx, 1, a, v);
        jlist *l = self.u.l;
        int64_t i = given(v[0]) ? want_int(R, v[0], "index") : -1;
        if (!l->n) TYPE_ERROR("IndexError: pop from empty list");
        if (i < 0) i += (int64_t)l->n;
        if (i < 0 || (size_t)i >= l->n) TYPE_ERROR("IndexError: pop index out of range");
        jv r = l->a[i];
        memmove(l->a + i, l->a + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        return r;
    }
    case M_LOOP_CYCLE: {
        if (a->nkw) TYPE_ERROR("TypeError: cycle() takes no keyword arguments");
        if (!a->npos) TYPE_ERROR("TypeError: no items for cycling given");
        return a->pos[self.u.lp->i % (size_t)a->npos];
    }
    case M_LOOP_CHANGED: {
        jlist *now = new_list(R, (size_t)a->npos, LK_LIST);
        for (int i = 0; i < a->npos; i++) now->a[i] = a->pos[i];
        now->n = (size_t)a->npos;
        jloop *lp = self.u.lp;
        if (lp->changed_last && py_eq(R, mk_list(lp->changed_last), mk_list(now))) return mk_bool(false);
        lp->changed_last = now;
        return mk_bool(true);
    }
    }
    UNSUPPORTED("method %d", m->id);
}

/* ========================================================================== */
/* arithmetic                                                                   */
/* ========================================================================== */

static _Noreturn void int_overflow(rctx *R) { UNSUPPORTED("integer overflow (Python integers are unbounded)"); }

static jv concat_str(rctx *R, jv a, jv b) {
    bool safe = a.safe || b.safe;
    if (safe) { /* Markup.__add__ / __radd__ escape the plain side */
        if (!a.safe) a = html_escape(R, a);
        if (!b.safe) b = html_escape(R, b);
    }
    char *p = amalloc(&R->A, a.u.s.n + b.u.s.n + 1);
    if (a.u.s.n) memcpy(p, a.u.s.p, a.u.s.n);
    if (b.u.s.n) memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
    jv r = mk_str(p, a.u.s.n + b.u.s.n);
    r.safe = safe;
    return r;
}

static jv repeat(rctx *R, jv seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.k == V_STR) {
        if (seq.u.s.n && (uint64_t)k > R->A.limit / seq.u.s.n) rfail(R, JINJA_ERR_LIMIT, "string repetition too large");
        sb b;
        sb_init(&b, &R->A);
        for (int64_t i = 0; i < k; i++) sb_put(&b, seq.u.s.p, seq.u.s.n);
        return str_from_sb(&b, seq.safe);
    }
    jlist *l = seq.u.l;
    if (l->n && (uint64_t)k > R->A.limit / (l->n * sizeof(jv))) rfail(R, JINJA_ERR_LIMIT, "list repetition too large");
    jlist *r = new_list(R, l->n * (size_t)k, l->kind == LK_TUPLE ? LK_TUPLE : LK_LIST);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < l->n; j++) r->a[r->n++] = l->a[j];
    return mk_list(r);
}

static const char *k_opnames[] = {"+", "-", "*", "/", "//", "%", "**"};

static jv binop(rctx *R, int op, jv a, jv b) {
    if (op == OP_MOD && a.k == V_STR && b.k == V_UNDEF) /* str.__mod__ formats an Undefined like any object */
        return py_percent(R, a, b);
    if (a.k == V_UNDEF) undef_error(R, a);
    if (b.k == V_UNDEF) undef_error(R, b);
    if (is_num(a) && is_num(b)) {
        bool ints = is_intlike(a) && is_intlike(b);
        int64_t x = ints ? as_i(a) : 0, y = ints ? as_i(b) : 0, r;
        double fx = as_f(a), fy = as_f(b);
        switch (op) {
        case OP_ADD:
            if (!ints) return mk_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) int_overflow(R);
            return mk_int(r);
        case OP_SUB:
            if (!ints) return mk_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) int_overflow(R);
            return mk_int(r);
        case OP_MUL:
            if (!ints) return mk_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) int_overflow(R);
            return mk_int(r);
        case OP_DIV:
            if (fy == 0) TYPE_ERROR("ZeroDivisionError: division by zero");
            return mk_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0) TYPE_ERROR("ZeroDivisionError: integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) int_overflow(R);
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return mk_int(op == OP_MOD ? m : q);
            } else {
                if (fy == 0) TYPE_ERROR("ZeroDivisionError: float modulo");
                double mod = fmod(fx, fy), div = (fx - mod) / fy;
                if (mod != 0) {
                    if ((fy < 0) != (mod < 0)) {
                        mod += fy;
                        div -= 1.0;
                    }
                } else {
                    mod = copysign(0.0, fy);
                }
                if (op == OP_MOD) return mk_float(mod);
                double fl;
                if (div != 0) {
                    fl = floor(div);
                    if (div - fl > 0.5) fl += 1.0;
                } else {
                    fl = copysign(0.0, fx / fy);
                }
                return mk_float(fl);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t e = y; e; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) int_overflow(R);
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) int_overflow(R);
                }
                return mk_int(acc);
            }
            if (fx == 0 && fy < 0) TYPE_ERROR("ZeroDivisionError: 0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) UNSUPPORTED("complex result of **");
            return mk_float(pow(fx, fy));
        }
    }
    switch (op) {
    case OP_ADD:
        if (a.k == V_STR && b.k == V_STR) return concat_str(R, a, b);
        if (a.k == V_LIST && b.k == V_LIST && a.u.l->kind == b.u.l->kind &&
            (a.u.l->kind == LK_LIST || a.u.l->kind == LK_TUPLE)) {
            jlist *r = new_list(R, a.u.l->n + b.u.l->n, a.u.l->kind);
            if (a.u.l->n) memcpy(r->a, a.u.l->a, a.u.l->n * sizeof(jv));
            if (b.u.l->n) memcpy(r->a + a.u.l->n, b.u.l->a, b.u.l->n * sizeof(jv));
            r->n = a.u.l->n + b.u.l->n;
            return mk_list(r);
        }
        if (a.k == V_STR) TYPE_ERROR("TypeError: can only concatenate str (not \"%s\") to str", tname(b));
        if (is_seq(a)) TYPE_ERROR("TypeError: can only concatenate %s (not \"%s\") to %s", tname(a), tname(b), tname(a));
        break;
    case OP_MUL:
        if ((a.k == V_STR || is_seq(a)) && is_intlike(b)) return repeat(R, a, as_i(b));
        if ((b.k == V_STR || is_seq(b)) && is_intlike(a)) return repeat(R, b, as_i(a));
        break;
    case OP_MOD:
        if (a.k == V_STR) {
            if (a.safe) UNSUPPORTED("%% formatting of a Markup string");
            return py_percent(R, a, b);
        }
        break;
    }
    TYPE_ERROR("TypeError: unsupported operand type(s) for %s: '%s' and '%s'", k_opnames[op], tname(a), tname(b));
}

/* ========================================================================== */
/* filters                                                                      */
/* ========================================================================== */

static jv call_value(rctx *R, jv callee, const args *a);
static bool apply_test(rctx *R, int id, jv v, const args *a);
static jv apply_filter(rctx *R, int id, jv v, const args *a);

static jv soft_str(rctx *R, jv v) { return v.k == V_STR ? v : to_str(R, v); }

static jv ignore_case(rctx *R, jv v) { return v.k == V_STR ? str_case(R, v, CASE_LOWER) : v; }

/* stable merge sort of items by keys (reverse keeps equal items in order, as sorted() does) */
static void sort_by(rctx *R, jv *items, jv *keys, size_t n, bool reverse) {
    if (n < 2) return;
    jv *ti = amalloc(&R->A, n * sizeof *ti), *tk = amalloc(&R->A, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool take_right = reverse ? py_lt(R, keys[i], keys[j], "<") : py_lt(R, keys[j], keys[i], "<");
                if (take_right) { ti[k] = items[j]; tk[k++] = keys[j++]; }
                else { ti[k] = items[i]; tk[k++] = keys[i++]; }
            }
            while (i < mid) { ti[k] = items[i]; tk[k++] = keys[i++]; }
            while (j < hi) { ti[k] = items[j]; tk[k++] = keys[j++]; }
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
        step(R);
    }
}

/* key of make_multi_attrgetter: attribute may be "a,b" */
static jv sort_key(rctx *R, jv item, jv attribute, bool case_sensitive) {
    if (!given(attribute) || attribute.k == V_NONE) return case_sensitive ? item : ignore_case(R, item);
    if (attribute.k == V_STR && memchr(attribute.u.s.p, ',', attribute.u.s.n)) {
        jlist *l = new_list(R, 0, LK_LIST);
        const char *p = attribute.u.s.p, *e = p + attribute.u.s.n;
        for (;;) {
            const char *c = memchr(p, ',', (size_t)(e - p));
            if (!c) c = e;
            jv k = attr_path(R, item, mk_str(p, (size_t)(c - p)), mk_none());
            list_push(R, l, case_sensitive ? k : ignore_case(R, k));
            if (c == e) break;
            p = c + 1;
        }
        return mk_list(l);
    }
    jv k = attr_path(R, item, attribute, mk_none());
    return case_sensitive ? k : ignore_case(R, k);
}

static jv do_indent(rctx *R, jv s, jv width, jv first, jv blank) {
    jv ind;
    if (width.k == V_STR) ind = width;
    else {
        int64_t w = want_int(R, width, "indent width");
        ind = repeat(R, mk_cstr(" "), w);
    }
    jv t = concat_str(R, s, mk_cstr("\n"));
    jlist *lines = str_splitlines(R, t, false).u.l;
    sb b;
    sb_init(&b, &R->A);
    if (truthy(first)) sb_put(&b, ind.u.s.p, ind.u.s.n);
    for (size_t i = 0; i < lines->n; i++) {
        jv ln = lines->a[i];
        if (i) {
            sb_putc(&b, '\n');
            if (truthy(blank) || ln.u.s.n) sb_put(&b, ind.u.s.p, ind.u.s.n);
        }
        sb_put(&b, ln.u.s.p, ln.u.s.n);
    }
    return str_from_sb(&b, s.safe);
}

/* float(str) as Python parses it */
static bool parse_py_float(rctx *R, jv s, double *out) {
    jv t = str_strip(R, s, NOT_GIVEN, 3);
    size_t n = t.u.s.n;
    if (!n || n > 200) return false;
    char buf[256];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = t.u.s.p[i];
        if (c == '_') {
            if (!i || i + 1 == n || !is_digit(t.u.s.p[i - 1]) || !is_digit(t.u.s.p[i + 1])) return false;
            continue;
        }
        if (c == 'x' || c == 'X' || c == 'p' || c == 'P' || (unsigned char)c >= 0x80) return false;
        buf[m++] = c;
    }
    buf[m] = 0;
    char *end;
    *out = strtod(buf, &end);
    if (*end) return false;
    const char *q = buf + (buf[0] == '+' || buf[0] == '-');
    if ((q[0] | 32) == 'i' || (q[0] | 32) == 'n') /* inf, infinity, nan only */
        return !strcasecmp(q, "inf") || !strcasecmp(q, "infinity") || !strcasecmp(q, "nan");
    return true;
}

/* int(str, base) as Python parses it */
static bool parse_py_int(rctx *R, jv s, int64_t base, int64_t *out) {
    jv t = str_strip(R, s, NOT_GIVEN, 3);
    const char *p = t.u.s.p, *e = p + t.u.s.n;
    bool neg = false;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (e - p >= 2 && p[0] == '0') {
            char c = (char)(p[1] | 32);
            int b2 = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
            if (b2 && (base == 0 || base == b2)) {
                base = b2;
                p += 2;
                if (p < e && *p == '_') p++;
            }
        }
        if (base == 0) base = 10;
    }
    if (base < 2 || base > 36 || p >= e) return false;
    uint64_t v = 0;
    bool prev_us = true;
    for (; p < e; p++) {
        if (*p == '_') {
            if (prev_us) return false;
            prev_us = true;
            continue;
        }
        int d = is_digit(*p) ? *p - '0' : ((*p | 32) >= 'a' && (*p | 32) <= 'z') ? (*p | 32) - 'a' + 10 : 99;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) int_overflow(R);
        v = v * (uint64_t)base + (uint64_t)d;
        prev_us = false;
    }
    if (prev_us) return false;
    if (v > (uint64_t)INT64_MAX + neg) int_overflow(R);
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static jv f_tojson(rctx *R, jv v, const args *a) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    jv p[4];
    bind(R, "tojson", names, 4, a, p);
    jsonopt o = {.ensure_ascii = given(p[0]) && truthy(p[0]), .sort_keys = given(p[3]) && truthy(p[3])};
    jv ind = arg_or(p[1], mk_none());
    if (ind.k != V_NONE) {
        o.indent_on = true;
        if (ind.k == V_STR) o.indent = ind;
        else o.indent = repeat(R, mk_cstr(" "), want_int(R, ind, "indent"));
    }
    jv sep = arg_or(p[2], mk_none());
    if (sep.k == V_NONE) {
        o.item_sep = mk_cstr(o.indent_on ? "," : ", ");
        o.key_sep = mk_cstr(": ");
    } else {
        jiter it = iterate(R, sep);
        if (it.n != 2) TYPE_ERROR("ValueError: separators must be a pair of strings");
        o.item_sep = want_str(R, it.a[0], "separator");
        o.key_sep = want_str(R, it.a[1], "separator");
    }
    sb b;
    sb_init(&b, &R->A);
    py_json(R, &b, v, &o, 0);
    return str_from_sb(&b, false);
}

/* args without the first n positionals */
static args args_shift(const args *a, int n) {
    args r = *a;
    r.pos += n;
    r.npos -= n;
    return r;
}

/* Generator filters (map, select, items, unique, batch, slice) fail only when
 * their result is consumed; a non-iterable input gives a generator that raises
 * then. */
static bool iterable(jv v) { return v.k == V_UNDEF || v.k == V_STR || v.k == V_LIST || v.k == V_DICT; }
static jv poisoned_gen(rctx *R, const char *fmt, jv v) {
    jlist *l = new_list(R, 0, LK_GEN);
    sb b;
    sb_init(&b, &R->A);
    sb_printf(&b, fmt, tname(v));
    sb_putc(&b, 0);
    l->err = b.p;
    return mk_list(l);
}
#define NOT_ITERABLE "'%s' object is not iterable"

/* select/reject/selectattr/rejectattr (jinja2 select_or_reject) */
static jv f_select(rctx *R, jv v, const args *a, bool lookup_attr, bool want) {
    jlist *out = new_list(R, 0, LK_GEN);
    if (!truthy(v)) return mk_list(out);
    if (!iterable(v)) return poisoned_gen(R, NOT_ITERABLE, v);
    int off = 0;
    jv attr = mk_none();
    if (lookup_attr) {
        if (a->npos < 1) TYPE_ERROR("FilterArgumentError: Missing parameter for attribute name");
        attr = a->pos[0];
        off = 1;
    }
    int test = -1;
    args rest = {0};
    if (a->npos > off) {
        jv name = want_str(R, a->pos[off], "test name");
        test = lookup_name(k_tests, T_COUNT_, name.u.s.p, name.u.s.n);
        if (test < 0) TYPE_ERROR("TemplateRuntimeError: No test named '%.*s'", (int)name.u.s.n, name.u.s.p);
        rest = args_shift(a, off + 1);
    } else if (a->nkw) {
        TYPE_ERROR("TypeError: unexpected keyword arguments without a test name");
    }
    jiter it = iterate(R, v);
    for (size_t i = 0; i < it.n; i++) {
        step(R);
        jv x = lookup_attr ? attr_path(R, it.a[i], attr, mk_none()) : it.a[i];
        bool r = test < 0 ? truthy(x) : apply_test(R, test, x, &rest);
        if (r == want) list_push(R, out, it.a[i]);
    }
    return mk_list(out);
}

static jv f_map(rctx *R, jv v, const args *a) {
    jlist *out = new_list(R, 0, LK_GEN);
    int id = -1;
    jv attr = mk_none(), dflt = mk_none();
    args rest = {0};
    if (!a->npos && a->nkw) {
        for (int k = 0; k < a->nkw; k++) {
            if (a->kl[k] == 9 && !memcmp(a->kn[k], "attribute", 9)) attr = a->kv[k];
            else if (a->kl[k] == 7 && !memcmp(a->kn[k], "default", 7)) dflt = a->kv[k];
            else TYPE_ERROR("FilterArgumentError: Unexpected keyword argument '%.*s'", (int)a->kl[k], a->kn[k]);
        }
        if (attr.k == V_NONE) TYPE_ERROR("FilterArgumentError: map requires a filter argument");
    } else {
        if (!a->npos) TYPE_ERROR("FilterArgumentError: map requires a filter argument");
        jv name = want_str(R, a->pos[0], "filter name");
        id = lookup_name(k_filters, F_COUNT_, name.u.s.p, name.u.s.n);
        if (id < 0 || id == F_NOT_IMPLEMENTED)
            TYPE_ERROR("TemplateRuntimeError: No filter named '%.*s'", (int)name.u.s.n, name.u.s.p);
        rest = args_shift(a, 1);
    }
    if (!truthy(v)) return mk_list(out);
    if (!iterable(v)) return poisoned_gen(R, NOT_ITERABLE, v);
    jiter it = iterate(R, v);
    for (size_t i = 0; i < it.n; i++) {
        step(R);
        list_push(R, out, id >= 0 ? apply_filter(R, id, it.a[i], &rest) : attr_path(R, it.a[i], attr, dflt));
    }
    return mk_list(out);
}

static jv f_minmax(rctx *R, jv v, jv cs, jv attribute, bool max) {
    jiter it = iterate(R, v);
    if (!it.n) return mk_undef("No aggregated item, sequence was empty.");
    bool case_sensitive = given(cs) && truthy(cs);
    jv best = it.a[0];
    jv bk = given(attribute) && attribute.k != V_NONE ? attr_path(R, best, attribute, mk_none()) : best;
    if (!case_sensitive) bk = ignore_case(R, bk);
    for (size_t i = 1; i < it.n; i++) {
        jv k = given(attribute) && attribute.k != V_NONE ? attr_path(R, it.a[i], attribute, mk_none()) : it.a[i];
        if (!case_sensitive) k = ignore_case(R, k);
        if (max ? py_lt(R, bk, k, ">") : py_lt(R, k, bk, "<")) {
            best = it.a[i];
            bk = k;
        }
    }
    return best;
}

static jv apply_filter(rctx *R, int id, jv v, const args *a) {
    jv p[4];
    const char *name = k_filters[id];
    static const char *const k_none[] = {NULL};
#define BIND(...)                                                               \
    do {                                                                        \
        static const char *const names_[] = {__VA_ARGS__};                      \
        bind(R, name, names_, (int)(sizeof names_ / sizeof names_[0]), a, p);   \
    } while (0)
#define BIND0() bind(R, name, k_none, 0, a, p)
    step(R);
    switch (id) {
    case F_abs:
        BIND0();
        if (v.k == V_INT) {
            if (v.u.i == INT64_MIN) int_overflow(R);
            return mk_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.k == V_BOOL) return mk_int(v.u.b);
        if (v.k == V_FLOAT) return mk_float(fabs(v.u.f));
        TYPE_ERROR("TypeError: bad operand type for abs(): '%s'", tname(v));
    case F_attr: {
        BIND("name");
        if (v.k == V_UNDEF) undef_error(R, v);
        jv n = want_str(R, p[0], "attribute name");
        if (is_dunder(n.u.s.p, n.u.s.n)) return mk_unsafe(n.u.s.p, n.u.s.n);
        bool found;
        return py_getattr(R, v, n.u.s.p, n.u.s.n, &found);
    }
    case F_batch: case F_slice: {
        if (id == F_batch) BIND("linecount", "fill_with");
        else BIND("slices", "fill_with");
        int64_t k = want_int(R, p[0], id == F_batch ? "linecount" : "slices");
        jv fill = arg_or(p[1], mk_none());
        if (!iterable(v)) return poisoned_gen(R, NOT_ITERABLE, v);
        jiter it = iterate(R, v);
        jlist *out = new_list(R, 0, LK_GEN);
        if (id == F_batch) {
            if (k <= 0 && it.n) UNSUPPORTED("batch(%lld)", (long long)k);
            if (k > 100000 && it.n) rfail(R, JINJA_ERR_LIMIT, "batch(%lld) too large", (long long)k);
            for (size_t i = 0; i < it.n; i += (size_t)k) {
                size_t m = it.n - i < (size_t)k ? it.n - i : (size_t)k;
                jlist *row = new_list(R, fill.k != V_NONE ? (size_t)k : m, LK_LIST);
                for (size_t j = 0; j < m; j++) row->a[row->n++] = it.a[i + j];
                if (fill.k != V_NONE)
                    while (row->n < (size_t)k) row->a[row->n++] = fill;
                list_push(R, out, mk_list(row));
            }
        } else {
            if (k <= 0) TYPE_ERROR("ZeroDivisionError: integer division or modulo by zero");
            if (k > 100000) rfail(R, JINJA_ERR_LIMIT, "slice(%lld) too large", (long long)k);
            size_t per = it.n / (size_t)k, extra = it.n % (size_t)k, off = 0;
            for (size_t s = 0; s < (size_t)k; s++) {
                size_t start = off + s * per;
                if (s < extra) off++;
                size_t end = off + (s + 1) * per;
                jlist *row = new_list(R, end - start + 1, LK_LIST);
                for (size_t j = start; j < end; j++) row->a[row->n++] = it.a[j];
                if (fill.k != V_NONE && s >= extra) row->a[row->n++] = fill;
                list_push(R, out, mk_list(row));
            }
        }
        return mk_list(out);
    }
    case F_capitalize: BIND0(); return str_case(R, soft_str(R, v), CASE_CAPITALIZE);
    case F_center: BIND("width"); return str_pad(R, soft_str(R, v), arg_or(p[0], mk_int(80)), NOT_GIVEN, 0);
    case F_count: case F_length: BIND0(); return mk_int(py_len(R, v));
    case F_d: case F_default: {
        BIND("default_value", "boolean");
        bool boolean = given(p[1]) && truthy(p[1]);
        if (v.k == V_UNDEF || (boolean && !truthy(v))) return arg_or(p[0], mk_str("", 0));
        return v;
    }
    case F_dictsort: {
        BIND("case_sensitive", "by", "reverse");
        if (v.k == V_UNDEF) undef_error(R, v);
        if (v.k != V_DICT) TYPE_ERROR("AttributeError: '%s' object has no attribute 'items'", tname(v));
        jv by = arg_or(p[1], mk_cstr("key"));
        int pos = str_eq(by, "key") ? 0 : str_eq(by, "value") ? 1 : -1;
        if (pos < 0) TYPE_ERROR("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
        bool cs = given(p[0]) && truthy(p[0]);
        jdict *d = v.u.d;
        jv *items = amalloc(&R->A, (d->n + 1) * sizeof *items), *keys = amalloc(&R->A, (d->n + 1) * sizeof *keys);
        for (size_t i = 0; i < d->n; i++) {
            items[i] = mk_tuple2(R, d->keys[i], d->vals[i]);
            keys[i] = pos ? d->vals[i] : d->keys[i];
            if (!cs) keys[i] = ignore_case(R, keys[i]);
        }
        sort_by(R, items, keys, d->n, given(p[2]) && truthy(p[2]));
        return list_of(R, (jiter){items, d->n}, LK_LIST);
    }
    case F_e: case F_escape: case F_forceescape:
        BIND0();
        if (v.k == V_STR && v.safe && id != F_forceescape) return v;
        { jv s = soft_str(R, v); s.safe = 0; return html_escape(R, s); }
    case F_first: {
        BIND0();
        if (v.k == V_LIST && v.u.l->kind == LK_GEN) {
            jlist *l = v.u.l;
            if (l->err) TYPE_ERROR("TypeError: %s", l->err);
            if (l->pos >= l->n) return mk_undef("No first item, sequence was empty.");
            return l->a[l->pos++];
        }
        jiter it = iterate(R, v);
        return it.n ? it.a[0] : mk_undef("No first item, sequence was empty.");
    }
    case F_last: {
        BIND0();
        if (v.k == V_LIST && v.u.l->kind == LK_GEN) TYPE_ERROR("TypeError: 'generator' object is not reversible");
        if (v.k != V_STR && v.k != V_LIST && v.k != V_DICT && v.k != V_UNDEF)
            TYPE_ERROR("TypeError: '%s' object is not reversible", tname(v));
        jiter it = iterate(R, v);
        return it.n ? it.a[it.n - 1] : mk_undef("No last item, sequence was empty.");
    }
    case F_float: {
        BIND("default");
        jv dflt = arg_or(p[0], mk_float(0.0));
        if (v.k == V_UNDEF) undef_error(R, v);
        if (v.k == V_FLOAT) return v;
        if (is_intlike(v)) return mk_float((double)as_i(v));
        double f;
        if (v.k == V_STR && parse_py_float(R, v, &f)) return mk_float(f);
        return dflt;
    }
    case F_format: {
        jv s = soft_str(R, v);
        if (a->npos && a->nkw) TYPE_ERROR("FilterArgumentError: can't handle positional and keyword arguments at the same time");
        if (a->nkw) {
            jdict *d = new_dict(R, (size_t)a->nkw);
            for (int k = 0; k < a->nkw; k++) dict_set(R, d, mk_str(a->kn[k], a->kl[k]), a->kv[k]);
            return binop(R, OP_MOD, s, mk_dict(d));
        }
        return binop(R, OP_MOD, s, list_of(R, (jiter){a->pos, (size_t)a->npos}, LK_TUPLE));
    }
    case F_indent:
        BIND("width", "first", "blank");
        if (v.k != V_STR) {
            if (v.k == V_UNDEF) undef_error(R, v);
            TYPE_ERROR("TypeError: unsupported operand type(s) for +=: '%s' and 'str'", tname(v));
        }
        return do_indent(R, v, arg_or(p[0], mk_int(4)), arg_or(p[1], mk_bool(false)), arg_or(p[2], mk_bool(false)));
    case F_int: {
        BIND("default", "base");
        jv dflt = arg_or(p[0], mk_int(0));
        int64_t base = given(p[1]) ? want_int(R, p[1], "base") : 10, r;
        if (v.k == V_UNDEF) undef_error(R, v);
        if (is_intlike(v)) return mk_int(as_i(v));
        if (v.k == V_FLOAT) {
            if (isnan(v.u.f)) return dflt;
            if (!(fabs(v.u.f) < 9.2e18)) UNSUPPORTED("int() of %g", v.u.f);
            return mk_int((int64_t)v.u.f);
        }
        if (v.k == V_STR) {
            if (parse_py_int(R, v, base, &r)) return mk_int(r);
            double f;
            if (parse_py_float(R, v, &f)) {
                if (isnan(f)) return dflt;
                if (!(fabs(f) < 9.2e18)) UNSUPPORTED("int() of %g", f);
                return mk_int((int64_t)f);
            }
        }
        return dflt;
    }
    case F_join: {
        BIND("d", "attribute");
        jv d = soft_str(R, arg_or(p[0], mk_str("", 0)));
        jiter it = iterate(R, v);
        sb b;
        sb_init(&b, &R->A);
        for (size_t i = 0; i < it.n; i++) {
            if (i) sb_put(&b, d.u.s.p, d.u.s.n);
            jv x = given(p[1]) && p[1].k != V_NONE ? attr_path(R, it.a[i], p[1], mk_none()) : it.a[i];
            py_str(R, &b, x);
        }
        return str_from_sb(&b, false);
    }
    case F_list: BIND0(); return list_of(R, iterate(R, v), LK_LIST);
    case F_lower: BIND0(); return str_case(R, soft_str(R, v), CASE_LOWER);
    case F_upper: BIND0(); return str_case(R, soft_str(R, v), CASE_UPPER);
    case F_items: {
        BIND0();
        jlist *out = new_list(R, 0, LK_GEN);
        if (v.k == V_UNDEF) return mk_list(out);
        if (v.k != V_DICT) return poisoned_gen(R, "Can only get item pairs from a mapping.", v);
        for (size_t i = 0; i < v.u.d->n; i++) list_push(R, out, mk_tuple2(R, v.u.d->keys[i], v.u.d->vals[i]));
        return mk_list(out);
    }
    case F_map: return f_map(R, v, a);
    case F_min: case F_max:
        BIND("case_sensitive", "attribute");
        return f_minmax(R, v, p[0], p[1], id == F_max);
    case F_select: return f_select(R, v, a, false, true);
    case F_reject: return f_select(R, v, a, false, false);
    case F_selectattr: return f_select(R, v, a, true, true);
    case F_rejectattr: return f_select(R, v, a, true, false);
    case F_replace: {
        BIND("old", "new", "count");
        if (!given(p[0]) || !given(p[1])) TYPE_ERROR("TypeError: do_replace() missing required arguments");
        jv s = to_str(R, v), old = to_str(R, p[0]), nw = to_str(R, p[1]);
        int64_t count = given(p[2]) && p[2].k != V_NONE ? want_int(R, p[2], "count") : -1;
        return str_replace(R, s, old, nw, count);
    }
    case F_reverse: {
        BIND0();
        if (v.k == V_STR) {
            jiter ch = str_chars(R, v);
            sb b;
            sb_init(&b, &R->A);
            for (size_t i = ch.n; i-- > 0;) sb_put(&b, ch.a[i].u.s.p, ch.a[i].u.s.n);
            return str_from_sb(&b, v.safe);
        }
        bool gen = v.k == V_LIST && v.u.l->kind == LK_GEN;
        if (v.k != V_LIST && v.k != V_DICT && v.k != V_UNDEF)
            TYPE_ERROR("FilterArgumentError: argument must be iterable");
        jiter it = iterate(R, v);
        jlist *out = new_list(R, it.n, gen ? LK_LIST : LK_GEN);
        for (size_t i = it.n; i-- > 0;) out->a[out->n++] = it.a[i];
        return mk_list(out);
    }
    case F_round: {
        BIND("precision", "method");
        int64_t prec = given(p[0]) ? want_int(R, p[0], "precision") : 0;
        jv method = arg_or(p[1], mk_cstr("common"));
        if (!str_eq(method, "common") && !str_eq(method, "ceil") && !str_eq(method, "floor"))
            TYPE_ERROR("FilterArgumentError: method must be common, ceil or floor");
        if (v.k == V_UNDEF) undef_error(R, v);
        if (!is_num(v)) TYPE_ERROR("TypeError: type %s doesn't define __round__ method", tname(v));
        if (str_eq(method, "common")) {
            if (is_intlike(v)) {
                if (prec < 0) UNSUPPORTED("round(int, negative precision)");
                return mk_int(as_i(v));
            }
            if (prec < 0 || prec > 300) UNSUPPORTED("round(float, %lld)", (long long)prec);
            if (!isfinite(v.u.f)) return v;
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, v.u.f);
            return mk_float(strtod(buf, NULL));
        }
        if (prec < 0 || prec > 22) UNSUPPORTED("round(x, %lld, method)", (long long)prec);
        double p10 = pow(10.0, (double)prec), x = as_f(v) * p10;
        x = str_eq(method, "ceil") ? ceil(x) : floor(x);
        return mk_float(x / p10);
    }
    case F_safe: BIND0(); { jv s = soft_str(R, v); s.safe = 1; return s; }
    case F_sort: {
        BIND("reverse", "case_sensitive", "attribute");
        jiter it = iterate(R, v);
        jv *items = amalloc(&R->A, (it.n + 1) * sizeof *items), *keys = amalloc(&R->A, (it.n + 1) * sizeof *keys);
        bool cs = given(p[1]) && truthy(p[1]);
        for (size_t i = 0; i < it.n; i++) {
            items[i] = it.a[i];
            keys[i] = sort_key(R, it.a[i], p[2], cs);
        }
        sort_by(R, items, keys, it.n, given(p[0]) && truthy(p[0]));
        return list_of(R, (jiter){items, it.n}, LK_LIST);
    }
    case F_string: BIND0(); return soft_str(R, v);
    case F_sum: {
        BIND("attribute", "start");
        jv acc = arg_or(p[1], mk_int(0));
        jiter it = iterate(R, v);
        for (size_t i = 0; i < it.n; i++) {
            jv x = given(p[0]) && p[0].k != V_NONE ? attr_path(R, it.a[i], p[0], mk_none()) : it.a[i];
            acc = binop(R, OP_ADD, acc, x);
        }
        return acc;
    }
    case F_title: {
        BIND0();
        jv s = soft_str(R, v);
        sb b;
        sb_init(&b, &R->A);
        /* re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() */
        bool at_start = true;
        for (size_t i = 0, l; i < s.u.s.n; i += l) {
            uint32_t c = u8dec(s.u.s.p + i, s.u.s.n - i, &l);
            bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
            if (sep) {
                sb_put(&b, s.u.s.p + i, l);
                at_start = true;
            } else if (l == 1 && c >= 0x80) {
                sb_putc(&b, s.u.s.p[i]);
                at_start = false;
            } else if (at_start) {
                put_upper(&b, c, false);
                at_start = false;
            } else put_lower(&b, c);
        }
        return str_from_sb(&b, false);
    }
    case F_trim: BIND("chars"); return str_strip(R, soft_str(R, v), p[0], 3);
    case F_truncate: {
        BIND("length", "killwords", "end", "leeway");
        int64_t length = given(p[0]) ? want_int(R, p[0], "length") : 255;
        jv end = given(p[2]) ? want_str(R, p[2], "end") : mk_cstr("...");
        int64_t leeway = given(p[3]) && p[3].k != V_NONE ? want_int(R, p[3], "leeway") : 5;
        int64_t endlen = (int64_t)u8count(end.u.s.p, end.u.s.n);
        if (length < endlen) TYPE_ERROR("AssertionError: expected length >= %lld, got %lld", (long long)endlen, (long long)length);
        if (leeway < 0) TYPE_ERROR("AssertionError: expected leeway >= 0, got %lld", (long long)leeway);
        int64_t len = py_len(R, v);
        if (len <= length + leeway) return v;
        if (v.k != V_STR) TYPE_ERROR("TypeError: truncate of %s", tname(v));
        size_t cnt;
        size_t *o = u8offsets(R, v.u.s.p, v.u.s.n, &cnt);
        jv head = mk_str(v.u.s.p, o[length - endlen]);
        if (!(given(p[1]) && truthy(p[1]))) {
            const char *sp = memrmem_(head.u.s.p, head.u.s.n, " ", 1);
            if (sp) head.u.s.n = (size_t)(sp - head.u.s.p);
        }
        return concat_str(R, head, end);
    }
    case F_unique: {
        BIND("case_sensitive", "attribute");
        bool cs = given(p[0]) && truthy(p[0]);
        if (!iterable(v)) return poisoned_gen(R, NOT_ITERABLE, v);
        jiter it = iterate(R, v);
        jlist *out = new_list(R, 0, LK_GEN), *seen = new_list(R, 0, LK_LIST);
        for (size_t i = 0; i < it.n; i++) {
            jv k = given(p[1]) && p[1].k != V_NONE ? attr_path(R, it.a[i], p[1], mk_none()) : it.a[i];
            if (!cs) k = ignore_case(R, k);
            if (!hashable(k)) TYPE_ERROR("TypeError: unhashable type: '%s'", tname(k));
            bool dup = false;
            work(R, seen->n);
            for (size_t j = 0; j < seen->n && !dup; j++) dup = py_eq(R, seen->a[j], k);
            step(R);
            if (dup) continue;
            list_push(R, seen, k);
            list_push(R, out, it.a[i]);
        }
        return mk_list(out);
    }
    case F_wordcount: {
        BIND0();
        jv s = soft_str(R, v);
        int64_t k = 0;
        bool in = false;
        for (size_t i = 0, l; i < s.u.s.n; i += l) {
            uint32_t c = u8dec(s.u.s.p + i, s.u.s.n - i, &l);
            bool w = cp_isalpha(c) || cp_isdigit(c) || c == '_';
            if (w && !in) k++;
            in = w;
        }
        return mk_int(k);
    }
    case F_tojson: return f_tojson(R, v, a);
    default: UNSUPPORTED("the '%s' filter is not supported", name);
    }
#undef BIND
#undef BIND0
}

/* ========================================================================== */
/* tests                                                                        */
/* ========================================================================== */

static bool py_contains(rctx *R, jv container, jv x) {
    switch (container.k) {
    case V_UNDEF: return false;
    case V_STR:
        if (x.k != V_STR) TYPE_ERROR("TypeError: 'in <string>' requires string as left operand, not %s", tname(x));
        return memmem_(container.u.s.p, container.u.s.n, x.u.s.p, x.u.s.n) != NULL;
    case V_DICT:
        if (!hashable(x)) TYPE_ERROR("TypeError: unhashable type: '%s'", tname(x));
        return dict_find(R, container.u.d, x) != NULL;
    case V_LIST: {
        jlist *l = container.u.l;
        if (l->kind == LK_GEN) UNSUPPORTED("'in' on a generator");
        work(R, l->n);
        for (size_t i = 0; i < l->n; i++)
            if (py_eq(R, l->a[i], x)) return true;
        return false;
    }
    default: TYPE_ERROR("TypeError: argument of type '%s' is not iterable", tname(container));
    }
}

static bool apply_test(rctx *R, int id, jv v, const args *a) {
    jv p[1];
    static const char *const k_one[] = {"value"}, *const k_none[] = {NULL};
    step(R);
    switch (id) {
    case T_eq: case T_eq2: case T_eq3: case T_ne: case T_ne2: case T_gt: case T_gt2: case T_gt3: case T_ge:
    case T_ge2: case T_lt: case T_lt2: case T_lt3: case T_le: case T_le2: case T_sameas: case T_in:
    case T_divisibleby:
        bind(R, k_tests[id], k_one, 1, a, p);
        if (!given(p[0])) TYPE_ERROR("TypeError: test '%s' takes one argument", k_tests[id]);
        break;
    default: bind(R, k_tests[id], k_none, 0, a, p);
    }
    switch (id) {
    case T_odd: case T_even: {
        jv m = binop(R, OP_MOD, v, mk_int(2));
        return py_eq(R, m, mk_int(id == T_odd ? 1 : 0));
    }
    case T_divisibleby: return py_eq(R, binop(R, OP_MOD, v, p[0]), mk_int(0));
    case T_defined: return v.k != V_UNDEF;
    case T_undefined: return v.k == V_UNDEF;
    case T_filter: return v.k == V_STR && lookup_name(k_filters, F_COUNT_, v.u.s.p, v.u.s.n) >= 0 &&
                          lookup_name(k_filters, F_COUNT_, v.u.s.p, v.u.s.n) != F_NOT_IMPLEMENTED;
    case T_test: return v.k == V_STR && lookup_name(k_tests, T_COUNT_, v.u.s.p, v.u.s.n) >= 0;
    case T_none: return v.k == V_NONE;
    case T_boolean: return v.k == V_BOOL;
    case T_false: return v.k == V_BOOL && !v.u.b;
    case T_true: return v.k == V_BOOL && v.u.b;
    case T_integer: return v.k == V_INT;
    case T_float: return v.k == V_FLOAT;
    case T_lower: return str_is(to_str(R, v), M_S_islower);
    case T_upper: return str_is(to_str(R, v), M_S_isupper);
    case T_string: return v.k == V_STR;
    case T_mapping: return v.k == V_DICT;
    case T_number: return is_num(v);
    case T_sequence:
        return v.k == V_STR || v.k == V_DICT || v.k == V_UNDEF ||
               (v.k == V_LIST && (v.u.l->kind == LK_LIST || v.u.l->kind == LK_TUPLE || v.u.l->kind == LK_RANGE));
    case T_iterable: return v.k == V_STR || v.k == V_LIST || v.k == V_DICT || v.k == V_UNDEF || v.k == V_LOOP;
    case T_callable: return v.k == V_MACRO || v.k == V_FUNC || v.k == V_METHOD || v.k == V_UNDEF || v.k == V_LOOP;
    case T_sameas:
        if (v.k != p[0].k) return false;
        switch (v.k) {
        case V_NONE: return true;
        case V_BOOL: return v.u.b == p[0].u.b;
        case V_INT: return v.u.i == p[0].u.i && v.u.i >= -5 && v.u.i <= 256;
        case V_STR: return v.u.s.p == p[0].u.s.p && v.u.s.n == p[0].u.s.n;
        case V_UNDEF: case V_FLOAT: return false;
        default: return py_eq(R, v, p[0]);
        }
    case T_escaped: return v.k == V_STR && v.safe;
    case T_in: return py_contains(R, p[0], v);
    case T_eq: case T_eq2: case T_eq3: return py_eq(R, v, p[0]);
    case T_ne: case T_ne2: return !py_eq(R, v, p[0]);
    case T_gt: case T_gt2: case T_gt3: return py_compare(R, v, CMP_GT, p[0]);
    case T_ge: case T_ge2: return py_compare(R, v, CMP_GE, p[0]);
    case T_lt: case T_lt2: case T_lt3: return py_compare(R, v, CMP_LT, p[0]);
    case T_le: case T_le2: return py_compare(R, v, CMP_LE, p[0]);
    }
    UNSUPPORTED("test %d", id);
}

/* ========================================================================== */
/* evaluation                                                                   */
/* ========================================================================== */

enum { X_NORMAL, X_BREAK, X_CONTINUE };

static jv eval(rctx *R, scope *s, const node *x);
static int exec_body(rctx *R, scope *s, node *const *body, int n);

static void eval_args(rctx *R, scope *s, const callargs *ca, args *a, int extra_kw) {
    memset(a, 0, sizeof *a);
    if (!ca && !extra_kw) return;
    jiter dyn = {0};
    jdict *dkw = NULL;
    if (ca && ca->dyn_args) dyn = iterate(R, eval(R, s, ca->dyn_args));
    if (ca && ca->dyn_kwargs) {
        jv d = eval(R, s, ca->dyn_kwargs);
        if (d.k != V_DICT) TYPE_ERROR("TypeError: argument after ** must be a mapping, not %s", tname(d));
        dkw = d.u.d;
    }
    int npos = (ca ? ca->npos : 0) + (int)dyn.n;
    int nkw = (ca ? ca->nkw : 0) + (dkw ? (int)dkw->n : 0) + extra_kw;
    a->pos = amalloc(&R->A, (size_t)(npos + 1) * sizeof(jv));
    a->kn = amalloc(&R->A, (size_t)(nkw + 1) * sizeof *a->kn);
    a->kl = amalloc(&R->A, (size_t)(nkw + 1) * sizeof *a->kl);
    a->kv = amalloc(&R->A, (size_t)(nkw + 1) * sizeof(jv));
    if (ca)
        for (int i = 0; i < ca->npos; i++) a->pos[a->npos++] = eval(R, s, ca->pos[i]);
    for (size_t i = 0; i < dyn.n; i++) a->pos[a->npos++] = dyn.a[i];
    if (ca)
        for (int k = 0; k < ca->nkw; k++) {
            for (int j = 0; j < a->nkw; j++)
                if (a->kl[j] == ca->kwl[k] && !memcmp(a->kn[j], ca->kwn[k], a->kl[j]))
                    TYPE_ERROR("TypeError: keyword argument repeated: %.*s", (int)a->kl[j], a->kn[j]);
            a->kn[a->nkw] = ca->kwn[k];
            a->kl[a->nkw] = ca->kwl[k];
            a->kv[a->nkw++] = eval(R, s, ca->kwv[k]);
        }
    if (dkw)
        for (size_t i = 0; i < dkw->n; i++) {
            jv key = dkw->keys[i];
            if (key.k != V_STR) TYPE_ERROR("TypeError: keywords must be strings");
            for (int j = 0; j < a->nkw; j++)
                if (a->kl[j] == key.u.s.n && !memcmp(a->kn[j], key.u.s.p, key.u.s.n))
                    TYPE_ERROR("TypeError: got multiple values for keyword argument '%.*s'", (int)key.u.s.n, key.u.s.p);
            a->kn[a->nkw] = key.u.s.p;
            a->kl[a->nkw] = key.u.s.n;
            a->kv[a->nkw++] = dkw->vals[i];
        }
}

static bool name_is(const char *p, size_t n, const sym *s) { return s->n == n && !memcmp(s->p, p, n); }

static jv call_macro(rctx *R, jmacro *m, const args *a) {
    const node *d = m->def;
    const sym *syms = R->T->syms;
    const char *mname = d->val.u.s.p;
    int mlen = (int)d->val.u.s.n, np = d->n;
    jv *vals = amalloc(&R->A, (size_t)(np + 1) * sizeof *vals);
    bool *used = amalloc(&R->A, (size_t)(a->nkw + 1));
    memset(used, 0, (size_t)(a->nkw + 1));
    int take = a->npos < np ? a->npos : np;
    bool found_caller = false;
    for (int i = 0; i < take; i++) vals[i] = a->pos[i];
    for (int i = take; i < np; i++) {
        const sym *ps = &syms[d->list[i]->sym];
        vals[i] = NOT_GIVEN;
        for (int k = 0; k < a->nkw; k++)
            if (!used[k] && name_is(a->kn[k], a->kl[k], ps)) {
                vals[i] = a->kv[k];
                used[k] = true;
                break;
            }
        if (ps->n == 6 && !memcmp(ps->p, "caller", 6)) found_caller = true;
    }
    if (take == np)
        for (int i = 0; i < np; i++)
            if (d->list[i]->sym == R->T->sym_caller) found_caller = true;
    scope *s = scope_new(R, m->closure);
    if ((d->op & MF_CALLER) && !found_caller) {
        jv caller = mk_undef("No caller defined");
        for (int k = 0; k < a->nkw; k++)
            if (!used[k] && a->kl[k] == 6 && !memcmp(a->kn[k], "caller", 6)) {
                caller = a->kv[k];
                used[k] = true;
                break;
            }
        scope_set(R, s, R->T->sym_caller, caller);
    }
    if (d->op & MF_KWARGS) {
        jdict *kw = new_dict(R, 0);
        for (int k = 0; k < a->nkw; k++)
            if (!used[k]) dict_set(R, kw, mk_str(a->kn[k], a->kl[k]), a->kv[k]);
        scope_set(R, s, R->T->sym_kwargs, mk_dict(kw));
    } else {
        for (int k = 0; k < a->nkw; k++)
            if (!used[k]) {
                if (a->kl[k] == 6 && !memcmp(a->kn[k], "caller", 6))
                    TYPE_ERROR("TypeError: macro '%.*s' was invoked with two values for the special caller argument. This is most likely a bug.", mlen, mname);
                TYPE_ERROR("TypeError: macro '%.*s' takes no keyword argument '%.*s'", mlen, mname, (int)a->kl[k], a->kn[k]);
            }
    }
    if (d->op & MF_VARARGS) {
        jlist *va = new_list(R, 0, LK_TUPLE);
        for (int i = np; i < a->npos; i++) list_push(R, va, a->pos[i]);
        scope_set(R, s, R->T->sym_varargs, mk_list(va));
    } else if (a->npos > np) {
        TYPE_ERROR("TypeError: macro '%.*s' takes not more than %d argument(s)", mlen, mname, np);
    }
    enter_frame(R, s, d->miss, d->nmiss);
    /* parameters first (a missing one is undefined), then the defaults, which
     * see them: a default naming its own parameter reads undefined */
    for (int i = 0; i < np; i++) {
        const sym *ps = &syms[d->list[i]->sym];
        scope_set(R, s, d->list[i]->sym, given(vals[i]) ? vals[i] : undef_named(ps->p, ps->n));
    }
    int first_def = np - d->n2;
    for (int i = first_def < 0 ? 0 : first_def; i < np; i++)
        if (!given(vals[i])) scope_set(R, s, d->list[i]->sym, eval(R, s, d->list2[i - first_def]));
    dive(R);
    size_t mark = R->out_n;
    exec_body(R, s, d->b->list, d->b->n);
    jv r = mk_str(astrndup(&R->A, R->out ? R->out + mark : "", R->out_n - mark), R->out_n - mark);
    R->out_n = mark;
    surface(R);
    return r;
}

static jv call_value(rctx *R, jv f, const args *a) {
    switch (f.k) {
    case V_MACRO: return call_macro(R, f.u.m, a);
    case V_FUNC: return call_global(R, f.u.fn, a);
    case V_METHOD: return call_method(R, f.u.me, a);
    case V_UNDEF: undef_error(R, f);
    case V_LOOP: UNSUPPORTED("recursive loop calls are not supported");
    default: TYPE_ERROR("TypeError: '%s' object is not callable", tname(f));
    }
}

static jv eval_inner(rctx *R, scope *s, const node *x) {
    switch (x->t) {
    case E_CONST: return x->val;
    case E_NAME:
        if (R->const_mode) rfail(R, JINJA_IMPOSSIBLE, "not constant");
        return lookup(R, s, x->sym);
    case E_GETATTR: return get_attr(R, eval(R, s, x->a), x->val.u.s.p, x->val.u.s.n);
    case E_GETITEM: {
        jv obj = eval(R, s, x->a);
        if (x->b->t == E_SLICE) {
            const node *sl = x->b;
            jv a = sl->b ? eval(R, s, sl->b) : mk_none(), b = sl->c ? eval(R, s, sl->c) : mk_none(),
               c = sl->d ? eval(R, s, sl->d) : mk_none();
            return get_slice(R, obj, a, b, c, R->const_mode);
        }
        return get_item(R, obj, eval(R, s, x->b));
    }
    case E_SLICE: UNSUPPORTED("slice outside a subscript");
    case E_CALL: {
        if (R->const_mode) rfail(R, JINJA_IMPOSSIBLE, "not constant");
        jv f = eval(R, s, x->a);
        args a;
        eval_args(R, s, x->ca, &a, 0);
        return call_value(R, f, &a);
    }
    case E_FILTER: {
        if (R->const_mode && !(x->flags & NF_CONST)) rfail(R, JINJA_IMPOSSIBLE, "not constant");
        jv v = eval(R, s, x->a);
        args a;
        eval_args(R, s, x->ca, &a, 0);
        return apply_filter(R, x->id, v, &a);
    }
    case E_TEST: {
        jv v = eval(R, s, x->a);
        args a;
        eval_args(R, s, x->ca, &a, 0);
        return mk_bool(apply_test(R, x->id, v, &a));
    }
    case E_BIN: {
        jv l = eval(R, s, x->a);
        return binop(R, x->op, l, eval(R, s, x->b));
    }
    case E_CONCAT: {
        sb b;
        sb_init(&b, &R->A);
        for (int i = 0; i < x->n; i++) py_str(R, &b, eval(R, s, x->list[i]));
        return str_from_sb(&b, false);
    }
    case E_COMPARE: {
        jv l = eval(R, s, x->a);
        for (int i = 0; i < x->n; i++) {
            jv r = eval(R, s, x->list[i]);
            bool ok;
            if (x->ops[i] == CMP_IN) ok = py_contains(R, r, l);
            else if (x->ops[i] == CMP_NOTIN) ok = !py_contains(R, r, l);
            else ok = py_compare(R, l, x->ops[i], r);
            if (!ok) return mk_bool(false);
            l = r;
        }
        return mk_bool(true);
    }
    case E_AND: {
        jv l = eval(R, s, x->a);
        return truthy(l) ? eval(R, s, x->b) : l;
    }
    case E_OR: {
        jv l = eval(R, s, x->a);
        return truthy(l) ? l : eval(R, s, x->b);
    }
    case E_NOT: return mk_bool(!truthy(eval(R, s, x->a)));
    case E_NEG:
    case E_POS: {
        jv v = eval(R, s, x->a);
        if (v.k == V_UNDEF) undef_error(R, v);
        if (v.k == V_FLOAT) return mk_float(x->t == E_NEG ? -v.u.f : v.u.f);
        if (is_intlike(v)) {
            int64_t i = as_i(v);
            if (x->t == E_POS) return mk_int(i);
            if (i == INT64_MIN) int_overflow(R);
            return mk_int(-i);
        }
        TYPE_ERROR("TypeError: bad operand type for unary %c: '%s'", x->t == E_NEG ? '-' : '+', tname(v));
    }
    case E_COND:
        if (truthy(eval(R, s, x->b))) return eval(R, s, x->a);
        if (x->c) return eval(R, s, x->c);
        if (R->const_mode) rfail(R, JINJA_IMPOSSIBLE, "not constant");
        return mk_undef("the inline if-expression evaluated to false and no else section was defined");
    case E_LIST:
    case E_TUPLE: {
        jlist *l = new_list(R, (size_t)x->n, x->t == E_LIST ? LK_LIST : LK_TUPLE);
        for (int i = 0; i < x->n; i++) l->a[l->n++] = eval(R, s, x->list[i]);
        return mk_list(l);
    }
    case E_DICT: {
        jdict *d = new_dict(R, (size_t)x->n);
        for (int i = 0; i < x->n; i++) {
            jv k = eval(R, s, x->list[i]);
            if (!hashable(k)) TYPE_ERROR("TypeError: unhashable type: '%s'", tname(k));
            dict_set(R, d, k, eval(R, s, x->list2[i]));
        }
        return mk_dict(d);
    }
    }
    UNSUPPORTED("expression node %d", x->t);
}

/* jinja2.compiler.has_safe_repr: values the optimizer may fold into code */
static bool safe_repr(rctx *R, jv v, int depth) {
    if (depth > 64) return false;
    switch (v.k) {
    case V_NONE: case V_BOOL: case V_INT: case V_FLOAT: case V_STR: return true;
    case V_LIST:
        if (v.u.l->kind == LK_RANGE) return true;
        if (v.u.l->kind != LK_LIST && v.u.l->kind != LK_TUPLE) return false;
        for (size_t i = 0; i < v.u.l->n; i++)
            if (!safe_repr(R, v.u.l->a[i], depth + 1)) return false;
        return true;
    case V_DICT:
        for (size_t i = 0; i < v.u.d->n; i++)
            if (!safe_repr(R, v.u.d->keys[i], depth + 1) || !safe_repr(R, v.u.d->vals[i], depth + 1)) return false;
        return true;
    default: return false;
    }
}

/* Evaluate a constant subtree the way jinja2's optimizer does at compile time.
 * False when that fails or (unless any_value, as for a whole {{ }}) the value
 * could not be folded into code; the caller then evaluates it normally.  Limit
 * errors still unwind. */
static bool try_fold(rctx *R, scope *s, const node *x, bool any_value, jv *out) {
    jmp_buf saved;
    memcpy(saved, R->E.jb, sizeof saved);
    int depth = R->depth, line = R->line;
    volatile bool ok = false;
    static const jv zero;
    volatile jv v = zero;
    R->const_mode = true;
    if (!setjmp(R->E.jb)) {
        jv r = eval_inner(R, s, x);
        v = r;
        ok = true;
    }
    memcpy(R->E.jb, saved, sizeof saved);
    R->const_mode = false;
    R->depth = depth;
    R->line = line;
    if (!ok) {
        if (R->E.code == JINJA_ERR_LIMIT || R->E.code == JINJA_ERR_NOMEM) longjmp(R->E.jb, 1);
        return false;
    }
    jv r = v;
    if (!any_value && !safe_repr(R, r, 0)) return false;
    *out = r;
    return true;
}

static jv eval(rctx *R, scope *s, const node *x) {
    if (!x) return R->hole;
    if ((x->flags & NF_FOLD) == NF_FOLD && !R->const_mode) {
        jv v;
        if (try_fold(R, s, x, false, &v)) return v;
    } /* the innermost operand of a filter block's chain */
    dive(R);
    step(R);
    int saved = R->line;
    R->line = x->line;
    jv r = eval_inner(R, s, x);
    R->line = saved;
    surface(R);
    return r;
}

/* ========================================================================== */
/* statements                                                                   */
/* ========================================================================== */

static void out_value(rctx *R, jv v) {
    if (v.k == V_STR) {
        out_put(R, v.u.s.p, v.u.s.n);
        return;
    }
    sb b;
    sb_init(&b, &R->A);
    py_str(R, &b, v);
    out_put(R, b.p, b.n);
}

static void assign(rctx *R, scope *s, const node *t, jv v) {
    if (t->t == E_NAME) {
        scope_set(R, s, t->sym, v);
    } else if (t->t == S_NSREF) {
        jv ns = lookup(R, s, t->sym);
        if (ns.k != V_NS) TYPE_ERROR("TemplateRuntimeError: cannot assign attribute on non-namespace object");
        dict_set(R, ns.u.d, t->val, v);
    } else { /* E_TUPLE of names */
        jiter it = iterate(R, v);
        if (it.n < (size_t)t->n)
            TYPE_ERROR("ValueError: not enough values to unpack (expected %d, got %zu)", t->n, it.n);
        if (it.n > (size_t)t->n) TYPE_ERROR("ValueError: too many values to unpack (expected %d)", t->n);
        for (int i = 0; i < t->n; i++) assign(R, s, t->list[i], it.a[i]);
    }
}

/* Render a body into a string instead of the output. */
static jv capture(rctx *R, scope *s, node *const *body, int n, int *ctl) {
    size_t mark = R->out_n;
    int rc = exec_body(R, s, body, n);
    if (ctl) *ctl = rc;
    jv r = mk_str(astrndup(&R->A, R->out ? R->out + mark : "", R->out_n - mark), R->out_n - mark);
    R->out_n = mark;
    return r;
}

static jv apply_chain(rctx *R, scope *s, const node *chain, jv v) {
    if (!chain) return v;
    jv saved = R->hole;
    R->hole = v;
    jv r = eval(R, s, chain);
    R->hole = saved;
    return r;
}

static int exec_stmt(rctx *R, scope *s, const node *x) {
    step(R);
    R->line = x->line;
    switch (x->t) {
    case S_DATA: out_put(R, x->val.u.s.p, x->val.u.s.n); return X_NORMAL;
    case S_OUTPUT: {
        jv v;
        if ((x->a->flags & NF_FOLD) == NF_FOLD && try_fold(R, s, x->a, true, &v)) out_value(R, v);
        else out_value(R, eval(R, s, x->a));
        return X_NORMAL;
    }
    case S_IF:
        if (truthy(eval(R, s, x->a))) return exec_body(R, s, x->list, x->n);
        return exec_body(R, s, x->list2, x->n2);
    case S_FOR: {
        jiter items = iterate(R, eval(R, s, x->a));
        if (x->c) { /* {% for a in b if cond %}: the loop sees only the kept items */
            jv *kept = amalloc(&R->A, (items.n + 1) * sizeof *kept);
            size_t k = 0;
            scope *fs = scope_new(R, s);
            for (size_t i = 0; i < items.n; i++) {
                step(R);
                fs->n = 0;
                assign(R, fs, x->b, items.a[i]);
                if (truthy(eval(R, fs, x->c))) kept[k++] = items.a[i];
            }
            items = (jiter){kept, k};
        }
        jloop *lp = amalloc(&R->A, sizeof *lp);
        memset(lp, 0, sizeof *lp);
        lp->items = items.a;
        lp->n = items.n;
        scope *is = scope_new(R, s); /* reset every iteration: sets do not outlive it */
        /* jinja2 clears its "run the else block" flag at the end of the body, so
         * the else runs unless some iteration ended without break or continue */
        bool completed = false;
        dive(R);
        for (size_t i = 0; i < items.n; i++) {
            step(R);
            is->n = 0;
            enter_frame(R, is, x->miss, x->nmiss);
            lp->i = i;
            scope_set(R, is, R->T->sym_loop, (jv){.k = V_LOOP, .u.lp = lp});
            assign(R, is, x->b, items.a[i]);
            int ctl = exec_body(R, is, x->list, x->n);
            if (ctl == X_NORMAL) completed = true;
            if (ctl == X_BREAK) break;
        }
        surface(R);
        if (!completed) return exec_body(R, enter_frame(R, scope_new(R, s), x->miss2, x->nmiss2), x->list2, x->n2);
        return X_NORMAL;
    }
    case S_SET: assign(R, s, x->b, eval(R, s, x->a)); return X_NORMAL;
    case S_SETBLOCK: {
        int ctl;
        jv v = capture(R, enter_frame(R, scope_new(R, s), x->miss, x->nmiss), x->list, x->n, &ctl);
        assign(R, s, x->b, apply_chain(R, s, x->c, v));
        return ctl;
    }
    case S_MACRO: {
        jmacro *m = amalloc(&R->A, sizeof *m);
        m->def = x;
        m->closure = s;
        scope_set(R, s, x->sym, (jv){.k = V_MACRO, .u.m = m});
        return X_NORMAL;
    }
    case S_CALLBLOCK: {
        jmacro *m = amalloc(&R->A, sizeof *m);
        m->def = x;
        m->closure = s;
        const node *call = x->a;
        jv f = eval(R, s, call->a);
        args a;
        eval_args(R, s, call->ca, &a, 1);
        for (int k = 0; k < a.nkw; k++)
            if (a.kl[k] == 6 && !memcmp(a.kn[k], "caller", 6))
                TYPE_ERROR("TypeError: keyword argument repeated: caller");
        a.kn[a.nkw] = "caller";
        a.kl[a.nkw] = 6;
        a.kv[a.nkw++] = (jv){.k = V_MACRO, .u.m = m};
        out_value(R, call_value(R, f, &a));
        return X_NORMAL;
    }
    case S_FILTERBLOCK: {
        int ctl;
        jv v = capture(R, enter_frame(R, scope_new(R, s), x->miss, x->nmiss), x->list, x->n, &ctl);
        jv r = apply_chain(R, s, x->c, v);
        /* jinja2 yields the filter's result as is; "".join() then wants a str */
        if (r.k != V_STR) TYPE_ERROR("TypeError: sequence item 0: expected str instance, %s found", tname(r));
        out_put(R, r.u.s.p, r.u.s.n);
        return ctl;
    }
    case S_WITH: {
        scope *ws = enter_frame(R, scope_new(R, s), x->miss, x->nmiss);
        for (int i = 0; i < x->n2; i++) assign(R, ws, x->list2[i], eval(R, s, x->c->list[i]));
        return exec_body(R, ws, x->list, x->n);
    }
    case S_SCOPE: return exec_body(R, enter_frame(R, scope_new(R, s), x->miss, x->nmiss), x->list, x->n);
    case S_BREAK: return X_BREAK;
    case S_CONTINUE: return X_CONTINUE;
    }
    UNSUPPORTED("statement node %d", x->t);
}

static int exec_body(rctx *R, scope *s, node *const *body, int n) {
    dive(R);
    for (int i = 0; i < n; i++) {
        int rc = exec_stmt(R, s, body[i]);
        if (rc != X_NORMAL) {
            surface(R);
            return rc;
        }
    }
    surface(R);
    return X_NORMAL;
}

/* ========================================================================== */
/* public API                                                                   */
/* ========================================================================== */

static void copy_err(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
}

int jinja_parse(const char *src, size_t len, jinja_template **out, char *err, size_t err_len) {
    *out = NULL;
    jinja_template *T = calloc(1, sizeof *T);
    parser *P = calloc(1, sizeof *P);
    if (!T || !P) {
        free(T);
        free(P);
        copy_err(err, err_len, "jinja: out of memory");
        return JINJA_ERR_NOMEM;
    }
    T->A.limit = (size_t)1 << 30;
    T->A.E = &T->E;
    T->A.line = &P->line;
    P->E = &T->E;
    P->A = &T->A;
    P->T = T;
    if (setjmp(T->E.jb)) {
        copy_err(err, err_len, T->E.msg);
        int code = T->E.code;
        free(P->toks);
        free(P);
        arena_free(&T->A);
        free(T);
        return code;
    }
    /* newlines → \n; one trailing newline dropped (keep_trailing_newline=False) */
    char *s = amalloc(&T->A, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    P->src = s;
    P->len = n;
    T->sym_loop = intern(P, "loop", 4);
    T->sym_varargs = intern(P, "varargs", 7);
    T->sym_kwargs = intern(P, "kwargs", 6);
    T->sym_caller = intern(P, "caller", 6);
    lex(P);
    nvec body = {0};
    subparse(P, NULL, &body);
    annotate(P, body.a, body.n);
    analyze_frame(P, NULL, (frame_job){NULL, 0, body.a, body.n, NULL, 0, false}, 0);
    T->body = body.a;
    T->n = body.n;
    free(P->toks);
    free(P);
    *out = T;
    return JINJA_OK;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    arena_free(&t->A);
    free(t);
}

/* Render with the variables of vars; json_text (may be NULL) is the text
 * vars was parsed from, for exact numbers. */
static int render(const jinja_template *T, const cJSON *vars, const char *json_text, size_t json_len,
                  const jinja_render_opts *opts, char **out, size_t *out_len, char *err, size_t err_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    rctx *R = calloc(1, sizeof *R);
    if (!R) {
        copy_err(err, err_len, "jinja: out of memory");
        return JINJA_ERR_NOMEM;
    }
    jinja_limits lim = opts ? opts->limits : (jinja_limits){0};
    R->T = T;
    R->max_out = lim.max_output_bytes ? lim.max_output_bytes : (size_t)16 << 20;
    R->max_steps = lim.max_steps ? lim.max_steps : 20000000;
    R->max_depth = lim.max_depth > 0 ? lim.max_depth : 500;
    R->A.limit = lim.max_mem_bytes ? lim.max_mem_bytes : (size_t)256 << 20;
    R->A.E = &R->E;
    R->A.line = &R->line;
    if (setjmp(R->E.jb)) {
        copy_err(err, err_len, R->E.msg);
        int code = R->E.code;
        arena_free(&R->A);
        free(R->out);
        free(R);
        return code;
    }
    if (opts && opts->now) R->now = *opts->now;
    else {
        time_t t = time(NULL);
        localtime_r(&t, &R->now);
    }
    if (vars && !cJSON_IsObject(vars)) TYPE_ERROR("render variables must be a JSON object");
    jsonnums nums_buf, *nums = NULL;
    if (json_text) {
        json_number_lexemes(R, json_text, json_len, &nums_buf);
        nums = &nums_buf;
    }
    /* every variable in document order (the lexemes follow it), then the symbols */
    jdict *vd = new_dict(R, 0);
    for (const cJSON *c = vars ? vars->child : NULL; c; c = c->next)
        dict_set(R, vd, mk_cstr(c->string ? c->string : ""), from_json(R, c, nums));
    R->globals = amalloc(&R->A, (size_t)(T->nsyms + 1) * sizeof(jv));
    for (int i = 0; i < T->nsyms; i++) {
        jv *v = dict_find_str(R, vd, T->syms[i].p, T->syms[i].n);
        int fn;
        if (v) R->globals[i] = *v;
        else if ((fn = lookup_name(k_globals, FN_COUNT_, T->syms[i].p, T->syms[i].n)) >= 0)
            R->globals[i] = (jv){.k = V_FUNC, .u.fn = fn};
        else R->globals[i] = undef_named(T->syms[i].p, T->syms[i].n);
    }
    exec_body(R, enter_frame(R, scope_new(R, NULL), T->miss, T->nmiss), T->body, T->n);
    out_put(R, "", 0);
    char *o = realloc(R->out, R->out_n + 1);
    if (!o) rfail(R, JINJA_ERR_NOMEM, "out of memory");
    o[R->out_n] = 0;
    *out = o;
    if (out_len) *out_len = R->out_n;
    arena_free(&R->A);
    free(R);
    return JINJA_OK;
}

int jinja_render(const jinja_template *T, const cJSON *vars, const jinja_render_opts *opts, char **out,
                 size_t *out_len, char *err, size_t err_len) {
    return render(T, vars, NULL, 0, opts, out, out_len, err, err_len);
}

int jinja_render_json(const jinja_template *T, const char *vars_json, size_t len, const jinja_render_opts *opts,
                      char **out, size_t *out_len, char *err, size_t err_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    cJSON *vars = cJSON_ParseWithLength(vars_json, len);
    if (!vars) {
        copy_err(err, err_len, "jinja: line 0: render variables: invalid JSON");
        return JINJA_ERR_RUNTIME;
    }
    int rc = render(T, vars, vars_json, len, opts, out, out_len, err, err_len);
    cJSON_Delete(vars);
    return rc;
}
