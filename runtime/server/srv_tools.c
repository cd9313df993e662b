/*
 * srv_tools.c — `cinfer serve` request features (srv_impl.h): tools and
 * tool_choice, response_format, logprobs, frequency/presence penalties, and
 * the conversion of OpenAI chat / Anthropic messages / OpenAI responses
 * conversations into the chat template's message array.
 *
 * Tool calls.  The template renders the tools (chat_context_new's "tools").
 * The call syntax is the template family's (runtime/text/chat_tools.h,
 * chat_tool_syntax_for): Hermes/Qwen/SmolLM3/EXAONE 4 JSON objects,
 * e.g.
 *
 *   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
 *
 * Nemotron / Command R7B / Command R(+) ("Action:") JSON arrays, Mistral 3
 * name[ARGS]{json}, Gemma 4 key:value, GLM <arg_key>/<arg_value>, Qwen3-Coder/Nemotron 3
 * <parameter=k> — confirmed by rendering a probe conversation with one
 * assistant tool call and looking for the syntax's own text
 * (template_syntax).  JSON bodies are generated under a grammar compiled
 * from
 *   {"anyOf": [{"type":"object","properties":{"name":{"const":NAME},"arguments":PARAMETERS},
 *               "required":["name","arguments"],"additionalProperties":false}, ...]}
 * (the syntax's own key names; an array of them for the array syntaxes), so
 * the arguments always validate against the chosen tool's parameters.
 * Mistral's name is restricted to the tools' names by a logit mask
 * (mask_call_name), then its JSON runs under that tool's grammar.  The
 * free-form syntaxes (Gemma 4, GLM, Qwen3-Coder) are written without a
 * grammar up to the closer and parsed (chat_tool_parse_body); a block that
 * does not parse stays text.
 * tool_choice "required" / a named tool: the syntax's opener is appended to
 * the prompt and the grammar runs from the first token.  "auto": free
 * generation; when the model samples the trigger's token the first pass
 * stops, the rest of the opener is appended and a second pass runs (under
 * the grammar where there is one) on the same session (its KV cache is
 * reused) — the lazy grammar of llama.cpp's grammar triggers.  A trigger
 * that is not one token (Command R(+)'s plain-text "Action:") has no lazy
 * pass: "auto" replies are text there, forced and named calls work.  Parallel
 * calls (unless parallel_tool_calls: false / disable_parallel_tool_use:
 * true): after a call, the closer and the syntax's text between two blocks
 * are appended and another call follows when the trigger is then the
 * model's most likely token; at most SRVX_MAX_CALLS.  The array syntaxes
 * hold every call in one block; a cut array keeps its complete elements
 * (salvage_array).
 *
 * Logprobs.  Reported from the logits the sampler actually received: the
 * model's logits after the grammar mask (disallowed tokens are -inf) and
 * after logit_bias and frequency/presence penalties, log-softmaxed over the whole
 * vocabulary — before repetition penalty, temperature, top-k/top-p/min-p
 * (as OpenAI, whose logprobs do not depend on temperature).  A token the
 * grammar forces (the only one allowed) has logprob 0.
 *
 * Penalties.  OpenAI's formula (platform.openai.com/docs/advanced-usage,
 * "frequency and presence penalties"): logit[t] -= c[t] * frequency_penalty
 * + (c[t] > 0) * presence_penalty, c[t] = times t was generated so far in
 * this response (runtime/engine/samp.h samp_penalize_counts).
 */
#include "srv_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/samp.h"

void srvx_clean_msg(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        int l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = l > 0;
        for (int k = 1; ok && k < l; k++) ok = (p[k] >> 6) == 2;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        if (c < 0x20 || c == 0x7f) *p = ' ';
        p += l;
    }
}

int srv_bad(bad_req *b, unsigned status, const char *param, const char *fmt, ...) {
    b->status = status;
    snprintf(b->param, sizeof b->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    srvx_clean_msg(b->msg); /* request text quoted in it: one line of valid UTF-8 */
    srvx_clean_msg(b->param);
    return -1;
}

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int present(const cJSON *v) { return v && !cJSON_IsNull(v); }

/* ---- messages ----------------------------------------------------------------------- */

/* Text of a content value: a string, or an array of text parts whose type is
 * one of types (NULL-terminated), joined.  malloc'd; NULL with b filled. */
static char *content_text(const cJSON *v, const char *where, const char *const *types, bad_req *b) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (!cJSON_IsArray(v)) {
        srv_bad(b, 400, where, "'%s' must be a string or an array of text parts", where);
        return NULL;
    }
    size_t len = 0;
    char *t = calloc(1, 1);
    int i = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, v) {
        const cJSON *ty = get(part, "type"), *tx = get(part, "text");
        int ok = cJSON_IsString(ty) && cJSON_IsString(tx);
        for (int k = 0; ok && types[k]; k++)
            if (!strcmp(ty->valuestring, types[k])) goto good;
        {
            char p[96];
            snprintf(p, sizeof p, "%s[%d]", where, i);
            srv_bad(b, 400, p, "'%s' must be a text part {\"type\":\"%s\",\"text\":...}%s%.40s", p, types[0],
                 cJSON_IsString(ty) ? "; unsupported type " : "", cJSON_IsString(ty) ? ty->valuestring : "");
            free(t);
            return NULL;
        }
    good:;
        size_t n = strlen(tx->valuestring);
        char *nt = t ? realloc(t, len + n + 1) : NULL;
        if (!nt) {
            free(t);
            srv_bad(b, 500, where, "out of memory");
            return NULL;
        }
        t = nt;
        memcpy(t + len, tx->valuestring, n + 1);
        len += n;
        i++;
    }
    if (!t) srv_bad(b, 500, where, "out of memory");
    return t;
}

static const char *const OAI_TEXT[] = {"text", NULL};
static const char *const ANT_TEXT[] = {"text", NULL};
static const char *const RESP_TEXT[] = {"input_text", "output_text", "text", NULL};

static cJSON *msg_new(const char *role, char *content_owned) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", role);
    if (content_owned) cJSON_AddStringToObject(o, "content", content_owned);
    else cJSON_AddStringToObject(o, "content", "");
    free(content_owned);
    return o;
}

/* Arguments for the template: the JSON value of a string when it parses to
 * an object, else the string itself. */
static cJSON *args_value(const char *s) {
    cJSON *v = cJSON_Parse(s);
    if (cJSON_IsObject(v)) return v;
    cJSON_Delete(v);
    return cJSON_CreateString(s);
}

static int oai_tool_calls(const cJSON *tc, cJSON *msg, int i, bad_req *b) {
    char p[96];
    snprintf(p, sizeof p, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(tc)) return srv_bad(b, 400, p, "'%s' must be an array", p);
    cJSON *arr = cJSON_AddArrayToObject(msg, "tool_calls");
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, tc) {
        snprintf(p, sizeof p, "messages[%d].tool_calls[%d].function", i, k);
        const cJSON *f = get(c, "function"), *name = get(f, "name"), *args = get(f, "arguments");
        if (!cJSON_IsObject(f) || !cJSON_IsString(name))
            return srv_bad(b, 400, p, "'%s' must be an object with a string name", p);
        if (present(args) && !cJSON_IsString(args) && !cJSON_IsObject(args))
            return srv_bad(b, 400, p, "'%s.arguments' must be a JSON string", p);
        if (cJSON_IsString(args) && args->valuestring[strspn(args->valuestring, " \t\r\n")]) {
            cJSON *v = cJSON_Parse(args->valuestring);
            int obj = cJSON_IsObject(v);
            cJSON_Delete(v);
            if (!obj) {
                snprintf(p, sizeof p, "messages[%d].tool_calls[%d].function.arguments", i, k);
                return srv_bad(b, 400, p, "'%s' must be the text of a JSON object, got '%.60s'", p,
                               args->valuestring);
            }
        }
        cJSON *o = cJSON_CreateObject(), *fo;
        const cJSON *id = get(c, "id");
        if (cJSON_IsString(id)) cJSON_AddStringToObject(o, "id", id->valuestring);
        cJSON_AddStringToObject(o, "type", "function");
        fo = cJSON_AddObjectToObject(o, "function");
        cJSON_AddStringToObject(fo, "name", name->valuestring);
        if (cJSON_IsString(args)) cJSON_AddItemToObject(fo, "arguments", args_value(args->valuestring));
        else if (cJSON_IsObject(args)) cJSON_AddItemToObject(fo, "arguments", cJSON_Duplicate(args, 1));
        else cJSON_AddItemToObject(fo, "arguments", cJSON_CreateObject());
        cJSON_AddItemToArray(arr, o);
        k++;
    }
    return 0;
}

/* 'messages' present and a non-empty array; else -1 with b filled. */
static int check_messages(const cJSON *arr, bad_req *b) {
    if (!arr) return srv_bad(b, 400, "messages", "'messages' is required");
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
        return srv_bad(b, 400, "messages", "'messages' must be a non-empty array");
    return 0;
}

/* messages[i]'s role string (p gets "messages[i].role"); NULL with b filled
 * when m is not an object or has no string role. */
static const char *message_role(const cJSON *m, int i, char *p, size_t p_len, bad_req *b) {
    snprintf(p, p_len, "messages[%d].role", i);
    if (!cJSON_IsObject(m)) return srv_bad(b, 400, p, "'messages[%d]' must be an object", i), NULL;
    const cJSON *role = get(m, "role");
    if (!cJSON_IsString(role)) return srv_bad(b, 400, p, "'%s' is required", p), NULL;
    return role->valuestring;
}

static int oai_messages(const cJSON *arr, cJSON *out, bad_req *b) {
    if (check_messages(arr, b)) return -1;
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        char p[96];
        const char *rs = message_role(m, i, p, sizeof p, b);
        if (!rs) return -1;
        if (strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "system") && strcmp(rs, "developer") &&
            strcmp(rs, "tool"))
            return srv_bad(b, 400, p, "'%s' must be one of system, developer, user, assistant, tool, got '%.64s'", p,
                        rs);
        snprintf(p, sizeof p, "messages[%d].content", i);
        const cJSON *ct = get(m, "content"), *tc = get(m, "tool_calls");
        int is_asst = !strcmp(rs, "assistant");
        char *t = NULL;
        if (present(ct)) {
            if (!(t = content_text(ct, p, OAI_TEXT, b))) return -1;
        } else if (!(is_asst && present(tc))) {
            return srv_bad(b, 400, p, "'%s' is required", p);
        }
        cJSON *o = msg_new(!strcmp(rs, "developer") ? "system" : rs, t);
        cJSON_AddItemToArray(out, o);
        /* an earlier reply's reasoning, for templates that render or strip it (Qwen3) */
        const cJSON *rc = get(m, "reasoning_content");
        if (is_asst && cJSON_IsString(rc)) cJSON_AddStringToObject(o, "reasoning_content", rc->valuestring);
        if (is_asst && present(tc) && oai_tool_calls(tc, o, i, b)) return -1;
        if (!strcmp(rs, "tool")) {
            const cJSON *id = get(m, "tool_call_id");
            snprintf(p, sizeof p, "messages[%d].tool_call_id", i);
            if (!cJSON_IsString(id)) return srv_bad(b, 400, p, "'%s' is required for role tool", p);
            cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
            const cJSON *nm = get(m, "name");
            if (cJSON_IsString(nm)) cJSON_AddStringToObject(o, "name", nm->valuestring);
        }
        i++;
    }
    return 0;
}

/* Anthropic: content string or blocks (text, tool_use, tool_result, and
 * thinking / redacted_thinking, which are dropped). */
static int ant_messages(const cJSON *r, cJSON *out, bad_req *b) {
    const cJSON *sys = get(r, "system");
    if (present(sys)) {
        char *t = content_text(sys, "system", ANT_TEXT, b);
        if (!t) return -1;
        cJSON_AddItemToArray(out, msg_new("system", t));
    }
    const cJSON *arr = get(r, "messages");
    if (check_messages(arr, b)) return -1;
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        char p[96];
        const char *rs = message_role(m, i, p, sizeof p, b);
        if (!rs) return -1;
        if (strcmp(rs, "user") && strcmp(rs, "assistant"))
            return srv_bad(b, 400, p, "'%s' must be one of user, assistant, got '%.64s'", p, rs);
        int asst = !strcmp(rs, "assistant");
        snprintf(p, sizeof p, "messages[%d].content", i);
        const cJSON *ct = get(m, "content");
        if (!present(ct)) return srv_bad(b, 400, p, "'%s' is required", p);
        if (cJSON_IsString(ct)) {
            cJSON_AddItemToArray(out, msg_new(rs, strdup(ct->valuestring)));
            i++;
            continue;
        }
        if (!cJSON_IsArray(ct)) return srv_bad(b, 400, p, "'%s' must be a string or an array of content blocks", p);
        /* text blocks join into one message; tool_use become its tool_calls;
         * each tool_result is a "tool" message (before the user's text) */
        char *text = calloc(1, 1);
        size_t tl = 0;
        cJSON *calls = NULL;
        int k = 0;
        const cJSON *blk;
        cJSON_ArrayForEach(blk, ct) {
            char q[128];
            snprintf(q, sizeof q, "messages[%d].content[%d]", i, k);
            const cJSON *ty = get(blk, "type");
            if (!cJSON_IsString(ty)) {
                free(text);
                cJSON_Delete(calls);
                return srv_bad(b, 400, q, "'%s.type' is required", q);
            }
            const char *ts = ty->valuestring;
            if (!strcmp(ts, "text")) {
                const cJSON *tx = get(blk, "text");
                if (!cJSON_IsString(tx)) {
                    free(text);
                    cJSON_Delete(calls);
                    return srv_bad(b, 400, q, "'%s.text' must be a string", q);
                }
                size_t n = strlen(tx->valuestring);
                char *nt = realloc(text, tl + n + 1);
                if (!nt) {
                    free(text);
                    cJSON_Delete(calls);
                    return srv_bad(b, 500, q, "out of memory");
                }
                text = nt;
                memcpy(text + tl, tx->valuestring, n + 1);
                tl += n;
            } else if (!strcmp(ts, "tool_use") && asst) {
                const cJSON *id = get(blk, "id"), *nm = get(blk, "name"), *in = get(blk, "input");
                if (!cJSON_IsString(id) || !cJSON_IsString(nm) || (present(in) && !cJSON_IsObject(in))) {
                    free(text);
                    cJSON_Delete(calls);
                    return srv_bad(b, 400, q, "'%s' must have string id and name and an object input", q);
                }
                if (!calls) calls = cJSON_CreateArray();
                cJSON *c = cJSON_CreateObject(), *f;
                cJSON_AddStringToObject(c, "id", id->valuestring);
                cJSON_AddStringToObject(c, "type", "function");
                f = cJSON_AddObjectToObject(c, "function");
                cJSON_AddStringToObject(f, "name", nm->valuestring);
                cJSON_AddItemToObject(f, "arguments", present(in) ? cJSON_Duplicate(in, 1) : cJSON_CreateObject());
                cJSON_AddItemToArray(calls, c);
            } else if (!strcmp(ts, "tool_result") && !asst) {
                const cJSON *id = get(blk, "tool_use_id"), *rc = get(blk, "content");
                if (!cJSON_IsString(id)) {
                    free(text);
                    cJSON_Delete(calls);
                    return srv_bad(b, 400, q, "'%s.tool_use_id' must be a string", q);
                }
                char q2[160];
                snprintf(q2, sizeof q2, "%s.content", q);
                char *rt = present(rc) ? content_text(rc, q2, ANT_TEXT, b) : strdup("");
                if (!rt) {
                    free(text);
                    cJSON_Delete(calls);
                    return -1;
                }
                cJSON *o = msg_new("tool", rt);
                cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
                cJSON_AddItemToArray(out, o);
            } else if (!strcmp(ts, "thinking") || !strcmp(ts, "redacted_thinking")) {
                /* accepted and ignored */
            } else {
                free(text);
                cJSON_Delete(calls);
                return srv_bad(b, 400, q, "'%s': unsupported content block type '%.40s' for role %s", q, ts, rs);
            }
            k++;
        }
        if (tl || calls || !k) {
            cJSON *o = msg_new(rs, text);
            text = NULL;
            if (calls) cJSON_AddItemToObject(o, "tool_calls", calls);
            cJSON_AddItemToArray(out, o);
        }
        free(text);
        i++;
    }
    return 0;
}

/* OpenAI responses: instructions + input (a string, or message items). */
static int resp_messages(const cJSON *r, cJSON *out, bad_req *b) {
    const cJSON *ins = get(r, "instructions");
    if (present(ins)) {
        if (!cJSON_IsString(ins)) return srv_bad(b, 400, "instructions", "'instructions' must be a string");
        cJSON_AddItemToArray(out, msg_new("system", strdup(ins->valuestring)));
    }
    const cJSON *in = get(r, "input");
    if (!present(in)) return srv_bad(b, 400, "input", "'input' is required");
    if (cJSON_IsString(in)) {
        cJSON_AddItemToArray(out, msg_new("user", strdup(in->valuestring)));
        return 0;
    }
    if (!cJSON_IsArray(in) || !cJSON_GetArraySize(in))
        return srv_bad(b, 400, "input", "'input' must be a string or a non-empty array of messages");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, in) {
        char p[96];
        snprintf(p, sizeof p, "input[%d]", i);
        if (!cJSON_IsObject(m)) return srv_bad(b, 400, p, "'%s' must be an object", p);
        const cJSON *ty = get(m, "type"), *role = get(m, "role");
        if (present(ty) && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "message")))
            return srv_bad(b, 400, p, "'%s.type' must be \"message\" (other item types are not supported)", p);
        snprintf(p, sizeof p, "input[%d].role", i);
        if (!cJSON_IsString(role)) return srv_bad(b, 400, p, "'%s' is required", p);
        const char *rs = role->valuestring;
        if (strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "system") && strcmp(rs, "developer"))
            return srv_bad(b, 400, p, "'%s' must be one of system, developer, user, assistant, got '%.64s'", p, rs);
        snprintf(p, sizeof p, "input[%d].content", i);
        const cJSON *ct = get(m, "content");
        if (!present(ct)) return srv_bad(b, 400, p, "'%s' is required", p);
        char *t = content_text(ct, p, RESP_TEXT, b);
        if (!t) return -1;
        cJSON_AddItemToArray(out, msg_new(!strcmp(rs, "developer") ? "system" : rs, t));
        i++;
    }
    return 0;
}

cJSON *srvx_messages(int api, const cJSON *r, bad_req *b) {
    cJSON *out = cJSON_CreateArray();
    if (!out) {
        srv_bad(b, 500, NULL, "out of memory");
        return NULL;
    }
    int rc = api == API_MSG ? ant_messages(r, out, b) : api == API_RESP ? resp_messages(r, out, b)
                                                                         : oai_messages(get(r, "messages"), out, b);
    if (rc) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* ---- tools ------------------------------------------------------------------------------ */

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.') return 0;
    return 1;
}

/* The request's tools as the template's OpenAI-shape array (names checked,
 * parameters defaulted to an empty object schema). */
static cJSON *parse_tools(int api, const cJSON *tools, bad_req *b) {
    if (!cJSON_IsArray(tools)) {
        srv_bad(b, 400, "tools", "'tools' must be an array");
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        char p[96];
        snprintf(p, sizeof p, "tools[%d]", i);
        const cJSON *name, *desc, *params;
        if (!cJSON_IsObject(t)) goto bad_obj;
        if (api == API_MSG) {
            const cJSON *ty = get(t, "type");
            if (present(ty) && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "custom"))) {
                cJSON_Delete(out);
                srv_bad(b, 400, p, "'%s.type': server tool '%.40s' is not supported (client tools only)", p,
                     cJSON_IsString(ty) ? ty->valuestring : "?");
                return NULL;
            }
            name = get(t, "name");
            desc = get(t, "description");
            params = get(t, "input_schema");
            snprintf(p, sizeof p, "tools[%d].input_schema", i);
            if (!cJSON_IsObject(params)) {
                cJSON_Delete(out);
                srv_bad(b, 400, p, "'%s' must be a JSON Schema object", p);
                return NULL;
            }
        } else {
            const cJSON *ty = get(t, "type"), *f = get(t, "function");
            if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsObject(f)) {
                cJSON_Delete(out);
                srv_bad(b, 400, p, "'%s' must be {\"type\":\"function\",\"function\":{name, description, parameters}}", p);
                return NULL;
            }
            name = get(f, "name");
            desc = get(f, "description");
            params = get(f, "parameters");
            snprintf(p, sizeof p, "tools[%d].function.parameters", i);
            if (present(params) && !cJSON_IsObject(params)) {
                cJSON_Delete(out);
                srv_bad(b, 400, p, "'%s' must be a JSON Schema object", p);
                return NULL;
            }
        }
        if (!cJSON_IsString(name) || !valid_name(name->valuestring)) {
            snprintf(p, sizeof p, api == API_MSG ? "tools[%d].name" : "tools[%d].function.name", i);
            cJSON_Delete(out);
            srv_bad(b, 400, p, "'%s' must be 1-64 letters, digits, '_', '-' or '.'", p);
            return NULL;
        }
        if (present(desc) && !cJSON_IsString(desc)) {
            snprintf(p, sizeof p, api == API_MSG ? "tools[%d].description" : "tools[%d].function.description", i);
            cJSON_Delete(out);
            srv_bad(b, 400, p, "'%s' must be a string", p);
            return NULL;
        }
        for (const cJSON *o = out->child; o; o = o->next)
            if (!strcmp(get(get(o, "function"), "name")->valuestring, name->valuestring)) {
                cJSON_Delete(out);
                srv_bad(b, 400, "tools", "tool name '%.64s' appears twice in 'tools'", name->valuestring);
                return NULL;
            }
        cJSON *o = cJSON_CreateObject(), *f;
        cJSON_AddStringToObject(o, "type", "function");
        f = cJSON_AddObjectToObject(o, "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        if (present(desc)) cJSON_AddStringToObject(f, "description", desc->valuestring);
        if (present(params)) cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(params, 1));
        else cJSON_AddItemToObject(f, "parameters", cJSON_Parse("{\"type\":\"object\",\"properties\":{}}"));
        cJSON_AddItemToArray(out, o);
        i++;
        continue;
    bad_obj:
        cJSON_Delete(out);
        srv_bad(b, 400, p, "'%s' must be an object", p);
        return NULL;
    }
    return out;
}

/* The unsupported-keyword message of the grammar compiler, as a 400 on field. */
static int schema_error(bad_req *b, int rc, const char *field, const char *err) {
    if (rc == CINFER_ENOMEM) return srv_bad(b, 500, field, "out of memory compiling '%s'", field);
    return srv_bad(b, 400, field, "'%s': %.300s", field, err);
}

/* ---- schema checks the grammar compiler leaves to us ---------------------------------- */

static int is_schema(const cJSON *v) { return cJSON_IsObject(v) || cJSON_IsBool(v); }

static int lint_fail(char *why, size_t wcap, const char *fmt, const char *kw) {
    snprintf(why, wcap, fmt, kw);
    return -1;
}

/* Keywords of schema s with values of the wrong type, or bounds that
 * exclude every value (minLength > maxLength ...).  path (JSON Pointer
 * "#/properties/a", len bytes used of cap) is extended in place; on failure
 * it names the offending schema and why says what is wrong.  0 or -1. */
static int schema_lint(const cJSON *s, char *path, size_t len, size_t cap, char *why, size_t wcap, int depth) {
    if (cJSON_IsBool(s)) return 0;
    if (!cJSON_IsObject(s)) return lint_fail(why, wcap, "a schema must be an object or a boolean%s", "");
    if (depth > 64) return lint_fail(why, wcap, "schema nested deeper than 64 levels%s", "");
    static const char *const types[] = {"null", "boolean", "object", "array", "number", "string", "integer"};
    static const char *const sub1[] = {"items", "additionalProperties", "additionalItems", "not", "contains",
                                       "propertyNames", "if", "then", "else", "unevaluatedProperties",
                                       "unevaluatedItems"};
    static const char *const submap[] = {"properties", "patternProperties", "$defs", "definitions",
                                         "dependentSchemas"};
    static const char *const subarr[] = {"allOf", "anyOf", "oneOf", "prefixItems"};
    static const char *const counts[] = {"minLength", "maxLength", "minItems", "maxItems", "minProperties",
                                         "maxProperties", "minContains", "maxContains"};
    static const char *const nums[] = {"minimum", "maximum", "multipleOf"};
    static const char *const strs[] = {"pattern", "format", "$ref"};
    const cJSON *v;
    for (const cJSON *k = s->child; k; k = k->next) {
        const char *kw = k->string;
        size_t n = len + (size_t)snprintf(path + len, cap - len, "/%s", kw);
        if (n >= cap) n = cap - 1;
        if (!strcmp(kw, "type")) {
            int ok = cJSON_IsString(k) || (cJSON_IsArray(k) && k->child);
            for (v = cJSON_IsString(k) ? k : k->child; ok && v; v = cJSON_IsString(k) ? NULL : v->next) {
                int hit = 0;
                for (size_t t = 0; cJSON_IsString(v) && t < sizeof types / sizeof *types; t++)
                    hit |= !strcmp(v->valuestring, types[t]);
                ok = hit;
            }
            if (!ok)
                return lint_fail(why, wcap,
                                 "'%s' must be one of null, boolean, object, array, number, string, integer "
                                 "(or a non-empty array of them)", kw);
            continue;
        }
        for (size_t t = 0; t < sizeof sub1 / sizeof *sub1; t++)
            if (!strcmp(kw, sub1[t])) {
                if (!strcmp(kw, "items") && cJSON_IsArray(k)) { /* draft 4 tuple form */
                    int i = 0;
                    for (v = k->child; v; v = v->next, i++) {
                        size_t m = n + (size_t)snprintf(path + n, cap - n, "/%d", i);
                        if (schema_lint(v, path, m < cap ? m : cap - 1, cap, why, wcap, depth + 1)) return -1;
                    }
                } else if (!is_schema(k)) return lint_fail(why, wcap, "'%s' must be a schema (object or boolean)", kw);
                else if (schema_lint(k, path, n, cap, why, wcap, depth + 1)) return -1;
                goto next;
            }
        for (size_t t = 0; t < sizeof submap / sizeof *submap; t++)
            if (!strcmp(kw, submap[t])) {
                if (!cJSON_IsObject(k)) return lint_fail(why, wcap, "'%s' must be an object of schemas", kw);
                for (v = k->child; v; v = v->next) {
                    size_t m = n + (size_t)snprintf(path + n, cap - n, "/%s", v->string);
                    if (schema_lint(v, path, m < cap ? m : cap - 1, cap, why, wcap, depth + 1)) return -1;
                }
                goto next;
            }
        for (size_t t = 0; t < sizeof subarr / sizeof *subarr; t++)
            if (!strcmp(kw, subarr[t])) {
                if (!cJSON_IsArray(k) || !k->child)
                    return lint_fail(why, wcap, "'%s' must be a non-empty array of schemas", kw);
                int i = 0;
                for (v = k->child; v; v = v->next, i++) {
                    size_t m = n + (size_t)snprintf(path + n, cap - n, "/%d", i);
                    if (schema_lint(v, path, m < cap ? m : cap - 1, cap, why, wcap, depth + 1)) return -1;
                }
                goto next;
            }
        for (size_t t = 0; t < sizeof counts / sizeof *counts; t++)
            if (!strcmp(kw, counts[t]) && !(cJSON_IsNumber(k) && k->valuedouble >= 0 &&
                                             k->valuedouble == (double)(long long)k->valuedouble))
                return lint_fail(why, wcap, "'%s' must be a non-negative integer", kw);
        for (size_t t = 0; t < sizeof nums / sizeof *nums; t++)
            if (!strcmp(kw, nums[t]) && !cJSON_IsNumber(k)) return lint_fail(why, wcap, "'%s' must be a number", kw);
        /* the request body is parsed into doubles: a bound beyond one (1e309, a
         * 500-digit integer) would reach the grammar as null, dropped */
        if (cJSON_IsNumber(k) && !isfinite(k->valuedouble))
            return lint_fail(why, wcap, "'%s' is beyond the range of a double (|x| < 1.8e308)", kw);
        for (size_t t = 0; t < sizeof strs / sizeof *strs; t++)
            if (!strcmp(kw, strs[t]) && !cJSON_IsString(k)) return lint_fail(why, wcap, "'%s' must be a string", kw);
        if ((!strcmp(kw, "exclusiveMinimum") || !strcmp(kw, "exclusiveMaximum")) && !cJSON_IsNumber(k) &&
            !cJSON_IsBool(k))
            return lint_fail(why, wcap, "'%s' must be a number", kw);
        if (!strcmp(kw, "uniqueItems") && !cJSON_IsBool(k)) return lint_fail(why, wcap, "'%s' must be a boolean", kw);
        if (!strcmp(kw, "enum") && !cJSON_IsArray(k)) return lint_fail(why, wcap, "'%s' must be an array", kw);
        if (!strcmp(kw, "$ref") && !strcmp(k->valuestring, "#"))
            return lint_fail(why, wcap, "'%s' to the whole schema ('#') is not supported (recursion with no base case)",
                             kw);
        if (!strcmp(kw, "required")) {
            if (!cJSON_IsArray(k)) return lint_fail(why, wcap, "'%s' must be an array of strings", kw);
            for (v = k->child; v; v = v->next) {
                if (!cJSON_IsString(v)) return lint_fail(why, wcap, "'%s' must be an array of strings", kw);
                const cJSON *ps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "properties"),
                                                                   v->valuestring);
                if (cJSON_IsFalse(ps)) {
                    snprintf(why, wcap, "required property '%.60s' has schema false (no value allowed)",
                             v->valuestring);
                    return -1;
                }
            }
        }
    next:
        path[len] = 0;
    }
    static const char *const pairs[][2] = {
        {"minLength", "maxLength"}, {"minItems", "maxItems"}, {"minProperties", "maxProperties"}, {"minimum", "maximum"}};
    for (size_t t = 0; t < sizeof pairs / sizeof *pairs; t++) {
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, pairs[t][0]),
                    *hi = cJSON_GetObjectItemCaseSensitive(s, pairs[t][1]);
        if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi) && lo->valuedouble > hi->valuedouble) {
            snprintf(why, wcap, "'%s' (%g) is greater than '%s' (%g): no value fits", pairs[t][0], lo->valuedouble,
                     pairs[t][1], hi->valuedouble);
            return -1;
        }
    }
    return 0;
}

/* The user's schema sch (the request's field) on its own: keyword types and
 * bounds (schema_lint), then compiled, then some value must satisfy it.
 * Errors are 400s naming field, with paths inside the user's schema. */
static int check_schema(const cJSON *sch, const char *field, bad_req *b) {
    char path[256] = "#", why[256];
    if (schema_lint(sch, path, 1, sizeof path, why, sizeof why, 0))
        return srv_bad(b, 400, field, "'%s': at %s: %s", field, path, why);
    char *ps = cJSON_PrintUnformatted(sch), err[1024];
    cinfer_grammar *g = NULL;
    int rc = ps ? cinfer_grammar_from_schema(NULL, ps, strlen(ps), NULL, &g, err, sizeof err) : CINFER_ENOMEM;
    free(ps);
    if (rc) return schema_error(b, rc, field, err);
    int ok = cinfer_grammar_accepts_nothing(g) == 0;
    cinfer_grammar_free(g);
    if (!ok) return srv_bad(b, 400, field, "'%s': the schema accepts no value (e.g. \"not\":{}, or bounds or "
                                          "types that exclude everything)", field);
    return 0;
}

/* How the model's template writes tool calls: the syntax of its family
 * (text/chat_tools.h), confirmed by rendering a probe conversation with one
 * assistant call and finding the syntax's own rendering of it (SmolLM3,
 * whose template renders no calls: its tool instructions).  NULL: none the
 * server reads (tools are still rendered; the reply stays text). */
static const chat_tool_syntax *template_syntax(const cinfer_model *m) {
    cinfer_model_info in;
    cinfer_model_get_info(m, &in);
    const chat_tool_syntax *syn = in.chat_template ? chat_tool_syntax_for(chat_detect_family(in.chat_template)) : NULL;
    if (!syn) return NULL;
    /* a 9-character id: Mistral's templates refuse others */
    static const char probe[] =
        "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
        "[{\"id\":\"probe0001\",\"type\":\"function\",\"function\":{\"name\":\"probe_fn\",\"arguments\":{}}}]}]";
    static const char probe_tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"probe_fn\",\"description\":\"probe\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{}}}}]";
    char *out = NULL, err[256], vars[512];
    snprintf(vars, sizeof vars, "{\"xml_tools\":%s}", probe_tools);
    int rc = syn->family == CHAT_FAMILY_SMOLLM3
                 ? cinfer_chat_prompt_vars(m, "[{\"role\":\"user\",\"content\":\"x\"}]", probe_tools, vars, 1, &out, err,
                                           sizeof err)
                 : cinfer_chat_prompt_json(m, probe, probe_tools, 0, &out, err, sizeof err);
    int yes = !rc && strstr(out, syn->probe) != NULL;
    cinfer_free(out);
    return yes ? syn : NULL;
}

/* tool_choice → mode and (for a named tool) the single allowed name. */
static int parse_tool_choice(int api, const cJSON *tc, int *mode, const char **only, bad_req *b) {
    *only = NULL;
    *mode = SRVX_TOOLS_AUTO;
    if (!present(tc)) return 0;
    if (api == API_MSG) {
        const cJSON *ty = get(tc, "type");
        if (!cJSON_IsObject(tc) || !cJSON_IsString(ty))
            return srv_bad(b, 400, "tool_choice", "'tool_choice' must be {\"type\":\"auto\"|\"any\"|\"tool\"|\"none\"}");
        const char *t = ty->valuestring;
        if (!strcmp(t, "auto")) return 0;
        if (!strcmp(t, "none")) return *mode = SRVX_TOOLS_OFF, 0;
        if (!strcmp(t, "any")) return *mode = SRVX_TOOLS_REQUIRED, 0;
        if (!strcmp(t, "tool")) {
            const cJSON *n = get(tc, "name");
            if (!cJSON_IsString(n)) return srv_bad(b, 400, "tool_choice.name", "'tool_choice.name' is required for type tool");
            *only = n->valuestring;
            *mode = SRVX_TOOLS_REQUIRED;
            return 0;
        }
        return srv_bad(b, 400, "tool_choice.type", "'tool_choice.type' must be auto, any, tool or none, got '%.40s'", t);
    }
    if (cJSON_IsString(tc)) {
        const char *t = tc->valuestring;
        if (!strcmp(t, "auto")) return 0;
        if (!strcmp(t, "none")) return *mode = SRVX_TOOLS_OFF, 0;
        if (!strcmp(t, "required")) return *mode = SRVX_TOOLS_REQUIRED, 0;
        return srv_bad(b, 400, "tool_choice", "'tool_choice' must be auto, none, required or a function, got '%.40s'", t);
    }
    const cJSON *ty = get(tc, "type"), *f = get(tc, "function"), *n = get(f, "name");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(n))
        return srv_bad(b, 400, "tool_choice",
                    "'tool_choice' must be auto, none, required or {\"type\":\"function\",\"function\":{\"name\":...}}");
    *only = n->valuestring;
    *mode = SRVX_TOOLS_REQUIRED;
    return 0;
}

/* Local "$ref": "#/..." inside v, written for the tool's own schema, made to
 * point at the same place under prefix (where the schema sits in the call
 * wrapper, e.g. "#/anyOf/1/properties/arguments"). */
static void rebase_refs(cJSON *v, const char *prefix) {
    for (cJSON *k = v ? v->child : NULL; k; k = k->next) {
        if (k->string && !strcmp(k->string, "$ref") && cJSON_IsString(k) && k->valuestring[0] == '#') {
            size_t n = strlen(prefix) + strlen(k->valuestring) + 1;
            char *t = malloc(n);
            if (t) {
                snprintf(t, n, "%s%s", prefix, k->valuestring + 1);
                cJSON_SetValuestring(k, t);
                free(t);
            }
        } else if (cJSON_IsObject(k) || cJSON_IsArray(k))
            rebase_refs(k, prefix);
    }
}

/* Compile schema sch (consumed) into *g.  A failure's paths into the call
 * wrapper (base: where the call object sits, "#" or "#/items"; args_key: its
 * arguments key; NULL: sch is the tool's own schema) become paths into the
 * tool's own schema. */
static int compile_wrapped(srvx *x, cJSON *sch, const char *base, const char *args_key, cinfer_grammar **g,
                           bad_req *b) {
    char *s = cJSON_PrintUnformatted(sch);
    cJSON_Delete(sch);
    char err[1024];
    int rc = s ? cinfer_grammar_from_schema(x->m, s, strlen(s), NULL, g, err, sizeof err) : CINFER_ENOMEM;
    free(s);
    if (!rc || !args_key) return rc ? schema_error(b, rc, "tools", err) : 0;
    char key[80];
    snprintf(key, sizeof key, "/properties/%s", args_key);
    const size_t bl = strlen(base), kl = strlen(key);
    /* once per path: a tool property itself named like the arguments key stays */
    for (char *w = err; (w = strchr(w, '#')); w++) {
        if (strncmp(w, base, bl)) continue;
        char *e = w + bl;
        if (!strncmp(e, "/anyOf/", 7) && !(e = strchr(e + 7, '/'))) continue; /* the branch index */
        if (strncmp(e, key, kl)) continue;
        e += kl;
        memmove(w + 1, e, strlen(e) + 1);
    }
    return schema_error(b, rc, "tools", err);
}

/* The call grammar over the allowed tools (all, or the one named), in the
 * template's syntax: JSON_OBJECT the call object {name_key: const NAME,
 * args_key: PARAMETERS} of any tool; JSON_ARRAY an array of them (at most
 * one unless parallel; Command R7B's objects also carry a string
 * tool_call_id); NAME_ARGS one grammar per tool over its PARAMETERS, the name
 * being written freely up to [ARGS].  Free-form syntaxes (Gemma 4, GLM,
 * Qwen3-Coder) get none: their calls are parsed once written. */
static int build_call_grammar(srvx *x, const cJSON *tools, const char *only, int api, bad_req *b) {
    const chat_tool_syntax *syn = x->syn;
    const int free_form = !syn->name_key && syn->kind != CHAT_CALLS_NAME_ARGS;
    cJSON *any = cJSON_CreateArray();
    int i = 0, n_allowed = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *f = get(t, "function");
        const char *name = get(f, "name")->valuestring;
        if (only && strcmp(only, name)) continue;
        char field[96];
        snprintf(field, sizeof field, api == API_MSG ? "tools[%d].input_schema" : "tools[%d].function.parameters", i);
        /* each tool's schema on its own first: the error names that tool, at
         * paths inside its own schema */
        if (check_schema(get(f, "parameters"), field, b)) {
            cJSON_Delete(any);
            return -1;
        }
        n_allowed++;
        if (free_form) continue;
        if (syn->kind == CHAT_CALLS_NAME_ARGS) {
            cinfer_grammar **ng = realloc(x->arg_gram, (size_t)(x->n_arg + 1) * sizeof *ng);
            char **nn = ng ? realloc(x->arg_name, (size_t)(x->n_arg + 1) * sizeof *nn) : NULL;
            if (ng) x->arg_gram = ng;
            if (nn) x->arg_name = nn;
            if (!ng || !nn || !(x->arg_name[x->n_arg] = strdup(name))) {
                cJSON_Delete(any);
                return srv_bad(b, 500, "tools", "out of memory");
            }
            x->arg_gram[x->n_arg] = NULL;
            x->n_arg++;
            if (compile_wrapped(x, cJSON_Duplicate(get(f, "parameters"), 1), "#", NULL, &x->arg_gram[x->n_arg - 1], b)) {
                cJSON_Delete(any);
                return -1;
            }
            continue;
        }
        cJSON *br = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(br, "properties"), *nm, *req;
        cJSON_AddStringToObject(br, "type", "object");
        nm = cJSON_AddObjectToObject(props, syn->name_key);
        cJSON_AddStringToObject(nm, "const", name);
        cJSON_AddItemToObject(props, syn->args_key, cJSON_Duplicate(get(f, "parameters"), 1));
        req = cJSON_AddArrayToObject(br, "required");
        cJSON_AddItemToArray(req, cJSON_CreateString(syn->name_key));
        cJSON_AddItemToArray(req, cJSON_CreateString(syn->args_key));
        if (syn->id_key) {
            cJSON_AddStringToObject(cJSON_AddObjectToObject(props, syn->id_key), "type", "string");
            cJSON_AddItemToArray(req, cJSON_CreateString(syn->id_key));
        }
        cJSON_AddFalseToObject(br, "additionalProperties");
        cJSON_AddItemToArray(any, br);
    }
    if (free_form || syn->kind == CHAT_CALLS_NAME_ARGS || !any->child) {
        cJSON_Delete(any);
        if (n_allowed) return 0;
        return srv_bad(b, 400, api == API_MSG ? "tool_choice.name" : "tool_choice.function.name",
                       "tool_choice names '%.64s', which is not in 'tools'", only ? only : "");
    }
    const int array = syn->kind == CHAT_CALLS_JSON_ARRAY, several = any->child->next != NULL;
    const char *base = array ? "#/items" : "#";
    int nb = 0;
    for (cJSON *br = any->child; br; br = br->next, nb++) {
        char prefix[96];
        if (several) snprintf(prefix, sizeof prefix, "%s/anyOf/%d/properties/%s", base, nb, syn->args_key);
        else snprintf(prefix, sizeof prefix, "%s/properties/%s", base, syn->args_key);
        rebase_refs(get(get(br, "properties"), syn->args_key), prefix);
    }
    cJSON *sch;
    if (!several) {
        sch = cJSON_DetachItemFromArray(any, 0);
        cJSON_Delete(any);
    } else {
        sch = cJSON_CreateObject();
        cJSON_AddItemToObject(sch, "anyOf", any);
    }
    if (array) { /* every call of the turn in one array */
        cJSON *arr = cJSON_CreateObject();
        cJSON_AddStringToObject(arr, "type", "array");
        cJSON_AddItemToObject(arr, "items", sch);
        cJSON_AddNumberToObject(arr, "minItems", 1);
        cJSON_AddNumberToObject(arr, "maxItems", x->parallel ? SRVX_MAX_CALLS : 1);
        sch = arr;
    }
    return compile_wrapped(x, sch, base, syn->args_key, &x->call_gram, b);
}

static int tokenize_text(const cinfer_model *m, const char *t, int32_t **ids, int *n) {
    size_t cap = strlen(t) + 8, k = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids || cinfer_tokenize(m, t, strlen(t), 0, 1, *ids, cap, &k)) return -1;
    *n = (int)k;
    return 0;
}

static int parse_float_field(const cJSON *r, const char *k, double lo, double hi, float *out, bad_req *b) {
    const cJSON *v = get(r, k);
    if (!present(v)) return 0;
    if (!cJSON_IsNumber(v)) return srv_bad(b, 400, k, "'%s' must be a number", k);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return srv_bad(b, 400, k, "'%s' must be in [%g, %g], got %g", k, lo, hi, v->valuedouble);
    *out = (float)v->valuedouble;
    return 1;
}

int srvx_parse(const cinfer_model *m, int api, const cJSON *r, srvx **out, bad_req *b) {
    *out = NULL;
    srvx *x = calloc(1, sizeof *x);
    if (!x) return srv_bad(b, 500, NULL, "out of memory");
    x->m = m;
    x->api = api;
    x->trigger_id = -1;
    int used = 0;
    cJSON *tools = NULL;
    /* tools and tool_choice */
    const cJSON *tv = api == API_COMPL ? NULL : get(r, "tools");
    const cJSON *tc = api == API_COMPL ? NULL : get(r, "tool_choice");
    if (present(tv) && cJSON_IsArray(tv) && !cJSON_GetArraySize(tv)) tv = NULL;
    if (present(tv) && api == API_RESP) {
        srv_bad(b, 400, "tools", "'tools' is not supported on /v1/responses; use /v1/chat/completions");
        goto fail;
    }
    if (present(tv)) {
        if (!(tools = parse_tools(api, tv, b))) goto fail;
        const char *only;
        if (parse_tool_choice(api, tc, &x->tool_mode, &only, b)) goto fail;
        x->tools_json = cJSON_PrintUnformatted(tools);
        used = 1;
        /* several calls in one reply unless the request says otherwise */
        const cJSON *pt = api == API_MSG ? get(tc, "disable_parallel_tool_use") : get(r, "parallel_tool_calls");
        const char *ptn = api == API_MSG ? "tool_choice.disable_parallel_tool_use" : "parallel_tool_calls";
        if (present(pt) && !cJSON_IsBool(pt)) {
            srv_bad(b, 400, ptn, "'%s' must be a boolean", ptn);
            goto fail;
        }
        x->parallel = api == API_MSG ? !cJSON_IsTrue(pt) : !cJSON_IsFalse(pt);
        if (x->tool_mode != SRVX_TOOLS_OFF) {
            if (!(x->syn = template_syntax(m))) {
                if (x->tool_mode == SRVX_TOOLS_REQUIRED) {
                    srv_bad(b, 400, "tool_choice",
                         "forced tool calls need a chat template whose tool-call syntax cinfer reads (Hermes/Qwen "
                         "<tool_call>, Mistral [TOOL_CALLS], Gemma 4, GLM, Nemotron, EXAONE, Command R, ...); this "
                         "model's template has none");
                    goto fail;
                }
                x->tool_mode = SRVX_TOOLS_OFF; /* tools rendered; output is text */
            } else {
                const chat_tool_syntax *syn = x->syn;
                x->tools = cJSON_Duplicate(tools, 1);
                if (build_call_grammar(x, tools, only, api, b)) goto fail;
                if (tokenize_text(m, syn->opener, &x->opener, &x->n_opener) || x->n_opener < 1) {
                    srv_bad(b, 500, NULL, "cannot tokenize the tool-call opener '%s'", syn->opener);
                    goto fail;
                }
                /* between two blocks of one turn: closer + separator (JSON objects, Mistral's none) */
                char between[64];
                snprintf(between, sizeof between, "%s%s", syn->closer, syn->between);
                if (syn->kind == CHAT_CALLS_JSON_OBJECT || syn->kind == CHAT_CALLS_NAME_ARGS) {
                    if (!between[0]) x->n_closer = 0, x->closer = NULL;
                    else if (tokenize_text(m, between, &x->closer, &x->n_closer)) x->n_closer = -1;
                } else
                    x->n_closer = -1; /* one block holds every call */
                /* the lazy trigger needs the opener's first token to be the trigger, one token
                 * (an added or special token in the models that write these syntaxes) */
                int32_t *one = NULL;
                int n1 = 0;
                if (!tokenize_text(m, syn->trigger, &one, &n1) && n1 == 1 && x->opener[0] == one[0])
                    x->trigger_id = one[0];
                free(one);
                snprintf(x->trigger_text, sizeof x->trigger_text, "%s", syn->trigger);
            }
        }
    } else if (present(tc)) {
        int mode;
        const char *only;
        if (parse_tool_choice(api, tc, &mode, &only, b)) goto fail;
        if (mode == SRVX_TOOLS_REQUIRED) {
            srv_bad(b, 400, "tool_choice", "'tool_choice' requires 'tools'");
            goto fail;
        }
    }
    /* response_format (OpenAI chat and completions; responses: text.format) */
    const cJSON *rf = api == API_CHAT || api == API_COMPL ? get(r, "response_format") : NULL;
    const char *rf_name = "response_format";
    if (api == API_RESP) {
        const cJSON *txt = get(r, "text");
        if (present(txt) && !cJSON_IsObject(txt)) {
            srv_bad(b, 400, "text", "'text' must be an object");
            goto fail;
        }
        rf = get(txt, "format");
        rf_name = "text.format";
    }
    if (present(rf)) {
        const cJSON *ty = get(rf, "type");
        char p[96];
        snprintf(p, sizeof p, "%s.type", rf_name);
        if (!cJSON_IsObject(rf) || !cJSON_IsString(ty)) {
            srv_bad(b, 400, rf_name, "'%s' must be {\"type\":\"text\"|\"json_object\"|\"json_schema\",...}", rf_name);
            goto fail;
        }
        const char *t = ty->valuestring;
        const cJSON *sch = NULL;
        char field[96];
        if (!strcmp(t, "text")) {
        } else if (!strcmp(t, "json_object")) {
            snprintf(field, sizeof field, "%s", rf_name);
        } else if (!strcmp(t, "json_schema")) {
            /* chat: {"type":"json_schema","json_schema":{"name","schema","strict"}};
             * responses: {"type":"json_schema","name","schema","strict"} */
            const cJSON *js = api == API_RESP ? rf : get(rf, "json_schema");
            const char *jn = api == API_RESP ? "text.format" : "response_format.json_schema";
            if (!cJSON_IsObject(js)) {
                srv_bad(b, 400, jn, "'%s' is required for type json_schema", jn);
                goto fail;
            }
            const cJSON *nm = get(js, "name"), *st = get(js, "strict");
            snprintf(field, sizeof field, "%s.name", jn);
            if (present(nm) && !cJSON_IsString(nm)) {
                srv_bad(b, 400, field, "'%s' must be a string", field);
                goto fail;
            }
            snprintf(field, sizeof field, "%s.strict", jn);
            if (present(st) && !cJSON_IsBool(st)) {
                srv_bad(b, 400, field, "'%s' must be a boolean", field);
                goto fail;
            }
            sch = get(js, "schema");
            snprintf(field, sizeof field, "%s.schema", jn);
            if (!cJSON_IsObject(sch) && !cJSON_IsBool(sch)) {
                srv_bad(b, 400, field, "'%s' must be a JSON Schema object", field);
                goto fail;
            }
        } else {
            srv_bad(b, 400, p, "'%s' must be text, json_object or json_schema, got '%.40s'", p, t);
            goto fail;
        }
        if (strcmp(t, "text")) {
            if (sch && check_schema(sch, field, b)) goto fail;
            char *s = sch ? cJSON_PrintUnformatted(sch) : strdup("{\"type\":\"object\"}");
            char err[1024];
            int rc = s ? cinfer_grammar_from_schema(m, s, strlen(s), NULL, &x->fmt_gram, err, sizeof err)
                       : CINFER_ENOMEM;
            free(s);
            if (rc) {
                schema_error(b, rc, field, err);
                goto fail;
            }
            used = 1;
            if (x->tool_mode == SRVX_TOOLS_AUTO) x->tool_mode = SRVX_TOOLS_OFF; /* the format wins over free calls */
        }
    }
    /* logprobs */
    const cJSON *lp = get(r, "logprobs");
    if (api == API_COMPL) {
        if (present(lp)) {
            if (!cJSON_IsNumber(lp) || lp->valuedouble != (int)lp->valuedouble || lp->valuedouble < 0 ||
                lp->valuedouble > 5) {
                srv_bad(b, 400, "logprobs", "'logprobs' must be an integer in [0, 5]");
                goto fail;
            }
            x->logprobs = 1;
            x->top_logprobs = (int)lp->valuedouble;
            used = 1;
        }
    } else if (api == API_CHAT) {
        const cJSON *tl = get(r, "top_logprobs");
        if (present(lp) && !cJSON_IsBool(lp)) {
            srv_bad(b, 400, "logprobs", "'logprobs' must be a boolean");
            goto fail;
        }
        if (present(tl)) {
            if (!cJSON_IsNumber(tl) || tl->valuedouble != (int)tl->valuedouble || tl->valuedouble < 0 ||
                tl->valuedouble > 20) {
                srv_bad(b, 400, "top_logprobs", "'top_logprobs' must be an integer in [0, 20]");
                goto fail;
            }
            if (!cJSON_IsTrue(lp)) {
                srv_bad(b, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
                goto fail;
            }
            x->top_logprobs = (int)tl->valuedouble;
        }
        if (cJSON_IsTrue(lp)) x->logprobs = used = 1;
    }
    /* logit_bias: {"token id": bias in [-100, 100]} */
    const cJSON *lb = api == API_CHAT || api == API_COMPL ? get(r, "logit_bias") : NULL;
    if (present(lb)) {
        if (!cJSON_IsObject(lb)) {
            srv_bad(b, 400, "logit_bias", "'logit_bias' must be an object mapping token ids to numbers");
            goto fail;
        }
        int n = cJSON_GetArraySize(lb), nv = cinfer_model_n_vocab(m);
        x->bias_id = calloc((size_t)n + 1, sizeof *x->bias_id);
        x->bias_val = calloc((size_t)n + 1, sizeof *x->bias_val);
        if (!x->bias_id || !x->bias_val) {
            srv_bad(b, 500, "logit_bias", "out of memory");
            goto fail;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, lb) {
            char *end = NULL;
            long id = strtol(e->string, &end, 10);
            if (!e->string[0] || *end || id < 0 || id >= nv) {
                srv_bad(b, 400, "logit_bias", "'logit_bias' key '%.40s' is not a token id in [0, %d)", e->string, nv);
                goto fail;
            }
            if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100)) {
                srv_bad(b, 400, "logit_bias", "'logit_bias[\"%.40s\"]' must be a number in [-100, 100]", e->string);
                goto fail;
            }
            x->bias_id[x->n_bias] = (int32_t)id;
            x->bias_val[x->n_bias++] = (float)e->valuedouble;
        }
        if (x->n_bias) used = 1;
    }
    /* penalties */
    if (api != API_MSG) {
        int rc1 = parse_float_field(r, "frequency_penalty", -2, 2, &x->freq_pen, b);
        if (rc1 < 0) goto fail;
        int rc2 = parse_float_field(r, "presence_penalty", -2, 2, &x->pres_pen, b);
        if (rc2 < 0) goto fail;
        if (x->freq_pen != 0 || x->pres_pen != 0) used = 1;
    } else {
        /* thinking is read by srv.c (template_vars); metadata accepted and ignored
         * (cache_control sits inside blocks) */
        const cJSON *th = get(r, "thinking"), *md = get(r, "metadata");
        if (present(th) && !cJSON_IsObject(th)) {
            srv_bad(b, 400, "thinking", "'thinking' must be an object");
            goto fail;
        }
        if (present(md) && !cJSON_IsObject(md)) {
            srv_bad(b, 400, "metadata", "'metadata' must be an object");
            goto fail;
        }
    }
    cJSON_Delete(tools);
    if (!used) {
        srvx_free(x);
        return 0;
    }
    *out = x;
    return 0;
fail:
    cJSON_Delete(tools);
    srvx_free(x);
    return -1;
}

void srvx_free(srvx *x) {
    if (!x) return;
    free(x->tools_json);
    cJSON_Delete(x->tools);
    cinfer_grammar_free(x->call_gram);
    for (int i = 0; i < x->n_arg; i++) {
        cinfer_grammar_free(x->arg_gram[i]);
        free(x->arg_name[i]);
    }
    free(x->arg_gram);
    free(x->arg_name);
    cinfer_grammar_free(x->fmt_gram);
    free(x->opener);
    free(x->closer);
    free(x->call);
    free(x->lp);
    free(x->bias_id);
    free(x->bias_val);
    for (int i = 0; i < x->n_calls; i++) {
        free(x->calls[i].name);
        free(x->calls[i].arguments);
    }
    free(x);
}

/* ---- generation ---------------------------------------------------------------------- */

/* logit_fn: penalties, then the log-softmax bookkeeping for logprobs. */
/* Mistral's call name, written without a JSON grammar: only tokens that
 * keep the text so far a prefix of some allowed "NAME[ARGS]" stay possible,
 * so the name is one of the tools' (the model still chooses which). */
static void mask_call_name(const srvx *x, float *lg, int n_vocab) {
    const size_t have = x->call_len;
    char tb[256];
    for (int id = 0; id < n_vocab; id++) {
        if (!(lg[id] > -INFINITY)) continue;
        int n = cinfer_token_text(x->m, id, tb, sizeof tb);
        int ok = 0;
        for (int k = 0; n > 0 && n <= (int)sizeof tb && k < x->n_arg && !ok; k++) {
            const char *name = x->arg_name[k];
            size_t nl = strlen(name), tl = nl + 6, at = have;
            if (have + (size_t)n > tl || (have && memcmp(x->call, name, have < nl ? have : nl))) continue;
            if (have > nl && memcmp(x->call + nl, "[ARGS]", have - nl)) continue;
            ok = 1;
            for (int i = 0; ok && i < n; i++, at++)
                ok = (unsigned char)tb[i] == (unsigned char)(at < nl ? name[at] : "[ARGS]"[at - nl]);
        }
        if (!ok) lg[id] = -INFINITY;
    }
}

static void x_logits(float *lg, int n_vocab, const int32_t *hist, int n_hist, void *user) {
    srvx *x = user;
    if (x->name_phase) mask_call_name(x, lg, n_vocab);
    for (int i = 0; i < x->n_bias; i++)
        if (x->bias_id[i] < n_vocab) lg[x->bias_id[i]] += x->bias_val[i];
    if ((x->freq_pen != 0 || x->pres_pen != 0) && n_hist > x->n_prompt)
        samp_penalize_counts(lg, n_vocab, hist + x->n_prompt, n_hist - x->n_prompt, x->freq_pen, x->pres_pen);
    if (!x->logprobs) return;
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        if (lg[i] > mx) mx = lg[i];
    double sum = 0;
    if (mx > -INFINITY)
        for (int i = 0; i < n_vocab; i++) sum += exp((double)lg[i] - mx);
    x->cur_lse = mx > -INFINITY ? mx + (float)log(sum) : 0;
    x->cur_logits = lg;
    x->have_logits = 1;
    /* the top_logprobs best (insertion into a short sorted list) */
    int k = x->top_logprobs, n = 0;
    for (int i = 0; i < n_vocab && k > 0; i++) {
        float l = lg[i];
        if (!(l > -INFINITY)) continue;
        if (n == k && l <= x->cur_top[n - 1].logprob) continue;
        int at = n < k ? n++ : n - 1;
        while (at > 0 && x->cur_top[at - 1].logprob < l) {
            x->cur_top[at] = x->cur_top[at - 1];
            at--;
        }
        x->cur_top[at] = (srvx_top){l, i};
    }
    for (int i = 0; i < n; i++) x->cur_top[i].logprob -= x->cur_lse;
    x->cur_n_top = n;
}

int srvx_on_token(srvx *x, const char **piece, size_t *len, int32_t token) {
    if (!x) return 0;
    if (x->logprobs && token >= 0) {
        if (x->n_lp == x->cap_lp) {
            int nc = x->cap_lp ? 2 * x->cap_lp : 64;
            srvx_lp *np = realloc(x->lp, (size_t)nc * sizeof *np);
            if (np) x->lp = np, x->cap_lp = nc;
        }
        if (x->n_lp < x->cap_lp) {
            srvx_lp *e = &x->lp[x->n_lp++];
            memset(e, 0, sizeof *e);
            e->id = token;
            if (x->have_logits) {
                e->logprob = x->cur_logits[token] - x->cur_lse;
                e->n_top = x->cur_n_top;
                memcpy(e->top, x->cur_top, (size_t)x->cur_n_top * sizeof *e->top);
            } else { /* forced by the grammar: the only allowed token */
                e->logprob = 0;
                e->n_top = x->top_logprobs > 0;
                e->top[0] = (srvx_top){0, token};
            }
        }
        x->have_logits = 0;
    }
    if (x->phase == 1) {
        /* the call's text with special tokens as their text ([ARGS], <arg_key>:
         * the parsers read them); token bytes, not the streamed UTF-8 view */
        char tb[256];
        int n = token >= 0 ? cinfer_token_text(x->m, token, tb, sizeof tb) : 0;
        if (n < 0 || n > (int)sizeof tb) n = 0;
        if (n) {
            if (x->call_len + (size_t)n + 1 > x->call_cap) {
                size_t nc = x->call_cap ? 2 * x->call_cap : 256;
                while (nc < x->call_len + (size_t)n + 1) nc *= 2;
                char *np = realloc(x->call, nc);
                if (!np) return 1;
                x->call = np;
                x->call_cap = nc;
            }
            memcpy(x->call + x->call_len, tb, (size_t)n);
            x->call_len += (size_t)n;
            x->call[x->call_len] = 0;
        }
        *len = 0;
        /* Mistral: the name is written up to [ARGS]; its arguments follow under a grammar */
        return x->name_phase && x->call_len >= 6 && !memcmp(x->call + x->call_len - 6, "[ARGS]", 6);
    }
    if (x->tool_mode == SRVX_TOOLS_AUTO && token >= 0 && token == x->trigger_id) {
        /* the opener: text before it is content; the call follows in pass 2 */
        size_t tl = strlen(x->trigger_text);
        if (*len >= tl && !memcmp(*piece + *len - tl, x->trigger_text, tl)) *len -= tl;
        x->triggered = 1;
        return 1;
    }
    return 0;
}

/* Parse x->call into x->calls[n_calls..]: one block body (JSON syntaxes and
 * Mistral's name[ARGS]{...}), or, for the free-form syntaxes, every block of
 * the text after the trigger (complete blocks are kept, trailing text
 * dropped).  A call that does not parse (cut by max_tokens, cancelled, not
 * the syntax) sets call_broken and stays in x->call (salvage_call keeps what
 * it can). */
static void parse_call(srvx *x) {
    chat_tool_call got[SRVX_MAX_CALLS] = {{0}};
    int room = SRVX_MAX_CALLS - x->n_calls, n = -1;
    const chat_tool_syntax *syn = x->syn;
    if (room > 0 && x->call) {
        if (syn->kind == CHAT_CALLS_GEMMA4 || syn->kind == CHAT_CALLS_ARG_KEYS || syn->kind == CHAT_CALLS_XML_PARAMS) {
            /* the trigger was consumed: put it back in front of the text */
            size_t tl = strlen(syn->trigger), cl;
            char *t = malloc(tl + x->call_len + 1);
            int k = 0;
            if (t) {
                memcpy(t, syn->trigger, tl);
                memcpy(t + tl, x->call, x->call_len + 1);
                int rc = chat_tool_split(syn, t, tl + x->call_len, x->tools, &cl, got, room, &k);
                n = rc == -2 ? -1 : k > 0 ? k : -1;
                free(t);
            }
        } else {
            n = chat_tool_parse_body(syn, x->call, x->call_len, x->tools, got, room);
        }
    }
    if (n > 0) {
        for (int i = 0; i < n; i++) {
            x->calls[x->n_calls].name = got[i].name;
            x->calls[x->n_calls++].arguments = got[i].arguments;
        }
        x->call_len = 0;
        if (x->call) x->call[0] = 0;
    } else {
        x->call_broken = 1;
    }
}

/* The end of string text s (at its opening quote): the byte after the closing
 * quote, or NULL when the text ends first. */
static const char *str_end(const char *s) {
    for (s++; *s; s++) {
        if (*s == '\\' && s[1]) s++;
        else if (*s == '"') return s + 1;
    }
    return NULL;
}

/* The end of the JSON value starting at v (strings skipped, brackets
 * counted), or NULL when the text ends inside it. */
static const char *value_end(const char *v) {
    int depth = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '"') {
            if (!(p = str_end(p))) return NULL;
            p--;
            if (!depth) return p + 1;
        } else if (*p == '{' || *p == '[') depth++;
        else if (*p == '}' || *p == ']') {
            if (--depth <= 0) return p + 1;
        } else if (!depth && (*p == ',' || *p == '}')) return p;
    }
    return NULL;
}

/* A call cut off (max_tokens) while its object {"name":..,"arguments":..}
 * (keys in either order, as the grammar allows) was being written: when the
 * name is complete it becomes the last call, its arguments the text written
 * so far — what OpenAI returns for a call cut by max_tokens (finish_reason
 * "length", arguments not valid JSON).  Without a complete name the call is
 * dropped: nothing of it reaches the reply's text. */
/* An array of calls cut off: its complete elements are the calls. */
static void salvage_array(srvx *x) {
    const char *p = x->call + strspn(x->call, " \t\r\n"), *last = NULL;
    if (*p++ != '[') return;
    for (;;) {
        p += strspn(p, " \t\r\n,");
        if (*p != '{') break;
        const char *ve = value_end(p);
        if (!ve) break;
        last = p = ve;
    }
    if (!last) return;
    size_t n = (size_t)(last - x->call);
    char *t = malloc(n + 2);
    if (!t) return;
    memcpy(t, x->call, n);
    memcpy(t + n, "]", 2);
    chat_tool_call got[SRVX_MAX_CALLS] = {{0}};
    int k = chat_tool_parse_body(x->syn, t, n + 1, x->tools, got, SRVX_MAX_CALLS - x->n_calls);
    free(t);
    for (int i = 0; i < k; i++) {
        x->calls[x->n_calls].name = got[i].name;
        x->calls[x->n_calls++].arguments = got[i].arguments;
    }
}

static void salvage_call(srvx *x) {
    if (!x->call || x->n_calls >= SRVX_MAX_CALLS) return;
    if (x->syn->kind == CHAT_CALLS_JSON_ARRAY) {
        salvage_array(x);
        return;
    }
    if (x->syn->kind != CHAT_CALLS_JSON_OBJECT) return;
    char *name = NULL, *args = NULL;
    const char *p = x->call + strspn(x->call, " \t\r\n");
    if (*p++ != '{') return;
    while (*p) {
        p += strspn(p, " \t\r\n,");
        if (*p != '"') break;
        const char *ke = str_end(p);
        if (!ke) break;
        int is_name = ke - p == 6 && !strncmp(p, "\"name\"", 6), is_args = ke - p == 11 && !strncmp(p, "\"arguments\"", 11);
        p = ke + strspn(ke, " \t\r\n");
        if (*p++ != ':') break;
        p += strspn(p, " \t\r\n");
        const char *ve = value_end(p);
        if (is_name && ve && *p == '"') {
            cJSON *v = cJSON_ParseWithLength(p, (size_t)(ve - p));
            if (cJSON_IsString(v)) name = strdup(v->valuestring);
            cJSON_Delete(v);
        } else if (is_args) {
            args = strndup(p, ve ? (size_t)(ve - p) : strlen(p));
        }
        if (!ve) break;
        p = ve;
    }
    if (name && !args) args = strdup("");
    if (name && args) {
        x->calls[x->n_calls].name = name;
        x->calls[x->n_calls++].arguments = args;
        x->call_partial = 1;
    } else {
        free(name);
        free(args);
    }
}

int srvx_template_has_tools(const cinfer_model *m) { return template_syntax(m) != NULL; }

/* A 9-character alphanumeric id for id (FNV-1a 64, base 62); kept when it is one. */
static void mistral_id(const char *id, char out[10]) {
    size_t n = strlen(id);
    int ok = n == 9;
    for (size_t i = 0; ok && i < n; i++) ok = isalnum((unsigned char)id[i]);
    if (ok) {
        memcpy(out, id, 10);
        return;
    }
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
    for (int i = 0; i < 9; i++, h /= 62) out[i] = digits[h % 62];
    out[9] = 0;
}

static int fit_id(cJSON *o, const char *key) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) return 0;
    char id[10];
    mistral_id(v->valuestring, id);
    return cJSON_SetValuestring(v, id) ? 0 : -1;
}

int srvx_fit_template(const cinfer_model *m, const srvx *x, cJSON *messages, char **vars) {
    cinfer_model_info in;
    cinfer_model_get_info(m, &in);
    const chat_family fam = in.chat_template ? chat_detect_family(in.chat_template) : CHAT_FAMILY_UNKNOWN;
    return srvx_fit_family(fam, x ? x->tools : NULL, messages, vars);
}

int srvx_fit_family(chat_family fam, const cJSON *tools, cJSON *messages, char **vars) {
    if (fam == CHAT_FAMILY_MISTRAL3) {
        cJSON *msg;
        cJSON_ArrayForEach(msg, messages) {
            cJSON *tc;
            cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"))
                if (fit_id(tc, "id")) return -1;
            if (fit_id(msg, "tool_call_id")) return -1;
        }
    }
    if (fam == CHAT_FAMILY_SMOLLM3 && tools) {
        cJSON *v = *vars ? cJSON_Parse(*vars) : cJSON_CreateObject();
        if (!v) return -1;
        cJSON_DeleteItemFromObjectCaseSensitive(v, "xml_tools");
        cJSON_AddItemToObject(v, "xml_tools", cJSON_Duplicate(tools, 1));
        char *t = cJSON_PrintUnformatted(v);
        cJSON_Delete(v);
        if (!t) return -1;
        free(*vars);
        *vars = t;
    }
    return 0;
}

/* Append extra[0..n_extra) to the session's history (prompt and everything
 * generated) as the next generation's prompt: ids malloc'd into *out. */
static int history_plus(cinfer_session *sess, const int32_t *extra, int n_extra, int32_t **out, size_t *n_out) {
    int n_past = cinfer_session_n_past(sess);
    *out = malloc(((size_t)n_past + (size_t)n_extra + 1) * sizeof **out);
    if (!*out) return CINFER_ENOMEM;
    memcpy(*out, cinfer_session_tokens(sess), (size_t)n_past * sizeof **out);
    if (n_extra) memcpy(*out + n_past, extra, (size_t)n_extra * sizeof **out);
    *n_out = (size_t)n_past + (size_t)n_extra;
    return 0;
}

/* One generation pass of a call: after base[0..n_base) (NULL: the session's
 * history) + extra, under grammar g (NULL: free), at most limit tokens (0:
 * what max_tokens leaves).  Counts are added to res. */
static int gen_pass(cinfer_session *sess, srvx *x, cinfer_gen_options o, const int32_t *base, size_t n_base,
                    const int32_t *extra, int n_extra, const cinfer_grammar *g, int limit, const cinfer_gen_options *go,
                    cinfer_token_cb cb, void *user, cinfer_gen_result *res, char *err, size_t err_len) {
    int left = go->max_tokens ? go->max_tokens - res->n_generated : 0;
    if (go->max_tokens && left <= 0) {
        res->stop = CINFER_STOP_MAX_TOKENS;
        return 0;
    }
    if (limit > 0 && (!left || limit < left)) left = limit;
    int32_t *buf;
    size_t n;
    if (base) {
        n = n_base + (size_t)n_extra;
        buf = malloc((n + 1) * sizeof *buf);
        if (buf) {
            memcpy(buf, base, n_base * sizeof *buf);
            if (n_extra) memcpy(buf + n_base, extra, (size_t)n_extra * sizeof *buf);
        }
    } else if (history_plus(sess, extra, n_extra, &buf, &n))
        buf = NULL;
    if (!buf) {
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    o.grammar = g;
    o.stop = NULL; /* stop strings do not cut a call */
    o.n_stop = 0;
    o.max_tokens = left;
    x->phase = 1;
    cinfer_gen_result r = {0};
    int rc = cinfer_generate_tokens(sess, buf, n, &o, cb, user, &r, err, err_len);
    free(buf);
    if (base) { /* the request's first pass: its prompt counts and timings */
        *res = r;
        return rc;
    }
    res->n_generated += r.n_generated;
    res->stop = r.stop;
    res->gen_ms += r.prompt_ms + r.gen_ms;
    return rc;
}

/* Mistral: the grammar of the tool whose name x->call holds ("name[ARGS]",
 * "name[CALL_ID]id[ARGS]"), or NULL when it names none of the tools. */
static const cinfer_grammar *named_args_grammar(const srvx *x) {
    const char *c = x->call ? x->call : "", *e = strstr(c, "[CALL_ID]");
    if (!e) e = strstr(c, "[ARGS]");
    if (!e) return NULL;
    while (c < e && isspace((unsigned char)*c)) c++;
    while (e > c && isspace((unsigned char)e[-1])) e--;
    for (int i = 0; i < x->n_arg; i++)
        if (strlen(x->arg_name[i]) == (size_t)(e - c) && !memcmp(x->arg_name[i], c, (size_t)(e - c))) return x->arg_gram[i];
    return NULL;
}

/* One call (block) after the opener: the JSON syntaxes under the call
 * grammar; Mistral's name up to [ARGS] (at most 64 tokens, restricted to the
 * tools' names: mask_call_name), then its arguments under that tool's
 * grammar; the free-form syntaxes without a grammar until the model ends its
 * turn (parsed afterwards). */
static int call_pass(cinfer_session *sess, srvx *x, cinfer_gen_options o, const int32_t *base, size_t n_base,
                     const int32_t *extra, int n_extra, const cinfer_gen_options *go, cinfer_token_cb cb, void *user,
                     cinfer_gen_result *res, char *err, size_t err_len) {
    switch (x->syn->kind) {
    case CHAT_CALLS_NAME_ARGS: {
        x->name_phase = 1;
        int rc = gen_pass(sess, x, o, base, n_base, extra, n_extra, NULL, 64, go, cb, user, res, err, err_len);
        x->name_phase = 0;
        if (rc || res->stop != CINFER_STOP_CALLBACK) return rc; /* no [ARGS]: the call does not parse */
        const cinfer_grammar *g = named_args_grammar(x);
        if (!g) return 0;
        return gen_pass(sess, x, o, NULL, 0, NULL, 0, g, 0, go, cb, user, res, err, err_len);
    }
    case CHAT_CALLS_GEMMA4:
    case CHAT_CALLS_ARG_KEYS:
    case CHAT_CALLS_XML_PARAMS:
        return gen_pass(sess, x, o, base, n_base, extra, n_extra, NULL, 0, go, cb, user, res, err, err_len);
    default:
        return gen_pass(sess, x, o, base, n_base, extra, n_extra, x->call_gram, 0, go, cb, user, res, err, err_len);
    }
}

/* After a call: does the model open another?  The syntax's text between two
 * blocks ("\n</tool_call>\n"; Mistral: none) is appended and evaluated;
 * another call follows when the trigger token is then the most likely
 * (after logit_bias and penalties) — the greedy choice, as the grammar of
 * llama.cpp's parallel calls leaves it to the model.  1: yes, 0: no (also
 * for the syntaxes whose one block holds every call), < 0: error. */
static int another_call(cinfer_session *sess, srvx *x, char *err, size_t err_len) {
    if (x->trigger_id < 0 || x->n_closer < 0) return 0;
    int32_t *buf;
    size_t n;
    if (history_plus(sess, x->closer, x->n_closer, &buf, &n)) return CINFER_ENOMEM;
    int rc = cinfer_eval(sess, buf, n, err, err_len);
    free(buf);
    if (rc) return rc;
    int nv = cinfer_model_n_vocab(x->m);
    float *lg = malloc((size_t)nv * sizeof *lg);
    if (!lg) return CINFER_ENOMEM;
    memcpy(lg, cinfer_logits(sess), (size_t)nv * sizeof *lg);
    int lp = x->logprobs;
    x->logprobs = 0; /* a decision, not a token: no logprob entry */
    x_logits(lg, nv, cinfer_session_tokens(sess), cinfer_session_n_past(sess), x);
    x->logprobs = lp;
    int best = 0;
    for (int i = 1; i < nv; i++)
        if (lg[i] > lg[best]) best = i;
    free(lg);
    return best == x->trigger_id;
}

int srvx_generate(cinfer_session *sess, srvx *x, const int32_t *ids, size_t n_ids, const cinfer_gen_options *go,
                  cinfer_token_cb cb, void *user, cinfer_gen_result *res, char *err, size_t err_len) {
    if (!x) return cinfer_generate_tokens(sess, ids, n_ids, go, cb, user, res, err, err_len);
    cinfer_gen_options o = *go;
    if (x->logprobs || x->freq_pen != 0 || x->pres_pen != 0 || x->n_bias ||
        (x->syn && x->syn->kind == CHAT_CALLS_NAME_ARGS)) {
        o.logit_fn = x_logits;
        o.logit_user = x;
    }
    if (x->fmt_gram) o.grammar = x->fmt_gram;
    int rc;
    memset(res, 0, sizeof *res);
    if (x->tool_mode == SRVX_TOOLS_REQUIRED) {
        /* the opener goes into the prompt; the call follows it from the first token */
        x->n_prompt = (int)n_ids + x->n_opener;
        rc = call_pass(sess, x, o, ids, n_ids, x->opener, x->n_opener, go, cb, user, res, err, err_len);
    } else {
        x->n_prompt = (int)n_ids;
        rc = cinfer_generate_tokens(sess, ids, n_ids, &o, cb, user, res, err, err_len);
        /* auto: the trigger token was sampled; the call follows (the opener's rest appended) */
        if (!rc && x->triggered && res->stop == CINFER_STOP_CALLBACK)
            rc = call_pass(sess, x, o, NULL, 0, x->opener + 1, x->n_opener - 1, go, cb, user, res, err, err_len);
    }
    /* each complete call: parse it; where blocks hold one call each, another may follow */
    const int grammar_done = x->syn && x->syn->kind != CHAT_CALLS_GEMMA4 && x->syn->kind != CHAT_CALLS_ARG_KEYS &&
                             x->syn->kind != CHAT_CALLS_XML_PARAMS;
    while (!rc && x->phase == 1) {
        parse_call(x);
        if (!grammar_done || res->stop != CINFER_STOP_GRAMMAR || x->call_broken ||
            x->n_calls >= (x->parallel ? SRVX_MAX_CALLS : 1))
            break;
        int more = another_call(sess, x, err, err_len);
        if (more < 0) rc = more;
        if (more <= 0) break;
        rc = call_pass(sess, x, o, NULL, 0, x->opener, x->n_opener, go, cb, user, res, err, err_len);
    }
    if (!rc && x->call_broken) salvage_call(x);
    return rc;
}

/* ---- output --------------------------------------------------------------------------- */

/* Token text: valid UTF-8 for JSON (invalid bytes → U+FFFD); raw bytes in *raw. */
static void token_text(const srvx *x, int32_t id, char *out, size_t cap, unsigned char *raw, size_t *n_raw) {
    char b[256];
    size_t n = 0;
    if (cinfer_detokenize(x->m, &id, 1, b, sizeof b, &n) || n >= sizeof b) n = 0;
    memcpy(raw, b, n);
    *n_raw = n;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap;) {
        unsigned char c = (unsigned char)b[i];
        int l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = l > 0 && i + (size_t)l <= n;
        for (int k = 1; ok && k < l; k++) ok = ((unsigned char)b[i + k] >> 6) == 2;
        if (ok) {
            memcpy(out + o, b + i, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
}

static cJSON *lp_token(const srvx *x, int32_t id, float logprob) {
    cJSON *o = cJSON_CreateObject();
    char t[512];
    unsigned char raw[256];
    size_t nr;
    token_text(x, id, t, sizeof t, raw, &nr);
    cJSON_AddStringToObject(o, "token", t);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON *by = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < nr; i++) cJSON_AddItemToArray(by, cJSON_CreateNumber(raw[i]));
    return o;
}

cJSON *srvx_logprobs_chat(const srvx *x, int from, int to) {
    cJSON *o = cJSON_CreateObject(), *c = cJSON_AddArrayToObject(o, "content");
    for (int i = from; i < to && i < x->n_lp; i++) {
        const srvx_lp *e = &x->lp[i];
        cJSON *t = lp_token(x, e->id, e->logprob), *tl = cJSON_AddArrayToObject(t, "top_logprobs");
        for (int k = 0; k < e->n_top && k < x->top_logprobs; k++)
            cJSON_AddItemToArray(tl, lp_token(x, e->top[k].id, e->top[k].logprob));
        cJSON_AddItemToArray(c, t);
    }
    cJSON_AddNullToObject(o, "refusal");
    return o;
}

cJSON *srvx_logprobs_legacy(const srvx *x, int from, int to, size_t text_base) {
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs"),
          *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = text_base;
    for (int i = from; i < to && i < x->n_lp; i++) {
        const srvx_lp *e = &x->lp[i];
        char t[512];
        unsigned char raw[256];
        size_t nr;
        token_text(x, e->id, t, sizeof t, raw, &nr);
        cJSON_AddItemToArray(toks, cJSON_CreateString(t));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(e->logprob));
        cJSON *tp = cJSON_CreateObject();
        for (int k = 0; k < e->n_top && k < x->top_logprobs; k++) {
            char tt[512];
            token_text(x, e->top[k].id, tt, sizeof tt, raw, &nr);
            if (!cJSON_GetObjectItemCaseSensitive(tp, tt)) cJSON_AddNumberToObject(tp, tt, e->top[k].logprob);
        }
        cJSON_AddItemToArray(tops, tp);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        token_text(x, e->id, t, sizeof t, raw, &nr);
        off += nr;
    }
    return o;
}

void srvx_call_id(const srvx *x, const char *req_id, int i, char *out, size_t cap) {
    const char *tail = strchr(req_id, '-');
    tail = tail ? tail + 1 : strchr(req_id, '_') ? strchr(req_id, '_') + 1 : req_id;
    snprintf(out, cap, "%s%s%d", x->api == API_MSG ? "toolu_" : "call_", tail, i);
}
