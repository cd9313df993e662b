/*
 * serve.c — `cinfer serve MODEL`: the OpenAI- and Anthropic-compatible HTTP
 * server of runtime/srv.h over one model, until SIGINT or SIGTERM.
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
#include "srv.h"

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer serve MODEL [options]\n"
            "  --host ADDR        address to bind (default 127.0.0.1; loopback only unless given)\n"
            "  --port N           port (default 8080; 0: any free port)\n"
            "  --api-key K        require K as 'Authorization: Bearer K' or 'x-api-key: K'\n"
            "  --name NAME        model id clients use (default: file name without .gguf)\n"
            "  -c, --ctx-size N   context positions (default min(n_ctx_train, 4096))\n"
            "  -t, --threads N    threads (default: physical cores)\n"
            "  --queue N          requests that may wait behind the running one (default 16)\n"
            "endpoints: GET /health, GET /v1/models, POST /v1/chat/completions,\n"
            "  /v1/completions, /v1/messages, /v1/messages/count_tokens\n");
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

int cli_serve(int argc, char **argv) {
    srv_options o = {.port = 8080};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            serve_usage(stdout);
            return 0;
        }
        if (f[0] != '-') {
            if (path) {
                fprintf(stderr, "cinfer serve: one MODEL expected, got '%s' and '%s'\n", path, f);
                return 2;
            }
            path = f;
            continue;
        }
        if (!v) {
            fprintf(stderr, "cinfer serve: %s needs a value (see --help)\n", f);
            return 2;
        }
        i++;
        if (!strcmp(f, "--host")) o.host = v;
        else if (!strcmp(f, "--api-key")) o.api_key = v;
        else if (!strcmp(f, "--name")) o.model_name = v;
        else if (!strcmp(f, "--port")) { if (parse_int(f, v, 0, 65535, &x)) return 2; o.port = (int)x; }
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) { if (parse_int(f, v, 0, 1 << 24, &x)) return 2; o.n_ctx = (int)x; }
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) { if (parse_int(f, v, 0, 1024, &x)) return 2; o.n_threads = (int)x; }
        else if (!strcmp(f, "--queue")) { if (parse_int(f, v, 1, 1 << 20, &x)) return 2; o.queue_max = (int)x; }
        else {
            fprintf(stderr, "cinfer serve: unknown option '%s' (see --help)\n", f);
            return 2;
        }
    }
    if (!path) {
        serve_usage(stderr);
        return 2;
    }
    char name[256];
    if (!o.model_name) {
        const char *b = strrchr(path, '/');
        snprintf(name, sizeof name, "%s", b ? b + 1 : path);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf")) name[n - 5] = 0;
        o.model_name = name;
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512];
    cinfer_model *m = NULL;
    if (cinfer_model_open(path, NULL, &m, err, sizeof err)) {
        fprintf(stderr, "cinfer serve: %s\n", err);
        return 1;
    }
    srv *s = NULL;
    if (srv_start(m, &o, &s, err, sizeof err)) {
        fprintf(stderr, "cinfer serve: %s\n", err);
        cinfer_model_close(m);
        return 1;
    }
    const char *host = o.host ? o.host : "127.0.0.1";
    fprintf(stderr, "cinfer serve: model '%s' at http://%s%s%s:%d/v1 (Ctrl-C to stop)\n", o.model_name,
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", srv_port(s));
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "cinfer serve: %s, shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    srv_stop(s);
    cinfer_model_close(m);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}
