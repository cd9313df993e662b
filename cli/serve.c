/*
 * serve.c — `cinfer serve MODEL | --model NAME=PATH...`: the OpenAI- and
 * Anthropic-compatible HTTP server of runtime/server/srv.h over one or more models
 * (each opened and given its session at start), until SIGINT or SIGTERM.
 *
 * The signals are blocked before any thread starts (so every server thread
 * inherits the mask) and taken with sigwait on the main thread, which then
 * shuts the server down in order: stop accepting, cancel the queue, join.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer.h"
#include "cli.h"
#include "server/srv.h"

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer serve MODEL [options]\n"
            "       cinfer serve --model NAME=PATH [--model NAME=PATH...] [options]\n"
            "  --model NAME=PATH  serve the GGUF at PATH as model NAME (repeatable; requests pick one\n"
            "                     with their \"model\" field, the first is the default); PATH alone:\n"
            "                     NAME is the file name without .gguf/.giw.  Every model loads at start\n"
            "                     and keeps its own KV cache (n_ctx positions) in memory\n"
            "  --host ADDR        address to bind (default 127.0.0.1; loopback only unless given)\n"
            "  --port N           port (default 8080; 0: any free port)\n"
            "  --api-key K        require K as 'Authorization: Bearer K' or 'x-api-key: K'\n"
            "  --name NAME        model id of the positional MODEL (default: file name without .gguf/.giw)\n"
            "  -c, --ctx-size N   context positions per model (default min(n_ctx_train, 4096))\n"
            "  --mem BYTES        memory budget of each model (480M, 2G): the ladder's steps on\n"
            "                     stderr (docs/memory.md)\n"
            "  -t, --threads N    threads per model (default: physical cores)\n"
            "  --cache-type-k T   KV cache type of the keys: f16 (default), f32, q8_0, q4_0\n"
            "  --cache-type-v T   of the values (docs/memory.md)\n"
            "  --queue N          requests that may wait behind the running one, per model (default 16)\n"
            "  --no-webui         no chat page at GET /\n"
            "  --quant P          compute precision of every model (auto, native, f32, int8, int8int8,\n"
            "                     int4, int4mix; default auto: docs/precisions.md)\n"
            "  --device D         cpu (default) or cuda[:N]: every model on that GPU (docs/cuda.md)\n"
            "  --cors-origin O    let web pages from origin O (e.g. https://app.example) call the API\n"
            "                     (repeatable; '*': any).  Other cross-site requests get 403\n"
            "endpoints: GET / (web UI), GET /health, GET /v1/models, POST /v1/chat/completions,\n"
            "  /v1/completions, /v1/responses, /v1/embeddings, /v1/messages, /v1/messages/count_tokens,\n"
            "  /v1/systemone; Ollama: /api/chat, /api/generate, /api/embed, /api/embeddings, GET /api/tags,\n"
            "  /api/ps, /api/version, POST /api/show\n"
            "docs: docs/serve.md\n");
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "cinfer serve: %s '%s': expected an integer in %ld..%ld\n", flag, v ? v : "", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* NAME from a model path: the file name without .gguf or .giw. */
static void stem(const char *path, char *name, size_t cap) {
    const char *b = strrchr(path, '/');
    snprintf(name, cap, "%s", b ? b + 1 : path);
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) name[n - 5] = 0;
    else if (n > 4 && !strcmp(name + n - 4, ".giw")) name[n - 4] = 0;
}

enum { MAX_MODELS = 16 };

/* How serve_main gets its models: `cinfer serve` compiles them (resolving
 * cached names); a bundle maps its own one (cli_serve_bundle), so it links
 * neither the compiler nor the model cache. */
typedef struct {
    int (*resolve)(const char **path, char *buf, size_t cap);
    int (*open)(const char *path, const cli_linked *lk, const cinfer_model_options *mo, cinfer_model **m,
                char *err, size_t err_len);
} serve_models;

static int resolve_cached(const char **path, char *buf, size_t cap) {
    return cli_resolve_model("serve", path, buf, cap, CLI_MODEL_RUN);
}
static int open_compiled(const char *path, const cli_linked *lk, const cinfer_model_options *mo,
                         cinfer_model **m, char *err, size_t err_len) {
    (void)lk;
    return cinfer_model_open(path, mo, m, err, err_len);
}
static int resolve_none(const char **path, char *buf, size_t cap) {
    (void)path, (void)buf, (void)cap;
    return 0;
}
static int open_bundle(const char *path, const cli_linked *lk, const cinfer_model_options *mo,
                       cinfer_model **m, char *err, size_t err_len) {
    (void)path, (void)mo;
    return cinfer_model_open_linked_at(lk->path, lk->offset, lk->n_bytes, lk->describe, lk->forward,
                                       m, err, err_len);
}

static int serve_main(int argc, char **argv, const cli_linked *lk, const serve_models *sm) {
    srv_options o = {.port = 8080};
    cinfer_model_options mo = {0}; /* --device; --mem adds each model's budget below */
    uint64_t mem_bytes = 0; /* --mem: each model's budget */
    const char *path = NULL;
    const char *paths[MAX_MODELS], *cors[MAX_MODELS];
    int n_cors = 0;
    char names[MAX_MODELS][256];
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            serve_usage(stdout);
            return 0;
        }
        if (f[0] != '-') {
            if (lk) {
                fprintf(stderr, "cinfer serve: this program serves the model inside it; unexpected argument '%s'\n", f);
                return 2;
            }
            if (path) {
                fprintf(stderr, "cinfer serve: one MODEL expected, got '%s' and '%s' (more models: --model NAME=PATH)\n",
                        path, f);
                return 2;
            }
            path = f;
            continue;
        }
        if (!strcmp(f, "--no-webui")) {
            o.no_webui = 1;
            continue;
        }
        static const char *const valued[] = {"--host", "--api-key", "--cors-origin", "--name", "--device",
                                             "--model", "--port", "-c", "--ctx-size", "-t", "--threads",
                                             "--mem", "--queue", "--quant", "--cache-type-k", "-ctk",
                                             "--cache-type-v", "-ctv", NULL};
        int known = 0;
        for (int k = 0; valued[k] && !known; k++) known = !strcmp(f, valued[k]);
        if (!known) {
            fprintf(stderr, "cinfer serve: unknown option '%s' (see cinfer serve --help)\n", f);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "cinfer serve: %s needs a value (see cinfer serve --help)\n", f);
            return 2;
        }
        i++;
        if (!strcmp(f, "--host")) o.host = v;
        else if (!strcmp(f, "--api-key")) o.api_key = v;
        else if (!strcmp(f, "--cors-origin")) {
            if (n_cors == MAX_MODELS || !v[0]) {
                fprintf(stderr, "cinfer serve: --cors-origin: %s\n", v[0] ? "at most 16" : "empty origin");
                return 2;
            }
            cors[n_cors++] = v;
            o.cors_origins = cors;
            o.n_cors_origins = n_cors;
        }
        else if (!strcmp(f, "--name")) o.model_name = v;
        else if (!strcmp(f, "--device")) {
            if (cli_parse_device("cinfer serve", v, &mo.device, &mo.device_index)) return 2;
            if (lk && mo.device != CINFER_DEVICE_CPU) {
                fprintf(stderr, "cinfer serve: --device cuda: a bundle runs its linked forward pass on the CPU\n");
                return 2;
            }
        }
        else if (!strcmp(f, "--model")) {
            if (lk) {
                fprintf(stderr, "cinfer serve: --model: this program serves only the model inside it\n");
                return 2;
            }
            if (n_models == MAX_MODELS) {
                fprintf(stderr, "cinfer serve: at most %d --model\n", MAX_MODELS);
                return 2;
            }
            const char *eq = strchr(v, '=');
            if (eq) {
                if (eq == v || !eq[1] || (size_t)(eq - v) >= sizeof names[0]) {
                    fprintf(stderr, "cinfer serve: --model '%s': expected NAME=PATH\n", v);
                    return 2;
                }
                snprintf(names[n_models], sizeof names[0], "%.*s", (int)(eq - v), v);
                paths[n_models] = eq + 1;
            } else {
                stem(v, names[n_models], sizeof names[0]);
                paths[n_models] = v;
            }
            n_models++;
        }
        else if (!strcmp(f, "--port")) { if (parse_int(f, v, 0, 65535, &x)) return 2; o.port = (int)x; }
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) { if (parse_int(f, v, 0, 1 << 24, &x)) return 2; o.n_ctx = (int)x; }
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) { if (parse_int(f, v, 0, 1024, &x)) return 2; o.n_threads = (int)x; }
        else if (!strcmp(f, "--mem") && !lk) { if (cli_parse_bytes("cinfer serve", v, &mem_bytes)) return 2; }
        else if (!strcmp(f, "--cache-type-k") || !strcmp(f, "-ctk")) {
            if (cli_parse_cache_type("cinfer serve", "--cache-type-k", v, &mo.cache_type_k)) return 2;
        }
        else if (!strcmp(f, "--cache-type-v") || !strcmp(f, "-ctv")) {
            if (cli_parse_cache_type("cinfer serve", "--cache-type-v", v, &mo.cache_type_v)) return 2;
        }
        else if (!strcmp(f, "--queue")) { if (parse_int(f, v, 1, 1 << 20, &x)) return 2; o.queue_max = (int)x; }
        else if (!strcmp(f, "--quant") && !lk) {
            if ((mo.precision = cli_parse_precision("cinfer serve", v)) < 0) return 2;
        } else {
            fprintf(stderr, "cinfer serve: %s is not available in a bundle (its weights are fixed inside it)\n", f);
            return 2;
        }
    }
    if (lk) path = lk->name ? lk->name : "model";
    if (!path && !n_models) {
        serve_usage(stderr);
        return 2;
    }
    if (o.model_name && !path) {
        fprintf(stderr, "cinfer serve: --name names the positional MODEL; with --model use NAME=PATH\n");
        return 2;
    }
    /* REPO[:FILE] names pulled with `cinfer pull`, as in run and chat */
    static char cached[MAX_MODELS + 1][4096];
    if (path && sm->resolve(&path, cached[MAX_MODELS], sizeof cached[0])) return 1;
    for (int i = 0; i < n_models; i++)
        if (sm->resolve(&paths[i], cached[i], sizeof cached[0])) return 1;
    char name[256];
    if (path && !o.model_name) {
        stem(path, name, sizeof name);
        o.model_name = name;
    }
    /* duplicate names fail here, before any model loads */
    for (int i = 0; i < n_models; i++)
        for (int k = -1; k < i; k++) {
            const char *other = k < 0 ? (path ? o.model_name : NULL) : names[k];
            if (other && !strcmp(other, names[i])) {
                fprintf(stderr, "cinfer serve: two models are named '%s' (use --model NAME=PATH)\n", names[i]);
                return 2;
            }
        }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512];
    int rc = 1;
    cinfer_model *m = NULL;
    srv_model extra[MAX_MODELS];
    int n_open = 0;
    srv *s = NULL;
    if (mem_bytes) mo.mem_bytes = mem_bytes, mo.n_ctx = o.n_ctx, mo.n_threads = o.n_threads;
    if (path && sm->open(path, lk, &mo, &m, err, sizeof err)) {
        fprintf(stderr, "cinfer serve: %s\n", err);
        goto out;
    }
    if (m && mem_bytes) cli_print_budget("cinfer serve", m, 0);
    for (; n_open < n_models; n_open++) {
        extra[n_open].name = names[n_open];
        if (sm->open(paths[n_open], lk, &mo, &extra[n_open].m, err, sizeof err)) {
            fprintf(stderr, "cinfer serve: model '%s': %s\n", names[n_open], err);
            goto out;
        }
        if (mem_bytes) cli_print_budget(names[n_open], extra[n_open].m, 0);
    }
    if (mem_bytes) o.n_ctx = 0; /* each model's sessions take the context its budget chose */
    o.models = extra;
    o.n_models = n_models;
    if (srv_start(m, &o, &s, err, sizeof err)) {
        fprintf(stderr, "cinfer serve: %s\n", err);
        goto out;
    }
    const char *host = o.host ? o.host : "127.0.0.1";
    int port = srv_port(s);
    if (m) cli_warn_settings("cinfer serve", m, o.n_ctx, o.n_threads);
    for (int i = 0; i < n_open; i++) cli_warn_settings("cinfer serve", extra[i].m, o.n_ctx, i || m ? 0 : o.n_threads);
    /* loopback is 127.0.0.0/8 and ::1; anything else is reachable from other machines */
    if (!o.api_key && strncmp(host, "127.", 4) && strcmp(host, "::1"))
        fprintf(stderr, "cinfer serve: warning: listening on %s without --api-key: anyone who can reach port %d "
                "can use the models; add --api-key KEY (clients send it as a Bearer token)\n", host, port);
    int v6 = strchr(host, ':') != NULL;
    for (int i = path ? -1 : 0; i < n_models; i++)
        fprintf(stderr, "cinfer serve: model '%s'%s, %s\n", i < 0 ? o.model_name : names[i],
                i == (path ? -1 : 0) ? " (default)" : "",
                cinfer_precision_name(cinfer_model_precision(i < 0 ? m : extra[i].m)));
    fprintf(stderr, "cinfer serve: API at http://%s%s%s:%d/v1%s (Ctrl-C to stop)\n", v6 ? "[" : "", host,
            v6 ? "]" : "", port, o.no_webui ? "" : ", web UI at /");
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "cinfer serve: %s, shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 0;
out:
    srv_stop(s);
    for (int i = 0; i < n_open; i++) cinfer_model_close(extra[i].m);
    cinfer_model_close(m);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return rc;
}

int cli_serve(int argc, char **argv) {
    static const serve_models sm = {resolve_cached, open_compiled};
    return serve_main(argc, argv, NULL, &sm);
}

int cli_serve_bundle(int argc, char **argv, const cli_linked *lk) {
    static const serve_models sm = {resolve_none, open_bundle};
    return serve_main(argc, argv, lk, &sm);
}
