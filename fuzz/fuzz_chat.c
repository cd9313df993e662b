/*
 * fuzz_chat.c — libFuzzer target for chat templates: the input is a Jinja
 * template.  It is parsed (jinja_parse / chat_template_parse), its family
 * detected, and rendered against a conversation with tools, tool calls and
 * every variable real templates read, under small limits.  Built and run by
 * `make fuzz-chat` (clang -fsanitize=fuzzer,address,undefined).  Beyond "no
 * crash, no sanitizer report, no leak" it checks the contract: an error is a
 * known code with one line "jinja: line N: ..." and no output; success gives
 * a NUL-terminated output of the stated length, within the output limit; a
 * hostile template ends at the step, memory, output or depth limit instead of
 * hanging or exhausting memory.  Run: make fuzz-chat [FUZZ_SECONDS=600].
 */
#include "text/chat.h"
#include "text/jinja.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char k_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"},"
    "{\"role\": \"user\", \"content\": \"What's the weather in Paris? <b>&'\\\"</b> \\u00e9\\u4e2d \"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\n\", \"tool_calls\": [{\"id\": \"call12345\","
    "  \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"t\\\": 18}\"},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\","
    "  \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
    "  \"n\": {\"type\": \"integer\", \"default\": 3}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "  \"u\": {\"type\": [\"string\", \"null\"], \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}],"
    "\"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    "\"enable_thinking\": false, \"x\": 1.5, \"neg\": -7, \"half\": 5e-1}";

static cJSON *context(void) {
    static cJSON *ctx; /* parsed once; read-only afterwards */
    if (!ctx) {
        ctx = cJSON_Parse(k_context);
        CHECK(ctx);
    }
    return ctx;
}

static void check_err(int rc, const char *err) {
    CHECK(rc == JINJA_ERR_SYNTAX || rc == JINJA_ERR_RUNTIME || rc == JINJA_ERR_RAISED || rc == JINJA_ERR_LIMIT ||
          rc == JINJA_ERR_UNSUPPORTED);
    CHECK(!strncmp(err, "jinja: line ", 12) && !strchr(err, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    chat_template *t = NULL;
    int rc = chat_template_parse((const char *)data, size, &t, err, sizeof err);
    if (rc) {
        CHECK(t == NULL);
        check_err(rc, err);
        return 0;
    }
    CHECK(chat_family_name(chat_template_family(t)) != NULL);
    struct tm now = {.tm_year = 125, .tm_mon = 1, .tm_mday = 20, .tm_hour = 12, .tm_wday = 4, .tm_yday = 50};
    jinja_render_opts opts = {
        .limits = {.max_output_bytes = 1 << 20, .max_mem_bytes = 64 << 20, .max_steps = 200000, .max_depth = 0},
        .now = &now,
    };
    char *out = NULL, *out2 = NULL;
    size_t len = 0, len2 = 0;
    rc = chat_template_render(t, context(), &opts, &out, &len, err, sizeof err);
    if (rc) {
        CHECK(out == NULL);
        check_err(rc, err);
    } else {
        CHECK(out && out[len] == 0 && len <= opts.limits.max_output_bytes);
    }
    /* a second render, from the JSON text, gives the same result: a template
     * keeps no render state, and both paths read these numbers alike */
    int rc2 = chat_template_render_json(t, k_context, sizeof k_context - 1, &opts, &out2, &len2, err, sizeof err);
    CHECK(rc2 == rc && len2 == len && (!rc ? !memcmp(out, out2, len) : out2 == NULL));
    free(out);
    free(out2);
    chat_template_free(t);
    return 0;
}
