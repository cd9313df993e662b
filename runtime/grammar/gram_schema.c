/*
 * gram_schema.c — JSON Schema → grammar rules (gram.h).
 *
 * The unit of compilation is a conjunction: the set of schema objects that
 * all apply to one value.  allOf members and $ref targets are flattened into
 * it (a set, so A ∧ A = A and reference cycles flatten to a fixpoint);
 * anyOf/oneOf are distributed over it, one alternative rule per branch;
 * everything else is read across all members at once (types intersect,
 * bounds take the tightest, patterns intersect, properties merge per key).
 * Conjunctions are memoised by their member set, which is what turns
 * recursive $refs into recursive rules.
 *
 * Exactness: every keyword is either enforced exactly, an annotation
 * (ignored, as validators do), or recorded as unsupported with its location;
 * a schema with any unsupported keyword fails to compile (unless the caller
 * asked for the permissive superset).  oneOf compiles to alternation only
 * when its branches are proven disjoint after the whole grammar is built.
 */
#include <cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_schema.h"

/* Limits: a schema past one of these is refused with a message naming it
 * (never a crash, never minutes of work).  The largest schema of the shared
 * JSONSchemaBench sample needs 4,000 rules; its costliest compiled schema
 * 15M work units (about 1 s on one core: a unit is an NFA state or edge
 * visited by a subset construction, a product or DFA state built, a
 * conjunction member), 2 of 2,007 need more than 7M, the median schema
 * under 10,000. */
#define MAX_RULES 20000
#define MAX_FLATTEN_DEPTH 500
#define MAX_DECL 2048       /* declared property names in one object */
#define MAX_CONJ 1000       /* schemas flattened into one conjunction */ /* $ref/allOf chain flattened into one conjunction */
#define GRAM_MAX_WORK 20000000L /* work units for one compile (above) */
#define MAX_ALTS 512

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_ALL = 63 };

enum { F_ANY = 1, F_ONE = 2, F_NOENUM = 4 };

typedef struct {
    const cJSON *node;
    uint32_t flags;
    int32_t ord; /* the node's creation index: conjunctions sort by it, so compiles are deterministic */
} citem;

typedef struct {
    citem *v;
    int n, cap;
    int is_false;
} conj;

/* ---- small maps ------------------------------------------------------------------------- */

typedef struct {
    const void *key;
    char *path; /* JSON pointer "#/properties/a" */
    char *base; /* base URI in effect */
    int checked;
    int reach;             /* check_cycles: reached from the root */
    int color;             /* check_cycles: 0 not visited, 1 on the search path, 2 done */
    int e_off, e_n;        /* check_cycles: edges that apply to the same value */
    cJSON *dep_alts;       /* dependent_schemas: the anyOf forms of the node's schema dependencies */
    int32_t ord;           /* creation index (document order) */
} node_info;

typedef struct {
    node_info *v;
    size_t cap, n;
} info_map;

static uint64_t blob_hash(const void *data, uint32_t len) {
    const uint8_t *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    for (uint32_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

/* String maps (open addressing): key → int32 value, the keys owned. */
typedef struct {
    char **key;
    int32_t *val;
    size_t cap, n;
} smap;

/* The value slot for key (made with value -1 when create), NULL when absent
 * or out of memory (then *oom is set). */
static int32_t *smap_slot(smap *m, const char *key, int create, int *oom) {
    if (create && (m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        char **nk = calloc(nc, sizeof *nk);
        int32_t *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            *oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = (size_t)blob_hash(m->key[i], (uint32_t)strlen(m->key[i])) & (nc - 1);
                while (nk[j]) j = (j + 1) & (nc - 1);
                nk[j] = m->key[i];
                nv[j] = m->val[i];
            }
        free(m->key);
        free(m->val);
        m->key = nk;
        m->val = nv;
        m->cap = nc;
    }
    if (!m->cap) return NULL;
    size_t i = (size_t)blob_hash(key, (uint32_t)strlen(key)) & (m->cap - 1);
    while (m->key[i]) {
        if (!strcmp(m->key[i], key)) return &m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    if (!create) return NULL;
    m->key[i] = strdup(key);
    if (!m->key[i]) {
        *oom = 1;
        return NULL;
    }
    m->val[i] = -1;
    m->n++;
    return &m->val[i];
}

static void smap_free(smap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->key[i]);
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static node_info *info_get(info_map *m, const void *key, int create) {
    if (create && (m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        node_info *nv = calloc(nc, sizeof *nv);
        if (!nv) return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].key) {
                size_t k = ptr_hash(m->v[i].key) & (nc - 1);
                while (nv[k].key) k = (k + 1) & (nc - 1);
                nv[k] = m->v[i];
            }
        free(m->v);
        m->v = nv;
        m->cap = nc;
    }
    if (!m->cap) return NULL;
    size_t k = ptr_hash(key) & (m->cap - 1);
    while (m->v[k].key) {
        if (m->v[k].key == key) return &m->v[k];
        k = (k + 1) & (m->cap - 1);
    }
    if (!create) return NULL;
    m->v[k].key = key;
    m->v[k].ord = (int32_t)m->n++;
    return &m->v[k];
}

typedef struct {
    char *uri;
    const cJSON *node;
} uri_entry;

typedef struct {
    int32_t *alts;
    int n;
    char *path;
} oneof_rec;

typedef struct {
    char *kw, *path;
    int hard; /* not a keyword the permissive mode may ignore */
} unsup;

/* memo: conjunction (sorted (node, flags) pairs) → rule */
typedef struct {
    citem *key;
    int n, used;
    uint64_t hash;
    int32_t rule;
} memo_entry;

typedef struct {
    conj c;
    int32_t id;
} pending_conj;

typedef struct {
    gram_grammar *g;
    gram_options opt;
    cJSON *doc;
    int draft; /* 4, 6, 7, 2019, 2020 */
    info_map info;
    uri_entry *ids;
    int n_ids, cap_ids;
    smap id_map;        /* uri → index in ids */
    memo_entry *memo;
    size_t memo_cap, memo_n;
    unsup *uns;
    int n_uns, cap_uns, uns_more, uns_more_hard;
    oneof_rec *oneofs;
    int n_oneofs, cap_oneofs;
    cJSON **owned; /* generated schema nodes */
    int n_owned, cap_owned;
    int32_t *alias; /* (cap_rules) */
    pending_conj *pend; /* conjunctions with a rule id whose body is not built yet (a stack) */
    int n_pend, cap_pend;
    long work;          /* deterministic work units spent (GRAM_MAX_WORK) */
    struct leaf_ent *leaves; /* shared leaf rules by their facts (leaf_slot) */
    size_t leaf_cap, leaf_n;
    struct pat_ent *pats;    /* pattern automata by pattern text (pattern_dfa) */
    int n_pats, cap_pats;
    struct key_ent *keys;    /* key automata by their names and patterns (compile_object) */
    int n_keys, cap_keys;
    smap key_map;            /* names and patterns → index in keys */
    gram_dfa any_content;    /* any canonical string content (made on first use) */
    gram_dfa any_key;        /* the same, quoted */
    int have_any;
    int oom, too_big;
    char fail_msg[512];
    int32_t any_rule;
} comp;

static void *grow(void *p, int *cap, int need, size_t elem) {
    if (need <= *cap) return p;
    int nc = *cap ? *cap : 8;
    while (nc < need) nc *= 2;
    void *np = realloc(p, (size_t)nc * elem);
    if (!np) return NULL;
    *cap = nc;
    return np;
}

static char *xstrdup(comp *C, const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) C->oom = 1;
    return d;
}

static char *xasprintf(comp *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *xasprintf(comp *C, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        s = NULL;
        C->oom = 1;
    }
    va_end(ap);
    return s;
}

static const char *path_of(comp *C, const cJSON *n) {
    node_info *i = info_get(&C->info, n, 0);
    return i && i->path ? i->path : "#";
}

static const char *base_of(comp *C, const cJSON *n) {
    node_info *i = info_get(&C->info, n, 0);
    return i && i->base ? i->base : "";
}

#define MAX_UNSUP 64 /* findings listed in the message; the rest are counted */
static void unsupported_at(comp *C, const char *kw, const char *p, int hard) {
    for (int i = 0; i < C->n_uns; i++)
        if (!strcmp(C->uns[i].kw, kw) && !strcmp(C->uns[i].path, p)) return;
    if (C->n_uns >= MAX_UNSUP) {
        C->uns_more++;
        C->uns_more_hard |= hard;
        return;
    }
    unsup *nu = grow(C->uns, &C->cap_uns, C->n_uns + 1, sizeof *nu);
    if (!nu) {
        C->oom = 1;
        return;
    }
    C->uns = nu;
    C->uns[C->n_uns].kw = xstrdup(C, kw);
    C->uns[C->n_uns].path = xstrdup(C, p);
    C->uns[C->n_uns].hard = hard;
    C->n_uns++;
}

static void unsupported(comp *C, const char *kw, const cJSON *at) { unsupported_at(C, kw, path_of(C, at), 0); }
static void too_large(comp *C, const char *what, const cJSON *at) { unsupported_at(C, what, path_of(C, at), 1); }

/* Compilation stops: a limit of the compiler was reached, or the schema has
 * no grammar.  fail_msg is the whole error message. */
static void stop_v(comp *C, int code, const char *prefix, const char *fmt, va_list ap) {
    if (C->too_big) return;
    C->too_big = code;
    int o = snprintf(C->fail_msg, sizeof C->fail_msg, "%s", prefix);
    vsnprintf(C->fail_msg + o, sizeof C->fail_msg - (size_t)o, fmt, ap);
}

static void over_limit(comp *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void over_limit(comp *C, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    stop_v(C, CINFER_EUNSUPPORTED, "schema too large: ", fmt, ap);
    va_end(ap);
}

static void refuse(comp *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(comp *C, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    stop_v(C, CINFER_EFORMAT, "schema: ", fmt, ap);
    va_end(ap);
}

/* ---- URIs and $ref --------------------------------------------------------------------- */

static int has_scheme(const char *s) {
    if (!isalpha((unsigned char)s[0])) return 0;
    for (const char *p = s + 1; *p; p++) {
        if (*p == ':') return 1;
        if (!isalnum((unsigned char)*p) && *p != '+' && *p != '-' && *p != '.') return 0;
    }
    return 0;
}

/* RFC 3986 reference resolution, enough for $id/$ref in schemas. */
static char *uri_resolve(comp *C, const char *base, const char *ref) {
    if (has_scheme(ref) || !*base) return xstrdup(C, ref);
    size_t bl = strcspn(base, "#");
    if (ref[0] == '#') return xasprintf(C, "%.*s%s", (int)bl, base, ref);
    if (!*ref) return xasprintf(C, "%.*s", (int)bl, base);
    const char *colon = strchr(base, ':');
    size_t scheme_len = colon ? (size_t)(colon - base) + 1 : 0;
    if (ref[0] == '/' && ref[1] == '/') return xasprintf(C, "%.*s%s", (int)scheme_len, base, ref);
    /* authority end */
    size_t auth_end = scheme_len;
    if (base[auth_end] == '/' && base[auth_end + 1] == '/') {
        auth_end += 2;
        while (auth_end < bl && base[auth_end] != '/') auth_end++;
    }
    char *merged;
    if (ref[0] == '/') merged = xasprintf(C, "%.*s%s", (int)auth_end, base, ref);
    else {
        size_t q = bl;
        for (size_t i = auth_end; i < bl; i++)
            if (base[i] == '?') {
                q = i;
                break;
            }
        size_t slash = auth_end;
        for (size_t i = auth_end; i < q; i++)
            if (base[i] == '/') slash = i + 1;
        if (slash == auth_end && auth_end > scheme_len) merged = xasprintf(C, "%.*s/%s", (int)auth_end, base, ref);
        else merged = xasprintf(C, "%.*s%s", (int)slash, base, ref);
    }
    if (!merged) return NULL;
    /* remove dot segments in the path (before '?' / '#') */
    char *out = malloc(strlen(merged) + 1);
    if (!out) {
        free(merged);
        C->oom = 1;
        return NULL;
    }
    size_t pstart = auth_end, o = 0;
    memcpy(out, merged, pstart);
    o = pstart;
    const char *p = merged + pstart;
    size_t plen = strcspn(p, "?#");
    const char *pend = p + plen;
    while (p < pend) {
        if (!strncmp(p, "./", 2)) p += 2;
        else if (!strncmp(p, "../", 3)) p += 3;
        else if (!strncmp(p, "/./", 3)) p += 2;
        else if (p + 2 == pend && !strncmp(p, "/.", 2)) {
            out[o++] = '/';
            p += 2;
        } else if (!strncmp(p, "/../", 4) || (p + 3 == pend && !strncmp(p, "/..", 3))) {
            p += 3;
            while (o > pstart && out[o - 1] != '/') o--;
            if (o > pstart) o--;
            if (p == pend) out[o++] = '/';
        } else {
            do out[o++] = *p++;
            while (p < pend && *p != '/');
        }
    }
    strcpy(out + o, pend);
    free(merged);
    return out;
}

static void register_uri(comp *C, const char *uri, const cJSON *node) {
    int32_t *slot = smap_slot(&C->id_map, uri, 1, &C->oom);
    if (!slot || *slot >= 0) return;
    uri_entry *ni = grow(C->ids, &C->cap_ids, C->n_ids + 1, sizeof *ni);
    if (!ni) {
        C->oom = 1;
        return;
    }
    C->ids = ni;
    C->ids[C->n_ids].uri = xstrdup(C, uri);
    C->ids[C->n_ids].node = node;
    *slot = C->n_ids++;
}

static const cJSON *lookup_uri(comp *C, const char *uri) {
    int32_t *slot = smap_slot(&C->id_map, uri, 0, &C->oom);
    return slot && *slot >= 0 ? C->ids[*slot].node : NULL;
}

/* keywords whose value is a schema, an array of schemas, or a map of schemas */
static const char *const kw_schema[] = {"additionalProperties", "additionalItems", "not", "if", "then", "else",
                                        "contains", "propertyNames", "unevaluatedProperties",
                                        "unevaluatedItems", "contentSchema", "items", NULL};
static const char *const kw_array[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items", NULL};
static const char *const kw_map[] = {"properties", "patternProperties", "$defs", "definitions",
                                     "dependentSchemas", "dependencies", NULL};

static int in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s)) return 1;
    return 0;
}

static char *ptr_escape_append(comp *C, const char *path, const char *tok) {
    size_t n = strlen(tok), extra = 0;
    for (size_t i = 0; i < n; i++) extra += tok[i] == '~' || tok[i] == '/';
    char *s = malloc(strlen(path) + n + extra + 2);
    if (!s) {
        C->oom = 1;
        return NULL;
    }
    char *o = s + sprintf(s, "%s/", path);
    for (size_t i = 0; i < n; i++) {
        if (tok[i] == '~') *o++ = '~', *o++ = '0';
        else if (tok[i] == '/') *o++ = '~', *o++ = '1';
        else *o++ = tok[i];
    }
    *o = 0;
    return s;
}

static void index_schema(comp *C, const cJSON *n, const char *path, const char *base, int depth) {
    if (C->oom || depth > 200 || !cJSON_IsObject(n)) return;
    node_info *inf = info_get(&C->info, n, 1);
    if (!inf) {
        C->oom = 1;
        return;
    }
    if (inf->path) return; /* already indexed */
    char *nb = NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(n, "$id");
    if (!cJSON_IsString(id) && C->draft == 4) id = cJSON_GetObjectItemCaseSensitive(n, "id");
    /* in draft <= 7 an object with $ref has no other keywords: its $id does not count */
    int ref_only = C->draft <= 7 && cJSON_GetObjectItemCaseSensitive(n, "$ref");
    if (cJSON_IsString(id) && !ref_only) {
        nb = uri_resolve(C, base, id->valuestring);
        if (!nb) return;
        if (id->valuestring[0] == '#') {
            /* draft 6/7 plain-name fragment: an anchor */
            register_uri(C, nb, n);
            free(nb);
            nb = xstrdup(C, base);
        } else {
            char *doc = xasprintf(C, "%.*s", (int)strcspn(nb, "#"), nb);
            if (doc) register_uri(C, doc, n);
            free(nb);
            nb = doc;
        }
    } else nb = xstrdup(C, base);
    if (!nb) return;
    inf = info_get(&C->info, n, 0);
    inf->path = xstrdup(C, path);
    inf->base = nb;
    const cJSON *anchor = cJSON_GetObjectItemCaseSensitive(n, "$anchor");
    if (!cJSON_IsString(anchor)) anchor = cJSON_GetObjectItemCaseSensitive(n, "$dynamicAnchor");
    if (cJSON_IsString(anchor)) {
        char *u = xasprintf(C, "%s#%s", nb, anchor->valuestring);
        if (u) register_uri(C, u, n);
        free(u);
    }
    const char *b = inf->base;
    for (const cJSON *k = n->child; k && !C->oom; k = k->next) {
        if (!k->string) continue;
        char *kp = ptr_escape_append(C, path, k->string);
        if (!kp) return;
        if (in_list(kw_map, k->string) && cJSON_IsObject(k)) {
            for (const cJSON *e = k->child; e; e = e->next) {
                char *ep = ptr_escape_append(C, kp, e->string ? e->string : "");
                if (ep) index_schema(C, e, ep, b, depth + 1);
                free(ep);
            }
        } else if (in_list(kw_array, k->string) && cJSON_IsArray(k)) {
            int i = 0;
            for (const cJSON *e = k->child; e; e = e->next, i++) {
                char idx[24];
                snprintf(idx, sizeof idx, "%d", i);
                char *ep = ptr_escape_append(C, kp, idx);
                if (ep) index_schema(C, e, ep, b, depth + 1);
                free(ep);
            }
        } else if (in_list(kw_schema, k->string)) {
            index_schema(C, k, kp, b, depth + 1);
        }
        free(kp);
    }
}

static int pct_decode(char *s) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            char h[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(h, NULL, 16);
            p += 2;
        } else *o++ = *p;
    }
    *o = 0;
    return 0;
}

static const cJSON *resolve_ref(comp *C, const cJSON *from, const char *ref) {
    char *u = uri_resolve(C, base_of(C, from), ref);
    if (!u) return NULL;
    size_t dl = strcspn(u, "#");
    char *doc = xasprintf(C, "%.*s", (int)dl, u);
    char *frag = xstrdup(C, u[dl] ? u + dl + 1 : "");
    const cJSON *target = NULL;
    if (!doc || !frag) goto done;
    pct_decode(frag);
    const cJSON *d = lookup_uri(C, doc);
    if (!d && !*doc) d = C->doc;
    if (!d) goto done;
    if (!*frag) target = d;
    else if (frag[0] == '/') {
        const cJSON *cur = d;
        char *p = frag + 1;
        for (;;) {
            char *slash = strchr(p, '/');
            if (slash) *slash = 0;
            /* unescape ~1 ~0 */
            char *o = p;
            for (char *q = p; *q; q++) {
                if (*q == '~' && q[1] == '1') *o++ = '/', q++;
                else if (*q == '~' && q[1] == '0') *o++ = '~', q++;
                else *o++ = *q;
            }
            *o = 0;
            if (cJSON_IsArray(cur)) {
                char *end;
                long i = strtol(p, &end, 10);
                cur = (*p && !*end && i >= 0) ? cJSON_GetArrayItem(cur, (int)i) : NULL;
            } else if (cJSON_IsObject(cur)) cur = cJSON_GetObjectItemCaseSensitive(cur, p);
            else cur = NULL;
            if (!cur || !slash) break;
            p = slash + 1;
        }
        target = cur;
        /* pointers may lead into places the indexer did not visit */
        if (target && !info_get(&C->info, target, 0)) {
            char *tp = xasprintf(C, "%s#%s", doc, frag);
            if (tp) index_schema(C, target, tp, doc, 0);
            free(tp);
        }
    } else {
        char *a = xasprintf(C, "%s#%s", doc, frag);
        if (a) target = lookup_uri(C, a);
        free(a);
    }
done:
    free(u);
    free(doc);
    free(frag);
    return target;
}

/* ---- cycles that consume no input -------------------------------------------------------- */

/* A schema whose evaluation comes back to itself without moving to a
 * property or an item ({"$ref":"#"}, A allOf B allOf A, anyOf [{"$ref":"#"}])
 * never terminates in a validator and has no grammar: it is refused here,
 * with the cycle, before anything is compiled.  Edges that apply a schema
 * to the same value: $ref, allOf, anyOf, oneOf, not, if/then/else,
 * dependentSchemas and dependencies (schema form); the others (properties,
 * items, ...) move into a part of the value and only make schemas
 * reachable.  In drafts 4-7 an object with $ref has only that edge. */

typedef struct {
    const cJSON **v;
    int n, cap;
} node_vec;

static int nv_push(comp *C, node_vec *l, const cJSON *x) {
    const cJSON **nv = grow(l->v, &l->cap, l->n + 1, sizeof *nv);
    if (!nv) {
        C->oom = 1;
        return -1;
    }
    l->v = nv;
    l->v[l->n++] = x;
    return 0;
}

static const cJSON *resolve_ref(comp *C, const cJSON *from, const char *ref);

/* The schemas n applies: same-value ones into same, the others into deeper. */
static void schema_edges(comp *C, const cJSON *n, node_vec *same, node_vec *deeper) {
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(n, "$ref");
    if (cJSON_IsString(ref)) {
        const cJSON *t = resolve_ref(C, n, ref->valuestring);
        if (cJSON_IsObject(t)) nv_push(C, same, t);
        if (C->draft <= 7) return;
    }
    static const char *const same_one[] = {"not", "if", "then", "else", NULL};
    static const char *const same_arr[] = {"allOf", "anyOf", "oneOf", NULL};
    static const char *const same_map[] = {"dependentSchemas", "dependencies", NULL};
    static const char *const deep_one[] = {"additionalProperties", "propertyNames", "unevaluatedProperties", "items",
                                           "additionalItems", "contains", "unevaluatedItems", NULL};
    static const char *const deep_arr[] = {"prefixItems", "items", NULL};
    static const char *const deep_map[] = {"properties", "patternProperties", NULL};
    for (const cJSON *k = n->child; k && !C->oom; k = k->next) {
        if (!k->string) continue;
        node_vec *to = NULL;
        int form = 0; /* 1 one schema, 2 array of schemas, 3 map of schemas */
        if (in_list(same_one, k->string)) to = same, form = 1;
        else if (in_list(same_arr, k->string)) to = same, form = 2;
        else if (in_list(same_map, k->string)) to = same, form = 3;
        else if (in_list(deep_one, k->string) && cJSON_IsObject(k)) to = deeper, form = 1;
        else if (in_list(deep_arr, k->string)) to = deeper, form = 2;
        else if (in_list(deep_map, k->string)) to = deeper, form = 3;
        if (!to) continue;
        if (form == 1 && cJSON_IsObject(k)) nv_push(C, to, k);
        else if ((form == 2 && cJSON_IsArray(k)) || (form == 3 && cJSON_IsObject(k)))
            for (const cJSON *e = k->child; e; e = e->next)
                if (cJSON_IsObject(e)) nv_push(C, to, e);
    }
}

static const char *path_of(comp *C, const cJSON *n);

/* 0, or -1 after recording the refusal (or running out of memory). */
static int check_cycles(comp *C) {
    if (!cJSON_IsObject(C->doc)) return 0;
    node_vec todo = {0}, edges = {0}, same = {0}, deeper = {0};
    int rc = 0;
    /* reachable schemas, each with its same-value edges */
    node_info *ri = info_get(&C->info, C->doc, 1);
    if (!ri) {
        C->oom = 1;
        return -1;
    }
    ri->reach = 1;
    nv_push(C, &todo, C->doc);
    for (int i = 0; i < todo.n && !C->oom; i++) {
        const cJSON *n = todo.v[i];
        same.n = deeper.n = 0;
        schema_edges(C, n, &same, &deeper);
        node_info *inf = info_get(&C->info, n, 1);
        if (!inf) {
            C->oom = 1;
            break;
        }
        inf->e_off = edges.n;
        inf->e_n = same.n;
        for (int k = 0; k < same.n; k++) nv_push(C, &edges, same.v[k]);
        for (int pass = 0; pass < 2; pass++) {
            node_vec *l = pass ? &deeper : &same;
            for (int k = 0; k < l->n; k++) {
                node_info *ti = info_get(&C->info, l->v[k], 1);
                if (!ti) {
                    C->oom = 1;
                    break;
                }
                if (!ti->reach) {
                    ti->reach = 1;
                    nv_push(C, &todo, l->v[k]);
                }
            }
        }
    }
    /* depth-first search over same-value edges; a node met on the path is a cycle */
    node_vec path = {0};
    int *next = NULL, cap_next = 0;
    for (int r = 0; r < todo.n && !rc && !C->oom; r++) {
        node_info *root = info_get(&C->info, todo.v[r], 0);
        if (root->color) continue;
        path.n = 0;
        nv_push(C, &path, todo.v[r]);
        int *nn = grow(next, &cap_next, 1, sizeof *next);
        if (!nn) {
            C->oom = 1;
            break;
        }
        next = nn;
        next[0] = 0;
        root->color = 1;
        while (path.n && !rc && !C->oom) {
            const cJSON *n = path.v[path.n - 1];
            node_info *inf = info_get(&C->info, n, 0);
            if (next[path.n - 1] == inf->e_n) {
                inf->color = 2;
                path.n--;
                continue;
            }
            const cJSON *t = edges.v[inf->e_off + next[path.n - 1]++];
            node_info *ti = info_get(&C->info, t, 0);
            if (ti->color == 2) continue;
            if (ti->color == 1) {
                /* the cycle: from t's place on the path to n, then back to t */
                int at = path.n - 1;
                while (at > 0 && path.v[at] != t) at--;
                char msg[400];
                size_t o = 0;
                msg[0] = 0;
                for (int k = at; k < path.n && o < sizeof msg; k++)
                    o += (size_t)snprintf(msg + o, sizeof msg - o, "%s -> ", path_of(C, path.v[k]));
                if (o < sizeof msg) snprintf(msg + o, sizeof msg - o, "%s", path_of(C, t));
                refuse(C, "a cycle of $ref/allOf/anyOf/oneOf/not that consumes no input: %s", msg);
                rc = -1;
                break;
            }
            ti->color = 1;
            if (nv_push(C, &path, t)) break;
            nn = grow(next, &cap_next, path.n, sizeof *next);
            if (!nn) {
                C->oom = 1;
                break;
            }
            next = nn;
            next[path.n - 1] = 0;
        }
    }
    free(path.v);
    free(next);
    free(todo.v);
    free(edges.v);
    free(same.v);
    free(deeper.v);
    return C->oom ? -1 : rc;
}

/* ---- conjunctions ------------------------------------------------------------------------ */

static int conj_has(const conj *c, const cJSON *n) {
    for (int i = 0; i < c->n; i++)
        if (c->v[i].node == n) return 1;
    return 0;
}

static void conj_push(comp *C, conj *c, const cJSON *n, uint32_t flags) {
    citem *nv = grow(c->v, &c->cap, c->n + 1, sizeof *nv);
    node_info *inf = info_get(&C->info, n, 1);
    if (!nv || !inf) {
        C->oom = 1;
        return;
    }
    c->v = nv;
    c->v[c->n++] = (citem){n, flags, inf->ord};
}

static void conj_free(conj *c) {
    free(c->v);
    memset(c, 0, sizeof *c);
}

static conj conj_copy(comp *C, const conj *c) {
    conj d = {0};
    for (int i = 0; i < c->n; i++) conj_push(C, &d, c->v[i].node, c->v[i].flags);
    d.is_false = c->is_false;
    return d;
}

static const cJSON *kw(const cJSON *n, const char *k) { return cJSON_GetObjectItemCaseSensitive(n, k); }

static void own(comp *C, cJSON *n) {
    cJSON **no = grow(C->owned, &C->cap_owned, C->n_owned + 1, sizeof *no);
    if (!no) {
        C->oom = 1;
        cJSON_Delete(n);
        return;
    }
    C->owned = no;
    C->owned[C->n_owned++] = n;
}

static int trivially_true(const cJSON *s) {
    if (cJSON_IsTrue(s)) return 1;
    if (!cJSON_IsObject(s)) return 0;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!in_list((const char *const[]){"title", "description", "$comment", "default", "examples", NULL}, k->string))
            return 0;
    return 1;
}

/* Schema dependencies (dependentSchemas, and dependencies in its schema
 * form, which validators apply in every draft when present): "if the
 * object has key k, it also satisfies S", as the equivalent
 *   anyOf [{not {type: object}}, {type: object, not {required: [k]}},
 *          {type: object, required: [k], allOf: [S]}]
 * made once per node (owned by the compiler) and flattened with it. */
#define MAX_DEP_SCHEMAS 6
static const cJSON *dependent_schemas(comp *C, const cJSON *n) {
    node_info *inf = info_get(&C->info, n, 0);
    if (!inf) return NULL;
    if (inf->dep_alts) return inf->dep_alts;
    cJSON *list = NULL;
    int count = 0;
    for (int w = 0; w < 2; w++) {
        const cJSON *m = kw(n, w ? "dependencies" : "dependentSchemas");
        if (!cJSON_IsObject(m)) continue;
        for (const cJSON *e = m->child; e; e = e->next) {
            if (cJSON_IsArray(e) || trivially_true(e) || !(cJSON_IsObject(e) || cJSON_IsBool(e))) continue;
            if (++count > MAX_DEP_SCHEMAS) {
                unsupported(C, "more than 6 schema dependencies (dependentSchemas/dependencies)", n);
                return list;
            }
            if (!list) {
                list = cJSON_CreateArray();
                if (!list) {
                    C->oom = 1;
                    return NULL;
                }
                own(C, list);
                inf = info_get(&C->info, n, 0);
                inf->dep_alts = list;
            }
            cJSON *alt = cJSON_CreateObject(), *any = cJSON_AddArrayToObject(alt, "anyOf");
            cJSON *b1 = cJSON_CreateObject(), *b2 = cJSON_CreateObject(), *b3 = cJSON_CreateObject();
            cJSON_AddItemToArray(any, b1);
            cJSON_AddItemToArray(any, b2);
            cJSON_AddItemToArray(any, b3);
            cJSON *n1 = cJSON_AddObjectToObject(b1, "not");
            cJSON_AddStringToObject(n1, "type", "object");
            cJSON_AddStringToObject(b2, "type", "object");
            cJSON *req2 = cJSON_AddArrayToObject(cJSON_AddObjectToObject(b2, "not"), "required");
            cJSON_AddItemToArray(req2, cJSON_CreateString(e->string));
            cJSON_AddStringToObject(b3, "type", "object");
            cJSON_AddItemToArray(cJSON_AddArrayToObject(b3, "required"), cJSON_CreateString(e->string));
            /* S itself stays where it is (its $refs resolve from there): a $ref-free wrapper would copy it */
            cJSON *all3 = cJSON_AddArrayToObject(b3, "allOf");
            cJSON_AddItemReferenceToArray(all3, (cJSON *)e);
            cJSON_AddItemToArray(list, alt);
            if (!cJSON_IsObject(cJSON_GetArrayItem(list, count - 1))) {
                C->oom = 1;
                return NULL;
            }
            /* locations for messages: the dependency's own */
            const char *base = base_of(C, n);
            char *dp = ptr_escape_append(C, path_of(C, n), w ? "dependencies" : "dependentSchemas");
            char *ep = dp ? ptr_escape_append(C, dp, e->string) : NULL;
            const cJSON *nodes[6] = {alt, b1, b2, b3, cJSON_GetObjectItem(b1, "not"), all3 ? all3->child : NULL};
            for (int k = 0; k < 6 && ep && nodes[k]; k++) {
                node_info *ni = info_get(&C->info, nodes[k], 1);
                if (!ni) {
                    C->oom = 1;
                    break;
                }
                /* the reference to S resolves its $refs from S's base */
                if (!ni->path) ni->path = xstrdup(C, ep), ni->base = xstrdup(C, k == 5 ? base_of(C, e) : base);
            }
            free(dp);
            free(ep);
        }
    }
    return list;
}

static void flatten(comp *C, conj *c, const cJSON *n, int depth) {
    if (C->oom || c->is_false) return;
    if (cJSON_IsTrue(n)) return;
    if (cJSON_IsFalse(n)) {
        c->is_false = 1;
        return;
    }
    if (!cJSON_IsObject(n)) return; /* not a schema: nothing to enforce */
    if (conj_has(c, n)) return;
    if (c->n >= MAX_CONJ) {
        over_limit(C, "more than %d schemas apply to one value (allOf/$ref) at %s", MAX_CONJ, path_of(C, n));
        return;
    }
    if (depth > MAX_FLATTEN_DEPTH) {
        over_limit(C, "a chain of more than %d $ref/allOf at %s", MAX_FLATTEN_DEPTH, path_of(C, n));
        return;
    }
    if (!info_get(&C->info, n, 0)) index_schema(C, n, "#", "", 0);
    const cJSON *ref = kw(n, "$ref");
    if (cJSON_IsString(ref) && C->draft <= 7) {
        /* draft <= 7: $ref replaces the whole object */
        conj_push(C, c, n, F_ANY | F_ONE | F_NOENUM); /* marks it visited; contributes nothing */
        const cJSON *t = resolve_ref(C, n, ref->valuestring);
        if (!t) unsupported(C, "$ref (unresolvable or remote)", n);
        else flatten(C, c, t, depth + 1);
        return;
    }
    conj_push(C, c, n, 0);
    if (cJSON_IsString(ref)) {
        const cJSON *t = resolve_ref(C, n, ref->valuestring);
        if (!t) unsupported(C, "$ref (unresolvable or remote)", n);
        else flatten(C, c, t, depth + 1);
    }
    const cJSON *all = kw(n, "allOf");
    if (cJSON_IsArray(all))
        for (const cJSON *e = all->child; e; e = e->next) flatten(C, c, e, depth + 1);
    const cJSON *alts = dependent_schemas(C, n);
    for (const cJSON *e = alts ? alts->child : NULL; e; e = e->next) flatten(C, c, e, depth + 1);
}

/* a conj member is "ref-only" (draft <= 7 $ref holder): no own keywords */
static int ref_holder(comp *C, const citem *it) {
    return C->draft <= 7 && cJSON_IsString(kw(it->node, "$ref"));
}

/* ---- rules ------------------------------------------------------------------------------- */

static int32_t new_rule(comp *C) {
    gram_grammar *g = C->g;
    if (g->n_rules >= MAX_RULES) {
        over_limit(C, "more than %d grammar rules", MAX_RULES);
        return -1;
    }
    if (g->n_rules == g->cap_rules) {
        int nc = g->cap_rules ? g->cap_rules * 2 : 64;
        gram_rule *nr = realloc(g->rules, (size_t)nc * sizeof *nr);
        int32_t *na = realloc(C->alias, (size_t)nc * sizeof *na);
        if (na) C->alias = na;
        if (!nr || !na) {
            if (nr) g->rules = nr;
            C->oom = 1;
            return -1;
        }
        g->rules = nr;
        g->cap_rules = nc;
    }
    gram_rule *r = &g->rules[g->n_rules];
    memset(r, 0, sizeof *r);
    r->kind = GRAM_FA;
    C->alias[g->n_rules] = -1;
    return g->n_rules++;
}

static int max_states(comp *C) { return C->opt.max_states > 0 ? C->opt.max_states : 200000; }

/* Automaton construction with the work it costs counted (GRAM_MAX_WORK). */
static long max_work(comp *C) { return C->opt.max_work > 0 ? C->opt.max_work : GRAM_MAX_WORK; }

/* Past the whole compile's work budget: stop compiling (the message says so)
 * and answer 1, so an automaton is never built on an exhausted budget. */
static int over_work(comp *C) {
    if (C->work <= max_work(C)) return 0;
    over_limit(C, "compiling it takes more than %ld work units", max_work(C));
    return 1;
}

/* Automaton construction with the work it costs counted (GRAM_MAX_WORK):
 * the subset construction's own steps, and the states it made; it gets only
 * what is left of the budget, so no single automaton outlasts it. */
static int nfa_to_dfa(comp *C, const gram_nfa *n, int32_t start, gram_labeller lab, void *u, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    C->work += n->n_states + n->n_edges;
    if (over_work(C)) return -2;
    int rc = gram_dfa_from_nfa_limited(n, start, lab, u, max_states(C), max_work(C) - C->work + 1, &C->work, out);
    if (!rc) C->work += (long)out->n_states * out->n_classes;
    over_work(C);
    return rc;
}

static int dfa_and(comp *C, const gram_dfa *a, const gram_dfa *b, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    if (over_work(C)) return -2;
    /* a product visits up to states(a) × states(b) pairs, each over the pair classes */
    int rc = gram_dfa_intersect(a, b, max_states(C), out);
    C->work += rc ? (long)max_states(C) : (long)out->n_states * out->n_classes + a->n_states + b->n_states;
    over_work(C);
    return rc;
}

/* Determinise fragment f of n into rule id (an FA rule). */
static void set_fa(comp *C, int32_t id, gram_nfa *n, gram_frag f, const cJSON *where) {
    if (id < 0) return;
    n->tag[f.end] = 0;
    gram_dfa d;
    int rc = nfa_to_dfa(C, n, f.start, NULL, NULL, &d);
    if (rc == -2) {
        too_large(C, "automaton too large (pattern/enum/array bounds)", where);
        return;
    }
    if (rc) {
        C->oom = 1;
        return;
    }
    C->g->rules[id].kind = GRAM_FA;
    C->g->rules[id].fa = d;
}

static char *canon_value(comp *C, const cJSON *v) {
    char *out = gram_json_print(v);
    if (!out) C->oom = 1;
    return out;
}

/* ---- memo ------------------------------------------------------------------------------- */

static int cmp_citem(const void *a, const void *b) {
    const citem *x = a, *y = b;
    if (x->ord != y->ord) return x->ord < y->ord ? -1 : 1;
    return x->flags < y->flags ? -1 : x->flags > y->flags;
}

static uint64_t conj_hash(const citem *v, int n, int is_false) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)is_false;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)v[i].ord;
        h *= 0x100000001b3ull;
        h ^= v[i].flags;
        h *= 0x100000001b3ull;
        h ^= h >> 31;
    }
    return h;
}

static int32_t *memo_slot(comp *C, conj *c, int create) {
    if (c->n > 1) qsort(c->v, (size_t)c->n, sizeof *c->v, cmp_citem);
    uint64_t h = conj_hash(c->v, c->n, c->is_false);
    if (create && (C->memo_n + 1) * 2 > C->memo_cap) {
        size_t nc = C->memo_cap ? C->memo_cap * 2 : 1024;
        memo_entry *nm = calloc(nc, sizeof *nm);
        if (!nm) {
            C->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < C->memo_cap; i++)
            if (C->memo[i].used) {
                size_t k = C->memo[i].hash & (nc - 1);
                while (nm[k].used) k = (k + 1) & (nc - 1);
                nm[k] = C->memo[i];
            }
        free(C->memo);
        C->memo = nm;
        C->memo_cap = nc;
    }
    if (!C->memo_cap) return NULL;
    size_t k = h & (C->memo_cap - 1);
    while (C->memo[k].used) {
        memo_entry *e = &C->memo[k];
        if (e->hash == h && e->n == c->n && (c->n == 0 || !memcmp(e->key, c->v, (size_t)c->n * sizeof *c->v)))
            return &e->rule;
        k = (k + 1) & (C->memo_cap - 1);
    }
    if (!create) return NULL;
    memo_entry *e = &C->memo[k];
    e->key = c->n ? malloc((size_t)c->n * sizeof *c->v) : NULL;
    if (c->n && !e->key) {
        C->oom = 1;
        return NULL;
    }
    if (c->n) memcpy(e->key, c->v, (size_t)c->n * sizeof *c->v);
    e->n = c->n;
    e->used = 1;
    e->hash = h;
    e->rule = -1;
    C->memo_n++;
    return &e->rule;
}

/* ---- keyword checking --------------------------------------------------------------------- */

static const char *const kw_known[] = {
    /* enforced */
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependentRequired", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
    /* structure and annotations */
    "$defs", "definitions", "$id", "$anchor", "$schema", "$comment", "title", "description", "default",
    "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
    "contentSchema", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", NULL};


/* Record the unsupported keywords of member n (once per node).  maxItems of
 * the whole conjunction decides uniqueItems. */
static void check_keywords(comp *C, const cJSON *n, long conj_max_items) {
    node_info *inf = info_get(&C->info, n, 0);
    if (inf && inf->checked) return;
    if (inf) inf->checked = 1;
    for (const cJSON *k = n->child; k; k = k->next) {
        const char *s = k->string;
        if (!s || in_list(kw_known, s)) continue;
        if (!strcmp(s, "id") || !strcmp(s, "then") || !strcmp(s, "else") || !strcmp(s, "minContains") ||
            !strcmp(s, "maxContains"))
            continue; /* inert without their partner keyword (checked below) */
        if (!strcmp(s, "if")) {
            if (kw(n, "then") || kw(n, "else")) unsupported(C, "if/then/else", n);
        } else if (!strcmp(s, "not")) {
            /* handled in compile_base; unsupported forms are reported there */
        } else if (!strcmp(s, "uniqueItems")) {
            if (cJSON_IsTrue(k) && !(conj_max_items >= 0 && conj_max_items <= 1)) unsupported(C, "uniqueItems", n);
        } else if (!strcmp(s, "contains")) {
            unsupported(C, "contains", n);
        } else if (!strcmp(s, "unevaluatedProperties") || !strcmp(s, "unevaluatedItems")) {
            if (!cJSON_IsTrue(k) && !trivially_true(k)) unsupported(C, s, n);
        } else if (!strcmp(s, "dependentSchemas") || !strcmp(s, "dependencies")) {
            /* compiled by dependent_schemas (schema forms) and compile_object (arrays) */
        } else if (!strcmp(s, "$dynamicRef") || !strcmp(s, "$recursiveRef")) {
            unsupported(C, s, n);
        }
        /* anything else is not a JSON Schema keyword: an annotation */
    }
}

/* ---- values: const / enum ---------------------------------------------------------------- */

/* String sets (open addressing; the strings belong to the caller). */
typedef struct {
    const char **v;
    size_t cap, n;
} sset;

static int sset_has(const sset *s, const char *k) {
    if (!s->cap) return 0;
    size_t i = (size_t)blob_hash(k, (uint32_t)strlen(k)) & (s->cap - 1);
    while (s->v[i]) {
        if (!strcmp(s->v[i], k)) return 1;
        i = (i + 1) & (s->cap - 1);
    }
    return 0;
}

/* 1 added, 0 already there, -1 out of memory */
static int sset_add(sset *s, const char *k) {
    if (sset_has(s, k)) return 0;
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        const char **nv = calloc(nc, sizeof *nv);
        if (!nv) return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i]) {
                size_t j = (size_t)blob_hash(s->v[i], (uint32_t)strlen(s->v[i])) & (nc - 1);
                while (nv[j]) j = (j + 1) & (nc - 1);
                nv[j] = s->v[i];
            }
        free(s->v);
        s->v = nv;
        s->cap = nc;
    }
    size_t i = (size_t)blob_hash(k, (uint32_t)strlen(k)) & (s->cap - 1);
    while (s->v[i]) i = (i + 1) & (s->cap - 1);
    s->v[i] = k;
    s->n++;
    return 1;
}

/* Values (enum/const members, excluded values) with their equality keys
 * (gram_json_value_key), so membership is a hash lookup, not a comparison
 * with each. */
typedef struct {
    const cJSON **v;
    char **key;
    int n, cap;
    sset set;
} vlist;

static void vfree(vlist *l) {
    for (int i = 0; i < l->n; i++) free(l->key[i]);
    free(l->key);
    free(l->v);
    free(l->set.v);
    memset(l, 0, sizeof *l);
}

/* Add v (key k: taken over; computed when NULL) unless an equal value is in. */
static void vpush_key(comp *C, vlist *l, const cJSON *v, char *k) {
    if (!k) k = gram_json_value_key(v);
    if (!k) {
        C->oom = 1;
        return;
    }
    if (sset_has(&l->set, k)) {
        free(k);
        return;
    }
    const cJSON **nv = grow(l->v, &l->cap, l->n + 1, sizeof *nv);
    if (nv) l->v = nv;
    int c2 = l->cap;
    char **nk = nv ? realloc(l->key, (size_t)c2 * sizeof *nk) : NULL;
    if (!nv || !nk) {
        free(k);
        C->oom = 1;
        return;
    }
    l->key = nk;
    l->v[l->n] = v;
    l->key[l->n] = k;
    if (sset_add(&l->set, k) < 0) {
        free(k);
        C->oom = 1;
        return;
    }
    l->n++;
}

static void vpush(comp *C, vlist *l, const cJSON *v) { vpush_key(C, l, v, NULL); }

static int vhas_key(const vlist *l, const char *k) { return sset_has(&l->set, k); }

/* JSON Schema equality: cJSON_Compare, except that numbers compare by value
 * exactly (cJSON uses an epsilon) and true/1 stay distinct (cJSON does). */
static int json_type_of(const cJSON *v) {
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsObject(v)) return T_OBJ;
    if (cJSON_IsArray(v)) return T_ARR;
    if (cJSON_IsString(v)) return T_STR;
    return T_NUM;
}

/* ---- the compiler ------------------------------------------------------------------------ */

static int32_t compile_conj(comp *C, conj *c);

static int32_t compile_node(comp *C, const cJSON *n) {
    conj c = {0};
    flatten(C, &c, n, 0);
    int32_t r = compile_conj(C, &c);
    conj_free(&c);
    return r;
}

typedef struct {
    int types;
    int int_only, frac_only; /* numbers: integers only / non-integers only */
    /* numbers */
    char lo[GRAM_JSON_NUMBER_MAX + 1], hi[GRAM_JSON_NUMBER_MAX + 1];
    int has_lo, has_hi, lo_excl, hi_excl;
    const char *mult[8];
    char mult_buf[8][128];
    int n_mult;
    /* strings */
    long min_len, max_len; /* max -1: none */
    const char *patterns[32];
    const cJSON *pattern_at[32];
    int n_patterns;
    const char *formats[8];
    const cJSON *format_at[8];
    int n_formats;
    /* arrays */
    long min_items, max_items;
    /* exclusions: not const/enum, not pattern, not multipleOf, not required */
    vlist excluded;
    const char *not_pattern[8];
    const cJSON *not_pattern_at[8];
    int n_not_pattern;
    char not_mult[4][128];
    int n_not_mult;
    const char *forbid[16];
    int n_forbid;
} facts;

static void tighten_lo(facts *f, const char *v, int excl) {
    if (!f->has_lo) {
        snprintf(f->lo, sizeof f->lo, "%s", v);
        f->has_lo = 1;
        f->lo_excl = excl;
        return;
    }
    int c = gram_dec_cmp(v, f->lo);
    if (c > 0 || (c == 0 && excl)) {
        snprintf(f->lo, sizeof f->lo, "%s", v);
        f->lo_excl = excl;
    }
}

static void tighten_hi(facts *f, const char *v, int excl) {
    if (!f->has_hi) {
        snprintf(f->hi, sizeof f->hi, "%s", v);
        f->has_hi = 1;
        f->hi_excl = excl;
        return;
    }
    int c = gram_dec_cmp(v, f->hi);
    if (c < 0 || (c == 0 && excl)) {
        snprintf(f->hi, sizeof f->hi, "%s", v);
        f->hi_excl = excl;
    }
}

static int num_text(const cJSON *v, char *buf, size_t cap) {
    if (!cJSON_IsNumber(v)) return -1;
    if (v->valuestring) return snprintf(buf, cap, "%s", v->valuestring) < (int)cap ? 0 : -1;
    return gram_canon_double(v->valuedouble, buf, cap) < 0 ? -1 : 0;
}

/* A number's text (num_text) is zero: no nonzero digit before the exponent. */
static int zero_text(const char *t) {
    for (; *t && *t != 'e' && *t != 'E'; t++)
        if (*t >= '1' && *t <= '9') return 0;
    return 1;
}

/* "type" is a JSON Schema type name or a non-empty array of them (draft 3's
 * "any" too): a misspelt one ("strin") would otherwise allow nothing there,
 * silently. */
static int type_names_valid(const cJSON *t) {
    static const char *const names[] = {"null", "boolean", "object", "array", "string", "number", "integer", "any", NULL};
    if (cJSON_IsString(t)) return in_list(names, t->valuestring);
    if (!cJSON_IsArray(t) || !t->child) return 0;
    for (const cJSON *e = t->child; e; e = e->next)
        if (!cJSON_IsString(e) || !in_list(names, e->valuestring)) return 0;
    return 1;
}

static int type_bits(const cJSON *t, int *int_only) {
    int bits = 0, has_num = 0, has_int = 0;
    const cJSON *one = t;
    int is_arr = cJSON_IsArray(t);
    for (const cJSON *e = is_arr ? t->child : one; e; e = is_arr ? e->next : NULL) {
        if (!cJSON_IsString(e)) continue;
        const char *s = e->valuestring;
        if (!strcmp(s, "null")) bits |= T_NULL;
        else if (!strcmp(s, "boolean")) bits |= T_BOOL;
        else if (!strcmp(s, "object")) bits |= T_OBJ;
        else if (!strcmp(s, "array")) bits |= T_ARR;
        else if (!strcmp(s, "string")) bits |= T_STR;
        else if (!strcmp(s, "number")) bits |= T_NUM, has_num = 1;
        else if (!strcmp(s, "integer")) bits |= T_NUM, has_int = 1;
        else if (!strcmp(s, "any")) bits |= T_ALL, has_num = 1; /* draft 3 */
        if (!is_arr) break;
    }
    *int_only = has_int && !has_num;
    return bits;
}

/* The least common multiple of two positive canonical decimals a and b
 * (a/10^s and b/10^t: lcm of the scaled integers, over 10^max(s,t)) into out
 * (128 bytes): 1, or 0 when either is too long or the result's automaton
 * would be large.
 * multipleOf a and multipleOf b hold together exactly when multipleOf
 * lcm(a, b) holds, and one remainder automaton is far smaller than the
 * product of two. */
static int mult_lcm(const char *a, const char *b, char *out) {
    const char *in[2] = {a, b};
    unsigned __int128 v[2];
    int sc[2];
    for (int k = 0; k < 2; k++) {
        const char *dot = strchr(in[k], '.');
        sc[k] = dot ? (int)strlen(dot + 1) : 0;
        v[k] = 0;
        int digits = 0;
        for (const char *p = in[k]; *p; p++) {
            if (*p == '.') continue;
            if (++digits > 18) return 0;
            v[k] = v[k] * 10 + (unsigned)(*p - '0');
        }
        if (!v[k]) return 0;
    }
    int S = sc[0] > sc[1] ? sc[0] : sc[1];
    if (S > 18) return 0;
    for (int k = 0; k < 2; k++)
        for (int i = sc[k]; i < S; i++) v[k] *= 10;
    unsigned __int128 x = v[0], y = v[1];
    while (y) {
        unsigned __int128 t = x % y;
        x = y, y = t;
    }
    unsigned __int128 l = v[0] / x * v[1];
    /* only when the one remainder automaton stays small (gram_number_dfa's bound): otherwise
     * two automata intersected with the range are smaller (bounds cut the remainders short) */
    if (l * (unsigned __int128)(S + 2) > 200000) return 0;
    /* l / 10^S as canonical decimal text */
    char digits[64];
    int nd = 0;
    for (unsigned __int128 t = l; t; t /= 10) digits[nd++] = (char)('0' + (int)(t % 10));
    char txt[80];
    int o = 0;
    if (nd <= S) {
        txt[o++] = '0';
        txt[o++] = '.';
        for (int i = 0; i < S - nd; i++) txt[o++] = '0';
        for (int i = nd - 1; i >= 0; i--) txt[o++] = digits[i];
    } else {
        for (int i = nd - 1; i >= 0; i--) {
            txt[o++] = digits[i];
            if (i == S && S) txt[o++] = '.';
        }
    }
    txt[o] = 0;
    /* canonical: no trailing fraction zeros */
    if (strchr(txt, '.')) {
        while (o > 0 && txt[o - 1] == '0') txt[--o] = 0;
        if (o > 0 && txt[o - 1] == '.') txt[--o] = 0;
    }
    snprintf(out, 128, "%s", txt);
    return 1;
}

/* A count keyword's value (minLength, maxItems, ...) rounded into range
 * (up: towards the next integer, for minimums), clamped to
 * [0, GRAM_COUNT_MAX + 1] so that any huge value (1e300 too) stays huge
 * without overflowing; -1 when v is not a number. */
static long count_kw(const cJSON *v, int up) {
    if (!cJSON_IsNumber(v)) return -1;
    double x = v->valuedouble;
    if (!(x > 0)) return 0; /* negative, zero, NaN */
    if (x > (double)GRAM_COUNT_MAX) return GRAM_COUNT_MAX + 1L;
    return (long)(up ? ceil(x) : floor(x));
}

/* Gather the facts of a conjunction (types, bounds, patterns...); reports
 * unsupported "not" forms. */
static void gather(comp *C, const conj *c, facts *f) {
    memset(f, 0, sizeof *f);
    f->types = T_ALL;
    f->max_len = -1;
    f->max_items = -1;
    for (int i = 0; i < c->n; i++) {
        const cJSON *n = c->v[i].node;
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *t = kw(n, "type");
        if (t) {
            int io;
            int b = type_bits(t, &io);
            if (!type_names_valid(t))
                refuse(C, "'type' at %s must be one of null, boolean, object, array, number, string, integer "
                       "(or a non-empty array of them)", path_of(C, n));
            f->types &= b;
            if (io) f->int_only = 1;
        }
        char buf[GRAM_JSON_NUMBER_MAX + 1];
        const cJSON *v;
        const cJSON *emax = kw(n, "exclusiveMaximum"), *emin = kw(n, "exclusiveMinimum");
        if ((v = kw(n, "minimum")) && !num_text(v, buf, sizeof buf)) tighten_lo(f, buf, cJSON_IsTrue(emin));
        if ((v = kw(n, "maximum")) && !num_text(v, buf, sizeof buf)) tighten_hi(f, buf, cJSON_IsTrue(emax));
        if (emin && !num_text(emin, buf, sizeof buf)) tighten_lo(f, buf, 1);
        if (emax && !num_text(emax, buf, sizeof buf)) tighten_hi(f, buf, 1);
        if ((v = kw(n, "multipleOf")) && !num_text(v, buf, sizeof buf) && (buf[0] == '-' || zero_text(buf)))
            refuse(C, "'multipleOf' at %s is %s: it must be greater than 0", path_of(C, n), buf);
        else if (v && !num_text(v, buf, sizeof buf)) {
            if (strlen(buf) >= sizeof f->mult_buf[0]) unsupported(C, "multipleOf with more than 127 digits", n);
            else if (f->n_mult && mult_lcm(f->mult[f->n_mult - 1], buf, f->mult_buf[f->n_mult - 1]))
                f->mult[f->n_mult - 1] = f->mult_buf[f->n_mult - 1]; /* one multipleOf for both: their lcm */
            else if (f->n_mult < 8) {
                memcpy(f->mult_buf[f->n_mult], buf, strlen(buf) + 1); /* fits: checked above */
                f->mult[f->n_mult] = f->mult_buf[f->n_mult];
                f->n_mult++;
            } else unsupported(C, "multipleOf (more than 8 that have no small common multiple)", n);
        }
        long x;
        if ((x = count_kw(kw(n, "minLength"), 1)) >= 0 && x > f->min_len) f->min_len = x;
        if ((x = count_kw(kw(n, "maxLength"), 0)) >= 0 && (f->max_len < 0 || x < f->max_len)) f->max_len = x;
        if ((v = kw(n, "pattern")) && cJSON_IsString(v)) {
            if (f->n_patterns < 32) {
                f->pattern_at[f->n_patterns] = n;
                f->patterns[f->n_patterns++] = v->valuestring;
            } else unsupported(C, "pattern (too many)", n);
        }
        if ((v = kw(n, "format")) && cJSON_IsString(v) && !C->opt.format_annotation) {
            if (f->n_formats < 8) {
                f->format_at[f->n_formats] = n;
                f->formats[f->n_formats++] = v->valuestring;
            } else unsupported(C, "format (more than 8 on one value)", n);
        }
        if ((x = count_kw(kw(n, "minItems"), 1)) >= 0 && x > f->min_items) f->min_items = x;
        if ((x = count_kw(kw(n, "maxItems"), 0)) >= 0 && (f->max_items < 0 || x < f->max_items)) f->max_items = x;
        const cJSON *no = kw(n, "not");
        if (no) {
            /* supported: not of a boolean schema, of {type}, of {const}/{enum} (primitives) */
            if (cJSON_IsTrue(no) || (cJSON_IsObject(no) && !no->child)) f->types = 0;
            else if (cJSON_IsFalse(no)) {
            } else if (cJSON_IsObject(no)) {
                int ok = 1, tb = 0, io = 0;
                const cJSON *nt = kw(no, "type"), *nc = kw(no, "const"), *ne = kw(no, "enum");
                const cJSON *nr = kw(no, "required"), *np = kw(no, "pattern"), *nm = kw(no, "multipleOf");
                int n_kw = 0;
                for (const cJSON *k = no->child; k; k = k->next)
                    if (!in_list((const char *const[]){"title", "description", "$comment", NULL}, k->string)) n_kw++;
                int tio = 0, ttb = nt ? type_bits(nt, &tio) : 0;
                if (nr && cJSON_IsArray(nr) && cJSON_GetArraySize(nr) == 1 && cJSON_IsString(nr->child) &&
                    n_kw == 1 + (nt != NULL) && (!nt || ttb == T_OBJ) && f->n_forbid < 16) {
                    /* not {required: [k]}: objects without k (anything else has k "vacuously") */
                    f->types &= T_OBJ;
                    f->forbid[f->n_forbid++] = nr->child->valuestring;
                } else if (np && cJSON_IsString(np) && n_kw == 1 + (nt != NULL) && (!nt || ttb == T_STR) &&
                           f->n_not_pattern < 8) {
                    f->types &= T_STR;
                    f->not_pattern_at[f->n_not_pattern] = n;
                    f->not_pattern[f->n_not_pattern++] = np->valuestring;
                } else if (nm && n_kw == 1 + (nt != NULL) && (!nt || (ttb == T_NUM && !tio)) && f->n_not_mult < 4 &&
                           !num_text(nm, f->not_mult[f->n_not_mult], sizeof f->not_mult[0]) &&
                           f->not_mult[f->n_not_mult][0] != '-' && strcmp(f->not_mult[f->n_not_mult], "0")) {
                    f->types &= T_NUM;
                    f->n_not_mult++;
                } else {
                for (const cJSON *k = no->child; k; k = k->next)
                    if (strcmp(k->string, "type") && strcmp(k->string, "const") && strcmp(k->string, "enum") &&
                        !in_list((const char *const[]){"title", "description", "$comment", NULL}, k->string))
                        ok = 0;
                if (ok && nt && (nc || ne)) ok = 0;
                if (ok && nt) {
                    tb = type_bits(nt, &io);
                    if (io) {
                        /* not integer: numbers with a fraction remain */
                        f->types &= ~(tb & ~T_NUM);
                        f->frac_only = 1;
                    } else f->types &= ~tb;
                }
                if (ok && (nc || ne)) {
                    if (nc) {
                        if (json_type_of(nc) & (T_OBJ | T_ARR)) ok = 0;
                        else vpush(C, &f->excluded, nc);
                    }
                    if (ne && cJSON_IsArray(ne))
                        for (const cJSON *e = ne->child; e && ok; e = e->next) {
                            if (json_type_of(e) & (T_OBJ | T_ARR)) ok = 0;
                            else vpush(C, &f->excluded, e);
                        }
                }
                }
                if (!ok) unsupported(C, "not", n);
            }
        }
    }
    if (f->min_len > GRAM_COUNT_MAX || f->max_len > GRAM_COUNT_MAX) {
        /* counted strings keep the count in 26 bits */
        too_large(C, f->min_len > GRAM_COUNT_MAX ? "minLength above 67108863" : "maxLength above 67108863", c->v[0].node);
        f->types &= ~T_STR;
    }
    if (f->max_len >= 0 && f->min_len > f->max_len) f->types &= ~T_STR;
    if (f->int_only && f->frac_only) f->types &= ~T_NUM;
    if (f->max_items >= 0 && f->min_items > f->max_items) f->types &= ~T_ARR;
}

/* canon_text: a primitive's canonical text (its equality key too) */
static int excluded_has(const facts *f, const char *canon_text, comp *C) {
    (void)C;
    return vhas_key(&f->excluded, canon_text);
}

/* String content DFA (no quotes) from the facts' patterns and formats; NULL
 * content means "any".  Length is enforced by a counted rule. */
/* ---- shared automata ------------------------------------------------------------------------ */

/* A pattern's automaton over canonical string content, made once per
 * compilation (schemas repeat their patterns).  rc: 0, -1 out of memory,
 * -2 too large, -3 unsupported syntax (err says why). */
struct pat_ent {
    char *pattern;
    int rc;
    char *err;
    gram_dfa dfa;
};

static const struct pat_ent *pattern_dfa(comp *C, const char *pattern) {
    for (int i = 0; i < C->n_pats; i++)
        if (!strcmp(C->pats[i].pattern, pattern)) return &C->pats[i];
    struct pat_ent *np = grow(C->pats, &C->cap_pats, C->n_pats + 1, sizeof *np);
    if (!np) {
        C->oom = 1;
        return NULL;
    }
    C->pats = np;
    struct pat_ent *e = &C->pats[C->n_pats];
    memset(e, 0, sizeof *e);
    e->pattern = xstrdup(C, pattern);
    if (!e->pattern) return NULL;
    C->n_pats++;
    gram_nfa n;
    gram_nfa_init(&n);
    gram_frag fr;
    char err[256];
    if (gram_regex(&n, pattern, &fr, err, sizeof err)) {
        e->rc = -3;
        e->err = xstrdup(C, err);
    } else {
        n.tag[fr.end] = 0;
        e->rc = nfa_to_dfa(C, &n, fr.start, NULL, NULL, &e->dfa);
        if (e->rc == -1) C->oom = 1;
    }
    gram_nfa_free(&n);
    return e;
}

/* Any canonical string content, and its quoted form (a key that can be anything). */
static int any_strings(comp *C) {
    if (C->have_any) return 0;
    gram_nfa n;
    gram_nfa_init(&n);
    gram_frag f = gram_frag_star(&n, gram_frag_cp_range(&n, 0, 0x10FFFF));
    n.tag[f.end] = 0;
    int rc = nfa_to_dfa(C, &n, f.start, NULL, NULL, &C->any_content);
    gram_nfa_free(&n);
    if (rc == -2) { /* the work budget is spent (a pattern before took it): too large, not out of memory */
        if (!C->too_big) over_limit(C, "the any-string automaton exceeds %d states", max_states(C));
        return -1;
    }
    if (rc) {
        C->oom = 1;
        return -1;
    }
    if (gram_dfa_quote(&C->any_content, &C->any_key)) {
        gram_dfa_free(&C->any_content);
        C->oom = 1;
        return -1;
    }
    C->have_any = 1;
    return 0;
}

/* The DFA of the canonical texts of the excluded values of one type, or rc 1 when there are none. */
static int excluded_dfa(comp *C, const facts *f, int type, gram_dfa *out) {
    int n = 0;
    for (int i = 0; i < f->excluded.n; i++) n += json_type_of(f->excluded.v[i]) == type;
    if (!n) return 1;
    char **t = calloc((size_t)n, sizeof *t);
    size_t *l = calloc((size_t)n, sizeof *l);
    int k = 0, rc = -1;
    if (t && l) {
        for (int i = 0; i < f->excluded.n && !C->oom; i++)
            if (json_type_of(f->excluded.v[i]) == type && (t[k] = canon_value(C, f->excluded.v[i]))) l[k] = strlen(t[k]), k++;
        rc = C->oom ? -1 : gram_dfa_literals((const char *const *)t, l, NULL, k, max_states(C), out);
    }
    for (int i = 0; i < k; i++) free(t[i]);
    free(t);
    free(l);
    if (rc == -1) C->oom = 1;
    return rc;
}

/* d minus the literals of excluded values of one type (0, or -1 on failure, recorded). */
static int remove_excluded(comp *C, const facts *f, int type, gram_dfa *d, const cJSON *where) {
    gram_dfa ex, cx, t;
    int rc = excluded_dfa(C, f, type, &ex);
    if (rc == 1) return 0;
    if (!rc) {
        rc = gram_dfa_complement(&ex, &cx);
        gram_dfa_free(&ex);
        if (!rc) {
            rc = dfa_and(C, d, &cx, &t);
            gram_dfa_free(&cx);
            if (!rc) {
                gram_dfa_free(d);
                *d = t;
            }
        }
    }
    if (rc == -2) too_large(C, "automaton too large after excluding values (not const/enum)", where);
    else if (rc) C->oom = 1;
    return rc ? -1 : 0;
}

static int string_content_dfa(comp *C, const facts *f, gram_dfa *out, int *any) {
    *any = 1;
    int have = 0;
    for (int i = 0; i < f->n_patterns + f->n_formats; i++) {
        gram_dfa d;
        int rc;
        const cJSON *at = i < f->n_patterns ? f->pattern_at[i] : f->format_at[i - f->n_patterns];
        if (i < f->n_patterns) {
            const struct pat_ent *pe = pattern_dfa(C, f->patterns[i]);
            if (!pe) return -1;
            if (pe->rc == -3) {
                char *msg = xasprintf(C, "pattern /%s/ (%s)", f->patterns[i], pe->err ? pe->err : "");
                if (msg) unsupported(C, msg, at);
                free(msg);
                continue;
            }
            rc = pe->rc ? pe->rc : gram_dfa_copy(&pe->dfa, &d);
        } else {
            int known;
            const char *fmt = f->formats[i - f->n_patterns];
            rc = gram_format_dfa(fmt, max_states(C), &d, &known);
            if (known == -1) {
                char *msg = xasprintf(C, "format \"%s\"", fmt);
                if (msg) unsupported(C, msg, at);
                free(msg);
                continue;
            }
            if (!known) continue;
        }
        if (rc == -2) {
            too_large(C, "pattern automaton too large", at ? at : C->doc);
            continue;
        }
        if (rc) {
            C->oom = 1;
            return -1;
        }
        if (!have) {
            *out = d;
            have = 1;
        } else {
            gram_dfa t;
            rc = dfa_and(C, out, &d, &t);
            gram_dfa_free(&d);
            if (rc) {
                if (rc == -2) too_large(C, "pattern intersection too large", at ? at : C->doc);
                else C->oom = 1;
                continue;
            }
            gram_dfa_free(out);
            *out = t;
        }
        *any = 0;
    }
    /* not {pattern}: intersect with the complement (within string content) */
    for (int i = 0; i < f->n_not_pattern; i++) {
        gram_nfa n;
        gram_nfa_init(&n);
        gram_frag fr;
        char e[256];
        if (gram_regex(&n, f->not_pattern[i], &fr, e, sizeof e)) {
            char *msg = xasprintf(C, "not pattern /%s/ (%s)", f->not_pattern[i], e);
            if (msg) unsupported(C, msg, f->not_pattern_at[i]);
            free(msg);
            gram_nfa_free(&n);
            continue;
        }
        n.tag[fr.end] = 0;
        gram_dfa pd, cd, t;
        int rc = nfa_to_dfa(C, &n, fr.start, NULL, NULL, &pd);
        gram_nfa_free(&n);
        if (rc) {
            if (rc == -2) too_large(C, "not pattern automaton too large", f->not_pattern_at[i]);
            else C->oom = 1;
            continue;
        }
        rc = gram_dfa_complement(&pd, &cd);
        gram_dfa_free(&pd);
        if (rc) {
            C->oom = 1;
            continue;
        }
        if (*any) {
            /* complement over all bytes: keep valid string content only */
            gram_nfa an;
            gram_nfa_init(&an);
            gram_frag af = gram_frag_star(&an, gram_frag_cp_range(&an, 0, 0x10FFFF));
            an.tag[af.end] = 0;
            gram_dfa ad;
            rc = nfa_to_dfa(C, &an, af.start, NULL, NULL, &ad);
            gram_nfa_free(&an);
            if (!rc) {
                rc = dfa_and(C, &ad, &cd, out);
                gram_dfa_free(&ad);
            }
            if (!rc) *any = 0;
        } else {
            rc = dfa_and(C, out, &cd, &t);
            if (!rc) {
                gram_dfa_free(out);
                *out = t;
            }
        }
        gram_dfa_free(&cd);
        if (rc) {
            if (rc == -2) too_large(C, "not pattern automaton too large", f->not_pattern_at[i]);
            else C->oom = 1;
        }
    }
    return 0;
}

/* A string rule: '"' content '"', counted when lengths are bounded. */
static int32_t string_rule(comp *C, const facts *f) {
    gram_dfa content, quoted;
    int any;
    if (string_content_dfa(C, f, &content, &any)) return -1;
    if (any && any_strings(C)) return -1;
    int rc = gram_dfa_quote(any ? &C->any_content : &content, &quoted);
    if (!any) gram_dfa_free(&content);
    if (rc) {
        C->oom = 1;
        return -1;
    }
    int32_t id = new_rule(C);
    if (id < 0) {
        gram_dfa_free(&quoted);
        return -1;
    }
    C->work += (long)quoted.n_states * quoted.n_classes;
    /* not {const/enum} of strings: take the literals out */
    remove_excluded(C, f, T_STR, &quoted, C->doc);
    gram_rule *r = &C->g->rules[id];
    r->kind = GRAM_FA;
    r->fa = quoted;
    if (f->min_len > 0 || f->max_len >= 0) {
        r->counted = 1;
        r->min_count = f->min_len;
        r->max_count = f->max_len;
    }
    return id;
}

/* Number DFA for the facts. */
static int number_dfa(comp *C, const facts *f, const cJSON *where, gram_dfa *out) {
    memset(out, 0, sizeof *out);
    if (over_work(C)) return -1;
    gram_num_spec sp = {.lo = f->has_lo ? f->lo : NULL, .hi = f->has_hi ? f->hi : NULL, .lo_excl = f->lo_excl,
                        .hi_excl = f->hi_excl, .integer = f->int_only, .frac_only = f->frac_only,
                        .multiple_of = f->n_mult ? f->mult[0] : NULL, .max_work = max_work(C) - C->work + 1,
                        .work = &C->work};
    char e[256];
    int rc = gram_number_dfa(&sp, out, e, sizeof e);
    over_work(C);
    if (rc == -2) {
        too_large(C, e, where);
        return -1;
    }
    if (rc) {
        C->oom = 1;
        return -1;
    }
    for (int i = 0; i < f->n_not_mult; i++) {
        gram_num_spec m = {.integer = f->int_only, .multiple_of = f->not_mult[i], .max_work = max_work(C) - C->work + 1,
                           .work = &C->work};
        gram_dfa d, cd, t;
        rc = gram_number_dfa(&m, &d, e, sizeof e);
        over_work(C);
        if (!rc) {
            rc = gram_dfa_complement(&d, &cd);
            gram_dfa_free(&d);
            if (!rc) {
                rc = dfa_and(C, out, &cd, &t);
                gram_dfa_free(&cd);
                if (!rc) {
                    gram_dfa_free(out);
                    *out = t;
                }
            }
        }
        if (rc) {
            if (rc == -2) too_large(C, "not multipleOf automaton too large", where);
            else C->oom = 1;
            gram_dfa_free(out);
            return -1;
        }
    }
    if (C->opt.gen_limits) {
        /* multipleOf with a factor 5 in its denominator (0.01, 0.1, 0.3...):
         * validators divide in floating point, and 4.1 / 0.01 is not integral
         * there.  Integer multiples always divide exactly (below 2^53), so
         * sample those when there are any. */
        int decimal_mult = 0;
        for (int i = 0; i < f->n_mult; i++) {
            const char *dot = strchr(f->mult[i], '.');
            if (!dot) continue;
            /* m = a / 10^s: dyadic iff a is divisible by 5^s */
            int sc = (int)strlen(dot + 1);
            unsigned long long a = 0;
            for (const char *p = f->mult[i]; *p; p++)
                if (*p != '.' && a < 1000000000000ull) a = a * 10 + (unsigned)(*p - '0');
            for (int k = 0; k < sc; k++) {
                if (a % 5) {
                    decimal_mult = 1;
                    break;
                }
                a /= 5;
            }
        }
        if (decimal_mult && !f->int_only) {
            gram_dfa ints, t;
            gram_num_spec is = {.integer = 1};
            char e2[64];
            if (!gram_number_dfa(&is, &ints, e2, sizeof e2)) {
                if (!dfa_and(C, out, &ints, &t)) {
                    if (!gram_dfa_empty(&t)) {
                        gram_dfa_free(out);
                        *out = t;
                    } else gram_dfa_free(&t);
                }
                gram_dfa_free(&ints);
            }
        }
        /* digit caps for sampling: wide enough for every bound of the schema */
        int idig = 18, fdig = 15;
        const char *texts[10] = {f->has_lo ? f->lo : NULL, f->has_hi ? f->hi : NULL};
        for (int i = 0; i < f->n_mult && i < 8; i++) texts[2 + i] = f->mult[i];
        for (int i = 0; i < 10; i++) {
            if (!texts[i]) continue;
            const char *t = texts[i] + (texts[i][0] == '-');
            const char *dot = strchr(t, '.');
            int il = dot ? (int)(dot - t) : (int)strlen(t), fl = dot ? (int)strlen(dot + 1) : 0;
            if (il + 1 > idig) idig = il + 1;
            if (fl + 2 > fdig) fdig = fl + 2;
        }
        char pat[128];
        snprintf(pat, sizeof pat, "^-?(0|[1-9][0-9]{0,%d})(\\.[0-9]{1,%d})?$", idig - 1, fdig);
        gram_nfa n;
        gram_nfa_init(&n);
        gram_frag fr;
        gram_dfa cap, t;
        int ok = !gram_regex(&n, pat, &fr, e, sizeof e);
        if (ok) {
            n.tag[fr.end] = 0;
            ok = !nfa_to_dfa(C, &n, fr.start, NULL, NULL, &cap);
        }
        gram_nfa_free(&n);
        if (ok) {
            ok = !dfa_and(C, out, &cap, &t);
            gram_dfa_free(&cap);
            if (ok) {
                gram_dfa_free(out);
                *out = t;
            }
        }
        if (!ok) {
            C->oom = 1;
            gram_dfa_free(out);
            return -1;
        }
    }
    for (int i = 1; i < f->n_mult; i++) {
        gram_num_spec m = {.integer = f->int_only, .multiple_of = f->mult[i], .max_work = max_work(C) - C->work + 1,
                           .work = &C->work};
        gram_dfa d, t;
        rc = gram_number_dfa(&m, &d, e, sizeof e);
        over_work(C);
        if (!rc) {
            rc = dfa_and(C, out, &d, &t);
            gram_dfa_free(&d);
            if (!rc) {
                gram_dfa_free(out);
                *out = t;
            }
        }
        if (rc) {
            if (rc == -2) too_large(C, "multipleOf automaton too large", where);
            else C->oom = 1;
            gram_dfa_free(out);
            return -1;
        }
    }
    return 0;
}

static int32_t compile_object(comp *C, const conj *c, const facts *f);
static int32_t string_leaf(comp *C, const facts *f);
static void array_frag(comp *C, const conj *c, const facts *f, gram_nfa *n, int32_t s, int32_t e);

/* Values of enum/const across the conjunction; returns 1 when restricted. */
static int gather_values(comp *C, const conj *c, vlist *out) {
    int restricted = 0;
    for (int i = 0; i < c->n && !C->oom; i++) {
        if (c->v[i].flags & F_NOENUM) continue;
        const cJSON *n = c->v[i].node;
        const cJSON *cv = kw(n, "const"), *ev = kw(n, "enum");
        if (!cv && !cJSON_IsArray(ev)) continue;
        vlist here = {0};
        if (cJSON_IsArray(ev))
            for (const cJSON *x = ev->child; x && !C->oom; x = x->next) vpush(C, &here, x);
        if (cv) {
            /* const and enum: the const, when the enum has it */
            char *k = gram_json_value_key(cv);
            int keep = k && (!cJSON_IsArray(ev) || vhas_key(&here, k));
            if (!k) C->oom = 1;
            vfree(&here);
            if (keep) vpush_key(C, &here, cv, k);
            else free(k);
        }
        if (!restricted) {
            vfree(out);
            *out = here;
            restricted = 1;
        } else {
            vlist kept = {0};
            for (int j = 0; j < out->n; j++)
                if (vhas_key(&here, out->key[j])) {
                    vpush_key(C, &kept, out->v[j], out->key[j]);
                    out->key[j] = NULL;
                }
            vfree(out);
            vfree(&here);
            *out = kept;
        }
    }
    return restricted;
}

/* A const schema for a structured value: properties/prefixItems of consts. */
static cJSON *const_schema(comp *C, const cJSON *v) {
    cJSON *s = cJSON_CreateObject();
    if (!s) return NULL;
    if (cJSON_IsObject(v)) {
        cJSON_AddStringToObject(s, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(s, "properties");
        cJSON *req = cJSON_AddArrayToObject(s, "required");
        for (const cJSON *k = v->child; k; k = k->next) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddItemToObject(p, "const", cJSON_Duplicate(k, 1));
            cJSON_AddItemToObject(props, k->string, p);
            cJSON_AddItemToArray(req, cJSON_CreateString(k->string));
        }
        cJSON_AddFalseToObject(s, "additionalProperties");
    } else {
        cJSON_AddStringToObject(s, "type", "array");
        cJSON *pi = cJSON_AddArrayToObject(s, "prefixItems");
        int n = 0;
        for (const cJSON *k = v->child; k; k = k->next, n++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddItemToObject(p, "const", cJSON_Duplicate(k, 1));
            cJSON_AddItemToArray(pi, p);
        }
        cJSON_AddFalseToObject(s, "items");
        cJSON_AddNumberToObject(s, "minItems", n);
    }
    return s;
}

static void set_values(comp *C, int32_t id, char **vals, int n, int decision) {
    if (id < 0) {
        for (int i = 0; i < n; i++) free(vals[i]);
        free(vals);
        return;
    }
    C->g->rules[id].values = vals;
    C->g->rules[id].n_values = n;
    C->g->rules[id].decision = (uint8_t)decision;
}

static void compile_enum(comp *C, const conj *c, const facts *f, const vlist *vals, int32_t id) {
    gram_nfa n;
    gram_nfa_init(&n);
    int32_t s = gram_nfa_state(&n), e = gram_nfa_state(&n);
    gram_dfa ndfa = {0};
    int have_s = 0, have_n = 0, all_prim = 1, n_lit = 0;
    char **texts = NULL;
    int32_t str_rule = -1;
    for (int i = 0; i < vals->n && !C->oom; i++) {
        const cJSON *v = vals->v[i];
        int t = json_type_of(v);
        if (!(f->types & t)) continue;
        if (t & (T_OBJ | T_ARR)) {
            all_prim = 0;
            /* conj' = members without their enum/const, plus the value's const schema */
            conj c2 = {0};
            for (int k = 0; k < c->n; k++) conj_push(C, &c2, c->v[k].node, c->v[k].flags | F_NOENUM);
            cJSON *cs = const_schema(C, v);
            if (!cs) {
                C->oom = 1;
                conj_free(&c2);
                break;
            }
            own(C, cs);
            node_info *inf = info_get(&C->info, cs, 1);
            if (inf) {
                inf->path = xstrdup(C, path_of(C, c->v[0].node));
                inf->base = xstrdup(C, base_of(C, c->v[0].node));
            }
            flatten(C, &c2, cs, 0);
            int32_t r = compile_conj(C, &c2);
            conj_free(&c2);
            if (r >= 0) {
                int32_t a = gram_nfa_state(&n), b = gram_nfa_state(&n);
                gram_nfa_edge_add(&n, a, b, GRAM_SYM_CALL + r, GRAM_SYM_CALL + r);
                gram_nfa_edge_add(&n, s, a, -1, -1);
                gram_nfa_edge_add(&n, b, e, -1, -1);
            }
            continue;
        }
        char *txt = canon_value(C, v);
        if (!txt) continue;
        int ok = 1;
        if (t == T_NUM) {
            if (f->int_only && strchr(txt, '.')) ok = 0;
            if (f->frac_only && !strchr(txt, '.')) ok = 0;
            if (ok && (f->has_lo || f->has_hi || f->n_mult)) {
                if (!have_n) have_n = number_dfa(C, f, c->v[0].node, &ndfa) == 0 ? 1 : -1;
                ok = have_n == 1 && gram_dfa_match(&ndfa, txt, strlen(txt));
            }
        } else if (t == T_STR) {
            if (f->n_patterns || f->n_formats || f->min_len > 0 || f->max_len >= 0) {
                if (!have_s) {
                    str_rule = string_leaf(C, f);
                    have_s = str_rule >= 0 ? 1 : -1;
                }
                if (have_s == 1) {
                    gram_rule *sr = &C->g->rules[str_rule];
                    ok = gram_dfa_match(&sr->fa, txt, strlen(txt));
                    if (ok && sr->counted) {
                        /* count code points of the value */
                        long cps = 0;
                        const cJSON *sv = v;
                        for (const unsigned char *p = (const unsigned char *)sv->valuestring; *p; p++)
                            cps += (*p & 0xC0) != 0x80;
                        ok = cps >= sr->min_count && (sr->max_count < 0 || cps <= sr->max_count);
                    }
                } else ok = 0;
            }
        }
        if (ok && excluded_has(f, txt, C)) ok = 0;
        if (!ok) {
            free(txt);
            continue;
        }
        gram_frag fr = gram_frag_bytes(&n, txt, strlen(txt));
        gram_nfa_edge_add(&n, s, fr.start, -1, -1);
        gram_nfa_edge_add(&n, fr.end, e, -1, -1);
        char **nt = realloc(texts, (size_t)(n_lit + 1) * sizeof *nt);
        if (!nt) {
            free(txt);
            C->oom = 1;
            break;
        }
        texts = nt;
        texts[n_lit++] = txt;
    }
    if (have_n == 1) gram_dfa_free(&ndfa);
    if (all_prim && !C->oom) {
        /* literals only: a trie, no subset construction (enums run to thousands of values) */
        size_t *lens = calloc((size_t)n_lit + 1, sizeof *lens);
        gram_dfa d;
        int rc = -1;
        if (lens) {
            for (int i = 0; i < n_lit; i++) lens[i] = strlen(texts[i]);
            rc = gram_dfa_literals((const char *const *)texts, lens, NULL, n_lit, max_states(C), &d);
        }
        free(lens);
        if (rc == -2) too_large(C, "enum automaton too large", c->n ? c->v[0].node : C->doc);
        else if (rc) C->oom = 1;
        else {
            C->work += (long)d.n_states * d.n_classes;
            C->g->rules[id].kind = GRAM_FA;
            C->g->rules[id].fa = d;
        }
    } else set_fa(C, id, &n, (gram_frag){s, e}, c->n ? c->v[0].node : C->doc);
    gram_nfa_free(&n);
    int is_bool = n_lit > 0;
    for (int i = 0; i < n_lit; i++) is_bool &= !strcmp(texts[i], "true") || !strcmp(texts[i], "false");
    if (all_prim && n_lit > 1) set_values(C, id, texts, n_lit, is_bool ? GRAM_DEC_BOOL : GRAM_DEC_ENUM);
    else {
        for (int i = 0; i < n_lit; i++) free(texts[i]);
        free(texts);
    }
}

/* Integers in [lo, hi] when there are at most 64 of them. */
static void int_values(comp *C, const facts *f, const gram_dfa *d, int32_t id) {
    C->g->rules[id].decision = GRAM_DEC_INT; /* values listed below when there are few */
    if (!f->has_lo || !f->has_hi) return;
    double lo = ceil(strtod(f->lo, NULL)), hi = floor(strtod(f->hi, NULL));
    if (!(hi - lo <= 64) || hi < lo || fabs(lo) > 1e15 || fabs(hi) > 1e15) return;
    char **vals = NULL;
    int n = 0;
    for (double x = lo; x <= hi; x++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.0f", x == 0 ? 0.0 : x);
        if (!gram_dfa_match(d, buf, strlen(buf))) continue;
        char **nv = realloc(vals, (size_t)(n + 1) * sizeof *nv);
        if (!nv) break;
        vals = nv;
        vals[n] = strdup(buf);
        if (!vals[n]) break;
        n++;
    }
    if (n > 1) set_values(C, id, vals, n, GRAM_DEC_INT);
    else {
        for (int i = 0; i < n; i++) free(vals[i]);
        free(vals);
        C->g->rules[id].decision = GRAM_DEC_INT;
    }
}

/* ---- shared leaf rules -------------------------------------------------------------------- */

/* Strings and numbers with the same facts are one rule: most schemas say
 * "type": "string" dozens of times, and each automaton costs a subset
 * construction.  The key is every fact the automaton depends on. */
struct leaf_ent {
    char *key;
    int32_t rule;
};

static int32_t *leaf_slot(comp *C, const char *key) {
    if ((C->leaf_n + 1) * 2 > C->leaf_cap) {
        size_t nc = C->leaf_cap ? C->leaf_cap * 2 : 64;
        struct leaf_ent *nl = calloc(nc, sizeof *nl);
        if (!nl) {
            C->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < C->leaf_cap; i++)
            if (C->leaves[i].key) {
                size_t k = (size_t)blob_hash(C->leaves[i].key, (uint32_t)strlen(C->leaves[i].key)) & (nc - 1);
                while (nl[k].key) k = (k + 1) & (nc - 1);
                nl[k] = C->leaves[i];
            }
        free(C->leaves);
        C->leaves = nl;
        C->leaf_cap = nc;
    }
    size_t k = (size_t)blob_hash(key, (uint32_t)strlen(key)) & (C->leaf_cap - 1);
    while (C->leaves[k].key) {
        if (!strcmp(C->leaves[k].key, key)) return &C->leaves[k].rule;
        k = (k + 1) & (C->leaf_cap - 1);
    }
    C->leaves[k].key = xstrdup(C, key);
    if (!C->leaves[k].key) return NULL;
    C->leaves[k].rule = -1;
    C->leaf_n++;
    return &C->leaves[k].rule;
}

typedef struct {
    char *s;
    size_t n, cap;
} buf_t;

static void bput_s(buf_t *b, comp *C, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        size_t nc = (b->n + l + 1) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            C->oom = 1;
            free(b->s);
            b->s = NULL;
            b->n = b->cap = 0;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, l + 1);
    b->n += l;
}

static void key_add(buf_t *b, comp *C, const char *tag, const char *s) {
    bput_s(b, C, tag);
    char n[24];
    snprintf(n, sizeof n, "%zu:", strlen(s));
    bput_s(b, C, n);
    bput_s(b, C, s);
}

static void key_excluded(buf_t *b, comp *C, const facts *f, int type) {
    for (int i = 0; i < f->excluded.n; i++)
        if (json_type_of(f->excluded.v[i]) == type) {
            char *t = canon_value(C, f->excluded.v[i]);
            if (t) key_add(b, C, "x", t);
            free(t);
        }
}

static int32_t string_leaf(comp *C, const facts *f) {
    buf_t b = {0};
    char n[64];
    snprintf(n, sizeof n, "S%ld,%ld", f->min_len, f->max_len);
    bput_s(&b, C, n);
    for (int i = 0; i < f->n_patterns; i++) key_add(&b, C, "p", f->patterns[i]);
    for (int i = 0; i < f->n_formats; i++) key_add(&b, C, "f", f->formats[i]);
    for (int i = 0; i < f->n_not_pattern; i++) key_add(&b, C, "n", f->not_pattern[i]);
    key_excluded(&b, C, f, T_STR);
    int32_t *slot = b.s ? leaf_slot(C, b.s) : NULL;
    free(b.s);
    if (!slot) return -1;
    if (*slot < 0) *slot = string_rule(C, f);
    return *slot;
}

static int number_dfa(comp *C, const facts *f, const cJSON *where, gram_dfa *out);
static void int_values(comp *C, const facts *f, const gram_dfa *d, int32_t id);

/* The number automaton of the facts, excluded literals removed (0 or -1). */
static int number_excl_dfa(comp *C, const facts *f, const cJSON *where, gram_dfa *ndfa) {
    if (number_dfa(C, f, where, ndfa)) return -1;
    if (!remove_excluded(C, f, T_NUM, ndfa, where)) return 0;
    gram_dfa_free(ndfa);
    return -1;
}

static int32_t number_leaf(comp *C, const facts *f, const cJSON *where) {
    buf_t b = {0};
    char n[64];
    snprintf(n, sizeof n, "N%d%d%d%d%d%d", f->int_only, f->frac_only, f->has_lo, f->lo_excl, f->has_hi, f->hi_excl);
    bput_s(&b, C, n);
    if (f->has_lo) key_add(&b, C, "l", f->lo);
    if (f->has_hi) key_add(&b, C, "h", f->hi);
    for (int i = 0; i < f->n_mult; i++) key_add(&b, C, "m", f->mult[i]);
    for (int i = 0; i < f->n_not_mult; i++) key_add(&b, C, "n", f->not_mult[i]);
    key_excluded(&b, C, f, T_NUM);
    int32_t *slot = b.s ? leaf_slot(C, b.s) : NULL;
    free(b.s);
    if (!slot) return -1;
    if (*slot >= 0) return *slot;
    gram_dfa d;
    if (number_excl_dfa(C, f, where, &d)) return -1;
    int32_t id = new_rule(C);
    if (id < 0) {
        gram_dfa_free(&d);
        return -1;
    }
    C->g->rules[id].fa = d;
    if (f->int_only) int_values(C, f, &C->g->rules[id].fa, id);
    *slot = id; /* nothing above touched the leaf table */
    return id;
}

/* d plus a call of each rules[i] from its start state, returning to a new
 * final state (an alternative that is another rule).  0, or -1 out of memory. */
static int dfa_calls_at_start(gram_dfa *d, const int32_t *rules, int n) {
    int S = d->n_states, nc = d->n_classes;
    int32_t *next = realloc(d->next, ((size_t)S + 1) * (size_t)nc * sizeof *next);
    if (!next) return -1;
    d->next = next;
    int32_t *label = realloc(d->label, ((size_t)S + 1) * sizeof *label);
    if (!label) return -1;
    d->label = label;
    for (int c = 0; c < nc; c++) d->next[(size_t)S * nc + c] = -1;
    d->label[S] = 0;
    free(d->call_off);
    free(d->calls);
    d->call_off = calloc((size_t)S + 2, sizeof *d->call_off);
    d->calls = malloc((size_t)n * sizeof *d->calls);
    if (!d->call_off || !d->calls) return -1;
    for (int s = 1; s <= S + 1; s++) d->call_off[s] = n;
    for (int i = 0; i < n; i++) d->calls[i] = (gram_call){rules[i], S};
    d->n_calls = n;
    d->n_states = S + 1;
    return 0;
}

static void compile_base(comp *C, const conj *c, int32_t id) {
    facts f;
    gather(C, c, &f);
    for (int i = 0; i < c->n; i++)
        if (!ref_holder(C, &c->v[i])) check_keywords(C, c->v[i].node, f.max_items);
    vlist vals = {0};
    if (gather_values(C, c, &vals)) {
        compile_enum(C, c, &f, &vals, id);
        vfree(&vals);
        vfree(&f.excluded);
        return;
    }
    vfree(&vals);
    const char *lit_names[3] = {"null", "true", "false"};
    int lit_types[3] = {T_NULL, T_BOOL, T_BOOL};
    const char *lit_use[3];
    size_t lit_len[3];
    int n_lit = 0;
    char **bool_vals = NULL;
    int n_bool = 0;
    for (int i = 0; i < 3; i++) {
        if (!(f.types & lit_types[i]) || excluded_has(&f, lit_names[i], C)) continue;
        lit_use[n_lit] = lit_names[i];
        lit_len[n_lit++] = strlen(lit_names[i]);
        if (lit_types[i] == T_BOOL) {
            char **nb = realloc(bool_vals, (size_t)(n_bool + 1) * sizeof *nb);
            if (nb) {
                bool_vals = nb;
                bool_vals[n_bool] = strdup(lit_names[i]);
                if (bool_vals[n_bool]) n_bool++;
            }
        }
    }
    /* one kind of value: the rule is that value's rule (shared leaves, the object) */
    const cJSON *where = c->n ? c->v[0].node : C->doc;
    int kinds = !!(f.types & (T_NULL | T_BOOL)) + !!(f.types & T_NUM) + !!(f.types & T_STR) + !!(f.types & T_ARR) +
                !!(f.types & T_OBJ);
    int32_t num = f.types & T_NUM ? number_leaf(C, &f, where) : -1;
    int32_t str = f.types & T_STR ? string_leaf(C, &f) : -1;
    int32_t calls[3];
    int n_calls = 0;
    if (kinds == 1 && (num >= 0 || str >= 0) && !C->oom) {
        C->alias[id] = num >= 0 ? num : str;
        goto out;
    }
    if (f.types & T_ARR) {
        /* the array: the whole rule when it is the only kind, else a rule of its own */
        int32_t arr = kinds == 1 ? id : new_rule(C);
        gram_nfa n;
        gram_nfa_init(&n);
        int32_t as = gram_nfa_state(&n), ae = gram_nfa_state(&n);
        array_frag(C, c, &f, &n, as, ae);
        set_fa(C, arr, &n, (gram_frag){as, ae}, where);
        gram_nfa_free(&n);
        if (kinds == 1 || arr < 0) goto out;
        calls[n_calls++] = arr;
    }
    if (f.types & T_OBJ) {
        int32_t obj = compile_object(C, c, &f);
        if (obj < 0) goto out;
        if (kinds == 1 && !C->oom) {
            C->alias[id] = obj; /* the value is just the object */
            goto out;
        }
        calls[n_calls++] = obj;
    }
    if (str >= 0 && C->g->rules[str].counted) calls[n_calls++] = str;
    /* the leaves (literals, numbers, strings) as one product of DFAs, the rest called from the start;
     * rules are all made by now, so pointers into them stay put */
    {
        gram_dfa lit = {0}, d = {0};
        const gram_dfa *parts[3];
        int32_t base[3] = {0, 0, 0};
        int k = 0, rc = 0;
        if (n_lit) {
            rc = gram_dfa_literals(lit_use, lit_len, NULL, n_lit, max_states(C), &lit);
            if (!rc) parts[k++] = &lit;
        }
        if (!rc && num >= 0) parts[k++] = &C->g->rules[num].fa;
        if (!rc && str >= 0 && !C->g->rules[str].counted) parts[k++] = &C->g->rules[str].fa;
        if (!rc) rc = k ? gram_dfa_union(parts, base, k, NULL, NULL, max_states(C), &d)
                        : gram_dfa_literals(NULL, NULL, NULL, 0, max_states(C), &d);
        if (n_lit) gram_dfa_free(&lit);
        if (!rc && n_calls) rc = dfa_calls_at_start(&d, calls, n_calls);
        if (rc == -2) too_large(C, "value automaton too large", where);
        else if (rc) C->oom = 1;
        else {
            C->work += (long)d.n_states * d.n_classes;
            C->g->rules[id].kind = GRAM_FA;
            C->g->rules[id].fa = d;
            if (f.types == T_BOOL && n_bool > 1) {
                set_values(C, id, bool_vals, n_bool, GRAM_DEC_BOOL);
                bool_vals = NULL;
                n_bool = 0;
            }
        }
    }
out:
    for (int i = 0; i < n_bool; i++) free(bool_vals[i]);
    free(bool_vals);
    vfree(&f.excluded);
}

/* ---- arrays ------------------------------------------------------------------------------- */

/* The conjunction for array position pos (pos >= prefix lengths: "rest"). */
static int32_t item_rule(comp *C, const conj *c, long pos) {
    conj ic = {0};
    for (int i = 0; i < c->n && !C->oom; i++) {
        const cJSON *n = c->v[i].node;
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *pi = kw(n, "prefixItems"), *items = kw(n, "items"), *addl = kw(n, "additionalItems");
        const cJSON *prefix = cJSON_IsArray(pi) ? pi : cJSON_IsArray(items) ? items : NULL;
        const cJSON *rest = NULL;
        if (prefix == pi && prefix) rest = items;             /* 2020: items after prefixItems */
        else if (prefix == items && prefix) rest = addl;      /* <= 2019: additionalItems after items[] */
        else if (!prefix) rest = items;                       /* items: schema for all */
        if (prefix && pos < cJSON_GetArraySize(prefix)) flatten(C, &ic, cJSON_GetArrayItem(prefix, (int)pos), 0);
        else if (rest) flatten(C, &ic, rest, 0);
    }
    int32_t r = compile_conj(C, &ic);
    conj_free(&ic);
    return r;
}

static long prefix_len(comp *C, const conj *c) {
    long k = 0;
    for (int i = 0; i < c->n; i++) {
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *pi = kw(c->v[i].node, "prefixItems"), *items = kw(c->v[i].node, "items");
        const cJSON *prefix = cJSON_IsArray(pi) ? pi : cJSON_IsArray(items) ? items : NULL;
        if (prefix && cJSON_GetArraySize(prefix) > k) k = cJSON_GetArraySize(prefix);
    }
    return k;
}

/* Flexible whitespace: up to GRAM_WS_MAX of [ \t\n\r] after state s; returns
 * the state after them (s itself when whitespace is compact). */
static int32_t ws_after(comp *C, gram_nfa *n, int32_t s) {
    if (!C->opt.ws_flexible) return s;
    int32_t e = gram_nfa_state(n), cur = s;
    gram_nfa_edge_add(n, s, e, -1, -1);
    for (int i = 0; i < GRAM_WS_MAX; i++) {
        int32_t nx = gram_nfa_state(n);
        gram_nfa_edge_add(n, cur, nx, ' ', ' ');
        gram_nfa_edge_add(n, cur, nx, '\t', '\n');
        gram_nfa_edge_add(n, cur, nx, '\r', '\r');
        gram_nfa_edge_add(n, nx, e, -1, -1);
        cur = nx;
    }
    return e;
}

static void array_frag(comp *C, const conj *c, const facts *f, gram_nfa *n, int32_t s, int32_t e) {
    long K = prefix_len(C, c), min = f->min_items, max = f->max_items;
    long U = K > min ? K : min; /* positions unrolled */
    if (max >= 0 && U > max) U = max;
    if (max > 4096) {
        /* too large to unroll: unsupported (permissive: unbounded, a superset) */
        unsupported(C, "maxItems above 4096", c->v[0].node);
        max = -1;
    }
    if (U > 4096) {
        too_large(C, "minItems/prefixItems above 4096", c->v[0].node);
        return;
    }
    int32_t open = gram_nfa_state(n);
    gram_nfa_edge_add(n, s, open, '[', '[');
    open = ws_after(C, n, open);
    if (min == 0) gram_nfa_edge_add(n, open, e, ']', ']');
    if (max == 0) return;
    /* positions 0 .. last explicit; then a loop (max < 0) or more explicit ones */
    long last = max >= 0 ? max - 1 : U; /* explicit positions 0..last; when max<0, position U loops */
    int32_t before = open;              /* state before item p (after '[' or ',') */
    for (long p = 0; p <= last && !n->oom && !C->oom; p++) {
        int32_t rule = item_rule(C, c, p < K ? p : K);
        int32_t after0 = gram_nfa_state(n);
        if (rule >= 0) gram_nfa_edge_add(n, before, after0, GRAM_SYM_CALL + rule, GRAM_SYM_CALL + rule);
        int32_t after = ws_after(C, n, after0);
        if (p + 1 >= min) gram_nfa_edge_add(n, after, e, ']', ']');
        if (max < 0 && p == U) {
            /* the loop: after the rest item, ',' leads to another rest item and
             * only to that ("before" may also allow ']' right after '[': going
             * back there would accept "[1,]") */
            int32_t comma = gram_nfa_state(n);
            gram_nfa_edge_add(n, after, comma, ',', ',');
            int32_t again = ws_after(C, n, comma);
            if (rule >= 0) gram_nfa_edge_add(n, again, after0, GRAM_SYM_CALL + rule, GRAM_SYM_CALL + rule);
            break;
        }
        if (max >= 0 && p + 1 >= max) break;
        int32_t comma = gram_nfa_state(n);
        gram_nfa_edge_add(n, after, comma, ',', ',');
        before = ws_after(C, n, comma);
    }
}

/* ---- objects ------------------------------------------------------------------------------ */

typedef struct {
    const char *pattern;
    const cJSON *schema;
    int member;
    gram_dfa dfa; /* content */
    int ok;
} pat_info;

typedef struct {
    comp *C;
    int n_decl;
    int n_pat;
    /* pattern-set classes */
    uint64_t *classes; /* (n_class, pw) */
    int n_class, cap_class, pw;
    int oom;
} key_lab;

enum { TAG_ADDL = 0, TAG_PAT = 1 }; /* TAG_PAT + j; declared i: TAG_PAT + n_pat + i */

static int32_t key_labeller(const int32_t *tags, int n_tags, void *u) {
    key_lab *L = u;
    if (!n_tags) return -1;
    for (int i = 0; i < n_tags; i++)
        if (tags[i] >= TAG_PAT + L->n_pat) return tags[i] - TAG_PAT - L->n_pat;
    uint64_t set[8] = {0};
    for (int i = 0; i < n_tags; i++)
        if (tags[i] >= TAG_PAT) set[(tags[i] - TAG_PAT) / 64] |= 1ull << ((tags[i] - TAG_PAT) % 64);
    for (int k = 0; k < L->n_class; k++)
        if (!memcmp(&L->classes[(size_t)k * L->pw], set, (size_t)L->pw * 8)) return L->n_decl + k;
    if (L->n_class == L->cap_class) {
        int nc = L->cap_class ? L->cap_class * 2 : 8;
        uint64_t *ncl = realloc(L->classes, (size_t)nc * (size_t)L->pw * 8);
        if (!ncl) {
            L->oom = 1;
            return -1;
        }
        L->classes = ncl;
        L->cap_class = nc;
    }
    memcpy(&L->classes[(size_t)L->n_class * L->pw], set, (size_t)L->pw * 8);
    return L->n_decl + L->n_class++;
}

/* Names in first-seen order, with their index by name. */
typedef struct {
    char **v;
    int n, cap;
    smap idx;
    int oom;
} slist;

static int slist_find(slist *l, const char *s) {
    int32_t *slot = smap_slot(&l->idx, s, 0, &l->oom);
    return slot ? *slot : -1;
}

static void slist_add(comp *C, slist *l, const char *s) {
    int32_t *slot = smap_slot(&l->idx, s, 1, &C->oom);
    if (!slot || *slot >= 0) return;
    char **nv = grow(l->v, &l->cap, l->n + 1, sizeof *nv);
    if (!nv) {
        C->oom = 1;
        return;
    }
    l->v = nv;
    l->v[l->n] = xstrdup(C, s);
    if (l->v[l->n]) *slot = l->n++;
}

/* canonical JSON string content of s (no quotes) */
static char *key_content(comp *C, const char *s) {
    size_t l;
    char *q = gram_json_string(s, strlen(s), &l);
    if (!q) {
        C->oom = 1; /* cJSON only hands out valid UTF-8 */
        return NULL;
    }
    memmove(q, q + 1, l - 2);
    q[l - 2] = 0;
    return q;
}

/* The language of property names allowed by a propertyNames conjunction, as
 * a DFA over the quoted key.  Returns 0 (out set), 1 when any name is
 * allowed, -1 when no name is (*none = 1) or the form is unsupported. */
static int key_name_dfa(comp *C, conj *pn, gram_dfa *out, int *none) {
    *none = 0;
    if (pn->is_false) {
        *none = 1;
        return -1;
    }
    for (int i = 0; i < pn->n; i++) {
        if (ref_holder(C, &pn->v[i])) continue;
        for (const cJSON *k = pn->v[i].node->child; k; k = k->next)
            if (!in_list(kw_known, k->string) || !strcmp(k->string, "anyOf") || !strcmp(k->string, "oneOf") ||
                !strcmp(k->string, "properties") || !strcmp(k->string, "items")) {
                /* object/array keywords never apply to a name; anything else we cannot turn into a name language */
                if (!strcmp(k->string, "properties") || !strcmp(k->string, "items") || !strcmp(k->string, "required") ||
                    !strcmp(k->string, "additionalProperties") || !strcmp(k->string, "minimum") ||
                    !strcmp(k->string, "maximum") || !strcmp(k->string, "minItems") || !strcmp(k->string, "maxItems"))
                    continue;
                unsupported(C, "propertyNames (beyond type/pattern/format/length/enum)", pn->v[i].node);
                return -1;
            }
    }
    facts pf;
    gather(C, pn, &pf);
    vlist vals = {0};
    int restricted = gather_values(C, pn, &vals);
    int rc = -1;
    if (!(pf.types & T_STR)) {
        *none = 1;
        goto out;
    }
    if (pf.min_len > 256 || pf.max_len > 256) {
        unsupported(C, "propertyNames (lengths above 256)", pn->v[0].node);
        goto out;
    }
    gram_nfa n;
    gram_nfa_init(&n);
    int32_t s = gram_nfa_state(&n), e = gram_nfa_state(&n);
    gram_frag q1 = gram_frag_bytes(&n, "\"", 1), q2 = gram_frag_bytes(&n, "\"", 1);
    gram_nfa_edge_add(&n, s, q1.start, -1, -1);
    gram_frag body;
    if (restricted) {
        int32_t bs = gram_nfa_state(&n), be = gram_nfa_state(&n);
        for (int i = 0; i < vals.n; i++) {
            if (!cJSON_IsString(vals.v[i])) continue;
            char *t = canon_value(C, vals.v[i]);
            if (!t) continue;
            gram_frag fr = gram_frag_bytes(&n, t + 1, strlen(t) - 2);
            gram_nfa_edge_add(&n, bs, fr.start, -1, -1);
            gram_nfa_edge_add(&n, fr.end, be, -1, -1);
            free(t);
        }
        body = (gram_frag){bs, be};
    } else body = gram_frag_string_len(&n, pf.min_len, pf.max_len);
    gram_frag fr = gram_frag_cat(&n, gram_frag_cat(&n, q1, body), q2);
    gram_nfa_edge_add(&n, fr.end, e, -1, -1);
    n.tag[e] = 0;
    rc = nfa_to_dfa(C, &n, s, NULL, NULL, out);
    gram_nfa_free(&n);
    if (rc) {
        if (rc == -2) too_large(C, "propertyNames automaton too large", pn->v[0].node);
        else C->oom = 1;
        rc = -1;
        goto out;
    }
    if (restricted && (pf.min_len > 0 || pf.max_len >= 0)) {
        gram_nfa ln;
        gram_nfa_init(&ln);
        gram_frag a = gram_frag_bytes(&ln, "\"", 1), b = gram_frag_bytes(&ln, "\"", 1);
        gram_frag lf = gram_frag_cat(&ln, gram_frag_cat(&ln, a, gram_frag_string_len(&ln, pf.min_len, pf.max_len)), b);
        ln.tag[lf.end] = 0;
        gram_dfa ld, t;
        if (!nfa_to_dfa(C, &ln, lf.start, NULL, NULL, &ld)) {
            if (!dfa_and(C, out, &ld, &t)) {
                gram_dfa_free(out);
                *out = t;
            }
            gram_dfa_free(&ld);
        }
        gram_nfa_free(&ln);
    }
    /* patterns and formats */
    gram_dfa content;
    int any;
    if (!string_content_dfa(C, &pf, &content, &any) && !any) {
        gram_nfa qn;
        gram_nfa_init(&qn);
        gram_frag a = gram_frag_bytes(&qn, "\"", 1), b = gram_frag_bytes(&qn, "\"", 1);
        gram_frag qf = gram_frag_cat(&qn, gram_frag_cat(&qn, a, gram_frag_dfa(&qn, &content)), b);
        qn.tag[qf.end] = 0;
        gram_dfa qd, t;
        if (!nfa_to_dfa(C, &qn, qf.start, NULL, NULL, &qd)) {
            if (!dfa_and(C, out, &qd, &t)) {
                gram_dfa_free(out);
                *out = t;
            }
            gram_dfa_free(&qd);
        }
        gram_nfa_free(&qn);
        gram_dfa_free(&content);
    }
    rc = 0;
out:
    vfree(&vals);
    vfree(&pf.excluded);
    return rc;
}

struct key_ent {
    char *key;         /* the names and patterns, as key_add writes them */
    gram_dfa dfa;
    int n_class;       /* key_lab's pattern-set classes */
    uint64_t *classes; /* (n_class, pw) */
};

static int32_t compile_object(comp *C, const conj *c, const facts *fa) {
    int32_t id = new_rule(C);
    if (id < 0) return -1;
    slist names = {0};
    pat_info *pats = NULL;
    int n_pat = 0;
    long min_props = -1, max_props = -1;
    /* declared names and patterns */
    for (int i = 0; i < c->n && !C->oom; i++) {
        const cJSON *n = c->v[i].node;
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *p = kw(n, "properties"), *r = kw(n, "required"), *pp = kw(n, "patternProperties");
        const cJSON *dr = kw(n, "dependentRequired"), *dp = kw(n, "dependencies");
        if (cJSON_IsObject(p))
            for (const cJSON *k = p->child; k; k = k->next) slist_add(C, &names, k->string);
        if (cJSON_IsArray(r))
            for (const cJSON *k = r->child; k; k = k->next)
                if (cJSON_IsString(k)) slist_add(C, &names, k->valuestring);
        const cJSON *deps[2] = {dr, dp};
        for (int d = 0; d < 2; d++)
            if (cJSON_IsObject(deps[d]))
                for (const cJSON *k = deps[d]->child; k; k = k->next)
                    if (cJSON_IsArray(k)) {
                        slist_add(C, &names, k->string);
                        for (const cJSON *x = k->child; x; x = x->next)
                            if (cJSON_IsString(x)) slist_add(C, &names, x->valuestring);
                    }
        if (cJSON_IsObject(pp))
            for (const cJSON *k = pp->child; k; k = k->next) {
                pat_info *np = realloc(pats, (size_t)(n_pat + 1) * sizeof *np);
                if (!np) {
                    C->oom = 1;
                    break;
                }
                pats = np;
                pat_info *pi = &pats[n_pat++];
                memset(pi, 0, sizeof *pi);
                pi->pattern = k->string;
                pi->schema = k;
                pi->member = i;
                if (n_pat > 500) continue; /* refused below */
                const struct pat_ent *pe = pattern_dfa(C, k->string);
                if (!pe) break;
                if (pe->rc == -3) {
                    char *msg = xasprintf(C, "patternProperties /%s/ (%s)", k->string, pe->err ? pe->err : "");
                    if (msg) unsupported(C, msg, n);
                    free(msg);
                } else if (pe->rc == -2) too_large(C, "patternProperties automaton too large", n);
                else if (!pe->rc) {
                    if (gram_dfa_copy(&pe->dfa, &pi->dfa)) C->oom = 1;
                    else pi->ok = 1;
                }
            }
        long x;
        if ((x = count_kw(kw(n, "minProperties"), 1)) >= 0 && x > min_props) min_props = x;
        if ((x = count_kw(kw(n, "maxProperties"), 0)) >= 0 && (max_props < 0 || x < max_props)) max_props = x;
    }
    for (int i = 0; i < fa->n_forbid; i++) slist_add(C, &names, fa->forbid[i]);
    if (names.n > MAX_DECL) {
        /* each key-automaton state keeps a bit per declared name */
        too_large(C, "more than 2048 declared property names in one object", c->v[0].node);
        goto done;
    }
    if (min_props > GRAM_COUNT_MAX || max_props > GRAM_COUNT_MAX) {
        too_large(C, min_props > GRAM_COUNT_MAX ? "minProperties above 67108863" : "maxProperties above 67108863",
                  c->v[0].node);
        if (min_props > GRAM_COUNT_MAX) min_props = GRAM_COUNT_MAX;
        if (max_props > GRAM_COUNT_MAX) max_props = GRAM_COUNT_MAX;
    }
    if (n_pat > 500) {
        too_large(C, "patternProperties (more than 500)", c->v[0].node);
        goto done;
    }
    int n_decl = names.n;
    gram_obj *o = calloc(1, sizeof *o);
    if (!o) {
        C->oom = 1;
        goto done;
    }
    C->g->rules[id].kind = GRAM_OBJ;
    C->g->rules[id].obj = o;
    o->n_decl = n_decl;
    o->ordered = C->opt.gen_objects != 0;
    o->n_words = (n_decl + o->ordered + 63) / 64; /* ordered: bit n_decl, an undeclared key was seen */
    o->min_props = (int)min_props;
    o->max_props = (int)max_props;
    o->track_count = min_props > 0 || max_props >= 0;
    o->decl_names = calloc((size_t)n_decl + 1, sizeof *o->decl_names);
    o->required = calloc((size_t)o->n_words + 1, sizeof *o->required);
    o->dep_off = calloc((size_t)n_decl + 1, sizeof *o->dep_off);
    if (!o->decl_names || !o->required || !o->dep_off) {
        C->oom = 1;
        goto done;
    }
    for (int i = 0; i < n_decl; i++) o->decl_names[i] = xstrdup(C, names.v[i]);
    /* required and dependencies */
    {
        int32_t *cnt = calloc((size_t)n_decl + 1, sizeof *cnt);
        int32_t **lists = calloc((size_t)n_decl + 1, sizeof *lists);
        if (!cnt || !lists) {
            free(cnt);
            free(lists);
            C->oom = 1;
            goto done;
        }
        for (int i = 0; i < c->n; i++) {
            const cJSON *n = c->v[i].node;
            if (ref_holder(C, &c->v[i])) continue;
            const cJSON *r = kw(n, "required");
            if (cJSON_IsArray(r))
                for (const cJSON *k = r->child; k; k = k->next)
                    if (cJSON_IsString(k)) {
                        int d = slist_find(&names, k->valuestring);
                        o->required[d / 64] |= 1ull << (d % 64);
                    }
            const cJSON *deps2[2] = {kw(n, "dependentRequired"), kw(n, "dependencies")};
            for (int dd = 0; dd < 2; dd++)
                if (cJSON_IsObject(deps2[dd]))
                    for (const cJSON *k = deps2[dd]->child; k; k = k->next)
                        if (cJSON_IsArray(k)) {
                            int d = slist_find(&names, k->string);
                            for (const cJSON *x = k->child; x; x = x->next)
                                if (cJSON_IsString(x)) {
                                    int32_t *nl = realloc(lists[d], (size_t)(cnt[d] + 1) * sizeof *nl);
                                    if (!nl) {
                                        C->oom = 1;
                                        continue;
                                    }
                                    lists[d] = nl;
                                    lists[d][cnt[d]++] = slist_find(&names, x->valuestring);
                                }
                        }
        }
        int total = 0;
        for (int i = 0; i < n_decl; i++) total += cnt[i];
        o->dep = malloc(((size_t)total + 1) * sizeof *o->dep);
        if (!o->dep) C->oom = 1;
        int w = 0;
        for (int i = 0; i < n_decl; i++) {
            o->dep_off[i] = w;
            for (int k = 0; k < cnt[i] && o->dep; k++) o->dep[w++] = lists[i][k];
            free(lists[i]);
        }
        o->dep_off[n_decl] = w;
        o->has_deps = w > 0;
        free(cnt);
        free(lists);
    }
    /* key automaton: declared literals, patterns, any string, as one product
     * (the same names and patterns come back in many conjunctions: made once) */
    {
        int k = 0, rc = 0;
        key_lab L = {.C = C, .n_decl = n_decl, .n_pat = n_pat, .pw = (n_pat + 63) / 64 ? (n_pat + 63) / 64 : 1};
        if (L.pw > 8) L.pw = 8;
        buf_t kk = {0};
        for (int i = 0; i < n_decl; i++) key_add(&kk, C, "n", names.v[i]);
        for (int j = 0; j < n_pat; j++) key_add(&kk, C, pats[j].ok ? "p" : "-", pats[j].pattern);
        if (!kk.s) bput_s(&kk, C, "");
        struct key_ent *ke = NULL;
        int32_t *kslot = kk.s ? smap_slot(&C->key_map, kk.s, 0, &C->oom) : NULL;
        if (kslot && *kslot >= 0) ke = &C->keys[*kslot];
        if (ke) {
            if (gram_dfa_copy(&ke->dfa, &o->key)) C->oom = 1;
            L.n_class = L.cap_class = ke->n_class;
            L.classes = malloc(((size_t)ke->n_class * (size_t)L.pw + 1) * sizeof *L.classes);
            if (!L.classes) C->oom = 1;
            else memcpy(L.classes, ke->classes, (size_t)ke->n_class * (size_t)L.pw * sizeof *L.classes);
            free(kk.s);
            kk.s = NULL;
        }
        gram_dfa *parts = calloc((size_t)n_pat + 2, sizeof *parts);
        const gram_dfa **ds = calloc((size_t)n_pat + 2, sizeof *ds);
        int32_t *base = calloc((size_t)n_pat + 2, sizeof *base);
        char **q = calloc((size_t)n_decl + 1, sizeof *q);
        size_t *ql = calloc((size_t)n_decl + 1, sizeof *ql);
        int32_t *lab = calloc((size_t)n_decl + 1, sizeof *lab);
        int n_parts = 0;
        if (!parts || !ds || !base || !q || !ql || !lab || any_strings(C)) C->oom = 1;
        for (int i = 0; i < n_decl && !C->oom && !ke; i++) {
            q[i] = gram_json_string(names.v[i], strlen(names.v[i]), &ql[i]);
            lab[i] = i;
            if (!q[i]) C->oom = 1;
        }
        if (!C->oom && n_decl && !ke) {
            rc = gram_dfa_literals((const char *const *)q, ql, lab, n_decl, max_states(C), &parts[n_parts]);
            if (!rc) ds[k] = &parts[n_parts++], base[k++] = TAG_PAT + n_pat;
        }
        for (int j = 0; j < n_pat && !C->oom && !rc && !ke; j++) {
            if (!pats[j].ok) continue;
            rc = gram_dfa_quote(&pats[j].dfa, &parts[n_parts]);
            if (!rc) ds[k] = &parts[n_parts++], base[k++] = TAG_PAT + j;
        }
        if (!C->oom && !rc && !ke) ds[k] = &C->any_key, base[k++] = TAG_ADDL;
        if (!C->oom && !rc && !ke) {
            rc = gram_dfa_union(ds, base, k, key_labeller, &L, max_states(C), &o->key);
            if (!rc) C->work += (long)o->key.n_states * o->key.n_classes;
            struct key_ent *nk = rc || !kk.s ? NULL : grow(C->keys, &C->cap_keys, C->n_keys + 1, sizeof *nk);
            if (nk) {
                C->keys = nk;
                struct key_ent *e = &C->keys[C->n_keys];
                e->key = kk.s;
                kk.s = NULL;
                e->n_class = L.n_class;
                e->classes = malloc(((size_t)L.n_class * (size_t)L.pw + 1) * sizeof *e->classes);
                if (!e->classes || gram_dfa_copy(&o->key, &e->dfa)) {
                    free(e->classes);
                    free(e->key);
                    C->oom = 1;
                } else {
                    memcpy(e->classes, L.classes, (size_t)L.n_class * (size_t)L.pw * sizeof *e->classes);
                    int32_t *ns = smap_slot(&C->key_map, e->key, 1, &C->oom);
                    if (ns) *ns = C->n_keys;
                    C->n_keys++;
                }
            }
        }
        free(kk.s);
        for (int i = 0; i < n_parts; i++) gram_dfa_free(&parts[i]);
        for (int i = 0; i < n_decl && q; i++) free(q[i]);
        free(parts);
        free(ds);
        free(base);
        free(q);
        free(ql);
        free(lab);
        if (rc == -2) too_large(C, "property-name automaton too large", c->v[0].node);
        else if (rc || L.oom) C->oom = 1;
        /* propertyNames */
        if (!rc && !C->oom) {
            conj pn = {0};
            int any_pn = 0;
            for (int i = 0; i < c->n; i++) {
                if (ref_holder(C, &c->v[i])) continue;
                const cJSON *p = kw(c->v[i].node, "propertyNames");
                if (p) {
                    flatten(C, &pn, p, 0);
                    any_pn = 1;
                }
            }
            if (any_pn) {
                gram_dfa names_dfa;
                int none = 0;
                if (key_name_dfa(C, &pn, &names_dfa, &none) == 0) {
                    gram_dfa kd;
                    if (!dfa_and(C, &o->key, &names_dfa, &kd)) {
                        gram_dfa_free(&o->key);
                        o->key = kd;
                    } else C->oom = 1;
                    gram_dfa_free(&names_dfa);
                } else if (none) {
                    /* no key allowed at all */
                    gram_dfa_free(&o->key);
                    gram_nfa e;
                    gram_nfa_init(&e);
                    int32_t es = gram_nfa_state(&e);
                    if (gram_dfa_from_nfa(&e, es, NULL, NULL, 10, &o->key)) C->oom = 1;
                    gram_nfa_free(&e);
                }
            }
            conj_free(&pn);
        }
        o->n_labels = n_decl + L.n_class;
        o->label_rule = malloc(((size_t)o->n_labels + 1) * sizeof *o->label_rule);
        if (!o->label_rule) {
            C->oom = 1;
            free(L.classes);
            goto done;
        }
        /* value rules */
        for (int i = 0; i < n_decl && !C->oom; i++) {
            conj vc = {0};
            char *kc = key_content(C, names.v[i]);
            for (int m = 0; m < c->n; m++) {
                if (ref_holder(C, &c->v[m])) continue;
                const cJSON *mn = c->v[m].node;
                const cJSON *p = kw(mn, "properties");
                const cJSON *ps = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, names.v[i]) : NULL;
                /* cJSON_GetObjectItemCaseSensitive finds the first of duplicate keys: fine */
                int matched = 0;
                if (ps) flatten(C, &vc, ps, 0), matched = 1;
                for (int j = 0; j < n_pat; j++)
                    if (pats[j].member == m && pats[j].ok && kc && gram_dfa_match(&pats[j].dfa, kc, strlen(kc))) {
                        flatten(C, &vc, pats[j].schema, 0);
                        matched = 1;
                    }
                const cJSON *ad = kw(mn, "additionalProperties");
                if (!matched && ad) flatten(C, &vc, ad, 0);
            }
            free(kc);
            int forbidden = 0;
            for (int k = 0; k < fa->n_forbid; k++) forbidden |= !strcmp(fa->forbid[k], names.v[i]);
            o->label_rule[i] = vc.is_false || forbidden ? -1 : compile_conj(C, &vc);
            conj_free(&vc);
        }
        /* generation semantics: a member that lists properties (or patterns) and says
         * nothing of other keys allows no other key — unless that leaves fewer usable
         * declared keys than minProperties needs (the schema would accept nothing) */
        int close = C->opt.gen_objects;
        if (close && min_props > 0) {
            uint8_t *has = calloc((size_t)n_decl + 1, 1);
            int usable = 0;
            if (!has) C->oom = 1;
            for (int s = 0; has && s < o->key.n_states; s++)
                if (o->key.label[s] >= 0 && o->key.label[s] < n_decl) has[o->key.label[s]] = 1;
            for (int i = 0; has && i < n_decl; i++) usable += has[i] && o->label_rule[i] >= 0;
            free(has);
            if (usable < min_props) close = 0;
        }
        if (close && L.n_class) {
            o->gen_closed = calloc((size_t)o->n_labels + 1, 1);
            if (!o->gen_closed) C->oom = 1;
        }
        for (int k = 0; k < L.n_class && !C->oom; k++) {
            conj vc = {0};
            const uint64_t *set = &L.classes[(size_t)k * L.pw];
            int closed = 0;
            for (int m = 0; m < c->n; m++) {
                if (ref_holder(C, &c->v[m])) continue;
                const cJSON *mn = c->v[m].node;
                int matched = 0;
                for (int j = 0; j < n_pat; j++)
                    if (pats[j].member == m && (set[j / 64] >> (j % 64) & 1)) {
                        flatten(C, &vc, pats[j].schema, 0);
                        matched = 1;
                    }
                const cJSON *ad = kw(mn, "additionalProperties");
                if (!matched && ad) flatten(C, &vc, ad, 0);
                if (close && !matched && !ad && !kw(mn, "unevaluatedProperties") &&
                    (kw(mn, "properties") || kw(mn, "patternProperties")))
                    closed = 1;
            }
            if (vc.is_false) o->label_rule[n_decl + k] = -1;
            else if (closed) o->label_rule[n_decl + k] = -1, o->gen_closed[n_decl + k] = 1;
            else o->label_rule[n_decl + k] = compile_conj(C, &vc);
            conj_free(&vc);
        }
        free(L.classes);
    }
done:
    for (int i = 0; i < names.n; i++) free(names.v[i]);
    free(names.v);
    smap_free(&names.idx);
    for (int j = 0; j < n_pat; j++)
        if (pats[j].ok) gram_dfa_free(&pats[j].dfa);
    free(pats);
    return id;
}

/* ---- conjunction → rule ------------------------------------------------------------------- */

/* The rule for conjunction c: its memoised id, or a new id whose body
 * build_conj makes later (the pending stack), so the compiler's own depth
 * never follows the schema's: a chain of $refs or nested properties of any
 * length costs heap, not C stack. */
static int32_t compile_conj(comp *C, conj *c) {
    if (C->oom || C->too_big) return -1;
    int32_t *slot = memo_slot(C, c, 1);
    if (!slot) return -1;
    if (*slot >= 0) return *slot;
    int32_t id = new_rule(C);
    if (id < 0) return -1;
    *slot = id;
    pending_conj *np = grow(C->pend, &C->cap_pend, C->n_pend + 1, sizeof *np);
    if (!np) {
        C->oom = 1;
        return -1;
    }
    C->pend = np;
    C->pend[C->n_pend++] = (pending_conj){conj_copy(C, c), id};
    return id;
}

static void build_conj(comp *C, conj *c, int32_t id) {
    C->work += c->n + 1;
    if (c->is_false) {
        gram_nfa n;
        gram_nfa_init(&n);
        gram_frag f = gram_frag_empty(&n);
        int32_t dead = gram_nfa_state(&n); /* an accepting state nothing reaches */
        f.end = dead;
        set_fa(C, id, &n, f, C->doc);
        gram_nfa_free(&n);
        return;
    }
    /* distribute the first anyOf/oneOf not yet distributed */
    for (int i = 0; i < c->n; i++) {
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *n = c->v[i].node;
        const cJSON *any = (c->v[i].flags & F_ANY) ? NULL : kw(n, "anyOf");
        const cJSON *one = (c->v[i].flags & F_ONE) ? NULL : kw(n, "oneOf");
        const cJSON *x = cJSON_IsArray(any) ? any : cJSON_IsArray(one) ? one : NULL;
        if (!x) continue;
        uint32_t bit = x == any ? F_ANY : F_ONE;
        int nb = cJSON_GetArraySize(x);
        int32_t *alts = calloc((size_t)nb + 1, sizeof *alts);
        if (!alts) {
            C->oom = 1;
            return;
        }
        if (nb > MAX_ALTS) {
            too_large(C, "anyOf/oneOf with more than 512 branches", n);
            free(alts);
            return;
        }
        int na = 0;
        for (const cJSON *b = x->child; b; b = b->next) {
            conj c2 = conj_copy(C, c);
            c2.v[i].flags |= bit;
            /* copy may be re-sorted by memo_slot: find the item again */
            flatten(C, &c2, b, 0);
            int32_t r = compile_conj(C, &c2);
            conj_free(&c2);
            if (r >= 0) alts[na++] = r;
        }
        gram_nfa nf;
        gram_nfa_init(&nf);
        int32_t s = gram_nfa_state(&nf), e = gram_nfa_state(&nf);
        for (int k = 0; k < na; k++) {
            int32_t a = gram_nfa_state(&nf);
            gram_nfa_edge_add(&nf, s, a, GRAM_SYM_CALL + alts[k], GRAM_SYM_CALL + alts[k]);
            gram_nfa_edge_add(&nf, a, e, -1, -1);
        }
        set_fa(C, id, &nf, (gram_frag){s, e}, n);
        gram_nfa_free(&nf);
        if (bit == F_ONE && na > 1) {
            oneof_rec *no = grow(C->oneofs, &C->cap_oneofs, C->n_oneofs + 1, sizeof *no);
            if (!no) {
                C->oom = 1;
                free(alts);
                return;
            }
            C->oneofs = no;
            C->oneofs[C->n_oneofs++] = (oneof_rec){alts, na, xstrdup(C, path_of(C, n))};
        } else {
            if (na == 1) C->alias[id] = alts[0];
            free(alts);
        }
        return;
    }
    compile_base(C, c, id);
}

/* ---- finishing the grammar --------------------------------------------------------------- */

static int32_t resolve_alias(comp *C, int32_t r) {
    for (int k = 0; r >= 0 && C->alias[r] >= 0 && k < 1000; k++) r = C->alias[r];
    return r;
}

static int dead_rule(int32_t r, void *u) {
    const uint8_t *prod = u;
    return !prod[r];
}

static void empty_fa(gram_rule *r) {
    if (r->kind == GRAM_OBJ && r->obj) {
        gram_obj *o = r->obj;
        for (int i = 0; i < o->n_decl; i++) free(o->decl_names[i]);
        free(o->decl_names);
        free(o->label_rule);
        free(o->required);
        gram_dfa_free(&o->key);
        free(o->reach);
        free(o->reach_undecl);
        free(o->u_cnt);
        free(o->dep_off);
        free(o->dep);
        free(o->gen_closed);
        free(o->avail_after);
        free(o);
        r->obj = NULL;
    }
    gram_dfa_free(&r->fa);
    r->kind = GRAM_FA;
    r->fa.n_states = 1;
    r->fa.n_classes = 1;
    r->fa.next = malloc(sizeof *r->fa.next);
    r->fa.label = malloc(sizeof *r->fa.label);
    if (r->fa.next) r->fa.next[0] = -1;
    if (r->fa.label) r->fa.label[0] = -1;
    r->counted = 0;
}

static int fa_productive(const gram_rule *r, const uint8_t *prod, int32_t *stack, uint8_t *seen) {
    const gram_dfa *d = &r->fa;
    if (!d->next || !d->label) return 0;
    memset(seen, 0, (size_t)d->n_states);
    int sp = 0;
    stack[sp++] = 0;
    seen[0] = 1;
    while (sp) {
        int32_t s = stack[--sp];
        if (d->label[s] >= 0) return 1;
        for (int c = 0; c < d->n_classes; c++) {
            int32_t t = d->next[(size_t)s * d->n_classes + c];
            if (t >= 0 && !seen[t]) seen[t] = 1, stack[sp++] = t;
        }
        if (d->call_off)
            for (int k = d->call_off[s]; k < d->call_off[s + 1]; k++) {
                int32_t t = d->calls[k].next;
                if (prod[d->calls[k].rule] && !seen[t]) seen[t] = 1, stack[sp++] = t;
            }
    }
    return 0;
}

/* labels present in the key DFA */
static int obj_productive(const gram_obj *o, const uint8_t *prod) {
    uint8_t *has = calloc((size_t)o->n_labels + 1, 1);
    if (!has) return 1;
    for (int s = 0; s < o->key.n_states; s++)
        if (o->key.label[s] >= 0 && o->key.label[s] < o->n_labels) has[o->key.label[s]] = 1;
    int ok = 1, n_req = 0, optional = 0, undecl = 0;
    for (int i = 0; i < o->n_decl; i++) {
        int usable = has[i] && o->label_rule[i] >= 0 && prod[o->label_rule[i]];
        if (o->required[i / 64] >> (i % 64) & 1) {
            n_req++;
            if (!usable) ok = 0;
        } else optional += usable;
    }
    for (int l = o->n_decl; l < o->n_labels; l++)
        if (has[l] && o->label_rule[l] >= 0 && prod[o->label_rule[l]]) undecl = 1;
    if (o->max_props >= 0 && n_req > o->max_props) ok = 0;
    if (o->min_props > 0 && !undecl && n_req + optional < o->min_props) ok = 0;
    if (o->max_props >= 0 && o->min_props > o->max_props) ok = 0;
    free(has);
    return ok;
}

/* First-byte sets of every rule, and the check that no rule calls itself
 * before a byte is consumed (left recursion): one depth-first pass over the
 * "calls at the start state" graph with an explicit stack; a rule's set is
 * complete when it leaves the stack (its callees came first).  Returns 0,
 * 1 on a cycle, -1 out of memory. */
static int first_sets(gram_grammar *g) {
    int n = g->n_rules;
    uint8_t *st = calloc((size_t)n + 1, 1); /* 0 new, 1 on the stack, 2 done */
    int32_t *stack = malloc(((size_t)n + 1) * sizeof *stack), *next = malloc(((size_t)n + 1) * sizeof *next);
    if (!st || !stack || !next) {
        free(st);
        free(stack);
        free(next);
        return -1;
    }
    int rc = 0;
    for (int32_t r0 = 0; r0 < n && !rc; r0++) {
        if (st[r0]) continue;
        int sp = 0;
        stack[sp] = r0, next[sp] = 0, sp++;
        st[r0] = 1;
        while (sp && !rc) {
            int32_t r = stack[sp - 1];
            gram_rule *R = &g->rules[r];
            const gram_dfa *d = &R->fa;
            int k0 = R->kind == GRAM_FA && d->call_off ? d->call_off[0] : 0;
            int k1 = R->kind == GRAM_FA && d->call_off ? d->call_off[1] : 0;
            if (k0 + next[sp - 1] < k1) {
                int32_t c = d->calls[k0 + next[sp - 1]++].rule;
                if (st[c] == 1) rc = 1;
                else if (!st[c]) {
                    st[c] = 1;
                    stack[sp] = c, next[sp] = 0, sp++;
                }
                continue;
            }
            /* all callees done: this rule's first set */
            memset(R->first, 0, sizeof R->first);
            if (R->kind == GRAM_OBJ) R->first['{' / 8] |= 1 << ('{' % 8);
            else {
                for (int b = 0; b < 256; b++)
                    if (gram_dfa_next(d, 0, (uint8_t)b) >= 0) R->first[b / 8] |= (uint8_t)(1 << (b % 8));
                for (int k = k0; k < k1; k++)
                    for (int i = 0; i < 32; i++) R->first[i] |= g->rules[d->calls[k].rule].first[i];
            }
            st[r] = 2;
            sp--;
        }
    }
    free(st);
    free(stack);
    free(next);
    return rc;
}

/* u_cnt: how many distinct completions from each key state end in an
 * allowed undeclared key (Kahn's algorithm backwards; states that can reach
 * a cycle on the way are unbounded).  The matcher must check seen keys only
 * where this is finite: elsewhere a fresh key always remains. */
static int obj_undecl_counts(gram_obj *o) {
    int S = o->key.n_states, C = o->key.n_classes;
    free(o->u_cnt);
    o->u_cnt = calloc((size_t)S + 1, sizeof *o->u_cnt);
    int32_t *outdeg = calloc((size_t)S + 1, sizeof *outdeg), *q = malloc(((size_t)S + 1) * sizeof *q);
    int *csize = calloc((size_t)C + 1, sizeof *csize);
    gram_ivec *rev = calloc((size_t)S + 1, sizeof *rev);
    int rc = -1;
    if (!o->u_cnt || !outdeg || !q || !csize || !rev) goto done;
    for (int b = 0; b < 256; b++) csize[o->key.cls[b]]++;
    for (int s = 0; s < S; s++) {
        if (!o->reach_undecl[s]) continue;
        for (int c = 0; c < C; c++) {
            int32_t t = o->key.next[(size_t)s * C + c];
            if (t < 0 || !o->reach_undecl[t]) continue;
            outdeg[s]++;
            if (gram_ivec_push(&rev[t], s)) goto done;
        }
    }
    int qh = 0, qt = 0;
    for (int s = 0; s < S; s++)
        if (o->reach_undecl[s] && !outdeg[s]) q[qt++] = s;
    uint8_t *fin = calloc((size_t)S + 1, 1);
    if (!fin) goto done;
    while (qh < qt) {
        int32_t t = q[qh++];
        fin[t] = 1;
        /* t's successors are all final: its count */
        long long cnt = 0;
        int32_t l = o->key.label[t];
        if (l >= o->n_decl && l < o->n_labels && o->label_rule[l] >= 0) cnt = 1;
        for (int c = 0; c < C; c++) {
            int32_t u = o->key.next[(size_t)t * C + c];
            if (u >= 0 && o->reach_undecl[u]) cnt += (long long)csize[c] * o->u_cnt[u];
            if (cnt >= GRAM_U_INF) cnt = GRAM_U_INF;
        }
        o->u_cnt[t] = (int32_t)cnt;
        for (int k = 0; k < rev[t].n; k++)
            if (--outdeg[rev[t].v[k]] == 0) q[qt++] = rev[t].v[k];
    }
    o->u_finite = 0;
    for (int s = 0; s < S; s++) {
        if (!o->reach_undecl[s]) continue;
        if (!fin[s]) o->u_cnt[s] = GRAM_U_INF;
        if (o->u_cnt[s] < GRAM_U_INF && o->key.label[s] < 0) o->u_finite = 1;
    }
    free(fin);
    o->track_keys = 0;
    for (int l = o->n_decl; l < o->n_labels; l++) o->track_keys |= o->label_rule[l] >= 0;
    rc = 0;
done:
    if (rev)
        for (int s = 0; s <= S; s++) free(rev[s].v);
    free(rev);
    free(outdeg);
    free(q);
    free(csize);
    return rc;
}

static int obj_reach(gram_obj *o) {
    int S = o->key.n_states, W = o->n_words;
    free(o->reach);
    free(o->reach_undecl);
    o->reach = calloc((size_t)S * (size_t)(W ? W : 1), sizeof *o->reach);
    o->reach_undecl = calloc((size_t)S, 1);
    if (!o->reach || !o->reach_undecl) return -1;
    for (int s = 0; s < S; s++) {
        int32_t l = o->key.label[s];
        if (l < 0 || l >= o->n_labels || o->label_rule[l] < 0) continue;
        if (l < o->n_decl) o->reach[(size_t)s * W + l / 64] |= 1ull << (l % 64);
        else o->reach_undecl[s] = 1;
    }
    /* propagate backwards along the key automaton's moves with a worklist (a
     * state is queued again only when its sets grew); sweeping every move until
     * nothing changed was most of the compile time of schemas with many keys */
    {
        int C = o->key.n_classes, rc = -1;
        int32_t *roff = calloc((size_t)S + 2, sizeof *roff), *rsrc = NULL, *last = malloc(((size_t)S + 1) * sizeof *last);
        int32_t *q = malloc(((size_t)S + 1) * sizeof *q);
        uint8_t *inq = calloc((size_t)S + 1, 1);
        if (!roff || !last || !q || !inq) goto rdone;
        for (int t = 0; t < S; t++) last[t] = -1;
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++) {
                int32_t t = o->key.next[(size_t)s * C + c];
                if (t >= 0 && last[t] != s) last[t] = s, roff[t + 1]++;
            }
        for (int t = 0; t < S; t++) roff[t + 1] += roff[t];
        rsrc = malloc(((size_t)roff[S] + 1) * sizeof *rsrc);
        if (!rsrc) goto rdone;
        {
            int32_t *fill = last; /* reused: the predecessor lists' fill pointers */
            for (int t = 0; t < S; t++) fill[t] = roff[t];
            int32_t *prev = q; /* reused: the last source written per target */
            for (int t = 0; t < S; t++) prev[t] = -1;
            for (int s = 0; s < S; s++)
                for (int c = 0; c < C; c++) {
                    int32_t t = o->key.next[(size_t)s * C + c];
                    if (t >= 0 && prev[t] != s) prev[t] = s, rsrc[fill[t]++] = s;
                }
        }
        int qh = 0, qn = 0; /* circular queue of S slots; inq keeps it to one entry per state */
        for (int t = 0; t < S; t++) {
            int any = o->reach_undecl[t];
            for (int w = 0; w < W && !any; w++) any = o->reach[(size_t)t * W + w] != 0;
            if (any) q[(qh + qn++) % S] = t, inq[t] = 1;
        }
        while (qn) {
            int32_t t = q[qh];
            qh = (qh + 1) % S, qn--;
            inq[t] = 0;
            for (int k = roff[t]; k < roff[t + 1]; k++) {
                int32_t s = rsrc[k];
                int changed = 0;
                for (int w = 0; w < W; w++) {
                    uint64_t nv = o->reach[(size_t)s * W + w] | o->reach[(size_t)t * W + w];
                    if (nv != o->reach[(size_t)s * W + w]) o->reach[(size_t)s * W + w] = nv, changed = 1;
                }
                if (o->reach_undecl[t] && !o->reach_undecl[s]) o->reach_undecl[s] = 1, changed = 1;
                if (changed && !inq[s]) q[(qh + qn++) % S] = s, inq[s] = 1;
            }
        }
        rc = 0;
    rdone:
        free(roff);
        free(rsrc);
        free(last);
        free(q);
        free(inq);
        if (rc) return -1;
    }
    if (o->ordered) {
        /* usable declared labels after each one: an ordered object that skips too many
         * cannot reach minProperties any more (gram_match.c refuses such a key) */
        free(o->avail_after);
        o->avail_after = calloc((size_t)o->n_decl + 1, sizeof *o->avail_after);
        uint8_t *has = calloc((size_t)o->n_labels + 1, 1);
        if (!o->avail_after || !has) {
            free(has);
            return -1;
        }
        for (int s = 0; s < S; s++)
            if (o->key.label[s] >= 0 && o->key.label[s] < o->n_labels) has[o->key.label[s]] = 1;
        o->undecl_any = 0;
        for (int l = o->n_decl; l < o->n_labels; l++) o->undecl_any |= has[l] && o->label_rule[l] >= 0;
        int after = 0;
        for (int i = o->n_decl - 1; i >= 0; i--) {
            o->avail_after[i] = after;
            after += has[i] && o->label_rule[i] >= 0;
        }
        free(has);
    }
    return obj_undecl_counts(o);
}

/* ---- oneOf: are two rules' languages provably disjoint? ------------------------------------ */

/* The proof is conservative: 1 means no value is in both languages, 0 that
 * none was found (also when the work budget or a recursion is hit).  Every
 * rule derives complete JSON values, and values that are not numbers are
 * prefix-free (a string, array or object ends where its brackets close), so
 * two calls whose callees are disjoint and do not both start numbers cannot
 * meet on any continuation.  Results are memoised per pair; a pair met again
 * while it is being proved counts as "not proven" (0), so a 1 never rests on
 * an assumption. */
#define DISJOINT_WORK 50000000L

typedef struct {
    const gram_grammar *g;
    uint64_t *key;  /* (a << 32 | b) + 1, 0: empty slot */
    int8_t *val;    /* 0 not disjoint, 1 disjoint, 2 in progress */
    size_t cap, n;
    long work;
    int depth, oom;
} dj_ctx;

static int disjoint(dj_ctx *X, int32_t a, int32_t b);

static int first_disjoint(const gram_rule *A, const gram_rule *B) {
    for (int i = 0; i < 32; i++)
        if (A->first[i] & B->first[i]) return 0;
    return 1;
}

static int starts_number(const gram_rule *R) {
    if (R->first['-' / 8] >> ('-' % 8) & 1) return 1;
    for (int c = '0'; c <= '9'; c++)
        if (R->first[c / 8] >> (c % 8) & 1) return 1;
    return 0;
}

/* The label of key `name`: -1 refused, -2 out of memory, -3 refused only by
 * generation semantics (the schema itself would allow it: no proof). */
static int32_t key_label_of(const gram_obj *o, const char *name) {
    size_t cl;
    char *cn = gram_json_string(name, strlen(name), &cl);
    if (!cn) return -2;
    int32_t s = 0;
    for (size_t i = 0; i < cl && s >= 0; i++) s = gram_dfa_next(&o->key, s, (uint8_t)cn[i]);
    int32_t lab = s >= 0 ? o->key.label[s] : -1;
    if (lab >= 0 && o->label_rule[lab] < 0) lab = o->gen_closed && o->gen_closed[lab] ? -3 : -1;
    free(cn);
    return lab;
}

static int obj_disjoint(dj_ctx *X, const gram_obj *A, const gram_obj *B) {
    if (A->max_props >= 0 && B->min_props > A->max_props) return 1;
    if (B->max_props >= 0 && A->min_props > B->max_props) return 1;
    for (int pass = 0; pass < 2; pass++) {
        const gram_obj *P = pass ? B : A, *Q = pass ? A : B;
        for (int i = 0; i < P->n_decl; i++) {
            if (!(P->required[i / 64] >> (i % 64) & 1)) continue;
            int32_t lq = key_label_of(Q, P->decl_names[i]);
            if (lq == -2 || lq == -3) continue;
            if (lq < 0) return 1; /* Q forbids a key P requires */
            /* the key appears once (duplicate keys are not generated), so its one value must be in both */
            if (P->label_rule[i] >= 0 && disjoint(X, P->label_rule[i], Q->label_rule[lq])) return 1;
        }
    }
    return 0;
}

/* open addressing over state pairs (a, b) */
typedef struct {
    uint64_t *k;
    size_t cap;
} pair_set;

static int pair_add(pair_set *s, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
    while (s->k[i]) {
        if (s->k[i] == key) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->k[i] = key;
    return 1;
}

static int fa_disjoint(dj_ctx *X, const gram_rule *A, const gram_rule *B) {
    enum { CAP = 4096 };
    const gram_dfa *da = &A->fa, *db = &B->fa;
    int n = 0, head = 0, result = 1;
    int32_t *qa = malloc(CAP * sizeof *qa), *qb = malloc(CAP * sizeof *qb);
    pair_set seen = {calloc(2 * CAP, sizeof *seen.k), 2 * CAP};
    if (!qa || !qb || !seen.k) {
        X->oom = 1;
        result = 0;
        goto out;
    }
#define PUSH_PAIR(x, y)                        \
    do {                                       \
        if (pair_add(&seen, (x), (y))) {       \
            if (n == CAP) {                    \
                result = 0;                    \
                goto out;                      \
            }                                  \
            qa[n] = (x), qb[n] = (y), n++;     \
        }                                      \
    } while (0)
    PUSH_PAIR(0, 0);
    while (head < n) {
        int32_t pa = qa[head], pb = qb[head];
        head++;
        if ((X->work += 256) > DISJOINT_WORK) {
            result = 0;
            goto out;
        }
        if (da->label[pa] >= 0 && db->label[pb] >= 0) {
            result = 0;
            goto out;
        }
        uint8_t bytes_a[32] = {0}, bytes_b[32] = {0};
        for (int x = 0; x < 256; x++) {
            int32_t ta = gram_dfa_next(da, pa, (uint8_t)x), tb = gram_dfa_next(db, pb, (uint8_t)x);
            if (ta >= 0) bytes_a[x / 8] |= (uint8_t)(1 << (x % 8));
            if (tb >= 0) bytes_b[x / 8] |= (uint8_t)(1 << (x % 8));
            if (ta >= 0 && tb >= 0) PUSH_PAIR(ta, tb);
        }
        int ka0 = da->call_off ? da->call_off[pa] : 0, ka1 = da->call_off ? da->call_off[pa + 1] : 0;
        int kb0 = db->call_off ? db->call_off[pb] : 0, kb1 = db->call_off ? db->call_off[pb + 1] : 0;
        /* a call against a byte: the callee must not start with it */
        for (int ka = ka0; ka < ka1; ka++)
            for (int i = 0; i < 32; i++)
                if (X->g->rules[da->calls[ka].rule].first[i] & bytes_b[i]) {
                    result = 0;
                    goto out;
                }
        for (int kb = kb0; kb < kb1; kb++)
            for (int i = 0; i < 32; i++)
                if (X->g->rules[db->calls[kb].rule].first[i] & bytes_a[i]) {
                    result = 0;
                    goto out;
                }
        /* a call against a call: disjoint and prefix-free, or not proven */
        for (int ka = ka0; ka < ka1; ka++)
            for (int kb = kb0; kb < kb1; kb++) {
                int32_t ca = da->calls[ka].rule, cb = db->calls[kb].rule;
                const gram_rule *CA = &X->g->rules[ca], *CB = &X->g->rules[cb];
                if (first_disjoint(CA, CB)) continue;
                if (!(starts_number(CA) && starts_number(CB)) && disjoint(X, ca, cb)) continue;
                result = 0;
                goto out;
            }
    }
#undef PUSH_PAIR
out:
    free(qa);
    free(qb);
    free(seen.k);
    return result;
}

static int8_t *dj_slot(dj_ctx *X, int32_t a, int32_t b) {
    if ((X->n + 1) * 2 > X->cap) {
        size_t nc = X->cap ? X->cap * 2 : 256;
        uint64_t *nk = calloc(nc, sizeof *nk);
        int8_t *nv = calloc(nc, 1);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            X->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < X->cap; i++)
            if (X->key[i]) {
                size_t j = (size_t)(X->key[i] * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
                while (nk[j]) j = (j + 1) & (nc - 1);
                nk[j] = X->key[i];
                nv[j] = X->val[i];
            }
        free(X->key);
        free(X->val);
        X->key = nk;
        X->val = nv;
        X->cap = nc;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (X->cap - 1);
    while (X->key[i] && X->key[i] != key) i = (i + 1) & (X->cap - 1);
    if (!X->key[i]) {
        X->key[i] = key;
        X->val[i] = -1; /* new */
        X->n++;
    }
    return &X->val[i];
}

static int disjoint_raw(dj_ctx *X, int32_t a, int32_t b) {
    const gram_rule *A = &X->g->rules[a], *B = &X->g->rules[b];
    if (A->kind == GRAM_OBJ && B->kind == GRAM_OBJ) return obj_disjoint(X, A->obj, B->obj);
    if (A->kind == GRAM_OBJ) {
        const gram_rule *t = A;
        A = B, B = t;
        int32_t ti = a;
        a = b, b = ti;
    }
    if (B->kind == GRAM_OBJ) {
        /* an FA against an object: only its calls at the start can produce '{' */
        if (gram_dfa_next(&A->fa, 0, '{') >= 0) return 0;
        if (A->fa.call_off)
            for (int k = A->fa.call_off[0]; k < A->fa.call_off[1]; k++)
                if (!disjoint(X, A->fa.calls[k].rule, b)) return 0;
        return 1;
    }
    return fa_disjoint(X, A, B);
}

static int disjoint(dj_ctx *X, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return 1;
    const gram_rule *A = &X->g->rules[a], *B = &X->g->rules[b];
    if (first_disjoint(A, B)) return 1; /* includes empty rules */
    if (a == b || X->oom || X->depth >= 64) return 0;
    int8_t *v = dj_slot(X, a, b);
    if (!v) return 0;
    if (*v >= 0) return *v == 1;
    *v = 2;
    X->depth++;
    int r = disjoint_raw(X, a, b);
    X->depth--;
    v = dj_slot(X, a, b); /* the table may have grown */
    if (v) *v = (int8_t)r;
    return r;
}

/* Counted strings: for each (DFA state, tracker) node, the fewest and the
 * most code points still needed to close the string (GRAM_CP_INF: no bound,
 * because a cycle is reachable on the way; cp_min GRAM_CP_INF: it cannot
 * close).  Graph algorithms over the nodes, so the cost does not depend on
 * the length bounds: a 0-1 breadth-first search backwards from the closing
 * quote for the fewest, and a reverse topological pass (Kahn) for the most,
 * where the nodes never reached are those that can reach a cycle.
 * Returns 0, -1 out of memory, -2 too large (more than GRAM_COUNTED_EDGES). */
#define GRAM_COUNTED_EDGES 8000000
static int counted_dists(comp *C, gram_rule *R) {
    const gram_dfa *d = &R->fa;
    int n = d->n_states, P = n * GRAM_N_TR, rc = -1;
    /* bytes that behave alike for both the DFA and the tracker: one representative each */
    uint8_t rep[256];
    int n_rep = 0;
    {
        int seen[256 * 8];
        memset(seen, 0, sizeof seen);
        for (int b = 0; b < 256; b++) {
            int grp = b == '"' ? 0 : b == '\\' ? 1 : b == 'u' ? 2 : b < 0x80 ? 3 : b < 0xC0 ? 4 : b < 0xE0 ? 5 : b < 0xF0 ? 6 : 7;
            int key = d->cls[b] * 8 + grp;
            if (!seen[key]) seen[key] = 1, rep[n_rep++] = (uint8_t)b;
        }
    }
    if ((long)P * n_rep > GRAM_COUNTED_EDGES) return -2;
    C->work += (long)P * n_rep;
    int32_t *eo = calloc((size_t)P + 2, sizeof *eo); /* reverse edges: into node j from rfrom[eo[j]..eo[j+1]) */
    int32_t *rfrom = NULL, *outdeg = calloc((size_t)P + 1, sizeof *outdeg), *q = malloc(((size_t)P + 1) * sizeof *q);
    uint8_t *rcost = NULL;
    R->cp_min = malloc((size_t)P * sizeof *R->cp_min);
    R->cp_max = malloc((size_t)P * sizeof *R->cp_max);
    if (!eo || !outdeg || !q || !R->cp_min || !R->cp_max) goto done;
    /* edges (s, tr) -> (t, ntr): count, then fill (CSR by target) */
    for (int pass = 0; pass < 2; pass++) {
        int32_t *fill = NULL;
        if (pass) {
            for (int j = 0; j < P; j++) eo[j + 1] += eo[j];
            rfrom = malloc(((size_t)eo[P] + 1) * sizeof *rfrom);
            rcost = malloc((size_t)eo[P] + 1);
            fill = malloc(((size_t)P + 1) * sizeof *fill);
            if (!rfrom || !rcost || !fill) {
                free(fill);
                goto done;
            }
            memcpy(fill, eo, (size_t)P * sizeof *fill);
        }
        for (int s = 1; s < n; s++) {
            if (d->label[s] >= 0) continue; /* after the closing quote: nothing follows */
            for (int tr = 0; tr < GRAM_N_TR; tr++) {
                int i = s * GRAM_N_TR + tr;
                for (int k = 0; k < n_rep; k++) {
                    uint8_t b = rep[k];
                    int32_t t = gram_dfa_next(d, s, b);
                    if (t < 0) continue;
                    int cost, ntr;
                    if (tr == GRAM_TR_BND && b == '"') {
                        if (d->label[t] < 0) continue;
                        cost = 0;
                        ntr = GRAM_TR_BND;
                    } else ntr = gram_tr_next(tr, b, &cost);
                    int j = t * GRAM_N_TR + ntr;
                    if (!pass) {
                        eo[j + 1]++;
                        outdeg[i]++;
                    } else {
                        rfrom[fill[j]] = i;
                        rcost[fill[j]++] = (uint8_t)cost;
                    }
                }
            }
        }
        free(fill);
    }
    /* fewest: 0-1 BFS from the closed nodes (a deque in q, 0-cost edges at the front) */
    {
        for (int i = 0; i < P; i++) R->cp_min[i] = GRAM_CP_INF;
        /* each relaxation pushes once: at most eo[P] pushes at either end, plus the P seeds */
        long half = (long)eo[P] + P + 1;
        int32_t *dq = malloc((size_t)(2 * half) * sizeof *dq);
        if (!dq) goto done;
        long head = half, tail = half; /* dq[head..tail) */
        for (int s = 0; s < n; s++)
            if (d->label[s] >= 0)
                for (int tr = 0; tr < GRAM_N_TR; tr++) R->cp_min[s * GRAM_N_TR + tr] = 0, dq[tail++] = s * GRAM_N_TR + tr;
        uint8_t *fin = calloc((size_t)P + 1, 1);
        if (!fin) {
            free(dq);
            goto done;
        }
        while (head < tail) {
            int32_t j = dq[head++];
            if (fin[j]) continue;
            fin[j] = 1;
            for (int e = eo[j]; e < eo[j + 1]; e++) {
                int32_t i = rfrom[e];
                int32_t v = R->cp_min[j] + rcost[e];
                if (v < R->cp_min[i]) {
                    R->cp_min[i] = v;
                    if (rcost[e] == 0) dq[--head] = i;
                    else dq[tail++] = i;
                }
            }
        }
        free(fin);
        free(dq);
    }
    /* most: Kahn's algorithm backwards over the nodes that can close */
    {
        int qh = 0, qt = 0;
        for (int i = 0; i < P; i++) {
            R->cp_max[i] = 0;
            if (R->cp_min[i] >= GRAM_CP_INF) continue;
            int s = i / GRAM_N_TR;
            if (d->label[s] >= 0) q[qt++] = i;
        }
        /* out-degrees towards nodes that can close */
        memset(outdeg, 0, (size_t)P * sizeof *outdeg);
        for (int j = 0; j < P; j++)
            if (R->cp_min[j] < GRAM_CP_INF)
                for (int e = eo[j]; e < eo[j + 1]; e++) outdeg[rfrom[e]]++;
        uint8_t *done_k = calloc((size_t)P + 1, 1);
        if (!done_k) goto done;
        for (int k = 0; k < qt; k++) done_k[q[k]] = 1;
        while (qh < qt) {
            int32_t j = q[qh++];
            for (int e = eo[j]; e < eo[j + 1]; e++) {
                int32_t i = rfrom[e];
                int32_t v = R->cp_max[j] + rcost[e];
                if (v > R->cp_max[i]) R->cp_max[i] = v < GRAM_CP_INF ? v : GRAM_CP_INF;
                if (--outdeg[i] == 0 && !done_k[i]) done_k[i] = 1, q[qt++] = i;
            }
        }
        for (int i = 0; i < P; i++)
            if (R->cp_min[i] < GRAM_CP_INF && !done_k[i]) R->cp_max[i] = GRAM_CP_INF; /* a cycle is reachable */
        free(done_k);
    }
    R->cp_span = 0;
    for (int i = 0; i < P; i++) {
        if (R->cp_min[i] < GRAM_CP_INF && R->cp_min[i] > R->cp_span) R->cp_span = R->cp_min[i];
        if (R->cp_max[i] < GRAM_CP_INF && R->cp_max[i] > R->cp_span) R->cp_span = R->cp_max[i];
    }
    rc = 0;
done:
    free(eo);
    free(rfrom);
    free(rcost);
    free(outdeg);
    free(q);
    return rc;
}

static int finish(comp *C) {
    gram_grammar *g = C->g;
    int n = g->n_rules;
    g->root = resolve_alias(C, g->root);
    /* aliases: rewrite every reference */
    for (int r = 0; r < n; r++) {
        gram_rule *R = &g->rules[r];
        if (C->alias[r] >= 0) continue;
        if (R->kind == GRAM_FA && R->fa.call_off)
            for (int k = 0; k < R->fa.n_calls; k++) R->fa.calls[k].rule = resolve_alias(C, R->fa.calls[k].rule);
        if (R->kind == GRAM_OBJ && R->obj)
            for (int l = 0; l < R->obj->n_labels; l++) R->obj->label_rule[l] = resolve_alias(C, R->obj->label_rule[l]);
    }
    /* alias rules are never referenced now: make them empty and harmless */
    for (int r = 0; r < n; r++)
        if (C->alias[r] >= 0) empty_fa(&g->rules[r]);
    /* productive rules */
    uint8_t *prod = calloc((size_t)n + 1, 1), *seen = NULL;
    int32_t *stack = NULL;
    int max_s = 1;
    for (int r = 0; r < n; r++)
        if (g->rules[r].kind == GRAM_FA && g->rules[r].fa.n_states > max_s) max_s = g->rules[r].fa.n_states;
    seen = malloc((size_t)max_s);
    stack = malloc((size_t)max_s * sizeof *stack);
    if (!prod || !seen || !stack) {
        free(prod);
        free(seen);
        free(stack);
        return -1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < n; r++) {
            if (prod[r] || C->alias[r] >= 0) continue;
            gram_rule *R = &g->rules[r];
            int p = R->kind == GRAM_OBJ ? obj_productive(R->obj, prod) : fa_productive(R, prod, stack, seen);
            if (p) prod[r] = 1, changed = 1;
        }
    }
    free(seen);
    free(stack);
    for (int r = 0; r < n; r++) {
        gram_rule *R = &g->rules[r];
        if (!prod[r]) {
            if (C->alias[r] < 0) empty_fa(R);
            continue;
        }
        if (R->kind == GRAM_FA) {
            if (gram_dfa_prune_calls(&R->fa, dead_rule, prod)) {
                free(prod);
                return -1;
            }
        } else {
            for (int l = 0; l < R->obj->n_labels; l++)
                if (R->obj->label_rule[l] >= 0 && !prod[R->obj->label_rule[l]]) R->obj->label_rule[l] = -1;
            if (obj_reach(R->obj)) {
                free(prod);
                return -1;
            }
            {
                gram_obj *o = R->obj;
                /* ordered: whether a key may start depends on the keys seen unless nothing is
                 * required (then an undeclared key may always come) */
                int any_req = 0;
                for (int w = 0; w < o->n_words; w++) any_req |= o->required[w] != 0;
                o->keys_free = o->max_props < 0 && (!o->ordered || (!any_req && !o->has_deps));
                for (int k = 0; k < o->key.n_states && o->keys_free; k++)
                    if (o->key.label[k] < 0 && !o->reach_undecl[k]) o->keys_free = 0;
            }
            uint64_t zero[1] = {0};
            uint64_t *z = R->obj->n_words > 1 ? calloc((size_t)R->obj->n_words, sizeof *z) : zero;
            R->aux0 = z ? gram_aux_intern(g, z, R->obj->n_words, 0, 0, 0) : -1;
            if (z != zero) free(z);
            if (R->aux0 < 0) {
                free(prod);
                return -1;
            }
        }
        if (R->kind == GRAM_FA && R->counted) {
            int crc = counted_dists(C, R);
            if (crc == -2) too_large(C, "string length bounds on an automaton this large", C->doc);
            else if (crc) {
                free(prod);
                return -1;
            }
        }
        R->leaf = R->kind == GRAM_FA && !R->fa.call_off;
        if (R->kind == GRAM_FA && R->fa.call_off && R->fa.n_calls == 0) {
            free(R->fa.call_off);
            R->fa.call_off = NULL;
            R->leaf = 1;
        }
    }
    free(prod);
    /* left recursion (the schema-level check forbids the cycles that cause
     * it; this one guards the rule graph itself) and first bytes */
    int cyc = first_sets(g);
    if (cyc < 0) return -1;
    if (cyc) {
        too_large(C, "recursion that consumes no input (left-recursive rules)", C->doc);
        return 0;
    }
    /* oneOf: alternation is exact only for disjoint branches */
    dj_ctx X = {.g = g};
    for (int i = 0; i < C->n_oneofs; i++) {
        oneof_rec *o = &C->oneofs[i];
        for (int a = 0; a < o->n; a++) o->alts[a] = resolve_alias(C, o->alts[a]);
        for (int a = 0; a < o->n; a++)
            for (int b = a + 1; b < o->n; b++)
                if (!disjoint(&X, o->alts[a], o->alts[b])) {
                    char kwb[96];
                    snprintf(kwb, sizeof kwb, "oneOf (branches %d and %d may overlap)", a, b);
                    unsupported_at(C, kwb, o->path, 0);
                    a = o->n;
                    break;
                }
    }
    free(X.key);
    free(X.val);
    return X.oom ? -1 : 0;
}

/* ---- interned OBJ-frame state --------------------------------------------------------------- */


/* Intern data[0..len) into t (the caller holds the lock): its id, -1 when
 * absent and !create, -2 out of memory or full. */
static int32_t itab_intern(gram_itab *t, const void *data, uint32_t len, int create) {
    uint64_t h = blob_hash(data, len);
    if (create && (size_t)(t->n + 1) * 2 > t->hcap) {
        size_t nc = t->hcap ? t->hcap * 2 : 256;
        int32_t *nt = malloc(nc * sizeof *nt);
        if (!nt) return -2;
        for (size_t i = 0; i < nc; i++) nt[i] = -1;
        for (int32_t i = 0; i < t->n; i++) {
            size_t k = t->dir[i / GRAM_ICHUNK][i % GRAM_ICHUNK]->hash & (nc - 1);
            while (nt[k] >= 0) k = (k + 1) & (nc - 1);
            nt[k] = i;
        }
        free(t->htab);
        t->htab = nt;
        t->hcap = nc;
    }
    if (!t->hcap) return create ? -2 : -1;
    size_t k = h & (t->hcap - 1);
    while (t->htab[k] >= 0) {
        const gram_irec *r = t->dir[t->htab[k] / GRAM_ICHUNK][t->htab[k] % GRAM_ICHUNK];
        if (r->hash == h && r->len == len && !memcmp(r->data, data, len)) return t->htab[k];
        k = (k + 1) & (t->hcap - 1);
    }
    if (!create) return -1;
    if (t->n >= GRAM_ICHUNK * GRAM_ICHUNKS) return -2;
    gram_irec **chunk = t->dir[t->n / GRAM_ICHUNK];
    if (!chunk) {
        chunk = calloc(GRAM_ICHUNK, sizeof *chunk);
        if (!chunk) return -2;
        t->dir[t->n / GRAM_ICHUNK] = chunk;
    }
    gram_irec *r = malloc(sizeof *r + ((len + 7) & ~7u));
    if (!r) return -2;
    r->hash = h;
    r->len = len;
    r->pad = 0;
    memcpy(r->data, data, len);
    chunk[t->n % GRAM_ICHUNK] = r;
    t->htab[k] = t->n;
    return t->n++;
}

static void itab_free(gram_itab *t) {
    for (int32_t i = 0; i < t->n; i++) free(t->dir[i / GRAM_ICHUNK][i % GRAM_ICHUNK]);
    for (int c = 0; c < GRAM_ICHUNKS && t->dir[c]; c++) free(t->dir[c]);
    free(t->htab);
}

static int32_t intern_locked(gram_grammar *g, gram_itab *t, const void *data, uint32_t len, int create) {
    pthread_mutex_lock(&g->lock);
    int32_t id = itab_intern(t, data, len, create);
    pthread_mutex_unlock(&g->lock);
    return id;
}

int32_t gram_aux_intern(gram_grammar *g, const uint64_t *words, int n_words, int32_t count, int32_t keys,
                        int32_t prefix) {
    size_t sz = sizeof(gram_aux) + (size_t)n_words * sizeof *words;
    uint64_t small[16];
    gram_aux *a = sz <= sizeof small ? (gram_aux *)small : malloc(sz);
    if (!a) return -1;
    memset(a, 0, sizeof *a);
    a->count = count;
    a->keys = keys;
    a->prefix = prefix;
    a->n_words = n_words;
    if (n_words) memcpy(a->words, words, (size_t)n_words * sizeof *words);
    int32_t id;
    if (keys || prefix) {
        a->base = gram_aux_intern(g, words, n_words, count, 0, 0);
        id = a->base < 0 ? -1 : intern_locked(g, &g->aux, a, (uint32_t)sz, 1);
    } else {
        /* its own base: interned with base -1, read back as itself */
        a->base = -1;
        id = intern_locked(g, &g->aux, a, (uint32_t)sz, 1);
    }
    if ((void *)a != (void *)small) free(a);
    return id < 0 ? -1 : id;
}

int32_t gram_aux_with_prefix(gram_grammar *g, int32_t id, int32_t prefix) {
    const gram_aux *a = gram_aux_get(g, id);
    if (a->prefix == prefix) return id;
    return gram_aux_intern(g, a->words, a->n_words, a->count, a->keys, prefix);
}

int32_t gram_text_child(gram_grammar *g, int32_t text, uint8_t b) {
    gram_text t = {text, b};
    int32_t id = intern_locked(g, &g->texts, &t, sizeof t, 1);
    return id < 0 ? -1 : id;
}

int32_t gram_text_find(gram_grammar *g, int32_t text, uint8_t b) {
    gram_text t = {text, b};
    int32_t id = intern_locked(g, &g->texts, &t, sizeof t, 0);
    return id < 0 ? -1 : id;
}

size_t gram_text_bytes(const gram_grammar *g, int32_t text, char *buf, size_t cap) {
    size_t n = 0;
    for (int32_t t = text; t > 0; t = ((const gram_text *)gram_itab_data(&g->texts, t))->parent) n++;
    size_t i = n;
    for (int32_t t = text; t > 0; t = ((const gram_text *)gram_itab_data(&g->texts, t))->parent) {
        i--;
        if (i < cap) buf[i] = (char)((const gram_text *)gram_itab_data(&g->texts, t))->byte;
    }
    return n;
}

const int32_t *gram_keyset_items(const gram_grammar *g, int32_t set, int *n) {
    const gram_irec *r = g->keysets.dir[set / GRAM_ICHUNK][set % GRAM_ICHUNK];
    *n = (int)(r->len / sizeof(int32_t));
    return (const int32_t *)r->data;
}

int gram_keyset_has(const gram_grammar *g, int32_t set, int32_t key) {
    int n;
    const int32_t *v = gram_keyset_items(g, set, &n);
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == key;
}

int32_t gram_keyset_add(gram_grammar *g, int32_t set, int32_t key) {
    if (gram_keyset_has(g, set, key)) return set;
    int n;
    const int32_t *v = gram_keyset_items(g, set, &n);
    int32_t *w = malloc(((size_t)n + 1) * sizeof *w);
    if (!w) return -1;
    int k = 0, placed = 0;
    for (int i = 0; i < n; i++) {
        if (!placed && key < v[i]) w[k++] = key, placed = 1;
        w[k++] = v[i];
    }
    if (!placed) w[k++] = key;
    int32_t id = intern_locked(g, &g->keysets, w, (uint32_t)((size_t)k * sizeof *w), 1);
    free(w);
    return id < 0 ? -1 : id;
}

/* ---- entry points ------------------------------------------------------------------------- */

static void comp_free(comp *C) {
    for (size_t i = 0; i < C->info.cap; i++)
        if (C->info.v[i].key) {
            free(C->info.v[i].path);
            free(C->info.v[i].base);
        }
    free(C->info.v);
    for (int i = 0; i < C->n_ids; i++) free(C->ids[i].uri);
    free(C->ids);
    smap_free(&C->id_map);
    for (size_t i = 0; i < C->memo_cap; i++) free(C->memo[i].key);
    free(C->memo);
    for (int i = 0; i < C->n_uns; i++) {
        free(C->uns[i].kw);
        free(C->uns[i].path);
    }
    free(C->uns);
    for (int i = 0; i < C->n_oneofs; i++) {
        free(C->oneofs[i].alts);
        free(C->oneofs[i].path);
    }
    free(C->oneofs);
    for (int i = 0; i < C->n_owned; i++) cJSON_Delete(C->owned[i]);
    free(C->owned);
    free(C->alias);
    for (int i = 0; i < C->n_pend; i++) conj_free(&C->pend[i].c);
    free(C->pend);
    for (size_t i = 0; i < C->leaf_cap; i++) free(C->leaves[i].key);
    free(C->leaves);
    for (int i = 0; i < C->n_pats; i++) {
        free(C->pats[i].pattern);
        free(C->pats[i].err);
        if (!C->pats[i].rc) gram_dfa_free(&C->pats[i].dfa);
    }
    free(C->pats);
    for (int i = 0; i < C->n_keys; i++) {
        free(C->keys[i].key);
        gram_dfa_free(&C->keys[i].dfa);
        free(C->keys[i].classes);
    }
    free(C->keys);
    smap_free(&C->key_map);
    if (C->have_any) {
        gram_dfa_free(&C->any_content);
        gram_dfa_free(&C->any_key);
    }
    cJSON_Delete(C->doc);
}

static int detect_draft(const cJSON *doc, int dflt, int *unknown) {
    const cJSON *s = cJSON_IsObject(doc) ? kw(doc, "$schema") : NULL;
    *unknown = 0;
    if (!cJSON_IsString(s)) return dflt ? dflt : 2020;
    const char *v = s->valuestring;
    *unknown = !strstr(v, "json-schema.org/");
    if (strstr(v, "draft-04") || strstr(v, "draft-03")) return 4;
    if (strstr(v, "draft-06")) return 6;
    if (strstr(v, "draft-07")) return 7;
    if (strstr(v, "2019-09")) return 2019;
    return 2020;
}

int gram_compile(const char *schema, size_t len, const gram_options *opts, gram_grammar **out, char *err,
                 size_t err_len) {
    *out = NULL;
    comp C0 = {0}, *C = &C0;
    if (opts) C->opt = *opts;
    char perr[256];
    C->doc = gram_json_parse(schema, len, perr, sizeof perr);
    if (!C->doc) {
        snprintf(err, err_len, "schema: %s", perr);
        return CINFER_EFORMAT;
    }
    if (!cJSON_IsObject(C->doc) && !cJSON_IsBool(C->doc)) {
        snprintf(err, err_len, "a schema must be an object or a boolean");
        comp_free(C);
        return CINFER_EFORMAT;
    }
    gram_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        comp_free(C);
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    pthread_mutex_init(&g->lock, NULL);
    g->ws_flexible = C->opt.ws_flexible;
    {
        /* id 0 of the key texts is "", of the key sets the empty set */
        gram_text root = {-1, -1};
        if (itab_intern(&g->texts, &root, sizeof root, 1) != 0 || itab_intern(&g->keysets, "", 0, 1) != 0) {
            gram_free(g);
            comp_free(C);
            snprintf(err, err_len, "out of memory");
            return CINFER_ENOMEM;
        }
    }
    C->g = g;
    /* cJSON strings end at U+0000: a schema string holding one would be read
     * short (an enum value "a\u0000b" as "a") — refuse instead */
    for (size_t i = 0; i + 6 <= len; i++)
        if (schema[i] == '\\' && schema[i + 1] == 'u' && schema[i + 2] == '0' && schema[i + 3] == '0' &&
            schema[i + 4] == '0' && schema[i + 5] == '0') {
            int bs = 0;
            for (size_t k = i; k > 0 && schema[k - 1] == '\\'; k--) bs++;
            if (!(bs & 1)) {
                too_large(C, "a string containing U+0000", C->doc);
                break;
            }
        }
    int unknown_meta;
    C->draft = detect_draft(C->doc, C->opt.default_draft, &unknown_meta);
    index_schema(C, C->doc, "#", "", 0);
    /* a custom metaschema may switch vocabularies off: we cannot know what it means */
    if (unknown_meta) unsupported(C, "$schema (unknown metaschema)", C->doc);
    {
        const cJSON *id = cJSON_IsObject(C->doc) ? kw(C->doc, C->draft == 4 ? "id" : "$id") : NULL;
        if (!cJSON_IsString(id) && C->draft == 4 && cJSON_IsObject(C->doc)) id = kw(C->doc, "$id");
        (void)id;
        register_uri(C, "", C->doc);
    }
    if (!check_cycles(C)) g->root = compile_node(C, C->doc);
    else g->root = -1;
    while (C->n_pend && !C->oom && !C->too_big) {
        pending_conj p = C->pend[--C->n_pend];
        build_conj(C, &p.c, p.id);
        conj_free(&p.c);
        over_work(C);
    }
    int rc = 0;
    if (!C->oom && !C->too_big && g->root >= 0 && finish(C)) C->oom = 1;
    if (C->oom) {
        snprintf(err, err_len, "out of memory");
        rc = CINFER_ENOMEM;
    } else if (C->too_big || g->root < 0) {
        snprintf(err, err_len, "%s", C->too_big ? C->fail_msg : "schema: no rule for the root");
        rc = C->too_big ? C->too_big : CINFER_EUNSUPPORTED;
    } else {
        int hard = C->uns_more_hard;
        for (int i = 0; i < C->n_uns; i++) hard |= C->uns[i].hard;
        if (C->n_uns && (hard || !C->opt.permissive)) {
            size_t o = (size_t)snprintf(err, err_len, "unsupported:");
            for (int i = 0; i < C->n_uns && o < err_len; i++)
                o += (size_t)snprintf(err + o, err_len - o, "%s %s at %s", i ? ";" : "", C->uns[i].kw, C->uns[i].path);
            if (C->uns_more && o < err_len) snprintf(err + o, err_len - o, "; and %d more", C->uns_more);
            rc = CINFER_EUNSUPPORTED;
        }
    }
    comp_free(C);
    if (rc) {
        gram_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void gram_free(gram_grammar *g) {
    if (!g) return;
    for (int r = 0; r < g->n_rules; r++) {
        gram_rule *R = &g->rules[r];
        if (R->kind == GRAM_OBJ) empty_fa(R);
        gram_dfa_free(&R->fa);
        for (int i = 0; i < R->n_values; i++) free(R->values[i]);
        free(R->values);
        free(R->cp_min);
        free(R->cp_max);
    }
    free(g->rules);
    itab_free(&g->aux);
    itab_free(&g->texts);
    itab_free(&g->keysets);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

