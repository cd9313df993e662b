/*
 * samp.h — token sampler: repetition penalty, top-k, top-p, min-p,
 * temperature, then a seeded draw; or exact greedy argmax.
 *
 * The order and each step's rule follow llama.cpp's common sampler chain
 * (common/sampling.cpp, default order "penalties; top_k; top_p; min_p;
 * temperature; dist") and src/llama-sampling.cpp (llama_sampler_penalties,
 * _top_k, _top_p, _min_p, _temp, _dist).  So top-p and min-p see the
 * distribution before temperature, as in llama.cpp.  The random stream is
 * our own (xoshiro256** seeded through splitmix64), not llama.cpp's mt19937:
 * draws are deterministic for a seed but are not llama.cpp's draws.
 *
 * Ties: every ordering is by (logit desc, id asc), so equal logits resolve to
 * the lowest id and results never depend on a sort's stability.
 *
 * Memory: samp_new allocates all scratch for n_vocab once; samp_sample never
 * allocates.  A samp_state is not thread-safe; use one per sequence.
 */
#ifndef CINFER_SAMP_H
#define CINFER_SAMP_H

#include <stdint.h>

enum {
    SAMP_OK = 0,
    SAMP_EINVAL = -1, /* bad argument */
    SAMP_ENOMEM = -2,
};

typedef struct {
    float temp;           /* temperature, finite; <= 0: greedy argmax (after the penalty);
                           * large: near-uniform over the tokens the filters keep.  0.8 */
    int top_k;            /* keep the k highest logits; <= 0 or >= n_vocab: all.     40 */
    float top_p;          /* keep the smallest head with cumulative p >= top_p, at least
                           * the top token: 0 is greedy; >= 1: off.                 0.95 */
    float min_p;          /* keep tokens with p >= min_p * p_max; <= 0: off.         0.05 */
    float repeat_penalty; /* logits of tokens among the last repeat_last_n: positive
                           * ones divided by it, negative ones multiplied; 1: off.  1.0 */
    int repeat_last_n;    /* history window for the penalty; 0: off, -1: all history.  64 */
    const uint8_t *no_penalty; /* NULL, or (n_vocab) flags: ids with a nonzero flag are
                           * never penalized (end-of-generation and control tokens, which
                           * a chat history repeats every turn).  Borrowed: must outlive
                           * the samp_state.  llama.cpp penalizes them (NULL).     NULL */
    uint64_t seed;        /* RNG seed; same seed + same inputs → same tokens.  0xFFFFFFFF
                           * (LLAMA_DEFAULT_SEED: llama.cpp then draws a random seed;
                           * here it is an ordinary seed — callers randomize if they want) */
} samp_params;

/* llama.cpp's defaults (common_params_sampling), as listed above. */
samp_params samp_params_default(void);

typedef struct samp_state samp_state;

/* Validate p (finite temp, top_p >= 0, min_p in [0, 1], repeat_penalty > 0,
 * repeat_last_n >= -1, no NaN) and allocate the scratch for n_vocab logits.
 * Returns 0, SAMP_EINVAL or SAMP_ENOMEM; *out is freed with samp_free. */
int samp_new(const samp_params *p, int n_vocab, samp_state **out);
void samp_free(samp_state *s); /* NULL is a no-op */

/* Restart the random stream from seed (samp_new seeds it with p->seed). */
void samp_seed(samp_state *s, uint64_t seed);

/* Pick the next token from logits (n_vocab floats, not modified).  history
 * holds the n_history ids so far (prompt and generated), oldest first; the
 * penalty looks at its last repeat_last_n entries (ids out of range are
 * ignored).  Returns a token id in [0, n_vocab), or SAMP_EINVAL for NULL
 * logits or a negative n_history.  -inf logits are fine; NaN logits are
 * treated as -inf.  O(n_vocab) plus O(n_vocab log top_k); a full sort only
 * when top_k is off and top_p is on. */
int samp_sample(samp_state *s, const float *logits, const int32_t *history, int n_history);

/* samp_sample restricted to the candidates ids[0..n_ids) (ascending, in
 * range): the same token samp_sample would pick from logits with every
 * other id at -inf (the same draws: those ids carry no probability and sort
 * last), in O(n_ids) instead of O(n_vocab).  For grammar-constrained
 * decoding, where few tokens are allowed.  SAMP_EINVAL for bad arguments. */
int samp_sample_ids(samp_state *s, const float *logits, const int32_t *ids, int n_ids, const int32_t *history,
                    int n_history);

/* OpenAI's frequency and presence penalties (platform.openai.com/docs/
 * advanced-usage, "Frequency and presence penalties"), applied in place:
 *
 *   logits[t] -= c[t] * frequency + (c[t] > 0) * presence
 *
 * where c[t] counts t in tokens[0..n) — the tokens generated so far (not the
 * prompt).  frequency and presence are in [-2, 2] in OpenAI's API (not
 * checked here); -inf logits stay -inf.  Ids outside [0, n_vocab) are
 * ignored.  O(n log n); allocates a copy of tokens.  Returns 0, SAMP_EINVAL
 * (NULL logits, negative n or n_vocab) or SAMP_ENOMEM. */
int samp_penalize_counts(float *logits, int n_vocab, const int32_t *tokens, int n, float frequency,
                         float presence);

#endif
