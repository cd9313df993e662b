/*
 * srv_decide.h — POST /v1/systemone, the decision API of the npm `ollama`
 * client (ollama.systemone; wire shape in docs/serve.md): a state and a set
 * of questions, each with the answers it allows; every allowed answer is
 * scored by the model, so each gets its own probability.  Internal to the
 * server.
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
 * order, one question at a time.  For question i, each allowed value's JSON
 * text ("\"billing\"", "true", "3") followed by the character after it ("," or
 * "}", so "1" and "10" are told apart) is appended to the reply so far and
 * tokenized; log P(those tokens | prompt and reply so far) is summed token
 * by token from the model's logits (softmax at temperature 1 over the whole
 * vocabulary, as a log-likelihood evaluation does), and
 * p_k = exp(logp_k) / sum_j exp(logp_j).  The answer is the most probable
 * value; it is appended and the next question follows.  Each value is
 * scored in its tokenizer's own spelling (other token paths to the same
 * text are not summed); the session's prefix cache makes each value cost
 * only its own tokens.
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

int srvd_count(const srvd *d);
/* Question i's allowed values: their count (2..26) and value k's JSON text.
 * Valid until srvd_free. */
int srvd_n_values(const srvd *d, int i);
const char *srvd_value(const srvd *d, int i, int k);
/* The reply text that comes before question i's value: "{\"KEY\":" for the
 * first, ",\"KEY\":" after (keys as JSON strings); srvd_closing: "}". */
const char *srvd_prefix(const srvd *d, int i);
const char *srvd_closing(const srvd *d);
/* Record question i's answer from logp (srvd_n_values entries: each value's
 * log-likelihood, natural log; -INFINITY allowed) and return the chosen
 * value's JSON text, to append to the reply before the next question. */
const char *srvd_record(srvd *d, int i, const double *logp);
/* The response body after every question was recorded. */
cJSON *srvd_body(const srvd *d, int n_input, int n_output);

#endif
