/*
 * chat.c — `cinfer chat MODEL`: a conversation through the model's own chat
 * template, with streaming replies.
 *
 * On a terminal it is interactive: a one-line banner, then "> " prompts
 * read with libedit (BSD-licensed line editing: arrow keys, Emacs keys,
 * history search, Tab completion of the commands), with the history kept
 * across sessions in $XDG_CACHE_HOME/cinfer/chat_history; the commands are
 * listed by /help (CHAT_COMMANDS).  Ctrl-C stops the current reply (and
 * keeps the chat) or clears the line being typed; Ctrl-D on an empty line
 * or /exit leaves.  When stdin is not a terminal each input line is one
 * user message and each reply is printed on one line block, so the command
 * can be driven through a pipe.
 *
 * Each turn renders the whole conversation; the session reuses the KV cache
 * of the previous turns' prefix, so only the new text is evaluated.
 * /save writes the session (tokens + KV cache) to FILE and the messages to
 * FILE.json; /load restores both.
 */
#include <cJSON.h>
#include <editline/readline.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"
#include "formats/gguf_write.h"

static volatile sig_atomic_t g_interrupt;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
}

typedef struct {
    char *text;
    size_t len, cap;
    int failed;
} reply_buf;

static int on_piece(const char *piece, size_t len, int32_t token, void *user) {
    reply_buf *r = user;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    if (r->len + len + 1 > r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 1024;
        while (nc < r->len + len + 1) nc *= 2;
        char *nt = realloc(r->text, nc);
        if (!nt) {
            r->failed = 1;
            return 1;
        }
        r->text = nt;
        r->cap = nc;
    }
    memcpy(r->text + r->len, piece, len);
    r->len += len;
    r->text[r->len] = 0;
    return g_interrupt != 0;
}

typedef struct {
    cinfer_message *m;
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 16;
        cinfer_message *nm = realloc(c->m, nc * sizeof *nm);
        if (!nm) return -1;
        c->m = nm;
        c->cap = nc;
    }
    char *r = strdup(role), *t = strdup(content);
    if (!r || !t) {
        free(r);
        free(t);
        return -1;
    }
    c->m[c->n++] = (cinfer_message){r, t};
    return 0;
}

static void conv_clear(conversation *c, size_t keep) {
    while (c->n > keep) {
        c->n--;
        free((char *)c->m[c->n].role);
        free((char *)c->m[c->n].content);
    }
}

/* Tokens of the conversation's prompt as cinfer_chat renders it (+1 for a
 * BOS the vocabulary may add); SIZE_MAX when it cannot be rendered. */
static size_t conv_prompt_tokens(cinfer_model *m, const conversation *c) {
    char *prompt, err[256];
    if (cinfer_chat_prompt(m, c->m, c->n, 1, &prompt, err, sizeof err)) return SIZE_MAX;
    size_t len = strlen(prompt), n = 0, cap = len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    int bad = !ids || cinfer_tokenize(m, prompt, len, 0, 1, ids, cap, &n);
    free(ids);
    cinfer_free(prompt);
    return bad ? SIZE_MAX : n + 1;
}

/* Tokens of c's first keep messages followed by its messages from index
 * start on (a view: nothing is copied but the pointers); SIZE_MAX when it
 * cannot be rendered or on out of memory. */
static size_t conv_tail_tokens(cinfer_model *m, const conversation *c, size_t keep, size_t start) {
    conversation v = {malloc((keep + c->n - start) * sizeof *v.m), keep + c->n - start, 0};
    if (!v.m) return SIZE_MAX;
    memcpy(v.m, c->m, keep * sizeof *v.m);
    memcpy(v.m + keep, c->m + start, (c->n - start) * sizeof *v.m);
    size_t n = conv_prompt_tokens(m, &v);
    free(v.m);
    return n;
}

/* Make the conversation fit n_ctx with room for a reply (a quarter of the
 * context, at most max_tokens): drop the oldest turns, keeping the system
 * prompt (`keep` messages) and the new user message; say so on stderr.  The
 * turns to drop are found by bisection over the turn starts (the token count
 * only falls as turns go), so a long loaded conversation renders O(log n)
 * times, not once per dropped turn. */
static void conv_fit(cinfer_model *m, conversation *c, size_t keep, int n_ctx, int max_tokens) {
    size_t room = (size_t)n_ctx / 4;
    if (max_tokens > 0 && (size_t)max_tokens < room) room = (size_t)max_tokens;
    if (room < 1) room = 1;
    if (c->n < keep + 2) return;
    size_t n_tok = conv_prompt_tokens(m, c);
    if (n_tok == SIZE_MAX || n_tok + room <= (size_t)n_ctx) return;
    /* turn starts after keep: a user message, never the last message (the one being answered);
     * dropping up to starts[i] leaves the tail from starts[i] */
    size_t *starts = malloc(c->n * sizeof *starts), n_starts = 0;
    if (!starts) return;
    for (size_t i = keep + 1; i < c->n; i++)
        if (!strcmp(c->m[i].role, "user") || i == c->n - 1) starts[n_starts++] = i;
    size_t lo = 0, hi = n_starts; /* the answer is in [lo, hi); hi: even the last start overflows */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, t = conv_tail_tokens(m, c, keep, starts[mid]);
        if (t != SIZE_MAX && t + room <= (size_t)n_ctx) hi = mid;
        else lo = mid + 1;
    }
    size_t cut = n_starts ? starts[lo < n_starts ? lo : n_starts - 1] : keep;
    free(starts);
    size_t dropped = cut - keep;
    for (size_t i = keep; i < cut; i++) {
        free((char *)c->m[i].role);
        free((char *)c->m[i].content);
    }
    memmove(c->m + keep, c->m + cut, (c->n - cut) * sizeof *c->m);
    c->n -= dropped;
    if (dropped)
        fprintf(stderr, "(context full at %d tokens: dropped the oldest %zu message%s%s)\n", n_ctx, dropped,
                dropped == 1 ? "" : "s", keep ? ", kept the system prompt" : "");
}

static int conv_save(const conversation *c, const char *path) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < c->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", c->m[i].role);
        cJSON_AddStringToObject(o, "content", c->m[i].content);
        cJSON_AddItemToArray(arr, o);
    }
    char *s = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    /* atomic, never through a symlink (formats/gguf_write.h gguf_out) */
    gguf_out o;
    char e[512];
    int ok = s && !gguf_out_open(&o, path, ".tmp", NULL, e, sizeof e);
    if (ok) {
        ok = fputs(s, o.w.f) >= 0 && !gguf_out_close(&o) && !gguf_out_commit(&o, e, sizeof e);
        gguf_out_abort(&o);
    }
    free(s);
    return ok ? 0 : -1;
}

enum { CONV_FILE_MAX = 256 << 20 }; /* a saved conversation's messages file */

static int conv_load(conversation *c, const char *path, char *err, size_t err_len) {
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(err, err_len, "%.512s: %s", path, strerror(errno)), -1;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    int ch;
    long n = 0;
    while (mem && n <= CONV_FILE_MAX && (ch = fgetc(f)) != EOF) fputc(ch, mem), n++;
    fclose(f);
    if (mem) fclose(mem);
    if (n > CONV_FILE_MAX) {
        free(buf);
        return snprintf(err, err_len, "%.512s: larger than %d MiB: not a saved conversation", path,
                        CONV_FILE_MAX >> 20), -1;
    }
    cJSON *arr = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return snprintf(err, err_len, "%.512s: not a message list", path), -1;
    }
    conv_clear(c, 0);
    cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(o, "role"));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(o, "content"));
        if (!role || !content || conv_add(c, role, content)) {
            cJSON_Delete(arr);
            conv_clear(c, 0);
            return snprintf(err, err_len, "%.512s: bad message", path), -1;
        }
    }
    cJSON_Delete(arr);
    return 0;
}

/* Every command: /help prints this list, Tab completes the names. */
static const struct {
    const char *name, *args, *what;
} CHAT_COMMANDS[] = {
    {"/help", "", "this list"},
    {"/reset", "", "forget the conversation (the system prompt stays)"},
    {"/save", " FILE", "save the conversation: KV cache to FILE, messages to FILE.json"},
    {"/load", " FILE", "load a conversation saved with /save"},
    {"/exit", "", "leave (also /quit, or Ctrl-D on an empty line)"},
};
enum { N_CHAT_COMMANDS = sizeof CHAT_COMMANDS / sizeof CHAT_COMMANDS[0] };

static void print_help(FILE *f) {
    fprintf(f, "commands:\n");
    for (int i = 0; i < N_CHAT_COMMANDS; i++)
        fprintf(f, "  %s%-*s %s\n", CHAT_COMMANDS[i].name, (int)(12 - strlen(CHAT_COMMANDS[i].name)),
                CHAT_COMMANDS[i].args, CHAT_COMMANDS[i].what);
    fprintf(f, "keys: arrows and Emacs keys edit, Up/Down and Ctrl-R search the history (kept across\n"
               "  sessions), Tab completes a command, Ctrl-C stops a reply, Ctrl-D on an empty line leaves\n");
}

/* Tab: complete a /command at the start of the line; nothing else. */
static char *command_generator(const char *text, int state) {
    static int next;
    if (!state) next = 0;
    while (next < N_CHAT_COMMANDS) {
        const char *n = CHAT_COMMANDS[next++].name;
        if (!strncmp(n, text, strlen(text))) return strdup(n);
    }
    return NULL;
}
static char **complete(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1; /* no file-name completion of chat text */
    return start == 0 && text[0] == '/' ? rl_completion_matches(text, command_generator) : NULL;
}

static int open_progress(void *user, const char *stage, double done, double total) {
    cli_progress *p = user;
    (void)stage;
    p->total = total / p->scale;
    cli_progress_update(p, done);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: cinfer chat MODEL [--system TEXT] [-n N] [--temp T] [--top-k K] [--top-p P]\n"
               "                   [--min-p P] [--repeat-penalty R] [--repeat-penalty-all] [--seed S]\n"
               "                   [-t THREADS] [-c N_CTX] [--aot] [--show-prompt]\n"
               "                   [--quant auto|native|f32|int8|int8int8|int4|int4mix] [--mem BYTES]\n"
               "                   [--device cpu|cuda[:N]] [--cache-type-k T] [--cache-type-v T] [-v]\n"
               "  MODEL: a GGUF or .giw file, or REPO[:FILE] pulled with cinfer pull.\n"
               "  interactive on a terminal: line editing and a history kept in $XDG_CACHE_HOME/cinfer/\n"
               "  chat_history; /help lists the commands (/reset, /save FILE, /load FILE, /exit);\n"
               "  Ctrl-C stops a reply, Ctrl-D leaves;\n"
               "  otherwise one user message per input line, one reply per message.\n"
               "  --seed S: default random (printed with -v), -1 = random, S = reproducible.\n"
               "  --repeat-penalty R leaves end-of-turn and control tokens alone; --repeat-penalty-all\n"
               "  penalizes them too (llama.cpp's behaviour).\n"
               "  When the conversation outgrows -c, the oldest turns are dropped (the system prompt stays).\n"
               "  --mem BYTES (480M, 2G): a memory budget; the ladder's steps go to stderr (docs/memory.md).\n"
               "  --cache-type-k/-v T: KV cache types f16 (default), f32, q8_0, q4_0 (docs/memory.md).\n");
}

/* How chat_main gets its model: `cinfer chat MODEL` compiles one (and
 * resolves cached names); a bundle maps its own (cli_chat_bundle), so it
 * links neither the compiler nor the model cache. */
typedef int (*chat_open_fn)(const char *model, const cinfer_model_options *mo, const cli_linked *lk,
                            cinfer_model **m, char *err, size_t err_len);

static int open_compiled(const char *model, const cinfer_model_options *mo, const cli_linked *lk,
                         cinfer_model **m, char *err, size_t err_len) {
    (void)lk;
    char cached[4096];
    if (cli_resolve_model("chat", &model, cached, sizeof cached, CLI_MODEL_RUN)) return err[0] = 0, -1;
    return cinfer_model_open(model, mo, m, err, err_len);
}

static int open_bundle(const char *model, const cinfer_model_options *mo, const cli_linked *lk,
                       cinfer_model **m, char *err, size_t err_len) {
    (void)model;
    if (mo->compile == CINFER_AOT || mo->precision || mo->device)
        return snprintf(err, err_len, "--aot, --quant and --device are not available in a bundle (its forward "
                        "pass, precision and device are built in)"), -1;
    return cinfer_model_open_linked_at(lk->path, lk->offset, lk->n_bytes, lk->describe, lk->forward,
                                       m, err, err_len);
}

static int chat_main(int argc, char **argv, const cli_linked *lk, chat_open_fn open_model) {
    const char *model = NULL, *system = NULL;
    cinfer_gen_options go = {.max_tokens = 512, .temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                             .min_p = 0.05f, .seed = cli_random_seed()};
    cinfer_session_options so = {0};
    cinfer_model_options mo = {0};
    int show_prompt = 0, verbose = 0, seed_random = 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return usage(stdout), 0;
        else if (!strcmp(f, "--aot")) mo.compile = CINFER_AOT;
        else if (!strcmp(f, "--show-prompt")) show_prompt = 1;
        else if (!strcmp(f, "-v") || !strcmp(f, "--verbose")) verbose = 1;
        else if (v && !strcmp(f, "--system")) system = argv[++i];
        else if (v && !strcmp(f, "-n")) go.max_tokens = (int)strtol(argv[++i], &end, 10);
        else if (v && !strcmp(f, "--temp")) go.temperature = strtof(argv[++i], &end);
        else if (v && !strcmp(f, "--top-k")) go.top_k = (int)strtol(argv[++i], &end, 10);
        else if (v && !strcmp(f, "--top-p")) go.top_p = strtof(argv[++i], &end);
        else if (v && !strcmp(f, "--min-p")) go.min_p = strtof(argv[++i], &end);
        else if (v && !strcmp(f, "--repeat-penalty")) go.repeat_penalty = strtof(argv[++i], &end);
        else if (!strcmp(f, "--repeat-penalty-all")) go.repeat_penalty_all = 1;
        else if (v && !strcmp(f, "--seed")) {
            if (cli_parse_seed(argv[++i], &go.seed, &seed_random))
                return fprintf(stderr, "cinfer chat: --seed: '%s' is not a seed (0..18446744073709551615, "
                               "or -1 = random)\n", argv[i]), 2;
        }
        else if (v && !strcmp(f, "-t")) so.n_threads = (int)strtol(argv[++i], &end, 10);
        else if (v && !strcmp(f, "-c")) so.n_ctx = (int)strtol(argv[++i], &end, 10);
        else if (v && !strcmp(f, "--quant")) {
            if ((mo.precision = cli_parse_precision("cinfer chat", argv[++i])) < 0) return 2;
        } else if (v && !strcmp(f, "--device")) {
            if (cli_parse_device("cinfer chat", argv[++i], &mo.device, &mo.device_index)) return 2;
        } else if (v && !strcmp(f, "--mem") && !lk) {
            if (cli_parse_bytes("cinfer chat", argv[++i], &mo.mem_bytes)) return 2;
        } else if (v && (!strcmp(f, "--cache-type-k") || !strcmp(f, "-ctk"))) {
            if (cli_parse_cache_type("cinfer chat", "--cache-type-k", argv[++i], &so.cache_type_k)) return 2;
        } else if (v && (!strcmp(f, "--cache-type-v") || !strcmp(f, "-ctv"))) {
            if (cli_parse_cache_type("cinfer chat", "--cache-type-v", argv[++i], &so.cache_type_v)) return 2;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer chat: unknown or incomplete option '%s'\n", f);
            return usage(stderr), 2;
        } else if (!model && !lk) model = f;
        else return fprintf(stderr, "cinfer chat: unexpected argument '%s'\n", f), 2;
        if (end && *end) return fprintf(stderr, "cinfer chat: %s: bad number '%s'\n", f, argv[i]), 2;
        if (go.max_tokens < 0 || go.temperature < 0 || so.n_threads < 0 || so.n_ctx < 0)
            return fprintf(stderr, "cinfer chat: %s: must be >= 0\n", f), 2;
    }
    if (!model && !lk) return usage(stderr), 2;
    if (go.top_p > 1 || go.min_p < 0 || go.min_p > 1)
        return fprintf(stderr, "cinfer chat: --%s %g is out of range [0, 1]\n", go.top_p > 1 ? "top-p" : "min-p",
                       (double)(go.top_p > 1 ? go.top_p : go.min_p)), 2;
    if (go.top_p < 0 || go.top_k < 0 || go.repeat_penalty < 0)
        return fprintf(stderr, "cinfer chat: --top-p, --top-k and --repeat-penalty must be >= 0\n"), 2;

    char err[1024];
    if (verbose) fprintf(stderr, "cinfer chat: seed %llu%s\n", (unsigned long long)go.seed,
                         seed_random ? " (random; --seed N repeats this chat)" : "");
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    conversation conv = {0};
    reply_buf reply = {0};
    int rc = 1, interactive = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    char history[4096];
    int have_history = 0;
    struct sigaction sa = {0}, old_sa;
    cli_progress prog;
    cli_progress_begin(&prog, "repacking weights", "MiB", 0, 1048576);
    mo.progress = open_progress;
    mo.progress_user = &prog;
    err[0] = 0;
    mo.n_ctx = so.n_ctx;
    mo.n_threads = so.n_threads;
    mo.cache_type_k = so.cache_type_k;
    mo.cache_type_v = so.cache_type_v;
    int orc = open_model(model, &mo, lk, &m, err, sizeof err);
    cli_progress_end(&prog);
    if (!orc && cli_refuse_encoder("cinfer chat", m, model)) goto done;
    if (!orc && mo.mem_bytes) {
        cli_print_budget("cinfer chat", m, verbose);
        so.n_ctx = 0; /* the context the budget chose */
        so.cache_type_k = so.cache_type_v = 0; /* and the cache types */
    }
    if (orc || cinfer_session_new(m, &so, &s, err, sizeof err)) {
        if (err[0]) fprintf(stderr, "cinfer chat: %s\n", err);
        goto done;
    }
    cli_warn_settings("cinfer chat", m, so.n_ctx, so.n_threads);
    { /* a model that cannot render a conversation is refused now, not at every message */
        char *probe = NULL;
        const cinfer_message hello = {"user", "hi"};
        if (cinfer_chat_prompt(m, &hello, 1, 1, &probe, err, sizeof err)) {
            fprintf(stderr, "cinfer chat: %s; for plain text use cinfer run %s -p TEXT\n", err,
                    lk ? "" : model);
            goto done;
        }
        cinfer_free(probe);
    }
    if (system && conv_add(&conv, "system", system)) goto oom;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old_sa); /* no SA_RESTART: Ctrl-C at the prompt returns from the read */
    if (interactive) {
        const char *slash = strrchr(model, '/');
        fprintf(stderr, "cinfer chat: %s (%s, %d-token context, %s) - /help for commands, Ctrl-D to leave\n",
                slash ? slash + 1 : model, cinfer_model_arch(m), cinfer_session_n_ctx(s),
                cinfer_precision_name(cinfer_model_precision(m)));
        rl_readline_name = "cinfer";
        rl_attempted_completion_function = complete;
        using_history();
        stifle_history(1000);
        if (!cli_cache_file("chat_history", history, sizeof history)) {
            have_history = 1;
            (void)read_history(history); /* absent the first time */
        }
    }

    for (;;) {
        g_interrupt = 0;
        ssize_t n;
        if (interactive) {
            free(line);
            line = readline("> ");
            line_cap = 0;
            if (!line) {
                if (g_interrupt) { /* Ctrl-C while typing: a fresh line */
                    fputc('\n', stdout);
                    continue;
                }
                fputc('\n', stdout); /* Ctrl-D: the shell's prompt starts on a line of its own */
                fflush(stdout);
                break;
            }
            n = (ssize_t)strlen(line);
            if (n && strspn(line, " \t") < (size_t)n) {
                add_history(line);
                if (have_history) (void)write_history(history);
            }
        } else {
            n = getline(&line, &line_cap, stdin);
            if (n < 0) break; /* EOF */
        }
        while (n > 0 && line[n - 1] && strchr(" \t\r\n", line[n - 1])) line[--n] = 0; /* "/help " after Tab */
        if (n == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conv_clear(&conv, system ? 1 : 0);
            cinfer_session_reset(s);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
            const char *path = line + 6;
            char json_path[4200];
            snprintf(json_path, sizeof json_path, "%s.json", path);
            int bad;
            if (line[1] == 's')
                bad = cinfer_session_save(s, path, err, sizeof err) ||
                      (conv_save(&conv, json_path) && snprintf(err, sizeof err, "%s: write failed", json_path));
            else { /* both halves or neither: the conversation changes only when the KV cache loaded too */
                conversation loaded = {0};
                bad = conv_load(&loaded, json_path, err, sizeof err) || cinfer_session_load(s, path, err, sizeof err);
                conversation *drop = bad ? &loaded : &conv;
                conv_clear(drop, 0);
                free(drop->m);
                if (!bad) conv = loaded;
            }
            if (bad) fprintf(stderr, "cinfer chat: %s\n", err);
            else fprintf(stderr, "(%s %s)\n", line[1] == 's' ? "saved to" : "loaded", path);
            continue;
        }
        if (!strcmp(line, "/save") || !strcmp(line, "/load")) {
            fprintf(stderr, "usage: %s FILE (the KV cache to FILE, the messages to FILE.json)\n", line);
            continue;
        }
        if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
            print_help(stderr);
            continue;
        }
        if (line[0] == '/' && interactive) {
            fprintf(stderr, "unknown command '%s'; ", line);
            print_help(stderr);
            continue;
        }
        if (conv_add(&conv, "user", line)) goto oom;
        conv_fit(m, &conv, conv.n > 1 && !strcmp(conv.m[0].role, "system") ? 1 : 0,
                 cinfer_session_n_ctx(s), go.max_tokens);
        if (show_prompt) {
            char *prompt;
            if (!cinfer_chat_prompt(m, conv.m, conv.n, 1, &prompt, err, sizeof err)) {
                fprintf(stderr, "--- prompt ---\n%s\n--- end ---\n", prompt);
                cinfer_free(prompt);
            }
        }
        reply.len = 0;
        if (reply.text) reply.text[0] = 0;
        cinfer_gen_result res;
        if (cinfer_chat(s, conv.m, conv.n, &go, on_piece, &reply, &res, err, sizeof err)) {
            fprintf(stderr, "\ncinfer chat: %s\n", err);
            conv_clear(&conv, conv.n - 1); /* drop the message that failed */
            if (!interactive) goto done;
            continue;
        }
        if (reply.failed) goto oom;
        fputc('\n', stdout);
        if (res.stop == CINFER_STOP_CALLBACK) fprintf(stderr, "(stopped)\n");
        else if (res.stop == CINFER_STOP_CTX_FULL)
            fprintf(stderr, "(context full at %d tokens: reply cut; older turns are dropped next time)\n",
                    cinfer_session_n_ctx(s));
        fflush(stdout);
        if (conv_add(&conv, "assistant", reply.text ? reply.text : "")) goto oom;
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "cinfer chat: out of memory\n");
done:
    if (sa.sa_handler) sigaction(SIGINT, &old_sa, NULL);
    free(line);
    conv_clear(&conv, 0);
    free(conv.m);
    free(reply.text);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return rc;
}

int cli_chat(int argc, char **argv) { return chat_main(argc, argv, NULL, open_compiled); }

int cli_chat_bundle(int argc, char **argv, const cli_linked *lk) {
    return chat_main(argc, argv, lk, open_bundle);
}
