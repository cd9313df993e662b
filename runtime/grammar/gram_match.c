/*
 * gram_match.c — the byte-level matcher over a compiled grammar (gram.h).
 *
 * A configuration is a set of stacks.  Stacks are hash-consed linked lists
 * of frames (node = frame + parent), so equal stacks are one node id and a
 * set of stacks is a sorted array of node ids, itself interned.  Stepping a
 * set by a byte is memoised per (set, byte): after warm-up the matcher is a
 * DFA over configurations built on demand, and the mask code walks the token
 * trie with one hash lookup per byte.
 *
 * Epsilon moves (calling a rule, returning from a finished one) are taken
 * lazily when a byte asks for them: a frame whose state calls rule R tries
 * R's first byte; a frame in an accepting state may pop and let its parent
 * try the byte.  These moves go through an explicit work list, never the C
 * stack, and stacks are at most GRAM_STACK_MAX frames deep (a value nested
 * deeper is not accepted: gram_matcher_depth_hit says when that is why).
 * No rule matches the empty string and no rule calls itself before
 * consuming a byte (gram_compile checks), so every step terminates.
 *
 * Objects: an OBJ frame's aux (gram_aux) holds the declared keys seen, the
 * property count, the undeclared keys seen and the text of the key being
 * read, so no key is ever accepted twice.
 *
 * Memory: the stores grow while a generation explores new configurations
 * (amortised doubling); a steady-state token loop finds everything in them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_match.h"

struct gram_matcher {
    const gram_grammar *g;
    /* nodes */
    gram_node *nodes;
    uint64_t *node_hash;
    uint32_t *node_seen; /* (cap_nodes) step stamp: node already stepped by this byte */
    int n_nodes, cap_nodes;
    int32_t *ntab;
    size_t ntab_cap;
    /* sets: items[off[i] .. off[i+1]) */
    int32_t *items, *off;
    uint64_t *set_hash;
    uint8_t *set_flags; /* bit0 acc known, bit1 accepting, bit2 cont known, bit3 can continue */
    int n_sets, cap_sets, n_items, cap_items;
    int32_t *stab;
    size_t stab_cap;
    /* memo (set, byte) → (result << 1 | popped) */
    uint64_t *mkey;
    int32_t *mval;
    size_t mcap, mn;
    /* one step: the nodes still to step, the frames it produced */
    gram_ivec work, out;
    uint32_t stamp;
    int popped;
    uint64_t *words; /* (max n_words) */
    int max_words;
    int32_t cur, start;
    int oom, depth_hit;
};

/* ---- nodes ---------------------------------------------------------------------------- */

static uint64_t node_hash_of(gram_frame f, int32_t parent) {
    uint64_t h = (uint64_t)(uint32_t)f.rule * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)(uint32_t)f.state * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)(uint32_t)f.aux * 0x165667b19e3779f9ull;
    h ^= (uint64_t)(uint32_t)parent * 0x27d4eb2f165667c5ull;
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

int32_t gram_node_make(gram_matcher *m, gram_frame f, int32_t parent) {
    int32_t depth = parent >= 0 ? m->nodes[parent].depth + 1 : 1;
    if (depth > GRAM_STACK_MAX) {
        m->depth_hit = 1;
        return -4;
    }
    uint64_t h = node_hash_of(f, parent);
    if ((size_t)(m->n_nodes + 1) * 2 > m->ntab_cap) {
        size_t nc = m->ntab_cap ? m->ntab_cap * 2 : 4096;
        int32_t *nt = malloc(nc * sizeof *nt);
        if (!nt) goto oom;
        for (size_t i = 0; i < nc; i++) nt[i] = -1;
        for (int i = 0; i < m->n_nodes; i++) {
            size_t k = m->node_hash[i] & (nc - 1);
            while (nt[k] >= 0) k = (k + 1) & (nc - 1);
            nt[k] = i;
        }
        free(m->ntab);
        m->ntab = nt;
        m->ntab_cap = nc;
    }
    size_t k = h & (m->ntab_cap - 1);
    for (;;) {
        int32_t i = m->ntab[k];
        if (i < 0) break;
        const gram_node *n = &m->nodes[i];
        if (m->node_hash[i] == h && n->parent == parent && n->f.rule == f.rule && n->f.state == f.state &&
            n->f.aux == f.aux)
            return i;
        k = (k + 1) & (m->ntab_cap - 1);
    }
    if (m->n_nodes == m->cap_nodes) {
        int nc = m->cap_nodes ? m->cap_nodes * 2 : 2048;
        gram_node *nn = realloc(m->nodes, (size_t)nc * sizeof *nn);
        if (!nn) goto oom;
        m->nodes = nn;
        uint64_t *nh = realloc(m->node_hash, (size_t)nc * sizeof *nh);
        if (!nh) goto oom;
        m->node_hash = nh;
        uint32_t *ns = realloc(m->node_seen, (size_t)nc * sizeof *ns);
        if (!ns) goto oom;
        m->node_seen = ns;
        m->cap_nodes = nc;
    }
    m->nodes[m->n_nodes] = (gram_node){f, parent, depth};
    m->node_hash[m->n_nodes] = h;
    m->node_seen[m->n_nodes] = 0;
    m->ntab[k] = m->n_nodes;
    return m->n_nodes++;
oom:
    m->oom = 1;
    return -3;
}

const gram_node *gram_node_get(const gram_matcher *m, int32_t node) { return &m->nodes[node]; }

/* ---- sets ------------------------------------------------------------------------------ */

static uint64_t set_hash_of(const int32_t *v, int n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)v[i];
        h *= 0x100000001b3ull;
        h ^= h >> 32;
    }
    return h;
}

static int32_t set_intern(gram_matcher *m, const int32_t *v, int n) {
    uint64_t h = set_hash_of(v, n);
    if ((size_t)(m->n_sets + 1) * 2 > m->stab_cap) {
        size_t nc = m->stab_cap ? m->stab_cap * 2 : 1024;
        int32_t *nt = malloc(nc * sizeof *nt);
        if (!nt) goto oom;
        for (size_t i = 0; i < nc; i++) nt[i] = -1;
        for (int i = 0; i < m->n_sets; i++) {
            size_t k = m->set_hash[i] & (nc - 1);
            while (nt[k] >= 0) k = (k + 1) & (nc - 1);
            nt[k] = i;
        }
        free(m->stab);
        m->stab = nt;
        m->stab_cap = nc;
    }
    size_t k = h & (m->stab_cap - 1);
    for (;;) {
        int32_t i = m->stab[k];
        if (i < 0) break;
        if (m->set_hash[i] == h && m->off[i + 1] - m->off[i] == n &&
            (!n || !memcmp(&m->items[m->off[i]], v, (size_t)n * sizeof *v)))
            return i;
        k = (k + 1) & (m->stab_cap - 1);
    }
    if (m->n_sets + 2 > m->cap_sets) {
        int nc = m->cap_sets ? m->cap_sets * 2 : 1024;
        int32_t *no = realloc(m->off, (size_t)(nc + 1) * sizeof *no);
        if (!no) goto oom;
        m->off = no;
        uint64_t *nh = realloc(m->set_hash, (size_t)nc * sizeof *nh);
        if (!nh) goto oom;
        m->set_hash = nh;
        uint8_t *nf = realloc(m->set_flags, (size_t)nc);
        if (!nf) goto oom;
        m->set_flags = nf;
        m->cap_sets = nc;
    }
    if (m->n_items + n > m->cap_items) {
        int nc = m->cap_items ? m->cap_items * 2 : 4096;
        while (nc < m->n_items + n) nc *= 2;
        int32_t *ni = realloc(m->items, (size_t)nc * sizeof *ni);
        if (!ni) goto oom;
        m->items = ni;
        m->cap_items = nc;
    }
    if (m->n_sets == 0) m->off[0] = 0;
    if (n) memcpy(&m->items[m->n_items], v, (size_t)n * sizeof *v);
    m->n_items += n;
    m->off[m->n_sets + 1] = m->n_items;
    m->set_hash[m->n_sets] = h;
    m->set_flags[m->n_sets] = 0;
    m->stab[k] = m->n_sets;
    return m->n_sets++;
oom:
    m->oom = 1;
    return 0;
}

const int32_t *gram_set_items(const gram_matcher *m, int32_t set, int *n) {
    *n = m->off[set + 1] - m->off[set];
    return &m->items[m->off[set]];
}

int32_t gram_set_of_node(gram_matcher *m, int32_t node) { return set_intern(m, &node, 1); }

/* ---- objects ---------------------------------------------------------------------------- */

static const uint64_t *aux_words(const gram_grammar *g, int32_t aux) { return gram_aux_get(g, aux)->words; }

static inline int popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

static int obj_missing_required(const gram_obj *o, const uint64_t *seen) {
    int n = 0;
    for (int w = 0; w < o->n_words; w++) n += popcount64(o->required[w] & ~seen[w]);
    return n;
}

/* ---- ordered objects (generation semantics) ----------------------------------------------
 *
 * Declared label i may come only after every declared label seen (i > the
 * largest seen), undeclared labels only after the declared ones (seen bit
 * n_decl).  So a key may come only if the object can still close after it:
 * every required or depended-on key not yet seen must be able to follow it
 * (a later label), the keys it forces must fit maxProperties, and enough
 * labels must remain for minProperties.  Without that check the mask could
 * lead into an object no token can finish. */

#define ORD_WORDS ((2048 + 1 + 63) / 64) /* MAX_DECL in gram_schema.c, plus the undeclared bit */

typedef struct {
    int lo;                     /* smallest declared label still allowed (n_decl: none) */
    int fmin;                   /* smallest forced label not seen (n_decl: none) */
    int n_forced;               /* forced labels not seen: required, and dependencies of seen keys */
    int count;                  /* properties so far (when tracked) */
    const uint64_t *seen;
    uint64_t forced[ORD_WORDS];
} ord_ctx;

static inline int bit_has(const uint64_t *w, int i) { return w[i / 64] >> (i % 64) & 1; }

/* add the dependencies of every label in `from` (transitively) to `to`, skipping seen ones */
static void ord_close_deps(const gram_obj *o, const uint64_t *seen, uint64_t *to) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < o->n_decl; i++) {
            if (!bit_has(to, i) && !bit_has(seen, i)) continue;
            for (int k = o->dep_off[i]; k < o->dep_off[i + 1]; k++) {
                int d = o->dep[k];
                if (!bit_has(seen, d) && !bit_has(to, d)) to[d / 64] |= 1ull << (d % 64), changed = 1;
            }
        }
    }
}

static void ord_make(const gram_grammar *g, const gram_obj *o, int32_t aux, ord_ctx *x) {
    const gram_aux *a = gram_aux_get(g, aux);
    const uint64_t *seen = a->words;
    int W = o->n_words;
    x->seen = seen;
    x->count = a->count;
    x->lo = 0;
    if (bit_has(seen, o->n_decl)) x->lo = o->n_decl;
    else
        for (int w = W - 1; w >= 0; w--)
            if (seen[w]) {
                x->lo = w * 64 + 63 - __builtin_clzll(seen[w]) + 1;
                break;
            }
    for (int w = 0; w < W; w++) x->forced[w] = o->required[w] & ~seen[w];
    if (o->has_deps) ord_close_deps(o, seen, x->forced);
    x->n_forced = 0;
    x->fmin = o->n_decl;
    for (int w = W - 1; w >= 0; w--)
        if (x->forced[w]) {
            x->n_forced += popcount64(x->forced[w]);
            x->fmin = w * 64 + __builtin_ctzll(x->forced[w]);
        }
}

/* may declared label i come next? */
static int ord_decl_ok(const gram_obj *o, const ord_ctx *x, int i) {
    if (i < x->lo || i >= o->n_decl || i > x->fmin || o->label_rule[i] < 0) return 0;
    int extra = x->n_forced - bit_has(x->forced, i);
    if (o->has_deps && o->dep_off[i + 1] > o->dep_off[i]) {
        /* what i itself forces must come after it */
        uint64_t mine[ORD_WORDS] = {0};
        uint64_t seen_i[ORD_WORDS];
        for (int w = 0; w < o->n_words; w++) seen_i[w] = x->seen[w] | x->forced[w];
        seen_i[i / 64] |= 1ull << (i % 64);
        for (int k = o->dep_off[i]; k < o->dep_off[i + 1]; k++) {
            int d = o->dep[k];
            if (!bit_has(seen_i, d)) mine[d / 64] |= 1ull << (d % 64);
        }
        ord_close_deps(o, seen_i, mine);
        for (int w = 0; w < o->n_words; w++) {
            if (!mine[w]) continue;
            if (w * 64 + __builtin_ctzll(mine[w]) < i) return 0;
            extra += popcount64(mine[w]);
        }
    }
    if (o->max_props >= 0 && x->count + 1 + extra > o->max_props) return 0;
    if (o->min_props > 0 && !o->undecl_any && x->count + 1 + o->avail_after[i] < o->min_props) return 0;
    return 1;
}

/* may an undeclared key come next? (nothing declared may follow it) */
static int ord_undecl_ok(const gram_obj *o, const ord_ctx *x) {
    return !x->n_forced && (o->max_props < 0 || x->count + 1 <= o->max_props);
}

/* some declared label in r (a reach set) may come next */
static int ord_reach_ok(const gram_obj *o, const ord_ctx *x, const uint64_t *r) {
    int hi = x->fmin < o->n_decl - 1 ? x->fmin : o->n_decl - 1;
    for (int w = x->lo / 64; w <= hi / 64 && x->lo <= hi; w++) {
        uint64_t b = r[w];
        if (w == x->lo / 64) b &= ~0ull << (x->lo % 64);
        if (w == hi / 64 && hi % 64 != 63) b &= (1ull << (hi % 64 + 1)) - 1;
        while (b) {
            int i = w * 64 + __builtin_ctzll(b);
            if (ord_decl_ok(o, x, i)) return 1;
            b &= b - 1;
        }
    }
    return 0;
}

/* Can the key DFA state t still end in a key this object accepts now?  An
 * undeclared key counts as possible whenever one is reachable (see
 * gram_obj_viable_exact for the seen keys). */
int gram_obj_viable(const gram_grammar *g, const gram_obj *o, int32_t t, int32_t aux) {
    if (o->ordered) {
        ord_ctx x;
        ord_make(g, o, aux, &x);
        return ord_reach_ok(o, &x, &o->reach[(size_t)t * o->n_words]) || (o->reach_undecl[t] && ord_undecl_ok(o, &x));
    }
    const uint64_t *seen = aux_words(g, aux);
    int count = gram_aux_get(g, aux)->count;
    const uint64_t *r = &o->reach[(size_t)t * o->n_words];
    if (o->max_props >= 0) {
        int room = o->max_props - count - obj_missing_required(o, seen);
        if (room < 1) {
            for (int w = 0; w < o->n_words; w++)
                if (r[w] & o->required[w] & ~seen[w]) return 1;
            return 0;
        }
    }
    if (o->reach_undecl[t]) return 1;
    for (int w = 0; w < o->n_words; w++)
        if (r[w] & ~seen[w]) return 1;
    return 0;
}

/* Undeclared completions from key state t after the key text `text`, not
 * yet seen: some remain?  Only asked where u_cnt[t] is finite. */
static int undecl_fresh(gram_grammar *g, const gram_obj *o, int32_t t, int32_t keys, int32_t text) {
    int n;
    const int32_t *ks = gram_keyset_items(g, keys, &n);
    if (o->u_cnt[t] > n) return 1;
    char pre[1024], kb[1024];
    size_t pl = gram_text_bytes(g, text, pre, sizeof pre);
    if (pl > sizeof pre) return 1; /* longer than any counted-finite key: not one of them */
    int taken = 0;
    for (int i = 0; i < n; i++) {
        size_t kl = gram_text_bytes(g, ks[i], kb, sizeof kb);
        if (kl > sizeof kb || kl < pl || memcmp(kb, pre, pl)) continue;
        int32_t s = t;
        for (size_t j = pl; j < kl && s >= 0; j++) s = gram_dfa_next(&o->key, s, (uint8_t)kb[j]);
        if (s >= 0 && o->key.label[s] >= o->n_decl && o->key.label[s] < o->n_labels && o->label_rule[o->key.label[s]] >= 0)
            taken++;
    }
    return o->u_cnt[t] > taken;
}

int gram_obj_viable_exact(gram_grammar *g, const gram_obj *o, int32_t t, int32_t aux, int32_t text) {
    const gram_aux *a = gram_aux_get(g, aux);
    const uint64_t *seen = a->words, *r = &o->reach[(size_t)t * o->n_words];
    if (o->ordered) {
        ord_ctx x;
        ord_make(g, o, aux, &x);
        if (ord_reach_ok(o, &x, r)) return 1;
        if (!o->reach_undecl[t] || !ord_undecl_ok(o, &x)) return 0;
        if (!o->track_keys || !a->keys || o->u_cnt[t] == GRAM_U_INF) return 1;
        return undecl_fresh(g, o, t, a->keys, text);
    }
    if (o->max_props >= 0 && o->max_props - a->count - obj_missing_required(o, seen) < 1) {
        for (int w = 0; w < o->n_words; w++)
            if (r[w] & o->required[w] & ~seen[w]) return 1;
        return 0;
    }
    for (int w = 0; w < o->n_words; w++)
        if (r[w] & ~seen[w]) return 1;
    if (!o->reach_undecl[t]) return 0;
    if (!o->track_keys || !a->keys || o->u_cnt[t] == GRAM_U_INF) return 1;
    return undecl_fresh(g, o, t, a->keys, text);
}

int gram_obj_label_ok(const gram_grammar *g, const gram_obj *o, int32_t L, int32_t aux) {
    if (L < 0 || L >= o->n_labels || o->label_rule[L] < 0) return 0;
    if (o->ordered) {
        ord_ctx x;
        ord_make(g, o, aux, &x);
        return L < o->n_decl ? ord_decl_ok(o, &x, L) : ord_undecl_ok(o, &x);
    }
    const uint64_t *seen = aux_words(g, aux);
    int is_req = 0;
    if (L < o->n_decl) {
        if (seen[L / 64] >> (L % 64) & 1) return 0;
        is_req = o->required[L / 64] >> (L % 64) & 1;
    }
    if (o->max_props >= 0 && !is_req) {
        int room = o->max_props - gram_aux_get(g, aux)->count - obj_missing_required(o, seen);
        if (room < 1) return 0;
    }
    return 1;
}

int32_t gram_obj_key_done(gram_grammar *g, const gram_obj *o, int32_t aux, int32_t L, int32_t key, uint64_t *scratch) {
    if (!gram_obj_label_ok(g, o, L, aux)) return -2;
    const gram_aux *a = gram_aux_get(g, aux);
    int32_t keys = a->keys;
    if (L >= o->n_decl && o->track_keys && key > 0) {
        if (gram_keyset_has(g, keys, key)) return -2; /* the same key twice */
        keys = gram_keyset_add(g, keys, key);
        if (keys < 0) return -1;
    }
    int undecl_bit = o->ordered && L >= o->n_decl; /* ordered: no declared key after this one */
    if (L >= o->n_decl && !o->track_count && keys == a->keys && !a->prefix &&
        (!undecl_bit || bit_has(a->words, o->n_decl)))
        return aux;
    for (int w = 0; w < o->n_words; w++) scratch[w] = a->words[w];
    if (L < o->n_decl) scratch[L / 64] |= 1ull << (L % 64);
    if (undecl_bit) scratch[o->n_decl / 64] |= 1ull << (o->n_decl % 64);
    int32_t cnt = a->count + (o->track_count ? 1 : 0);
    int32_t r = gram_aux_intern(g, scratch, o->n_words, cnt, keys, 0);
    return r < 0 ? -1 : r;
}

static int obj_close_ok(const gram_grammar *g, const gram_obj *o, int32_t aux) {
    const uint64_t *seen = aux_words(g, aux);
    if (obj_missing_required(o, seen)) return 0;
    if (o->min_props > 0 && gram_aux_get(g, aux)->count < o->min_props) return 0;
    for (int i = 0; i < o->n_decl; i++)
        if ((seen[i / 64] >> (i % 64) & 1) && o->dep_off[i + 1] > o->dep_off[i])
            for (int k = o->dep_off[i]; k < o->dep_off[i + 1]; k++) {
                int d = o->dep[k];
                if (!(seen[d / 64] >> (d % 64) & 1)) return 0;
            }
    return 1;
}

/* ---- stepping ------------------------------------------------------------------------------- */

static int32_t push_rule(gram_matcher *m, int32_t rule, int32_t parent) {
    return gram_node_make(m, (gram_frame){rule, 0, m->g->rules[rule].aux0}, parent);
}

static inline int first_has(const gram_rule *r, uint8_t b) { return r->first[b >> 3] >> (b & 7) & 1; }

/* x also takes this step's byte (a callee's first byte, a parent's after a pop) */
static void later(gram_matcher *m, int32_t x) {
    if (x >= 0 && gram_ivec_push(&m->work, x)) m->oom = 1;
}

static void pop_to(gram_matcher *m, int32_t parent) {
    if (parent == GRAM_BOTTOM) return; /* the value is complete: nothing may follow */
    if (parent == GRAM_CTX) {
        m->popped = 1;
        return;
    }
    later(m, parent);
}

static void emit(gram_matcher *m, gram_frame f, int32_t parent) {
    int32_t y = gram_node_make(m, f, parent);
    if (y >= 0 && gram_ivec_push(&m->out, y)) m->oom = 1;
}

/* the key text after one more key byte (0 when the object does not track keys) */
static int32_t key_text_next(gram_matcher *m, const gram_obj *o, int32_t aux, uint8_t b) {
    if (!o->track_keys) return 0;
    int32_t t = gram_text_child((gram_grammar *)m->g, gram_aux_get(m->g, aux)->prefix, b);
    if (t < 0) m->oom = 1;
    return t;
}

static void emit_key(gram_matcher *m, const gram_frame *f, int32_t parent, const gram_obj *o, int32_t t, uint8_t b) {
    gram_grammar *g = (gram_grammar *)m->g;
    int32_t text = key_text_next(m, o, f->aux, b);
    if (text < 0 || !gram_obj_viable_exact(g, o, t, f->aux, text)) return;
    int32_t naux = o->track_keys ? gram_aux_with_prefix(g, f->aux, text) : f->aux;
    if (naux < 0) {
        m->oom = 1;
        return;
    }
    emit(m, (gram_frame){f->rule, GRAM_OBJ_KEY + t, naux}, parent);
}

static void step_obj(gram_matcher *m, const gram_node *nd, uint8_t b) {
    gram_grammar *g = (gram_grammar *)m->g;
    gram_frame f = nd->f;
    int32_t parent = nd->parent;
    const gram_obj *o = g->rules[f.rule].obj;
    int32_t st = f.state, aux = f.aux;
    int nk = o->key.n_states;
    if (g->ws_flexible && st != GRAM_OBJ_OPEN && st != GRAM_OBJ_DONE) {
        int ws;
        int32_t base = gram_obj_base(o, st, &ws);
        if (b == ' ' || b == '\t' || b == '\n' || b == '\r') {
            /* which position: START, AFTER, COMMA, VAL(L), or a finished key */
            int32_t p = -1;
            if (base == GRAM_OBJ_START) p = 0;
            else if (base == GRAM_OBJ_AFTER) p = 1;
            else if (base == GRAM_OBJ_COMMA) p = 2;
            else if (base >= GRAM_OBJ_KEY + nk) p = 3 + (base - GRAM_OBJ_KEY - nk);
            else if (base >= GRAM_OBJ_KEY && o->key.label[base - GRAM_OBJ_KEY] >= 0) p = 3 + o->n_labels + (base - GRAM_OBJ_KEY);
            if (p >= 0 && ws < GRAM_WS_MAX)
                emit(m, (gram_frame){f.rule, GRAM_OBJ_KEY + nk + o->n_labels + p * GRAM_WS_MAX + ws, aux}, parent);
            if (base < GRAM_OBJ_KEY || base >= GRAM_OBJ_KEY + nk || o->key.label[base - GRAM_OBJ_KEY] >= 0) return;
        }
        st = base;
    }
    if (st == GRAM_OBJ_DONE) {
        pop_to(m, parent);
        return;
    }
    if (st == GRAM_OBJ_OPEN) {
        if (b == '{') emit(m, (gram_frame){f.rule, GRAM_OBJ_START, aux}, parent);
        return;
    }
    if (st == GRAM_OBJ_START || st == GRAM_OBJ_COMMA) {
        if (b == '"') {
            int32_t t = gram_dfa_next(&o->key, 0, b);
            if (t >= 0) emit_key(m, &f, parent, o, t, b);
        } else if (b == '}' && st == GRAM_OBJ_START && obj_close_ok(g, o, aux))
            emit(m, (gram_frame){f.rule, GRAM_OBJ_DONE, aux}, parent);
        return;
    }
    if (st == GRAM_OBJ_AFTER) {
        if (b == ',') {
            int32_t t = gram_dfa_next(&o->key, 0, '"');
            /* a comma only when some key can follow */
            if (t >= 0 && gram_obj_viable_exact(g, o, t, aux, 0)) emit(m, (gram_frame){f.rule, GRAM_OBJ_COMMA, aux}, parent);
        } else if (b == '}' && obj_close_ok(g, o, aux))
            emit(m, (gram_frame){f.rule, GRAM_OBJ_DONE, aux}, parent);
        return;
    }
    if (st < GRAM_OBJ_KEY + nk) {
        int32_t k = st - GRAM_OBJ_KEY;
        int32_t L = o->key.label[k];
        if (L >= 0) {
            /* a finished key: ':' records it (a key seen before is refused here) */
            if (b != ':') return;
            int32_t naux = gram_obj_key_done(g, o, aux, L, gram_aux_get(g, aux)->prefix, m->words);
            if (naux == -1) m->oom = 1;
            if (naux >= 0) emit(m, (gram_frame){f.rule, GRAM_OBJ_KEY + nk + L, naux}, parent);
            return;
        }
        int32_t t = gram_dfa_next(&o->key, k, b);
        if (t >= 0) emit_key(m, &f, parent, o, t, b);
        return;
    }
    /* VAL(L): the value follows (the key is already recorded in aux) */
    int32_t L = st - GRAM_OBJ_KEY - nk;
    int32_t vr = o->label_rule[L];
    if (vr < 0 || !first_has(&g->rules[vr], b)) return;
    int32_t p = gram_node_make(m, (gram_frame){f.rule, GRAM_OBJ_AFTER, aux}, parent);
    if (p < 0) return;
    later(m, push_rule(m, vr, p));
}

static void step_node(gram_matcher *m, int32_t x, uint8_t b) {
    const gram_grammar *g = m->g;
    const gram_node nd = m->nodes[x];
    const gram_rule *R = &g->rules[nd.f.rule];
    if (R->kind == GRAM_OBJ) {
        step_obj(m, &nd, b);
        return;
    }
    const gram_dfa *d = &R->fa;
    if (R->counted) {
        int32_t st = nd.f.state, aux = nd.f.aux;
        if (gram_counted_step(R, &st, &aux, b)) emit(m, (gram_frame){nd.f.rule, st, aux}, nd.parent);
    } else {
        int32_t t = gram_dfa_next(d, nd.f.state, b);
        if (t >= 0) emit(m, (gram_frame){nd.f.rule, t, 0}, nd.parent);
    }
    if (d->call_off)
        for (int k = d->call_off[nd.f.state]; k < d->call_off[nd.f.state + 1]; k++) {
            const gram_call *c = &d->calls[k];
            if (!first_has(&g->rules[c->rule], b)) continue;
            int32_t p = gram_node_make(m, (gram_frame){nd.f.rule, c->next, 0}, nd.parent);
            if (p < 0) continue;
            later(m, push_rule(m, c->rule, p));
        }
    if (d->label[nd.f.state] >= 0) pop_to(m, nd.parent);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int32_t step_set_raw(gram_matcher *m, int32_t set, uint8_t b, int *popped) {
    m->out.n = 0;
    m->work.n = 0;
    m->popped = 0;
    if (++m->stamp == 0) { /* wrapped: forget old stamps */
        memset(m->node_seen, 0, (size_t)m->cap_nodes * sizeof *m->node_seen);
        m->stamp = 1;
    }
    int n = m->off[set + 1] - m->off[set];
    for (int i = n - 1; i >= 0; i--) later(m, m->items[m->off[set] + i]);
    while (m->work.n && !m->oom) {
        int32_t x = m->work.v[--m->work.n];
        if (m->node_seen[x] == m->stamp) continue; /* shared parents step once */
        m->node_seen[x] = m->stamp;
        step_node(m, x, b);
    }
    *popped = m->popped;
    if (m->oom) return 0;
    if (m->out.n > 1) {
        qsort(m->out.v, (size_t)m->out.n, sizeof *m->out.v, cmp_i32);
        int w = 1;
        for (int i = 1; i < m->out.n; i++)
            if (m->out.v[i] != m->out.v[w - 1]) m->out.v[w++] = m->out.v[i];
        m->out.n = w;
    }
    return set_intern(m, m->out.v, m->out.n);
}

int32_t gram_set_step(gram_matcher *m, int32_t set, uint8_t b, int *popped) {
    uint64_t key = ((uint64_t)(uint32_t)set << 8) | b;
    if ((m->mn + 1) * 2 > m->mcap) {
        size_t nc = m->mcap ? m->mcap * 2 : 1 << 14;
        uint64_t *nk = malloc(nc * sizeof *nk);
        int32_t *nv = malloc(nc * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            m->oom = 1;
            *popped = 0;
            return 0;
        }
        for (size_t i = 0; i < nc; i++) nk[i] = UINT64_MAX;
        for (size_t i = 0; i < m->mcap; i++)
            if (m->mkey[i] != UINT64_MAX) {
                uint64_t h = m->mkey[i] * 0x9e3779b97f4a7c15ull;
                size_t k = (h >> 20) & (nc - 1);
                while (nk[k] != UINT64_MAX) k = (k + 1) & (nc - 1);
                nk[k] = m->mkey[i];
                nv[k] = m->mval[i];
            }
        free(m->mkey);
        free(m->mval);
        m->mkey = nk;
        m->mval = nv;
        m->mcap = nc;
    }
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t k = (h >> 20) & (m->mcap - 1);
    while (m->mkey[k] != UINT64_MAX) {
        if (m->mkey[k] == key) {
            *popped = m->mval[k] & 1;
            return m->mval[k] >> 1;
        }
        k = (k + 1) & (m->mcap - 1);
    }
    int32_t r = step_set_raw(m, set, b, popped);
    if (m->oom) return 0;
    /* the table may not have grown meanwhile (step_set_raw never touches it) */
    m->mkey[k] = key;
    m->mval[k] = (r << 1) | (*popped ? 1 : 0);
    m->mn++;
    return r;
}

/* ---- acceptance ------------------------------------------------------------------------------- */

static int frame_accepting(const gram_grammar *g, gram_frame f) {
    const gram_rule *R = &g->rules[f.rule];
    if (R->kind == GRAM_OBJ) return f.state == GRAM_OBJ_DONE;
    return R->fa.label[f.state] >= 0;
}

static int node_complete(const gram_matcher *m, int32_t x) {
    while (x >= 0) {
        if (!frame_accepting(m->g, m->nodes[x].f)) return 0;
        x = m->nodes[x].parent;
    }
    return x == GRAM_BOTTOM;
}

int gram_set_accepting(gram_matcher *m, int32_t set) {
    uint8_t fl = m->set_flags[set];
    if (fl & 1) return fl >> 1 & 1;
    int n = m->off[set + 1] - m->off[set], acc = 0;
    for (int i = 0; i < n && !acc; i++) acc = node_complete(m, m->items[m->off[set] + i]);
    m->set_flags[set] |= (uint8_t)(1 | (acc << 1));
    return acc;
}

/* ---- matcher API -------------------------------------------------------------------------------- */

int gram_matcher_new(const gram_grammar *g, gram_matcher **out) {
    *out = NULL;
    gram_matcher *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->g = g;
    int mw = 1;
    for (int r = 0; r < g->n_rules; r++)
        if (g->rules[r].kind == GRAM_OBJ && g->rules[r].obj && g->rules[r].obj->n_words > mw)
            mw = g->rules[r].obj->n_words;
    m->words = calloc((size_t)mw, sizeof *m->words);
    m->max_words = mw;
    int32_t empty = set_intern(m, NULL, 0); /* set 0: no stack */
    (void)empty;
    int32_t root = push_rule(m, g->root, GRAM_BOTTOM);
    if (!m->words || m->oom || root < 0) {
        gram_matcher_free(m);
        return -1;
    }
    m->start = m->cur = set_intern(m, &root, 1);
    if (m->oom) {
        gram_matcher_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void gram_matcher_free(gram_matcher *m) {
    if (!m) return;
    free(m->nodes);
    free(m->node_hash);
    free(m->ntab);
    free(m->items);
    free(m->off);
    free(m->set_hash);
    free(m->set_flags);
    free(m->stab);
    free(m->mkey);
    free(m->mval);
    free(m->out.v);
    free(m->work.v);
    free(m->node_seen);
    free(m->words);
    free(m);
}

void gram_matcher_reset(gram_matcher *m) { m->cur = m->start; }
int32_t gram_matcher_state(const gram_matcher *m) { return m->cur; }
const gram_grammar *gram_matcher_grammar(const gram_matcher *m) { return m->g; }
void gram_matcher_set_state(gram_matcher *m, int32_t state) { m->cur = state; }
int gram_matcher_oom(const gram_matcher *m) { return m->oom; }
int gram_matcher_depth_hit(const gram_matcher *m) { return m->depth_hit; }
uint64_t *gram_matcher_words(gram_matcher *m) { return m->words; }

int gram_matcher_feed(gram_matcher *m, const char *s, size_t len) {
    int32_t cur = m->cur;
    for (size_t i = 0; i < len; i++) {
        int popped;
        cur = gram_set_step(m, cur, (uint8_t)s[i], &popped);
        if (cur == 0 || m->oom) return -1;
    }
    m->cur = cur;
    return 0;
}

int gram_matcher_accepting(gram_matcher *m) { return gram_set_accepting(m, m->cur); }

static int set_can_continue(gram_matcher *m, int32_t set) {
    uint8_t fl = m->set_flags[set];
    if (fl & 4) return fl >> 3 & 1;
    int cont = 0;
    for (int b = 0; b < 256 && !cont; b++) {
        int popped;
        cont = gram_set_step(m, set, (uint8_t)b, &popped) != 0;
    }
    m->set_flags[set] |= (uint8_t)(4 | (cont << 3));
    return cont;
}

int gram_matcher_can_continue(gram_matcher *m) { return set_can_continue(m, m->cur); }

int gram_matcher_forced(gram_matcher *m, char *buf, int cap) {
    int32_t cur = m->cur;
    int n = 0;
    while (n < cap && !gram_set_accepting(m, cur)) {
        int32_t only = -1, next = 0;
        for (int b = 0; b < 256; b++) {
            int popped;
            int32_t t = gram_set_step(m, cur, (uint8_t)b, &popped);
            if (!t) continue;
            if (only >= 0) {
                only = -2;
                break;
            }
            only = b;
            next = t;
        }
        if (only < 0) break;
        buf[n++] = (char)only;
        cur = next;
    }
    return n;
}

/* The decision rule (enum/boolean/integer) a value may start with in set, or
 * -1 when there is none or more than one.  Other continuations (closing an
 * array instead, say) are allowed: they are not part of the decision. */
static int32_t set_decision_rule(gram_matcher *m, int32_t set) {
    const gram_grammar *g = m->g;
    int n = m->off[set + 1] - m->off[set];
    int32_t found = -1;
    for (int i = 0; i < n; i++) {
        const gram_node *nd = &m->nodes[m->items[m->off[set] + i]];
        const gram_rule *R = &g->rules[nd->f.rule];
        if (R->kind == GRAM_OBJ) {
            int nk = R->obj->key.n_states, ws;
            int32_t st = gram_obj_base(R->obj, nd->f.state, &ws);
            if (st >= GRAM_OBJ_KEY + nk) {
                int32_t c = R->obj->label_rule[st - GRAM_OBJ_KEY - nk];
                if (c >= 0 && g->rules[c].decision) {
                    if (found >= 0 && found != c) return -1;
                    found = c;
                }
            }
            continue;
        }
        if (nd->f.state == 0 && R->decision) {
            if (found >= 0 && found != nd->f.rule) return -1;
            found = nd->f.rule;
        }
        if (R->fa.call_off)
            for (int k = R->fa.call_off[nd->f.state]; k < R->fa.call_off[nd->f.state + 1]; k++) {
                int32_t c = R->fa.calls[k].rule;
                if (!g->rules[c].decision) continue;
                if (found >= 0 && found != c) return -1;
                found = c;
            }
    }
    return found;
}

int32_t gram_matcher_decision_rule(gram_matcher *m, char *lead, int *n_lead) {
    *n_lead = 0;
    int32_t r = set_decision_rule(m, m->cur);
    if (r >= 0) return r;
    /* through bytes every continuation starts with: ',"key":' and the like */
    char F[32];
    int nf = gram_matcher_forced(m, F, (int)sizeof F);
    int32_t cur = m->cur;
    for (int i = 0; i < nf; i++) {
        int popped;
        cur = gram_set_step(m, cur, (uint8_t)F[i], &popped);
        if (!cur) return -1;
        r = set_decision_rule(m, cur);
        if (r >= 0) {
            memcpy(lead, F, (size_t)i + 1);
            *n_lead = i + 1;
            return r;
        }
    }
    return -1;
}

/* ---- check ------------------------------------------------------------------------------------- */

int gram_check(const gram_grammar *g, const char *canon, size_t len, char *err, size_t err_len) {
    gram_matcher *m;
    if (gram_matcher_new(g, &m)) return -1;
    int32_t cur = m->cur;
    int rc = 1;
    for (size_t i = 0; i < len; i++) {
        int popped;
        int32_t nx = gram_set_step(m, cur, (uint8_t)canon[i], &popped);
        if (m->oom) {
            rc = -1;
            break;
        }
        if (!nx && m->depth_hit) {
            snprintf(err, err_len, "byte %zu: nested deeper than the grammar's stack limit (%d frames)", i, GRAM_STACK_MAX);
            rc = 0;
            break;
        }
        if (!nx) {
            /* what would have been accepted here */
            char exp[80];
            int ne = 0, cnt = 0;
            for (int b = 0; b < 256; b++) {
                int p2;
                if (gram_set_step(m, cur, (uint8_t)b, &p2)) {
                    cnt++;
                    if (ne < 60) ne += snprintf(exp + ne, sizeof exp - (size_t)ne, (b >= 0x20 && b < 0x7f) ? "%c" : "\\x%02x", b);
                }
            }
            if (gram_set_accepting(m, cur)) ne += snprintf(exp + ne, sizeof exp - (size_t)ne, "%s", ne ? " or end" : "end");
            long from = (long)i > 24 ? (long)i - 24 : 0;
            snprintf(err, err_len, "byte %zu: '%c' not allowed after \"%.*s\" (expected %s%s)", i,
                     canon[i] >= 0x20 && canon[i] < 0x7f ? canon[i] : '?', (int)((long)i - from), canon + from,
                     cnt > 60 ? "one of " : "", ne ? exp : "nothing: no value satisfies the schema");
            rc = 0;
            break;
        }
        cur = nx;
    }
    if (rc == 1 && !gram_set_accepting(m, cur)) {
        snprintf(err, err_len, "byte %zu: the value is incomplete", len);
        rc = 0;
    }
    gram_matcher_free(m);
    return rc;
}
