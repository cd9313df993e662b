/*
 * gram_api.h — the grammar modules' facade: the public cinfer_grammar (a
 * compiled schema and, for generation, its masker), and gram_run, one
 * constrained generation, which runtime/api/api.c's loop drives.
 *
 * Layer: the top of the grammar chain (gram_schema < gram_match < gram_mask
 * < gram_conf < gram_api); the library API (runtime/api) calls it, nothing in
 * runtime/grammar calls the library.
 */
#ifndef CINFER_GRAM_API_H
#define CINFER_GRAM_API_H

#include "gram_conf.h"

struct cinfer_grammar {
    gram_grammar *g;  /* the compiled schema */
    gram_masker *mk;  /* bound to a model's vocabulary; NULL: compiled for checking only */
};

/* cinfer_grammar_from_schema's work once the model's token trie is known
 * (gv NULL: no model, for checking only). */
int gram_api_new(const gram_vocab *gv, const char *schema, size_t len, const cinfer_grammar_options *opts,
                 cinfer_grammar **out, char *err, size_t err_len);
/* The vocabulary g was compiled for, or NULL. */
const gram_vocab *gram_api_vocab(const cinfer_grammar *g);

/* ---- generation glue (runtime/api/api.c) ------------------------------------------------------ */

/* One constrained generation: matcher, mask buffer, confidence capture.
 * All allocation happens in gram_run_new. */
typedef struct gram_run gram_run;
int gram_run_new(const cinfer_grammar *g, cinfer_confidence *conf, gram_run **out, char *err, size_t err_len);
void gram_run_free(gram_run *r);
/* Tokens to append without sampling (forced by the grammar); count written. */
int gram_run_forced(gram_run *r, int32_t *ids, int cap);
/* Set disallowed logits to -INFINITY (logits: n_vocab floats).  Returns 1,
 * or 0 when no token may continue (an error), -1 out of memory. */
int gram_run_mask(gram_run *r, float *logits, int n_vocab);
/* The mask of the current state: the count of allowed tokens, 0 when none
 * may continue, -1 out of memory.  When they are few (an eighth of the
 * vocabulary or less) also the list, *ids (ascending, valid until the next
 * call; for samp_sample_ids: sampling touches only these); else *ids is
 * NULL and gram_run_apply masks a logits copy. */
int gram_run_allowed(gram_run *r, const int32_t **ids);
/* Set the logits the last gram_run_allowed disallowed to -INFINITY. */
void gram_run_apply(gram_run *r, float *logits, int n_vocab);
/* Record token id as chosen; raw_logits (the unmasked logits it was sampled
 * from, or NULL for a forced token) feed the confidence capture.  Returns
 * 0, or -1 when the token is not allowed. */
int gram_run_accept(gram_run *r, int32_t id, const float *raw_logits);
/* The value is complete and nothing may follow: stop. */
int gram_run_done(gram_run *r);
/* The bytes the grammar allows next, printable (for error messages). */
int gram_run_expected(gram_run *r, char *buf, size_t cap);

#endif
