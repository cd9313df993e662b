/*
 * test_cli.c — the command line as a new user meets it: cached REPO[:FILE]
 * names in every model-taking command, random/explicit seeds, the
 * context-full behaviour of run and chat, clear refusals (safetensors,
 * SentencePiece tokenizer.json, flags a standalone executable cannot honour)
 * and the wording of a few messages.  Runs $CINFER_BIN (cinfer_bin()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf_edit.h"
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

/* serve ARGS in the background until it prints "API at" (30 s at most), then
 * SIGTERM: the shell snippet for cached_names_in_every_model_command. */
#define SERVE_UNTIL_UP(args)                                                                              \
    "serve " args " --port 0 >$T/serve.log 2>&1 & p=$!; i=0; "                                             \
    "while [ $i -lt 300 ] && ! grep -qs 'API at' $T/serve.log; do sleep 0.1; i=$((i+1)); done; "        \
    "kill $p; wait $p; st=$?; cat $T/serve.log; exit $st"

TEST(cli, cached_names_in_every_model_command) {
    NEED_SHARED(m, STORIES);
    NEED_SHARED(q, QWEN);
    const char *xdg = fake_cache(m);
    EXPECT(xdg != NULL);
    if (!xdg) return;
    /* a chat model too: me/chat */
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "mkdir -p %s/cinfer/models/me/chat/main && cp '%s' %s/cinfer/models/me/chat/main/", xdg,
             q, xdg);
    EXPECT_EQ_I(run_cmd(cmd, true, NULL), 0);
    /* each command's output shows it opened the cached file */
    static const struct { const char *args, *want, *want2; } cases[] = {
        {"run me/tiny -p Once -n 3 --temp 0", "Once upon", ""},
        {"inspect me/tiny", "architecture  llama", "stories260K.gguf"},
        {"tokenize me/tiny 'Hello world'", "1 ", ""},
        {"compile me/tiny", "JIT ok", ""},
        /* the bench table names the file and has both tests' rows */
        {"bench me/tiny -p 4 -n 2 -r 1", "| stories260K.gguf ", "pp4"},
        {"bench me/tiny -p 4 -n 2 -r 1", "llama 293K F32", "tg2"},
        /* a conversation: the reply is on stdout, the rendered prompt on stderr */
        {"chat me/chat -n 2 --temp 0 --show-prompt", "<|im_start|>user\nHello<|im_end|>", "--- end ---\n"},
        /* serve until it is up, then SIGTERM: it opened the cached file */
        {SERVE_UNTIL_UP("me/tiny"), "model 'stories260K' (default)", "API at http"},
        {SERVE_UNTIL_UP("--model t=me/tiny"), "model 't'", "API at http"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* (serve: a fresh log, so an old "API at" line cannot end the wait) */
        snprintf(cmd, sizeof cmd, "T=%s; rm -f $T/serve.log; export XDG_CACHE_HOME=%s; %s%s %s", test_tmpdir(), xdg,
                 strncmp(cases[i].args, "chat", 4) ? "" : "printf 'Hello\\n' | ", cinfer_bin(), cases[i].args);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == 0 && out && strstr(out, cases[i].want) && strstr(out, cases[i].want2),
                   "%s: exit %d, want '%s' and '%s' in: %s", cmd, st, cases[i].want, cases[i].want2, out ? out : "");
        free(out);
    }
    /* a name that is not cached says how to get it, in one line */
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
    /* sampling ranges as in run; a model without a chat template is refused at start */
    snprintf(cmd, sizeof cmd, "echo hi | %s chat %s -n 2 --top-p 5", cinfer_bin(), q);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "--top-p 5 is out of range [0, 1]"), "%s", out ? out : "");
    free(out);
    NEED_SHARED(m, STORIES);
    snprintf(cmd, sizeof cmd, "echo hi | %s chat %s -n 2", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "no usable chat template") && strstr(out, "cinfer run"), "%s", out ? out : "");
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

/* Control-token text in a run prompt becomes the token (like llama.cpp's
 * prompts), --no-parse-special keeps it text; a spelt "<s>" is not a second BOS. */
TEST(cli, run_parses_special_tokens) {
    NEED_SHARED(q, QWEN);
    NEED_SHARED(m, STORIES);
    static const char *const how[2] = {"", "--no-parse-special "};
    int st, n_tok[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char args[512];
        snprintf(args, sizeof args, "%s-p '<|im_start|>user Hi<|im_end|><|im_start|>assistant' -n 1 --temp 0 -t 1 "
                 "2>&1 >/dev/null", how[k]);
        char *out = run_out(q, args, &st, false);
        const char *p = out ? strstr(out, "prompt ") : NULL;
        EXPECT_MSG(st == 0 && p && sscanf(p, "prompt %d tok", &n_tok[k]) == 1, "%s", out ? out : "");
        free(out);
    }
    /* 3 control tokens + "user", " Hi", "assistant" vs each spelt in several pieces */
    EXPECT_MSG(n_tok[0] == 6 && n_tok[1] > 12, "parsed %d tokens, literal %d", n_tok[0], n_tok[1]);
    char *out = run_out(m, "-p '<s>Once' -n 1 --temp 0 -t 1 2>&1 >/dev/null", &st, false);
    EXPECT_MSG(out && strstr(out, "prompt 2 tok"), "%s", out ? out : "");
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

/* A safetensors file inside a Hugging Face folder stands for the folder
 * (test_hf.c); one without a config.json next to it is refused. */
TEST(cli, safetensors_refused_clearly) {
    NEED_SHARED(src, "models/tinystories-656k/hf/model.safetensors");
    char st_path[1024], abs[4096];
    snprintf(st_path, sizeof st_path, "%s/lone.safetensors", test_tmpdir());
    if (!realpath(src, abs) || (symlink(abs, st_path) && errno != EEXIST)) SKIP("cannot link %s", src);
    static const char *cmds[] = {"run", "chat", "compile", "bench", "tokenize"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s %s '%s'%s </dev/null 2>&1 >/dev/null", cinfer_bin(), cmds[i], st_path,
                 !strcmp(cmds[i], "tokenize") ? " hi" : "");
        EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
        EXPECT_MSG(out && count_lines(out) == 1 && strstr(out, "safetensors file without a config.json") &&
                       !strstr(out, "magic"),
                   "%s: %s", cmds[i], out ? out : "");
        free(out);
    }
}

/* SentencePiece-style (byte_fallback) tokenizer.json files tokenize as the
 * HF tokenizers library does (more cases: hf/tokenizer_json_matches_hf_tokenizers). */
TEST(cli, tokenizer_json_sentencepiece_style) {
    NEED_SHARED(tj, "models/tinystories-656k/hf/tokenizer.json");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s tokenize '%s' 'Once upon a time' 2>&1", cinfer_bin(), tj);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_STR_EQ(out, "1 80 147 201 282 57\n");
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

/* ---- issue 16: everyday use ------------------------------------------------------------------ */

/* The prompt from -f FILE, -f -, a pipe and a redirected file: the same text as -p. */
TEST(cli, prompt_from_file_stdin_pipe) {
    NEED_SHARED(m, STORIES);
    char path[600], cmd[2048];
    snprintf(path, sizeof path, "%s/prompt.txt", test_tmpdir());
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL);
    if (!f) return;
    fputs("Once upon a time\n", f); /* the file's newline ends the file, not the prompt */
    fclose(f);
    int st;
    char *want = run_out(m, "-p 'Once upon a time' -n 12 --temp 0 2>/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    const char *forms[] = {"%s run %s -f %s -n 12 --temp 0", "%s run %s -f - -n 12 --temp 0 < %s",
                           "cat %3$s | %1$s run %2$s -n 12 --temp 0", "%s run %s -n 12 --temp 0 < %s"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *out = NULL;
        snprintf(cmd, sizeof cmd, forms[i], cinfer_bin(), m, path);
        strncat(cmd, " 2>/dev/null", sizeof cmd - strlen(cmd) - 1);
        EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
        EXPECT_MSG(out && want && !strcmp(out, want), "%s:\n%s\nexpected\n%s", cmd, out ? out : "", want ? want : "");
        free(out);
    }
    /* stdin that is not a pipe or a file (a terminal, /dev/null) is not read */
    char *out = run_out(m, "-n 3 --temp 0 < /dev/null 2>/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    free(out);
    out = run_out(m, "-p x -f /nonexistent.txt 2>&1", &st, false);
    EXPECT_MSG(st == 2 && out && strstr(out, "one of -p, -f and --prompt-ids"), "%s", out ? out : "");
    free(out);
    out = run_out(m, "-f /nonexistent.txt 2>&1", &st, false);
    EXPECT_MSG(st == 1 && out && strstr(out, "/nonexistent.txt: No such file"), "%s", out ? out : "");
    free(out);
    free(want);
}

/* --stop STR (repeatable): generation ends before the first one produced, which is not printed. */
TEST(cli, run_stop_strings) {
    NEED_SHARED(m, STORIES);
    int st;
    char *full = run_out(m, "-p 'Once upon a time' -n 40 --temp 0 2>/dev/null", &st, false);
    /* stories260K's greedy story names a girl, Lily */
    const char *lily = full ? strstr(full, "Lily") : NULL;
    EXPECT_MSG(lily != NULL, "%s", full ? full : "");
    if (!lily) return free(full);
    char *out = run_out(m, "-p 'Once upon a time' -n 40 --temp 0 --stop Lily 2>/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    size_t keep = (size_t)(lily - full);
    EXPECT_MSG(out && !strncmp(out, full, keep) && !strstr(out, "Lily"), "%s", out ? out : "");
    free(out);
    /* the earlier of two stop strings wins */
    out = run_out(m, "-p 'Once upon a time' -n 40 --temp 0 --stop Lily --stop girl 2>/dev/null", &st, false);
    EXPECT_MSG(out && !strstr(out, "girl") && !strstr(out, "Lily"), "%s", out ? out : "");
    free(out);
    out = run_out(m, "-p x --stop '' 2>&1", &st, false);
    EXPECT_MSG(st == 2 && out && strstr(out, "--stop"), "%s", out ? out : "");
    free(out);
    free(full);
}

/* Ctrl-C stops the generation and the stats line still comes (exit 130). */
TEST(cli, run_ctrl_c_keeps_stats) {
    NEED_SHARED(q, QWEN);
    char cmd[2048], *out = NULL;
    /* 16k tokens of the 151k-vocabulary model take seconds on any machine; SIGINT after 0.7 s */
    snprintf(cmd, sizeof cmd,
             "%s run %s -p Hi -n 100000 -c 16384 --temp 0 -t 1 >/dev/null 2>%s/err & p=$!; sleep 0.7; kill -INT $p; wait $p; "
             "echo rc=$?; cat %s/err", cinfer_bin(), q, test_tmpdir(), test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "rc=130") && strstr(out, "interrupted (Ctrl-C)") && strstr(out, "cinfer: open ") &&
               strstr(out, "gen "), "%s", out ? out : "");
    free(out);
}

/* Warnings: -t above the CPUs, -c above the training context, a BPE GGUF without tokenizer.ggml.pre. */
TEST(cli, settings_warnings) {
    NEED_SHARED(m, STORIES);
    NEED_SHARED(q, QWEN);
    char qcopy[1024];
    snprintf(qcopy, sizeof qcopy, "%s", q);
    int st;
    char args[128], want_t[64];
    snprintf(args, sizeof args, "-p x -n 1 -t %d -c 4096 2>&1 >/dev/null", cli_n_cpus() + 1);
    snprintf(want_t, sizeof want_t, "warning: -t %d is more threads than the", cli_n_cpus() + 1);
    char *out = run_out(m, args, &st, false);
    EXPECT_EQ_I(st, 0);
    EXPECT_MSG(out && strstr(out, want_t) &&
               strstr(out, "warning: -c 4096 is above the model's training context (2048 tokens)"), "%s",
               out ? out : "");
    free(out);
    out = run_out(m, "-p x -n 1 -t 1 2>&1 >/dev/null", &st, false);
    EXPECT_MSG(out && !strstr(out, "warning"), "%s", out ? out : "");
    free(out);
    char nopre[600];
    snprintf(nopre, sizeof nopre, "%s/nopre.gguf", test_tmpdir());
    const char *drop[] = {"tokenizer.ggml.pre", NULL};
    if (gguf_edit_copy(qcopy, nopre, drop, NULL, NULL, 0)) return;
    out = run_out(nopre, "-p x -n 1 2>&1 >/dev/null", &st, false);
    EXPECT_EQ_I(st, 0);
    EXPECT_MSG(out && strstr(out, "warning: this GGUF has no tokenizer.ggml.pre"), "%s", out ? out : "");
    free(out);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s tokenize %s hello 2>&1 >/dev/null", cinfer_bin(), nopre);
    run_cmd(cmd, false, &out);
    EXPECT_MSG(out && strstr(out, "cinfer tokenize: warning: this GGUF has no tokenizer.ggml.pre"), "%s", out ? out : "");
    free(out);
    out = run_out(qcopy, "-p x -n 1 2>&1 >/dev/null", &st, false);
    EXPECT_MSG(out && !strstr(out, "tokenizer.ggml.pre"), "%s", out ? out : "");
    free(out);
}

/* --aot with no C compiler: a notice, then the JIT runs; compile --aot says what is missing. */
TEST(cli, aot_without_compiler) {
    NEED_SHARED(m, STORIES);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "env -u CC PATH=/nonexistent XDG_CACHE_HOME=%s/aot %s run %s --aot -p Once -n 4 --temp 0 2>&1",
             test_tmpdir(), cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "--aot needs a C compiler and 'cc' is not installed") && strstr(out, "using the JIT") &&
               strstr(out, "Once upon a time") && strstr(out, "(jit "), "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "CC=/nonexistent/gcc XDG_CACHE_HOME=%s/aot %s compile %s --aot 2>&1", test_tmpdir(),
             cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    EXPECT_MSG(out && strstr(out, "no C compiler") && strstr(out, "/nonexistent/gcc"), "%s", out ? out : "");
    free(out);
}

/* Every subcommand answers --help on stdout with exit 0; `cinfer help CMD` too. */
TEST(cli, help_for_every_command) {
    const char *cmds[] = {"run", "chat", "serve", "pull", "list", "rm", "inspect", "tokenize", "bench", "compile",
                          "quantize", "schema-check"};
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s --help", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "cinfer %s ", cmds[i]);
        EXPECT_MSG(out && strstr(out, want), "cinfer --help lacks %s", cmds[i]);
    }
    free(out);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --help 2>/dev/null", cinfer_bin(), cmds[i]);
        EXPECT_MSG(run_cmd(cmd, false, &out) == 0 && out && strstr(out, "usage: cinfer ") && strstr(out, cmds[i]),
                   "%s: %s", cmd, out ? out : "");
        free(out);
        snprintf(cmd, sizeof cmd, "%s help %s 2>/dev/null", cinfer_bin(), cmds[i]);
        EXPECT_MSG(run_cmd(cmd, false, &out) == 0 && out && strstr(out, "usage: cinfer "), "%s", cmd);
        free(out);
    }
}

/* Progress is for terminals: none in a redirected stderr; the line's text. */
TEST(cli, progress_only_on_a_terminal) {
    char line[256];
    cli_progress_format(line, sizeof line, "prompt", "tok", 500, 1000, 2000);
    EXPECT_STR_EQ(line, "prompt  500/1000 tok  50%  250 tok/s  ETA 0:02");
    cli_progress_format(line, sizeof line, "repacking weights", "MiB", 12.5, 0, 1000);
    EXPECT_STR_EQ(line, "repacking weights  12.5 MiB  12.5 MiB/s");
    char eta[32];
    cli_fmt_eta(3725, eta, sizeof eta);
    EXPECT_STR_EQ(eta, "1:02:05");
    cli_fmt_eta(-1, eta, sizeof eta);
    EXPECT_STR_EQ(eta, "--:--");
    NEED_SHARED(q, QWEN);
    char cmd[2048], *out = NULL;
    /* a 3000-token prompt, repacked weights: stderr is a file here, so no \r lines */
    snprintf(cmd, sizeof cmd, "python3 -c \"print('word ' * 3000)\" | %s run %s -n 1 -c 4096 --quant int8 2>&1 >/dev/null",
             cinfer_bin(), q);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && !strchr(out, '\r') && !strstr(out, "ETA") && strstr(out, "prompt 300"), "%s", out ? out : "");
    free(out);
}

/* The small ones: --dump-logits to a bad path, schema-check -q, quantize on safetensors,
 * inspect on a .giw, a truncated file and a prompt over the context. */
TEST(cli, small_messages) {
    NEED_SHARED(m, STORIES);
    int st;
    char *out = run_out(m, "-p x -n 1 --dump-logits /nonexistent/d.json 2>&1 >/dev/null", &st, false);
    EXPECT_EQ_I(st, 1);
    EXPECT_MSG(out && !strcmp(out, "cinfer run: --dump-logits /nonexistent/d.json: No such file or directory\n"), "'%s'",
               out ? out : "");
    free(out);
    char cmd[8192], p[600];
    snprintf(p, sizeof p, "%s", test_tmpdir());
    snprintf(cmd, sizeof cmd, "echo '{\"type\":\"integer\"}' > %s/s.json && echo '\"x\"' > %s/bad.json && "
             "%s schema-check %s/s.json %s/bad.json -q; echo rc=$?", p, p, cinfer_bin(), p, p);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && !strcmp(out, "rc=1\n"), "'%s'", out ? out : "");
    free(out);
    const char *st_model = shared_path("models/tinystories-656k/hf/model.safetensors");
    if (st_model) {
        snprintf(cmd, sizeof cmd, "%s quantize %s %s/q.gguf --type q8_0 2>&1", cinfer_bin(), st_model, p);
        EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
        EXPECT_MSG(out && strstr(out, "safetensors") && strstr(out, "convert_hf_to_gguf.py"), "%s", out ? out : "");
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s compile %s --quant int8 -o %s/m.giw 2>/dev/null && %s inspect %s/m.giw", cinfer_bin(),
             m, p, cinfer_bin(), p);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "file type     cinfer .giw, weights repacked for --quant int8") && !strstr(out, "ALL_F32 (0)"),
               "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "head -c 400000 %s > %s/cut.gguf && %s run %s/cut.gguf -p x -n 1 2>&1", m, p, cinfer_bin(), p);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    EXPECT_MSG(out && strstr(out, "truncated") && strstr(out, "download it again"), "%s", out ? out : "");
    free(out);
    out = run_out(m, "-p 'Once upon a time there was a little girl who liked to play' -c 8 -n 4 2>&1 >/dev/null", &st, false);
    EXPECT_EQ_I(st, 1);
    EXPECT_MSG(out && strstr(out, "does not fit the context of 8: raise it with -c") && strstr(out, "trained for 2048"),
               "%s", out ? out : "");
    free(out);
    /* an endless prompt file is refused at a bound, not read until memory runs out */
    out = run_out(m, "-f /dev/zero -n 1 2>&1 >/dev/null", &st, false);
    EXPECT_EQ_I(st, 1);
    EXPECT_MSG(out && strstr(out, "/dev/zero: more than 256 MiB: not a prompt"), "%s", out ? out : "");
    free(out);
    /* serve: an unknown flag is unknown (not "needs a value"), a valued one without its value says so */
    snprintf(cmd, sizeof cmd, "%s serve %s --verbose", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && !strcmp(out, "cinfer serve: unknown option '--verbose' (see cinfer serve --help)\n"), "'%s'",
               out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve %s --quant", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "--quant needs a value"), "'%s'", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve %s --quant int3", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "int3"), "'%s'", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve %s --cache-type-k q9", cinfer_bin(), m);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "--cache-type-k") && strstr(out, "q9") && !strstr(out, "unknown option"), "'%s'",
               out ? out : "");
    free(out);
}

/* serve on a non-loopback address without --api-key warns. */
TEST(cli, serve_open_host_warns) {
    NEED_SHARED(m, STORIES);
    char cmd[2048], *out = NULL;
    /* serve until it says where it listens (at most 20 s), then SIGTERM; each run
     * its own log, created before the server starts (a shared one could still
     * hold the previous run's "API at" when the loop first looks) */
    static const char RUN[] = ": > %s/%s; %s serve %s --host 0.0.0.0 %s--port 0 --no-webui 2>%s/%s & p=$!; i=0; "
                              "while ! grep -q 'API at' %s/%s && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; "
                              "kill $p; wait $p; cat %s/%s";
    const char *t = test_tmpdir();
    snprintf(cmd, sizeof cmd, RUN, t, "open.err", cinfer_bin(), m, "", t, "open.err", t, "open.err", t, "open.err");
    run_cmd(cmd, false, &out);
    EXPECT_MSG(out && strstr(out, "warning: listening on 0.0.0.0 without --api-key"), "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, RUN, t, "keyed.err", cinfer_bin(), m, "--api-key k ", t, "keyed.err", t, "keyed.err", t,
             "keyed.err");
    run_cmd(cmd, false, &out);
    EXPECT_MSG(out && strstr(out, "API at") && !strstr(out, "warning"), "%s", out ? out : "");
    free(out);
}

/* On a terminal (tmux) a long prompt evaluation shows its progress line. */
TEST(cli, progress_on_a_terminal) {
    NEED_SHARED(q, QWEN);
    NEED_TOOL("tmux", "tmux");
    const char *t = test_tmpdir();
    char cmd[4096], *out = NULL;
    /* 16k tokens take seconds on any machine; the line shows after CLI_PROGRESS_DELAY_MS */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"print('word ' * 16000)\" > %s/long.txt && tmux -S %s/p.sock new-session -d -x 160 -y 10 "
             "'%s run %s -f %s/long.txt -n 1 -c 16400 -t 1 >/dev/null; sleep 30' && i=0; "
             "while ! tmux -S %s/p.sock capture-pane -p | grep -q 'ETA' && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
             "tmux -S %s/p.sock capture-pane -p; tmux -S %s/p.sock kill-server",
             t, t, cinfer_bin(), q, t, t, t, t);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "prompt  ") && strstr(out, "/16001 tok  ") && strstr(out, " tok/s  ETA "), "%s",
               out ? out : "");
    free(out);
}
