/* test_chat.c — chat templates: every template of ../shared/chat-templates on
 * a fixed set of conversations against python3-jinja2 with transformers'
 * settings (tests/data/chat/expected.json, written by gen_expected.py); the
 * Qwen3 template of models/chat/qwen3-chat.gguf and the Llama 3 template
 * against reference/chat/{qwen3,llama3}-chat.rendered.json; family detection;
 * Jinja semantics that need no shared data; the render limits. */
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <time.h>

#include "text/chat.h"
#include "formats/gguf.h"
#include "text/jinja.h"

/* ---- helpers ------------------------------------------------------------------ */

static cJSON *load_json(const char *path) {
    cJSON *j = read_json(path);
    if (!j) test_fail(__FILE__, __LINE__, "cannot read or parse %s", path);
    return j;
}

/* conversations.json "fixed_time": 2025-02-20T12:00:00 (a Thursday) */
static struct tm fixed_time(void) {
    struct tm tm = {0};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 1;
    tm.tm_mday = 20;
    tm.tm_hour = 12;
    tm.tm_wday = 4;
    tm.tm_yday = 50;
    tm.tm_isdst = -1;
    return tm;
}

/* Show where two renderings first differ. */
static void report_diff(const char *what, const char *got, size_t got_len, const char *want) {
    size_t want_len = strlen(want), i = 0;
    while (i < got_len && i < want_len && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    test_fail(__FILE__, __LINE__, "%s: differs at byte %zu (got %zu bytes, expected %zu)\n      got: \"%.*s\"\n"
              "      exp: \"%.*s\"", what, i, got_len, want_len, (int)(got_len - from < 100 ? got_len - from : 100),
              got + from, (int)(want_len - from < 100 ? want_len - from : 100), want + from);
}

/* Render src with ctx and compare with an expected output or error. */
static void check_render(const char *what, const chat_template *t, const cJSON *ctx, const cJSON *expect) {
    struct tm now = fixed_time();
    jinja_render_opts opts = {.now = &now};
    char *out = NULL, err[600];
    size_t len = 0;
    int rc = chat_template_render(t, ctx, &opts, &out, &len, err, sizeof err);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(expect, "output");
    if (cJSON_IsString(want)) {
        if (rc) test_fail(__FILE__, __LINE__, "%s: rc %d: %s", what, rc, err);
        else if (len != strlen(want->valuestring) || memcmp(out, want->valuestring, len))
            report_diff(what, out, len, want->valuestring);
    } else {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(expect, "error"));
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(expect, "message"));
        if (!kind || !msg) {
            test_fail(__FILE__, __LINE__, "%s: expected entry has neither output nor error", what);
        } else if (!rc) {
            test_fail(__FILE__, __LINE__, "%s: rendered, expected %s: %s", what, kind, msg);
        } else if (!strcmp(kind, "raise_exception")) {
            EXPECT_MSG(rc == JINJA_ERR_RAISED && strstr(err, msg), "%s: got rc %d \"%s\", expected raise_exception(\"%s\")",
                       what, rc, err, msg);
        } else {
            EXPECT_MSG(rc == JINJA_ERR_RUNTIME && strstr(err, kind), "%s: got rc %d \"%s\", expected %s: %s", what, rc,
                       err, kind, msg);
        }
    }
    free(out);
}

/* The render variables transformers passes (gen_expected.py context()). */
static cJSON *conv_context(const cJSON *spec, const cJSON *conv) {
    cJSON *ctx = chat_context_new(cJSON_GetObjectItemCaseSensitive(conv, "messages"),
                                  cJSON_GetObjectItemCaseSensitive(conv, "tools"),
                                  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(conv, "add_generation_prompt")), NULL,
                                  NULL);
    const cJSON *groups[2] = {cJSON_GetObjectItemCaseSensitive(spec, "special_tokens"),
                              cJSON_GetObjectItemCaseSensitive(conv, "extra")};
    for (int g = 0; g < 2; g++)
        for (const cJSON *it = groups[g] ? groups[g]->child : NULL; it; it = it->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(ctx, it->string);
            cJSON_AddItemToObject(ctx, it->string, cJSON_Duplicate(it, 1));
        }
    return ctx;
}

/* ---- parity with python3-jinja2 on the shared templates ------------------------------- */

TEST(chat, templates_parity) {
    NEED_SHARED(dir, "chat-templates");
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s", dir);
    cJSON *spec = load_json("tests/data/chat/conversations.json");
    cJSON *exp = load_json("tests/data/chat/expected.json");
    if (!spec || !exp) goto done;
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(spec, "fixed_time")), "2025-02-20T12:00:00");
    const cJSON *templates = cJSON_GetObjectItemCaseSensitive(exp, "templates");
    const cJSON *convs = cJSON_GetObjectItemCaseSensitive(spec, "conversations");
    int n_templates = 0, n_cases = 0;
    for (const cJSON *tj = templates ? templates->child : NULL; tj; tj = tj->next) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", tdir, tj->string);
        size_t len;
        char *src = read_file(path, &len);
        if (!src) {
            test_fail(__FILE__, __LINE__, "cannot read %s", path);
            continue;
        }
        chat_template *t;
        char err[600];
        int rc = chat_template_parse(src, len, &t, err, sizeof err);
        free(src);
        if (rc) {
            test_fail(__FILE__, __LINE__, "%s: parse rc %d: %s", tj->string, rc, err);
            continue;
        }
        n_templates++;
        const cJSON *cases = cJSON_GetObjectItemCaseSensitive(tj, "cases");
        for (const cJSON *conv = convs ? convs->child : NULL; conv; conv = conv->next) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(conv, "name"));
            const cJSON *want = cJSON_GetObjectItemCaseSensitive(cases, name);
            if (!want) {
                test_fail(__FILE__, __LINE__, "%s: no expected entry for %s (rerun gen_expected.py)", tj->string, name);
                continue;
            }
            char what[512];
            snprintf(what, sizeof what, "%s / %s", tj->string, name);
            cJSON *ctx = conv_context(spec, conv);
            check_render(what, t, ctx, want);
            cJSON_Delete(ctx);
            n_cases++;
        }
        chat_template_free(t);
    }
    EXPECT(n_templates >= 19);
    EXPECT(n_cases >= 19 * 14);
done:
    cJSON_Delete(spec);
    cJSON_Delete(exp);
}

/* ---- the Qwen3 and Llama 3 references (llama.cpp and jinja2 agree on them) ---- */

static void check_reference(const char *rendered_json, chat_template *t) {
    cJSON *ref = load_json(rendered_json);
    if (!ref) return;
    const cJSON *stm = cJSON_GetObjectItemCaseSensitive(ref, "special_tokens_map");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(ref, "cases");
    int n = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
        cJSON *ctx = chat_context_new(cJSON_GetObjectItemCaseSensitive(c, "messages"), cJSON_IsNull(tools) ? NULL : tools,
                                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")), NULL,
                                      NULL);
        for (const cJSON *it = stm ? stm->child : NULL; it; it = it->next)
            cJSON_AddItemToObject(ctx, it->string, cJSON_Duplicate(it, 1));
        cJSON *want = cJSON_CreateObject();
        cJSON_AddStringToObject(want, "output", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "rendered")));
        char what[256];
        snprintf(what, sizeof what, "%s / %s", rendered_json, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name")));
        check_render(what, t, ctx, want);
        cJSON_Delete(want);
        cJSON_Delete(ctx);
        n++;
    }
    EXPECT(n >= 1);
    cJSON_Delete(ref);
}

TEST(chat, qwen3_gguf_reference) {
    NEED_SHARED(model, "models/chat/qwen3-chat.gguf");
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s", model);
    NEED_SHARED(ref, "reference/chat/qwen3-chat.rendered.json");
    char rpath[1024];
    snprintf(rpath, sizeof rpath, "%s", ref);
    gguf_file *g;
    char err[600];
    if (gguf_open(mpath, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gguf_open: %s", err);
        return;
    }
    chat_template *t;
    int rc = chat_template_from_gguf(g, &t, err, sizeof err);
    gguf_close(g); /* the template keeps its own copy */
    if (rc) {
        test_fail(__FILE__, __LINE__, "chat_template_from_gguf: %d %s", rc, err);
        return;
    }
    size_t len;
    chat_template_source(t, &len);
    EXPECT_EQ_I(len, 4116);
    EXPECT_STR_EQ(chat_family_name(chat_template_family(t)), "qwen3");
    check_reference(rpath, t);
    chat_template_free(t);
}

TEST(chat, llama3_reference) {
    NEED_SHARED(tpl, "chat-templates/meta-llama-Llama-3-from-tokenizer_config.jinja");
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s", tpl);
    NEED_SHARED(ref, "reference/chat/llama3-chat.rendered.json");
    char rpath[1024];
    snprintf(rpath, sizeof rpath, "%s", ref);
    size_t len;
    char *src = read_file(tpath, &len);
    chat_template *t;
    char err[600];
    int rc = src ? chat_template_parse(src, len, &t, err, sizeof err) : -1;
    free(src);
    if (rc) {
        test_fail(__FILE__, __LINE__, "parse %s: %d", tpath, rc);
        return;
    }
    EXPECT_STR_EQ(chat_family_name(chat_template_family(t)), "llama3");
    check_reference(rpath, t);
    chat_template_free(t);
}

/* ---- family detection ------------------------------------------------------------------ */

TEST(chat, families) {
    NEED_SHARED(dir, "chat-templates");
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s", dir);
    static const struct { const char *file, *family; } k[] = {
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "command-r"},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r7b"},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes"},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
        {"Qwen-Qwen3-from-tokenizer_config.jinja", "qwen3"},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-r1"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1"},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", "firefunction-v2"},
        {"google-gemma-2-2b-it.jinja", "gemma"},
        {"llama-cpp-deepseek-r1.jinja", "deepseek-r1"},
        {"meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1"},
        {"meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2"},
        {"meta-llama-Llama-3-from-tokenizer_config.jinja", "llama3"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3-tools"},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3-tools"},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3-tools"},
        {"microsoft-Phi-3.5-mini-instruct.jinja", "phi3"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral-nemo"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", tdir, k[i].file);
        char *src = read_file(path, NULL);
        if (!src) {
            test_fail(__FILE__, __LINE__, "cannot read %s", path);
            continue;
        }
        const char *got = chat_family_name(chat_detect_family(src));
        EXPECT_MSG(!strcmp(got, k[i].family), "%s: family %s, expected %s", k[i].file, got, k[i].family);
        free(src);
    }
    EXPECT_STR_EQ(chat_family_name(chat_detect_family("<|im_start|>{{ m }}<|im_end|>")), "chatml");
    EXPECT_STR_EQ(chat_family_name(chat_detect_family("[INST] {{ x }} [/INST]")), "mistral");
    EXPECT_STR_EQ(chat_family_name(chat_detect_family("<|start_of_role|>user<|end_of_role|>")), "granite");
    EXPECT_STR_EQ(chat_family_name(chat_detect_family("{{ x }}")), "unknown");
    EXPECT_STR_EQ(chat_family_name((chat_family)999), "unknown");
}

/* ---- Jinja semantics without shared data ------------------------------------------------ */

static void expect_render(int line, const char *src, const char *ctx_json, const char *want) {
    cJSON *ctx = ctx_json ? cJSON_Parse(ctx_json) : NULL;
    char *out = NULL, err[600];
    size_t len = 0;
    struct tm now = fixed_time();
    jinja_render_opts opts = {.now = &now};
    jinja_template *t;
    int rc = jinja_parse(src, strlen(src), &t, err, sizeof err);
    if (!rc) {
        rc = jinja_render(t, ctx, &opts, &out, &len, err, sizeof err);
        jinja_free(t);
    }
    if (rc) test_fail(__FILE__, line, "%s: rc %d: %s", src, rc, err);
    else if (strcmp(out, want)) test_fail(__FILE__, line, "%s:\n      got \"%s\"\n      exp \"%s\"", src, out, want);
    free(out);
    cJSON_Delete(ctx);
}
#define RENDER(src, ctx, want) expect_render(__LINE__, src, ctx, want)

/* rc and a substring of the message */
static void expect_error(int line, const char *src, const char *ctx_json, int want_rc, const char *want_msg,
                         const jinja_limits *lim) {
    cJSON *ctx = ctx_json ? cJSON_Parse(ctx_json) : NULL;
    char *out = NULL, err[600] = "";
    jinja_render_opts opts = {0};
    if (lim) opts.limits = *lim;
    jinja_template *t;
    int rc = jinja_parse(src, strlen(src), &t, err, sizeof err);
    if (!rc) {
        rc = jinja_render(t, ctx, &opts, &out, NULL, err, sizeof err);
        jinja_free(t);
    }
    if (rc != want_rc || !strstr(err, want_msg))
        test_fail(__FILE__, line, "%.60s: got rc %d \"%s\", expected rc %d with \"%s\"", src, rc, err, want_rc, want_msg);
    if (rc) EXPECT_MSG(out == NULL, "output on error");
    free(out);
    cJSON_Delete(ctx);
}
#define RENDER_ERROR(src, ctx, rc, msg) expect_error(__LINE__, src, ctx, rc, msg, NULL)

TEST(chat, jinja_whitespace) {
    RENDER("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}  \n{# c #}\n  {#- c #}z\n\n", NULL, "  x\n  y  \nz\n");
    RENDER("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    RENDER("a\n  {%+ if true %}b{% endif %}\n  c", NULL, "a\n  b  c");
    RENDER("{% raw %}{{ x }}{% endraw %}|{%- raw -%}  {{y}}  {%- endraw -%}|", NULL, "{{ x }}|{{y}}|");
    RENDER("l1\r\nl2\r\n{% if true %}\r\nx\r\n{% endif %}\r\n", NULL, "l1\nl2\nx\n");
    RENDER("{%- for m in ms %}\n  {{- m }}\n{%- endfor %}\n", "{\"ms\":[\"a\",\"b\"]}", "ab");
}

TEST(chat, jinja_semantics) {
    RENDER("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }},{% endfor %}|{{ x }}", NULL,
           "00,01,02,|0");
    RENDER("{% macro m() %}{{ v }}{% endmacro %}{% set v = 1 %}{{ m() }}{% set v = 2 %}{{ m() }}", NULL, "12");
    RENDER("{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}", NULL,
           "1/22/2");
    RENDER("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=[2];");
    RENDER("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
           NULL, "6");
    RENDER("{% macro f(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{% endmacro %}{{ f(1) }}{{ f(1, 3, 4) }}", NULL,
           "12()13(4,)");
    RENDER("{% macro f() %}[{{ caller('x') }}]{% endmacro %}{% call(y) f() %}<{{ y }}>{% endcall %}", NULL, "[<x>]");
    RENDER("{% set x | upper %}ab{% endset %}{{ x }}{% filter trim %}  c  {% endfilter %}", NULL, "ABc");
    RENDER("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
           "{{ i }}{% endfor %}", NULL, "02");
    RENDER("{{ [1, 'a', none, true, 1.5, {'k': (1,)}] }}", NULL, "[1, 'a', None, True, 1.5, {'k': (1,)}]");
    RENDER("{{ 'abc'[::-1] }}{{ [1,2,3][-2:] }}{{ 'héllo'[1:3] }}{{ 7 // 2 }}{{ -7 % 3 }}{{ 1 / 4 }}", NULL,
           "cba[2, 3]él320.25");
    RENDER("{{ x.content is defined }}{{ x.role }}{{ x.items() }}", "{\"x\":{\"role\":\"user\"}}",
           "Falseuserdict_items([('role', 'user')])");
    RENDER("{{ u }}{{ u|length }}{{ u is iterable }}{{ 'a' in u }}{{ none.a }}", NULL, "0TrueFalse");
    RENDER("{{ x|tojson }}|{{ x|tojson(indent=2) }}", "{\"x\":{\"a\":[1,\"é\\n\"],\"b\":{}}}",
           "{\"a\": [1, \"é\\n\"], \"b\": {}}|{\n  \"a\": [\n    1,\n    \"é\\n\"\n  ],\n  \"b\": {}\n}");
    RENDER("{{ \"<'\"|safe + x }}|{{ x|e }}", "{\"x\":\"<&>\"}", "<'&lt;&amp;&gt;|&lt;&amp;&gt;");
    RENDER("{{ xs|selectattr('t', 'equalto', 'a')|map(attribute='n')|join(',') }}|{{ xs|map(attribute='n')|list }}",
           "{\"xs\":[{\"t\":\"a\",\"n\":1},{\"t\":\"b\",\"n\":2},{\"t\":\"a\",\"n\":3}]}", "1,3|[1, 2, 3]");
    RENDER("{{ 'a b  c '.split() }}{{ ' x '.strip() }}{{ 'a,b'.rsplit(',', 1) }}{{ 'x'.startswith(('y', 'x')) }}",
           NULL, "['a', 'b', 'c']x['a', 'b']True");
    RENDER("{{ ['b', 'A', 'a']|sort }}{{ [3, 1]|sort(reverse=true) }}{{ 'hello world'|title }}{{ 2.5|round }}", NULL,
           "['A', 'a', 'b'][3, 1]Hello World2.0");
    RENDER("{{ strftime_now('%d %b %Y') }}", NULL, "20 Feb 2025");
    RENDER("{{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-05 }} {{ 100.0 }}", NULL, "1e+16 0.30000000000000004 1e-05 100.0");
}

/* Corners where jinja2's compiler, not Python, decides the result (checked
 * against python3-jinja2 3.1.2). */
TEST(chat, jinja_compiler_corners) {
    /* the for-else flag is cleared at the end of the body: continue/break skip that */
    RENDER("{% for x in [1, 2] %}{{ x }}{% continue %}{% else %}E{% endfor %}", NULL, "12E");
    RENDER("{% for x in [1] %}{% break %}{% else %}E{% endfor %}|{% for x in [1] %}{% else %}E{% endfor %}", NULL,
           "E|");
    /* a name the top level assigns before reading is undefined until then, even for a macro */
    RENDER("{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}{% set x = 2 %}{{ m() }}", "{\"x\": 1}", "[][2]");
    RENDER("{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}{% if a %}{% set x = 2 %}{% endif %}{{ m() }}",
           "{\"x\": 1, \"a\": true}", "[1][2]");
    /* a default naming its own parameter reads the (missing) parameter */
    RENDER("{% macro g(p, q=q) %}[{{ q }}]{% endmacro %}{{ g(1) }}{{ g(1, 2) }}", "{\"q\": 5}", "[][2]");
    RENDER("{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %}", NULL, "123");
    /* constants are folded with Environment.getitem, other slices are plain subscripts */
    RENDER("{{ none[1:] }}|{{ (2)[::-1]|length }}", NULL, "|0");
    RENDER_ERROR("{% if x %}{{ x[1:] }}{% endif %}", "{\"x\": 5}", JINJA_ERR_RUNTIME, "not subscriptable");
    RENDER("{{ \"a%sb\" % u }}|{{ \",\" % [] }}", NULL, "ab|,");
    /* generator filters fail only when consumed */
    RENDER("{{ (5|items) is defined }}{{ 0|map(\"upper\")|list }}", NULL, "True[]");
    RENDER("{% for x in [] %}{% else %}{% set y = 1 %}{% endfor %}[{{ y }}]", NULL, "[]");
    /* a filter block yields the filter's value; "".join() wants a str */
    RENDER_ERROR("{% filter length %}abc{% endfilter %}", NULL, JINJA_ERR_RUNTIME, "expected str instance");
}

TEST(chat, jinja_errors) {
    RENDER_ERROR("{{ raise_exception('no system') }}", NULL, JINJA_ERR_RAISED, "line 1: raise_exception: no system");
    RENDER_ERROR("a\n{% if x %}", NULL, JINJA_ERR_SYNTAX, "Unexpected end of template");
    RENDER_ERROR("a\nb\n{{ x|nofilter }}", NULL, JINJA_ERR_SYNTAX, "line 3: No filter named 'nofilter'");
    RENDER_ERROR("{% break %}", NULL, JINJA_ERR_SYNTAX, "outside loop");
    RENDER_ERROR("{% include 'x' %}", NULL, JINJA_ERR_UNSUPPORTED, "'include' is not supported");
    RENDER_ERROR("{{ [1]|random }}", NULL, JINJA_ERR_UNSUPPORTED, "'random' filter");
    RENDER_ERROR("{{ x|map('upper') }}", "{\"x\":[]}", JINJA_ERR_UNSUPPORTED, "generator");
    RENDER_ERROR("{{ 'a' + 1 }}", NULL, JINJA_ERR_RUNTIME, "TypeError: can only concatenate str");
    RENDER_ERROR("\n\n{{ u.a }}", NULL, JINJA_ERR_RUNTIME, "line 3: UndefinedError: 'u' is undefined");
    RENDER_ERROR("{% set l = [] %}{{ l.append(1) }}", NULL, JINJA_ERR_RUNTIME, "SecurityError");
    RENDER_ERROR("{{ x|tojson }}", NULL, JINJA_ERR_RUNTIME, "not JSON serializable");
    RENDER_ERROR("{{ 9223372036854775807 + 1 }}", NULL, JINJA_ERR_UNSUPPORTED, "integer overflow");
    RENDER_ERROR("{{ range(100001)|length }}", NULL, JINJA_ERR_RUNTIME, "MAX_RANGE");
    RENDER_ERROR("{{ x }}", "[1]", JINJA_ERR_RUNTIME, "must be a JSON object");
}

TEST(chat, jinja_limits) {
    jinja_limits lim = {.max_steps = 100000};
    expect_error(__LINE__, "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", NULL,
                 JINJA_ERR_LIMIT, "step limit", &lim);
    lim = (jinja_limits){.max_output_bytes = 1000};
    expect_error(__LINE__, "{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", NULL, JINJA_ERR_LIMIT, "output limit", &lim);
    lim = (jinja_limits){.max_mem_bytes = 1 << 20};
    expect_error(__LINE__, "{{ 'x' * 10000000 }}", NULL, JINJA_ERR_LIMIT, "", &lim);
    expect_error(__LINE__, "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, JINJA_ERR_LIMIT, "nesting",
                 NULL);
    /* hostile sizes from a GGUF's template: a limit error, never a wrapped allocation or signed overflow */
    expect_error(__LINE__, "{{ range(5000) | batch(4611686018427387904) | list | length }}", NULL, JINJA_ERR_LIMIT,
                 "batch(4611686018427387904) too large", NULL);
    expect_error(__LINE__, "{{ range(3) | batch(4611686018427387904) | list | length }}", NULL, JINJA_ERR_LIMIT,
                 "too large", NULL);
    expect_error(__LINE__, "{{ range(-9223372036854775807, 9223372036854775807) | length }}", NULL, JINJA_ERR_RUNTIME,
                 "MAX_RANGE", NULL);
    expect_error(__LINE__, "{{ range(0, 10, -9223372036854775807 - 1) | length }}", NULL, 0, "", NULL);
    expect_error(__LINE__, "{{ '%999999999d' % 1 }}", NULL, JINJA_ERR_LIMIT, "width above 10000", NULL);
    RENDER("{{ range(5) | batch(2) | list }}", NULL, "[[0, 1], [2, 3], [4]]");
    RENDER("{{ range(5) | batch(2, 'x') | list }}", NULL, "[[0, 1], [2, 3], [4, 'x']]");
    expect_error(__LINE__, "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                           "{{ ns.x }}", NULL, JINJA_ERR_LIMIT, "nesting", NULL);
    /* nesting beyond the parser's bound */
    char deep[4000];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 500; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 500; i++) deep[n++] = ')';
    snprintf(deep + n, sizeof deep - n, " }}");
    expect_error(__LINE__, deep, NULL, JINJA_ERR_LIMIT, "nested", NULL);
}

TEST(chat, render_api) {
    cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Hi\"}]");
    cJSON *ctx = chat_context_new(msgs, NULL, true, "<s>", NULL);
    char *out = NULL, err[300];
    size_t len;
    int rc = chat_render("{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                         "{% if add_generation_prompt %}>{% endif %}{{ tools is none }}{{ eos_token is defined }}",
                         ctx, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, 0);
    EXPECT_STR_EQ(out, "<s>[user:Hi]>TrueFalse");
    EXPECT_EQ_I(len, strlen("<s>[user:Hi]>TrueFalse"));
    free(out);
    rc = chat_render("{% if %}", ctx, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, JINJA_ERR_SYNTAX);
    EXPECT(out == NULL);
    cJSON_Delete(ctx);
    cJSON_Delete(msgs);
    chat_template_free(NULL);
    jinja_free(NULL);
}

TEST(chat, render_json_numbers) {
    const char *src = "{{ x }} {{ y }} {{ n }} {{ s }} {{ {'a': x, 'b': y[1]}|tojson }}";
    const char *vars = "{\"x\": 1.0, \"y\": [2, 3.50, -0, 1e2], \"n\": 9007199254740993, \"s\": \"1.0 \\\" 7\"}";
    chat_template *t;
    char *out = NULL, err[300];
    size_t len;
    EXPECT_EQ_I(chat_template_parse(src, strlen(src), &t, err, sizeof err), 0);
    int rc = chat_template_render_json(t, vars, strlen(vars), NULL, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, 0);
    EXPECT_STR_EQ(out, "1.0 [2, 3.5, 0, 100.0] 9007199254740993 1.0 \" 7 {\"a\": 1.0, \"b\": 3.5}");
    free(out);
    /* a parsed cJSON knows only doubles: integral ones become ints */
    cJSON *c = cJSON_Parse(vars);
    rc = chat_template_render(t, c, NULL, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, 0);
    EXPECT_STR_EQ(out, "1 [2, 3.5, 0, 100] 9007199254740992 1.0 \" 7 {\"a\": 1, \"b\": 3.5}");
    free(out);
    cJSON_Delete(c);
    const char *big = "{\"x\": 123456789012345678901}";
    rc = chat_template_render_json(t, big, strlen(big), NULL, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, JINJA_ERR_UNSUPPORTED);
    rc = chat_template_render_json(t, "{", 1, NULL, &out, &len, err, sizeof err);
    EXPECT_EQ_I(rc, JINJA_ERR_RUNTIME);
    EXPECT(out == NULL);
    chat_template_free(t);
}
