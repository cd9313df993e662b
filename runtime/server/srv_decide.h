/*
 * srv_decide.h — POST /v1/systemone, the decision API of the npm `ollama`
 * client (ollama.systemone; wire shape in docs/serve.md): a state and a set
 * of questions, each with the answers it allows, answered in one constrained
 * generation whose confidence capture (cinfer.h cinfer_confidence) gives the
 * model's probability of every allowed answer.  Internal to the server.
 *
 *   request   {"model", "state": text | JSON, "questions": {KEY: question, ...}, "keep_alive"?}
 *             question  {"type":"choice", "instructions", "criteria": {OPTION: description | null}}  2..26 options
 *                       {"type":"noul",   "instructions", "criteria"?: {"false"?: text, "true"?: text}}
 *                       {"type":"score",  "instructions", "criteria": [description lowest .. highest]}  2..26
 *   response  {"model", "answers": {KEY: answer, ...}, "usage": {"input_tokens", "output_tokens"}}
 *             answer    {"type":"choice", "choice", "probabilities": {OPTION: p}, "confidence"}
 *                       {"type":"noul",   "noul": P(true)}
 *                       {"type":"score",  "score": sum of i * p_i, "legend": {"0": text, ...},
 *                        "probabilities": {"0": p, ...}, "confidence"}
 *
 * The model writes one JSON array, the answers in question order, under the
 * grammar of {"type":"array","prefixItems":[{"enum":[OPTIONS]}, {"type":"boolean"},
 * {"enum":[0..n-1]}, ...],"items":false}; decoding is greedy, so the answer is
 * the most likely value given the answers before it, and its probabilities
 * are the model's distribution over the allowed values at that point.
 * confidence = 1 - H(p) / ln(n): 1 when all mass is on one value, 0 when it
 * is uniform — concentration, not calibrated correctness.
 */
#ifndef CINFER_SRV_DECIDE_H
#define CINFER_SRV_DECIDE_H

#include <cJSON.h>

#include "cinfer.h"
#include "srv_impl.h"

enum { SRVD_MAX_QUESTIONS = 64, SRVD_MAX_OPTIONS = 26 };

typedef struct srvd srvd;

/* Validate request r (400s name the field, e.g. "questions.team.criteria").
 * NULL with b filled. */
srvd *srvd_parse(const cJSON *r, bad_req *b);
void srvd_free(srvd *d); /* NULL: no-op */

/* The conversation for the model's chat template (OpenAI-shaped messages
 * JSON), the same as one plain prompt for a model without a template, and
 * the answer schema (JSON Schema text).  Valid until srvd_free. */
const char *srvd_messages_json(const srvd *d);
const char *srvd_plain_prompt(const srvd *d);
const char *srvd_schema(const srvd *d);
/* The "model" field of the request. */
const char *srvd_model(const srvd *d);

/* The response body from the generated array text and the decisions the
 * generation recorded in c. */
cJSON *srvd_body(const srvd *d, const cinfer_confidence *c, const char *text, int n_input, int n_output);

#endif
