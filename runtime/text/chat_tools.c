/*
 * chat_tools.c — the tool-call syntaxes of the chat-template families and
 * their parsers (chat_tools.h).
 *
 * Every parser turns one block body into calls {name, arguments} where
 * arguments is the compact text of a JSON object; what is not the syntax is
 * -1, never a guess.  The non-JSON syntaxes are read like llama.cpp's parsers
 * of the same formats (common/chat.cpp, chat-peg-parser.cpp): Gemma 4's
 * key:value objects with <|"|>-quoted strings, GLM's <arg_key>/<arg_value>
 * pairs, Qwen3-Coder's <parameter=k> blocks, whose values are typed by the
 * tool's JSON Schema when the request gives one.
 */
#include "chat_tools.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- the syntaxes ---------------------------------------------------------------------- */

static const chat_tool_syntax SYNTAXES[] = {
    {CHAT_FAMILY_HERMES, CHAT_CALLS_JSON_OBJECT, "<tool_call>", "<tool_call>\n", "\n</tool_call>", "\n", "name",
     "arguments", NULL, "<tool_call>\n{\"name\": \"probe_fn\""},
    {CHAT_FAMILY_QWEN3, CHAT_CALLS_JSON_OBJECT, "<tool_call>", "<tool_call>\n", "\n</tool_call>", "\n", "name",
     "arguments", NULL, "<tool_call>\n{\"name\": \"probe_fn\""},
    /* SmolLM3 renders no assistant calls; its tool instructions ask for Hermes' */
    {CHAT_FAMILY_SMOLLM3, CHAT_CALLS_JSON_OBJECT, "<tool_call>", "<tool_call>\n", "\n</tool_call>", "\n", "name",
     "arguments", NULL, "<tool_call>\n{\"name\": <function-name>"},
    {CHAT_FAMILY_EXAONE4, CHAT_CALLS_JSON_OBJECT, "<tool_call>", "<tool_call>", "</tool_call>", "\n", "name",
     "arguments", NULL, "<tool_call>{\"name\": \"probe_fn\""},
    {CHAT_FAMILY_NEMOTRON, CHAT_CALLS_JSON_ARRAY, "<TOOLCALL>", "<TOOLCALL>", "</TOOLCALL>", "", "name", "arguments",
     NULL, "<TOOLCALL>[{\"name\": \"probe_fn\""},
    {CHAT_FAMILY_COMMAND_R7B, CHAT_CALLS_JSON_ARRAY, "<|START_ACTION|>", "<|START_ACTION|>", "<|END_ACTION|>", "",
     "tool_name", "parameters", "tool_call_id", "\"tool_name\": \"probe_fn\""},
    /* Command R(+): a plain-text "Action:" and a fenced JSON list (no special token: a
     * forced or named call only, see srv_tools.c) */
    {CHAT_FAMILY_COMMAND_R, CHAT_CALLS_JSON_ARRAY, "Action:", "Action:\n```json\n", "```", "", "tool_name",
     "parameters", NULL, "\"tool_name\": \"probe_fn\""},
    {CHAT_FAMILY_MISTRAL3, CHAT_CALLS_NAME_ARGS, "[TOOL_CALLS]", "[TOOL_CALLS]", "", "", NULL, NULL, NULL,
     "[TOOL_CALLS]probe_fn["},
    {CHAT_FAMILY_GEMMA4, CHAT_CALLS_GEMMA4, "<|tool_call>", "<|tool_call>call:", "<tool_call|>", "", NULL, NULL, NULL,
     "<|tool_call>call:probe_fn{"},
    {CHAT_FAMILY_GLM45, CHAT_CALLS_ARG_KEYS, "<tool_call>", "<tool_call>", "</tool_call>", "\n", NULL, NULL, NULL,
     "<tool_call>probe_fn"},
    {CHAT_FAMILY_QWEN3_CODER, CHAT_CALLS_XML_PARAMS, "<tool_call>", "<tool_call>\n<function=",
     "</function>\n</tool_call>", "\n", NULL, NULL, NULL, "<tool_call>\n<function=probe_fn>"},
};

const chat_tool_syntax *chat_tool_syntax_for(chat_family f) {
    for (size_t i = 0; i < sizeof SYNTAXES / sizeof *SYNTAXES; i++)
        if (SYNTAXES[i].family == f) return &SYNTAXES[i];
    return NULL;
}

void chat_tool_calls_free(chat_tool_call *calls, int n) {
    for (int i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}

/* ---- helpers ----------------------------------------------------------------------------- */

typedef struct {
    const char *p, *e;
} span;

static void skip_ws(span *s) {
    while (s->p < s->e && isspace((unsigned char)*s->p)) s->p++;
}

static bool starts(const span *s, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(s->e - s->p) >= n && !memcmp(s->p, lit, n);
}

static const char *find(const char *p, const char *e, const char *lit) {
    size_t n = strlen(lit);
    for (; p + n <= e; p++)
        if (!memcmp(p, lit, n)) return p;
    return NULL;
}

static char *dup_trim(const char *p, const char *e) {
    while (p < e && isspace((unsigned char)*p)) p++;
    while (e > p && isspace((unsigned char)e[-1])) e--;
    char *s = malloc((size_t)(e - p) + 1);
    if (s) {
        memcpy(s, p, (size_t)(e - p));
        s[e - p] = 0;
    }
    return s;
}

/* The JSON Schema "type" of parameter `key` of tool `name` in tools, or NULL. */
static const char *param_type(const cJSON *tools, const char *name, const char *key) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name)) continue;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"),
                                                              "properties");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
        return cJSON_IsString(ty) ? ty->valuestring : NULL;
    }
    return NULL;
}

/* A value given as text (GLM's and Qwen3-Coder's parameters): a string
 * parameter keeps it; a boolean reads Python's True/False too; any other
 * type, or no schema, reads JSON and falls back to the string. */
static cJSON *typed_value(const char *text, size_t n, const char *type) {
    char *t = malloc(n + 1);
    if (!t) return NULL;
    memcpy(t, text, n);
    t[n] = 0;
    cJSON *v = NULL;
    if (!type || strcmp(type, "string")) {
        if (type && !strcmp(type, "boolean") && (!strcmp(t, "True") || !strcmp(t, "False")))
            v = cJSON_CreateBool(t[0] == 'T');
        else {
            const char *end = NULL;
            v = cJSON_ParseWithLengthOpts(t, n, &end, 0);
            if (v && end != t + n) {
                cJSON_Delete(v);
                v = NULL;
            }
        }
    }
    if (!v) v = cJSON_CreateString(t);
    free(t);
    return v;
}

/* Move name and args (a JSON object) into *c; 0, or -2 out of memory. */
static int emit(chat_tool_call *c, char *name, cJSON *args) {
    c->arguments = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    c->name = name;
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        c->name = c->arguments = NULL;
        return -2;
    }
    return 0;
}

/* A JSON call object's name and arguments (an object, or the text of one). */
static int json_call(const chat_tool_syntax *s, const cJSON *o, chat_tool_call *c) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, s->name_key);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, s->args_key);
    if (!cJSON_IsObject(o) || !cJSON_IsString(n) || !n->valuestring[0]) return -1;
    cJSON *args = NULL;
    if (!a || cJSON_IsNull(a)) args = cJSON_CreateObject();
    else if (cJSON_IsObject(a)) args = cJSON_Duplicate(a, 1);
    else if (cJSON_IsString(a)) {
        args = cJSON_Parse(a->valuestring);
        if (!cJSON_IsObject(args)) {
            cJSON_Delete(args);
            return -1;
        }
    } else
        return -1;
    return emit(c, strdup(n->valuestring), args);
}

/* ---- Gemma 4: name{key:value,...}, strings between <|"|> ------------------------------------- */

#define GQ "<|\"|>"

static cJSON *g4_value(span *s, int depth);

static cJSON *g4_object(span *s, int depth) {
    cJSON *o = cJSON_CreateObject();
    s->p++; /* { */
    skip_ws(s);
    if (s->p < s->e && *s->p == '}') {
        s->p++;
        return o;
    }
    while (o) {
        skip_ws(s);
        char *key;
        if (starts(s, GQ)) { /* an escaped key */
            const char *k0 = s->p + 5, *k1 = find(k0, s->e, GQ);
            if (!k1) break;
            key = strndup(k0, (size_t)(k1 - k0));
            s->p = k1 + 5;
        } else {
            const char *k0 = s->p;
            while (s->p < s->e && *s->p != ':' && *s->p != '}' && *s->p != ',') s->p++;
            if (s->p == k0) break;
            key = dup_trim(k0, s->p);
        }
        skip_ws(s);
        if (!key || s->p >= s->e || *s->p != ':') {
            free(key);
            break;
        }
        s->p++;
        cJSON *v = g4_value(s, depth + 1);
        if (!v) {
            free(key);
            break;
        }
        cJSON_AddItemToObject(o, key, v);
        free(key);
        skip_ws(s);
        if (s->p < s->e && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->e && *s->p == '}') {
            s->p++;
            return o;
        }
        break;
    }
    cJSON_Delete(o);
    return NULL;
}

static cJSON *g4_value(span *s, int depth) {
    if (depth > 64) return NULL;
    skip_ws(s);
    if (s->p >= s->e) return NULL;
    if (starts(s, GQ)) {
        const char *v0 = s->p + 5, *v1 = find(v0, s->e, GQ);
        if (!v1) return NULL;
        char *t = strndup(v0, (size_t)(v1 - v0));
        cJSON *v = t ? cJSON_CreateString(t) : NULL;
        free(t);
        s->p = v1 + 5;
        return v;
    }
    if (*s->p == '{') return g4_object(s, depth);
    if (*s->p == '[') {
        cJSON *a = cJSON_CreateArray();
        s->p++;
        skip_ws(s);
        if (s->p < s->e && *s->p == ']') {
            s->p++;
            return a;
        }
        while (a) {
            cJSON *v = g4_value(s, depth + 1);
            if (!v) break;
            cJSON_AddItemToArray(a, v);
            skip_ws(s);
            if (s->p < s->e && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->e && *s->p == ']') {
                s->p++;
                return a;
            }
            break;
        }
        cJSON_Delete(a);
        return NULL;
    }
    /* a bare scalar: JSON's true/false/null/number, else text */
    const char *v0 = s->p;
    while (s->p < s->e && *s->p != ',' && *s->p != '}' && *s->p != ']') s->p++;
    const char *v1 = s->p;
    while (v1 > v0 && isspace((unsigned char)v1[-1])) v1--;
    if (v1 == v0) return NULL;
    return typed_value(v0, (size_t)(v1 - v0), NULL);
}

static int parse_gemma4(span s, chat_tool_call *c) {
    skip_ws(&s);
    const char *n0 = s.p;
    while (s.p < s.e && *s.p != '{') s.p++;
    if (s.p == s.e || s.p == n0) return -1;
    char *name = dup_trim(n0, s.p);
    cJSON *args = g4_object(&s, 0);
    skip_ws(&s);
    if (!name || !name[0] || !args || s.p != s.e) {
        free(name);
        cJSON_Delete(args);
        return -1;
    }
    return emit(c, name, args);
}

/* ---- GLM: name <arg_key>k</arg_key> <arg_value>v</arg_value> ... ------------------------------- */

static int parse_arg_keys(span s, const cJSON *tools, chat_tool_call *c) {
    const char *k = find(s.p, s.e, "<arg_key>");
    char *name = dup_trim(s.p, k ? k : s.e);
    cJSON *args = cJSON_CreateObject();
    if (!name || !args || !name[0] || strchr(name, '<')) goto bad;
    while (k) {
        const char *k0 = k + 9, *k1 = find(k0, s.e, "</arg_key>");
        if (!k1) goto bad;
        span r = {k1 + 10, s.e};
        skip_ws(&r);
        if (!starts(&r, "<arg_value>")) goto bad;
        const char *v0 = r.p + 11, *v1 = find(v0, s.e, "</arg_value>");
        if (!v1) goto bad;
        char *key = dup_trim(k0, k1);
        cJSON *v = key ? typed_value(v0, (size_t)(v1 - v0), param_type(tools, name, key)) : NULL;
        if (!v) {
            free(key);
            goto bad;
        }
        cJSON_AddItemToObject(args, key, v);
        free(key);
        r.p = v1 + 12;
        skip_ws(&r);
        if (r.p == r.e) break;
        if (!starts(&r, "<arg_key>")) goto bad;
        k = r.p;
    }
    return emit(c, name, args);
bad:
    free(name);
    cJSON_Delete(args);
    return -1;
}

/* ---- Qwen3-Coder: name>\n<parameter=k>\nv\n</parameter> ... ----------------------------------- */

static int parse_xml_params(span s, const cJSON *tools, chat_tool_call *c) {
    const char *gt = memchr(s.p, '>', (size_t)(s.e - s.p));
    if (!gt) return -1;
    char *name = dup_trim(s.p, gt);
    cJSON *args = cJSON_CreateObject();
    span r = {gt + 1, s.e};
    if (!name || !args || !name[0] || strchr(name, '<')) goto bad;
    for (;;) {
        skip_ws(&r);
        if (r.p == r.e) break;
        if (!starts(&r, "<parameter=")) goto bad;
        const char *k0 = r.p + 11, *k1 = memchr(k0, '>', (size_t)(r.e - k0));
        if (!k1) goto bad;
        const char *v0 = k1 + 1, *v1 = find(v0, r.e, "</parameter>");
        if (!v1) goto bad;
        /* the template writes "\n" + value + "\n" */
        if (v0 < v1 && *v0 == '\n') v0++;
        if (v1 > v0 && v1[-1] == '\n') v1--;
        char *key = dup_trim(k0, k1);
        cJSON *v = key ? typed_value(v0, (size_t)(v1 - v0), param_type(tools, name, key)) : NULL;
        if (!v) {
            free(key);
            goto bad;
        }
        cJSON_AddItemToObject(args, key, v);
        free(key);
        r.p = find(v0, r.e, "</parameter>") + 12;
    }
    return emit(c, name, args);
bad:
    free(name);
    cJSON_Delete(args);
    return -1;
}

/* ---- Mistral 3: name[ARGS]{...} or name[CALL_ID]id[ARGS]{...} ---------------------------------- */

static int parse_name_args(span s, chat_tool_call *c) {
    const char *a = find(s.p, s.e, "[ARGS]");
    if (!a) return -1;
    const char *id = find(s.p, a, "[CALL_ID]");
    char *name = dup_trim(s.p, id ? id : a);
    const char *end = NULL;
    cJSON *args = cJSON_ParseWithLengthOpts(a + 6, (size_t)(s.e - (a + 6)), &end, 0);
    span rest = {end ? end : s.e, s.e};
    skip_ws(&rest);
    if (!name || !name[0] || strchr(name, '[') || !cJSON_IsObject(args) || rest.p != rest.e) {
        free(name);
        cJSON_Delete(args);
        return -1;
    }
    return emit(c, name, args);
}

/* ---- entry points ------------------------------------------------------------------------- */

int chat_tool_parse_body(const chat_tool_syntax *s, const char *body, size_t len, const cJSON *tools,
                         chat_tool_call *calls, int max) {
    if (!s || !body || max < 1) return -1;
    span sp = {body, body + len};
    int rc;
    switch (s->kind) {
    case CHAT_CALLS_JSON_OBJECT:
    case CHAT_CALLS_JSON_ARRAY: {
        cJSON *v = cJSON_ParseWithLength(body, len);
        if (!v) return -1;
        int n = 0;
        rc = 0;
        if (s->kind == CHAT_CALLS_JSON_OBJECT) rc = json_call(s, v, &calls[n++]);
        else if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) rc = -1;
        else {
            const cJSON *o;
            cJSON_ArrayForEach(o, v) {
                if (n == max || (rc = json_call(s, o, &calls[n])) < 0) break;
                n++;
            }
            if (!rc && n < cJSON_GetArraySize(v)) rc = -1; /* more calls than room: not silently dropped */
        }
        cJSON_Delete(v);
        if (rc < 0) {
            chat_tool_calls_free(calls, n - (s->kind == CHAT_CALLS_JSON_OBJECT));
            return rc;
        }
        return n;
    }
    case CHAT_CALLS_NAME_ARGS: rc = parse_name_args(sp, calls); break;
    case CHAT_CALLS_GEMMA4: rc = parse_gemma4(sp, calls); break;
    case CHAT_CALLS_ARG_KEYS: rc = parse_arg_keys(sp, tools, calls); break;
    case CHAT_CALLS_XML_PARAMS: rc = parse_xml_params(sp, tools, calls); break;
    default: return -1;
    }
    return rc < 0 ? rc : 1;
}

int chat_tool_split(const chat_tool_syntax *s, const char *text, size_t len, const cJSON *tools, size_t *content_len,
                    chat_tool_call *calls, int max, int *n_calls) {
    *n_calls = 0;
    const char *e = text + len, *t = find(text, e, s->trigger);
    *content_len = t ? (size_t)(t - text) : len;
    const size_t ol = strlen(s->opener), cl = strlen(s->closer);
    while (t) {
        if ((size_t)(e - t) < ol || memcmp(t, s->opener, ol)) return -1;
        const char *b0 = t + ol, *b1;
        if (cl) {
            b1 = find(b0, e, s->closer);
            if (!b1) return -1; /* an unclosed block */
        } else {
            b1 = find(b0, e, s->trigger); /* NAME_ARGS: the next block, or the end */
            if (!b1) b1 = e;
        }
        int n = chat_tool_parse_body(s, b0, (size_t)(b1 - b0), tools, calls + *n_calls, max - *n_calls);
        if (n < 0) return n;
        *n_calls += n;
        span r = {b1 + cl, e};
        skip_ws(&r);
        if (r.p == r.e) return 0;
        if (!starts(&r, s->trigger) || *n_calls == max) return -1;
        t = r.p;
    }
    return 0;
}
