/*
 * gram_mask.c — token masks: which tokens of the vocabulary may come next
 * (see gram.h).
 *
 * The vocabulary is a byte trie laid out in preorder (a subtree is a
 * contiguous index range), built once per model.  A mask is the union, over
 * the configuration's stacks, of two parts:
 *
 *   context-free part  tokens whose bytes the top frame (and what it calls)
 *                      consumes by itself.  This depends only on the frame
 *                      (rule, state, aux), so it is computed once by walking
 *                      the trie and cached on the grammar: the "entry".
 *   context part       tokens that finish the frame and continue in its
 *                      parent.  The walk records the trie nodes where the
 *                      frame would pop ("pop points", grouped by byte); at
 *                      mask time the parent stack steps each group's byte
 *                      once and walks only the subtrees it accepts.
 *
 * So a mask costs an OR of cached bitsets plus a few memoised steps; the trie
 * walk happens once per distinct frame (tens of microseconds to a few
 * milliseconds, the price of the first visit).  Leaf rules (strings,
 * numbers, literals) are walked with direct DFA lookups; frames that call
 * other rules go through the matcher's memoised configuration steps.
 *
 * Counted strings (minLength/maxLength) key their entries by the distance to
 * each bound, capped at the longest token: all positions far from both
 * bounds share one entry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_mask.h"

/* ---- vocabulary trie ------------------------------------------------------------------ */

struct gram_vocab {
    int n_vocab;
    char *bytes;       /* token bytes, concatenated */
    int32_t *off;      /* (n_vocab + 1) */
    int n_nodes;
    uint8_t *nbyte;    /* (n_nodes) byte on the edge into the node */
    int32_t *npar;     /* (n_nodes) the parent node (-1 for the root) */
    int32_t *nend;     /* (n_nodes) first index after the node's subtree */
    int32_t *tok_off;  /* (n_nodes + 1) tokens ending at the node: toks[tok_off[i] .. tok_off[i+1]) */
    int32_t *toks;
    int32_t *eog;
    int n_eog;
    int max_len;       /* longest token in bytes */
    /* string content: most tokens have no '"'; the ones that are valid string
     * content are the same set in every "inside a string" state */
    uint8_t *qsub;     /* (n_nodes) a token at or below the node contains '"' */
    uint32_t *u_bits;  /* tokens without '"' that are valid canonical string content */
    gram_dfa content;  /* any canonical string content; state 0: between characters */
};

static int cmp_tok(const void *a, const void *b, void *ctx) {
    const gram_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], (size_t)(lx < ly ? lx : ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* qsub, the content automaton and u_bits (see struct gram_vocab). */
static int content_sets(gram_vocab *v) {
    int nn = v->n_nodes;
    v->qsub = calloc((size_t)nn, 1);
    v->u_bits = calloc(((size_t)v->n_vocab + 31) / 32, sizeof *v->u_bits);
    if (!v->qsub || !v->u_bits) return -1;
    for (int i = 0; i < nn; i++)
        for (int k = v->tok_off[i]; k < v->tok_off[i + 1]; k++) {
            int32_t id = v->toks[k];
            if (memchr(v->bytes + v->off[id], '"', (size_t)(v->off[id + 1] - v->off[id]))) v->qsub[i] = 1;
        }
    /* propagate up: in reverse preorder every child is done before its parent */
    for (int i = nn - 1; i >= 0; i--)
        for (int32_t c = i + 1; c < v->nend[i] && !v->qsub[i]; c = v->nend[c]) v->qsub[i] |= v->qsub[c];
    gram_nfa n;
    gram_nfa_init(&n);
    gram_frag f = gram_frag_star(&n, gram_frag_cp_range(&n, 0, 0x10FFFF));
    n.tag[f.end] = 0;
    int rc = gram_dfa_from_nfa(&n, f.start, NULL, NULL, 1000, &v->content);
    gram_nfa_free(&n);
    if (rc) return -1;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        int len = v->off[id + 1] - v->off[id];
        const char *b = v->bytes + v->off[id];
        if (!len || memchr(b, '"', (size_t)len)) continue;
        int32_t st = 0;
        for (int i = 0; i < len && st >= 0; i++) st = gram_dfa_next(&v->content, st, (uint8_t)b[i]);
        if (st >= 0) v->u_bits[id >> 5] |= 1u << (id & 31);
    }
    return 0;
}

int gram_vocab_new(const tok_vocab *tv, gram_vocab **out) {
    *out = NULL;
    gram_vocab *v = calloc(1, sizeof *v);
    if (!v) return -1;
    int n = tok_n_vocab(tv);
    v->n_vocab = n;
    v->off = calloc((size_t)n + 1, sizeof *v->off);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        tok_token_bytes(tv, i, false, &len);
        total += len;
    }
    v->bytes = malloc(total + 1);
    int32_t *order = malloc(((size_t)n + 1) * sizeof *order);
    v->eog = malloc(((size_t)n + 1) * sizeof *v->eog);
    if (!v->off || !v->bytes || !order || !v->eog) goto fail;
    size_t pos = 0;
    int n_order = 0;
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        const char *b = tok_token_bytes(tv, i, false, &len);
        v->off[i] = (int32_t)pos;
        if (b && len) memcpy(v->bytes + pos, b, len);
        pos += len;
        /* tokens longer than GRAM_TOKEN_MAX are never allowed under a grammar (the walks are that deep at most) */
        if (len && len <= GRAM_TOKEN_MAX) order[n_order++] = i;
        if ((int)len > v->max_len && len <= GRAM_TOKEN_MAX) v->max_len = (int)len;
        if (tok_is_eog(tv, i)) v->eog[v->n_eog++] = i;
    }
    v->off[n] = (int32_t)pos;
    qsort_r(order, (size_t)n_order, sizeof *order, cmp_tok, v);
    /* preorder trie: at most total + 1 nodes */
    size_t cap = total + 1;
    v->nbyte = malloc(cap);
    v->npar = malloc(cap * sizeof *v->npar);
    v->nend = malloc(cap * sizeof *v->nend);
    v->tok_off = calloc(cap + 1, sizeof *v->tok_off);
    v->toks = malloc(((size_t)n_order + 1) * sizeof *v->toks);
    int32_t *stack = malloc(((size_t)v->max_len + 2) * sizeof *stack); /* node at each depth */
    int32_t *tok_node = malloc(((size_t)n_order + 1) * sizeof *tok_node);
    if (!v->nbyte || !v->npar || !v->nend || !v->tok_off || !v->toks || !stack || !tok_node) {
        free(stack);
        free(tok_node);
        goto fail;
    }
    int nn = 1, depth = 0; /* node 0: the root */
    v->nbyte[0] = 0;
    v->npar[0] = -1;
    stack[0] = 0;
    const char *prev = NULL;
    int prev_len = 0;
    for (int k = 0; k < n_order; k++) {
        int id = order[k];
        const char *b = v->bytes + v->off[id];
        int len = v->off[id + 1] - v->off[id];
        int lcp = 0;
        while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) lcp++;
        /* close nodes deeper than lcp */
        while (depth > lcp) v->nend[stack[depth--]] = nn;
        while (depth < len) {
            v->nbyte[nn] = (uint8_t)b[depth];
            v->npar[nn] = stack[depth];
            stack[++depth] = nn++;
        }
        tok_node[k] = stack[len];
        prev = b;
        prev_len = len;
    }
    while (depth > 0) v->nend[stack[depth--]] = nn;
    v->nend[0] = nn;
    v->n_nodes = nn;
    for (int k = 0; k < n_order; k++) v->tok_off[tok_node[k] + 1]++;
    for (int i = 0; i < nn; i++) v->tok_off[i + 1] += v->tok_off[i];
    {
        int32_t *fill = malloc(((size_t)nn + 1) * sizeof *fill);
        if (!fill) {
            free(stack);
            free(tok_node);
            goto fail;
        }
        memcpy(fill, v->tok_off, (size_t)nn * sizeof *fill);
        for (int k = 0; k < n_order; k++) v->toks[fill[tok_node[k]]++] = order[k];
        free(fill);
    }
    free(stack);
    free(tok_node);
    free(order);
    if (content_sets(v)) goto fail;
    *out = v;
    return 0;
fail:
    free(order);
    gram_vocab_free(v);
    return -1;
}

void gram_vocab_free(gram_vocab *v) {
    if (!v) return;
    free(v->qsub);
    free(v->u_bits);
    gram_dfa_free(&v->content);
    free(v->bytes);
    free(v->off);
    free(v->nbyte);
    free(v->npar);
    free(v->nend);
    free(v->tok_off);
    free(v->toks);
    free(v->eog);
    free(v);
}

int gram_vocab_n_vocab(const gram_vocab *v) { return v->n_vocab; }

const char *gram_vocab_bytes(const gram_vocab *v, int32_t id, int *len) {
    if (id < 0 || id >= v->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

int gram_is_eog(const gram_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

/* ---- frame entries ------------------------------------------------------------------------ */

typedef struct {
    int32_t rule, state, aux;   /* key (aux canonical) */
    uint32_t *bits;             /* dense accepted set, or NULL */
    int32_t *ids;               /* sparse accepted set */
    int n_ids;
    int32_t *pop;               /* pop-point trie nodes, sorted by byte */
    int n_pop;
    int32_t grp[257];           /* pop[grp[b] .. grp[b+1]): nodes with byte b */
    int has_pop;
    int32_t *kpop;              /* boundary key frames: (trie node, key state) where a key ends */
    int n_kpop;
    int32_t *rk;                /* trie nodes whose tokens mask_by_tokens decides */
    int n_rk;
} gram_entry;

/* A grammar bound to a vocabulary: the cache of frame entries.  One masker
 * may serve several generations at once on several threads (the cache takes
 * its lock; entries never change once inserted). */
struct gram_masker {
    const gram_grammar *g;
    const gram_vocab *v;
    pthread_mutex_t lock;
    gram_entry **e;             /* open addressing by (rule, state, canonical aux) */
    size_t cap, n;
    int n_words;                /* (n_vocab + 31) / 32 */
};

static void entry_free(gram_entry *e) {
    if (!e) return;
    free(e->bits);
    free(e->ids);
    free(e->pop);
    free(e->kpop);
    free(e->rk);
    free(e);
}

void gram_masker_free(gram_masker *mk) {
    if (!mk) return;
    for (size_t i = 0; i < mk->cap; i++) entry_free(mk->e[i]);
    free(mk->e);
    pthread_mutex_destroy(&mk->lock);
    free(mk);
}

/* Does D from state d behave exactly like the string-content automaton W
 * between characters (its state 0), for every input that does not close the
 * string?  Then every quote-free token that is valid string content is
 * allowed from d and stays inside: the walks take them as one bitset
 * (vocabulary u_bits) instead of visiting their subtrees.  Both are
 * deterministic, so this is a breadth-first search over the pairs (d', w')
 * reachable from (d, 0) by the same bytes, failing on the first pair where
 * one has a move the other has not.  At most UNIV_PAIRS pairs are visited;
 * past that the answer is "no" (the walks then visit every subtree, which is
 * only slower).  Asked once per cache fill, at the fill's root. */
#define UNIV_PAIRS 20000
static int univ_state(const gram_dfa *D, int32_t d, const gram_dfa *W) {
    /* bytes that behave alike in both automata; '"' apart (between characters it closes the string) */
    uint8_t rep[257];
    int n_rep = 0;
    {
        uint8_t seen[256 * 256 / 8];
        memset(seen, 0, sizeof seen);
        for (int b = 0; b < 256; b++) {
            if (b == '"') continue;
            int key = D->cls[b] * 256 + W->cls[b];
            if (!(seen[key / 8] >> (key % 8) & 1)) seen[key / 8] |= (uint8_t)(1 << (key % 8)), rep[n_rep++] = (uint8_t)b;
        }
    }
    /* at most n_states(D) * n_states(W) pairs exist: size the table for that, or the cap */
    double most = (double)D->n_states * (double)W->n_states;
    int limit = most < UNIV_PAIRS ? (int)most : UNIV_PAIRS;
    size_t CAP = 64;
    while (CAP < 2 * (size_t)limit) CAP *= 2;
    uint64_t *set = calloc(CAP, sizeof *set);
    int32_t *q = malloc(2 * ((size_t)limit + 1) * sizeof *q);
    int ok = set && q, n = 0, head = 0;
#define UNIV_ADD(x, y)                                                                    \
    do {                                                                                  \
        uint64_t key_ = ((uint64_t)(uint32_t)(x) << 32 | (uint32_t)(y)) + 1;              \
        size_t i_ = (size_t)(key_ * 0x9e3779b97f4a7c15ull >> 20) & (CAP - 1);             \
        while (set[i_] && set[i_] != key_) i_ = (i_ + 1) & (CAP - 1);                     \
        if (!set[i_]) {                                                                   \
            if (n == limit) ok = 0;                                                       \
            else set[i_] = key_, q[2 * n] = (x), q[2 * n + 1] = (y), n++;                 \
        }                                                                                 \
    } while (0)
    if (ok) UNIV_ADD(d, 0);
    while (ok && head < n) {
        int32_t x = q[2 * head], w = q[2 * head + 1];
        head++;
        for (int k = 0; k < n_rep && ok; k++) {
            int32_t xn = gram_dfa_next(D, x, rep[k]), wn = gram_dfa_next(W, w, rep[k]);
            if ((xn >= 0) != (wn >= 0)) ok = 0;
            else if (xn >= 0) UNIV_ADD(xn, wn);
        }
        if (ok && w != 0) {
            /* inside an escape or a character '"' is content (\") */
            int32_t xn = gram_dfa_next(D, x, '"'), wn = gram_dfa_next(W, w, '"');
            if ((xn >= 0) != (wn >= 0)) ok = 0;
            else if (xn >= 0) UNIV_ADD(xn, wn);
        }
    }
#undef UNIV_ADD
    free(set);
    free(q);
    return ok;
}

int gram_masker_new(const gram_grammar *g, const gram_vocab *gv, gram_masker **out) {
    gram_masker *mk = calloc(1, sizeof *mk);
    *out = NULL;
    if (!mk) return -1;
    mk->g = g;
    mk->v = gv;
    mk->n_words = (gv->n_vocab + 31) / 32;
    pthread_mutex_init(&mk->lock, NULL);
    *out = mk;
    return 0;
}

const gram_vocab *gram_masker_vocab(const gram_masker *mk) { return mk->v; }

static uint64_t key_hash(int32_t r, int32_t s, int32_t a) {
    uint64_t h = (uint64_t)(uint32_t)r * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)s * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)(uint32_t)a * 0x165667b19e3779f9ull;
    return h ^ (h >> 31);
}

/* lookup under mk->lock */
static gram_entry *cache_find(gram_masker *c, int32_t r, int32_t s, int32_t a) {
    if (!c->cap) return NULL;
    size_t k = key_hash(r, s, a) & (c->cap - 1);
    while (c->e[k]) {
        gram_entry *e = c->e[k];
        if (e->rule == r && e->state == s && e->aux == a) return e;
        k = (k + 1) & (c->cap - 1);
    }
    return NULL;
}

static int cache_insert(gram_masker *c, gram_entry *e) {
    if ((c->n + 1) * 2 > c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256;
        gram_entry **nv = calloc(nc, sizeof *nv);
        if (!nv) return -1;
        for (size_t i = 0; i < c->cap; i++)
            if (c->e[i]) {
                size_t k = key_hash(c->e[i]->rule, c->e[i]->state, c->e[i]->aux) & (nc - 1);
                while (nv[k]) k = (k + 1) & (nc - 1);
                nv[k] = c->e[i];
            }
        free(c->e);
        c->e = nv;
        c->cap = nc;
    }
    size_t k = key_hash(e->rule, e->state, e->aux) & (c->cap - 1);
    while (c->e[k]) k = (k + 1) & (c->cap - 1);
    c->e[k] = e;
    c->n++;
    return 0;
}

/* ---- cache keys ------------------------------------------------------------------------ */

/* An OBJ frame inside a key (a key DFA state, finished or not). */
static int key_frame(const gram_grammar *g, gram_frame f) {
    const gram_rule *R = &g->rules[f.rule];
    if (R->kind != GRAM_OBJ) return 0;
    int32_t k = f.state - GRAM_OBJ_KEY;
    return k >= 0 && k < R->obj->key.n_states;
}

/* Inside a key of an object whose keys are free (any string may be a key),
 * every unfinished key is viable whatever was seen. */
static int free_key_frame(const gram_grammar *g, gram_frame f) {
    if (!key_frame(g, f)) return 0;
    const gram_obj *o = g->rules[f.rule].obj;
    return o->keys_free && o->key.label[f.state - GRAM_OBJ_KEY] < 0;
}

/* A key frame whose walk treats every key end as a boundary (kpop) decided
 * at mask time with the real aux: free keys, and objects that track
 * undeclared keys (the key text and the keys seen are not in the cache key). */
static int boundary_key_frame(const gram_grammar *g, gram_frame f) {
    return key_frame(g, f) && (g->rules[f.rule].obj->keys_free || g->rules[f.rule].obj->track_keys);
}

/* Canonical aux for a frame's cache key: what the frame's walk depends on.
 * Counted strings: distances to the bounds, capped at the longest token. */
static int32_t canon_aux(const gram_grammar *g, const gram_vocab *v, gram_frame f) {
    const gram_rule *R = &g->rules[f.rule];
    if (free_key_frame(g, f)) return 0;
    if (boundary_key_frame(g, f)) return gram_aux_base(g, f.aux);
    if (!R->counted || f.state == 0) return f.aux;
    /* positions further than a token plus the longest remaining run from a
     * bound behave alike */
    long T = v->max_len + 1 + R->cp_span;
    long count = f.aux >> 4;
    long dm = R->min_count - count;
    if (dm < 0) dm = 0;
    if (dm > T) dm = T;
    long dx = R->max_count < 0 ? -1 : R->max_count - count;
    if (dx > T) dx = T;
    if (T > 2000) return f.aux; /* exact keys */
    return (int32_t)((f.aux & 15) + 16 * dm + 16 * 2048 * (dx + 1));
}

/* ---- the fill walk ---------------------------------------------------------------------- */

/* one byte of a leaf rule (no calls), as the matcher steps it */
static inline int leaf_step(const gram_rule *R, int32_t *state, int32_t *aux, uint8_t b) {
    if (R->counted) return gram_counted_step(R, state, aux, b);
    int32_t t = gram_dfa_next(&R->fa, *state, b);
    if (t < 0) return 0;
    *state = t;
    return 1;
}

typedef struct {
    const gram_vocab *v;
    uint32_t *acc;   /* accepted bitset being built */
    int n_acc;
    gram_ivec pop;
    gram_ivec kpop;  /* boundary key frames: (trie node, key state) where a key ends */
    gram_ivec rk;    /* trie nodes whose subtrees are decided token by token at mask time */
    int free_key;    /* the fill's frame is a free-key frame: do not look at aux */
    int root_key;    /* the fill's frame is a boundary key frame */
    int32_t root_rule;
    int inexact;     /* walking on after an undeclared key that aux does not list yet */
    uint64_t *words; /* (max n_words) scratch for gram_obj_key_done */
} fill_ctx;

static void mark_tokens(fill_ctx *F, int32_t node) {
    const gram_vocab *v = F->v;
    for (int k = v->tok_off[node]; k < v->tok_off[node + 1]; k++) {
        int32_t id = v->toks[k];
        if (!(F->acc[id >> 5] >> (id & 31) & 1)) {
            F->acc[id >> 5] |= 1u << (id & 31);
            F->n_acc++;
        }
    }
}

/* The key text: text, then the token bytes from below trie node `from` down
 * to `to`.  create: make texts that do not exist yet; else -1 when one is
 * missing (no key with that text was ever seen). */
static int32_t key_text(gram_grammar *g, const gram_vocab *v, int32_t text, int32_t from, int32_t to, int create) {
    uint8_t path[GRAM_TOKEN_MAX];
    int n = 0;
    for (int32_t x = to; x != from && x > 0 && n < GRAM_TOKEN_MAX; x = v->npar[x]) path[n++] = v->nbyte[x];
    while (n-- > 0 && text >= 0) text = create ? gram_text_child(g, text, path[n]) : gram_text_find(g, text, path[n]);
    return text;
}

static int dispatch(fill_ctx *F, gram_matcher *m, int32_t node, int32_t set);

/* A leaf frame (string, number, literal) at (state, aux) over parent:
 * direct DFA steps inside the frame; where the frame may end, the parent
 * takes the byte (or, when the parent is the cache-fill context, the node
 * becomes a pop point). */
static int walk_leaf(fill_ctx *F, gram_matcher *m, const gram_rule *R, int32_t node, int32_t state, int32_t aux,
                     int32_t parent, int q) {
    const gram_vocab *v = F->v;
    int accepting = R->fa.label[state] >= 0;
    int32_t pset = -1;
    if (node == 0 && univ_state(&R->fa, state, &v->content)) {
        /* inside a string, between characters, far from any length bound:
         * every quote-free token that is valid content is in; walk the rest */
        long count = aux >> 4;
        if (!R->counted || R->max_count < 0 || R->max_count - count > v->max_len + R->cp_span) {
            for (int w = 0; w < (v->n_vocab + 31) / 32; w++) F->acc[w] |= v->u_bits[w];
            F->n_acc = v->n_vocab;
            q = 1;
        }
    }
    for (int32_t c = node + 1; c < v->nend[node]; c = v->nend[c]) {
        if (q && !v->qsub[c]) continue;
        uint8_t b = v->nbyte[c];
        if (accepting && parent != GRAM_BOTTOM) {
            if (parent == GRAM_CTX) {
                if (gram_ivec_push(&F->pop, c)) return -1;
            } else {
                if (pset < 0) pset = gram_set_of_node(m, parent);
                int popped;
                int32_t t = gram_set_step(m, pset, b, &popped);
                if (gram_matcher_oom(m)) return -1;
                if (popped && gram_ivec_push(&F->pop, c)) return -1;
                if (t) {
                    mark_tokens(F, c);
                    if (v->nend[c] > c + 1 && dispatch(F, m, c, t)) return -1;
                }
            }
        }
        int32_t s2 = state, a2 = aux;
        if (!leaf_step(R, &s2, &a2, b)) continue;
        mark_tokens(F, c);
        if (v->nend[c] > c + 1 && walk_leaf(F, m, R, c, s2, a2, parent, q)) return -1;
    }
    return 0;
}

static int walk_set(fill_ctx *F, gram_matcher *m, int32_t node, int32_t set);

/* After a finished key whose token goes on (below trie node c): ':' and the
 * value, in the walk's configuration.  key: the key's text id when known
 * (0: an undeclared key not added to aux, so the walk below is inexact about
 * that key and defers any further undeclared key end to the token check). */
static int after_key(fill_ctx *F, gram_matcher *m, int32_t rule, int32_t c, int32_t t, int32_t aux, int32_t parent,
                     int32_t key) {
    const gram_vocab *v = F->v;
    gram_grammar *g = (gram_grammar *)gram_matcher_grammar(m);
    const gram_obj *o = g->rules[rule].obj;
    int32_t L = o->key.label[t];
    if (v->nend[c] <= c + 1) return 0;
    if (g->ws_flexible) {
        /* whitespace may come before ':': the general path, with the key's full text in aux */
        int32_t a = aux;
        if (o->track_keys) {
            if (!key) return gram_ivec_push(&F->rk, c) ? -1 : 0;
            a = gram_aux_with_prefix(g, aux, key);
            if (a < 0) return -1;
        }
        int32_t x = gram_node_make(m, (gram_frame){rule, GRAM_OBJ_KEY + t, a}, parent);
        return x < 0 ? -1 : walk_set(F, m, c, gram_set_of_node(m, x));
    }
    for (int32_t d = c + 1; d < v->nend[c]; d = v->nend[d]) {
        if (v->nbyte[d] != ':') continue;
        int32_t va = gram_obj_key_done(g, o, aux, L, key, F->words);
        if (va == -1) return -1;
        if (va < 0) return 0;
        int32_t x = gram_node_make(m, (gram_frame){rule, GRAM_OBJ_KEY + o->key.n_states + L, va}, parent);
        if (x < 0) return -1;
        mark_tokens(F, d);
        int save = F->inexact;
        if (o->track_keys && L >= o->n_decl && !key) F->inexact = 1;
        int rc = v->nend[d] > d + 1 ? dispatch(F, m, d, gram_set_of_node(m, x)) : 0;
        F->inexact = save;
        if (rc) return -1;
    }
    return 0;
}

/* An object frame inside a key (state k, aux) below trie node `node`;
 * aux's prefix is the key text up to base (a trie node above or at node).
 * In a boundary key frame of the fill itself every key end is a kpop; in
 * other frames aux is real and key ends are decided here. */
static int walk_key(fill_ctx *F, gram_matcher *m, int32_t rule, int32_t node, int32_t k, int32_t aux, int32_t parent,
                    int q, int32_t base) {
    const gram_vocab *v = F->v;
    gram_grammar *g = (gram_grammar *)gram_matcher_grammar(m);
    const gram_rule *R = &g->rules[rule];
    const gram_obj *o = R->obj;
    int root = F->root_key && rule == F->root_rule && parent == GRAM_CTX;
    if (o->key.label[k] >= 0) {
        /* a finished key: the fill decides at mask time; elsewhere aux holds its whole text */
        if (root) return gram_ivec_push(&F->kpop, node) || gram_ivec_push(&F->kpop, k) ? -1 : 0;
        int32_t x = gram_node_make(m, (gram_frame){rule, GRAM_OBJ_KEY + k, aux}, parent);
        return x < 0 ? -1 : walk_set(F, m, node, gram_set_of_node(m, x));
    }
    int free_mode = root && F->free_key;
    if (free_mode && node == 0 && univ_state(&o->key, k, &v->content)) {
        /* every quote-free token that is valid key content stays inside the key */
        for (int w = 0; w < (v->n_vocab + 31) / 32; w++) F->acc[w] |= v->u_bits[w];
        F->n_acc = v->n_vocab;
        q = 1;
    }
    const gram_aux *a = gram_aux_get(g, aux);
    for (int32_t c = node + 1; c < v->nend[node]; c = v->nend[c]) {
        if (q && !v->qsub[c]) continue;
        int32_t t = gram_dfa_next(&o->key, k, v->nbyte[c]);
        if (t < 0) continue;
        int32_t L = o->key.label[t];
        if (L >= 0) {
            if (root) {
                if (gram_ivec_push(&F->kpop, c) || gram_ivec_push(&F->kpop, t)) return -1;
                continue;
            }
            if (!gram_obj_label_ok(g, o, L, aux)) continue;
            int32_t key = 0;
            if (o->track_keys && L >= o->n_decl) {
                if (F->inexact) {
                    /* aux may lack a key this token already finished */
                    if (gram_ivec_push(&F->rk, c)) return -1;
                    continue;
                }
                if (a->keys) {
                    int32_t text = key_text(g, v, a->prefix, base, c, 0);
                    if (text >= 0 && gram_keyset_has(g, a->keys, text)) continue; /* seen: not again */
                }
                if (g->ws_flexible && v->nend[c] > c + 1) {
                    key = key_text(g, v, a->prefix, base, c, 1);
                    if (key < 0) return -1;
                }
            }
            mark_tokens(F, c);
            if (after_key(F, m, rule, c, t, aux, parent, key)) return -1;
            continue;
        }
        if (!free_mode) {
            if (!gram_obj_viable(g, o, t, aux)) continue;
            /* few completions left: whether one is still unseen depends on the keys seen */
            if (o->track_keys && o->u_cnt[t] < GRAM_U_INF && (root || a->keys || F->inexact)) {
                if (gram_ivec_push(&F->rk, c)) return -1;
                continue;
            }
        }
        mark_tokens(F, c);
        if (v->nend[c] > c + 1 && walk_key(F, m, rule, c, t, aux, parent, q, base)) return -1;
    }
    return 0;
}

/* Any configuration: memoised set steps. */
static int walk_set(fill_ctx *F, gram_matcher *m, int32_t node, int32_t set) {
    const gram_vocab *v = F->v;
    for (int32_t c = node + 1; c < v->nend[node]; c = v->nend[c]) {
        int popped;
        int32_t t = gram_set_step(m, set, v->nbyte[c], &popped);
        if (gram_matcher_oom(m)) return -1;
        if (popped && gram_ivec_push(&F->pop, c)) return -1;
        if (!t) continue;
        mark_tokens(F, c);
        if (v->nend[c] > c + 1 && dispatch(F, m, c, t)) return -1;
    }
    return 0;
}

/* Walk the subtree below node from configuration set, on the fastest path
 * the configuration allows. */
static int dispatch(fill_ctx *F, gram_matcher *m, int32_t node, int32_t set) {
    int n;
    const int32_t *items = gram_set_items(m, set, &n);
    if (n == 1) {
        gram_node nd = *gram_node_get(m, items[0]);
        const gram_grammar *g = gram_matcher_grammar(m);
        const gram_rule *R = &g->rules[nd.f.rule];
        if (R->kind == GRAM_FA && R->leaf) return walk_leaf(F, m, R, node, nd.f.state, nd.f.aux, nd.parent, 0);
        if (key_frame(g, nd.f))
            return walk_key(F, m, nd.f.rule, node, nd.f.state - GRAM_OBJ_KEY, nd.f.aux, nd.parent, 0, node);
    }
    return walk_set(F, m, node, set);
}

static int cmp_pop(const void *a, const void *b, void *ctx) {
    const gram_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int bx = v->nbyte[x], by = v->nbyte[y];
    if (bx != by) return bx - by;
    return x < y ? -1 : x > y;
}

static int32_t *ivec_take(gram_ivec *a) {
    int32_t *v = a->v;
    a->v = NULL;
    a->n = a->cap = 0;
    return v;
}


static gram_entry *fill_entry(gram_masker *c, gram_matcher *m, gram_frame f, int32_t caux, uint32_t *scratch,
                              uint64_t *words) {
    const gram_grammar *g = c->g;
    const gram_vocab *v = c->v;
    fill_ctx F = {.v = v, .acc = scratch, .free_key = free_key_frame(g, f), .root_key = boundary_key_frame(g, f),
                  .root_rule = f.rule, .words = words};
    memset(scratch, 0, (size_t)c->n_words * sizeof *scratch);
    /* the walk sees the canonical aux only (boundary key frames: what the cache key keeps) */
    gram_frame cf = f;
    if (F.root_key) cf.aux = F.free_key ? f.aux : caux;
    int32_t x = gram_node_make(m, cf, GRAM_CTX);
    int rc = x < 0 ? -1 : dispatch(&F, m, 0, gram_set_of_node(m, x));
    if (gram_matcher_oom(m)) rc = -1;
    gram_entry *e = calloc(1, sizeof *e);
    if (rc || !e) {
        free(F.pop.v);
        free(F.kpop.v);
        free(F.rk.v);
        free(e);
        return NULL;
    }
    e->n_kpop = F.kpop.n / 2;
    e->kpop = ivec_take(&F.kpop);
    /* group by key state (insertion sort by the state: few distinct states) */
    for (int i = 1; i < e->n_kpop; i++) {
        int32_t n0 = e->kpop[2 * i], k0 = e->kpop[2 * i + 1];
        int j = i;
        while (j > 0 && e->kpop[2 * (j - 1) + 1] > k0) {
            e->kpop[2 * j] = e->kpop[2 * (j - 1)];
            e->kpop[2 * j + 1] = e->kpop[2 * (j - 1) + 1];
            j--;
        }
        e->kpop[2 * j] = n0;
        e->kpop[2 * j + 1] = k0;
    }
    e->n_rk = F.rk.n;
    e->rk = ivec_take(&F.rk);
    e->rule = f.rule;
    e->state = f.state;
    e->aux = caux;
    if (F.n_acc > v->n_vocab / 32) {
        e->bits = malloc((size_t)c->n_words * sizeof *e->bits);
        if (e->bits) memcpy(e->bits, scratch, (size_t)c->n_words * sizeof *e->bits);
    } else {
        e->ids = malloc(((size_t)F.n_acc + 1) * sizeof *e->ids);
        if (e->ids)
            for (int w = 0; w < c->n_words; w++)
                for (uint32_t bits = scratch[w]; bits; bits &= bits - 1) e->ids[e->n_ids++] = w * 32 + __builtin_ctz(bits);
    }
    if (!e->bits && !e->ids) {
        free(F.pop.v);
        entry_free(e);
        return NULL;
    }
    if (F.pop.n) {
        qsort_r(F.pop.v, (size_t)F.pop.n, sizeof *F.pop.v, cmp_pop, (void *)v);
        /* drop duplicates */
        int w = 0;
        for (int i = 0; i < F.pop.n; i++)
            if (!w || F.pop.v[w - 1] != F.pop.v[i]) F.pop.v[w++] = F.pop.v[i];
        F.pop.n = w;
        e->has_pop = 1;
    }
    e->n_pop = F.pop.n;
    e->pop = ivec_take(&F.pop);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < e->n_pop && v->nbyte[e->pop[k]] < b) k++;
        e->grp[b] = k;
    }
    e->grp[256] = e->n_pop;
    return e;
}

/* ---- masks ---------------------------------------------------------------------------------- */

static void set_node_tokens(const gram_vocab *v, uint32_t *bits, int32_t node) {
    for (int k = v->tok_off[node]; k < v->tok_off[node + 1]; k++) bits[v->toks[k] >> 5] |= 1u << (v->toks[k] & 31);
}

/* The tokens at and below trie nodes rk[0..n), each fed whole to frame x's
 * configuration: the exact answer where the cached walk could not decide. */
static int mask_by_tokens(gram_matcher *m, const gram_vocab *v, int32_t x, const int32_t *rk, int n, uint32_t *bits) {
    int32_t start = gram_set_of_node(m, x);
    for (int i = 0; i < n; i++)
        for (int32_t node = rk[i]; node < v->nend[rk[i]]; node++)
            for (int k = v->tok_off[node]; k < v->tok_off[node + 1]; k++) {
                int32_t id = v->toks[k];
                if (bits[id >> 5] >> (id & 31) & 1) continue;
                const char *b = v->bytes + v->off[id];
                int len = v->off[id + 1] - v->off[id], popped;
                int32_t s = start;
                for (int j = 0; j < len && s; j++) s = gram_set_step(m, s, (uint8_t)b[j], &popped);
                if (gram_matcher_oom(m)) return -1;
                if (s) bits[id >> 5] |= 1u << (id & 31);
            }
    return 0;
}

/* Boundary key frames: the key ends the entry recorded, checked against the
 * frame's real aux (seen keys, count, the key's text), then ':' and on. */
static int mask_key_ends(gram_grammar *g, const gram_vocab *v, gram_matcher *m, const gram_entry *e, gram_node nd,
                         fill_ctx *R) {
    const gram_obj *o = g->rules[nd.f.rule].obj;
    const gram_aux *a = gram_aux_get(g, nd.f.aux);
    int32_t ks_prev = -1, ok = 0, L = -1;
    for (int k = 0; k < e->n_kpop; k++) {
        int32_t node = e->kpop[2 * k], ks = e->kpop[2 * k + 1];
        if (ks != ks_prev) {
            ks_prev = ks;
            L = o->key.label[ks];
            ok = gram_obj_label_ok(g, o, L, nd.f.aux);
        }
        if (!ok) continue;
        int32_t key = 0;
        if (o->track_keys && L >= o->n_decl) {
            if (a->keys) {
                int32_t text = key_text(g, v, a->prefix, 0, node, 0);
                if (text >= 0 && gram_keyset_has(g, a->keys, text)) continue;
            }
            if (g->ws_flexible && v->nend[node] > node + 1) {
                key = key_text(g, v, a->prefix, 0, node, 1);
                if (key < 0) return -1;
            }
        }
        set_node_tokens(v, R->acc, node);
        if (after_key(R, m, nd.f.rule, node, ks, nd.f.aux, nd.parent, key)) return -1;
    }
    return 0;
}

int gram_mask(gram_masker *mk, gram_matcher *m, uint32_t *bits, uint32_t *scratch) {
    gram_grammar *g = (gram_grammar *)mk->g; /* interning is internally synchronised */
    const gram_vocab *v = mk->v;
    if (gram_matcher_grammar(m) != mk->g) return -1;
    int n_words = mk->n_words;
    memset(bits, 0, (size_t)n_words * sizeof *bits);
    int32_t set = gram_matcher_state(m);
    uint64_t *words = gram_matcher_words(m);
    int n;
    gram_set_items(m, set, &n);
    for (int i = 0; i < n; i++) {
        int32_t x = gram_set_items(m, set, &n)[i]; /* the items array may move while we work */
        gram_node nd = *gram_node_get(m, x);
        int32_t caux = canon_aux(g, v, nd.f);
        pthread_mutex_lock(&mk->lock);
        gram_entry *e = cache_find(mk, nd.f.rule, nd.f.state, caux);
        pthread_mutex_unlock(&mk->lock);
        if (!e) {
            e = fill_entry(mk, m, nd.f, caux, scratch, words);
            if (!e) return -1;
            pthread_mutex_lock(&mk->lock);
            gram_entry *o = cache_find(mk, nd.f.rule, nd.f.state, caux);
            if (o || cache_insert(mk, e)) {
                entry_free(e);
                e = o;
            }
            pthread_mutex_unlock(&mk->lock);
            if (!e) return -1;
        }
        if (e->bits)
            for (int w = 0; w < n_words; w++) bits[w] |= e->bits[w];
        else
            for (int k = 0; k < e->n_ids; k++) bits[e->ids[k] >> 5] |= 1u << (e->ids[k] & 31);
        fill_ctx R = {.v = v, .acc = bits, .words = words};
        if (e->n_kpop && mask_key_ends(g, v, m, e, nd, &R)) goto fail;
        if (e->n_pop && nd.parent >= 0) {
            int32_t ctx = gram_set_of_node(m, nd.parent);
            for (int b = 0; b < 256; b++) {
                if (e->grp[b] == e->grp[b + 1]) continue;
                int popped;
                int32_t y = gram_set_step(m, ctx, (uint8_t)b, &popped);
                if (!y) continue;
                for (int k = e->grp[b]; k < e->grp[b + 1]; k++) {
                    int32_t node = e->pop[k];
                    set_node_tokens(v, bits, node);
                    if (v->nend[node] > node + 1 && dispatch(&R, m, node, y)) goto fail;
                }
            }
        }
        if (e->n_rk && mask_by_tokens(m, v, x, e->rk, e->n_rk, bits)) goto fail;
        if (R.rk.n && mask_by_tokens(m, v, x, R.rk.v, R.rk.n, bits)) goto fail;
        free(R.pop.v);
        free(R.kpop.v);
        free(R.rk.v);
        if (gram_matcher_oom(m)) return -1;
        continue;
    fail:
        free(R.pop.v);
        free(R.kpop.v);
        free(R.rk.v);
        return -1;
    }
    if (gram_set_accepting(m, set))
        for (int i = 0; i < v->n_eog; i++) bits[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
    for (int w = 0; w < n_words; w++)
        if (bits[w]) return 1;
    return 0;
}

void gram_mask_apply(const uint32_t *bits, float *logits, int n_vocab) {
    int full = n_vocab / 32;
    for (int w = 0; w < full; w++) {
        uint32_t b = bits[w];
        float *l = logits + (size_t)w * 32;
        if (b == 0xFFFFFFFFu) continue;
        if (b == 0) {
            for (int i = 0; i < 32; i++) l[i] = -INFINITY;
            continue;
        }
        for (uint32_t z = ~b; z; z &= z - 1) l[__builtin_ctz(z)] = -INFINITY;
    }
    for (int i = full * 32; i < n_vocab; i++)
        if (!(bits[i >> 5] >> (i & 31) & 1)) logits[i] = -INFINITY;
}

int gram_mask_ids(const uint32_t *bits, int n_vocab, int32_t *ids) {
    int k = 0, nw = (n_vocab + 31) / 32;
    for (int w = 0; w < nw; w++)
        for (uint32_t b = bits[w]; b; b &= b - 1) ids[k++] = w * 32 + __builtin_ctz(b);
    return k;
}

/* ---- forced tokens ---------------------------------------------------------------------------- */

int gram_forced_tokens(const gram_masker *mk, gram_matcher *m, int32_t *ids, int cap) {
    const gram_vocab *v = mk->v;
    char F[256];
    int nf = gram_matcher_forced(m, F, (int)sizeof F);
    if (!nf || !v) return 0;
    /* is the value complete after F, with nothing allowed to follow? */
    int32_t save = gram_matcher_state(m);
    int done = 0;
    if (!gram_matcher_feed(m, F, (size_t)nf)) done = gram_matcher_accepting(m) && !gram_matcher_can_continue(m);
    gram_matcher_set_state(m, save);
    int n = 0, pos = 0;
    while (pos < nf && n < cap) {
        /* longest token that is a prefix of F[pos..] */
        int32_t node = 0, best = -1;
        int best_len = 0;
        for (int d = pos; d < nf; d++) {
            int32_t c = node + 1, found = -1;
            for (; c < v->nend[node]; c = v->nend[c])
                if (v->nbyte[c] == (uint8_t)F[d]) {
                    found = c;
                    break;
                }
            if (found < 0) break;
            node = found;
            if (v->tok_off[node + 1] > v->tok_off[node]) {
                best = v->toks[v->tok_off[node]];
                best_len = d + 1 - pos;
            }
        }
        if (best < 0) break;
        /* a token reaching the end of F might be cut short of a longer one */
        if (pos + best_len == nf && !done) break;
        ids[n++] = best;
        pos += best_len;
    }
    return n;
}

int gram_accept_token(const gram_vocab *v, gram_matcher *m, int32_t id) {
    if (gram_is_eog(v, id)) return gram_matcher_accepting(m) ? 0 : -1;
    int len;
    const char *b = gram_vocab_bytes(v, id, &len);
    if (!b || !len) return -1;
    return gram_matcher_feed(m, b, (size_t)len);
}
