/*
 * gram_conf.h — confidence capture: at each enum, boolean and integer value
 * the grammar constrains, the model's distribution over the allowed values
 * (cinfer_confidence in include/cinfer.h).
 *
 * Layer: above the masker (gram_mask.h: token bytes), below the API facade.
 */
#ifndef CINFER_GRAM_CONF_H
#define CINFER_GRAM_CONF_H

#include "gram_mask.h"

/* ---- confidence (gram_conf.c) --------------------------------------------------------- */

typedef struct gram_conf_track gram_conf_track;
int gram_conf_track_new(gram_conf_track **out);
void gram_conf_track_free(gram_conf_track *t);
void gram_conf_clear(cinfer_confidence *c);
/* Token id chosen at a step: rule is the decision rule whose value starts
 * after n_lead forced bytes (or -1), bits the allowed set and logits the raw logits it was sampled from
 * (NULL for a forced token), path the value's JSON Pointer. */
void gram_conf_on_token(gram_conf_track *t, cinfer_confidence *c, const gram_grammar *g, const gram_vocab *gv,
                        int32_t rule,
                        int n_lead, const uint32_t *bits, const float *logits, int32_t id, const char *path);
void gram_conf_finish(gram_conf_track *t, cinfer_confidence *c);

#endif
