/*
 * srv_embed.h — POST /v1/embeddings for `cinfer serve` (runtime/server/srv.c):
 * parse the OpenAI request, compute on the model's worker thread, answer in
 * the OpenAI shape.  Internal to the server.
 *
 * Request (https://platform.openai.com/docs/api-reference/embeddings):
 *   input            string | [string] | [token id] | [[token id]]
 *                    (at most SRV_EMBED_MAX_INPUTS inputs, each 1..n_ctx tokens)
 *   encoding_format  "float" (default) | "base64" (little-endian float32 bytes)
 *   dimensions       optional; must equal the model's n_embd
 *   pooling          cinfer extension: "mean" (default) | "last" | "cls"
 * Response: {"object":"list","data":[{"object":"embedding","index":i,
 *   "embedding":[...] | "base64"}],"model":..,"usage":{"prompt_tokens":N,
 *   "total_tokens":N}}.  Vectors are L2-normalized (cinfer_embed).
 */
#ifndef CINFER_SRV_EMBED_H
#define CINFER_SRV_EMBED_H

#include <cJSON.h>
#include <stddef.h>

#include "cinfer.h"

#define SRV_EMBED_MAX_INPUTS 2048

typedef struct srv_embed srv_embed;

/* A validated request for model m whose worker session holds n_ctx
 * positions.  Strings are tokenized here (BOS/EOS as the model's GGUF asks,
 * control-token text parsed, as llama.cpp's server).  NULL on a bad request
 * with *status (400, 500), param (the field, "" when none) and msg filled. */
srv_embed *srv_embed_parse(const cinfer_model *m, int n_ctx, const cJSON *r, unsigned *status, char *param,
                           size_t param_len, char *msg, size_t msg_len);
/* Embed every input on session s (worker thread).  0, or a CINFER_E* code
 * with err filled. */
int srv_embed_run(srv_embed *e, cinfer_session *s, char *err, size_t err_len);
/* The response body (after a successful run). */
cJSON *srv_embed_body(const srv_embed *e, const char *model_name);
/* Total input tokens. */
long srv_embed_n_tokens(const srv_embed *e);
void srv_embed_free(srv_embed *e);

#endif
