/*
 * srv_impl.h — internals shared by the server's files (runtime/server/srv.c and
 * runtime/server/srv_tools.c etc.); not installed.  srv.h is the public face.
 *
 * srv_tools.c adds the request features on top of plain chat:
 *   - tools / tool_choice (OpenAI and Anthropic) and their output parsing,
 *   - response_format (json_object, json_schema) as a grammar,
 *   - logprobs / top_logprobs, frequency_penalty / presence_penalty,
 *   - the messages of all chat-like APIs (OpenAI chat, Anthropic messages,
 *     OpenAI responses) turned into the template's message array.
 */
#ifndef CINFER_SRV_IMPL_H
#define CINFER_SRV_IMPL_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer.h"
#include "text/chat_tools.h"

/* The wire format of a request: parse-time APIs (the first four), and the
 * output shapes srv.c writes for requests parsed as one of them (Ollama chat
 * and generate, srv_ollama.h; the decision API, srv_decide.h). */
enum { API_CHAT, API_COMPL, API_MSG, API_RESP, API_OCHAT, API_OGEN, API_DECIDE };

/* A validation failure: the HTTP status, the request field (param, "" when
 * none) and a one-line message. */
typedef struct {
    char param[96];
    char msg[400];
    unsigned status;
} bad_req;

/* Fill b (message and param cleaned to one line of valid UTF-8: request text
 * is quoted in them) and return -1.  srv.c. */
int srv_bad(bad_req *b, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- request features (srv_tools.c) ---------------------------------------------- */

enum { SRVX_TOOLS_OFF = 0, SRVX_TOOLS_AUTO, SRVX_TOOLS_REQUIRED };
enum { SRVX_MAX_CALLS = 8 }; /* tool calls in one reply */

typedef struct {
    float logprob;  /* natural log of the probability */
    int32_t id;
} srvx_top;

/* One generated token's log-probability record. */
typedef struct {
    int32_t id;
    float logprob;
    int n_top;
    srvx_top top[20]; /* the n_top most likely tokens, best first */
} srvx_lp;

/* One parsed tool call. */
typedef struct {
    char *name;
    char *arguments; /* JSON text of the arguments object */
} srvx_call;

/* Per-request feature state: options from the request, then what the worker
 * gathered while generating.  Created by srvx_parse, freed by srvx_free. */
typedef struct srvx {
    const cinfer_model *m;
    int api;
    /* tools */
    int tool_mode;             /* SRVX_TOOLS_* */
    char *tools_json;          /* tools array for the template (OpenAI shape), or NULL */
    cJSON *tools;              /* the same, parsed (parameter types for the parsers) */
    const chat_tool_syntax *syn; /* how the model's template writes calls (text/chat_tools.h) */
    cinfer_grammar *call_gram; /* JSON syntaxes: the call object of any allowed tool (an array of
                                * them for CHAT_CALLS_JSON_ARRAY) */
    cinfer_grammar **arg_gram; /* CHAT_CALLS_NAME_ARGS: each allowed tool's arguments (n_arg) */
    char **arg_name;           /* and its name */
    int n_arg;
    int name_phase;            /* NAME_ARGS: the call's name is being written (ends at "[ARGS]") */
    int32_t *opener;           /* tokens of the call opener ("<tool_call>\n") */
    int n_opener;
    int32_t *closer;           /* "\n</tool_call>\n": between parallel calls */
    int n_closer;
    int parallel;              /* more than one call allowed (parallel_tool_calls) */
    int32_t trigger_id;        /* the opener's first token: switches auto mode to the grammar; -1: none */
    char trigger_text[32];     /* its text ("<tool_call>") */
    /* response_format */
    cinfer_grammar *fmt_gram;
    /* logprobs */
    int logprobs;              /* 1: record log-probabilities */
    int top_logprobs;          /* 0..20 alternatives per token */
    /* penalties (OpenAI) */
    float freq_pen, pres_pen;
    /* logit_bias (OpenAI): added to the token's logit before sampling */
    int n_bias;
    int32_t *bias_id;
    float *bias_val;
    int n_prompt;              /* history index where generated tokens start */
    /* worker state */
    int phase;                 /* 0: text, 1: inside a tool call (text goes to call) */
    int triggered;             /* auto mode saw the opener */
    char *call;                /* the call text generated so far (the block's body; free-form
                                * syntaxes: everything after the trigger) */
    size_t call_len, call_cap;
    int have_logits;           /* logit_fn ran for the token about to be sampled */
    const float *cur_logits;   /* those logits (valid until the next token) */
    float cur_lse;             /* their log-sum-exp */
    srvx_top cur_top[20];
    int cur_n_top;
    srvx_lp *lp;               /* (n_lp) per generated token */
    int n_lp, cap_lp, lp_sent; /* lp_sent: entries already streamed */
    srvx_call calls[8];        /* SRVX_MAX_CALLS */
    int n_calls;
    int call_broken;           /* a call began but did not parse (e.g. max_tokens) */
    int call_partial;          /* the last of calls[] is that cut call: a complete name, the
                                * arguments text written so far (not valid JSON) */
    unsigned long long seq;    /* id source for call ids */
} srvx;

/* The conversation of a chat-like request as the template's messages array
 * (OpenAI shape: role, content, tool_calls with object arguments,
 * tool_call_id).  api: API_CHAT (messages[]), API_MSG (system + messages[]
 * with content blocks text/tool_use/tool_result), API_RESP (instructions +
 * input string or items).  NULL with b filled (400 naming the field). */
cJSON *srvx_messages(int api, const cJSON *r, bad_req *b);

/* Parse the feature fields of request r for api: tools, tool_choice,
 * response_format, logprobs, top_logprobs, frequency_penalty,
 * presence_penalty, logit_bias (and Anthropic's accepted-and-ignored thinking,
 * cache_control, metadata).  *out is NULL when the request uses none of
 * them.  Grammars are compiled for m.  Returns 0, or -1 with b filled. */
int srvx_parse(const cinfer_model *m, int api, const cJSON *r, srvx **out, bad_req *b);
void srvx_free(srvx *x); /* NULL: no-op */

/* Generate as cinfer_generate_tokens, with x's features: the penalties and
 * logprob capture (as go->logit_fn), response_format's grammar, and tool
 * calls (required: the opener is appended to the prompt and the call grammar
 * runs from the start; auto: free text until the opener token, then a second
 * pass under the call grammar on the same session).  x NULL: plain.  cb must
 * call srvx_on_token first. */
int srvx_generate(cinfer_session *sess, srvx *x, const int32_t *ids, size_t n_ids, const cinfer_gen_options *go,
                  cinfer_token_cb cb, void *user, cinfer_gen_result *res, char *err, size_t err_len);

/* The token callback's hook (worker thread): records the token's logprob and
 * routes text: *piece and *len are narrowed to the part that is message content
 * (0 inside a tool call).  Returns nonzero to stop generation (the opener). */
int srvx_on_token(srvx *x, const char **piece, size_t *len, int32_t token);

/* OpenAI chat logprobs for entries [from, to): {"content":[{token, logprob,
 * bytes, top_logprobs}]}.  Legacy completions: {"tokens", "token_logprobs",
 * "top_logprobs", "text_offset"} (offsets from text_base). */
cJSON *srvx_logprobs_chat(const srvx *x, int from, int to);
cJSON *srvx_logprobs_legacy(const srvx *x, int from, int to, size_t text_base);

/* Make an error message one line of valid UTF-8 in place (it may quote
 * request text): control characters become spaces, invalid bytes '?'
 * (a character cut by truncation too). */
void srvx_clean_msg(char *s);

/* Does the model's template write Hermes-style <tool_call> calls (the tool
 * calls this server can generate and parse)? */
int srvx_template_has_tools(const cinfer_model *m);

/* Fit a conversation to the model's template family (x: the request's
 * features, may be NULL): Mistral 3's templates accept only 9-character
 * alphanumeric call ids, so every tool_calls[].id and tool_call_id of
 * messages is mapped to one (the same id always to the same one); SmolLM3's
 * template reads its tools from the variable xml_tools, which is added to
 * *vars (JSON object text, may be NULL; replaced, malloc'd).  0, or -1 when
 * out of memory. */
int srvx_fit_template(const cinfer_model *m, const srvx *x, cJSON *messages, char **vars);
/* The same for template family fam and the request's tools (may be NULL). */
int srvx_fit_family(chat_family fam, const cJSON *tools, cJSON *messages, char **vars);

/* "call_…" (OpenAI) or "toolu_…" (Anthropic) id of call i of request id req_id. */
void srvx_call_id(const srvx *x, const char *req_id, int i, char *out, size_t cap);

/* ---- checking a request without the network (srv.c; fuzzing, tests) ----------------- */

/* Validate body (len bytes) as a POST to route ("/v1/chat/completions",
 * "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
 * "/v1/responses") on s's first model exactly as the handler does before
 * queueing — JSON, fields, template, tokenization, grammars — then drop the
 * job.  Returns 200, or the 4xx/5xx status with the error message in msg. */
struct srv;
unsigned srv_check_request(struct srv *s, const char *route, const char *body, size_t len, char *msg, size_t cap);

#endif
