/*
 * test_chat_cli.c — `cinfer chat` end to end with the Qwen3 chat model (real
 * tokenizer and template, random weights): a three-turn conversation through
 * a pipe (each prompt the last one + the printed reply + the next turn), the
 * prompt it builds against the transformers rendering, and the same
 * conversation typed into a terminal (tmux) when tmux is installed: banner,
 * line editing, /help, Ctrl-C, /save, Ctrl-D and the history kept across
 * sessions (tests/chat_tmux.sh).
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

/* Three user turns through a pipe: three prompts, the first the reference
 * rendering, each later one the previous prompt + the reply chat printed +
 * the next user turn (so the history carries every reply), and stdout the
 * three replies, one after the other. */
TEST(chat, three_turns_through_a_pipe) {
    NEED_SHARED(path, QWEN);
    char *want = reference_rendering("system_user");
    if (!want) SKIP("reference rendering absent");
    static const char *const users[] = {"What is the capital of France?", "And of Italy?", "Thanks!"};
    char cmd[2048], *out = NULL, *errout = NULL;
    snprintf(cmd, sizeof cmd,
             "printf '%s\\n%s\\n%s\\n' | %s chat %s --system 'You are a helpful assistant.' -n 6 --temp 0 "
             "--show-prompt 2>%s/chat.err", users[0], users[1], users[2], cinfer_bin(), path, test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/chat.err", test_tmpdir());
    errout = read_file(errpath, NULL);
    /* the prompts, as --show-prompt prints them: "--- prompt ---\nTEXT\n--- end ---" */
    char *prompt[3] = {0};
    int n_prompts = 0;
    for (const char *q = errout; q && (q = strstr(q, "--- prompt ---\n")); n_prompts++) {
        q += 15;
        const char *e = strstr(q, "\n--- end ---");
        if (!e) break;
        if (n_prompts < 3) prompt[n_prompts] = strndup(q, (size_t)(e - q));
        q = e;
    }
    EXPECT_MSG(n_prompts == 3, "%d prompts in stderr: %s", n_prompts, errout ? errout : "");
    EXPECT_MSG(prompt[0] && !strcmp(prompt[0], want), "first prompt:\n%s\nreference:\n%s", prompt[0] ? prompt[0] : "",
               want);
    /* prompt k+1 = prompt k + reply k + end of turn + user turn k+1 + assistant header */
    const char *printed = out ? out : "";
    for (int k = 0; k < 2 && prompt[k] && prompt[k + 1]; k++) {
        size_t pl = strlen(prompt[k]);
        EXPECT_MSG(!strncmp(prompt[k + 1], prompt[k], pl), "prompt %d does not extend prompt %d", k + 2, k + 1);
        if (strncmp(prompt[k + 1], prompt[k], pl)) break;
        char tail[256];
        snprintf(tail, sizeof tail, "<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", users[k + 1]);
        const char *reply = prompt[k + 1] + pl;
        size_t rl = strlen(reply), tl = strlen(tail);
        EXPECT_MSG(rl > tl && !strcmp(reply + rl - tl, tail), "prompt %d does not end with user turn %d: %s", k + 2,
                   k + 2, prompt[k + 1]);
        if (!(rl > tl)) break;
        rl -= tl; /* the reply as the history holds it: what chat printed for turn k+1, then a newline */
        EXPECT_MSG(!strncmp(printed, reply, rl) && printed[rl] == '\n', "reply %d in the history \"%.*s\" is not "
                   "what chat printed next: \"%s\"", k + 1, (int)rl, reply, printed);
        if (strncmp(printed, reply, rl) || printed[rl] != '\n') break;
        printed += rl + 1;
    }
    /* what is left is the third reply */
    size_t left = strlen(printed);
    EXPECT_MSG(left >= 2 && printed[left - 1] == '\n', "third reply missing from stdout: \"%s\"", printed);
    for (int k = 0; k < 3; k++) free(prompt[k]);
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
