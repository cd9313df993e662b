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
 * The model answers as one JSON object {"KEY": answer, ...} in question
 * order, one question at a time: the reply so far (the keys and the answers
 * chosen before) is appended to the prompt, the next value is generated under
 * the grammar of its allowed values ({"enum":[OPTIONS]}, {"type":"boolean"},
 * {"enum":[0..n-1]}) with the confidence capture on, and the answer is the
 * most probable allowed value (the argmax of the captured distribution, not
 * the greedy token path, which can differ for values of several tokens).
 * The session's prefix cache makes each step evaluate only the new text.
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
 * JSON), and the same as one plain prompt for a model without a template.
 * Valid until srvd_free. */
const char *srvd_messages_json(const srvd *d);
const char *srvd_plain_prompt(const srvd *d);
/* The "model" field of the request. */
const char *srvd_model(const srvd *d);

/* Compile each question's value grammar for model m.  0, or a CINFER_E*
 * code with err filled. */
int srvd_compile(srvd *d, const cinfer_model *m, char *err, size_t err_len);
int srvd_count(const srvd *d);
const cinfer_grammar *srvd_grammar(const srvd *d, int i);
/* The reply text that comes before question i's value: "{\"KEY\":" for the
 * first, ",\"KEY\":" after (keys as JSON strings); srvd_closing: "}". */
const char *srvd_prefix(const srvd *d, int i);
const char *srvd_closing(const srvd *d);
/* Record question i's answer from the decisions c captured while its value
 * was generated (generated: that value's text, the fallback when c holds
 * no distribution) and return the chosen value as JSON text, to append to
 * the reply before the next question.  Valid until srvd_free. */
const char *srvd_record(srvd *d, int i, const cinfer_confidence *c, const char *generated);
/* The response body after every question was recorded. */
cJSON *srvd_body(const srvd *d, int n_input, int n_output);

#endif
