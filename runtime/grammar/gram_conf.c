/*
 * gram_conf.c — confidence capture: at each enum, boolean and integer value
 * the grammar constrains, the model's distribution over the allowed values
 * (cinfer_confidence in include/cinfer.h).
 *
 * A value may take several tokens.  At its first token the allowed tokens'
 * probabilities (softmax of the raw logits over the allowed set) are split
 * among the values each token is consistent with; the sampled token's share
 * stays "open" and is refined by the next sampled token's distribution, and
 * so on until one value remains.  The mass of tokens not sampled is split
 * evenly among the values they allow (the model's split below them is never
 * computed: that would need forward passes down each branch).  The result
 * sums to 1 over the allowed values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_conf.h"

struct cinfer_confidence {
    cinfer_decision *d;
    int n, cap;
};

int cinfer_confidence_new(cinfer_confidence **out) {
    *out = calloc(1, sizeof **out);
    return *out ? 0 : CINFER_ENOMEM;
}

static void decision_free(cinfer_decision *d) {
    free((char *)d->path);
    for (int i = 0; i < d->n_choices; i++) free((char *)d->choices[i].value);
    free((cinfer_choice *)d->choices);
}

void gram_conf_clear(cinfer_confidence *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) decision_free(&c->d[i]);
    c->n = 0;
}

void cinfer_confidence_free(cinfer_confidence *c) {
    if (!c) return;
    gram_conf_clear(c);
    free(c->d);
    free(c);
}

int cinfer_confidence_count(const cinfer_confidence *c) { return c ? c->n : 0; }

const cinfer_decision *cinfer_confidence_get(const cinfer_confidence *c, int i) {
    return c && i >= 0 && i < c->n ? &c->d[i] : NULL;
}

static const char *kind_name(cinfer_decision_kind k) {
    return k == CINFER_DECISION_BOOL ? "boolean" : k == CINFER_DECISION_INT ? "integer" : "enum";
}

/* JSON string literal of s (cJSON would do, but the values are already JSON) */
static int put_json_str(char **buf, size_t *n, size_t *cap, const char *s) {
    size_t need = strlen(s) * 6 + 3;
    if (*n + need + 1 > *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        while (nc < *n + need + 1) nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return -1;
        *buf = nb;
        *cap = nc;
    }
    char *o = *buf + *n;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\', *o++ = (char)*p;
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o++ = '"';
    *n = (size_t)(o - *buf);
    (*buf)[*n] = 0;
    return 0;
}

static int put_raw(char **buf, size_t *n, size_t *cap, const char *s) {
    size_t l = strlen(s);
    if (*n + l + 1 > *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        while (nc < *n + l + 1) nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return -1;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *n, s, l + 1);
    *n += l;
    return 0;
}

char *cinfer_confidence_json(const cinfer_confidence *c) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int bad = put_raw(&buf, &n, &cap, "[");
    for (int i = 0; c && i < c->n && !bad; i++) {
        const cinfer_decision *d = &c->d[i];
        char tmp[96];
        bad |= put_raw(&buf, &n, &cap, i ? ",{\"path\":" : "{\"path\":");
        bad |= put_json_str(&buf, &n, &cap, d->path);
        snprintf(tmp, sizeof tmp, ",\"kind\":\"%s\"%s,\"chosen\":", kind_name(d->kind), d->partial ? ",\"partial\":true" : "");
        bad |= put_raw(&buf, &n, &cap, tmp);
        if (d->chosen >= 0) bad |= put_json_str(&buf, &n, &cap, d->choices[d->chosen].value);
        else bad |= put_raw(&buf, &n, &cap, "null");
        bad |= put_raw(&buf, &n, &cap, ",\"choices\":[");
        for (int k = 0; k < d->n_choices && !bad; k++) {
            bad |= put_raw(&buf, &n, &cap, k ? ",{\"value\":" : "{\"value\":");
            bad |= put_json_str(&buf, &n, &cap, d->choices[k].value);
            snprintf(tmp, sizeof tmp, ",\"p\":%.6g}", d->choices[k].p);
            bad |= put_raw(&buf, &n, &cap, tmp);
        }
        bad |= put_raw(&buf, &n, &cap, "]}");
    }
    bad |= put_raw(&buf, &n, &cap, "]");
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---- capture ---------------------------------------------------------------------------------- */

struct gram_conf_track {
    int open;
    int32_t rule;
    cinfer_decision_kind kind;
    const char *const *vals; /* candidates (the rule's values) */
    int n_vals;
    double *acc;             /* (n_vals) settled mass */
    uint8_t *live;           /* (n_vals) still consistent with the open branch */
    double p_open;
    int lead_left;           /* forced bytes before the value that tokens have not consumed yet */
    char *prefix;            /* bytes of the value so far */
    int n_prefix, cap_prefix;
    char *path;
    int cap_vals;
    /* scratch for the allowed-token distribution */
    int32_t *ids;
    double *p;
    int cap_ids;
};

int gram_conf_track_new(gram_conf_track **out) {
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -1;
}

void gram_conf_track_free(gram_conf_track *t) {
    if (!t) return;
    free(t->acc);
    free(t->live);
    free(t->prefix);
    free(t->path);
    free(t->ids);
    free(t->p);
    free(t);
}

/* Is value text v consistent with the value's bytes so far (P)?  P may run
 * past the value (a token "true," or "3]"), but not into more digits. */
static int consistent(const char *v, const char *P, int np) {
    if (np <= 0) return 1; /* nothing of the value yet (P may still be NULL) */
    int lv = (int)strlen(v);
    if (np <= lv) return !memcmp(v, P, (size_t)np);
    if (memcmp(v, P, (size_t)lv)) return 0;
    char last = v[lv - 1], next = P[lv];
    if (last >= '0' && last <= '9') return !strchr("0123456789.eE", next);
    return 1;
}

/* softmax of raw logits over the allowed tokens (EOG excluded) into t->ids/p */
static int allowed_dist(gram_conf_track *t, const gram_vocab *v, const uint32_t *bits, int n_words, const float *logits) {
    int n = 0;
    float mx = -INFINITY;
    for (int w = 0; w < n_words; w++)
        for (uint32_t b = bits[w]; b; b &= b - 1) {
            int32_t id = w * 32 + __builtin_ctz(b);
            if (gram_is_eog(v, id)) continue;
            if (n == t->cap_ids) {
                int nc = t->cap_ids ? t->cap_ids * 2 : 256;
                int32_t *ni = realloc(t->ids, (size_t)nc * sizeof *ni);
                double *np = realloc(t->p, (size_t)nc * sizeof *np);
                if (ni) t->ids = ni;
                if (np) t->p = np;
                if (!ni || !np) return -1;
                t->cap_ids = nc;
            }
            t->ids[n++] = id;
            if (logits[id] > mx) mx = logits[id];
        }
    double z = 0;
    for (int i = 0; i < n; i++) z += t->p[i] = exp((double)logits[t->ids[i]] - (double)mx);
    for (int i = 0; i < n; i++) t->p[i] = z > 0 ? t->p[i] / z : 1.0 / n;
    return n;
}

static int add_decision(cinfer_confidence *c, cinfer_decision *d) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        cinfer_decision *nd = realloc(c->d, (size_t)nc * sizeof *nd);
        if (!nd) return -1;
        c->d = nd;
        c->cap = nc;
    }
    c->d[c->n++] = *d;
    return 0;
}

static int cmp_choice(const void *a, const void *b) {
    double x = ((const cinfer_choice *)a)->p, y = ((const cinfer_choice *)b)->p;
    return x > y ? -1 : x < y;
}

static void finalize(gram_conf_track *t, cinfer_confidence *c) {
    if (!t->open) return;
    t->open = 0;
    int n_live = 0;
    for (int i = 0; i < t->n_vals; i++) n_live += t->live[i];
    for (int i = 0; i < t->n_vals; i++)
        if (t->live[i]) t->acc[i] += t->p_open / n_live;
    /* renormalise over the values (mass of tokens that left the decision is dropped) */
    double total = 0;
    for (int i = 0; i < t->n_vals; i++) total += t->acc[i];
    for (int i = 0; i < t->n_vals; i++) t->acc[i] = total > 0 ? t->acc[i] / total : 1.0 / t->n_vals;
    /* the generated value: the one live candidate the bytes complete */
    int chosen_v = -1;
    for (int i = 0; i < t->n_vals; i++)
        if (t->live[i] && (n_live == 1 || (int)strlen(t->vals[i]) <= t->n_prefix)) chosen_v = i;
    cinfer_decision d = {.kind = t->kind, .n_choices = 0, .chosen = -1};
    d.path = strdup(t->path ? t->path : "");
    cinfer_choice *ch = calloc((size_t)t->n_vals + 1, sizeof *ch);
    if (!d.path || !ch) {
        free((char *)d.path);
        free(ch);
        return;
    }
    for (int i = 0; i < t->n_vals; i++) {
        ch[i].value = strdup(t->vals[i]);
        ch[i].p = t->acc[i];
    }
    /* sort, keeping track of the chosen value */
    const char *chosen_text = chosen_v >= 0 ? ch[chosen_v].value : NULL;
    qsort(ch, (size_t)t->n_vals, sizeof *ch, cmp_choice);
    for (int i = 0; i < t->n_vals; i++)
        if (chosen_text && ch[i].value == chosen_text) d.chosen = i;
    d.choices = ch;
    d.n_choices = t->n_vals;
    if (add_decision(c, &d)) decision_free(&d);
}

/* Mass of the current step's allowed tokens, split among candidates
 * consistent with prefix + token (after the lead bytes); the sampled token's
 * part stays open.  Tokens that only cover lead bytes keep every candidate;
 * tokens consistent with none leave the decision (their mass is dropped). */
static void distribute(gram_conf_track *t, const gram_vocab *v, int n, int32_t sampled) {
    int np0 = t->n_prefix;
    double p_sampled = 0;
    for (int i = 0; i < n; i++) {
        int len;
        const char *b = gram_vocab_bytes(v, t->ids[i], &len);
        int skip = len < t->lead_left ? len : t->lead_left;
        b += skip;
        len -= skip;
        if (np0 + len > t->cap_prefix) {
            int nc = t->cap_prefix ? t->cap_prefix : 64;
            while (nc < np0 + len) nc *= 2;
            char *nb = realloc(t->prefix, (size_t)nc);
            if (!nb) return;
            t->prefix = nb;
            t->cap_prefix = nc;
        }
        if (len) memcpy(t->prefix + np0, b, (size_t)len);
        if (t->ids[i] == sampled) {
            p_sampled = t->p[i];
            continue;
        }
        int cnt = 0;
        for (int k = 0; k < t->n_vals; k++) cnt += t->live[k] && consistent(t->vals[k], t->prefix, np0 + len);
        if (!cnt) continue;
        for (int k = 0; k < t->n_vals; k++)
            if (t->live[k] && consistent(t->vals[k], t->prefix, np0 + len)) t->acc[k] += t->p_open * t->p[i] / cnt;
    }
    t->p_open *= p_sampled;
}

static int extend_prefix(gram_conf_track *t, const char *b, int len) {
    int skip = len < t->lead_left ? len : t->lead_left;
    t->lead_left -= skip;
    b += skip;
    len -= skip;
    if (t->n_prefix + len > t->cap_prefix) {
        int nc = t->cap_prefix ? t->cap_prefix : 64;
        while (nc < t->n_prefix + len) nc *= 2;
        char *nb = realloc(t->prefix, (size_t)nc);
        if (!nb) return -1;
        t->prefix = nb;
        t->cap_prefix = nc;
    }
    if (len) memcpy(t->prefix + t->n_prefix, b, (size_t)len);
    t->n_prefix += len;
    for (int k = 0; k < t->n_vals; k++)
        if (t->live[k] && !consistent(t->vals[k], t->prefix, t->n_prefix)) t->live[k] = 0;
    return 0;
}

static int n_live(const gram_conf_track *t) {
    int n = 0;
    for (int k = 0; k < t->n_vals; k++) n += t->live[k];
    return n;
}

/* Partial decision: the first tokens of an integer with many allowed values. */
static void partial_decision(gram_conf_track *t, cinfer_confidence *c, const gram_vocab *v, int n, int32_t sampled,
                             const char *path) {
    enum { TOP = 10 };
    cinfer_choice *ch = calloc(TOP + 1, sizeof *ch);
    if (!ch) return;
    int k = 0;
    /* top tokens by p (n is small for a number's first token) */
    uint8_t *used = calloc((size_t)n + 1, 1);
    if (!used) {
        free(ch);
        return;
    }
    int chosen = -1;
    double rest = 1;
    for (; k < TOP;) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!used[i] && (best < 0 || t->p[i] > t->p[best])) best = i;
        if (best < 0) break;
        used[best] = 1;
        int len;
        const char *b = gram_vocab_bytes(v, t->ids[best], &len);
        /* tokens with the same text (a piece and its byte token) are one choice */
        int same = -1;
        for (int j = 0; j < k && same < 0; j++)
            if ((int)strlen(ch[j].value) == len && !memcmp(ch[j].value, b, (size_t)len)) same = j;
        rest -= t->p[best];
        if (same >= 0) {
            ch[same].p += t->p[best];
            if (t->ids[best] == sampled) chosen = same;
            continue;
        }
        char *val = malloc((size_t)len + 1);
        if (!val) break;
        memcpy(val, b, (size_t)len);
        val[len] = 0;
        ch[k].value = val;
        ch[k].p = t->p[best];
        if (t->ids[best] == sampled) chosen = k;
        k++;
    }
    free(used);
    (void)rest;
    cinfer_decision d = {.kind = CINFER_DECISION_INT, .partial = 1, .choices = ch, .n_choices = k, .chosen = chosen};
    d.path = strdup(path);
    if (!d.path || add_decision(c, &d)) decision_free(&d);
}

void gram_conf_on_token(gram_conf_track *t, cinfer_confidence *c, const gram_grammar *g, const gram_vocab *v,
                        int32_t rule, int n_lead, const uint32_t *bits, const float *logits, int32_t id,
                        const char *path) {
    if (!c || !t) return;
    int n_words = (v ? gram_vocab_n_vocab(v) + 31 : 31) / 32;
    int len;
    const char *b = gram_vocab_bytes(v, id, &len);
    if (gram_is_eog(v, id)) {
        finalize(t, c);
        return;
    }
    if (t->open) {
        if (logits && bits && (n_live(t) > 1 || t->lead_left)) {
            int n = allowed_dist(t, v, bits, n_words, logits);
            if (n > 0) distribute(t, v, n, id);
        }
        extend_prefix(t, b, len);
        if (!n_live(t)) t->open = 0;
        else if (n_live(t) <= 1 && !t->lead_left) finalize(t, c);
        return;
    }
    if (rule < 0 || !logits || !bits) return;
    const gram_rule *R = &g->rules[rule];
    int n = allowed_dist(t, v, bits, n_words, logits);
    if (n <= 0) return;
    if (!R->n_values) {
        if (R->decision == GRAM_DEC_INT && !n_lead) partial_decision(t, c, v, n, id, path);
        return;
    }
    if (R->n_values > t->cap_vals) {
        double *na = realloc(t->acc, (size_t)R->n_values * sizeof *na);
        if (na) t->acc = na;
        uint8_t *nl = realloc(t->live, (size_t)R->n_values);
        if (nl) t->live = nl;
        if (!na || !nl) return;
        t->cap_vals = R->n_values;
    }
    t->open = 1;
    t->rule = rule;
    t->kind = R->decision == GRAM_DEC_BOOL ? CINFER_DECISION_BOOL
              : R->decision == GRAM_DEC_INT ? CINFER_DECISION_INT
                                            : CINFER_DECISION_ENUM;
    t->vals = (const char *const *)R->values;
    t->n_vals = R->n_values;
    for (int k = 0; k < t->n_vals; k++) t->acc[k] = 0, t->live[k] = 1;
    t->p_open = 1;
    t->n_prefix = 0;
    t->lead_left = n_lead;
    free(t->path);
    t->path = strdup(path);
    distribute(t, v, n, id);
    extend_prefix(t, b, len);
    if (!n_live(t)) {
        t->open = 0; /* the sampled token went elsewhere (closed the array, say) */
        return;
    }
    if (n_live(t) <= 1 && !t->lead_left) finalize(t, c);
}

void gram_conf_finish(gram_conf_track *t, cinfer_confidence *c) {
    if (t && c) finalize(t, c);
}
