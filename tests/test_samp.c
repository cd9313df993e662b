/* test_samp.c — the sampler: greedy exactness, determinism, and the filters'
 * effect measured over many seeded draws. */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include "engine/samp.h"

static samp_params params(float temp, int top_k, float top_p, float min_p) {
    samp_params p = samp_params_default();
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = 1234;
    return p;
}

/* deterministic pseudo-random logits in [-8, 8) */
static void fill_logits(float *l, int n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)((x >> 8) & 0xffff) / 4096.0f - 8.0f;
    }
}

/* Counts of n_draws draws from logits (n) with p. */
static void histogram(const samp_params *p, const float *logits, int n, int n_draws, int *counts) {
    samp_state *s;
    EXPECT_EQ_I(samp_new(p, n, &s), 0);
    for (int i = 0; i < n; i++) counts[i] = 0;
    for (int d = 0; d < n_draws; d++) {
        int t = samp_sample(s, logits, NULL, 0);
        EXPECT(t >= 0 && t < n);
        if (t >= 0 && t < n) counts[t]++;
    }
    samp_free(s);
}

TEST(samp, defaults_and_validation) {
    samp_params d = samp_params_default();
    EXPECT_NEAR(d.temp, 0.8, 1e-7);
    EXPECT_EQ_I(d.top_k, 40);
    EXPECT_NEAR(d.top_p, 0.95, 1e-7);
    EXPECT_NEAR(d.min_p, 0.05, 1e-7);
    EXPECT_NEAR(d.repeat_penalty, 1.0, 0);
    EXPECT_EQ_I(d.repeat_last_n, 64);
    samp_state *s = NULL;
    EXPECT_EQ_I(samp_new(&d, 0, &s), SAMP_EINVAL);
    EXPECT_EQ_I(samp_new(NULL, 10, &s), SAMP_EINVAL);
    samp_params bad = d;
    bad.top_p = -0.1f;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.top_p = NAN;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.temp = INFINITY;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.temp = NAN;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.min_p = NAN;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.repeat_penalty = 0.0f;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    bad = d;
    bad.repeat_last_n = -2;
    EXPECT_EQ_I(samp_new(&bad, 10, &s), SAMP_EINVAL);
    EXPECT(s == NULL);
    EXPECT_EQ_I(samp_new(&d, 10, &s), 0);
    float l[10] = {0};
    EXPECT_EQ_I(samp_sample(s, NULL, NULL, 0), SAMP_EINVAL);
    EXPECT_EQ_I(samp_sample(s, l, NULL, -1), SAMP_EINVAL);
    samp_free(s);
    samp_free(NULL);
}

TEST(samp, greedy_is_exact_argmax) {
    enum { N = 32000 };
    float *l = malloc(N * sizeof *l);
    samp_params p = params(0.0f, 40, 0.95f, 0.05f);
    samp_state *s;
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    for (uint32_t r = 0; r < 20; r++) {
        fill_logits(l, N, r);
        EXPECT_EQ_I(samp_sample(s, l, NULL, 0), argmax_f32(l, N));
    }
    /* ties go to the lowest id; -inf and NaN never win */
    for (int i = 0; i < N; i++) l[i] = -INFINITY;
    l[N - 1] = 3.0f;
    l[17] = 3.0f;
    l[5] = NAN;
    EXPECT_EQ_I(samp_sample(s, l, NULL, 0), 17);
    p.temp = -1.0f;
    samp_free(s);
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    EXPECT_EQ_I(samp_sample(s, l, NULL, 0), 17);
    samp_free(s);
    free(l);
}

TEST(samp, top_k_1_equals_greedy) {
    enum { N = 4096 };
    float l[N];
    for (uint64_t seed = 0; seed < 5; seed++) {
        samp_params p = params(1.5f, 1, 1.0f, 0.0f);
        p.seed = seed;
        samp_state *s;
        EXPECT_EQ_I(samp_new(&p, N, &s), 0);
        for (uint32_t r = 0; r < 50; r++) {
            fill_logits(l, N, r + 100);
            EXPECT_EQ_I(samp_sample(s, l, NULL, 0), argmax_f32(l, N));
        }
        samp_free(s);
    }
}

TEST(samp, deterministic_for_a_seed) {
    enum { N = 2048, STEPS = 300 };
    float l[N];
    samp_params p = samp_params_default();
    p.seed = 42;
    samp_state *a, *b, *c;
    EXPECT_EQ_I(samp_new(&p, N, &a), 0);
    EXPECT_EQ_I(samp_new(&p, N, &b), 0);
    p.seed = 43;
    EXPECT_EQ_I(samp_new(&p, N, &c), 0);
    int same_ab = 0, same_ac = 0, first[STEPS];
    for (int t = 0; t < STEPS; t++) {
        fill_logits(l, N, (uint32_t)t);
        for (int i = 0; i < N; i++) l[i] *= 0.3f; /* flatter: many candidates survive */
        int x = samp_sample(a, l, NULL, 0), y = samp_sample(b, l, NULL, 0), z = samp_sample(c, l, NULL, 0);
        first[t] = x;
        same_ab += x == y;
        same_ac += x == z;
    }
    EXPECT_EQ_I(same_ab, STEPS);
    EXPECT(same_ac < STEPS / 2);
    /* reseeding restarts the stream */
    samp_seed(a, 42);
    int again = 0;
    for (int t = 0; t < STEPS; t++) {
        fill_logits(l, N, (uint32_t)t);
        for (int i = 0; i < N; i++) l[i] *= 0.3f;
        again += samp_sample(a, l, NULL, 0) == first[t];
    }
    EXPECT_EQ_I(again, STEPS);
    samp_free(a);
    samp_free(b);
    samp_free(c);
}

/* probabilities 0.5 0.3 0.15 0.04 0.01, then a long tail of ~0 */
enum { NT = 64 };
static void tail_logits(float *l) {
    static const double p[5] = {0.5, 0.3, 0.15, 0.04, 0.01};
    for (int i = 0; i < NT; i++) l[i] = i < 5 ? (float)log(p[i]) : -30.0f;
}

TEST(samp, top_p_excludes_tail) {
    float l[NT];
    tail_logits(l);
    int counts[NT];
    /* cumulative 0.5, 0.8, 0.95 >= 0.9: ids 0..2 stay */
    for (int k = 0; k <= 40; k += 40) {
        samp_params p = params(1.0f, k, 0.9f, 0.0f);
        histogram(&p, l, NT, 20000, counts);
        for (int i = 3; i < NT; i++) EXPECT_EQ_I(counts[i], 0);
        EXPECT_NEAR(counts[0] / 20000.0, 0.5 / 0.95, 0.015);
        EXPECT_NEAR(counts[1] / 20000.0, 0.3 / 0.95, 0.015);
        EXPECT_NEAR(counts[2] / 20000.0, 0.15 / 0.95, 0.015);
    }
    /* top_p 1: everything may come out, at its probability */
    samp_params p = params(1.0f, 0, 1.0f, 0.0f);
    histogram(&p, l, NT, 20000, counts);
    EXPECT_NEAR(counts[3] / 20000.0, 0.04, 0.006);
    EXPECT(counts[4] > 0);
}

TEST(samp, min_p_excludes_tail) {
    float l[NT];
    tail_logits(l);
    int counts[NT];
    /* min_p 0.1: p >= 0.05 stays (ids 0..2), sorted (top_k) and unsorted paths */
    for (int k = 0; k <= 40; k += 40) {
        samp_params p = params(1.0f, k, 1.0f, 0.1f);
        histogram(&p, l, NT, 20000, counts);
        for (int i = 3; i < NT; i++) EXPECT_EQ_I(counts[i], 0);
        EXPECT_NEAR(counts[0] / 20000.0, 0.5 / 0.95, 0.015);
        EXPECT_NEAR(counts[2] / 20000.0, 0.15 / 0.95, 0.015);
    }
    /* temperature comes after the filters: a high one flattens the survivors only */
    samp_params p = params(100.0f, 0, 1.0f, 0.1f);
    histogram(&p, l, NT, 30000, counts);
    for (int i = 3; i < NT; i++) EXPECT_EQ_I(counts[i], 0);
    for (int i = 0; i < 3; i++) EXPECT_NEAR(counts[i] / 30000.0, 1.0 / 3, 0.02);
}

TEST(samp, repetition_penalty) {
    enum { N = 16 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = -5.0f;
    samp_params p = params(0.0f, 40, 1.0f, 0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 2;
    samp_state *s;
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);

    l[0] = 2.0f, l[1] = 1.5f; /* positive: 2.0 / 2 = 1.0 < 1.5 */
    int32_t h0[] = {0};
    EXPECT_EQ_I(samp_sample(s, l, NULL, 0), 0);
    EXPECT_EQ_I(samp_sample(s, l, h0, 1), 1);
    l[0] = -1.0f, l[1] = -1.5f; /* negative: -1.0 * 2 = -2.0 < -1.5 */
    EXPECT_EQ_I(samp_sample(s, l, h0, 1), 1);
    /* outside the window (last 2 of 4): no penalty; repeats count once */
    int32_t h1[] = {0, 5, 5, 5};
    EXPECT_EQ_I(samp_sample(s, l, h1, 4), 0);
    int32_t h2[] = {5, 0, 0, 99, -3};
    l[0] = 2.0f, l[1] = 0.9f; /* 2.0 / 2 once = 1.0 > 0.9 (twice would be 0.5) */
    EXPECT_EQ_I(samp_sample(s, l, h2, 3), 0);
    EXPECT_EQ_I(samp_sample(s, l, h2, 5), 0); /* last 2 are 99 and -3: out of range, ignored */
    samp_free(s);

    /* sampled: equal logits 2.0, id 0 penalized to 1.0 → p0/p1 = e^-1 */
    for (int i = 0; i < N; i++) l[i] = -INFINITY;
    l[0] = l[1] = 2.0f;
    p = params(1.0f, 0, 1.0f, 0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = -1;
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    int c0 = 0, draws = 20000;
    for (int d = 0; d < draws; d++) c0 += samp_sample(s, l, h0, 1) == 0;
    EXPECT_NEAR(c0 / (double)draws, exp(-1.0) / (1.0 + exp(-1.0)), 0.015);
    samp_free(s);
}

/* Edge values (the llama.cpp / ggml issue history): top_p 0 keeps the top
 * token (greedy), top_k <= 0 keeps all, any finite temperature >= 0 works —
 * 0 greedy, tiny ones greedy without NaN, huge ones near-uniform over the
 * tokens the filters keep. */
TEST(samp, edge_values) {
    enum { N = 64 };
    float l[N];
    fill_logits(l, N, 11);
    const int best = argmax_f32(l, N);
    samp_state *s;
    /* top_p 0, whatever the temperature: the argmax every time */
    samp_params p = params(5.0f, 0, 0.0f, 0.0f);
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    for (int d = 0; d < 200; d++) EXPECT_EQ_I(samp_sample(s, l, NULL, 0), best);
    samp_free(s);
    /* temperature 1e-38: logits / T overflow to inf; still the argmax */
    p = params(1e-38f, 0, 1.0f, 0.0f);
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    for (int d = 0; d < 50; d++) EXPECT_EQ_I(samp_sample(s, l, NULL, 0), best);
    samp_free(s);
    /* temperature 1e30 with top_k -1 and nothing else: every id about equally often */
    int counts[N];
    p = params(1e30f, -1, 1.0f, 0.0f);
    histogram(&p, l, N, 64000, counts);
    for (int i = 0; i < N; i++) EXPECT_MSG(counts[i] > 800 && counts[i] < 1200, "id %d drawn %d / 64000", i, counts[i]);
    /* ... and uniform over what top_k 5 keeps, never anything else */
    p = params(1e30f, 5, 1.0f, 0.0f);
    histogram(&p, l, N, 20000, counts);
    int kept = 0;
    for (int i = 0; i < N; i++)
        if (counts[i]) {
            kept++;
            EXPECT_MSG(counts[i] > 3500 && counts[i] < 4500, "id %d drawn %d / 20000", i, counts[i]);
        }
    EXPECT_EQ_I(kept, 5);
    /* -inf logits stay impossible at a huge temperature */
    for (int i = 0; i < N; i++) if (i % 2) l[i] = -INFINITY;
    p = params(1e30f, 0, 1.0f, 0.0f);
    histogram(&p, l, N, 2000, counts);
    for (int i = 1; i < N; i += 2) EXPECT_EQ_I(counts[i], 0);
}

/* Ids flagged in no_penalty (end-of-generation, control tokens) keep their
 * logits; without the flags (llama.cpp's way) they are penalized too. */
TEST(samp, penalty_exempt_ids) {
    enum { N = 8 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = -5.0f;
    l[2] = 3.0f, l[5] = 2.0f; /* 2: say <|im_end|>, in the history; 5: an ordinary token */
    const int32_t hist[] = {2, 2, 4};
    uint8_t exempt[N] = {0};
    exempt[2] = 1;
    samp_params p = params(0.0f, 0, 1.0f, 0.0f);
    p.repeat_penalty = 2.0f; /* 3.0 / 2 = 1.5 < 2.0 if penalized */
    p.no_penalty = exempt;
    samp_state *s;
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    EXPECT_EQ_I(samp_sample(s, l, hist, 3), 2);
    samp_free(s);
    p.no_penalty = NULL;
    EXPECT_EQ_I(samp_new(&p, N, &s), 0);
    EXPECT_EQ_I(samp_sample(s, l, hist, 3), 5);
    samp_free(s);
}

/* samp_sample_ids over a subset is samp_sample over the logits with every
 * other id at -inf: the same token for the same seed, whatever the filters
 * (top_k more or fewer than the allowed ones, top_p, min_p, greedy, penalty). */
TEST(samp, ids_subset_equals_masked_full) {
    enum { N = 700 };
    static const struct {
        float temp;
        int top_k;
        float top_p, min_p, penalty;
    } cfg[] = {{1.0f, 0, 1.0f, 0.0f, 1.0f}, {0.8f, 40, 0.95f, 0.05f, 1.0f}, {1.0f, 3, 1.0f, 0.0f, 1.0f},
               {0.7f, 0, 0.9f, 0.0f, 1.3f},  {0.0f, 0, 1.0f, 0.0f, 1.1f},    {1.2f, 500, 1.0f, 0.1f, 1.0f}};
    float logits[N], masked[N];
    int32_t ids[N], hist[16];
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        samp_params p = params(cfg[c].temp, cfg[c].top_k, cfg[c].top_p, cfg[c].min_p);
        p.repeat_penalty = cfg[c].penalty;
        p.repeat_last_n = 16;
        samp_state *a = NULL, *b = NULL;
        EXPECT(samp_new(&p, N, &a) == SAMP_OK && samp_new(&p, N, &b) == SAMP_OK);
        if (!a || !b) return;
        for (int trial = 0; trial < 200; trial++) {
            fill_logits(logits, N, (uint32_t)(trial * 7 + c));
            /* allowed: every k-th id for a trial-dependent k (1 to all) */
            int k = 1 + trial % 50, n_ids = 0;
            for (int i = 0; i < N; i++) {
                int in = (i * 31 + trial) % k == 0;
                masked[i] = in ? logits[i] : -INFINITY;
                if (in) ids[n_ids++] = i;
            }
            if (!n_ids) continue; /* nothing allowed is the caller's error, not a draw */
            for (int h = 0; h < 16; h++) hist[h] = (trial * 13 + h * 97) % N;
            int x = samp_sample(a, masked, hist, 16), y = samp_sample_ids(b, logits, ids, n_ids, hist, 16);
            EXPECT_MSG(x == y, "config %zu trial %d (%d allowed): full %d, subset %d", c, trial, n_ids, x, y);
            if (x != y) break;
        }
        samp_free(a);
        samp_free(b);
    }
}
