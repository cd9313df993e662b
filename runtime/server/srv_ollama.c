/*
 * srv_ollama.c — see srv_ollama.h.  Field names, defaults and error texts
 * follow Ollama's docs/api.md and the npm `ollama` client's types
 * (tests/serve/ollama.mjs drives this file through that client).
 *
 * Sampling defaults are Ollama's (docs/modelfile.md): temperature 0.8,
 * top_k 40, top_p 0.9, min_p 0, repeat_penalty 1.1, repeat_last_n 64,
 * num_predict -1 (no limit but the context).  Options cinfer has no use for
 * (num_gpu, num_thread, mirostat, ...) are accepted and ignored, as Ollama
 * ignores options a model does not use; num_ctx cannot change the context
 * the server allocated at start, so it is ignored too (GET /api/ps says the
 * context length).
 */
#include "srv_ollama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int present(const cJSON *v) { return v && !cJSON_IsNull(v); }

const char *srvo_model_name(const char *name, char *buf, size_t cap) {
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ":latest")) n -= 7;
    snprintf(buf, cap, "%.*s", (int)n, name);
    return buf;
}

void srvo_req_free(srvo_req *q) {
    if (!q) return;
    free(q->context);
    q->context = NULL;
}

/* options -> the OpenAI/llama.cpp sampling fields of out.  0, or -1 with b. */
static int map_options(const cJSON *r, cJSON *out, bad_req *b) {
    const cJSON *o = get(r, "options");
    if (present(o) && !cJSON_IsObject(o)) return srv_bad(b, 400, "options", "'options' must be an object");
    static const struct {
        const char *ollama, *openai;
        double dflt;
    } num[] = {
        {"temperature", "temperature", 0.8}, {"top_k", "top_k", 40},       {"top_p", "top_p", 0.9},
        {"min_p", "min_p", 0},               {"seed", "seed", NAN},        {"repeat_penalty", "repeat_penalty", 1.1},
        {"repeat_last_n", "repeat_last_n", 64}, {"presence_penalty", "presence_penalty", NAN},
        {"frequency_penalty", "frequency_penalty", NAN},
    };
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        const cJSON *v = get(o, num[i].ollama);
        char p[64];
        snprintf(p, sizeof p, "options.%s", num[i].ollama);
        if (present(v) && !cJSON_IsNumber(v)) return srv_bad(b, 400, p, "'%s' must be a number", p);
        double d = present(v) ? v->valuedouble : num[i].dflt;
        /* Ollama: repeat_last_n 0 turns the penalty off, -1 means the whole context */
        if (!strcmp(num[i].ollama, "repeat_last_n") && d <= 0) {
            if (d == 0) {
                cJSON_ReplaceItemInObjectCaseSensitive(out, "repeat_penalty", cJSON_CreateNumber(1));
                continue;
            }
            d = 1 << 20;
        }
        if (!isnan(d)) cJSON_AddNumberToObject(out, num[i].openai, d);
    }
    const cJSON *np = get(o, "num_predict");
    if (present(np)) {
        if (!cJSON_IsNumber(np) || np->valuedouble != (double)(long long)np->valuedouble)
            return srv_bad(b, 400, "options.num_predict", "'options.num_predict' must be an integer");
        if (np->valuedouble > 0) cJSON_AddNumberToObject(out, "max_tokens", np->valuedouble);
        /* -1: no limit, -2: fill the context: both end at the context here */
    }
    const cJSON *st = get(o, "stop");
    if (present(st)) {
        if (!cJSON_IsArray(st) && !cJSON_IsString(st))
            return srv_bad(b, 400, "options.stop", "'options.stop' must be an array of strings");
        if (cJSON_GetArraySize(st) || cJSON_IsString(st)) cJSON_AddItemToObject(out, "stop", cJSON_Duplicate(st, 1));
    }
    return 0;
}

/* format: "json" or a JSON Schema object -> response_format. */
static int map_format(const cJSON *r, cJSON *out, bad_req *b) {
    const cJSON *f = get(r, "format");
    if (!present(f) || (cJSON_IsString(f) && !f->valuestring[0])) return 0;
    cJSON *rf = cJSON_CreateObject();
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json")) {
        cJSON_AddStringToObject(rf, "type", "json_object");
    } else if (cJSON_IsObject(f)) {
        cJSON_AddStringToObject(rf, "type", "json_schema");
        cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
        cJSON_AddStringToObject(js, "name", "format");
        cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(f, 1));
    } else {
        cJSON_Delete(rf);
        return srv_bad(b, 400, "format", "'format' must be \"json\" or a JSON Schema object");
    }
    cJSON_AddItemToObject(out, "response_format", rf);
    return 0;
}

/* think: true/false or "low"/"medium"/"high" -> enable_thinking. */
static int map_think(const cJSON *r, cJSON *out, srvo_req *q, bad_req *b) {
    const cJSON *t = get(r, "think");
    q->think = -1;
    if (!present(t)) return 0;
    if (cJSON_IsBool(t)) q->think = cJSON_IsTrue(t);
    else if (cJSON_IsString(t) && (!strcmp(t->valuestring, "low") || !strcmp(t->valuestring, "medium") ||
                                   !strcmp(t->valuestring, "high")))
        q->think = 1;
    else return srv_bad(b, 400, "think", "'think' must be true, false, \"low\", \"medium\" or \"high\"");
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(out, "chat_template_kwargs"), "enable_thinking", q->think);
    return 0;
}

static int no_images(const cJSON *o, const char *where, bad_req *b) {
    const cJSON *im = get(o, "images");
    if (present(im) && !(cJSON_IsArray(im) && !cJSON_GetArraySize(im)))
        return srv_bad(b, 400, where, "'%s': images are not supported (cinfer serves text models)", where);
    return 0;
}

/* Ollama messages -> OpenAI messages (tool calls get ids; a tool result names its call). */
static int map_messages(const cJSON *ms, cJSON *out, bad_req *b) {
    if (!cJSON_IsArray(ms)) return srv_bad(b, 400, "messages", "'messages' must be an array");
    cJSON *arr = cJSON_AddArrayToObject(out, "messages");
    int i = 0, n_calls = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        char p[64];
        snprintf(p, sizeof p, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return srv_bad(b, 400, p, "'%s' must be an object", p);
        if (no_images(m, p, b)) return -1;
        cJSON *o = cJSON_Duplicate(m, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "images");
        const cJSON *role = get(o, "role");
        if (!present(get(o, "content"))) cJSON_AddStringToObject(o, "content", "");
        const cJSON *th = get(o, "thinking");
        if (cJSON_IsString(th)) cJSON_AddStringToObject(o, "reasoning_content", th->valuestring);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "thinking");
        cJSON *tc = get(o, "tool_calls");
        if (cJSON_IsArray(tc)) {
            cJSON *c;
            cJSON_ArrayForEach(c, tc) {
                char id[32];
                snprintf(id, sizeof id, "call_%d", n_calls++);
                if (!get(c, "id")) cJSON_AddStringToObject(c, "id", id);
                if (!get(c, "type")) cJSON_AddStringToObject(c, "type", "function");
            }
        }
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "tool") && !get(o, "tool_call_id")) {
            /* Ollama names the tool (tool_name), not the call: the latest call of that name, else the latest */
            const cJSON *tn = get(o, "tool_name");
            char id[32];
            snprintf(id, sizeof id, "call_%d", n_calls ? n_calls - 1 : 0);
            cJSON_AddStringToObject(o, "tool_call_id", id);
            if (cJSON_IsString(tn)) cJSON_AddStringToObject(o, "name", tn->valuestring);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(o, "tool_name");
        cJSON_AddItemToArray(arr, o);
        i++;
    }
    return 0;
}

cJSON *srvo_request(int route, const cJSON *r, int n_vocab, srvo_req *q, bad_req *b) {
    memset(q, 0, sizeof *q);
    q->route = route;
    q->think = -1;
    if (!cJSON_IsObject(r)) {
        srv_bad(b, 400, NULL, "the request body must be a JSON object");
        return NULL;
    }
    const cJSON *model = get(r, "model");
    if (!present(model)) model = get(r, "name"); /* older clients */
    if (!cJSON_IsString(model) || !model->valuestring[0]) {
        srv_bad(b, 400, "model", "model is required");
        return NULL;
    }
    char name[256];
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "model", srvo_model_name(model->valuestring, name, sizeof name));
    if (route == SRVO_EMBED || route == SRVO_EMBEDDINGS) {
        q->legacy_embed = route == SRVO_EMBEDDINGS;
        const cJSON *in = get(r, route == SRVO_EMBED ? "input" : "prompt");
        if (!cJSON_IsString(in) && !cJSON_IsArray(in)) {
            srv_bad(b, 400, route == SRVO_EMBED ? "input" : "prompt", "%s must be a string%s",
                    route == SRVO_EMBED ? "input" : "prompt", route == SRVO_EMBED ? " or an array of strings" : "");
            goto fail;
        }
        cJSON_AddItemToObject(out, "input", cJSON_Duplicate(in, 1));
        const cJSON *dim = get(r, "dimensions");
        if (present(dim)) cJSON_AddItemToObject(out, "dimensions", cJSON_Duplicate(dim, 1));
        return out;
    }
    const cJSON *st = get(r, "stream");
    if (present(st) && !cJSON_IsBool(st)) {
        srv_bad(b, 400, "stream", "'stream' must be a boolean");
        goto fail;
    }
    q->stream = !cJSON_IsFalse(st); /* Ollama streams unless told not to */
    cJSON_AddBoolToObject(out, "stream", 0); /* srv.c streams in Ollama's own shape */
    const cJSON *ka = get(r, "keep_alive");
    q->unload = cJSON_IsNumber(ka) && ka->valuedouble == 0;
    if (map_options(r, out, b) || map_format(r, out, b) || map_think(r, out, q, b)) goto fail;
    const cJSON *lp = get(r, "logprobs"), *tl = get(r, "top_logprobs");
    if (present(lp)) cJSON_AddItemToObject(out, "logprobs", cJSON_Duplicate(lp, 1));
    if (present(tl)) cJSON_AddItemToObject(out, "top_logprobs", cJSON_Duplicate(tl, 1));
    if (route == SRVO_CHAT) {
        const cJSON *ms = get(r, "messages");
        if (!present(ms) || (cJSON_IsArray(ms) && !cJSON_GetArraySize(ms))) {
            q->load_only = 1; /* Ollama: a chat with no messages loads the model */
            return out;
        }
        if (map_messages(ms, out, b)) goto fail;
        const cJSON *tools = get(r, "tools");
        if (present(tools)) cJSON_AddItemToObject(out, "tools", cJSON_Duplicate(tools, 1));
        return out;
    }
    /* generate */
    if (no_images(r, "images", b)) goto fail;
    const cJSON *prompt = get(r, "prompt"), *sys = get(r, "system"), *suffix = get(r, "suffix"),
                *tmpl = get(r, "template"), *raw = get(r, "raw"), *ctx = get(r, "context");
    if (present(prompt) && !cJSON_IsString(prompt)) {
        srv_bad(b, 400, "prompt", "'prompt' must be a string");
        goto fail;
    }
    if (present(sys) && !cJSON_IsString(sys)) {
        srv_bad(b, 400, "system", "'system' must be a string");
        goto fail;
    }
    if (cJSON_IsString(suffix) && suffix->valuestring[0]) {
        srv_bad(b, 400, "suffix", "'suffix' (fill-in-the-middle) is not supported");
        goto fail;
    }
    if (cJSON_IsString(tmpl) && tmpl->valuestring[0]) {
        srv_bad(b, 400, "template", "'template' (a Go template) is not supported; the model's own chat template "
                                    "is used, or none with raw: true");
        goto fail;
    }
    if (present(raw) && !cJSON_IsBool(raw)) {
        srv_bad(b, 400, "raw", "'raw' must be a boolean");
        goto fail;
    }
    if (present(ctx)) {
        int n = cJSON_IsArray(ctx) ? cJSON_GetArraySize(ctx) : -1;
        if (n < 0) {
            srv_bad(b, 400, "context", "'context' must be an array of token ids");
            goto fail;
        }
        q->context = malloc(((size_t)n + 1) * sizeof *q->context);
        const cJSON *e;
        cJSON_ArrayForEach(e, ctx) {
            double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
            if (!(d >= 0 && d < n_vocab) || d != (double)(int32_t)d) {
                srv_bad(b, 400, "context", "'context[%d]' must be a token id in [0, %d)", q->n_context, n_vocab);
                goto fail;
            }
            q->context[q->n_context++] = (int32_t)d;
        }
    }
    const char *ptext = cJSON_IsString(prompt) ? prompt->valuestring : "";
    if (!ptext[0]) { /* Ollama: an empty prompt loads (or with keep_alive 0 unloads) the model */
        q->load_only = 1;
        return out;
    }
    if (cJSON_IsTrue(raw)) {
        cJSON_AddStringToObject(out, "prompt", ptext);
        /* completions' logprobs is the number of alternatives, not a boolean */
        const cJSON *lpv = get(out, "logprobs"), *tlv = get(out, "top_logprobs");
        if (cJSON_IsBool(lpv)) {
            double k = cJSON_IsNumber(tlv) ? tlv->valuedouble : 0;
            cJSON_DeleteItemFromObjectCaseSensitive(out, "logprobs");
            cJSON_DeleteItemFromObjectCaseSensitive(out, "top_logprobs");
            if (cJSON_IsTrue(lpv)) cJSON_AddNumberToObject(out, "logprobs", k > 5 ? 5 : k);
        }
        return out;
    }
    cJSON *ms = cJSON_AddArrayToObject(out, "messages"), *m;
    if (cJSON_IsString(sys) && sys->valuestring[0]) {
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", sys->valuestring);
        cJSON_AddItemToArray(ms, m);
    }
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", ptext);
    cJSON_AddItemToArray(ms, m);
    return out;
fail:
    cJSON_Delete(out);
    srvo_req_free(q);
    return NULL;
}

void srvo_timestamp(char *buf, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char d[32];
    strftime(d, sizeof d, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06ldZ", d, ts.tv_nsec / 1000);
}

static void add_strn(cJSON *o, const char *k, const char *s, size_t n) {
    char *t = strndup(s ? s : "", s ? n : 0);
    cJSON_AddStringToObject(o, k, t ? t : "");
    free(t);
}

cJSON *srvo_chunk(int route, const char *model, const char *content, size_t content_len, const char *thinking,
                  size_t thinking_len) {
    char ts[64];
    srvo_timestamp(ts, sizeof ts);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "created_at", ts);
    if (route == SRVO_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        add_strn(m, "content", content, content_len);
        if (thinking) add_strn(m, "thinking", thinking, thinking_len);
    } else {
        add_strn(o, "response", content, content_len);
        if (thinking) add_strn(o, "thinking", thinking, thinking_len);
    }
    cJSON_AddFalseToObject(o, "done");
    return o;
}

void srvo_final_fields(cJSON *o, const srvo_stats *st) {
    cJSON_ReplaceItemInObjectCaseSensitive(o, "done", cJSON_CreateTrue());
    cJSON_AddStringToObject(o, "done_reason", st->done_reason);
    cJSON_AddNumberToObject(o, "total_duration", floor(st->total_ms * 1e6));
    cJSON_AddNumberToObject(o, "load_duration", 0); /* models load at server start */
    cJSON_AddNumberToObject(o, "prompt_eval_count", st->n_prompt);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", floor(st->prompt_ms * 1e6));
    cJSON_AddNumberToObject(o, "eval_count", st->n_generated);
    cJSON_AddNumberToObject(o, "eval_duration", floor(st->gen_ms * 1e6));
}

cJSON *srvo_tool_calls(const srvx *x) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; x && i < x->n_calls; i++) {
        cJSON *c = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", x->calls[i].name);
        cJSON *args = cJSON_Parse(x->calls[i].arguments);
        if (!cJSON_IsObject(args)) {
            cJSON_Delete(args);
            args = cJSON_CreateObject();
        }
        cJSON_AddItemToObject(f, "arguments", args);
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

cJSON *srvo_logprobs(const srvx *x, int from, int to) {
    cJSON *oai = srvx_logprobs_chat(x, from, to), *out = cJSON_CreateArray(), *e;
    cJSON_ArrayForEach(e, get(oai, "content")) {
        cJSON *t = cJSON_CreateObject(), *tops = get(e, "top_logprobs"), *k;
        cJSON_AddItemToObject(t, "token", cJSON_Duplicate(get(e, "token"), 0));
        cJSON_AddItemToObject(t, "logprob", cJSON_Duplicate(get(e, "logprob"), 0));
        if (cJSON_GetArraySize(tops)) {
            cJSON *ta = cJSON_AddArrayToObject(t, "top_logprobs");
            cJSON_ArrayForEach(k, tops) {
                cJSON *tt = cJSON_CreateObject();
                cJSON_AddItemToObject(tt, "token", cJSON_Duplicate(get(k, "token"), 0));
                cJSON_AddItemToObject(tt, "logprob", cJSON_Duplicate(get(k, "logprob"), 0));
                cJSON_AddItemToArray(ta, tt);
            }
        }
        cJSON_AddItemToArray(out, t);
    }
    cJSON_Delete(oai);
    return out;
}

/* "9.8M", "1.5B": Ollama's parameter_size. */
static void param_size(uint64_t n, char *buf, size_t cap) {
    if (n >= 1000000000ull) snprintf(buf, cap, "%.1fB", n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, cap, "%.1fM", n / 1e6);
    else snprintf(buf, cap, "%.1fK", n / 1e3);
}

static void mtime_str(const char *path, char *buf, size_t cap) {
    struct stat st;
    struct tm tm;
    time_t t = path && !stat(path, &st) ? st.st_mtime : 0;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static cJSON *details(const cinfer_model *m, const cinfer_model_info *in) {
    cJSON *d = cJSON_CreateObject();
    char ps[32];
    param_size(in->n_params, ps, sizeof ps);
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "gguf");
    cJSON_AddStringToObject(d, "family", cinfer_model_arch(m));
    cJSON_AddItemToObject(d, "families", cJSON_CreateStringArray((const char *[]){cinfer_model_arch(m)}, 1));
    cJSON_AddStringToObject(d, "parameter_size", ps);
    cJSON_AddStringToObject(d, "quantization_level", in->file_type);
    return d;
}

cJSON *srvo_model_entry(const char *name, const cinfer_model *m, int n_ctx, int ps) {
    cinfer_model_info in;
    cinfer_model_get_info(m, &in);
    char full[300], when[64], digest[32];
    snprintf(full, sizeof full, "%s:latest", name);
    mtime_str(in.path, when, sizeof when);
    /* not Ollama's sha256 of the blob: cinfer's fingerprint of the header, metadata and tensor table */
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)in.fingerprint);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", full);
    cJSON_AddStringToObject(o, "model", full);
    cJSON_AddStringToObject(o, "modified_at", when);
    cJSON_AddNumberToObject(o, "size", (double)in.file_bytes);
    cJSON_AddStringToObject(o, "digest", digest);
    cJSON_AddItemToObject(o, "details", details(m, &in));
    if (ps) {
        cJSON_AddStringToObject(o, "expires_at", "2318-01-01T00:00:00Z"); /* loaded until the server stops */
        cJSON_AddNumberToObject(o, "size_vram", 0);
        cJSON_AddNumberToObject(o, "context_length", n_ctx);
    }
    return o;
}

cJSON *srvo_show(const char *name, const cinfer_model *m, int n_ctx) {
    cinfer_model_info in;
    cinfer_model_get_info(m, &in);
    cJSON *o = cJSON_CreateObject();
    char when[64], mf[1200];
    mtime_str(in.path, when, sizeof when);
    snprintf(mf, sizeof mf, "# served by cinfer as %s\nFROM %s\nPARAMETER num_ctx %d\n", name, in.path, n_ctx);
    cJSON_AddStringToObject(o, "license", "");
    cJSON_AddStringToObject(o, "modelfile", mf);
    cJSON_AddStringToObject(o, "parameters", "temperature 0.8\ntop_k 40\ntop_p 0.9\nrepeat_penalty 1.1");
    cJSON_AddStringToObject(o, "template", in.chat_template ? in.chat_template : "");
    cJSON_AddStringToObject(o, "system", "");
    cJSON_AddItemToObject(o, "details", details(m, &in));
    char *md = cinfer_model_metadata_json(m);
    cJSON *mi = md ? cJSON_Parse(md) : NULL;
    free(md);
    cJSON_AddItemToObject(o, "model_info", mi ? mi : cJSON_CreateObject());
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    const int gen = !cinfer_model_is_encoder(m); /* an embedding model only embeds */
    if (gen) cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
    if (gen && in.chat_template && srvx_template_has_tools(m)) cJSON_AddItemToArray(caps, cJSON_CreateString("tools"));
    if (gen && in.chat_template && strstr(in.chat_template, "<think>"))
        cJSON_AddItemToArray(caps, cJSON_CreateString("thinking"));
    cJSON_AddItemToArray(caps, cJSON_CreateString("embedding")); /* any model embeds (docs/serve.md) */
    cJSON_AddStringToObject(o, "modified_at", when);
    return o;
}

cJSON *srvo_embed_body(cJSON *openai, const char *name, int legacy, double total_ms) {
    cJSON *o = cJSON_CreateObject(), *e;
    if (legacy) {
        cJSON *first = cJSON_GetArrayItem(get(openai, "data"), 0);
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(first, "embedding");
        cJSON_AddItemToObject(o, "embedding", v ? v : cJSON_CreateArray());
        cJSON_Delete(openai);
        return o;
    }
    char full[300];
    snprintf(full, sizeof full, "%s:latest", name);
    cJSON_AddStringToObject(o, "model", full);
    cJSON *arr = cJSON_AddArrayToObject(o, "embeddings");
    cJSON_ArrayForEach(e, get(openai, "data")) {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(e, "embedding");
        if (v) cJSON_AddItemToArray(arr, v);
    }
    cJSON_AddNumberToObject(o, "total_duration", floor(total_ms * 1e6));
    cJSON_AddNumberToObject(o, "load_duration", 0);
    cJSON_AddNumberToObject(o, "prompt_eval_count", cJSON_GetNumberValue(get(get(openai, "usage"), "prompt_tokens")));
    cJSON_Delete(openai);
    return o;
}
