/*
 * test_chat_cli.c — `cinfer chat` end to end with the Qwen3 chat model (real
 * tokenizer and template, random weights): a three-turn conversation through
 * a pipe, the prompt it builds against the transformers rendering, and the
 * same conversation typed into a terminal (tmux) when tmux is installed:
 * banner, line editing, /help, Ctrl-C, /save, Ctrl-D and the history kept
 * across sessions (tests/chat_tmux.sh).
 */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "test.h"

#define QWEN "models/chat/qwen3-chat.gguf"

static char *reference_rendering(const char *case_name) {
    const char *p = shared_path("reference/chat/qwen3-chat.rendered.json");
    char *txt = p ? read_file(p, NULL) : NULL;
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    char *out = NULL;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), case_name))
            out = strdup(cJSON_GetStringValue(cJSON_GetObjectItem(c, "rendered")));
    cJSON_Delete(j);
    return out;
}

TEST(chat, prompt_equals_reference_rendering) {
    NEED_SHARED(path, QWEN);
    char *want = reference_rendering("system_user");
    if (!want) SKIP("reference rendering absent");
    char err[512];
    cinfer_model *m;
    EXPECT(cinfer_model_open(path, NULL, &m, err, sizeof err) == 0);
    cinfer_message msgs[] = {{"system", "You are a helpful assistant."},
                             {"user", "What is the capital of France?"}};
    char *prompt = NULL;
    EXPECT(cinfer_chat_prompt(m, msgs, 2, 1, &prompt, err, sizeof err) == 0);
    EXPECT_STR_EQ(prompt, want);
    cinfer_free(prompt);
    cinfer_model_close(m);
    free(want);
}

TEST(chat, three_turns_through_a_pipe) {
    NEED_SHARED(path, QWEN);
    char *want = reference_rendering("system_user");
    if (!want) SKIP("reference rendering absent");
    char cmd[2048], *out = NULL, *errout = NULL;
    snprintf(cmd, sizeof cmd,
             "printf 'What is the capital of France?\\nAnd of Italy?\\nThanks!\\n' | %s chat %s "
             "--system 'You are a helpful assistant.' -n 6 --temp 0 --show-prompt 2>%s/chat.err",
             cinfer_bin(), path, test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/chat.err", test_tmpdir());
    errout = read_file(errpath, NULL);
    /* three replies, one block each */
    int lines = 0;
    for (const char *q = out; q && *q; q++) lines += *q == '\n';
    EXPECT_MSG(lines >= 3, "stdout: %s", out ? out : "");
    /* the first prompt is the reference rendering; later ones extend it */
    char *first = errout ? strstr(errout, "--- prompt ---\n") : NULL;
    EXPECT_MSG(first && !strncmp(first + 15, want, strlen(want)), "stderr: %s", errout ? errout : "");
    int n_prompts = 0;
    for (const char *q = errout; q && (q = strstr(q, "--- prompt ---")); q++) n_prompts++;
    EXPECT_EQ_I(n_prompts, 3);
    EXPECT(errout && strstr(errout, "And of Italy?<|im_end|>\n<|im_start|>assistant\n"));
    free(out);
    free(errout);
    free(want);
}

TEST(chat, model_without_template_is_a_clear_error) {
    NEED_SHARED(path, "models/stories260K/stories260K.gguf");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "echo hi | %s chat %s", cinfer_bin(), path);
    int st = run_cmd(cmd, true, &out);
    EXPECT(st != 0 && out && strstr(out, "chat template"));
    free(out);
}

TEST(chat, interactive_in_tmux) {
    NEED_SHARED(path, QWEN);
    NEED_TOOL("tmux", "tmux");
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "sh tests/chat_tmux.sh %s %s %s", cinfer_bin(), path, test_tmpdir());
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s", out ? out : "");
    free(out);
}
