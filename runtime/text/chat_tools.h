/*
 * chat_tools.h — how each chat-template family writes tool calls, and the
 * parser that reads them back out of a model's reply.
 *
 * A family (chat.h) that has a tool-call syntax gets one chat_tool_syntax:
 * the trigger text that opens a block of calls (the model writes it as one
 * special token), the fixed text that follows it, the text that closes the
 * block, and the grammar of what is inside — one of chat_calls_kind.  The
 * server (runtime/server/srv_tools.c) uses the syntax to detect that a reply
 * turns into calls, to generate the call (under a JSON Schema grammar where
 * the body is JSON) and to parse it; these parsers are what it reads with.
 *
 * Sources: each family's own template (how it renders an assistant turn's
 * tool_calls, and the format its tool instructions ask for) and llama.cpp's
 * parsers of the same formats (common/chat*.cpp).
 */
#ifndef CINFER_CHAT_TOOLS_H
#define CINFER_CHAT_TOOLS_H

#include <stddef.h>

#include <cJSON.h>

#include "chat.h"

typedef enum {
    /* opener {"name": N, "arguments": {...}} closer: one call per block
     * (Hermes / Qwen, SmolLM3, EXAONE 4) */
    CHAT_CALLS_JSON_OBJECT = 1,
    /* opener [{call}, {call}, ...] closer: every call of the turn in one block
     * (Nemotron's {"name","arguments"}; Command R7B's {"tool_call_id",
     * "tool_name", "parameters"}; Command R(+)'s {"tool_name", "parameters"}
     * after "Action:\n```json\n", closed by "```") */
    CHAT_CALLS_JSON_ARRAY,
    /* opener name[ARGS]{...}, or name[CALL_ID]id[ARGS]{...}: one call per
     * block, the block ends with the JSON (Mistral 3) */
    CHAT_CALLS_NAME_ARGS,
    /* opener name{key:value,...} closer, strings between <|"|> (Gemma 4) */
    CHAT_CALLS_GEMMA4,
    /* opener name <arg_key>k</arg_key> <arg_value>v</arg_value>... closer,
     * string values as they are, others as JSON (GLM 4.5+) */
    CHAT_CALLS_ARG_KEYS,
    /* opener name>\n<parameter=k>\nv\n</parameter>... closer (Qwen3-Coder,
     * Nemotron 3) */
    CHAT_CALLS_XML_PARAMS,
} chat_calls_kind;

typedef struct {
    chat_family family;
    chat_calls_kind kind;
    const char *trigger;  /* opens a block: "<tool_call>" (one token in the model's vocabulary) */
    const char *opener;   /* trigger + the text that always follows it before the body */
    const char *closer;   /* ends a block; "" when the body's own end does (NAME_ARGS) */
    const char *between;  /* written between two blocks of one turn ("\n"), "" */
    const char *name_key; /* JSON kinds: the call object's keys ("name", "arguments"; */
    const char *args_key; /*   Command R7B: "tool_name", "parameters", "tool_call_id") */
    const char *id_key;   /*   NULL when the call has no id field */
    const char *probe;    /* what the template writes for an assistant call of "probe_fn" with
                           * arguments {} (the server renders one to confirm the syntax) */
} chat_tool_syntax;

/* The syntax of family f, or NULL when cinfer reads no tool calls of that
 * family (CHAT_FAMILY_LLAMA3_TOOLS and others: their calls are plain text to
 * the server).  Static storage. */
const chat_tool_syntax *chat_tool_syntax_for(chat_family f);

/* One parsed call: malloc'd NUL-terminated name and arguments (the text of
 * a JSON object, compact). */
typedef struct {
    char *name;
    char *arguments;
} chat_tool_call;

void chat_tool_calls_free(chat_tool_call *calls, int n);

/* Parse one block's body (the text after the opener, without the closer;
 * leading and trailing whitespace allowed) into calls[0..max).  tools (may
 * be NULL): the request's tools (OpenAI shape), whose parameter types decide
 * how ARG_KEYS and XML_PARAMS values are read (a "string" parameter keeps
 * "123" a string; without a schema, text that is JSON becomes that value).
 * Returns the number of calls (>= 1), or -1 when the body does not have the
 * syntax (nothing is left allocated then), or -2 when out of memory. */
int chat_tool_parse_body(const chat_tool_syntax *s, const char *body, size_t len, const cJSON *tools,
                         chat_tool_call *calls, int max);

/* Split a whole reply: *content_len bytes of text before the first block,
 * then every block (trigger ... closer, separated by whitespace) parsed into
 * calls[0..max), *n_calls of them.  Returns 0; -1 when a block does not parse
 * or text other than whitespace follows the blocks (calls hold the blocks
 * before it); -2 out of memory.  A reply without a trigger is all content
 * (0 calls, returns 0). */
int chat_tool_split(const chat_tool_syntax *s, const char *text, size_t len, const cJSON *tools, size_t *content_len,
                    chat_tool_call *calls, int max, int *n_calls);

#endif
