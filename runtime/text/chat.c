/*
 * chat.c — chat templates: family detection and the render entry points over
 * the Jinja interpreter (runtime/text/jinja.c).  See chat.h.
 */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chat_template {
    jinja_template *jt;
    chat_family family;
    char *src; /* NUL-terminated copy */
    size_t len;
};

/* ---- family detection ------------------------------------------------------------ */

static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

/* Most specific markers first: several families share Llama 3 or ChatML turns
 * and differ only in how they write tool calls.  The markers follow
 * llama.cpp's common_chat_templates_apply (common/chat.cpp). */
chat_family chat_detect_family(const char *s) {
    if (!s) return CHAT_FAMILY_UNKNOWN;
    /* the issue-19 families first: their markers are unambiguous, and some of
     * them also carry older families' markers (<tool_call>, [TOOL_CALLS]) */
    if (has(s, "<|tool_call>")) return CHAT_FAMILY_GEMMA4;
    if (has(s, "<arg_key>")) return CHAT_FAMILY_GLM45;
    if (has(s, "<TOOLCALL>")) return CHAT_FAMILY_NEMOTRON;
    /* Seed-OSS writes Qwen3-Coder's blocks inside <seed:tool_call>, with Python-repr
     * values (lists as ['a', 'b']): not a syntax cinfer reads */
    if (has(s, "<seed:tool_call>")) return CHAT_FAMILY_UNKNOWN;
    if (has(s, "<function=") && has(s, "<parameter=")) return CHAT_FAMILY_QWEN3_CODER;
    if (has(s, "[|endofturn|]") && has(s, "<tool_call>")) return CHAT_FAMILY_EXAONE4;
    if (has(s, "[TOOL_CALLS]") && has(s, "[ARGS]")) return CHAT_FAMILY_MISTRAL3;
    if (has(s, "xml_tools") && has(s, "<tool_call>")) return CHAT_FAMILY_SMOLLM3;
    if (has(s, "<|START_ACTION|>") || has(s, "<|END_THINKING|>")) return CHAT_FAMILY_COMMAND_R7B;
    if (has(s, "<|START_OF_TURN_TOKEN|>")) return CHAT_FAMILY_COMMAND_R;
    if (has(s, "<｜tool▁calls▁begin｜>") || has(s, "<｜Assistant｜>"))
        return CHAT_FAMILY_DEEPSEEK_R1;
    if (has(s, ">>>all")) return CHAT_FAMILY_FUNCTIONARY_V3_2;
    if (has(s, " functools[")) return CHAT_FAMILY_FIREFUNCTION_V2;
    if (has(s, "<|start_header_id|>")) {
        if (has(s, "<function=")) return CHAT_FAMILY_FUNCTIONARY_V3_1;
        if (has(s, "ipython") || has(s, "<|python_tag|>") || has(s, "tool_call")) return CHAT_FAMILY_LLAMA3_TOOLS;
        if (!has(s, "<tool_call>")) return CHAT_FAMILY_LLAMA3;
    }
    if (has(s, "[TOOL_CALLS]")) return CHAT_FAMILY_MISTRAL_NEMO;
    if (has(s, "<tool_call>")) return has(s, "<think>") ? CHAT_FAMILY_QWEN3 : CHAT_FAMILY_HERMES;
    if (has(s, "<|im_start|>")) return CHAT_FAMILY_CHATML;
    if (has(s, "<start_of_turn>")) return CHAT_FAMILY_GEMMA;
    if (has(s, "<|start_of_role|>")) return CHAT_FAMILY_GRANITE;
    if (has(s, "<|assistant|>") && has(s, "<|end|>")) return CHAT_FAMILY_PHI3;
    if (has(s, "[INST]")) return CHAT_FAMILY_MISTRAL;
    return CHAT_FAMILY_UNKNOWN;
}

static const char *const k_family_names[CHAT_FAMILY_COUNT_] = {
    [CHAT_FAMILY_UNKNOWN] = "unknown",
    [CHAT_FAMILY_CHATML] = "chatml",
    [CHAT_FAMILY_HERMES] = "hermes",
    [CHAT_FAMILY_QWEN3] = "qwen3",
    [CHAT_FAMILY_LLAMA3] = "llama3",
    [CHAT_FAMILY_LLAMA3_TOOLS] = "llama3-tools",
    [CHAT_FAMILY_FUNCTIONARY_V3_1] = "functionary-v3.1",
    [CHAT_FAMILY_FUNCTIONARY_V3_2] = "functionary-v3.2",
    [CHAT_FAMILY_FIREFUNCTION_V2] = "firefunction-v2",
    [CHAT_FAMILY_MISTRAL] = "mistral",
    [CHAT_FAMILY_MISTRAL_NEMO] = "mistral-nemo",
    [CHAT_FAMILY_GEMMA] = "gemma",
    [CHAT_FAMILY_PHI3] = "phi3",
    [CHAT_FAMILY_GRANITE] = "granite",
    [CHAT_FAMILY_DEEPSEEK_R1] = "deepseek-r1",
    [CHAT_FAMILY_COMMAND_R] = "command-r",
    [CHAT_FAMILY_COMMAND_R7B] = "command-r7b",
    [CHAT_FAMILY_GEMMA4] = "gemma4",
    [CHAT_FAMILY_MISTRAL3] = "mistral3",
    [CHAT_FAMILY_GLM45] = "glm4.5",
    [CHAT_FAMILY_NEMOTRON] = "nemotron",
    [CHAT_FAMILY_QWEN3_CODER] = "qwen3-coder",
    [CHAT_FAMILY_EXAONE4] = "exaone4",
    [CHAT_FAMILY_SMOLLM3] = "smollm3",
};

const char *chat_family_name(chat_family f) {
    if ((unsigned)f >= CHAT_FAMILY_COUNT_ || !k_family_names[f]) return "unknown";
    return k_family_names[f];
}

/* ---- templates ---------------------------------------------------------------------- */

int chat_template_parse(const char *src, size_t len, chat_template **out, char *err, size_t err_len) {
    *out = NULL;
    chat_template *t = calloc(1, sizeof *t);
    char *copy = malloc(len + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        if (err && err_len) snprintf(err, err_len, "chat: out of memory");
        return JINJA_ERR_NOMEM;
    }
    if (len) memcpy(copy, src, len);
    copy[len] = 0;
    int rc = jinja_parse(copy, len, &t->jt, err, err_len);
    if (rc) {
        free(copy);
        free(t);
        return rc;
    }
    t->src = copy;
    t->len = len;
    /* a NUL inside the source ends detection early, never the parse */
    t->family = chat_detect_family(copy);
    *out = t;
    return 0;
}

int chat_template_from_gguf(const gguf_file *g, chat_template **out, char *err, size_t err_len) {
    gguf_str s;
    *out = NULL;
    int rc = gguf_get_str(g, "tokenizer.chat_template", &s, err, err_len);
    if (rc) return rc;
    return chat_template_parse(s.ptr, (size_t)s.len, out, err, err_len);
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    jinja_free(t->jt);
    free(t->src);
    free(t);
}

chat_family chat_template_family(const chat_template *t) { return t->family; }

const char *chat_template_source(const chat_template *t, size_t *len) {
    if (len) *len = t->len;
    return t->src;
}

int chat_template_render(const chat_template *t, const cJSON *context, const jinja_render_opts *opts, char **out,
                         size_t *out_len, char *err, size_t err_len) {
    return jinja_render(t->jt, context, opts, out, out_len, err, err_len);
}

int chat_template_render_json(const chat_template *t, const char *context_json, size_t len,
                              const jinja_render_opts *opts, char **out, size_t *out_len, char *err, size_t err_len) {
    return jinja_render_json(t->jt, context_json, len, opts, out, out_len, err, err_len);
}

int chat_render(const char *template_src, const cJSON *context, char **out, size_t *out_len, char *err,
                size_t err_len) {
    chat_template *t;
    *out = NULL;
    int rc = chat_template_parse(template_src, strlen(template_src), &t, err, err_len);
    if (rc) return rc;
    rc = chat_template_render(t, context, NULL, out, out_len, err, err_len);
    chat_template_free(t);
    return rc;
}

cJSON *chat_context_new(const cJSON *messages, const cJSON *tools, bool add_generation_prompt, const char *bos_token,
                        const char *eos_token) {
    cJSON *c = cJSON_CreateObject();
    if (!c) return NULL;
    cJSON *m = messages ? cJSON_Duplicate(messages, 1) : cJSON_CreateArray();
    cJSON *tl = tools ? cJSON_Duplicate(tools, 1) : cJSON_CreateNull();
    bool ok = m && tl;
    if (m) ok &= cJSON_AddItemToObject(c, "messages", m);
    if (tl) ok &= cJSON_AddItemToObject(c, "tools", tl);
    ok &= cJSON_AddNullToObject(c, "documents") != NULL;
    ok &= cJSON_AddBoolToObject(c, "add_generation_prompt", add_generation_prompt) != NULL;
    if (bos_token) ok &= cJSON_AddStringToObject(c, "bos_token", bos_token) != NULL;
    if (eos_token) ok &= cJSON_AddStringToObject(c, "eos_token", eos_token) != NULL;
    if (!ok) {
        cJSON_Delete(c);
        return NULL;
    }
    return c;
}
