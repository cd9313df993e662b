/*
 * gram_fa.c — automata for the grammar module (see gram_fa.h).
 *
 * Everything regular in a JSON Schema becomes a DFA over bytes here: string
 * contents (patterns, formats, lengths), numbers (syntax, ranges,
 * multipleOf), object keys, literals, and the "skeleton" of arrays and
 * alternations, whose call symbols invoke other rules.  The pipeline is the
 * textbook one — Thompson NFA, subset construction over byte classes, trim,
 * Moore minimisation — because these automata are small (tens to thousands
 * of states) and built once per schema; the matcher then steps them with
 * one table lookup per byte.
 */
#include "gram_fa.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ferr(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ferr(char *err, size_t err_len, const char *fmt, ...) {
    if (!err || !err_len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* ---- NFA builder ------------------------------------------------------------------ */

void gram_nfa_init(gram_nfa *n) { memset(n, 0, sizeof *n); }

void gram_nfa_free(gram_nfa *n) {
    free(n->tag);
    free(n->edges);
    memset(n, 0, sizeof *n);
}

int32_t gram_nfa_state(gram_nfa *n) {
    if (n->oom) return 0;
    if (n->n_states == n->cap_states) {
        int nc = n->cap_states ? n->cap_states * 2 : 64;
        int32_t *t = realloc(n->tag, (size_t)nc * sizeof *t);
        if (!t) {
            n->oom = 1;
            return 0;
        }
        n->tag = t;
        n->cap_states = nc;
    }
    n->tag[n->n_states] = -1;
    return n->n_states++;
}

void gram_nfa_edge_add(gram_nfa *n, int32_t from, int32_t to, int32_t lo, int32_t hi) {
    if (n->oom) return;
    if (n->n_edges == n->cap_edges) {
        int nc = n->cap_edges ? n->cap_edges * 2 : 128;
        gram_nfa_edge *e = realloc(n->edges, (size_t)nc * sizeof *e);
        if (!e) {
            n->oom = 1;
            return;
        }
        n->edges = e;
        n->cap_edges = nc;
    }
    n->edges[n->n_edges++] = (gram_nfa_edge){from, to, lo, hi};
}

static void eps(gram_nfa *n, int32_t a, int32_t b) { gram_nfa_edge_add(n, a, b, -1, -1); }

gram_frag gram_frag_empty(gram_nfa *n) {
    int32_t s = gram_nfa_state(n);
    return (gram_frag){s, s};
}

gram_frag gram_frag_bytes(gram_nfa *n, const char *s, size_t len) {
    int32_t a = gram_nfa_state(n), cur = a;
    for (size_t i = 0; i < len; i++) {
        int32_t nx = gram_nfa_state(n);
        gram_nfa_edge_add(n, cur, nx, (uint8_t)s[i], (uint8_t)s[i]);
        cur = nx;
    }
    return (gram_frag){a, cur};
}

gram_frag gram_frag_range(gram_nfa *n, int lo, int hi) {
    int32_t a = gram_nfa_state(n), b = gram_nfa_state(n);
    gram_nfa_edge_add(n, a, b, lo, hi);
    return (gram_frag){a, b};
}

gram_frag gram_frag_call(gram_nfa *n, int32_t rule) {
    int32_t a = gram_nfa_state(n), b = gram_nfa_state(n);
    gram_nfa_edge_add(n, a, b, GRAM_SYM_CALL + rule, GRAM_SYM_CALL + rule);
    return (gram_frag){a, b};
}

gram_frag gram_frag_cat(gram_nfa *n, gram_frag a, gram_frag b) {
    eps(n, a.end, b.start);
    return (gram_frag){a.start, b.end};
}

gram_frag gram_frag_alt(gram_nfa *n, gram_frag a, gram_frag b) {
    int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
    eps(n, s, a.start);
    eps(n, s, b.start);
    eps(n, a.end, e);
    eps(n, b.end, e);
    return (gram_frag){s, e};
}

gram_frag gram_frag_opt(gram_nfa *n, gram_frag a) {
    int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
    eps(n, s, a.start);
    eps(n, s, e);
    eps(n, a.end, e);
    return (gram_frag){s, e};
}

gram_frag gram_frag_star(gram_nfa *n, gram_frag a) {
    int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
    eps(n, s, a.start);
    eps(n, s, e);
    eps(n, a.end, a.start);
    eps(n, a.end, e);
    return (gram_frag){s, e};
}

/* ---- code points as canonical JSON string content ----------------------------------- */

/* A path of byte ranges from s to e. */
static void add_path(gram_nfa *n, int32_t s, int32_t e, const uint8_t *lo, const uint8_t *hi, int len) {
    int32_t cur = s;
    for (int i = 0; i < len; i++) {
        int32_t nx = i == len - 1 ? e : gram_nfa_state(n);
        gram_nfa_edge_add(n, cur, nx, lo[i], hi[i]);
        cur = nx;
    }
}

static int utf8_enc(uint32_t c, uint8_t *b) {
    if (c < 0x80) { b[0] = (uint8_t)c; return 1; }
    if (c < 0x800) { b[0] = (uint8_t)(0xC0 | (c >> 6)); b[1] = (uint8_t)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        b[0] = (uint8_t)(0xE0 | (c >> 12));
        b[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    b[0] = (uint8_t)(0xF0 | (c >> 18));
    b[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    b[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    b[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* UTF-8 byte-range sequences for plain code points [lo, hi] (no specials, no
 * surrogates), split the way RE2 does so each sequence is a product of ranges. */
static void add_utf8(gram_nfa *n, int32_t s, int32_t e, uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= bounds[i] && hi > bounds[i]) {
            add_utf8(n, s, e, lo, bounds[i]);
            add_utf8(n, s, e, bounds[i] + 1, hi);
            return;
        }
    uint8_t a[4], b[4];
    int len = utf8_enc(lo, a);
    if (len > 1)
        for (int i = 1; i < len; i++) {
            uint32_t m = (1u << (6 * i)) - 1;
            if ((lo & ~m) != (hi & ~m)) {
                if ((lo & m) != 0) {
                    add_utf8(n, s, e, lo, lo | m);
                    add_utf8(n, s, e, (lo | m) + 1, hi);
                    return;
                }
                if ((hi & m) != m) {
                    add_utf8(n, s, e, lo, (hi & ~m) - 1);
                    add_utf8(n, s, e, hi & ~m, hi);
                    return;
                }
            }
        }
    utf8_enc(hi, b);
    add_path(n, s, e, a, b, len);
}

static void add_escape(gram_nfa *n, int32_t s, int32_t e, uint32_t c) {
    char buf[8];
    int len;
    switch (c) {
    case 0x08: len = snprintf(buf, sizeof buf, "\\b"); break;
    case 0x0C: len = snprintf(buf, sizeof buf, "\\f"); break;
    case 0x0A: len = snprintf(buf, sizeof buf, "\\n"); break;
    case 0x0D: len = snprintf(buf, sizeof buf, "\\r"); break;
    case 0x09: len = snprintf(buf, sizeof buf, "\\t"); break;
    case '"': len = snprintf(buf, sizeof buf, "\\\""); break;
    case '\\': len = snprintf(buf, sizeof buf, "\\\\"); break;
    default: len = snprintf(buf, sizeof buf, "\\u%04x", (unsigned)c); break;
    }
    uint8_t lo[8];
    memcpy(lo, buf, (size_t)len);
    add_path(n, s, e, lo, lo, len);
}

static void add_cp_range(gram_nfa *n, int32_t s, int32_t e, uint32_t lo, uint32_t hi) {
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return;
    /* surrogates are not code points of a UTF-8 text */
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) add_cp_range(n, s, e, lo, 0xD7FF);
        if (hi > 0xDFFF) add_cp_range(n, s, e, 0xE000, hi);
        return;
    }
    uint32_t c = lo;
    while (c <= hi) {
        if (c < 0x20 || c == '"' || c == '\\') {
            add_escape(n, s, e, c);
            c++;
            continue;
        }
        uint32_t end = hi;
        if (c < 0x22 && end >= 0x22) end = 0x21;
        else if (c < 0x5C && end >= 0x5C) end = 0x5B;
        add_utf8(n, s, e, c, end);
        c = end + 1;
        if (c == 0) break;
    }
}

gram_frag gram_frag_cp_range(gram_nfa *n, uint32_t lo, uint32_t hi) {
    int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
    add_cp_range(n, s, e, lo, hi);
    return (gram_frag){s, e};
}

/* ---- growable int arrays ---------------------------------------------------------------- */


static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t hash_ints(const int32_t *v, int n, uint64_t h) {
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)v[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

/* ---- raw DFA: what construction produces before trimming and minimisation ------------------ */

typedef struct {
    int n, cap, n_classes;
    uint8_t cls[256];
    int32_t *next;  /* (cap, n_classes) */
    int32_t *label; /* (cap) */
    gram_ivec *calls;    /* (cap) pairs (rule, next) */
    int no_min;          /* raw_finish: trim and renumber, but do not minimise */
    int trimmed;         /* every state is reachable and can reach an accepting one (skip trimming) */
} raw_dfa;

static int raw_add(raw_dfa *r) {
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 64;
        int32_t *nx = realloc(r->next, (size_t)nc * (size_t)r->n_classes * sizeof *nx);
        if (!nx) return -1;
        r->next = nx;
        int32_t *lb = realloc(r->label, (size_t)nc * sizeof *lb);
        if (!lb) return -1;
        r->label = lb;
        gram_ivec *cl = realloc(r->calls, (size_t)nc * sizeof *cl);
        if (!cl) return -1;
        r->calls = cl;
        r->cap = nc;
    }
    for (int c = 0; c < r->n_classes; c++) r->next[(size_t)r->n * (size_t)r->n_classes + (size_t)c] = -1;
    r->label[r->n] = -1;
    memset(&r->calls[r->n], 0, sizeof r->calls[r->n]);
    return r->n++;
}

static void raw_free(raw_dfa *r) {
    for (int i = 0; i < r->n; i++) free(r->calls[i].v);
    free(r->calls);
    free(r->next);
    free(r->label);
}

/* Hopcroft's algorithm: the coarsest partition of the live states that
 * respects labels and every transition (byte classes and calls, a call's
 * symbol being its callee).  blk[s] gets the block, -1 for dead states.
 * Returns the number of blocks, -1 out of memory. */
static int hopcroft(const raw_dfa *r, const int32_t *live, int32_t *blk) {
    int n = r->n, C = r->n_classes, rc = -1;
    /* symbols: classes, then distinct callees */
    gram_ivec callees = {0};
    for (int s = 0; s < n; s++)
        for (int k = 0; k + 1 < r->calls[s].n; k += 2) {
            int32_t rule = r->calls[s].v[k];
            int found = 0;
            for (int i = 0; i < callees.n && !found; i++) found = callees.v[i] == rule;
            if (!found && gram_ivec_push(&callees, rule)) return -1;
        }
    int S = C + callees.n;
    /* inverse transitions, grouped by target: (symbol, source) */
    int32_t *ioff = calloc((size_t)n + 1, sizeof *ioff);
    int32_t *elem = malloc((size_t)n * sizeof *elem), *loc = malloc((size_t)n * sizeof *loc);
    int32_t *first = malloc((size_t)n * sizeof *first), *size = malloc((size_t)n * sizeof *size);
    int32_t *marked = calloc((size_t)n, sizeof *marked), *inw = calloc((size_t)n, sizeof *inw);
    int32_t *isym = NULL, *isrc = NULL, *tmp = NULL, *bstart = calloc((size_t)S + 1, sizeof *bstart);
    int32_t *bfill = calloc((size_t)S + 1, sizeof *bfill), *bsrc = NULL;
    gram_ivec work = {0}, touched = {0}, syms = {0};
    if (!ioff || !elem || !loc || !first || !size || !marked || !inw || !bstart || !bfill) goto out;
#define EACH_EDGE(BODY)                                                                  \
    for (int s_ = 0; s_ < n; s_++) {                                                     \
        if (!live[s_]) continue;                                                         \
        for (int c_ = 0; c_ < C; c_++) {                                                 \
            int32_t t_ = r->next[(size_t)s_ * C + c_];                                   \
            if (t_ >= 0 && live[t_]) { int32_t a_ = c_; BODY }                           \
        }                                                                                \
        for (int k_ = 0; k_ + 1 < r->calls[s_].n; k_ += 2) {                             \
            int32_t t_ = r->calls[s_].v[k_ + 1];                                         \
            if (!live[t_]) continue;                                                     \
            int32_t a_ = C;                                                              \
            while (callees.v[a_ - C] != r->calls[s_].v[k_]) a_++;                         \
            BODY                                                                         \
        }                                                                                \
    }
    long ne = 0;
    EACH_EDGE({ ioff[t_ + 1]++; ne++; (void)a_; })
    for (int i = 0; i < n; i++) ioff[i + 1] += ioff[i];
    isym = malloc(((size_t)ne + 1) * sizeof *isym);
    isrc = malloc(((size_t)ne + 1) * sizeof *isrc);
    tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    bsrc = malloc(((size_t)ne + 1) * sizeof *bsrc);
    if (!isym || !isrc || !tmp || !bsrc) goto out;
    memcpy(tmp, ioff, (size_t)n * sizeof *tmp);
    EACH_EDGE({ isym[tmp[t_]] = a_; isrc[tmp[t_]++] = s_; })
#undef EACH_EDGE
    /* initial blocks: by label */
    int nb = 0, ne_live = 0;
    for (int s = 0; s < n; s++) blk[s] = -1;
    {
        gram_ivec labels = {0};
        for (int s = 0; s < n; s++) {
            if (!live[s]) continue;
            int b = -1;
            for (int i = 0; i < labels.n && b < 0; i++)
                if (labels.v[i] == r->label[s]) b = i;
            if (b < 0) {
                if (gram_ivec_push(&labels, r->label[s])) goto out;
                b = labels.n - 1;
                size[b] = 0;
            }
            blk[s] = b;
            size[b]++;
        }
        nb = labels.n;
        free(labels.v);
        int pos = 0;
        for (int b = 0; b < nb; b++) first[b] = pos, pos += size[b], size[b] = 0;
        for (int s = 0; s < n; s++)
            if (blk[s] >= 0) {
                int b = blk[s];
                elem[first[b] + size[b]] = s;
                loc[s] = first[b] + size[b]++;
            }
        ne_live = pos;
    }
    for (int b = 0; b < nb; b++) {
        if (gram_ivec_push(&work, b)) goto out;
        inw[b] = 1;
    }
    (void)ne_live;
    while (work.n) {
        int32_t sb = work.v[--work.n];
        inw[sb] = 0;
        /* predecessors of block sb, bucketed by symbol: only the symbols that occur
         * (bstart counts, zero between splitters; an O(symbols) pass per splitter
         * was most of the minimisation time on wide byte-class automata) */
        syms.n = 0;
        for (int i = 0; i < size[sb]; i++) {
            int32_t t = elem[first[sb] + i];
            for (int k = ioff[t]; k < ioff[t + 1]; k++)
                if (!bstart[isym[k]]++ && gram_ivec_push(&syms, isym[k])) goto out;
        }
        {
            int pos = 0;
            for (int j = 0; j < syms.n; j++) bfill[syms.v[j]] = pos, pos += bstart[syms.v[j]];
        }
        for (int i = 0; i < size[sb]; i++) {
            int32_t t = elem[first[sb] + i];
            for (int k = ioff[t]; k < ioff[t + 1]; k++) bsrc[bfill[isym[k]]++] = isrc[k];
        }
        for (int j = 0; j < syms.n; j++) {
            int32_t a = syms.v[j];
            int hi = bfill[a], lo = hi - bstart[a];
            bstart[a] = 0;
            touched.n = 0;
            for (int k = lo; k < hi; k++) {
                int32_t p = bsrc[k], b = blk[p];
                if (loc[p] < first[b] + marked[b]) continue; /* already marked */
                if (!marked[b] && gram_ivec_push(&touched, b)) goto out;
                int32_t q = elem[first[b] + marked[b]];
                elem[loc[p]] = q;
                loc[q] = loc[p];
                elem[first[b] + marked[b]] = p;
                loc[p] = first[b] + marked[b];
                marked[b]++;
            }
            for (int i = 0; i < touched.n; i++) {
                int32_t b = touched.v[i];
                int m = marked[b];
                marked[b] = 0;
                if (m == size[b]) continue;
                int32_t nbk = nb++;
                first[nbk] = first[b];
                size[nbk] = m;
                first[b] += m;
                size[b] -= m;
                for (int j = 0; j < m; j++) blk[elem[first[nbk] + j]] = nbk;
                if (inw[b]) {
                    if (gram_ivec_push(&work, nbk)) goto out;
                    inw[nbk] = 1;
                } else {
                    int32_t small = size[nbk] <= size[b] ? nbk : b;
                    if (gram_ivec_push(&work, small)) goto out;
                    inw[small] = 1;
                }
            }
        }
    }
    rc = nb;
out:
    free(callees.v);
    free(ioff);
    free(elem);
    free(loc);
    free(first);
    free(size);
    free(marked);
    free(inw);
    free(isym);
    free(isrc);
    free(tmp);
    free(bstart);
    free(bfill);
    free(bsrc);
    free(work.v);
    free(touched.v);
    free(syms.v);
    return rc;
}

/* Trim (drop states that cannot reach an accepting state or are unreachable),
 * minimise (Moore), merge identical byte classes, write out. */
static int raw_finish(raw_dfa *r, gram_dfa *out) {
    int n = r->n, C = r->n_classes, rc = -1;
    memset(out, 0, sizeof *out);
    int32_t *live = calloc((size_t)n + 1, sizeof *live), *blk = NULL, *nblk = NULL, *sig = NULL;
    int32_t *order = NULL, *remap = NULL;
    uint64_t *hs = NULL;
    int32_t *roff = NULL, *rsrc = NULL, *work = NULL;
    if (r->trimmed) {
        if (!live) goto done;
        for (int s = 0; s < n; s++) live[s] = 1;
    } else {
        /* co-reachability over reverse edges in one array (CSR by target) */
        roff = calloc((size_t)n + 2, sizeof *roff);
        if (!live || !roff) goto done;
        for (int s = 0; s < n; s++) {
            for (int c = 0; c < C; c++) {
                int32_t t = r->next[(size_t)s * C + c];
                if (t >= 0) roff[t + 1]++;
            }
            for (int k = 0; k + 1 < r->calls[s].n; k += 2) roff[r->calls[s].v[k + 1] + 1]++;
        }
        for (int s = 0; s < n; s++) roff[s + 1] += roff[s];
        rsrc = malloc(((size_t)roff[n] + 1) * sizeof *rsrc);
        work = malloc(((size_t)n + 1) * sizeof *work);
        if (!rsrc || !work) goto done;
        {
            int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
            if (!fill) goto done;
            memcpy(fill, roff, (size_t)n * sizeof *fill);
            for (int s = 0; s < n; s++) {
                for (int c = 0; c < C; c++) {
                    int32_t t = r->next[(size_t)s * C + c];
                    if (t >= 0) rsrc[fill[t]++] = s;
                }
                for (int k = 0; k + 1 < r->calls[s].n; k += 2) rsrc[fill[r->calls[s].v[k + 1]]++] = s;
            }
            free(fill);
        }
        int wn = 0;
        for (int s = 0; s < n; s++)
            if (r->label[s] >= 0) live[s] = 1, work[wn++] = s;
        while (wn) {
            int32_t t = work[--wn];
            for (int k = roff[t]; k < roff[t + 1]; k++)
                if (!live[rsrc[k]]) live[rsrc[k]] = 1, work[wn++] = rsrc[k];
        }
        for (int s = 0; s < n; s++) {
            for (int c = 0; c < C; c++) {
                int32_t *t = &r->next[(size_t)s * C + c];
                if (*t >= 0 && !live[*t]) *t = -1;
            }
            int w = 0;
            for (int k = 0; k + 1 < r->calls[s].n; k += 2)
                if (live[r->calls[s].v[k + 1]]) {
                    r->calls[s].v[w++] = r->calls[s].v[k];
                    r->calls[s].v[w++] = r->calls[s].v[k + 1];
                }
            r->calls[s].n = w;
        }
        /* forward reachability from 0 among live states */
        int32_t *reach = calloc((size_t)n + 1, sizeof *reach);
        if (!reach) goto done;
        gram_ivec st = {0};
        if (n > 0 && live[0]) {
            reach[0] = 1;
            if (gram_ivec_push(&st, 0)) { free(reach); goto done; }
        }
        while (st.n) {
            int32_t s = st.v[--st.n];
            for (int c = 0; c < C; c++) {
                int32_t t = r->next[(size_t)s * C + c];
                if (t >= 0 && !reach[t]) {
                    reach[t] = 1;
                    if (gram_ivec_push(&st, t)) { free(st.v); free(reach); goto done; }
                }
            }
            for (int k = 0; k + 1 < r->calls[s].n; k += 2) {
                int32_t t = r->calls[s].v[k + 1];
                if (!reach[t]) {
                    reach[t] = 1;
                    if (gram_ivec_push(&st, t)) { free(st.v); free(reach); goto done; }
                }
            }
        }
        free(st.v);
        for (int s = 0; s < n; s++) live[s] = live[s] && reach[s];
        free(reach);
    }
    if (n == 0 || !live[0]) {
        /* the empty language: one non-accepting state without moves */
        out->n_states = 1;
        out->n_classes = 1;
        out->next = malloc(sizeof *out->next);
        out->label = malloc(sizeof *out->label);
        if (!out->next || !out->label) goto done;
        out->next[0] = -1;
        out->label[0] = -1;
        rc = 0;
        goto done;
    }
    /* minimise: Hopcroft partition refinement over live states (dead: block -1) */
    blk = malloc((size_t)n * sizeof *blk);
    if (!blk) goto done;
    int n_blk = 0;
    if (r->no_min)
        for (int s = 0; s < n; s++) blk[s] = live[s] ? n_blk++ : -1;
    else n_blk = hopcroft(r, live, blk);
    if (n_blk < 0) goto done;
    /* renumber blocks so the start's block is 0, in BFS order for locality */
    remap = malloc((size_t)n_blk * sizeof *remap);
    order = malloc((size_t)n_blk * sizeof *order); /* block → representative state */
    if (!remap || !order) goto done;
    for (int b = 0; b < n_blk; b++) remap[b] = -1, order[b] = -1;
    for (int s = 0; s < n; s++)
        if (live[s] && order[blk[s]] < 0) order[blk[s]] = s;
    {
        int32_t *q = malloc((size_t)n_blk * sizeof *q);
        if (!q) goto done;
        int qh = 0, qt = 0, nn = 0;
        remap[blk[0]] = nn++;
        q[qt++] = blk[0];
        while (qh < qt) {
            int32_t b = q[qh++], s = order[b];
            for (int c = 0; c < C; c++) {
                int32_t t = r->next[(size_t)s * C + c];
                if (t >= 0 && remap[blk[t]] < 0) {
                    remap[blk[t]] = nn++;
                    q[qt++] = blk[t];
                }
            }
            for (int k = 0; k + 1 < r->calls[s].n; k += 2) {
                int32_t t = r->calls[s].v[k + 1];
                if (remap[blk[t]] < 0) {
                    remap[blk[t]] = nn++;
                    q[qt++] = blk[t];
                }
            }
        }
        free(q);
        n_blk = nn;
    }
    /* merge byte classes whose columns are identical (over block representatives) */
    int32_t cmap[256];
    int nc2 = 0;
    {
        int32_t rep[256];
        uint64_t colh[256];
        for (int c = 0; c < C; c++) colh[c] = 0x12345;
        /* row by row (the table is row-major): every column's hash in one pass */
        for (int b = 0; b < n_blk; b++) {
            const int32_t *row = &r->next[(size_t)order[b] * C];
            for (int c = 0; c < C; c++)
                colh[c] = (colh[c] ^ (uint64_t)(uint32_t)(row[c] >= 0 ? blk[row[c]] : -1)) * 0x100000001b3ull;
        }
        for (int c = 0; c < C; c++) {
            cmap[c] = -1;
            for (int d = 0; d < nc2 && cmap[c] < 0; d++) {
                if (colh[rep[d]] != colh[c]) continue;
                int same = 1;
                for (int b = 0; b < n_blk && same; b++) {
                    int32_t t1 = r->next[(size_t)order[b] * C + c], t2 = r->next[(size_t)order[b] * C + rep[d]];
                    if ((t1 >= 0 ? blk[t1] : -1) != (t2 >= 0 ? blk[t2] : -1)) same = 0;
                }
                if (same) cmap[c] = d;
            }
            if (cmap[c] < 0) {
                rep[nc2] = c;
                cmap[c] = nc2++;
            }
        }
    }
    out->n_states = n_blk;
    out->n_classes = nc2;
    for (int b = 0; b < 256; b++) out->cls[b] = (uint8_t)cmap[r->cls[b]];
    out->next = malloc((size_t)n_blk * (size_t)nc2 * sizeof *out->next);
    out->label = malloc((size_t)n_blk * sizeof *out->label);
    if (!out->next || !out->label) goto done;
    int total_calls = 0;
    for (int b = 0; b < n; b++) if (live[b] && remap[blk[b]] >= 0 && order[blk[b]] == b) total_calls += r->calls[b].n / 2;
    if (total_calls) {
        out->call_off = calloc((size_t)n_blk + 1, sizeof *out->call_off);
        out->calls = malloc((size_t)total_calls * sizeof *out->calls);
        if (!out->call_off || !out->calls) goto done;
    }
    /* inverse of remap over representatives */
    int32_t *rep_of = malloc((size_t)n_blk * sizeof *rep_of);
    if (!rep_of) goto done;
    for (int s = 0; s < n; s++)
        if (live[s] && order[blk[s]] == s && remap[blk[s]] >= 0) rep_of[remap[blk[s]]] = s;
    int nc_out = 0;
    for (int b = 0; b < n_blk; b++) {
        int32_t s = rep_of[b];
        for (int c = 0; c < C; c++) {
            int32_t t = r->next[(size_t)s * C + c];
            out->next[(size_t)b * nc2 + cmap[c]] = t >= 0 ? remap[blk[t]] : -1;
        }
        out->label[b] = r->label[s];
        if (out->call_off) {
            out->call_off[b] = nc_out;
            int first = nc_out;
            for (int k = 0; k + 1 < r->calls[s].n; k += 2) {
                out->calls[nc_out++] = (gram_call){r->calls[s].v[k], remap[blk[r->calls[s].v[k + 1]]]};
            }
            /* sort by callee for a canonical form */
            for (int i = first + 1; i < nc_out; i++)
                for (int j = i; j > first && out->calls[j - 1].rule > out->calls[j].rule; j--) {
                    gram_call t = out->calls[j];
                    out->calls[j] = out->calls[j - 1];
                    out->calls[j - 1] = t;
                }
        }
    }
    if (out->call_off) out->call_off[n_blk] = nc_out;
    out->n_calls = nc_out;
    free(rep_of);
    rc = 0;
done:
    free(roff);
    free(rsrc);
    free(work);
    free(live);
    free(blk);
    free(nblk);
    free(sig);
    free(hs);
    free(order);
    free(remap);
    if (rc) gram_dfa_free(out);
    return rc;
}

void gram_dfa_free(gram_dfa *d) {
    if (!d) return;
    free(d->next);
    free(d->label);
    free(d->call_off);
    free(d->calls);
    memset(d, 0, sizeof *d);
}

int gram_dfa_empty(const gram_dfa *d) {
    if (d->label[0] >= 0) return 0;
    for (int c = 0; c < d->n_classes; c++)
        if (d->next[c] >= 0) return 0;
    return !(d->call_off && d->call_off[1] > d->call_off[0]);
}

/* ---- subset construction ---------------------------------------------------------------- */

typedef struct {
    int32_t *sets;  /* concatenated sorted state sets */
    int32_t *off;   /* (n + 1) */
    int n, cap, sets_len, sets_cap;
    int32_t *htab;
    size_t hcap;
    uint64_t *hash;
} set_table;

/* A closure's states come in the order the closure found them, unsorted:
 * the hash is order-independent (a sum of mixed ids) and equality is
 * "same size and every stored state is marked in the current closure"
 * (mark[x] == gen exactly for the states of v).  Sorting every closure
 * was most of the subset construction's time on large patterns. */
static uint64_t mix_id(uint32_t x) {
    uint64_t z = (uint64_t)x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int set_intern(set_table *t, const int32_t *v, int len, const int32_t *mark, int32_t gen, int *is_new) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len;
    for (int i = 0; i < len; i++) h += mix_id((uint32_t)v[i]);
    h ^= h >> 29;
    if ((size_t)(t->n + 1) * 2 > t->hcap) {
        size_t nc = t->hcap ? t->hcap * 2 : 256;
        int32_t *nt = malloc(nc * sizeof *nt);
        if (!nt) return -1;
        for (size_t i = 0; i < nc; i++) nt[i] = -1;
        for (int i = 0; i < t->n; i++) {
            size_t k = t->hash[i] & (nc - 1);
            while (nt[k] >= 0) k = (k + 1) & (nc - 1);
            nt[k] = i;
        }
        free(t->htab);
        t->htab = nt;
        t->hcap = nc;
    }
    size_t k = h & (t->hcap - 1);
    while (t->htab[k] >= 0) {
        int32_t i = t->htab[k];
        if (t->hash[i] == h && t->off[i + 1] - t->off[i] == len) {
            int same = 1;
            for (int j = t->off[i]; j < t->off[i + 1] && same; j++) same = mark[t->sets[j]] == gen;
            if (same) {
                *is_new = 0;
                return i;
            }
        }
        k = (k + 1) & (t->hcap - 1);
    }
    if (t->n + 2 > t->cap) {
        int nc = t->cap ? t->cap * 2 : 256;
        int32_t *no = realloc(t->off, (size_t)(nc + 1) * sizeof *no);
        if (!no) return -1;
        t->off = no;
        uint64_t *nh = realloc(t->hash, (size_t)nc * sizeof *nh);
        if (!nh) return -1;
        t->hash = nh;
        t->cap = nc;
    }
    if (t->sets_len + len > t->sets_cap) {
        int nc = t->sets_cap ? t->sets_cap * 2 : 1024;
        while (nc < t->sets_len + len) nc *= 2;
        int32_t *ns = realloc(t->sets, (size_t)nc * sizeof *ns);
        if (!ns) return -1;
        t->sets = ns;
        t->sets_cap = nc;
    }
    if (t->n == 0) t->off[0] = 0;
    if (len) memcpy(t->sets + t->sets_len, v, (size_t)len * sizeof *v);
    t->sets_len += len;
    t->hash[t->n] = h;
    t->off[t->n + 1] = t->sets_len;
    t->htab[k] = t->n;
    *is_new = 1;
    return t->n++;
}

static void set_table_free(set_table *t) {
    free(t->sets);
    free(t->off);
    free(t->htab);
    free(t->hash);
}

static int32_t default_labeller(const int32_t *tags, int n_tags, void *u) {
    (void)tags;
    (void)u;
    return n_tags > 0 ? 0 : -1;
}

int gram_dfa_from_nfa(const gram_nfa *nf, int32_t start, gram_labeller lab, void *u, int max_states,
                      gram_dfa *out) {
    return gram_dfa_from_nfa_limited(nf, start, lab, u, max_states, (long)max_states * 100, NULL, out);
}

int gram_dfa_from_nfa_limited(const gram_nfa *nf, int32_t start, gram_labeller lab, void *u, int max_states,
                              long max_work, long *work_out, gram_dfa *out) {
    long work_done = 0;
    memset(out, 0, sizeof *out);
    if (nf->oom) return -1;
    if (!lab) lab = default_labeller;
    int N = nf->n_states, rc = -1;
    /* adjacency */
    int32_t *eoff = calloc((size_t)N + 1, sizeof *eoff);
    int32_t *eidx = malloc(((size_t)nf->n_edges + 1) * sizeof *eidx);
    int32_t *mark = calloc((size_t)N + 1, sizeof *mark);
    int32_t *stack = malloc(((size_t)N + 1) * sizeof *stack);
    gram_ivec cur = {0}, tags = {0}, calls_sym = {0};
    gram_ivec *bucket = NULL;
    int32_t *done_s = NULL, *done_t = NULL, *done_n = NULL;
    uint64_t *done_h = NULL;
    set_table st = {0};
    raw_dfa r = {0};
    gram_ivec work = {0};
    if (!eoff || !eidx || !mark || !stack) goto done;
    for (int i = 0; i < nf->n_edges; i++) eoff[nf->edges[i].from + 1]++;
    for (int i = 0; i < N; i++) eoff[i + 1] += eoff[i];
    {
        int32_t *fill = malloc(((size_t)N + 1) * sizeof *fill);
        if (!fill) goto done;
        memcpy(fill, eoff, ((size_t)N + 1) * sizeof *fill);
        for (int i = 0; i < nf->n_edges; i++) eidx[fill[nf->edges[i].from]++] = i;
        free(fill);
    }
    /* byte classes from range boundaries; call symbols listed separately */
    uint8_t bnd[257] = {0};
    bnd[0] = 1;
    for (int i = 0; i < nf->n_edges; i++) {
        const gram_nfa_edge *e = &nf->edges[i];
        if (e->lo < 0) continue;
        if (e->lo < GRAM_SYM_CALL) {
            bnd[e->lo] = 1;
            bnd[e->hi + 1] = 1;
        } else {
            int found = 0;
            for (int k = 0; k < calls_sym.n && !found; k++) found = calls_sym.v[k] == e->lo;
            if (!found && gram_ivec_push(&calls_sym, e->lo)) goto done;
        }
    }
    int C = 0;
    for (int b = 0; b < 256; b++) {
        if (bnd[b] && b > 0) C++;
        r.cls[b] = (uint8_t)C;
    }
    C++;
    r.n_classes = C;
    int n_sym = C + calls_sym.n;
    bucket = calloc((size_t)n_sym, sizeof *bucket);
    done_s = malloc((size_t)n_sym * sizeof *done_s);
    done_t = malloc((size_t)n_sym * sizeof *done_t);
    done_n = malloc((size_t)n_sym * sizeof *done_n);
    done_h = malloc((size_t)n_sym * sizeof *done_h);
    if (!bucket || !done_s || !done_t || !done_n || !done_h) goto done;
    int32_t gen = 0;
    /* NFA states visited (sets processed and closures made): bounds the time a pathological
     * pattern can take, in proportion to the automaton size allowed */
    const long work_max = (long)max_states * 100 < max_work ? (long)max_states * 100 : max_work;
    /* closure of {start} */
#define CLOSURE(seed_vec)                                                                   \
    do {                                                                                    \
        gen++;                                                                              \
        int sp = 0;                                                                         \
        cur.n = 0;                                                                          \
        for (int k_ = 0; k_ < (seed_vec).n; k_++)                                            \
            if (mark[(seed_vec).v[k_]] != gen) {                                            \
                mark[(seed_vec).v[k_]] = gen;                                               \
                stack[sp++] = (seed_vec).v[k_];                                             \
            }                                                                               \
        while (sp) {                                                                        \
            int32_t s_ = stack[--sp];                                                       \
            if (gram_ivec_push(&cur, s_)) goto done;                                             \
            for (int k_ = eoff[s_]; k_ < eoff[s_ + 1]; k_++) {                               \
                const gram_nfa_edge *e_ = &nf->edges[eidx[k_]];                             \
                if (e_->lo < 0 && mark[e_->to] != gen) {                                    \
                    mark[e_->to] = gen;                                                     \
                    stack[sp++] = e_->to;                                                   \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    } while (0)
    gram_ivec seed = {0};
    if (gram_ivec_push(&seed, start)) goto done;
    CLOSURE(seed);
    int is_new;
    int id = set_intern(&st, cur.v, cur.n, mark, gen, &is_new);
    if (id < 0 || raw_add(&r) < 0 || gram_ivec_push(&work, id)) { free(seed.v); goto done; }
    while (work.n) {
        int32_t d = work.v[--work.n];
        /* label from tags */
        tags.n = 0;
        for (int k = st.off[d]; k < st.off[d + 1]; k++) {
            int32_t t = nf->tag[st.sets[k]];
            if (t >= 0 && gram_ivec_push(&tags, t)) { free(seed.v); goto done; }
        }
        if (tags.n > 1) qsort(tags.v, (size_t)tags.n, sizeof *tags.v, cmp_i32);
        int w = 0;
        for (int k = 0; k < tags.n; k++)
            if (!w || tags.v[w - 1] != tags.v[k]) tags.v[w++] = tags.v[k];
        r.label[d] = lab(tags.v, w, u);
        for (int s = 0; s < n_sym; s++) bucket[s].n = 0;
        work_done += st.off[d + 1] - st.off[d];
        if (work_done > work_max) { /* checked once a state; the pushes and closures below are counted too */
            free(seed.v);
            rc = -2;
            goto done;
        }
        for (int k = st.off[d]; k < st.off[d + 1]; k++) {
            int32_t s = st.sets[k];
            for (int j = eoff[s]; j < eoff[s + 1]; j++) {
                const gram_nfa_edge *e = &nf->edges[eidx[j]];
                if (e->lo < 0) continue;
                if (e->lo < GRAM_SYM_CALL) {
                    work_done += r.cls[e->hi] - r.cls[e->lo] + 1;
                    for (int c = r.cls[e->lo]; c <= r.cls[e->hi]; c++)
                        if (gram_ivec_push(&bucket[c], e->to)) { free(seed.v); goto done; }
                } else {
                    for (int c = 0; c < calls_sym.n; c++)
                        if (calls_sym.v[c] == e->lo && gram_ivec_push(&bucket[C + c], e->to)) { free(seed.v); goto done; }
                }
            }
        }
        int n_done = 0;
        for (int s = 0; s < n_sym; s++) {
            if (!bucket[s].n) continue;
            /* classes with the same move set (a wide range covers many) share the
             * closure: made once per state; the work is counted as if made again */
            uint64_t bh = hash_ints(bucket[s].v, bucket[s].n, 0x2545f4914f6cdd1dull ^ (uint64_t)bucket[s].n);
            int t = -1;
            for (int i = 0; i < n_done && t < 0; i++) {
                const gram_ivec *o = &bucket[done_s[i]];
                if (done_h[i] == bh && o->n == bucket[s].n && !memcmp(o->v, bucket[s].v, (size_t)o->n * sizeof *o->v))
                    t = done_t[i], work_done += done_n[i];
            }
            if (t >= 0) is_new = 0;
            else {
                CLOSURE(bucket[s]);
                work_done += cur.n;
                t = set_intern(&st, cur.v, cur.n, mark, gen, &is_new);
                if (t < 0) { free(seed.v); goto done; }
                done_s[n_done] = s, done_t[n_done] = t, done_n[n_done] = cur.n, done_h[n_done++] = bh;
            }
            if (is_new) {
                if (r.n >= max_states) {
                    free(seed.v);
                    rc = -2;
                    goto done;
                }
                if (raw_add(&r) < 0 || gram_ivec_push(&work, t)) { free(seed.v); goto done; }
            }
            if (s < C) r.next[(size_t)d * C + s] = t;
            else if (gram_ivec_push(&r.calls[d], calls_sym.v[s - C] - GRAM_SYM_CALL) || gram_ivec_push(&r.calls[d], t)) {
                free(seed.v);
                goto done;
            }
        }
    }
#undef CLOSURE
    free(seed.v);
    rc = raw_finish(&r, out);
done:
    if (work_out) *work_out += work_done;
    raw_free(&r);
    set_table_free(&st);
    if (bucket) for (int s = 0; s < r.n_classes + calls_sym.n; s++) free(bucket[s].v);
    free(bucket);
    free(cur.v);
    free(tags.v);
    free(calls_sym.v);
    free(done_s);
    free(done_t);
    free(done_n);
    free(done_h);
    free(work.v);
    free(eoff);
    free(eidx);
    free(mark);
    free(stack);
    return rc;
}

int gram_dfa_intersect(const gram_dfa *a, const gram_dfa *b, int max_states, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    raw_dfa r = {0};
    /* classes: distinct (class a, class b) pairs */
    int32_t pair_cls[256], n_cls = 0;
    int32_t pa[256], pb[256];
    for (int x = 0; x < 256; x++) {
        int found = -1;
        for (int c = 0; c < n_cls && found < 0; c++)
            if (pa[c] == a->cls[x] && pb[c] == b->cls[x]) found = c;
        if (found < 0) {
            pa[n_cls] = a->cls[x];
            pb[n_cls] = b->cls[x];
            found = n_cls++;
        }
        pair_cls[x] = found;
    }
    r.n_classes = n_cls;
    for (int x = 0; x < 256; x++) r.cls[x] = (uint8_t)pair_cls[x];
    /* states: pairs, interned via a hash table */
    int rc = -1;
    size_t hcap = 1024;
    int32_t *htab = malloc(hcap * sizeof *htab);
    int32_t *pairs = NULL;
    int np = 0, pcap = 0;
    gram_ivec work = {0};
    if (!htab) return -1;
    for (size_t i = 0; i < hcap; i++) htab[i] = -1;
#define INTERN(sa, sb, idvar)                                                                 \
    do {                                                                                     \
        uint64_t h_ = ((uint64_t)(uint32_t)(sa) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uint32_t)(sb) * 0xc2b2ae3d27d4eb4full; \
        if ((size_t)(np + 1) * 2 > hcap) {                                                   \
            size_t nc_ = hcap * 2;                                                           \
            int32_t *nt_ = malloc(nc_ * sizeof *nt_);                                        \
            if (!nt_) goto done;                                                             \
            for (size_t i_ = 0; i_ < nc_; i_++) nt_[i_] = -1;                                \
            for (int i_ = 0; i_ < np; i_++) {                                                \
                uint64_t hh_ = ((uint64_t)(uint32_t)pairs[2 * i_] * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uint32_t)pairs[2 * i_ + 1] * 0xc2b2ae3d27d4eb4full; \
                size_t k_ = (hh_ >> 7) & (nc_ - 1);                                          \
                while (nt_[k_] >= 0) k_ = (k_ + 1) & (nc_ - 1);                              \
                nt_[k_] = i_;                                                                \
            }                                                                                \
            free(htab);                                                                      \
            htab = nt_;                                                                      \
            hcap = nc_;                                                                      \
        }                                                                                    \
        size_t k_ = (h_ >> 7) & (hcap - 1);                                                  \
        idvar = -1;                                                                          \
        while (htab[k_] >= 0) {                                                              \
            if (pairs[2 * htab[k_]] == (sa) && pairs[2 * htab[k_] + 1] == (sb)) {            \
                idvar = htab[k_];                                                            \
                break;                                                                       \
            }                                                                                \
            k_ = (k_ + 1) & (hcap - 1);                                                      \
        }                                                                                    \
        if (idvar < 0) {                                                                     \
            if (np >= max_states) { rc = -2; goto done; }                                    \
            if (np == pcap) {                                                                \
                pcap = pcap ? pcap * 2 : 256;                                                \
                int32_t *npairs_ = realloc(pairs, (size_t)pcap * 2 * sizeof *pairs);         \
                if (!npairs_) goto done;                                                     \
                pairs = npairs_;                                                             \
            }                                                                                \
            pairs[2 * np] = (sa);                                                            \
            pairs[2 * np + 1] = (sb);                                                        \
            htab[k_] = np;                                                                   \
            idvar = np++;                                                                    \
            if (raw_add(&r) < 0 || gram_ivec_push(&work, idvar)) goto done;                       \
            r.label[idvar] = a->label[sa] >= 0 && b->label[sb] >= 0 ? a->label[sa] : -1;     \
        }                                                                                    \
    } while (0)
    int32_t id0;
    INTERN(0, 0, id0);
    (void)id0;
    while (work.n) {
        int32_t d = work.v[--work.n];
        int32_t sa = pairs[2 * d], sb = pairs[2 * d + 1];
        for (int c = 0; c < n_cls; c++) {
            int32_t ta = a->next[(size_t)sa * a->n_classes + pa[c]];
            int32_t tb = b->next[(size_t)sb * b->n_classes + pb[c]];
            if (ta < 0 || tb < 0) continue;
            int32_t t;
            INTERN(ta, tb, t);
            r.next[(size_t)d * n_cls + c] = t;
        }
    }
#undef INTERN
    rc = raw_finish(&r, out);
done:
    raw_free(&r);
    free(htab);
    free(pairs);
    free(work.v);
    return rc;
}

/* Classes for several DFAs at once: the distinct tuples of their classes. */
static int joint_classes(const gram_dfa *const *ds, int k, uint8_t *cls, int32_t *comp_cls) {
    /* each byte's tuple hashed, compared only against classes with the same hash
     * (comparing against every class so far was O(256 x classes x k)) */
    int n_cls = 0;
    int32_t htab[512];
    uint64_t chash[256];
    for (int i = 0; i < 512; i++) htab[i] = -1;
    for (int x = 0; x < 256; x++) {
        uint64_t h = 0x51ed27ull;
        for (int i = 0; i < k; i++) h = (h ^ ds[i]->cls[x]) * 0x100000001b3ull, h ^= h >> 29;
        int found = -1;
        size_t j = h & 511;
        for (; htab[j] >= 0; j = (j + 1) & 511) {
            int c = htab[j];
            if (chash[c] != h) continue;
            int same = 1;
            for (int i = 0; i < k && same; i++) same = comp_cls[c * k + i] == ds[i]->cls[x];
            if (same) {
                found = c;
                break;
            }
        }
        if (found < 0) {
            for (int i = 0; i < k; i++) comp_cls[n_cls * k + i] = ds[i]->cls[x];
            chash[n_cls] = h;
            htab[j] = n_cls;
            found = n_cls++;
        }
        cls[x] = (uint8_t)found;
    }
    return n_cls;
}

int gram_dfa_union(const gram_dfa *const *ds, const int32_t *tag_base, int k, gram_labeller lab, void *u,
                   int max_states, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    if (!lab) lab = default_labeller;
    raw_dfa r = {0};
    int32_t *comp_cls = malloc((size_t)256 * (size_t)k * sizeof *comp_cls);
    int32_t *tup = NULL, *cur = malloc((size_t)k * sizeof *cur), *tags = malloc(((size_t)k + 1) * sizeof *tags);
    int32_t *htab = NULL;
    size_t hcap = 1024;
    int nt = 0, tcap = 0, rc = -1;
    gram_ivec work = {0};
    if (!comp_cls || !cur || !tags) goto done;
    r.n_classes = joint_classes(ds, k, r.cls, comp_cls);
    htab = malloc(hcap * sizeof *htab);
    if (!htab) goto done;
    for (size_t i = 0; i < hcap; i++) htab[i] = -1;
    /* tuples of component states (-1: that component is dead), interned */
#define TUP_HASH(t) (hash_ints((t), k, 0x51ed27ull) >> 7)
    for (int pass = 0; pass == 0 || work.n; pass++) {
        int32_t d = -1;
        if (pass == 0) {
            for (int i = 0; i < k; i++) cur[i] = 0;
        } else {
            d = work.v[--work.n];
        }
        int n_out = pass == 0 ? 1 : r.n_classes;
        for (int c = 0; c < n_out; c++) {
            int alive = 0;
            if (pass) {
                for (int i = 0; i < k; i++) {
                    int32_t si = tup[(size_t)d * k + i];
                    cur[i] = si < 0 ? -1 : ds[i]->next[(size_t)si * ds[i]->n_classes + comp_cls[c * k + i]];
                    alive |= cur[i] >= 0;
                }
                if (!alive) continue;
            }
            if ((size_t)(nt + 1) * 2 > hcap) {
                size_t nc = hcap * 2;
                int32_t *nh = malloc(nc * sizeof *nh);
                if (!nh) goto done;
                for (size_t i = 0; i < nc; i++) nh[i] = -1;
                for (int i = 0; i < nt; i++) {
                    size_t h = TUP_HASH(&tup[(size_t)i * k]) & (nc - 1);
                    while (nh[h] >= 0) h = (h + 1) & (nc - 1);
                    nh[h] = i;
                }
                free(htab);
                htab = nh;
                hcap = nc;
            }
            size_t h = TUP_HASH(cur) & (hcap - 1);
            int32_t id = -1;
            while (htab[h] >= 0) {
                if (!memcmp(&tup[(size_t)htab[h] * k], cur, (size_t)k * sizeof *cur)) {
                    id = htab[h];
                    break;
                }
                h = (h + 1) & (hcap - 1);
            }
            if (id < 0) {
                if (nt >= max_states) {
                    rc = -2;
                    goto done;
                }
                if (nt == tcap) {
                    tcap = tcap ? tcap * 2 : 256;
                    int32_t *nv = realloc(tup, (size_t)tcap * (size_t)k * sizeof *tup);
                    if (!nv) goto done;
                    tup = nv;
                }
                memcpy(&tup[(size_t)nt * k], cur, (size_t)k * sizeof *cur);
                htab[h] = nt;
                id = nt++;
                if (raw_add(&r) < 0 || gram_ivec_push(&work, id)) goto done;
                int n_tags = 0;
                for (int i = 0; i < k; i++)
                    if (cur[i] >= 0 && ds[i]->label[cur[i]] >= 0) tags[n_tags++] = tag_base[i] + ds[i]->label[cur[i]];
                if (n_tags > 1) qsort(tags, (size_t)n_tags, sizeof *tags, cmp_i32);
                r.label[id] = lab(tags, n_tags, u);
            }
            if (pass) r.next[(size_t)d * r.n_classes + c] = id;
        }
    }
#undef TUP_HASH
    /* components are minimal and tuples are made only when reached: minimising would
     * mostly merge the suffixes of declared names, not worth its cost here */
    r.no_min = 1;
    r.trimmed = 1; /* made forward from the start; every component state can reach its accepting ones */
    rc = raw_finish(&r, out);
done:
    raw_free(&r);
    free(comp_cls);
    free(tup);
    free(cur);
    free(tags);
    free(htab);
    free(work.v);
    return rc;
}

static int cmp_bytes_idx(const void *a, const void *b, void *ctx) {
    const char *const *s = ((void **)ctx)[0];
    const size_t *l = ((void **)ctx)[1];
    int x = *(const int *)a, y = *(const int *)b;
    size_t n = l[x] < l[y] ? l[x] : l[y];
    int c = memcmp(s[x], s[y], n);
    if (c) return c;
    return l[x] < l[y] ? -1 : l[x] > l[y];
}

int gram_dfa_literals(const char *const *strs, const size_t *lens, const int32_t *labels, int n, int max_states,
                      gram_dfa *out) {
    memset(out, 0, sizeof *out);
    raw_dfa r = {0};
    int rc = -1;
    /* classes: each byte used gets its own, the rest share one */
    uint8_t used[256] = {0};
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < lens[i]; j++) used[(uint8_t)strs[i][j]] = 1;
    int C = 1;
    for (int b = 0; b < 256; b++) r.cls[b] = used[b] ? (uint8_t)C++ : 0;
    r.n_classes = C;
    /* a trie in sorted order: each string walks its common prefix with the previous one */
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    int32_t *path = NULL;
    size_t maxlen = 0;
    for (int i = 0; i < n; i++) maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    path = malloc((maxlen + 1) * sizeof *path);
    if (!order || !path || raw_add(&r) < 0) goto done;
    for (int i = 0; i < n; i++) order[i] = i;
    void *ctx[2] = {(void *)strs, (void *)lens};
    qsort_r(order, (size_t)n, sizeof *order, cmp_bytes_idx, ctx);
    path[0] = 0;
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi];
        int32_t st = 0;
        for (size_t j = 0; j < lens[i]; j++) {
            int c = r.cls[(uint8_t)strs[i][j]];
            int32_t t = r.next[(size_t)st * C + c];
            if (t < 0) {
                if (r.n >= max_states) {
                    rc = -2;
                    goto done;
                }
                t = raw_add(&r);
                if (t < 0) goto done;
                r.next[(size_t)st * C + c] = t;
            }
            st = t;
        }
        /* the first of equal strings keeps its label */
        if (r.label[st] < 0) r.label[st] = labels ? labels[i] : 0;
    }
    r.no_min = 1; /* a trie: minimising only shares suffixes */
    r.trimmed = n > 0; /* every node reached from the root and on the way to a string's end */
    rc = raw_finish(&r, out);
done:
    raw_free(&r);
    free(order);
    free(path);
    return rc;
}

int gram_dfa_quote(const gram_dfa *d, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    raw_dfa r = {0};
    /* '"' gets a class of its own; the others keep d's */
    int C = d->n_classes + 1, q = d->n_classes, rc = -1;
    for (int b = 0; b < 256; b++) r.cls[b] = b == '"' ? (uint8_t)q : d->cls[b];
    r.n_classes = C;
    /* states: 0 before the opening quote, 1 + s inside (d's state s), final after the closing one */
    int32_t fin = d->n_states + 1;
    for (int32_t s = 0; s <= fin; s++)
        if (raw_add(&r) < 0) goto done;
    r.next[(size_t)0 * C + q] = 1;
    for (int32_t s = 0; s < d->n_states; s++) {
        for (int c = 0; c < d->n_classes; c++) {
            int32_t t = d->next[(size_t)s * d->n_classes + c];
            if (t >= 0) r.next[(size_t)(1 + s) * C + c] = 1 + t;
        }
        /* '"' itself: inside d only after a backslash (canonical content escapes it), so
         * where d accepts it closes the string */
        int32_t tq = gram_dfa_next(d, s, '"');
        r.next[(size_t)(1 + s) * C + q] = d->label[s] >= 0 ? fin : tq >= 0 ? 1 + tq : -1;
    }
    r.label[fin] = 0;
    rc = raw_finish(&r, out);
done:
    raw_free(&r);
    return rc;
}

int gram_dfa_copy(const gram_dfa *d, gram_dfa *out) {
    *out = *d;
    size_t nn = (size_t)d->n_states * (size_t)d->n_classes;
    out->next = malloc((nn ? nn : 1) * sizeof *out->next);
    out->label = malloc(((size_t)d->n_states + 1) * sizeof *out->label);
    out->call_off = d->call_off ? malloc(((size_t)d->n_states + 1) * sizeof *out->call_off) : NULL;
    out->calls = d->call_off ? malloc(((size_t)d->n_calls + 1) * sizeof *out->calls) : NULL;
    if (!out->next || !out->label || (d->call_off && (!out->call_off || !out->calls))) {
        gram_dfa_free(out);
        return -1;
    }
    memcpy(out->next, d->next, nn * sizeof *out->next);
    memcpy(out->label, d->label, (size_t)d->n_states * sizeof *out->label);
    if (d->call_off) {
        memcpy(out->call_off, d->call_off, ((size_t)d->n_states + 1) * sizeof *out->call_off);
        memcpy(out->calls, d->calls, (size_t)d->n_calls * sizeof *out->calls);
    }
    return 0;
}

int gram_dfa_complement(const gram_dfa *d, gram_dfa *out) {
    raw_dfa r = {0};
    r.n_classes = d->n_classes;
    memcpy(r.cls, d->cls, 256);
    int sink = d->n_states;
    for (int s = 0; s <= sink; s++) {
        if (raw_add(&r) < 0) {
            raw_free(&r);
            return -1;
        }
        for (int c = 0; c < d->n_classes; c++) {
            int32_t t = s < sink ? d->next[(size_t)s * d->n_classes + c] : -1;
            r.next[(size_t)s * r.n_classes + c] = t >= 0 ? t : sink;
        }
        r.label[s] = (s < sink && d->label[s] >= 0) ? -1 : 0;
    }
    int rc = raw_finish(&r, out);
    raw_free(&r);
    return rc;
}

gram_frag gram_frag_dfa(gram_nfa *n, const gram_dfa *d) {
    int32_t base = n->n_states;
    for (int s = 0; s < d->n_states; s++) gram_nfa_state(n);
    int32_t end = gram_nfa_state(n);
    if (n->oom) return (gram_frag){0, 0};
    /* byte runs per class */
    for (int s = 0; s < d->n_states; s++) {
        int b = 0;
        while (b < 256) {
            int c = d->cls[b], e = b;
            while (e + 1 < 256 && d->cls[e + 1] == c) e++;
            int32_t t = d->next[(size_t)s * d->n_classes + c];
            if (t >= 0) gram_nfa_edge_add(n, base + s, base + t, b, e);
            b = e + 1;
        }
        if (d->call_off)
            for (int k = d->call_off[s]; k < d->call_off[s + 1]; k++)
                gram_nfa_edge_add(n, base + s, base + d->calls[k].next, GRAM_SYM_CALL + d->calls[k].rule,
                                  GRAM_SYM_CALL + d->calls[k].rule);
        if (d->label[s] >= 0) eps(n, base + s, end);
    }
    return (gram_frag){base, end};
}

int gram_dfa_prune_calls(gram_dfa *d, int (*dead)(int32_t rule, void *u), void *u) {
    if (!d->call_off) return 0;
    int any = 0;
    for (int k = 0; k < d->n_calls && !any; k++) any = dead(d->calls[k].rule, u);
    if (!any) return 0;
    raw_dfa r = {0};
    r.n_classes = d->n_classes;
    memcpy(r.cls, d->cls, 256);
    for (int s = 0; s < d->n_states; s++) {
        if (raw_add(&r) < 0) { raw_free(&r); return -1; }
        memcpy(&r.next[(size_t)s * r.n_classes], &d->next[(size_t)s * d->n_classes],
               (size_t)d->n_classes * sizeof *r.next);
        r.label[s] = d->label[s];
        for (int k = d->call_off[s]; k < d->call_off[s + 1]; k++)
            if (!dead(d->calls[k].rule, u))
                if (gram_ivec_push(&r.calls[s], d->calls[k].rule) || gram_ivec_push(&r.calls[s], d->calls[k].next)) {
                    raw_free(&r);
                    return -1;
                }
    }
    gram_dfa nd;
    int rc = raw_finish(&r, &nd);
    raw_free(&r);
    if (rc) return rc;
    gram_dfa_free(d);
    *d = nd;
    return 0;
}

int gram_dfa_match(const gram_dfa *d, const char *s, size_t len) {
    int32_t st = 0;
    for (size_t i = 0; i < len && st >= 0; i++) st = gram_dfa_next(d, st, (uint8_t)s[i]);
    return st >= 0 && d->label[st] >= 0;
}

uint64_t gram_dfa_hash(const gram_dfa *d) {
    uint64_t h = 0x84222325cbf29ce4ull ^ (uint64_t)d->n_states * 31 ^ (uint64_t)d->n_classes;
    h = hash_ints((const int32_t *)d->cls, 64, h);
    h = hash_ints(d->next, d->n_states * d->n_classes, h);
    h = hash_ints(d->label, d->n_states, h);
    if (d->call_off) h = hash_ints((const int32_t *)d->calls, d->n_calls * 2, h ^ 0x55);
    return h;
}

int gram_dfa_equal(const gram_dfa *a, const gram_dfa *b) {
    if (a->n_states != b->n_states || a->n_classes != b->n_classes || a->n_calls != b->n_calls) return 0;
    if (memcmp(a->cls, b->cls, 256)) return 0;
    if (memcmp(a->next, b->next, (size_t)a->n_states * a->n_classes * sizeof *a->next)) return 0;
    if (memcmp(a->label, b->label, (size_t)a->n_states * sizeof *a->label)) return 0;
    if (!a->call_off != !b->call_off) return 0;
    if (a->call_off && (memcmp(a->call_off, b->call_off, (size_t)(a->n_states + 1) * sizeof *a->call_off) ||
                        memcmp(a->calls, b->calls, (size_t)a->n_calls * sizeof *a->calls)))
        return 0;
    return 1;
}

/* ---- regex (ECMA-262 subset) --------------------------------------------------------------- */

typedef struct {
    uint32_t lo, hi;
} cp_range;

typedef struct {
    cp_range *r;
    int n, cap;
} cpset;

static int cpset_add(cpset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        cp_range *nr = realloc(s->r, (size_t)nc * sizeof *nr);
        if (!nr) return -1;
        s->r = nr;
        s->cap = nc;
    }
    s->r[s->n++] = (cp_range){lo, hi};
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void cpset_norm(cpset *s) {
    if (!s->n) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
    int w = 0;
    for (int i = 0; i < s->n; i++) {
        if (w && s->r[i].lo <= s->r[w - 1].hi + 1) {
            if (s->r[i].hi > s->r[w - 1].hi) s->r[w - 1].hi = s->r[i].hi;
        } else s->r[w++] = s->r[i];
    }
    s->n = w;
}

static int cpset_negate(cpset *s) {
    cpset_norm(s);
    cpset o = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i].lo > next && cpset_add(&o, next, s->r[i].lo - 1)) return -1;
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10FFFF && cpset_add(&o, next, 0x10FFFF)) return -1;
    free(s->r);
    *s = o;
    return 0;
}

enum { RE_SET, RE_CAT, RE_ALT, RE_REP, RE_BOL, RE_EOL };

typedef struct re_node {
    int op;
    cpset set;
    struct re_node **kid;
    int n_kid, cap_kid;
    int min, max; /* RE_REP; max -1: unbounded */
} re_node;

static void re_free(re_node *x) {
    if (!x) return;
    for (int i = 0; i < x->n_kid; i++) re_free(x->kid[i]);  /* NULL kids are fine */
    free(x->kid);
    free(x->set.r);
    free(x);
}

static re_node *re_new(int op) {
    re_node *x = calloc(1, sizeof *x);
    if (x) x->op = op;
    return x;
}

static int re_kid(re_node *x, re_node *k) {
    if (!k) return -1;
    if (x->n_kid == x->cap_kid) {
        int nc = x->cap_kid ? x->cap_kid * 2 : 4;
        re_node **nk = realloc(x->kid, (size_t)nc * sizeof *nk);
        if (!nk) {
            re_free(k);
            return -1;
        }
        x->kid = nk;
        x->cap_kid = nc;
    }
    x->kid[x->n_kid++] = k;
    return 0;
}

typedef struct {
    const char *p, *end, *start;
    char *err;
    size_t err_len;
    int failed;
} re_parser;

static void re_fail(re_parser *P, const char *what) {
    if (P->failed) return;
    P->failed = 1;
    ferr(P->err, P->err_len, "pattern offset %ld: %s", (long)(P->p - P->start), what);
}

/* Decode one UTF-8 code point from the pattern. */
static uint32_t re_cp(re_parser *P) {
    const uint8_t *s = (const uint8_t *)P->p;
    size_t left = (size_t)(P->end - P->p);
    uint32_t c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > left) {
        re_fail(P, "invalid UTF-8 in pattern");
        P->p++;
        return 0;
    }
    if (len > 1) {
        c &= 0x3F >> (len - 1);
        for (int i = 1; i < len; i++) c = (c << 6) | (s[i] & 0x3F);
    }
    P->p += len;
    return c;
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int add_class_escape(cpset *s, int c) {
    int neg = c == 'D' || c == 'W' || c == 'S';
    cpset t = {0};
    int rc = 0;
    switch (c | 0x20) {
    case 'd': rc = cpset_add(&t, '0', '9'); break;
    case 'w':
        rc = cpset_add(&t, '0', '9') || cpset_add(&t, 'A', 'Z') || cpset_add(&t, 'a', 'z') || cpset_add(&t, '_', '_');
        break;
    case 's':
        rc = cpset_add(&t, 9, 13) || cpset_add(&t, ' ', ' ') || cpset_add(&t, 0xA0, 0xA0) ||
             cpset_add(&t, 0x1680, 0x1680) || cpset_add(&t, 0x2000, 0x200A) || cpset_add(&t, 0x2028, 0x2029) ||
             cpset_add(&t, 0x202F, 0x202F) || cpset_add(&t, 0x205F, 0x205F) || cpset_add(&t, 0x3000, 0x3000) ||
             cpset_add(&t, 0xFEFF, 0xFEFF);
        break;
    }
    if (!rc && neg) rc = cpset_negate(&t);
    for (int i = 0; !rc && i < t.n; i++) rc = cpset_add(s, t.r[i].lo, t.r[i].hi);
    free(t.r);
    return rc;
}

/* An escape after '\\' (P->p at the char after the backslash).  Returns the
 * code point, or -2 when it added a class to set (\d etc.), -1 on error. */
static long re_escape(re_parser *P, cpset *set, int in_class) {
    if (P->p >= P->end) {
        re_fail(P, "pattern ends with '\\'");
        return -1;
    }
    int c = (uint8_t)*P->p++;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        if (add_class_escape(set, c)) return -1;
        return -2;
    case 't': return 9;
    case 'n': return 10;
    case 'v': return 11;
    case 'f': return 12;
    case 'r': return 13;
    case '0':
        if (P->p < P->end && *P->p >= '0' && *P->p <= '9') break;
        return 0;
    case 'b':
        if (in_class) return 8;
        re_fail(P, "word boundary \\b is not supported");
        return -1;
    case 'x': {
        if (P->end - P->p < 2 || hexval(P->p[0]) < 0 || hexval(P->p[1]) < 0) break;
        long v = hexval(P->p[0]) * 16 + hexval(P->p[1]);
        P->p += 2;
        return v;
    }
    case 'u': {
        if (P->p < P->end && *P->p == '{') {
            long v = 0;
            P->p++;
            int nd = 0;
            while (P->p < P->end && hexval(*P->p) >= 0 && nd < 7) v = v * 16 + hexval(*P->p++), nd++;
            if (P->p >= P->end || *P->p != '}' || !nd || v > 0x10FFFF) break;
            P->p++;
            return v;
        }
        if (P->end - P->p < 4) break;
        long v = 0;
        for (int i = 0; i < 4; i++) {
            int h = hexval(P->p[i]);
            if (h < 0) goto bad;
            v = v * 16 + h;
        }
        P->p += 4;
        if (v >= 0xD800 && v <= 0xDBFF && P->end - P->p >= 6 && P->p[0] == '\\' && P->p[1] == 'u') {
            long lo = 0;
            int ok = 1;
            for (int i = 0; i < 4 && ok; i++) {
                int h = hexval(P->p[2 + i]);
                if (h < 0) ok = 0;
                else lo = lo * 16 + h;
            }
            if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                P->p += 6;
                return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            }
        }
        if (v >= 0xD800 && v <= 0xDFFF) {
            re_fail(P, "lone surrogate escape in pattern");
            return -1;
        }
        return v;
    }
    case 'c':
        if (P->p < P->end && ((*P->p | 0x20) >= 'a' && (*P->p | 0x20) <= 'z')) return *P->p++ % 32;
        break;
    case 'p': case 'P':
        re_fail(P, "Unicode property escapes (\\p{..}) are not supported");
        return -1;
    case 'B':
        re_fail(P, "\\B is not supported");
        return -1;
    case 'k':
        re_fail(P, "named backreferences are not supported");
        return -1;
    default:
        if (c >= '1' && c <= '9') {
            re_fail(P, "backreferences are not supported");
            return -1;
        }
        if (c < 0x80 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9')) return c;
        if (c >= 0x80) {
            P->p--;
            return (long)re_cp(P);
        }
        break;
    }
bad:
    re_fail(P, "unsupported escape");
    return -1;
}

static re_node *re_alt(re_parser *P, int depth);

static re_node *re_class(re_parser *P) {
    re_node *x = re_new(RE_SET);
    if (!x) return NULL;
    int neg = 0;
    if (P->p < P->end && *P->p == '^') {
        neg = 1;
        P->p++;
    }
    while (P->p < P->end && *P->p != ']') {
        long lo;
        if (*P->p == '\\') {
            P->p++;
            lo = re_escape(P, &x->set, 1);
            if (lo == -1) break;
            if (lo == -2) continue;
        } else lo = (long)re_cp(P);
        if (P->failed) break;
        if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
            P->p++;
            long hi;
            if (*P->p == '\\') {
                P->p++;
                hi = re_escape(P, &x->set, 1);
                if (hi == -1) break;
                if (hi == -2) {
                    /* "a-\d": '-' is literal */
                    if (cpset_add(&x->set, (uint32_t)lo, (uint32_t)lo) || cpset_add(&x->set, '-', '-')) break;
                    continue;
                }
            } else hi = (long)re_cp(P);
            if (hi < lo) {
                re_fail(P, "class range out of order");
                break;
            }
            if (cpset_add(&x->set, (uint32_t)lo, (uint32_t)hi)) break;
        } else if (cpset_add(&x->set, (uint32_t)lo, (uint32_t)lo)) break;
    }
    if (!P->failed && (P->p >= P->end || *P->p != ']')) re_fail(P, "unterminated character class");
    if (P->failed) {
        re_free(x);
        return NULL;
    }
    P->p++;
    if (neg && cpset_negate(&x->set)) {
        re_free(x);
        return NULL;
    }
    cpset_norm(&x->set);
    return x;
}

static int re_number(re_parser *P, int *out) {
    long v = 0;
    int nd = 0;
    /* every digit is read (a long count is still a count, refused above 1000 by the caller), the value saturates */
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') v = v < 100000 ? v * 10 + (*P->p - '0') : v, P->p++, nd++;
    *out = (int)v;
    return nd;
}

static re_node *re_atom(re_parser *P, int depth) {
    char c = *P->p;
    if (c == '(') {
        P->p++;
        if (P->p < P->end && *P->p == '?') {
            if (P->end - P->p >= 2 && P->p[1] == ':') P->p += 2;
            else if (P->end - P->p >= 2 && P->p[1] == '<' && P->end - P->p >= 3 && P->p[2] != '=' && P->p[2] != '!') {
                P->p += 2;
                while (P->p < P->end && *P->p != '>') P->p++;
                if (P->p >= P->end) {
                    re_fail(P, "unterminated group name");
                    return NULL;
                }
                P->p++;
            } else {
                re_fail(P, "lookaround assertions are not supported");
                return NULL;
            }
        }
        re_node *x = re_alt(P, depth + 1);
        if (!x) return NULL;
        if (P->p >= P->end || *P->p != ')') {
            re_fail(P, "missing ')'");
            re_free(x);
            return NULL;
        }
        P->p++;
        return x;
    }
    re_node *x = re_new(RE_SET);
    if (!x) return NULL;
    if (c == '[') {
        P->p++;
        re_free(x);
        return re_class(P);
    } else if (c == '.') {
        P->p++;
        if (cpset_add(&x->set, '\n', '\n') || cpset_add(&x->set, '\r', '\r') || cpset_add(&x->set, 0x2028, 0x2029) ||
            cpset_negate(&x->set)) {
            re_free(x);
            return NULL;
        }
    } else if (c == '^' || c == '$') {
        P->p++;
        x->op = c == '^' ? RE_BOL : RE_EOL;
    } else if (c == '\\') {
        P->p++;
        long v = re_escape(P, &x->set, 0);
        if (v == -1) {
            re_free(x);
            return NULL;
        }
        if (v >= 0 && cpset_add(&x->set, (uint32_t)v, (uint32_t)v)) {
            re_free(x);
            return NULL;
        }
    } else if (c == '*' || c == '+' || c == '?') {
        re_fail(P, "quantifier without an atom");
        re_free(x);
        return NULL;
    } else if (c == ')') {
        re_fail(P, "unmatched ')'");
        re_free(x);
        return NULL;
    } else {
        uint32_t v = re_cp(P);
        if (P->failed || cpset_add(&x->set, v, v)) {
            re_free(x);
            return NULL;
        }
    }
    cpset_norm(&x->set);
    return x;
}

static re_node *re_seq(re_parser *P, int depth) {
    re_node *cat = re_new(RE_CAT);
    if (!cat) return NULL;
    while (P->p < P->end && *P->p != '|' && *P->p != ')') {
        re_node *a = re_atom(P, depth);
        if (!a) break;
        /* quantifier */
        if (P->p < P->end && (*P->p == '*' || *P->p == '+' || *P->p == '?' || *P->p == '{')) {
            int min = 0, max = -1, ok = 1;
            const char *save = P->p;
            if (*P->p == '*') P->p++;
            else if (*P->p == '+') min = 1, P->p++;
            else if (*P->p == '?') max = 1, P->p++;
            else {
                P->p++;
                if (!re_number(P, &min)) ok = 0;
                else if (P->p < P->end && *P->p == '}') max = min, P->p++;
                else if (P->p < P->end && *P->p == ',') {
                    P->p++;
                    if (P->p < P->end && *P->p == '}') P->p++;
                    else if (re_number(P, &max) && P->p < P->end && *P->p == '}') P->p++;
                    else ok = 0;
                } else ok = 0;
                if (!ok) {
                    /* not a quantifier: '{' is a literal (Annex B) */
                    P->p = save;
                }
            }
            if (ok) {
                if (P->p < P->end && *P->p == '?') P->p++; /* lazy: same language */
                if (a->op == RE_BOL || a->op == RE_EOL) {
                    re_fail(P, "quantified anchor");
                    re_free(a);
                    break;
                }
                if ((max >= 0 && max < min) || min > 1000 || max > 1000) {
                    re_fail(P, max >= 0 && max < min ? "quantifier {n,m} with m < n" : "repetition count above 1000");
                    re_free(a);
                    break;
                }
                re_node *r = re_new(RE_REP);
                if (!r || re_kid(r, a)) {
                    re_free(r);
                    break;
                }
                r->min = min;
                r->max = max;
                a = r;
            }
        }
        if (re_kid(cat, a)) break;
    }
    if (P->failed) {
        re_free(cat);
        return NULL;
    }
    return cat;
}

static re_node *re_alt(re_parser *P, int depth) {
    if (depth > 100) {
        re_fail(P, "groups nested too deeply");
        return NULL;
    }
    re_node *alt = re_new(RE_ALT);
    if (!alt) return NULL;
    for (;;) {
        if (re_kid(alt, re_seq(P, depth))) {
            re_free(alt);
            return NULL;
        }
        if (P->p < P->end && *P->p == '|') {
            P->p++;
            continue;
        }
        break;
    }
    return alt;
}

static int re_has_anchor(const re_node *x) {
    if (x->op == RE_BOL || x->op == RE_EOL) return 1;
    for (int i = 0; i < x->n_kid; i++)
        if (re_has_anchor(x->kid[i])) return 1;
    return 0;
}

static gram_frag re_compile(gram_nfa *n, const re_node *x) {
    switch (x->op) {
    case RE_SET: {
        int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
        for (int i = 0; i < x->set.n; i++) add_cp_range(n, s, e, x->set.r[i].lo, x->set.r[i].hi);
        return (gram_frag){s, e};
    }
    case RE_CAT: {
        gram_frag f = gram_frag_empty(n);
        for (int i = 0; i < x->n_kid; i++) f = gram_frag_cat(n, f, re_compile(n, x->kid[i]));
        return f;
    }
    case RE_ALT: {
        int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
        for (int i = 0; i < x->n_kid; i++) {
            gram_frag k = re_compile(n, x->kid[i]);
            eps(n, s, k.start);
            eps(n, k.end, e);
        }
        return (gram_frag){s, e};
    }
    case RE_REP: {
        gram_frag f = gram_frag_empty(n);
        for (int i = 0; i < x->min; i++) f = gram_frag_cat(n, f, re_compile(n, x->kid[0]));
        if (x->max < 0) return gram_frag_cat(n, f, gram_frag_star(n, re_compile(n, x->kid[0])));
        /* optional tail, flat: after each copy either stop or go on (nested
         * (a(a)?)? would put every enclosing exit into each closure) */
        if (x->max > x->min) {
            int32_t e = gram_nfa_state(n), cur = f.end;
            eps(n, cur, e);
            for (int i = x->min; i < x->max; i++) {
                gram_frag k = re_compile(n, x->kid[0]);
                eps(n, cur, k.start);
                eps(n, k.end, e);
                cur = k.end;
            }
            f.end = e;
        }
        return f;
    }
    default: /* anchors were removed before */
        return gram_frag_empty(n);
    }
}

/* "^(a|^b)$" → "^a$|^b$": a top-level alternative that is one group
 * (between optional outer anchors) is replaced by its branches, the outer
 * anchors distributed over them (anchors are zero-width, so this is exact). */
static int re_hoist(re_node *root) {
    for (int i = 0; i < root->n_kid; i++) {
        re_node *seq = root->kid[i];
        int first = 0, last = seq->n_kid;
        while (first < last && seq->kid[first]->op == RE_BOL) first++;
        while (last > first && seq->kid[last - 1]->op == RE_EOL) last--;
        if (last - first != 1 || seq->kid[first]->op != RE_ALT) continue;
        re_node *alt = seq->kid[first];
        int bol = first > 0, eol = last < seq->n_kid;
        /* new sequences: [^] branch-seq [$] */
        for (int b = 0; b < alt->n_kid; b++) {
            re_node *br = alt->kid[b];
            re_node *ns = re_new(RE_CAT);
            if (!ns) return -1;
            if (bol && re_kid(ns, re_new(RE_BOL))) { re_free(ns); return -1; }
            if (br->op == RE_CAT) {
                for (int k = 0; k < br->n_kid; k++) {
                    if (re_kid(ns, br->kid[k])) { re_free(ns); return -1; }
                    br->kid[k] = NULL;
                }
                br->n_kid = 0;
            } else {
                if (re_kid(ns, br)) { re_free(ns); return -1; }
                alt->kid[b] = NULL;
            }
            if (eol && re_kid(ns, re_new(RE_EOL))) { re_free(ns); return -1; }
            if (re_kid(root, ns)) return -1;
        }
        /* drop the hoisted alternative; its replacements were appended */
        re_free(seq);
        memmove(&root->kid[i], &root->kid[i + 1], (size_t)(root->n_kid - i - 1) * sizeof *root->kid);
        root->n_kid--;
        i--;
    }
    return 0;
}

static gram_frag any_chars(gram_nfa *n) { return gram_frag_star(n, gram_frag_cp_range(n, 0, 0x10FFFF)); }

/* About how many NFA states x expands to (counted repetitions copy their
 * atom), as a double so nested counts cannot overflow: "(a{1000}){1000}" is
 * refused before a million states are built. */
#define RE_MAX_STATES 200000
static double re_size(const re_node *x) {
    switch (x->op) {
    case RE_SET: return 2.0 + 6.0 * x->set.n; /* UTF-8 ranges split into a few byte paths each */
    case RE_REP: {
        double k = x->n_kid ? re_size(x->kid[0]) : 1;
        return 2.0 + k * (x->max >= 0 ? x->max : x->min + 1);
    }
    default: {
        double t = 2.0;
        for (int i = 0; i < x->n_kid; i++) t += x->kid[i] ? re_size(x->kid[i]) : 0;
        return t;
    }
    }
}

int gram_regex(gram_nfa *n, const char *pattern, gram_frag *out, char *err, size_t err_len) {
    re_parser P = {pattern, pattern + strlen(pattern), pattern, err, err_len, 0};
    re_node *root = re_alt(&P, 0);
    if (root && P.p < P.end) re_fail(&P, "unmatched ')'");
    if (!root || P.failed) {
        if (!P.failed) ferr(err, err_len, "out of memory");
        re_free(root);
        return -1;
    }
    if (re_hoist(root)) {
        ferr(err, err_len, "out of memory");
        re_free(root);
        return -1;
    }
    if (re_size(root) > RE_MAX_STATES) {
        ferr(err, err_len, "pattern '%.80s' expands to more than %d automaton states", pattern, RE_MAX_STATES);
        re_free(root);
        return -1;
    }
    /* per top-level alternative: leading ^ / trailing $ anchor it.  Alternatives
     * with the same anchoring share one prefix/suffix loop: separate loops
     * would make the DFA remember which alternatives matched (2^k states). */
    int32_t s = gram_nfa_state(n), e = gram_nfa_state(n);
    int32_t grp_s[4], grp_e[4];
    for (int k = 0; k < 4; k++) grp_s[k] = grp_e[k] = -1;
    for (int i = 0; i < root->n_kid; i++) {
        re_node *seq = root->kid[i];
        int bol = 0, eol = 0;
        int first = 0, last = seq->n_kid;
        while (first < last && seq->kid[first]->op == RE_BOL) bol = 1, first++;
        while (last > first && seq->kid[last - 1]->op == RE_EOL) eol = 1, last--;
        for (int k = first; k < last; k++)
            if (re_has_anchor(seq->kid[k])) {
                ferr(err, err_len, "pattern '%s': anchors inside groups or mid-pattern are not supported", pattern);
                re_free(root);
                return -1;
            }
        int gi = bol * 2 + eol;
        if (grp_s[gi] < 0) {
            grp_s[gi] = gram_nfa_state(n);
            grp_e[gi] = gram_nfa_state(n);
            gram_frag pre = bol ? gram_frag_empty(n) : any_chars(n);
            gram_frag suf = eol ? gram_frag_empty(n) : any_chars(n);
            eps(n, s, pre.start);
            eps(n, pre.end, grp_s[gi]);
            eps(n, grp_e[gi], suf.start);
            eps(n, suf.end, e);
        }
        gram_frag f = gram_frag_empty(n);
        for (int k = first; k < last; k++) f = gram_frag_cat(n, f, re_compile(n, seq->kid[k]));
        eps(n, grp_s[gi], f.start);
        eps(n, f.end, grp_e[gi]);
    }
    re_free(root);
    if (n->oom) {
        ferr(err, err_len, "out of memory");
        return -1;
    }
    *out = (gram_frag){s, e};
    return 0;
}

gram_frag gram_frag_string_len(gram_nfa *n, long min, long max) {
    int32_t s = gram_nfa_state(n), cur = s;
    for (long i = 0; i < min; i++) {
        int32_t nx = gram_nfa_state(n);
        add_cp_range(n, cur, nx, 0, 0x10FFFF);
        cur = nx;
    }
    if (max < 0) {
        add_cp_range(n, cur, cur, 0, 0x10FFFF);
        return (gram_frag){s, cur};
    }
    int32_t e = gram_nfa_state(n);
    eps(n, cur, e);
    for (long i = min; i < max; i++) {
        int32_t nx = gram_nfa_state(n);
        add_cp_range(n, cur, nx, 0, 0x10FFFF);
        eps(n, nx, e);
        cur = nx;
    }
    return (gram_frag){s, e};
}

/* ---- formats ------------------------------------------------------------------------ */

/* years 0001-9999 (validators built on Python's datetime reject year 0) */
#define RE_YEAR "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
#define RE_DATE                                                                                            \
    "(?:" RE_YEAR "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|" \
    "02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)"
#define RE_TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define RE_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define RE_OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define RE_IPV4 RE_OCTET "(?:\\." RE_OCTET "){3}"
#define H16 "[0-9A-Fa-f]{1,4}"
#define LS32 "(?:" H16 ":" H16 "|" RE_IPV4 ")"
#define RE_IPV6                                                                                            \
    "(?:(?:" H16 ":){6}" LS32 "|::(?:" H16 ":){5}" LS32 "|(?:" H16 ")?::(?:" H16 ":){4}" LS32               \
    "|(?:(?:" H16 ":){0,1}" H16 ")?::(?:" H16 ":){3}" LS32 "|(?:(?:" H16 ":){0,2}" H16 ")?::(?:" H16       \
    ":){2}" LS32 "|(?:(?:" H16 ":){0,3}" H16 ")?::" H16 ":" LS32 "|(?:(?:" H16 ":){0,4}" H16 ")?::" LS32   \
    "|(?:(?:" H16 ":){0,5}" H16 ")?::" H16 "|(?:(?:" H16 ":){0,6}" H16 ")?::)"
/* RFC 3986 (U: the unreserved set; IRIs add non-ASCII) */
#define PCT "%[0-9A-Fa-f]{2}"
#define SUB "!$&'()*+,;="
#define UNRES_A "A-Za-z0-9\\-._~"
#define UNRES_I "A-Za-z0-9\\-._~\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF"
#define PCHAR(U) "(?:[" U SUB ":@]|" PCT ")"
#define SEG(U) PCHAR(U) "*"
#define SEG_NZ(U) PCHAR(U) "+"
#define SEG_NZ_NC(U) "(?:[" U SUB "@]|" PCT ")+"
#define AUTH(U) "(?:(?:[" U SUB ":]|" PCT ")*@)?(?:\\[" RE_IPV6 "\\]|(?:[" U SUB "]|" PCT ")*)(?::[0-9]*)?"
#define ABEMPTY(U) "(?:/" SEG(U) ")*"
#define PABS(U) "/(?:" SEG_NZ(U) "(?:/" SEG(U) ")*)?"
#define QF(U) "(?:\\?(?:" PCHAR(U) "|[/?])*)?(?:#(?:" PCHAR(U) "|[/?])*)?"
#define RE_URI(U) "[A-Za-z][A-Za-z0-9+.\\-]*:(?://" AUTH(U) ABEMPTY(U) "|" PABS(U) "|" SEG_NZ(U) "(?:/" SEG(U) ")*|)" QF(U)
#define RE_REL(U) "(?://" AUTH(U) ABEMPTY(U) "|" PABS(U) "|" SEG_NZ_NC(U) "(?:/" SEG(U) ")*|)" QF(U)
/* RFC 6570 */
#define VARCHAR "(?:[A-Za-z0-9_]|" PCT ")"
#define VARSPEC VARCHAR "+(?:\\." VARCHAR "+)*(?::[1-9][0-9]{0,3}|\\*)?"
#define RE_TEMPLATE "(?:[!#$&(-;=?-\\[\\]_a-z~\\u00A0-\\uD7FF\\uE000-\\uFDCF\\uFDF0-\\uFFEF]|" PCT "|\\{[+#./;?&=,!@|]?" VARSPEC "(?:," VARSPEC ")*\\})*"
/* A regular subset of valid regular expressions (groups nested at most 3 deep) */
#define RX_ESC "\\\\[dDwWsSbBntrfv0\\\\.^$|?*+()\\[\\]{}/\\-]"
#define RX_CLASS "\\[\\^?(?:" RX_ESC "|a-z|A-Z|0-9|a-f|A-F|[^\\]\\\\\\[\\-])+\\]"
#define RX_ATOM0 "(?:[^\\\\^$.|?*+()\\[\\]{}]|" RX_ESC "|\\.|" RX_CLASS ")"
#define RX_QUANT "(?:(?:[*+?]|\\{[0-9]{1,3},?\\})\\?" "?)?"
#define RX_SEQ(ATOM) "(?:\\^|\\$|" ATOM RX_QUANT ")*"
#define RX_ALT(ATOM) RX_SEQ(ATOM) "(?:\\|" RX_SEQ(ATOM) ")*"
#define RX_ATOM1 "(?:" RX_ATOM0 "|\\((?:\\?:)?" RX_ALT(RX_ATOM0) "\\))"
#define RX_ATOM2 "(?:" RX_ATOM0 "|\\((?:\\?:)?" RX_ALT(RX_ATOM1) "\\))"
#define RX_ATOM3 "(?:" RX_ATOM0 "|\\((?:\\?:)?" RX_ALT(RX_ATOM2) "\\))"

static const struct {
    const char *name, *re;
    int max_len; /* code points; 0: none */
} formats[] = {
    {"date", "^" RE_DATE "$", 0},
    {"time", "^" RE_TIME "$", 0},
    {"date-time", "^" RE_DATE "[Tt]" RE_TIME "$", 0},
    {"duration", "^P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)$", 0},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", 0},
    {"email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" RE_LABEL "(?:\\." RE_LABEL ")+$", 0},
    {"idn-email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\u00A0-\\uD7FF-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\u00A0-\\uD7FF-]+)*@" RE_LABEL "(?:\\." RE_LABEL ")+$", 0},
    {"hostname", "^" RE_LABEL "(?:\\." RE_LABEL ")*$", 253},
    {"ipv4", "^" RE_IPV4 "$", 0},
    {"ipv6", "^" RE_IPV6 "$", 0},
    {"uri", "^" RE_URI(UNRES_A) "$", 0},
    {"uri-reference", "^(?:" RE_URI(UNRES_A) "|" RE_REL(UNRES_A) ")$", 0},
    {"iri", "^" RE_URI(UNRES_I) "$", 0},
    {"iri-reference", "^(?:" RE_URI(UNRES_I) "|" RE_REL(UNRES_I) ")$", 0},
    {"uri-template", "^" RE_TEMPLATE "$", 0},
    {"json-pointer", "^(?:/(?:[^/~]|~[01])*)*$", 0},
    {"relative-json-pointer", "^(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^/~]|~[01])*)*)$", 0},
    {"regex", "^" RX_ALT(RX_ATOM3) "$", 0},
};

/* formats JSON Schema defines that we cannot check exactly */
static const char *const formats_unsupported[] = {"idn-hostname", NULL};

/* Format automata are the same for every schema and some take tens of
 * milliseconds (hostname's 253-character bound): each is made once per
 * process, on first use, and handed out as copies.  The table is immutable
 * once an entry is made; the mutex orders the first builds. */
#define FORMAT_MAX_STATES 200000
static pthread_mutex_t format_lock = PTHREAD_MUTEX_INITIALIZER;
static gram_dfa format_dfa[sizeof formats / sizeof formats[0]];
static int format_rc[sizeof formats / sizeof formats[0]]; /* 0 not made, 1 made, else -1/-2 (failed; retried) */

static int format_build(size_t i, gram_dfa *out) {
    char e[256];
    gram_nfa n;
    gram_nfa_init(&n);
    gram_frag fr;
    int rc = gram_regex(&n, formats[i].re, &fr, e, sizeof e);
    if (!rc) {
        n.tag[fr.end] = 0;
        rc = gram_dfa_from_nfa(&n, fr.start, NULL, NULL, FORMAT_MAX_STATES, out);
    }
    gram_nfa_free(&n);
    if (!rc && formats[i].max_len) {
        gram_nfa_init(&n);
        gram_frag lf = gram_frag_string_len(&n, 0, formats[i].max_len);
        n.tag[lf.end] = 0;
        gram_dfa ld, t;
        rc = gram_dfa_from_nfa(&n, lf.start, NULL, NULL, FORMAT_MAX_STATES, &ld);
        gram_nfa_free(&n);
        if (!rc) {
            rc = gram_dfa_intersect(out, &ld, FORMAT_MAX_STATES, &t);
            gram_dfa_free(&ld);
            gram_dfa_free(out);
            if (!rc) *out = t;
        } else gram_dfa_free(out);
    }
    return rc;
}

int gram_format_dfa(const char *format, int max_states, gram_dfa *out, int *known) {
    *known = 0;
    for (int i = 0; formats_unsupported[i]; i++)
        if (!strcmp(format, formats_unsupported[i])) {
            *known = -1;
            return 0;
        }
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(format, formats[i].name)) {
            *known = 1;
            pthread_mutex_lock(&format_lock);
            if (format_rc[i] != 1) {
                int rc = format_build(i, &format_dfa[i]);
                format_rc[i] = rc ? rc : 1;
            }
            int rc = format_rc[i] == 1 ? 0 : format_rc[i];
            if (!rc && format_dfa[i].n_states > max_states) rc = -2;
            if (!rc && gram_dfa_copy(&format_dfa[i], out)) rc = -1;
            pthread_mutex_unlock(&format_lock);
            return rc;
        }
    return 0;
}

/* ---- numbers --------------------------------------------------------------------------- */

long gram_canon_number(const char *s, size_t len, char *buf, size_t cap) {
    size_t i = 0;
    int neg = 0;
    if (i < len && s[i] == '-') neg = 1, i++;
    if (i >= len || s[i] < '0' || s[i] > '9') return -1;
    /* digits: integer part then fraction */
    size_t int_start = i;
    if (s[i] == '0') i++;
    else while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    size_t int_end = i, frac_start = i, frac_end = i;
    if (i < len && s[i] == '.') {
        i++;
        frac_start = i;
        if (i >= len || s[i] < '0' || s[i] > '9') return -1;
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
        frac_end = i;
    }
    long exp = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < len && (s[i] == '+' || s[i] == '-')) eneg = s[i] == '-', i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return -1;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (exp < 1000000) exp = exp * 10 + (s[i] - '0');
            i++;
        }
        if (eneg) exp = -exp;
    }
    if (i != len) return -1;
    if (exp > 100000 || exp < -100000) return -2;
    /* all digits D, decimal point after position pt */
    size_t nd = (int_end - int_start) + (frac_end - frac_start);
    char *d = malloc(nd + 1);
    if (!d) return -2;
    memcpy(d, s + int_start, int_end - int_start);
    memcpy(d + (int_end - int_start), s + frac_start, frac_end - frac_start);
    long pt = (long)(int_end - int_start) + exp;
    /* strip leading zeros */
    size_t a = 0, b = nd;
    while (a < b && d[a] == '0') a++, pt--;
    while (b > a && d[b - 1] == '0') b--;
    size_t o = 0;
#define PUT(ch) do { if (o + 1 >= cap) { free(d); return -2; } buf[o++] = (ch); } while (0)
    if (a == b) {
        PUT('0');
    } else {
        long n = (long)(b - a);
        if (neg) PUT('-');
        if (pt <= 0) {
            PUT('0');
            PUT('.');
            for (long k = 0; k < -pt; k++) PUT('0');
            for (size_t k = a; k < b; k++) PUT(d[k]);
        } else if (pt >= n) {
            for (size_t k = a; k < b; k++) PUT(d[k]);
            for (long k = n; k < pt; k++) PUT('0');
        } else {
            for (long k = 0; k < n; k++) {
                if (k == pt) PUT('.');
                PUT(d[a + (size_t)k]);
            }
        }
    }
#undef PUT
    buf[o] = 0;
    free(d);
    return (long)o;
}

long gram_canon_double(double v, char *buf, size_t cap) {
    char t[64];
    if (!isfinite(v)) return -1;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v);
        if (strtod(t, NULL) == v) break;
    }
    return gram_canon_number(t, strlen(t), buf, cap);
}

/* compare canonical unsigned magnitudes */
static int mag_cmp(const char *a, const char *b) {
    const char *da = strchr(a, '.'), *db = strchr(b, '.');
    size_t ia = da ? (size_t)(da - a) : strlen(a), ib = db ? (size_t)(db - b) : strlen(b);
    if (ia != ib) return ia < ib ? -1 : 1;
    int c = memcmp(a, b, ia);
    if (c) return c < 0 ? -1 : 1;
    const char *fa = da ? da + 1 : "", *fb = db ? db + 1 : "";
    c = strcmp(fa, fb);
    return c < 0 ? -1 : c > 0;
}

int gram_dec_cmp(const char *a, const char *b) {
    int na = a[0] == '-', nb = b[0] == '-';
    if (na != nb) return na ? -1 : 1;
    int c = mag_cmp(a + na, b + nb);
    return na ? -c : c;
}

/* Comparison automaton over canonical unsigned decimals: accepts strings
 * whose comparison with m lands in want (bit 0: less, 1: equal, 2: greater).
 * nonzero: the exact string "0" is rejected (for the negative branch).
 * Built as a DFA-shaped NFA between s and the returned end state. */
enum { LT = 1, EQ = 2, GT = 4 };
enum { PH_DOT = 0, PH_ZERO = 1, PH_NZ = 2 };

typedef struct {
    gram_nfa *n;
    const char *I, *F; /* integer / fraction digits of m */
    int li, lf;
    int want, integer;
    int32_t end;
    int32_t *memo; size_t memo_n; /* state ids by key */
} cmp_builder;

/* state keys:
 *   INT(k, c) k = 1..li+1 (li+1: longer), c in {LT,EQ,GT}; ZERO (int part "0")
 *   FREE(o, ph)  fraction with a fixed outcome o
 *   FEQ(j, ph)   fraction equal so far, j digits (j <= lf), ph phase; FPAD: past lf, zeros */
static int32_t cb_state(cmp_builder *B, size_t key) {
    if (B->memo[key] < 0) B->memo[key] = gram_nfa_state(B->n);
    return B->memo[key];
}

static int outc_idx(int o) { return o == LT ? 0 : o == EQ ? 1 : 2; }

static void cmp_build(cmp_builder *B, int32_t start, int nonzero) {
    gram_nfa *n = B->n;
    int li = B->li, lf = B->lf;
    /* key layout */
    size_t K_INT = 0;                              /* (li + 2) * 3 */
    size_t K_ZERO = K_INT + (size_t)(li + 2) * 3;  /* 1 */
    size_t K_FREE = K_ZERO + 1;                    /* 3 outcomes * 3 phases */
    size_t K_FEQ = K_FREE + 9;                     /* (lf + 1) * 3 phases */
    size_t K_PAD = K_FEQ + (size_t)(lf + 1) * 3;   /* 1 */
    (void)K_PAD;
#define ACC(st, o) do { if (B->want & (o)) eps(n, (st), B->end); } while (0)
    /* free fraction states */
    for (int oi = 0; oi < 3 && !B->integer; oi++) {
        int o = oi == 0 ? LT : oi == 1 ? EQ : GT;
        int32_t dot = cb_state(B, K_FREE + (size_t)oi * 3 + PH_DOT), z = cb_state(B, K_FREE + (size_t)oi * 3 + PH_ZERO),
                nz = cb_state(B, K_FREE + (size_t)oi * 3 + PH_NZ);
        int32_t src[3] = {dot, z, nz};
        for (int k = 0; k < 3; k++) {
            gram_nfa_edge_add(n, src[k], z, '0', '0');
            gram_nfa_edge_add(n, src[k], nz, '1', '9');
        }
        ACC(nz, o);
    }
    /* integer part */
    /* start: '0' → ZERO; d in 1..9 → INT(1, cmp(d, I[0])) */
    int32_t zero = cb_state(B, K_ZERO);
    gram_nfa_edge_add(n, start, zero, '0', '0');
    {
        /* ZERO: integer part "0" vs I */
        int o = (li == 1 && B->I[0] == '0') ? EQ : LT;
        if (!nonzero) {
            if (o == EQ) ACC(zero, lf > 0 ? LT : EQ);
            else ACC(zero, LT);
        }
        if (!B->integer) {
            if (o == EQ) gram_nfa_edge_add(n, zero, cb_state(B, K_FEQ + 0 * 3 + PH_DOT), '.', '.');
            else gram_nfa_edge_add(n, zero, cb_state(B, K_FREE + (size_t)outc_idx(LT) * 3 + PH_DOT), '.', '.');
        }
    }
    for (int d = 1; d <= 9; d++) {
        int c = li == 0 ? GT : (d < B->I[0] - '0' ? LT : d > B->I[0] - '0' ? GT : EQ);
        if (B->I[0] == '0') c = GT; /* m < 1: any nonzero leading digit makes x >= 1 > m */
        int k = (B->I[0] == '0') ? li + 1 : 1;
        if (k > li + 1) k = li + 1;
        gram_nfa_edge_add(n, start, cb_state(B, K_INT + (size_t)k * 3 + (size_t)outc_idx(c)), '0' + d, '0' + d);
    }
    for (int k = 1; k <= li + 1; k++)
        for (int ci = 0; ci < 3; ci++) {
            int c = ci == 0 ? LT : ci == 1 ? EQ : GT;
            int32_t s = cb_state(B, K_INT + (size_t)k * 3 + (size_t)ci);
            /* more digits */
            if (k <= li) {
                for (int d = 0; d <= 9; d++) {
                    int nc = c;
                    if (k < li && c == EQ) nc = d < B->I[k] - '0' ? LT : d > B->I[k] - '0' ? GT : EQ;
                    int nk = k + 1;
                    gram_nfa_edge_add(n, s, cb_state(B, K_INT + (size_t)nk * 3 + (size_t)outc_idx(k < li ? nc : GT)), '0' + d,
                                      '0' + d);
                }
            } else {
                gram_nfa_edge_add(n, s, s, '0', '9');
            }
            /* end of the integer part */
            int o = k < li ? LT : k > li ? GT : c;
            if (o == EQ && lf > 0) ACC(s, LT);
            else ACC(s, o);
            if (!B->integer) {
                if (o == EQ) gram_nfa_edge_add(n, s, cb_state(B, K_FEQ + 0 * 3 + PH_DOT), '.', '.');
                else gram_nfa_edge_add(n, s, cb_state(B, K_FREE + (size_t)outc_idx(o) * 3 + PH_DOT), '.', '.');
            }
        }
    if (B->integer) return;
    /* fraction, equal so far */
    for (int j = 0; j <= lf; j++)
        for (int ph = 0; ph < 3; ph++) {
            if (j == 0 && ph != PH_DOT) continue;
            if (j > 0 && ph == PH_DOT) continue;
            int32_t s = cb_state(B, K_FEQ + (size_t)j * 3 + (size_t)ph);
            for (int d = 0; d <= 9; d++) {
                int nph = d ? PH_NZ : PH_ZERO;
                int32_t t;
                if (j < lf) {
                    int fd = B->F[j] - '0';
                    if (d < fd) t = cb_state(B, K_FREE + (size_t)outc_idx(LT) * 3 + (size_t)nph);
                    else if (d > fd) t = cb_state(B, K_FREE + (size_t)outc_idx(GT) * 3 + (size_t)nph);
                    else t = cb_state(B, K_FEQ + (size_t)(j + 1) * 3 + (size_t)nph);
                } else {
                    /* past m's digits: zeros keep it equal (not accepting), a nonzero makes it greater */
                    t = d ? cb_state(B, K_FREE + (size_t)outc_idx(GT) * 3 + PH_NZ) : cb_state(B, K_PAD);
                }
                gram_nfa_edge_add(n, s, t, '0' + d, '0' + d);
            }
            if (ph == PH_NZ) ACC(s, j == lf ? EQ : LT);
        }
    int32_t pad = cb_state(B, K_PAD);
    gram_nfa_edge_add(n, pad, pad, '0', '0');
    gram_nfa_edge_add(n, pad, cb_state(B, K_FREE + (size_t)outc_idx(GT) * 3 + PH_NZ), '1', '9');
#undef ACC
}

/* Fragment: canonical (unsigned) decimals whose comparison with magnitude m
 * is in want. */
static int cmp_frag(gram_nfa *n, const char *m, int want, int integer, int nonzero, int32_t start, int32_t end) {
    const char *dot = strchr(m, '.');
    cmp_builder B = {.n = n, .I = m, .li = dot ? (int)(dot - m) : (int)strlen(m), .F = dot ? dot + 1 : "",
                     .want = want, .integer = integer, .end = end};
    B.lf = (int)strlen(B.F);
    B.memo_n = (size_t)(B.li + 2) * 3 + 1 + 9 + (size_t)(B.lf + 1) * 3 + 1;
    B.memo = malloc(B.memo_n * sizeof *B.memo);
    if (!B.memo) return -1;
    for (size_t i = 0; i < B.memo_n; i++) B.memo[i] = -1;
    cmp_build(&B, start, nonzero);
    free(B.memo);
    return n->oom ? -1 : 0;
}

/* rel: 0 >=, 1 >, 2 <=, 3 < */
static int bound_dfa(const char *c, int rel, int integer, long max_work, long *work, gram_dfa *out) {
    gram_nfa n;
    gram_nfa_init(&n);
    int32_t s = gram_nfa_state(&n), e = gram_nfa_state(&n), neg = gram_nfa_state(&n);
    n.tag[e] = 0;
    gram_nfa_edge_add(&n, s, neg, '-', '-');
    int cneg = c[0] == '-';
    const char *m = c + cneg;
    int pos_want, neg_want; /* outcomes of |x| vs |c| */
    int pos_all = 0, neg_all = 0, pos_none = 0, neg_none = 0;
    switch (rel) {
    case 0: /* x >= c */
        if (!cneg) pos_want = EQ | GT, neg_none = 1, neg_want = 0;
        else pos_all = 1, pos_want = LT | EQ | GT, neg_want = LT | EQ;
        break;
    case 1: /* x > c */
        if (!cneg) pos_want = GT, neg_none = 1, neg_want = 0;
        else pos_all = 1, pos_want = LT | EQ | GT, neg_want = LT;
        break;
    case 2: /* x <= c */
        if (!cneg) pos_want = LT | EQ, neg_all = 1, neg_want = LT | EQ | GT;
        else pos_none = 1, pos_want = 0, neg_want = EQ | GT;
        break;
    default: /* x < c */
        if (!cneg) pos_want = LT, neg_all = 1, neg_want = LT | EQ | GT;
        else pos_none = 1, pos_want = 0, neg_want = GT;
        break;
    }
    (void)pos_all;
    (void)neg_all;
    int rc = 0;
    if (!pos_none && pos_want) rc |= cmp_frag(&n, m, pos_want, integer, 0, s, e);
    if (!neg_none && neg_want) rc |= cmp_frag(&n, m, neg_want, integer, 1, neg, e);
    *work += n.n_states + n.n_edges;
    if (!rc) rc = gram_dfa_from_nfa_limited(&n, s, NULL, NULL, 1 << 20, max_work - *work, work, out);
    gram_nfa_free(&n);
    return rc;
}

/* multipleOf m = a / 10^sc: remainder automaton over digits; intersected with
 * the syntax later, so it only tracks values. */
static int multiple_dfa(const char *m, int integer, long max_work, long *work, gram_dfa *out, char *err,
                        size_t err_len) {
    const char *dot = strchr(m, '.');
    int sc = dot ? (int)strlen(dot + 1) : 0;
    unsigned long long a = 0;
    for (const char *p = m; *p; p++) {
        if (*p == '.') continue;
        if (a > 100000000ull) {
            ferr(err, err_len, "multipleOf %s: divisor too large", m);
            return -2;
        }
        a = a * 10 + (unsigned)(*p - '0');
    }
    if (a == 0) {
        ferr(err, err_len, "multipleOf must be > 0");
        return -2;
    }
    if (a * (unsigned long long)(sc + 2) > 200000) {
        ferr(err, err_len, "multipleOf %s: automaton too large (%llu states)", m, a * (unsigned long long)(sc + 2));
        return -2;
    }
    /* its NFA: a * (sc + 2) states, ten digit edges each */
    *work += (long)(a * (unsigned long long)(sc + 2) * 11);
    if (*work > max_work) {
        ferr(err, err_len, "multipleOf %s: over the compile's work budget", m);
        return -2;
    }
    gram_nfa n;
    gram_nfa_init(&n);
    int32_t s = gram_nfa_state(&n), e = gram_nfa_state(&n);
    n.tag[e] = 0;
    int32_t sg = gram_nfa_state(&n);
    eps(&n, s, sg);
    gram_nfa_edge_add(&n, s, sg, '-', '-');
    /* integer phase states: remainder r; fraction phase: (r, j) j = 1..sc */
    int32_t base_int = n.n_states;
    for (unsigned long long r = 0; r < a; r++) gram_nfa_state(&n);
    int32_t base_dot = n.n_states;
    for (unsigned long long r = 0; r < a; r++) gram_nfa_state(&n);
    int32_t base_frac = n.n_states;
    for (unsigned long long k = 0; k < a * (unsigned long long)sc; k++) gram_nfa_state(&n);
    if (n.oom) {
        gram_nfa_free(&n);
        return -1;
    }
    unsigned long long *pow10 = malloc(((size_t)sc + 1) * sizeof *pow10);
    if (!pow10) {
        gram_nfa_free(&n);
        return -1;
    }
    pow10[0] = 1 % a;
    for (int i = 1; i <= sc; i++) pow10[i] = pow10[i - 1] * 10 % a;
    for (int d = 0; d <= 9; d++) gram_nfa_edge_add(&n, sg, base_int + (int32_t)((unsigned)d % a), '0' + d, '0' + d);
    for (unsigned long long r = 0; r < a; r++) {
        int32_t st = base_int + (int32_t)r;
        for (int d = 0; d <= 9; d++) gram_nfa_edge_add(&n, st, base_int + (int32_t)((r * 10 + (unsigned)d) % a), '0' + d, '0' + d);
        /* value = r * 10^sc must be 0 mod a */
        if ((r * pow10[sc]) % a == 0) eps(&n, st, e);
        if (!integer && sc > 0) {
            gram_nfa_edge_add(&n, st, base_dot + (int32_t)r, '.', '.');
            for (int d = 0; d <= 9; d++)
                gram_nfa_edge_add(&n, base_dot + (int32_t)r, base_frac + (int32_t)(((r * 10 + (unsigned)d) % a) * (unsigned)sc + 0),
                                  '0' + d, '0' + d);
        }
    }
    for (unsigned long long r = 0; !integer && r < a; r++)
        for (int j = 1; j <= sc; j++) {
            int32_t st = base_frac + (int32_t)(r * (unsigned)sc + (unsigned)(j - 1));
            if (j < sc)
                for (int d = 0; d <= 9; d++)
                    gram_nfa_edge_add(&n, st, base_frac + (int32_t)(((r * 10 + (unsigned)d) % a) * (unsigned)sc + (unsigned)j),
                                      '0' + d, '0' + d);
            if ((r * pow10[sc - j]) % a == 0) eps(&n, st, e);
        }
    free(pow10);
    int rc = gram_dfa_from_nfa_limited(&n, s, NULL, NULL, 1 << 20, max_work - *work, work, out);
    gram_nfa_free(&n);
    if (rc == -2) ferr(err, err_len, "multipleOf %s: automaton too large", m);
    return rc;
}

static int syntax_dfa(int integer, int frac_only, gram_dfa *out) {
    gram_nfa n;
    gram_nfa_init(&n);
    /* -?(0|[1-9][0-9]*)(\.[0-9]*[1-9])? without "-0" */
    int32_t s = gram_nfa_state(&n), neg = gram_nfa_state(&n), zero = gram_nfa_state(&n), nzero = gram_nfa_state(&n),
            ip = gram_nfa_state(&n), dot = gram_nfa_state(&n), fz = gram_nfa_state(&n), fnz = gram_nfa_state(&n),
            e = gram_nfa_state(&n);
    n.tag[e] = 0;
    gram_nfa_edge_add(&n, s, neg, '-', '-');
    gram_nfa_edge_add(&n, s, zero, '0', '0');
    gram_nfa_edge_add(&n, neg, nzero, '0', '0');
    gram_nfa_edge_add(&n, s, ip, '1', '9');
    gram_nfa_edge_add(&n, neg, ip, '1', '9');
    gram_nfa_edge_add(&n, ip, ip, '0', '9');
    if (!frac_only) {
        eps(&n, zero, e);
        eps(&n, ip, e);
    }
    if (!integer) {
        gram_nfa_edge_add(&n, zero, dot, '.', '.');
        gram_nfa_edge_add(&n, nzero, dot, '.', '.');
        gram_nfa_edge_add(&n, ip, dot, '.', '.');
        int32_t src[3] = {dot, fz, fnz};
        for (int k = 0; k < 3; k++) {
            gram_nfa_edge_add(&n, src[k], fz, '0', '0');
            gram_nfa_edge_add(&n, src[k], fnz, '1', '9');
        }
        eps(&n, fnz, e);
    }
    int rc = gram_dfa_from_nfa(&n, s, NULL, NULL, 1 << 20, out);
    gram_nfa_free(&n);
    return rc;
}

static int intersect_into(gram_dfa *acc, const gram_dfa *b, long max_work, long *work) {
    gram_dfa t;
    if (*work > max_work) return -2;
    int rc = gram_dfa_intersect(acc, b, 1 << 20, &t);
    *work += (long)acc->n_states + b->n_states + (rc ? 0 : (long)t.n_states * t.n_classes);
    if (rc) return rc;
    gram_dfa_free(acc);
    *acc = t;
    return 0;
}

static int gram_number_dfa_at(const gram_num_spec *sp, long budget, long *used, gram_dfa *out, char *err,
                              size_t err_len);

int gram_number_dfa(const gram_num_spec *sp, gram_dfa *out, char *err, size_t err_len) {
    long used = 0, budget = sp->max_work != 0 ? sp->max_work : (long)1 << 40;
    int rc = gram_number_dfa_at(sp, budget, &used, out, err, err_len);
    if (sp->work) *sp->work += used;
    return rc;
}

static int gram_number_dfa_at(const gram_num_spec *sp, long budget, long *used, gram_dfa *out, char *err,
                              size_t err_len) {
    int rc = syntax_dfa(sp->integer, sp->frac_only, out);
    if (rc) {
        ferr(err, err_len, "out of memory");
        return rc;
    }
    gram_dfa b;
    if (sp->lo) {
        if ((rc = bound_dfa(sp->lo, sp->lo_excl ? 1 : 0, sp->integer, budget, used, &b))) goto fail;
        rc = intersect_into(out, &b, budget, used);
        gram_dfa_free(&b);
        if (rc) goto fail;
    }
    if (sp->hi) {
        if ((rc = bound_dfa(sp->hi, sp->hi_excl ? 3 : 2, sp->integer, budget, used, &b))) goto fail;
        rc = intersect_into(out, &b, budget, used);
        gram_dfa_free(&b);
        if (rc) goto fail;
    }
    if (sp->multiple_of) {
        if ((rc = multiple_dfa(sp->multiple_of, sp->integer, budget, used, &b, err, err_len))) {
            gram_dfa_free(out);
            return rc;
        }
        rc = intersect_into(out, &b, budget, used);
        gram_dfa_free(&b);
        if (rc) goto fail;
    }
    return 0;
fail:
    gram_dfa_free(out);
    ferr(err, err_len, rc == -2 ? (*used > budget ? "number automaton over the compile's work budget"
                                                   : "number range automaton too large")
                                : "out of memory");
    return rc;
}

int gram_ivec_push(gram_ivec *a, int32_t x) {
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 32;
        int32_t *nv = realloc(a->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}
