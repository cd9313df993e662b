/*
 * test_cli.c — the command line as a new user meets it: cached REPO[:FILE]
 * names in every model-taking command, random/explicit seeds, the
 * context-full behaviour of run and chat, clear refusals (safetensors,
 * SentencePiece tokenizer.json, flags a standalone executable cannot honour)
 * and the wording of a few messages.  Runs $CINFER_BIN (cinfer_bin()).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define STORIES "models/stories260K/stories260K.gguf"
#define QWEN "models/chat/qwen3-chat.gguf"

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* A private cache ($dir/cinfer/models/me/tiny/main/stories260K.gguf) that
 * `cinfer pull me/tiny` would have made; returns the XDG_CACHE_HOME. */
static const char *fake_cache(const char *model) {
    static char xdg[600];
    snprintf(xdg, sizeof xdg, "%s/xdg", test_tmpdir());
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/cinfer/models/me/tiny/main && cp '%s' %s/cinfer/models/me/tiny/main/",
             xdg, model, xdg);
    return run_cmd(cmd, true, NULL) == 0 ? xdg : NULL;
}

TEST(cli, cached_names_in_every_model_command) {
    NEED_SHARED(m, STORIES);
    const char *xdg = fake_cache(m);
    EXPECT(xdg != NULL);
    if (!xdg) return;
    static const struct { const char *args, *want; } cases[] = {
        {"run me/tiny -p Once -n 3 --temp 0", "Once upon"},
        {"inspect me/tiny", "architecture  llama"},
        {"tokenize me/tiny 'Hello world'", "1 "},
        {"compile me/tiny", "JIT ok"},
        {"bench me/tiny -p 4 -n 2 -r 1", "me/tiny"},
        {"chat me/tiny -n 2 --temp 0 </dev/null", ""},
        /* serve until SIGTERM after 3 s: it must have opened the cached file */
        {"serve me/tiny --port 0 2>&1 & p=$!; sleep 3; kill $p; wait $p", "model 'stories260K' (default)"},
        {"serve --model t=me/tiny --port 0 2>&1 & p=$!; sleep 3; kill $p; wait $p", "API at http"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s %s", xdg, cinfer_bin(), cases[i].args);
        int st = run_cmd(cmd, true, &out);
        /* chat on a model without a chat template may refuse, but not with "cannot open" */
        if (!strncmp(cases[i].args, "chat", 4)) {
            EXPECT_MSG(out && !strstr(out, "cannot open") && !strstr(out, "bad magic"), "%s: %s", cmd,
                       out ? out : "");
        } else {
            EXPECT_MSG(st == 0, "%s: exit %d: %s", cmd, st, out ? out : "");
            if (strcmp(cases[i].want, "me/tiny"))
                EXPECT_MSG(out && strstr(out, cases[i].want), "%s: %s", cmd, out ? out : "");
        }
        free(out);
    }
    /* a name that is not cached says how to get it, in one line */
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s inspect me/absent 2>&1 >/dev/null", xdg, cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    EXPECT_MSG(out && count_lines(out) == 1 && strstr(out, "cinfer inspect: ") && strstr(out, "pull"), "%s",
               out ? out : "");
    free(out);
}

static char *run_out(const char *m, const char *args, int *st, int merge) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run %s %s", cinfer_bin(), m, args);
    *st = run_cmd(cmd, merge, &out);
    return out;
}

TEST(cli, seed_default_random_explicit_reproducible) {
    NEED_SHARED(m, STORIES);
    int st;
    /* -v prints the seed; two default runs draw different ones */
    char *a = run_out(m, "-p Once -n 4 -v 2>&1 >/dev/null | grep 'seed '", &st, false);
    char *b = run_out(m, "-p Once -n 4 -v 2>&1 >/dev/null | grep 'seed '", &st, false);
    EXPECT_MSG(a && strstr(a, "cinfer run: seed ") && strstr(a, "random"), "%s", a ? a : "");
    EXPECT_MSG(a && b && strcmp(a, b), "two default runs, same seed: %s", a ? a : "");
    free(a), free(b);
    /* --seed -1 is accepted and random */
    a = run_out(m, "-p Once -n 4 --seed -1 -v 2>&1 >/dev/null | grep 'seed '", &st, false);
    EXPECT_MSG(a && strstr(a, "random"), "%s", a ? a : "");
    free(a);
    /* --seed N: the same text twice, and -v names N */
    a = run_out(m, "-p Once -n 30 --temp 1 --seed 7 2>/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    b = run_out(m, "-p Once -n 30 --temp 1 --seed 7 2>/dev/null", &st, false);
    EXPECT_MSG(a && b && !strcmp(a, b) && strlen(a) > 10, "%s | %s", a ? a : "", b ? b : "");
    free(a), free(b);
    a = run_out(m, "-p Once -n 1 --seed 7 -v 2>&1 >/dev/null | grep 'seed '", &st, false);
    EXPECT_MSG(a && strstr(a, "seed 7\n"), "%s", a ? a : "");
    free(a);
    a = run_out(m, "--seed -2", &st, true);
    EXPECT_EQ_I(st, 2);
    EXPECT_MSG(a && strstr(a, "--seed: '-2' is not a seed"), "%s", a ? a : "");
    free(a);
}

TEST(cli, chat_seed_flag) {
    NEED_SHARED(q, QWEN);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "echo hi | %s chat %s -n 2 --seed -1 -v 2>&1 >/dev/null", cinfer_bin(), q);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "cinfer chat: seed ") && strstr(out, "random"), "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "echo hi | %s chat %s -n 2 --seed x", cinfer_bin(), q);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    free(out);
}

TEST(cli, run_context_full_notice) {
    NEED_SHARED(m, STORIES);
    int st;
    char *out = run_out(m, "-p Once -n 20 -c 8 --temp 0 2>&1 >/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    EXPECT_MSG(out && strstr(out, "context full at 8 tokens"), "%s", out ? out : "");
    free(out);
    /* no notice when the context has room */
    out = run_out(m, "-p Once -n 3 -c 64 --temp 0 2>&1 >/dev/null", &st, false);
    EXPECT_MSG(out && !strstr(out, "context full"), "%s", out ? out : "");
    free(out);
}

TEST(cli, chat_drops_oldest_turns) {
    NEED_SHARED(q, QWEN);
    char cmd[2048], *out = NULL, errp[600];
    snprintf(errp, sizeof errp, "%s/chatctx.err", test_tmpdir());
    snprintf(cmd, sizeof cmd, "printf 'a\\nb\\nc\\nd\\ne\\nf\\n' | %s chat %s -c 64 -n 8 --temp 0 --system 'Be brief.' "
             "--show-prompt 2>%s", cinfer_bin(), q, errp);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    char *err = read_file(errp, NULL);
    EXPECT_MSG(err && strstr(err, "context full at 64 tokens: dropped the oldest") &&
                   strstr(err, "kept the system prompt"), "%s", err ? err : "");
    /* every prompt still starts with the system prompt; the last has no "a" turn */
    const char *last = err, *p = err;
    int n = 0;
    while (p && (p = strstr(p, "--- prompt ---\n"))) last = p, p++, n++;
    EXPECT_EQ_I(n, 6);
    EXPECT_MSG(last && strstr(last, "Be brief.") && !strstr(last, "<|im_start|>user\na<|im_end|>"), "%s",
               last ? last : "");
    EXPECT(count_lines(out) >= 6);
    free(out);
    free(err);
}

TEST(cli, safetensors_refused_clearly) {
    NEED_SHARED(st_path, "models/tinystories-656k/hf/model.safetensors");
    static const char *cmds[] = {"run", "chat", "compile", "bench", "tokenize"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s %s '%s'%s </dev/null 2>&1 >/dev/null", cinfer_bin(), cmds[i], st_path,
                 !strcmp(cmds[i], "tokenize") ? " hi" : "");
        EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
        EXPECT_MSG(out && count_lines(out) == 1 && strstr(out, "safetensors file") && !strstr(out, "magic"),
                   "%s: %s", cmds[i], out ? out : "");
        free(out);
    }
}

TEST(cli, tokenizer_json_byte_fallback_refused_clearly) {
    NEED_SHARED(tj, "models/tinystories-656k/hf/tokenizer.json");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s tokenize '%s' 'Hello world' 2>&1", cinfer_bin(), tj);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    EXPECT_MSG(out && count_lines(out) == 1 && strstr(out, "SentencePiece-style") &&
                   strstr(out, "only byte-level BPE") && strstr(out, "GGUF"), "%s", out ? out : "");
    free(out);
}

TEST(cli, standalone_refuses_flags_it_cannot_honour) {
    NEED_SHARED(m, STORIES);
    char cmd[4096], *out = NULL, bin[1024], model[1024];
    if (!realpath(cinfer_bin(), bin)) SKIP("%s not built", cinfer_bin());
    if (!realpath(m, model)) SKIP("%s: no real path", m);
    m = model;
    snprintf(cmd, sizeof cmd, "cd %s && %s compile %s --aot -o story", test_tmpdir(), bin, m);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0 && out && strstr(out, "run it as: ./story "), "%s", out ? out : "");
    free(out);
    if (st) return;
    static const char *bad[] = {"--quant int4", "--archspec /nonexistent", "--aot", "--jit"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/story %s %s -n 2 2>&1 >/dev/null", test_tmpdir(), m, bad[i]);
        st = run_cmd(cmd, false, &out);
        EXPECT_MSG(st != 0 && out && count_lines(out) == 1 && strstr(out, "story: "), "%s: exit %d: %s", bad[i],
                   st, out ? out : "");
        free(out);
    }
    /* the precision it runs (the stats line names it: "..., avx2, P | peak RSS") is accepted */
    snprintf(cmd, sizeof cmd, "%s/story %s -n 1 2>&1 >/dev/null | sed -n 's/.*, \\([a-z0-9]*\\) | peak RSS.*/\\1/p'",
             test_tmpdir(), m);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    char prec[32] = "";
    if (out) sscanf(out, "%31s", prec);
    free(out);
    EXPECT_MSG(prec[0], "no precision in the stats line");
    snprintf(cmd, sizeof cmd, "%s/story %s --quant %s -p Once -n 2 --temp 0 2>/dev/null", test_tmpdir(), m, prec);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && !strncmp(out, "Once", 4), "%s: %s", prec, out ? out : "");
    free(out);
    /* its own usage: no flags it refuses */
    snprintf(cmd, sizeof cmd, "%s/story --help", test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "usage: story MODEL") && !strstr(out, "--jit") && !strstr(out, "| --aot") &&
                   !strstr(out, "--archspec") &&
                   !strstr(out, "cinfer run MODEL"), "%s", out ? out : "");
    free(out);
}

TEST(cli, message_wording) {
    NEED_SHARED(m, STORIES);
    int st;
    /* empty --prompt-ids blames the ids, not the vocabulary's BOS */
    char *out = run_out(m, "--prompt-ids '' 2>&1", &st, false);
    EXPECT_EQ_I(st, 1);
    EXPECT_MSG(out && strstr(out, "--prompt-ids: no ids given") && !strstr(out, "adds no BOS"), "%s",
               out ? out : "");
    free(out);
    /* schema-check --help explains --permissive */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s schema-check --help", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "--permissive  ignore"), "%s", out ? out : "");
    free(out);
}
