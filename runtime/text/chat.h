/*
 * chat.h — a model's chat template: render a conversation to the prompt text
 * the model was trained on, and name the template's family (which decides how
 * tool calls and reasoning are written, for the parsers that read them back).
 *
 * Rendering runs the template's own Jinja source (tokenizer.chat_template)
 * through runtime/text/jinja.h, which reproduces transformers' apply_chat_template
 * byte for byte.  The context is a JSON object of template variables, exactly
 * the keyword arguments transformers passes to render():
 *
 *   { "messages": [ {"role": "system"|"user"|"assistant"|"tool", "content": ...,
 *                    "tool_calls": [{"id", "type": "function",
 *                                    "function": {"name", "arguments": {...}}}],
 *                    "tool_call_id": ...}, ... ],
 *     "tools": [ {"type": "function", "function": {"name", "description",
 *                                                  "parameters": {JSON Schema}}} ] | null,
 *     "documents": null,
 *     "add_generation_prompt": true,
 *     "bos_token": "...", "eos_token": "...",      (the tokenizer's special tokens)
 *     ...any other variable a template reads: "enable_thinking", "date_string",
 *        "builtin_tools", "tools_in_user_message", ... }
 *
 * chat_context_new() builds that object the way transformers does.
 */
#ifndef CINFER_CHAT_H
#define CINFER_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "formats/gguf.h"
#include "jinja.h"

/* How a template writes tool calls (and reasoning); detected from the
 * template text with the markers llama.cpp's common/chat.cpp keys on. */
typedef enum chat_family {
    CHAT_FAMILY_UNKNOWN = 0,
    CHAT_FAMILY_CHATML,           /* <|im_start|>role\n...<|im_end|>, no tool syntax */
    CHAT_FAMILY_HERMES,           /* ChatML + <tool_call>\n{json}\n</tool_call> (Hermes 2 Pro/3, Qwen 2.5) */
    CHAT_FAMILY_QWEN3,            /* Hermes tool calls + <think>...</think> reasoning */
    CHAT_FAMILY_LLAMA3,           /* <|start_header_id|>role<|end_header_id|> */
    CHAT_FAMILY_LLAMA3_TOOLS,     /* Llama 3.1+: {"name", "parameters"} JSON, ipython, <|python_tag|> */
    CHAT_FAMILY_FUNCTIONARY_V3_1, /* Llama 3.1 turns, <function=name>{json}</function> */
    CHAT_FAMILY_FUNCTIONARY_V3_2, /* >>>recipient\ncontent */
    CHAT_FAMILY_FIREFUNCTION_V2,  /*  functools[{"name", "arguments"}, ...] */
    CHAT_FAMILY_MISTRAL,          /* [INST] ... [/INST] */
    CHAT_FAMILY_MISTRAL_NEMO,     /* [INST] + [TOOL_CALLS][{...}] */
    CHAT_FAMILY_GEMMA,            /* <start_of_turn>role\n...<end_of_turn> */
    CHAT_FAMILY_PHI3,             /* <|user|>\n...<|end|> */
    CHAT_FAMILY_GRANITE,          /* <|start_of_role|>role<|end_of_role|> */
    CHAT_FAMILY_DEEPSEEK_R1,      /* <｜User｜>, <｜tool▁calls▁begin｜>, <think> */
    CHAT_FAMILY_COMMAND_R,        /* <|START_OF_TURN_TOKEN|>, Action: ```json [...]``` */
    CHAT_FAMILY_COMMAND_R7B,      /* <|START_THINKING|>, <|START_ACTION|>[...]<|END_ACTION|> */
    CHAT_FAMILY_GEMMA4,           /* <|turn>role, <|tool_call>call:name{key:value,...}<tool_call|> */
    CHAT_FAMILY_MISTRAL3,         /* [TOOL_CALLS]name[ARGS]{json} (Mistral Small 3.x, Ministral 3, Devstral) */
    CHAT_FAMILY_GLM45,            /* <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call> */
    CHAT_FAMILY_NEMOTRON,         /* <TOOLCALL>[{"name", "arguments"}, ...]</TOOLCALL> (Nemotron Nano v2) */
    CHAT_FAMILY_QWEN3_CODER,      /* <tool_call><function=name><parameter=k>v</parameter></function></tool_call> */
    CHAT_FAMILY_EXAONE4,          /* [|role|], <tool_call>{"name", "arguments"}</tool_call> */
    CHAT_FAMILY_SMOLLM3,          /* ChatML, tools as xml_tools, Hermes <tool_call>\n{json}\n</tool_call> */
    CHAT_FAMILY_COUNT_
} chat_family;

/* Family of a template source (NUL-terminated); CHAT_FAMILY_UNKNOWN when no
 * marker matches.  Pure function of the text. */
chat_family chat_detect_family(const char *template_src);
/* "chatml", "hermes", "qwen3", "llama3", ...; "unknown" for out-of-range values. */
const char *chat_family_name(chat_family f);

/* A parsed chat template (the Jinja AST plus its family); immutable after
 * parsing, so one may be rendered from several threads. */
typedef struct chat_template chat_template;

/* Parse len bytes of Jinja source.  Errors: a JINJA_ERR_* code with
 * "jinja: line N: ..." in err. */
int chat_template_parse(const char *src, size_t len, chat_template **out, char *err, size_t err_len);
/* The model's own template: the GGUF key tokenizer.chat_template.  Errors as
 * above, or the gguf_get_str error (GGUF_ENOTFOUND when the model has none). */
int chat_template_from_gguf(const gguf_file *g, chat_template **out, char *err, size_t err_len);
void chat_template_free(chat_template *t); /* NULL is a no-op */
chat_family chat_template_family(const chat_template *t);
/* The template source (valid until chat_template_free). */
const char *chat_template_source(const chat_template *t, size_t *len);

/* Render the template for `context` (see the top of this file).  opts may be
 * NULL (default limits, strftime_now uses the local time).  On success *out
 * is a malloc'd NUL-terminated string the caller frees.  Errors as in
 * jinja_render: JINJA_ERR_RAISED when the template rejects the conversation
 * with raise_exception() (e.g. a system message a model does not support). */
int chat_template_render(const chat_template *t, const cJSON *context, const jinja_render_opts *opts, char **out,
                         size_t *out_len, char *err, size_t err_len);

/* The same with the context as JSON text (len bytes), which keeps numbers
 * exact: a tool argument or schema value 1.0 renders as 1.0 (transformers,
 * llama.cpp), where a parsed cJSON only knows the double 1. */
int chat_template_render_json(const chat_template *t, const char *context_json, size_t len,
                              const jinja_render_opts *opts, char **out, size_t *out_len, char *err, size_t err_len);

/* Parse and render in one call (default options). */
int chat_render(const char *template_src, const cJSON *context, char **out, size_t *out_len, char *err,
                size_t err_len);

/* A new render context as transformers' apply_chat_template builds it:
 * messages and tools (deep copies; tools NULL → null), documents null,
 * add_generation_prompt, and bos_token / eos_token when not NULL.  Add other
 * variables with cJSON_AddItemToObject.  Free with cJSON_Delete; NULL when
 * out of memory. */
cJSON *chat_context_new(const cJSON *messages, const cJSON *tools, bool add_generation_prompt, const char *bos_token,
                        const char *eos_token);

#endif
