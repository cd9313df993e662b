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

#include "gram.h"

#define MAX_RULES 50000
#define MAX_ALTS 512

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_ALL = 63 };

enum { F_ANY = 1, F_ONE = 2, F_NOENUM = 4 };

typedef struct {
    const cJSON *node;
    uint32_t flags;
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
} node_info;

typedef struct {
    node_info *v;
    size_t cap, n;
} info_map;

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
    m->n++;
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
    gram_grammar *g;
    gram_options opt;
    cJSON *doc;
    int draft; /* 4, 6, 7, 2019, 2020 */
    info_map info;
    uri_entry *ids;
    int n_ids, cap_ids;
    memo_entry *memo;
    size_t memo_cap, memo_n;
    unsup *uns;
    int n_uns, cap_uns;
    oneof_rec *oneofs;
    int n_oneofs, cap_oneofs;
    cJSON **owned; /* generated schema nodes */
    int n_owned, cap_owned;
    int32_t *alias; /* (cap_rules) */
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

static void unsupported_at(comp *C, const char *kw, const char *p, int hard) {
    for (int i = 0; i < C->n_uns; i++)
        if (!strcmp(C->uns[i].kw, kw) && !strcmp(C->uns[i].path, p)) return;
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
    for (int i = 0; i < C->n_ids; i++)
        if (!strcmp(C->ids[i].uri, uri)) return;
    uri_entry *ni = grow(C->ids, &C->cap_ids, C->n_ids + 1, sizeof *ni);
    if (!ni) {
        C->oom = 1;
        return;
    }
    C->ids = ni;
    C->ids[C->n_ids].uri = xstrdup(C, uri);
    C->ids[C->n_ids].node = node;
    C->n_ids++;
}

static const cJSON *lookup_uri(comp *C, const char *uri) {
    for (int i = 0; i < C->n_ids; i++)
        if (!strcmp(C->ids[i].uri, uri)) return C->ids[i].node;
    return NULL;
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

/* ---- exact numbers ------------------------------------------------------------------------ */

/* cJSON keeps numbers as doubles; bounds like 9223372036854775807 must stay
 * exact.  After parsing, each number node gets its literal's canonical
 * decimal text in valuestring (cJSON frees it with the node). */
static int attach_numbers(cJSON *v, const char **tok, const char *end, int depth) {
    if (depth > 1000) return -1;
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v)) {
            /* the next number literal outside strings */
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
            char buf[512];
            long n = gram_canon_number(p, (size_t)(q - p), buf, sizeof buf);
            *tok = q;
            if (n > 0) {
                v->valuestring = strdup(buf);
                if (!v->valuestring) return -1;
            }
        }
        if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && attach_numbers(v->child, tok, end, depth + 1)) return -1;
    }
    return 0;
}

cJSON *gram_json_parse(const char *text, size_t len, const char **err_at) {
    const char *e = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &e, 0);
    if (err_at) *err_at = e;
    if (!doc) return NULL;
    const char *tok = text;
    if (attach_numbers(doc, &tok, text + len, 0)) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* ---- conjunctions ------------------------------------------------------------------------ */

static int conj_has(const conj *c, const cJSON *n) {
    for (int i = 0; i < c->n; i++)
        if (c->v[i].node == n) return 1;
    return 0;
}

static void conj_push(comp *C, conj *c, const cJSON *n, uint32_t flags) {
    citem *nv = grow(c->v, &c->cap, c->n + 1, sizeof *nv);
    if (!nv) {
        C->oom = 1;
        return;
    }
    c->v = nv;
    c->v[c->n++] = (citem){n, flags};
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

static void flatten(comp *C, conj *c, const cJSON *n, int depth) {
    if (C->oom || c->is_false) return;
    if (cJSON_IsTrue(n)) return;
    if (cJSON_IsFalse(n)) {
        c->is_false = 1;
        return;
    }
    if (!cJSON_IsObject(n)) return; /* not a schema: nothing to enforce */
    if (conj_has(c, n)) return;
    if (depth > 500) {
        C->too_big = 1;
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
}

/* a conj member is "ref-only" (draft <= 7 $ref holder): no own keywords */
static int ref_holder(comp *C, const citem *it) {
    return C->draft <= 7 && cJSON_IsString(kw(it->node, "$ref"));
}

/* ---- rules ------------------------------------------------------------------------------- */

static int32_t new_rule(comp *C) {
    gram_grammar *g = C->g;
    if (g->n_rules >= MAX_RULES) {
        C->too_big = 1;
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

/* Determinise fragment f of n into rule id (an FA rule). */
static void set_fa(comp *C, int32_t id, gram_nfa *n, gram_frag f, const cJSON *where) {
    if (id < 0) return;
    n->tag[f.end] = 0;
    gram_dfa d;
    int rc = gram_dfa_from_nfa(n, f.start, NULL, NULL, max_states(C), &d);
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

/* Canonical JSON text of a cJSON value (numbers via the shortest decimal that
 * round-trips the double: cJSON's own printer may round them). */
static int print_value(const cJSON *v, char **buf, size_t *n, size_t *cap, int depth) {
#define PUTS(str, len)                                                       \
    do {                                                                    \
        size_t l_ = (len);                                                  \
        if (*n + l_ + 1 > *cap) {                                           \
            size_t nc_ = *cap ? *cap * 2 : 64;                              \
            while (nc_ < *n + l_ + 1) nc_ *= 2;                             \
            char *nb_ = realloc(*buf, nc_);                                 \
            if (!nb_) return -1;                                            \
            *buf = nb_;                                                     \
            *cap = nc_;                                                     \
        }                                                                   \
        memcpy(*buf + *n, (str), l_);                                       \
        *n += l_;                                                           \
        (*buf)[*n] = 0;                                                     \
    } while (0)
    if (depth > 512) return -1;
    if (cJSON_IsNull(v)) PUTS("null", 4);
    else if (cJSON_IsTrue(v)) PUTS("true", 4);
    else if (cJSON_IsFalse(v)) PUTS("false", 5);
    else if (cJSON_IsNumber(v) && v->valuestring) PUTS(v->valuestring, strlen(v->valuestring));
    else if (cJSON_IsNumber(v)) {
        char t[400];
        long l = gram_canon_double(v->valuedouble, t, sizeof t);
        if (l < 0) return -1;
        PUTS(t, (size_t)l);
    } else if (cJSON_IsString(v)) {
        cJSON *tmp = cJSON_CreateString(v->valuestring);
        char *txt = tmp ? cJSON_PrintUnformatted(tmp) : NULL;
        cJSON_Delete(tmp);
        if (!txt) return -1;
        char *cn = NULL;
        size_t cl;
        char e[64];
        int rc = gram_canon(txt, strlen(txt), &cn, &cl, e, sizeof e);
        free(txt);
        if (rc) return -1;
        if (*n + cl + 1 > *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            while (nc < *n + cl + 1) nc *= 2;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                free(cn);
                return -1;
            }
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *n, cn, cl);
        *n += cl;
        (*buf)[*n] = 0;
        free(cn);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int obj = cJSON_IsObject(v);
        PUTS(obj ? "{" : "[", 1);
        for (const cJSON *k = v->child; k; k = k->next) {
            if (k != v->child) PUTS(",", 1);
            if (obj) {
                cJSON key = {0};
                key.type = cJSON_String;
                key.valuestring = k->string;
                if (print_value(&key, buf, n, cap, depth + 1)) return -1;
                PUTS(":", 1);
            }
            if (print_value(k, buf, n, cap, depth + 1)) return -1;
        }
        PUTS(obj ? "}" : "]", 1);
    } else return -1;
#undef PUTS
    return 0;
}

char *gram_json_print(const cJSON *v) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (print_value(v, &buf, &n, &cap, 0) || !buf) {
        free(buf);
        return NULL;
    }
    return buf;
}

static char *canon_value(comp *C, const cJSON *v) {
    char *out = gram_json_print(v);
    if (!out) C->oom = 1;
    return out;
}

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

/* ---- memo ------------------------------------------------------------------------------- */

static int cmp_citem(const void *a, const void *b) {
    const citem *x = a, *y = b;
    if (x->node != y->node) return (uintptr_t)x->node < (uintptr_t)y->node ? -1 : 1;
    return x->flags < y->flags ? -1 : x->flags > y->flags;
}

static uint64_t conj_hash(const citem *v, int n, int is_false) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)is_false;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)v[i].node;
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

static int trivially_true(const cJSON *s) {
    if (cJSON_IsTrue(s)) return 1;
    if (!cJSON_IsObject(s)) return 0;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!in_list((const char *const[]){"title", "description", "$comment", "default", "examples", NULL}, k->string))
            return 0;
    return 1;
}

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
        } else if (!strcmp(s, "dependentSchemas")) {
            for (const cJSON *e = k->child; e; e = e->next)
                if (!trivially_true(e)) {
                    unsupported(C, "dependentSchemas", n);
                    break;
                }
        } else if (!strcmp(s, "dependencies")) {
            if (C->draft <= 7)
                for (const cJSON *e = k->child; e; e = e->next)
                    if (!cJSON_IsArray(e) && !trivially_true(e)) {
                        unsupported(C, "dependencies (schema form)", n);
                        break;
                    }
        } else if (!strcmp(s, "$dynamicRef") || !strcmp(s, "$recursiveRef")) {
            unsupported(C, s, n);
        }
        /* anything else is not a JSON Schema keyword: an annotation */
    }
}

/* ---- values: const / enum ---------------------------------------------------------------- */

typedef struct {
    const cJSON **v;
    int n, cap;
} vlist;

static void vpush(comp *C, vlist *l, const cJSON *v) {
    const cJSON **nv = grow(l->v, &l->cap, l->n + 1, sizeof *nv);
    if (!nv) {
        C->oom = 1;
        return;
    }
    l->v = nv;
    l->v[l->n++] = v;
}

static int vhas(const vlist *l, const cJSON *v) {
    for (int i = 0; i < l->n; i++)
        if (cJSON_Compare(l->v[i], v, 1)) return 1;
    return 0;
}

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
    char lo[128], hi[128];
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
            f->types &= b;
            if (io) f->int_only = 1;
        }
        char buf[128];
        const cJSON *v;
        const cJSON *emax = kw(n, "exclusiveMaximum"), *emin = kw(n, "exclusiveMinimum");
        if ((v = kw(n, "minimum")) && !num_text(v, buf, sizeof buf)) tighten_lo(f, buf, cJSON_IsTrue(emin));
        if ((v = kw(n, "maximum")) && !num_text(v, buf, sizeof buf)) tighten_hi(f, buf, cJSON_IsTrue(emax));
        if (emin && !num_text(emin, buf, sizeof buf)) tighten_lo(f, buf, 1);
        if (emax && !num_text(emax, buf, sizeof buf)) tighten_hi(f, buf, 1);
        if ((v = kw(n, "multipleOf")) && !num_text(v, buf, sizeof buf) && buf[0] != '-' && strcmp(buf, "0")) {
            if (f->n_mult < 8) {
                snprintf(f->mult_buf[f->n_mult], sizeof f->mult_buf[0], "%s", buf);
                f->mult[f->n_mult] = f->mult_buf[f->n_mult];
                f->n_mult++;
            } else unsupported(C, "multipleOf (too many)", n);
        }
        if ((v = kw(n, "minLength")) && cJSON_IsNumber(v) && v->valuedouble > f->min_len)
            f->min_len = (long)ceil(v->valuedouble);
        if ((v = kw(n, "maxLength")) && cJSON_IsNumber(v) && (f->max_len < 0 || v->valuedouble < f->max_len))
            f->max_len = v->valuedouble < 0 ? 0 : (long)floor(v->valuedouble);
        if ((v = kw(n, "pattern")) && cJSON_IsString(v)) {
            if (f->n_patterns < 32) {
                f->pattern_at[f->n_patterns] = n;
                f->patterns[f->n_patterns++] = v->valuestring;
            } else unsupported(C, "pattern (too many)", n);
        }
        if ((v = kw(n, "format")) && cJSON_IsString(v) && f->n_formats < 8 && !C->opt.format_annotation) {
            f->format_at[f->n_formats] = n;
            f->formats[f->n_formats++] = v->valuestring;
        }
        if ((v = kw(n, "minItems")) && cJSON_IsNumber(v) && v->valuedouble > f->min_items)
            f->min_items = (long)ceil(v->valuedouble);
        if ((v = kw(n, "maxItems")) && cJSON_IsNumber(v) && (f->max_items < 0 || v->valuedouble < f->max_items))
            f->max_items = v->valuedouble < 0 ? 0 : (long)floor(v->valuedouble);
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
    if (f->max_len >= 0 && f->min_len > f->max_len) f->types &= ~T_STR;
    if (f->int_only && f->frac_only) f->types &= ~T_NUM;
    if (f->max_items >= 0 && f->min_items > f->max_items) f->types &= ~T_ARR;
}

static int excluded_has(const facts *f, const char *canon_text, comp *C) {
    for (int i = 0; i < f->excluded.n; i++) {
        char *t = canon_value(C, f->excluded.v[i]);
        int eq = t && !strcmp(t, canon_text);
        free(t);
        if (eq) return 1;
    }
    return 0;
}

/* String content DFA (no quotes) from the facts' patterns and formats; NULL
 * content means "any".  Length is enforced by a counted rule. */
static int string_content_dfa(comp *C, const facts *f, gram_dfa *out, int *any) {
    *any = 1;
    int have = 0;
    for (int i = 0; i < f->n_patterns + f->n_formats; i++) {
        gram_dfa d;
        int rc;
        const cJSON *at = i < f->n_patterns ? f->pattern_at[i] : f->format_at[i - f->n_patterns];
        if (i < f->n_patterns) {
            gram_nfa n;
            gram_nfa_init(&n);
            gram_frag fr;
            char e[256];
            if (gram_regex(&n, f->patterns[i], &fr, e, sizeof e)) {
                char *msg = xasprintf(C, "pattern /%s/ (%s)", f->patterns[i], e);
                if (msg) unsupported(C, msg, at);
                free(msg);
                gram_nfa_free(&n);
                continue;
            }
            n.tag[fr.end] = 0;
            rc = gram_dfa_from_nfa(&n, fr.start, NULL, NULL, max_states(C), &d);
            gram_nfa_free(&n);
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
            rc = gram_dfa_intersect(out, &d, max_states(C), &t);
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
        int rc = gram_dfa_from_nfa(&n, fr.start, NULL, NULL, max_states(C), &pd);
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
            rc = gram_dfa_from_nfa(&an, af.start, NULL, NULL, max_states(C), &ad);
            gram_nfa_free(&an);
            if (!rc) {
                rc = gram_dfa_intersect(&ad, &cd, max_states(C), out);
                gram_dfa_free(&ad);
            }
            if (!rc) *any = 0;
        } else {
            rc = gram_dfa_intersect(out, &cd, max_states(C), &t);
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
    gram_dfa content;
    int any;
    if (string_content_dfa(C, f, &content, &any)) return -1;
    gram_nfa n;
    gram_nfa_init(&n);
    gram_frag q1 = gram_frag_bytes(&n, "\"", 1), q2 = gram_frag_bytes(&n, "\"", 1);
    gram_frag body = any ? gram_frag_star(&n, gram_frag_cp_range(&n, 0, 0x10FFFF)) : gram_frag_dfa(&n, &content);
    gram_frag fr = gram_frag_cat(&n, gram_frag_cat(&n, q1, body), q2);
    if (!any) gram_dfa_free(&content);
    int32_t id = new_rule(C);
    set_fa(C, id, &n, fr, C->doc);
    gram_nfa_free(&n);
    if (id < 0) return -1;
    gram_rule *r = &C->g->rules[id];
    /* not {const/enum} of strings: take the literals out */
    int n_ex = 0;
    for (int i = 0; i < f->excluded.n; i++) n_ex += json_type_of(f->excluded.v[i]) == T_STR;
    if (n_ex && r->fa.next) {
        gram_nfa x;
        gram_nfa_init(&x);
        int32_t xs = gram_nfa_state(&x), xe = gram_nfa_state(&x);
        x.tag[xe] = 0;
        for (int i = 0; i < f->excluded.n; i++) {
            if (json_type_of(f->excluded.v[i]) != T_STR) continue;
            char *t = canon_value(C, f->excluded.v[i]);
            if (!t) continue;
            gram_frag lf = gram_frag_bytes(&x, t, strlen(t));
            gram_nfa_edge_add(&x, xs, lf.start, -1, -1);
            gram_nfa_edge_add(&x, lf.end, xe, -1, -1);
            free(t);
        }
        gram_dfa ex, cx, t;
        int rc = gram_dfa_from_nfa(&x, xs, NULL, NULL, max_states(C), &ex);
        gram_nfa_free(&x);
        if (!rc) {
            rc = gram_dfa_complement(&ex, &cx);
            gram_dfa_free(&ex);
            if (!rc) {
                rc = gram_dfa_intersect(&r->fa, &cx, max_states(C), &t);
                gram_dfa_free(&cx);
                if (!rc) {
                    gram_dfa_free(&r->fa);
                    r->fa = t;
                }
            }
        }
        if (rc) C->oom = 1;
    }
    if (f->min_len > 0 || f->max_len >= 0) {
        r->counted = 1;
        r->min_count = f->min_len;
        r->max_count = f->max_len;
    }
    return id;
}

/* Number DFA for the facts. */
static int number_dfa(comp *C, const facts *f, const cJSON *where, gram_dfa *out) {
    gram_num_spec sp = {.lo = f->has_lo ? f->lo : NULL, .hi = f->has_hi ? f->hi : NULL, .lo_excl = f->lo_excl,
                        .hi_excl = f->hi_excl, .integer = f->int_only, .frac_only = f->frac_only,
                        .multiple_of = f->n_mult ? f->mult[0] : NULL};
    char e[256];
    int rc = gram_number_dfa(&sp, out, e, sizeof e);
    if (rc == -2) {
        too_large(C, e, where);
        return -1;
    }
    if (rc) {
        C->oom = 1;
        return -1;
    }
    for (int i = 0; i < f->n_not_mult; i++) {
        gram_num_spec m = {.integer = f->int_only, .multiple_of = f->not_mult[i]};
        gram_dfa d, cd, t;
        rc = gram_number_dfa(&m, &d, e, sizeof e);
        if (!rc) {
            rc = gram_dfa_complement(&d, &cd);
            gram_dfa_free(&d);
            if (!rc) {
                rc = gram_dfa_intersect(out, &cd, max_states(C), &t);
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
                if (!gram_dfa_intersect(out, &ints, max_states(C), &t)) {
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
            ok = !gram_dfa_from_nfa(&n, fr.start, NULL, NULL, max_states(C), &cap);
        }
        gram_nfa_free(&n);
        if (ok) {
            ok = !gram_dfa_intersect(out, &cap, max_states(C), &t);
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
        gram_num_spec m = {.integer = f->int_only, .multiple_of = f->mult[i]};
        gram_dfa d, t;
        rc = gram_number_dfa(&m, &d, e, sizeof e);
        if (!rc) {
            rc = gram_dfa_intersect(out, &d, max_states(C), &t);
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
static void array_frag(comp *C, const conj *c, const facts *f, gram_nfa *n, int32_t s, int32_t e);

/* Values of enum/const across the conjunction; returns 1 when restricted. */
static int gather_values(comp *C, const conj *c, vlist *out) {
    int restricted = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->v[i].flags & F_NOENUM) continue;
        const cJSON *n = c->v[i].node;
        const cJSON *cv = kw(n, "const"), *ev = kw(n, "enum");
        vlist here = {0};
        int has = 0;
        if (cv) {
            vpush(C, &here, cv);
            has = 1;
        }
        if (cJSON_IsArray(ev)) {
            vlist e2 = {0};
            for (const cJSON *x = ev->child; x; x = x->next)
                if (!vhas(&e2, x)) vpush(C, &e2, x);
            if (has) {
                vlist k = {0};
                for (int j = 0; j < here.n; j++)
                    if (vhas(&e2, here.v[j])) vpush(C, &k, here.v[j]);
                free(here.v);
                free(e2.v);
                here = k;
            } else {
                free(here.v);
                here = e2;
            }
            has = 1;
        }
        if (!has) continue;
        if (!restricted) {
            free(out->v);
            *out = here;
            restricted = 1;
        } else {
            vlist k = {0};
            for (int j = 0; j < out->n; j++)
                if (vhas(&here, out->v[j])) vpush(C, &k, out->v[j]);
            free(out->v);
            free(here.v);
            *out = k;
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
                    str_rule = string_rule(C, f);
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
    set_fa(C, id, &n, (gram_frag){s, e}, c->n ? c->v[0].node : C->doc);
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

static void compile_base(comp *C, const conj *c, int32_t id) {
    facts f;
    gather(C, c, &f);
    for (int i = 0; i < c->n; i++)
        if (!ref_holder(C, &c->v[i])) check_keywords(C, c->v[i].node, f.max_items);
    vlist vals = {0};
    if (gather_values(C, c, &vals)) {
        compile_enum(C, c, &f, &vals, id);
        free(vals.v);
        free(f.excluded.v);
        return;
    }
    free(vals.v);
    gram_nfa n;
    gram_nfa_init(&n);
    int32_t s = gram_nfa_state(&n), e = gram_nfa_state(&n);
#define ALT_IN(fr) do { gram_nfa_edge_add(&n, s, (fr).start, -1, -1); gram_nfa_edge_add(&n, (fr).end, e, -1, -1); } while (0)
    int lits = 0;
    const char *lit_names[3] = {"null", "true", "false"};
    int lit_types[3] = {T_NULL, T_BOOL, T_BOOL};
    char **bool_vals = NULL;
    int n_bool = 0;
    for (int i = 0; i < 3; i++) {
        if (!(f.types & lit_types[i]) || excluded_has(&f, lit_names[i], C)) continue;
        gram_frag fr = gram_frag_bytes(&n, lit_names[i], strlen(lit_names[i]));
        ALT_IN(fr);
        lits |= lit_types[i];
        if (lit_types[i] == T_BOOL) {
            char **nb = realloc(bool_vals, (size_t)(n_bool + 1) * sizeof *nb);
            if (nb) {
                bool_vals = nb;
                bool_vals[n_bool] = strdup(lit_names[i]);
                if (bool_vals[n_bool]) n_bool++;
            }
        }
    }
    gram_dfa ndfa = {0};
    int have_num = 0;
    if (f.types & T_NUM) {
        if (!number_dfa(C, &f, c->n ? c->v[0].node : C->doc, &ndfa)) {
            have_num = 1;
            if (f.excluded.n) {
                /* remove excluded numbers: intersect with the complement of their literals */
                gram_nfa x;
                gram_nfa_init(&x);
                int32_t xs = gram_nfa_state(&x), xe = gram_nfa_state(&x);
                x.tag[xe] = 0;
                for (int i = 0; i < f.excluded.n; i++)
                    if (json_type_of(f.excluded.v[i]) == T_NUM) {
                        char *t = canon_value(C, f.excluded.v[i]);
                        if (!t) continue;
                        gram_frag fr = gram_frag_bytes(&x, t, strlen(t));
                        gram_nfa_edge_add(&x, xs, fr.start, -1, -1);
                        gram_nfa_edge_add(&x, fr.end, xe, -1, -1);
                        free(t);
                    }
                gram_dfa ex, cx;
                if (!gram_dfa_from_nfa(&x, xs, NULL, NULL, max_states(C), &ex)) {
                    if (!gram_dfa_complement(&ex, &cx)) {
                        gram_dfa t;
                        if (!gram_dfa_intersect(&ndfa, &cx, max_states(C), &t)) {
                            gram_dfa_free(&ndfa);
                            ndfa = t;
                        } else C->oom = 1;
                        gram_dfa_free(&cx);
                    } else C->oom = 1;
                    gram_dfa_free(&ex);
                } else C->oom = 1;
                gram_nfa_free(&x);
            }
            gram_frag fr = gram_frag_dfa(&n, &ndfa);
            ALT_IN(fr);
        }
    }
    if (f.types & T_STR) {
        int32_t sr = string_rule(C, &f);
        if (sr >= 0) {
            if (C->g->rules[sr].counted) {
                gram_frag fr = gram_frag_call(&n, sr);
                ALT_IN(fr);
            } else {
                gram_frag fr = gram_frag_dfa(&n, &C->g->rules[sr].fa);
                ALT_IN(fr);
            }
        }
    }
    if (f.types & T_ARR) {
        int32_t as = gram_nfa_state(&n), ae = gram_nfa_state(&n);
        array_frag(C, c, &f, &n, as, ae);
        gram_nfa_edge_add(&n, s, as, -1, -1);
        gram_nfa_edge_add(&n, ae, e, -1, -1);
    }
    int32_t obj = -1;
    if (f.types & T_OBJ) {
        obj = compile_object(C, c, &f);
        if (obj >= 0) {
            gram_frag fr = gram_frag_call(&n, obj);
            ALT_IN(fr);
        }
    }
#undef ALT_IN
    if (f.types == T_OBJ && obj >= 0 && !C->oom) {
        C->alias[id] = obj; /* the value is just the object */
    } else {
        set_fa(C, id, &n, (gram_frag){s, e}, c->n ? c->v[0].node : C->doc);
        if (f.types == T_BOOL && n_bool > 1) {
            set_values(C, id, bool_vals, n_bool, GRAM_DEC_BOOL);
            bool_vals = NULL;
            n_bool = 0;
        } else if (f.types == T_NUM && f.int_only && have_num) int_values(C, &f, &ndfa, id);
    }
    for (int i = 0; i < n_bool; i++) free(bool_vals[i]);
    free(bool_vals);
    if (have_num) gram_dfa_free(&ndfa);
    gram_nfa_free(&n);
    free(f.excluded.v);
    (void)lits;
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
            /* the loop: after the rest item, ',' goes back to before it */
            int32_t comma = gram_nfa_state(n);
            gram_nfa_edge_add(n, after, comma, ',', ',');
            gram_nfa_edge_add(n, ws_after(C, n, comma), before, -1, -1);
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

typedef struct {
    char **v;
    int n, cap;
} slist;

static int slist_find(const slist *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s)) return i;
    return -1;
}

static void slist_add(comp *C, slist *l, const char *s) {
    if (slist_find(l, s) >= 0) return;
    char **nv = grow(l->v, &l->cap, l->n + 1, sizeof *nv);
    if (!nv) {
        C->oom = 1;
        return;
    }
    l->v = nv;
    l->v[l->n] = xstrdup(C, s);
    if (l->v[l->n]) l->n++;
}

/* canonical JSON string content of s (no quotes) */
static char *key_content(comp *C, const char *s) {
    cJSON *t = cJSON_CreateString(s);
    if (!t) {
        C->oom = 1;
        return NULL;
    }
    char *q = canon_value(C, t);
    cJSON_Delete(t);
    if (!q) return NULL;
    size_t l = strlen(q);
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
    rc = gram_dfa_from_nfa(&n, s, NULL, NULL, max_states(C), out);
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
        if (!gram_dfa_from_nfa(&ln, lf.start, NULL, NULL, max_states(C), &ld)) {
            if (!gram_dfa_intersect(out, &ld, max_states(C), &t)) {
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
        if (!gram_dfa_from_nfa(&qn, qf.start, NULL, NULL, max_states(C), &qd)) {
            if (!gram_dfa_intersect(out, &qd, max_states(C), &t)) {
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
    free(vals.v);
    free(pf.excluded.v);
    return rc;
}

static int32_t compile_object(comp *C, const conj *c, const facts *fa) {
    int32_t id = new_rule(C);
    if (id < 0) return -1;
    slist names = {0};
    pat_info *pats = NULL;
    int n_pat = 0;
    int min_props = -1, max_props = -1;
    /* declared names and patterns */
    for (int i = 0; i < c->n && !C->oom; i++) {
        const cJSON *n = c->v[i].node;
        if (ref_holder(C, &c->v[i])) continue;
        const cJSON *p = kw(n, "properties"), *r = kw(n, "required"), *pp = kw(n, "patternProperties");
        const cJSON *dr = kw(n, "dependentRequired"), *dp = C->draft <= 7 ? kw(n, "dependencies") : NULL, *v;
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
                gram_nfa nf;
                gram_nfa_init(&nf);
                gram_frag fr;
                char e[256];
                if (gram_regex(&nf, k->string, &fr, e, sizeof e)) {
                    char *msg = xasprintf(C, "patternProperties /%s/ (%s)", k->string, e);
                    if (msg) unsupported(C, msg, n);
                    free(msg);
                } else {
                    nf.tag[fr.end] = 0;
                    int rc = gram_dfa_from_nfa(&nf, fr.start, NULL, NULL, max_states(C), &pi->dfa);
                    if (rc == -2) too_large(C, "patternProperties automaton too large", n);
                    else if (rc) C->oom = 1;
                    else pi->ok = 1;
                }
                gram_nfa_free(&nf);
            }
        if ((v = kw(n, "minProperties")) && cJSON_IsNumber(v) && v->valuedouble > min_props)
            min_props = (int)ceil(v->valuedouble);
        if ((v = kw(n, "maxProperties")) && cJSON_IsNumber(v) && (max_props < 0 || v->valuedouble < max_props))
            max_props = v->valuedouble < 0 ? 0 : (int)floor(v->valuedouble);
    }
    for (int i = 0; i < fa->n_forbid; i++) slist_add(C, &names, fa->forbid[i]);
    if (n_pat > 500) unsupported(C, "patternProperties (more than 500)", c->v[0].node);
    int n_decl = names.n;
    gram_obj *o = calloc(1, sizeof *o);
    if (!o) {
        C->oom = 1;
        goto done;
    }
    C->g->rules[id].kind = GRAM_OBJ;
    C->g->rules[id].obj = o;
    o->n_decl = n_decl;
    o->n_words = (n_decl + 63) / 64;
    o->min_props = min_props;
    o->max_props = max_props;
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
            const cJSON *deps2[2] = {kw(n, "dependentRequired"), C->draft <= 7 ? kw(n, "dependencies") : NULL};
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
        free(cnt);
        free(lists);
    }
    /* key automaton: declared literals, patterns, any string */
    {
        gram_nfa nf;
        gram_nfa_init(&nf);
        int32_t ks = gram_nfa_state(&nf);
        for (int i = 0; i < n_decl && !C->oom; i++) {
            char *kc = key_content(C, names.v[i]);
            if (!kc) break;
            char *q = xasprintf(C, "\"%s\"", kc);
            free(kc);
            if (!q) break;
            gram_frag fr = gram_frag_bytes(&nf, q, strlen(q));
            free(q);
            nf.tag[fr.end] = TAG_PAT + n_pat + i;
            gram_nfa_edge_add(&nf, ks, fr.start, -1, -1);
        }
        for (int j = 0; j < n_pat; j++) {
            if (!pats[j].ok) continue;
            gram_frag q1 = gram_frag_bytes(&nf, "\"", 1), q2 = gram_frag_bytes(&nf, "\"", 1);
            gram_frag fr = gram_frag_cat(&nf, gram_frag_cat(&nf, q1, gram_frag_dfa(&nf, &pats[j].dfa)), q2);
            nf.tag[fr.end] = TAG_PAT + j;
            gram_nfa_edge_add(&nf, ks, fr.start, -1, -1);
        }
        {
            gram_frag q1 = gram_frag_bytes(&nf, "\"", 1), q2 = gram_frag_bytes(&nf, "\"", 1);
            gram_frag fr = gram_frag_cat(&nf, gram_frag_cat(&nf, q1, gram_frag_star(&nf, gram_frag_cp_range(&nf, 0, 0x10FFFF))), q2);
            nf.tag[fr.end] = TAG_ADDL;
            gram_nfa_edge_add(&nf, ks, fr.start, -1, -1);
        }
        key_lab L = {.C = C, .n_decl = n_decl, .n_pat = n_pat, .pw = (n_pat + 63) / 64 ? (n_pat + 63) / 64 : 1};
        if (L.pw > 8) L.pw = 8;
        int rc = gram_dfa_from_nfa(&nf, ks, key_labeller, &L, max_states(C), &o->key);
        gram_nfa_free(&nf);
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
                    if (!gram_dfa_intersect(&o->key, &names_dfa, max_states(C), &kd)) {
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
        for (int k = 0; k < L.n_class && !C->oom; k++) {
            conj vc = {0};
            const uint64_t *set = &L.classes[(size_t)k * L.pw];
            for (int m = 0; m < c->n; m++) {
                if (ref_holder(C, &c->v[m])) continue;
                int matched = 0;
                for (int j = 0; j < n_pat; j++)
                    if (pats[j].member == m && (set[j / 64] >> (j % 64) & 1)) {
                        flatten(C, &vc, pats[j].schema, 0);
                        matched = 1;
                    }
                const cJSON *ad = kw(c->v[m].node, "additionalProperties");
                if (!matched && ad) flatten(C, &vc, ad, 0);
            }
            o->label_rule[n_decl + k] = vc.is_false ? -1 : compile_conj(C, &vc);
            conj_free(&vc);
        }
        free(L.classes);
    }
done:
    for (int i = 0; i < names.n; i++) free(names.v[i]);
    free(names.v);
    for (int j = 0; j < n_pat; j++)
        if (pats[j].ok) gram_dfa_free(&pats[j].dfa);
    free(pats);
    return id;
}

/* ---- conjunction → rule ------------------------------------------------------------------- */

static int32_t compile_conj(comp *C, conj *c) {
    if (C->oom || C->too_big) return -1;
    int32_t *slot = memo_slot(C, c, 1);
    if (!slot) return -1;
    if (*slot >= 0) return *slot;
    int32_t id = new_rule(C);
    if (id < 0) return -1;
    *slot = id;
    if (c->is_false) {
        gram_nfa n;
        gram_nfa_init(&n);
        gram_frag f = gram_frag_empty(&n);
        int32_t dead = gram_nfa_state(&n); /* an accepting state nothing reaches */
        f.end = dead;
        set_fa(C, id, &n, f, C->doc);
        gram_nfa_free(&n);
        return id;
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
            return -1;
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
        if (na > MAX_ALTS) unsupported(C, "anyOf/oneOf: too many alternatives", n);
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
                return id;
            }
            C->oneofs = no;
            C->oneofs[C->n_oneofs++] = (oneof_rec){alts, na, xstrdup(C, path_of(C, n))};
        } else {
            if (na == 1) C->alias[id] = alts[0];
            free(alts);
        }
        return id;
    }
    compile_base(C, c, id);
    return id;
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
        free(o->dep_off);
        free(o->dep);
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

static void compute_first(gram_grammar *g, int32_t r, uint8_t *done) {
    if (done[r]) return;
    done[r] = 1;
    gram_rule *R = &g->rules[r];
    memset(R->first, 0, sizeof R->first);
    if (R->kind == GRAM_OBJ) {
        R->first['{' / 8] |= 1 << ('{' % 8);
        return;
    }
    const gram_dfa *d = &R->fa;
    for (int b = 0; b < 256; b++)
        if (gram_dfa_next(d, 0, (uint8_t)b) >= 0) R->first[b / 8] |= (uint8_t)(1 << (b % 8));
    if (d->call_off)
        for (int k = d->call_off[0]; k < d->call_off[1]; k++) {
            compute_first(g, d->calls[k].rule, done);
            for (int i = 0; i < 32; i++) R->first[i] |= g->rules[d->calls[k].rule].first[i];
        }
}

/* left recursion: a cycle through calls made before any byte is consumed */
static int left_cycle(const gram_grammar *g, int32_t r, uint8_t *state) {
    if (state[r] == 1) return 1;
    if (state[r] == 2) return 0;
    state[r] = 1;
    const gram_rule *R = &g->rules[r];
    if (R->kind == GRAM_FA && R->fa.call_off)
        for (int k = R->fa.call_off[0]; k < R->fa.call_off[1]; k++)
            if (left_cycle(g, R->fa.calls[k].rule, state)) return 1;
    state[r] = 2;
    return 0;
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
    for (int changed = 1; changed;) {
        changed = 0;
        for (int s = S - 1; s >= 0; s--)
            for (int c = 0; c < o->key.n_classes; c++) {
                int32_t t = o->key.next[(size_t)s * o->key.n_classes + c];
                if (t < 0) continue;
                for (int w = 0; w < W; w++) {
                    uint64_t nv = o->reach[(size_t)s * W + w] | o->reach[(size_t)t * W + w];
                    if (nv != o->reach[(size_t)s * W + w]) o->reach[(size_t)s * W + w] = nv, changed = 1;
                }
                if (o->reach_undecl[t] && !o->reach_undecl[s]) o->reach_undecl[s] = 1, changed = 1;
            }
    }
    return 0;
}

/* ---- oneOf: are two rules' languages provably disjoint? ------------------------------------ */

static int disjoint(const gram_grammar *g, int32_t a, int32_t b, int depth);

static int first_disjoint(const gram_rule *A, const gram_rule *B) {
    for (int i = 0; i < 32; i++)
        if (A->first[i] & B->first[i]) return 0;
    return 1;
}

static int32_t key_label_of(const gram_obj *o, const char *name) {
    cJSON *t = cJSON_CreateString(name);
    char *txt = t ? cJSON_PrintUnformatted(t) : NULL;
    cJSON_Delete(t);
    if (!txt) return -2;
    char *cn = NULL;
    size_t cl;
    char e[8];
    int32_t lab = -2;
    if (!gram_canon(txt, strlen(txt), &cn, &cl, e, sizeof e)) {
        int32_t s = 0;
        for (size_t i = 0; i < cl && s >= 0; i++) s = gram_dfa_next(&o->key, s, (uint8_t)cn[i]);
        lab = s >= 0 ? o->key.label[s] : -1;
        if (lab >= 0 && o->label_rule[lab] < 0) lab = -1;
    }
    free(cn);
    free(txt);
    return lab;
}

static int obj_disjoint(const gram_grammar *g, const gram_obj *A, const gram_obj *B, int depth) {
    if (A->max_props >= 0 && B->min_props > A->max_props) return 1;
    if (B->max_props >= 0 && A->min_props > B->max_props) return 1;
    for (int pass = 0; pass < 2; pass++) {
        const gram_obj *X = pass ? B : A, *Y = pass ? A : B;
        for (int i = 0; i < X->n_decl; i++) {
            if (!(X->required[i / 64] >> (i % 64) & 1)) continue;
            int32_t ly = key_label_of(Y, X->decl_names[i]);
            if (ly == -2) continue;
            if (ly < 0) return 1; /* Y forbids a key X requires */
            if (X->label_rule[i] >= 0 && disjoint(g, X->label_rule[i], Y->label_rule[ly], depth + 1)) return 1;
        }
    }
    return 0;
}

typedef struct {
    int32_t a, b;
} pair;

static int fa_disjoint(const gram_grammar *g, const gram_rule *A, const gram_rule *B, int depth) {
    const gram_dfa *da = &A->fa, *db = &B->fa;
    int cap = 4096, n = 0, head = 0;
    pair *q = malloc((size_t)cap * sizeof *q);
    if (!q) return 0;
    q[n++] = (pair){0, 0};
    int result = 1;
    while (head < n) {
        pair p = q[head++];
        if (da->label[p.a] >= 0 && db->label[p.b] >= 0) {
            result = 0;
            break;
        }
        uint8_t bytes_a[32] = {0}, bytes_b[32] = {0};
        for (int x = 0; x < 256; x++) {
            int32_t ta = gram_dfa_next(da, p.a, (uint8_t)x), tb = gram_dfa_next(db, p.b, (uint8_t)x);
            if (ta >= 0) bytes_a[x / 8] |= (uint8_t)(1 << (x % 8));
            if (tb >= 0) bytes_b[x / 8] |= (uint8_t)(1 << (x % 8));
            if (ta >= 0 && tb >= 0) {
                int seen = 0;
                for (int k = 0; k < n && !seen; k++) seen = q[k].a == ta && q[k].b == tb;
                if (!seen) {
                    if (n == cap) {
                        result = 0;
                        goto out;
                    }
                    q[n++] = (pair){ta, tb};
                }
            }
        }
        int ka0 = da->call_off ? da->call_off[p.a] : 0, ka1 = da->call_off ? da->call_off[p.a + 1] : 0;
        int kb0 = db->call_off ? db->call_off[p.b] : 0, kb1 = db->call_off ? db->call_off[p.b + 1] : 0;
        for (int ka = ka0; ka < ka1; ka++) {
            const gram_rule *CA = &g->rules[da->calls[ka].rule];
            for (int i = 0; i < 32; i++)
                if (CA->first[i] & bytes_b[i]) {
                    result = 0;
                    goto out;
                }
            for (int kb = kb0; kb < kb1; kb++) {
                if (disjoint(g, da->calls[ka].rule, db->calls[kb].rule, depth + 1)) continue;
                int32_t ta = da->calls[ka].next, tb = db->calls[kb].next;
                int seen = 0;
                for (int k = 0; k < n && !seen; k++) seen = q[k].a == ta && q[k].b == tb;
                if (!seen) {
                    if (n == cap) {
                        result = 0;
                        goto out;
                    }
                    q[n++] = (pair){ta, tb};
                }
            }
        }
        for (int kb = kb0; kb < kb1; kb++) {
            const gram_rule *CB = &g->rules[db->calls[kb].rule];
            for (int i = 0; i < 32; i++)
                if (CB->first[i] & bytes_a[i]) {
                    result = 0;
                    goto out;
                }
        }
    }
out:
    free(q);
    return result;
}

static int disjoint(const gram_grammar *g, int32_t a, int32_t b, int depth) {
    if (a < 0 || b < 0) return 1;
    const gram_rule *A = &g->rules[a], *B = &g->rules[b];
    if (first_disjoint(A, B)) return 1; /* includes empty rules */
    if (a == b || depth > 12) return 0;
    if (A->kind == GRAM_OBJ && B->kind == GRAM_OBJ) return obj_disjoint(g, A->obj, B->obj, depth);
    if (A->kind == GRAM_OBJ) {
        const gram_rule *t = A;
        A = B;
        B = t;
        int32_t ti = a;
        a = b;
        b = ti;
    }
    if (B->kind == GRAM_OBJ) {
        /* an FA against an object: only its calls at the start can produce '{' */
        if (gram_dfa_next(&A->fa, 0, '{') >= 0) return 0;
        if (A->fa.call_off)
            for (int k = A->fa.call_off[0]; k < A->fa.call_off[1]; k++)
                if (!disjoint(g, A->fa.calls[k].rule, b, depth + 1)) return 0;
        return 1;
    }
    return fa_disjoint(g, A, B, depth);
}

/* Counted strings: fewest and most code points from each (state, tracker)
 * to the closing quote (most capped at min_count: more is never needed). */
static int counted_dists(gram_rule *R) {
    const gram_dfa *d = &R->fa;
    int n = d->n_states, P = n * GRAM_N_TR;
    R->cp_min = malloc((size_t)P * sizeof *R->cp_min);
    R->cp_max = malloc((size_t)P * sizeof *R->cp_max);
    if (!R->cp_min || !R->cp_max) return -1;
    int32_t cap = R->min_count > 0 ? (int32_t)(R->min_count < GRAM_CP_INF ? R->min_count : GRAM_CP_INF) : 0;
    for (int i = 0; i < P; i++) {
        int acc = d->label[i / GRAM_N_TR] >= 0;
        R->cp_min[i] = acc ? 0 : GRAM_CP_INF;
        R->cp_max[i] = acc ? 0 : -1; /* -1: cannot close */
    }
    for (int iter = 0, changed = 1; changed && iter < 100000; iter++) {
        changed = 0;
        for (int s = 1; s < n; s++)
            for (int tr = 0; tr < GRAM_N_TR; tr++) {
                int i = s * GRAM_N_TR + tr;
                for (int b = 0; b < 256; b++) {
                    int32_t t = gram_dfa_next(d, s, (uint8_t)b);
                    if (t < 0) continue;
                    int cost, ntr;
                    if (tr == GRAM_TR_BND && b == '"') {
                        if (d->label[t] < 0) continue;
                        cost = 0;
                        ntr = tr;
                    } else ntr = gram_tr_next(tr, (uint8_t)b, &cost);
                    int j = t * GRAM_N_TR + ntr;
                    if (R->cp_min[j] < GRAM_CP_INF && R->cp_min[j] + cost < R->cp_min[i]) {
                        R->cp_min[i] = R->cp_min[j] + cost;
                        changed = 1;
                    }
                    if (R->cp_max[j] >= 0) {
                        int32_t v = R->cp_max[j] + cost;
                        if (v > cap) v = cap;
                        if (v > R->cp_max[i]) {
                            R->cp_max[i] = v;
                            changed = 1;
                        }
                    }
                }
            }
    }
    R->cp_span = 0;
    for (int i = 0; i < P; i++) {
        if (R->cp_min[i] < GRAM_CP_INF && R->cp_min[i] > R->cp_span) R->cp_span = R->cp_min[i];
        if (R->cp_max[i] > R->cp_span) R->cp_span = R->cp_max[i];
        if (R->cp_max[i] < 0) R->cp_max[i] = 0;
    }
    return 0;
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
                o->keys_free = o->max_props < 0;
                for (int k = 0; k < o->key.n_states && o->keys_free; k++)
                    if (o->key.label[k] < 0 && !o->reach_undecl[k]) o->keys_free = 0;
            }
            uint64_t zero[1] = {0};
            uint64_t *z = R->obj->n_words > 1 ? calloc((size_t)R->obj->n_words, sizeof *z) : zero;
            R->aux0 = z ? gram_aux_intern(g, z, R->obj->n_words, 0) : -1;
            if (z != zero) free(z);
            if (R->aux0 < 0) {
                free(prod);
                return -1;
            }
        }
        if (R->kind == GRAM_FA && R->counted && counted_dists(R)) {
            free(prod);
            return -1;
        }
        R->leaf = R->kind == GRAM_FA && !R->fa.call_off;
        if (R->kind == GRAM_FA && R->fa.call_off && R->fa.n_calls == 0) {
            free(R->fa.call_off);
            R->fa.call_off = NULL;
            R->leaf = 1;
        }
    }
    free(prod);
    /* left recursion */
    uint8_t *st = calloc((size_t)n + 1, 1);
    if (!st) return -1;
    int cyc = 0;
    for (int r = 0; r < n && !cyc; r++) cyc = left_cycle(g, r, st);
    free(st);
    if (cyc) {
        too_large(C, "recursion that consumes no input (left-recursive $ref)", C->doc);
        return 0;
    }
    uint8_t *done = calloc((size_t)n + 1, 1);
    if (!done) return -1;
    for (int r = 0; r < n; r++) compute_first(g, r, done);
    free(done);
    /* oneOf: alternation is exact only for disjoint branches */
    for (int i = 0; i < C->n_oneofs; i++) {
        oneof_rec *o = &C->oneofs[i];
        for (int a = 0; a < o->n; a++) o->alts[a] = resolve_alias(C, o->alts[a]);
        for (int a = 0; a < o->n; a++)
            for (int b = a + 1; b < o->n; b++)
                if (!disjoint(g, o->alts[a], o->alts[b], 0)) {
                    char kwb[96];
                    snprintf(kwb, sizeof kwb, "oneOf (branches %d and %d may overlap)", a, b);
                    unsupported_at(C, kwb, o->path, 0);
                    a = o->n;
                    break;
                }
    }
    return 0;
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
    const char *end = NULL;
    C->doc = gram_json_parse(schema, len, &end);
    if (!C->doc) {
        snprintf(err, err_len, "schema is not valid JSON (near byte %ld)", end ? (long)(end - schema) : 0L);
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
    g->root = compile_node(C, C->doc);
    int rc = 0;
    if (!C->oom && !C->too_big && g->root >= 0 && finish(C)) C->oom = 1;
    if (C->oom) {
        snprintf(err, err_len, "out of memory");
        rc = CINFER_ENOMEM;
    } else if (C->too_big || g->root < 0) {
        snprintf(err, err_len, "schema too large or nested too deeply (more than %d rules)", MAX_RULES);
        rc = CINFER_EUNSUPPORTED;
    } else {
        int hard = 0;
        for (int i = 0; i < C->n_uns; i++) hard |= C->uns[i].hard;
        if (C->n_uns && (hard || !C->opt.permissive)) {
            size_t o = (size_t)snprintf(err, err_len, "unsupported:");
            for (int i = 0; i < C->n_uns && o < err_len; i++)
                o += (size_t)snprintf(err + o, err_len - o, "%s %s at %s", i ? ";" : "", C->uns[i].kw, C->uns[i].path);
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
        free(R->univ);
        free(R->cp_min);
        free(R->cp_max);
    }
    free(g->rules);
    for (int i = 0; i < g->n_aux; i++) free(g->aux_dir[i / GRAM_AUX_CHUNK][i % GRAM_AUX_CHUNK]);
    for (int c = 0; c < GRAM_AUX_CHUNKS && g->aux_dir[c]; c++) free(g->aux_dir[c]);
    free(g->aux_hash);
    if (g->cache) g->cache_free(g->cache);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

int32_t gram_aux_intern(gram_grammar *g, const uint64_t *words, int n_words, int32_t count) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n_words * 31 ^ (uint64_t)(uint32_t)count * 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n_words; i++) {
        h ^= words[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    pthread_mutex_lock(&g->lock);
    int32_t id = -1;
    if ((size_t)(g->n_aux + 1) * 2 > g->aux_hcap) {
        size_t nc = g->aux_hcap ? g->aux_hcap * 2 : 256;
        int32_t *nt = malloc(nc * sizeof *nt);
        if (!nt) goto out;
        for (size_t i = 0; i < nc; i++) nt[i] = -1;
        for (int i = 0; i < g->n_aux; i++) {
            size_t k = gram_aux_get(g, i)->hash & (nc - 1);
            while (nt[k] >= 0) k = (k + 1) & (nc - 1);
            nt[k] = i;
        }
        free(g->aux_hash);
        g->aux_hash = nt;
        g->aux_hcap = nc;
    }
    size_t k = h & (g->aux_hcap - 1);
    while (g->aux_hash[k] >= 0) {
        const gram_aux *a = gram_aux_get(g, g->aux_hash[k]);
        if (a->hash == h && a->count == count && a->n_words == n_words &&
            (!n_words || !memcmp(a->words, words, (size_t)n_words * sizeof *words))) {
            id = g->aux_hash[k];
            goto out;
        }
        k = (k + 1) & (g->aux_hcap - 1);
    }
    if (g->n_aux >= GRAM_AUX_CHUNK * GRAM_AUX_CHUNKS) goto out;
    gram_aux **chunk = g->aux_dir[g->n_aux / GRAM_AUX_CHUNK];
    if (!chunk) {
        chunk = calloc(GRAM_AUX_CHUNK, sizeof *chunk);
        if (!chunk) goto out;
        g->aux_dir[g->n_aux / GRAM_AUX_CHUNK] = chunk;
    }
    gram_aux *a = malloc(sizeof *a + (size_t)n_words * sizeof *words);
    if (!a) goto out;
    a->hash = h;
    a->count = count;
    a->n_words = n_words;
    if (n_words) memcpy(a->words, words, (size_t)n_words * sizeof *words);
    chunk[g->n_aux % GRAM_AUX_CHUNK] = a;
    g->aux_hash[k] = g->n_aux;
    id = g->n_aux++;
out:
    pthread_mutex_unlock(&g->lock);
    return id;
}
