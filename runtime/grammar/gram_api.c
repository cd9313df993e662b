/*
 * gram_api.c — the public structured-output functions of include/cinfer.h
 * (cinfer_grammar_*), and gram_run: what runtime/api/api.c's generation loop
 * calls to constrain sampling (masks, forced tokens, acceptance, stopping,
 * confidence capture with the JSON path of each value).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_api.h"

int gram_api_new(const gram_vocab *gv, const char *schema, size_t len, const cinfer_grammar_options *opts,
                 cinfer_grammar **out, char *err, size_t err_len) {
    *out = NULL;
    if (opts && (opts->objects < CINFER_OBJECTS_AUTO || opts->objects > CINFER_OBJECTS_VALIDATION)) {
        snprintf(err, err_len, "grammar options: objects %d: expected CINFER_OBJECTS_AUTO (0), _GENERATION (1) "
                 "or _VALIDATION (2)", (int)opts->objects);
        return CINFER_EARG;
    }
    gram_options go = {.ws_flexible = opts && opts->whitespace == CINFER_WS_FLEXIBLE,
                       .permissive = opts && opts->permissive,
                       .format_annotation = opts && opts->format_annotation,
                       .gen_limits = gv != NULL,
                       .gen_objects = opts && opts->objects == CINFER_OBJECTS_GENERATION
                                          ? 1
                                          : opts && opts->objects == CINFER_OBJECTS_VALIDATION ? 0 : gv != NULL};
    cinfer_grammar *cg = calloc(1, sizeof *cg);
    if (!cg) {
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    int rc = gram_compile(schema, len, &go, &cg->g, err, err_len);
    if (!rc && gv && gram_masker_new(cg->g, gv, &cg->mk)) {
        snprintf(err, err_len, "out of memory (token masks)");
        rc = CINFER_ENOMEM;
    }
    if (rc) {
        cinfer_grammar_free(cg);
        return rc;
    }
    *out = cg;
    return 0;
}

const gram_vocab *gram_api_vocab(const cinfer_grammar *g) { return g && g->mk ? gram_masker_vocab(g->mk) : NULL; }

void cinfer_grammar_free(cinfer_grammar *g) {
    if (!g) return;
    gram_masker_free(g->mk); /* the masker's caches first: they point into the grammar */
    gram_free(g->g);
    free(g);
}

int cinfer_grammar_check(const cinfer_grammar *g, const char *json, size_t len, char *err, size_t err_len) {
    char e[512];
    if (!err) err = e, err_len = sizeof e;
    char *canon;
    size_t cl;
    if (gram_canon(json, len, &canon, &cl, err, err_len)) return CINFER_EFORMAT;
    int rc = gram_check(g->g, canon, cl, err, err_len);
    free(canon);
    return rc < 0 ? CINFER_ENOMEM : rc;
}

int cinfer_grammar_check_bytes(const cinfer_grammar *g, const char *text, size_t len, char *err, size_t err_len) {
    char e[512];
    if (!err) err = e, err_len = sizeof e;
    int rc = gram_check(g->g, text, len, err, err_len);
    return rc < 0 ? CINFER_ENOMEM : rc;
}

int cinfer_grammar_accepts_nothing(const cinfer_grammar *g) {
    gram_matcher *m = NULL;
    if (gram_matcher_new(g->g, &m)) return CINFER_ENOMEM;
    int none = !gram_matcher_can_continue(m);
    int oom = gram_matcher_oom(m);
    gram_matcher_free(m);
    return oom ? CINFER_ENOMEM : none;
}

/* ---- JSON path of the value being generated ---------------------------------------------- */

typedef struct {
    char type;  /* '{' or '[' */
    int index;
    char *key;  /* canonical key text (escaped), NUL-terminated */
    int key_len, key_cap;
} path_level;

typedef struct {
    path_level *lv;
    int depth, cap;
    int in_string, escape, string_is_key, expect_key;
    char *ptr; /* the JSON Pointer, rebuilt on demand */
    size_t ptr_cap;
} path_tracker;

static int pt_key_add(path_level *l, char c) {
    if (l->key_len + 2 > l->key_cap) {
        int nc = l->key_cap ? l->key_cap * 2 : 32;
        char *nk = realloc(l->key, (size_t)nc);
        if (!nk) return -1;
        l->key = nk;
        l->key_cap = nc;
    }
    l->key[l->key_len++] = c;
    l->key[l->key_len] = 0;
    return 0;
}

static void pt_byte(path_tracker *t, char c) {
    path_level *top = t->depth ? &t->lv[t->depth - 1] : NULL;
    if (t->in_string) {
        if (t->string_is_key && top) pt_key_add(top, c);
        if (t->escape) t->escape = 0;
        else if (c == '\\') t->escape = 1;
        else if (c == '"') {
            t->in_string = 0;
            if (t->string_is_key && top && top->key_len) top->key[--top->key_len] = 0; /* the closing quote */
        }
        return;
    }
    switch (c) {
    case '{':
    case '[':
        if (t->depth == t->cap) {
            int nc = t->cap ? t->cap * 2 : 8;
            path_level *nl = realloc(t->lv, (size_t)nc * sizeof *nl);
            if (!nl) return;
            memset(nl + t->cap, 0, (size_t)(nc - t->cap) * sizeof *nl);
            t->lv = nl;
            t->cap = nc;
        }
        t->lv[t->depth].type = c;
        t->lv[t->depth].index = 0;
        t->lv[t->depth].key_len = 0;
        if (t->lv[t->depth].key) t->lv[t->depth].key[0] = 0;
        t->depth++;
        t->expect_key = c == '{';
        break;
    case '"':
        t->in_string = 1;
        t->string_is_key = top && top->type == '{' && t->expect_key;
        if (t->string_is_key) top->key_len = 0;
        break;
    case ':':
        t->expect_key = 0;
        break;
    case ',':
        if (top && top->type == '{') t->expect_key = 1;
        else if (top) top->index++;
        break;
    case '}':
    case ']':
        if (t->depth) t->depth--;
        t->expect_key = 0;
        break;
    default:
        break;
    }
}

static int pt_put(path_tracker *t, size_t *n, const char *s, size_t len) {
    if (*n + len + 1 > t->ptr_cap) {
        size_t nc = t->ptr_cap ? t->ptr_cap * 2 : 128;
        while (nc < *n + len + 1) nc *= 2;
        char *np = realloc(t->ptr, nc);
        if (!np) return -1;
        t->ptr = np;
        t->ptr_cap = nc;
    }
    memcpy(t->ptr + *n, s, len);
    *n += len;
    t->ptr[*n] = 0;
    return 0;
}

/* JSON Pointer (RFC 6901) of the value that starts now. */
static const char *pt_pointer(path_tracker *t) {
    size_t n = 0;
    if (pt_put(t, &n, "", 0)) return "";
    for (int i = 0; i < t->depth; i++) {
        path_level *l = &t->lv[i];
        pt_put(t, &n, "/", 1);
        if (l->type == '[') {
            char num[24];
            int k = snprintf(num, sizeof num, "%d", l->index);
            pt_put(t, &n, num, (size_t)k);
            continue;
        }
        /* decode the canonical escapes, then escape ~ and / */
        for (int k = 0; k < l->key_len; k++) {
            char c = l->key[k];
            if (c == '\\' && k + 1 < l->key_len) {
                char e = l->key[++k];
                char d = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
                if (e == 'u' && k + 4 < l->key_len) {
                    char hex[5] = {l->key[k + 1], l->key[k + 2], l->key[k + 3], l->key[k + 4], 0};
                    d = (char)strtol(hex, NULL, 16);
                    k += 4;
                }
                c = d;
            }
            if (c == '~') pt_put(t, &n, "~0", 2);
            else if (c == '/') pt_put(t, &n, "~1", 2);
            else pt_put(t, &n, &c, 1);
        }
    }
    return t->ptr ? t->ptr : "";
}

static void pt_free(path_tracker *t) {
    for (int i = 0; i < t->cap; i++) free(t->lv[i].key);
    free(t->lv);
    free(t->ptr);
}

/* Snapshot of the tracker (the lead bytes are replayed, then undone). */
static void pt_save(const path_tracker *t, path_tracker *s) {
    *s = *t;
    s->lv = NULL;
    s->ptr = NULL;
    s->ptr_cap = 0;
    if (!t->depth) return;
    s->lv = calloc((size_t)t->cap, sizeof *s->lv);
    if (!s->lv) return;
    for (int i = 0; i < t->depth; i++) {
        s->lv[i] = t->lv[i];
        s->lv[i].key = t->lv[i].key ? strdup(t->lv[i].key) : NULL;
        s->lv[i].key_cap = s->lv[i].key ? s->lv[i].key_len + 1 : 0;
    }
}

static void pt_free(path_tracker *t);

static void pt_restore(path_tracker *t, path_tracker *s) {
    char *ptr = t->ptr;
    size_t ptr_cap = t->ptr_cap;
    if (!s->lv && s->depth) return; /* snapshot failed: keep going */
    t->ptr = NULL;
    t->ptr_cap = 0;
    pt_free(t);
    *t = *s;
    if (!t->lv) t->cap = 0;
    t->ptr = ptr;
    t->ptr_cap = ptr_cap;
}

/* ---- one constrained generation --------------------------------------------------------------- */

struct gram_run {
    const gram_grammar *g;
    gram_masker *mk;
    const gram_vocab *v;
    gram_matcher *m;
    uint32_t *bits, *scratch; /* (n_words) */
    int n_words;
    int32_t *allowed;         /* (n_vocab) the ids in bits, ascending */
    int mask_state;           /* matcher state bits were computed for, -1 none */
    int32_t forced[64];
    int n_forced, i_forced, forced_state;
    cinfer_confidence *conf;
    gram_conf_track *track;
    path_tracker path;
};

int gram_run_new(const cinfer_grammar *g, cinfer_confidence *conf, gram_run **out, char *err, size_t err_len) {
    *out = NULL;
    if (!g->mk) {
        snprintf(err, err_len, "grammar: compiled without a model (pass the model to cinfer_grammar_from_schema)");
        return CINFER_EARG;
    }
    gram_run *r = calloc(1, sizeof *r);
    if (!r) return CINFER_ENOMEM;
    r->g = g->g;
    r->mk = g->mk;
    r->v = gram_masker_vocab(g->mk);
    r->n_words = (gram_vocab_n_vocab(r->v) + 31) / 32;
    r->bits = malloc((size_t)r->n_words * sizeof *r->bits);
    r->scratch = malloc((size_t)r->n_words * sizeof *r->scratch);
    r->allowed = malloc(((size_t)gram_vocab_n_vocab(r->v) + 1) * sizeof *r->allowed);
    r->mask_state = -1;
    r->forced_state = -1;
    r->conf = conf;
    if (!r->bits || !r->scratch || !r->allowed || gram_matcher_new(r->g, &r->m) || (conf && gram_conf_track_new(&r->track))) {
        gram_run_free(r);
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    gram_conf_clear(conf);
    /* a schema no value satisfies: say so instead of generating nothing */
    if (!gram_matcher_can_continue(r->m)) {
        gram_run_free(r);
        snprintf(err, err_len, "grammar: the schema accepts no value");
        return CINFER_EARG;
    }
    *out = r;
    return 0;
}

void gram_run_free(gram_run *r) {
    if (!r) return;
    gram_conf_finish(r->track, r->conf);
    gram_conf_track_free(r->track);
    gram_matcher_free(r->m);
    free(r->bits);
    free(r->scratch);
    free(r->allowed);
    pt_free(&r->path);
    free(r);
}

int gram_run_forced(gram_run *r, int32_t *ids, int cap) {
    int32_t st = gram_matcher_state(r->m);
    if (r->forced_state != st) {
        r->n_forced = gram_forced_tokens(r->mk, r->m, r->forced, (int)(sizeof r->forced / sizeof r->forced[0]));
        r->i_forced = 0;
        r->forced_state = st;
    }
    int n = 0;
    /* hand out the next forced token only: the state moves after each */
    if (r->i_forced < r->n_forced && n < cap) ids[n++] = r->forced[r->i_forced];
    return n;
}

int gram_run_mask(gram_run *r, float *logits, int n_vocab) {
    int32_t st = gram_matcher_state(r->m);
    int n = gram_mask(r->mk, r->m, r->bits, r->scratch);
    if (n < 0) return -1;
    r->mask_state = st;
    gram_mask_apply(r->bits, logits, n_vocab);
    return n;
}

int gram_run_allowed(gram_run *r, const int32_t **ids) {
    int32_t st = gram_matcher_state(r->m);
    *ids = NULL;
    int n = gram_mask(r->mk, r->m, r->bits, r->scratch);
    if (n < 0) return -1;
    r->mask_state = st;
    int count = 0;
    for (int w = 0; w < r->n_words; w++) count += __builtin_popcount(r->bits[w]);
    /* a list only when it is short: listing most of the vocabulary costs more than masking it */
    if (count && count <= gram_vocab_n_vocab(r->v) / 8) {
        *ids = r->allowed;
        return gram_mask_ids(r->bits, gram_vocab_n_vocab(r->v), r->allowed);
    }
    return count;
}

void gram_run_apply(gram_run *r, float *logits, int n_vocab) { gram_mask_apply(r->bits, logits, n_vocab); }

int gram_run_accept(gram_run *r, int32_t id, const float *raw_logits) {
    int32_t st = gram_matcher_state(r->m);
    if (r->conf) {
        path_tracker saved;
        pt_save(&r->path, &saved);
        char lead[32];
        int n_lead = 0;
        const uint32_t *bits = raw_logits && r->mask_state == st ? r->bits : NULL;
        int32_t rule = bits ? gram_matcher_decision_rule(r->m, lead, &n_lead) : -1;
        /* the value's path is known once the lead bytes are in */
        for (int i = 0; i < n_lead; i++) pt_byte(&r->path, lead[i]);
        const char *path = pt_pointer(&r->path);
        gram_conf_on_token(r->track, r->conf, r->g, r->v, rule, n_lead, bits, bits ? raw_logits : NULL, id, path);
        /* undo the lead bytes: they are fed again with the token below */
        pt_restore(&r->path, &saved);
    }
    if (gram_accept_token(r->v, r->m, id)) return -1;
    /* forced tokens are handed out one by one from the list computed at st */
    if (r->forced_state == st && r->i_forced < r->n_forced && r->forced[r->i_forced] == id) {
        r->i_forced++;
        r->forced_state = gram_matcher_state(r->m);
    } else r->forced_state = -1;
    if (r->conf) {
        int len;
        const char *b = gram_vocab_bytes(r->v, id, &len);
        for (int i = 0; b && i < len; i++) pt_byte(&r->path, b[i]);
    }
    return 0;
}

int gram_run_expected(gram_run *r, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int b = 0; b < 256 && n + 8 < cap; b++) {
        int32_t save = gram_matcher_state(r->m);
        char c = (char)b;
        if (!gram_matcher_feed(r->m, &c, 1)) {
            n += (size_t)snprintf(buf + n, cap - n, b > 0x20 && b < 0x7f ? "%c" : "\\x%02x", b);
            gram_matcher_set_state(r->m, save);
        }
    }
    return (int)n;
}

int gram_run_done(gram_run *r) { return gram_matcher_accepting(r->m) && !gram_matcher_can_continue(r->m); }
