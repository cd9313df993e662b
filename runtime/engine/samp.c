/*
 * samp.c — the sampler (see samp.h for the contract and the llama.cpp
 * sources each step follows).
 *
 * One call works on a copy of the logits (the penalty writes to it), then on
 * a candidate array of (logit, id) pairs that the filters shrink from the
 * end, so every step is "keep the first n".  Candidates are either all ids in
 * ascending order ("unsorted") or sorted by (logit desc, id asc).
 */
#include "samp.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float logit;
    int32_t id;
} samp_cand;

struct samp_state {
    samp_params p;
    int n_vocab;
    float *work;      /* (n_vocab) logits after the penalty */
    samp_cand *cand;  /* (n_vocab) candidates */
    uint32_t *seen;   /* (n_vocab) stamp of the last call that penalized the id */
    uint32_t stamp;
    uint64_t rng[4];  /* xoshiro256** state */
};

samp_params samp_params_default(void) {
    return (samp_params){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0xFFFFFFFFu,
    };
}

/* ---- RNG: xoshiro256** (Blackman & Vigna), seeded by splitmix64 -------------- */

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_next(uint64_t s[4]) {
    uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

void samp_seed(samp_state *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ---- lifecycle ------------------------------------------------------------------ */

int samp_new(const samp_params *p, int n_vocab, samp_state **out) {
    if (!out) return SAMP_EINVAL;
    *out = NULL;
    if (!p || n_vocab <= 0) return SAMP_EINVAL;
    if (!isfinite(p->temp) || !(p->top_p >= 0.0f) || isnan(p->min_p) || p->min_p < 0.0f ||
        p->min_p > 1.0f || !(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty) || p->repeat_last_n < -1)
        return SAMP_EINVAL;
    samp_state *s = calloc(1, sizeof *s);
    if (!s) return SAMP_ENOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    if (!s->work || !s->cand || !s->seen) {
        samp_free(s);
        return SAMP_ENOMEM;
    }
    samp_seed(s, p->seed);
    *out = s;
    return 0;
}

void samp_free(samp_state *s) {
    if (!s) return;
    free(s->work);
    free(s->cand);
    free(s->seen);
    free(s);
}

/* ---- steps ------------------------------------------------------------------------ */

/* a ranks above b: higher logit, then lower id */
static inline bool cand_above(const samp_cand *a, const samp_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *x, const void *y) {
    const samp_cand *a = x, *b = y;
    return cand_above(a, b) ? -1 : cand_above(b, a) ? 1 : 0;
}

/* llama_sampler_penalties (repeat part): each distinct id among the last
 * repeat_last_n of history once — positive logits divided, others multiplied. */
static void apply_penalty(samp_state *s, const int32_t *history, int n_history) {
    float pen = s->p.repeat_penalty;
    int last_n = s->p.repeat_last_n;
    if (pen == 1.0f || last_n == 0 || n_history <= 0 || !history) return;
    int start = (last_n < 0 || last_n >= n_history) ? 0 : n_history - last_n;
    if (++s->stamp == 0) { /* wrapped: forget old stamps */
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    for (int i = start; i < n_history; i++) {
        int32_t id = history[i];
        if (id < 0 || id >= s->n_vocab || s->seen[id] == s->stamp || (s->p.no_penalty && s->p.no_penalty[id]))
            continue;
        s->seen[id] = s->stamp;
        float l = s->work[id];
        s->work[id] = l <= 0.0f ? l * pen : l / pen;
    }
}

/* Move the k best of cand[0..n) to cand[0..k), sorted.  A min-heap of the k
 * best so far (worst at the root): O(n log k). */
static void select_top_k(samp_cand *c, int n, int k) {
    for (int i = k / 2 - 1; i >= 0; i--) { /* heapify c[0..k) with the worst on top */
        int j = i;
        for (;;) {
            int l = 2 * j + 1, w = j;
            if (l < k && cand_above(&c[w], &c[l])) w = l;
            if (l + 1 < k && cand_above(&c[w], &c[l + 1])) w = l + 1;
            if (w == j) break;
            samp_cand t = c[j];
            c[j] = c[w], c[w] = t, j = w;
        }
    }
    for (int i = k; i < n; i++) {
        if (!cand_above(&c[i], &c[0])) continue;
        c[0] = c[i];
        int j = 0;
        for (;;) {
            int l = 2 * j + 1, w = j;
            if (l < k && cand_above(&c[w], &c[l])) w = l;
            if (l + 1 < k && cand_above(&c[w], &c[l + 1])) w = l + 1;
            if (w == j) break;
            samp_cand t = c[j];
            c[j] = c[w], c[w] = t, j = w;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* top_k, top_p, min_p, temperature and the draw over candidates c[0..n),
 * in id order (the draw walks them in that order when nothing sorted them),
 * out of n_total tokens: the others are at -inf, which decides whether top_k
 * applies (and sorts), as it would over all of them. */
static int sample_cands(samp_state *s, samp_cand *c, int n, int n_total) {
    bool sorted = false;

    /* top_k (llama_sampler_top_k_impl) */
    if (s->p.top_k > 0 && s->p.top_k < n_total) {
        if (s->p.top_k < n) {
            select_top_k(c, n, s->p.top_k);
            n = s->p.top_k;
        } else qsort(c, (size_t)n, sizeof *c, cmp_cand); /* the top k are these and -inf ones */
        sorted = true;
    }

    /* top_p (llama_sampler_top_p_apply): softmax over the candidates, keep the
     * shortest head whose cumulative probability reaches top_p */
    if (s->p.top_p < 1.0f) {
        if (!sorted) {
            qsort(c, (size_t)n, sizeof *c, cmp_cand);
            sorted = true;
        }
        float max = c[0].logit;
        if (max > -INFINITY) {
            double sum = 0.0;
            for (int i = 0; i < n; i++) sum += expf(c[i].logit - max);
            float cum = 0.0f;
            for (int i = 0; i < n; i++) {
                cum += (float)(expf(c[i].logit - max) / sum);
                if (cum >= s->p.top_p) {
                    n = i + 1;
                    break;
                }
            }
        }
    }

    /* min_p (llama_sampler_min_p_apply): keep logit >= max + log(min_p) */
    if (s->p.min_p > 0.0f) {
        if (sorted) {
            float thr = c[0].logit + logf(s->p.min_p);
            int i = 1; /* the first always stays */
            while (i < n && c[i].logit >= thr) i++;
            n = i;
        } else {
            float max = -INFINITY;
            for (int i = 0; i < n; i++)
                if (c[i].logit > max) max = c[i].logit;
            float thr = max + logf(s->p.min_p);
            int m = 0;
            for (int i = 0; i < n; i++)
                if (c[i].logit >= thr) c[m++] = c[i];
            if (m > 0) n = m;
        }
    }

    /* temperature, softmax, draw (llama_sampler_temp, llama_sampler_dist).
     * The maximum comes off before the division, so the best candidate's
     * value is 0 at any temperature: a tiny one sends the others to -inf (not
     * every positive logit to +inf), a huge one everything towards 0. */
    int best = 0;
    for (int i = 1; i < n; i++)
        if (cand_above(&c[i], &c[best])) best = i;
    const float max = c[best].logit;
    if (!(max > -INFINITY)) return c[best].id; /* all -inf */
    for (int i = 0; i < n; i++) c[i].logit = (c[i].logit - max) / s->p.temp;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += expf(c[i].logit);
    double r = rng_uniform(s->rng) * sum, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += expf(c[i].logit);
        if (r < cum) return c[i].id;
    }
    return c[best].id; /* rounding left r at the very top: take the mode */
}

int samp_sample(samp_state *s, const float *logits, const int32_t *history, int n_history) {
    if (!s || !logits || n_history < 0) return SAMP_EINVAL;
    const int n_vocab = s->n_vocab;
    for (int i = 0; i < n_vocab; i++) s->work[i] = isnan(logits[i]) ? -INFINITY : logits[i];
    apply_penalty(s, history, n_history);

    /* greedy: first maximum = lowest id among ties.  top_p 0 keeps only the
     * top candidate of (logit desc, id asc) — the same token, whatever top_k,
     * min_p and the temperature do. */
    if (s->p.temp <= 0.0f || s->p.top_p <= 0.0f) {
        int best = 0;
        for (int i = 1; i < n_vocab; i++)
            if (s->work[i] > s->work[best]) best = i;
        return best;
    }

    samp_cand *c = s->cand;
    for (int i = 0; i < n_vocab; i++) c[i] = (samp_cand){s->work[i], i};
    return sample_cands(s, c, n_vocab, n_vocab);
}

int samp_sample_ids(samp_state *s, const float *logits, const int32_t *ids, int n_ids, const int32_t *history,
                    int n_history) {
    if (!s || !logits || !ids || n_ids <= 0 || n_history < 0) return SAMP_EINVAL;
    /* the penalty, as apply_penalty would leave the candidates' logits */
    float pen = s->p.repeat_penalty;
    int last_n = s->p.repeat_last_n, penalize = pen != 1.0f && last_n != 0 && n_history > 0 && history;
    if (penalize) {
        if (++s->stamp == 0) {
            memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
            s->stamp = 1;
        }
        int start = (last_n < 0 || last_n >= n_history) ? 0 : n_history - last_n;
        for (int i = start; i < n_history; i++)
            if (history[i] >= 0 && history[i] < s->n_vocab && !(s->p.no_penalty && s->p.no_penalty[history[i]]))
                s->seen[history[i]] = s->stamp;
    }
    samp_cand *c = s->cand;
    for (int i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= s->n_vocab) return SAMP_EINVAL;
        float l = isnan(logits[id]) ? -INFINITY : logits[id];
        if (penalize && s->seen[id] == s->stamp) l = l <= 0.0f ? l * pen : l / pen;
        c[i] = (samp_cand){l, id};
    }
    if (s->p.temp <= 0.0f || s->p.top_p <= 0.0f) { /* greedy, as in samp_sample (ids ascend) */
        int best = 0;
        for (int i = 1; i < n_ids; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }
    return sample_cands(s, c, n_ids, s->n_vocab);
}

/* ---- OpenAI frequency / presence penalties ----------------------------------------- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int samp_penalize_counts(float *logits, int n_vocab, const int32_t *tokens, int n, float frequency,
                         float presence) {
    if (!logits || n_vocab < 0 || n < 0 || (n && !tokens)) return SAMP_EINVAL;
    if (!n || (frequency == 0.0f && presence == 0.0f)) return 0;
    int32_t *t = malloc((size_t)n * sizeof *t);
    if (!t) return SAMP_ENOMEM;
    memcpy(t, tokens, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_i32);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && t[j] == t[i]) j++;
        int32_t id = t[i];
        if (id >= 0 && id < n_vocab) logits[id] -= (float)(j - i) * frequency + presence;
        i = j;
    }
    free(t);
    return 0;
}
