/*
 * plan.c — `cinfer plan MODEL [--quant P] [-c N] [-t N] [--mem BYTES] [--json]`:
 * the memory a run will take, by part, before loading anything heavy
 * (cinfer_plan_model; docs/memory.md).  With --mem, the ladder's steps and
 * the plan it chose, or exit 1 with the smallest plan when nothing fits.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: cinfer plan MODEL [--quant P] [-c N] [-t N] [--cache-type-k T] [--cache-type-v T]\n"
            "                   [--mem BYTES] [--stream-weights] [--moe-cache-experts N] [--json]\n"
            "  the memory `cinfer run MODEL` with these options will hold, by part, and its peak\n"
            "  --quant P     compute precision: " CLI_QUANT_HELP
            "  -c N          context positions (default: min(training context, 4096))\n"
            "  -t N          threads (default: physical cores)\n"
            "  --cache-type-k T, --cache-type-v T   KV cache types: f16 (default), f32, q8_0, q4_0\n"
            "  --mem BYTES   a budget (480M, 2G): walk the ladder (precision, KV cache types, then\n"
            "                context) until the peak fits, printing each step; exit 1 when nothing fits\n"
            "  --stream-weights  plan a streamed run (only a window of layers resident)\n"
            "  --moe-cache-experts N  streamed MoE: experts per layer kept mapped (default:\n"
            "                the budget's room with --mem, else the experts one token routes)\n"
            "  --json        one JSON object instead of the table\n");
}

static cJSON *plan_json(const cinfer_plan *p, const char *steps, int fits) {
    cJSON *o = cJSON_CreateObject(), *w = cJSON_CreateArray(), *st = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "precision", cinfer_precision_name(p->precision));
    cJSON_AddNumberToObject(o, "n_ctx", p->n_ctx);
    cJSON_AddStringToObject(o, "cache_type_k", cinfer_kv_type_name(p->cache_type_k));
    cJSON_AddStringToObject(o, "cache_type_v", cinfer_kv_type_name(p->cache_type_v));
    cJSON_AddNumberToObject(o, "n_threads", p->n_threads);
    for (int k = 0; k < p->n_weight_kinds; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", p->weights[k].type_name);
        cJSON_AddBoolToObject(e, "mapped", p->weights[k].mapped);
        cJSON_AddNumberToObject(e, "n_tensors", p->weights[k].n_tensors);
        cJSON_AddNumberToObject(e, "bytes", (double)p->weights[k].bytes);
        cJSON_AddItemToArray(w, e);
    }
    cJSON_AddItemToObject(o, "weights", w);
#define NUM(k, v) cJSON_AddNumberToObject(o, k, (double)(v))
    NUM("weights_bytes", p->weights_bytes);
    NUM("embd_bytes", p->embd_bytes);
    NUM("load_bytes", p->load_bytes);
    NUM("kv_cache_bytes", p->kv_cache_bytes);
    NUM("arena_bytes", p->arena_bytes);
    NUM("scratch_bytes", p->scratch_bytes);
    NUM("logits_bytes", p->logits_bytes);
    NUM("tokenizer_bytes", p->tokenizer_bytes);
    NUM("compiler_bytes", p->compiler_bytes);
    NUM("runtime_bytes", p->runtime_bytes);
    NUM("code_bytes", p->code_bytes);
    NUM("state_bytes", p->state_bytes);
    NUM("peak_bytes", p->peak_bytes);
    NUM("mem_bytes", p->mem_bytes);
    NUM("streamed_bytes", p->streamed_bytes);
    NUM("stream_keep", p->stream_keep);
    NUM("moe_cache_experts", p->moe_cache_experts);
    NUM("moe_cache_bytes", p->moe_cache_bytes);
#undef NUM
    cJSON_AddBoolToObject(o, "fits", fits);
    for (const char *s = steps; s && *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < 511 ? n : 511), s);
        cJSON_AddItemToArray(st, cJSON_CreateString(line));
        s += n + (nl != NULL);
    }
    cJSON_AddItemToObject(o, "steps", st);
    return o;
}

int cli_plan(int argc, char **argv) {
    const char *model = NULL;
    int json = 0;
    cinfer_plan_options po = {0};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--json")) json = 1;
        else if (!strcmp(f, "--stream-weights")) po.stream_weights = 1;
        else if (!strcmp(f, "--quant") || !strcmp(f, "-c") || !strcmp(f, "--ctx-size") ||
                 !strcmp(f, "-t") || !strcmp(f, "--threads") || !strcmp(f, "--mem") ||
                 !strcmp(f, "--moe-cache-experts") || !strcmp(f, "--cache-type-k") ||
                 !strcmp(f, "--cache-type-v")) {
            if (!v) {
                fprintf(stderr, "cinfer plan: %s needs a value\n", f);
                return 2;
            }
            i++;
            char *end;
            if (!strcmp(f, "--quant")) {
                if ((po.precision = cli_parse_precision("cinfer plan", v)) < 0) return 2;
            } else if (!strcmp(f, "--mem")) {
                if (cli_parse_bytes("cinfer plan", v, &po.mem_bytes)) return 2;
            } else if (!strcmp(f, "--cache-type-k")) {
                if (cli_parse_cache_type("cinfer plan", f, v, &po.cache_type_k)) return 2;
            } else if (!strcmp(f, "--cache-type-v")) {
                if (cli_parse_cache_type("cinfer plan", f, v, &po.cache_type_v)) return 2;
            } else {
                long n = strtol(v, &end, 10);
                if (*end || n < 0 || n > (1 << 24)) {
                    fprintf(stderr, "cinfer plan: %s '%s': expected a count in [0, %d]\n", f, v, 1 << 24);
                    return 2;
                }
                if (!strcmp(f, "--moe-cache-experts")) po.moe_cache_experts = (int)n;
                else if (f[1] == 't' || !strcmp(f, "--threads")) po.n_threads = (int)n;
                else po.n_ctx = (int)n;
            }
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer plan: unknown option '%s' (see cinfer plan --help)\n", f);
            return 2;
        } else if (!model) model = f;
        else {
            fprintf(stderr, "cinfer plan: unexpected argument '%s'\n", f);
            return 2;
        }
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    char cached[4096];
    if (cli_resolve_model("plan", &model, cached, sizeof cached, CLI_MODEL_RUN)) return 1;
    cinfer_plan p;
    char steps[1024], err[4096];
    int rc = cinfer_plan_model(model, &po, &p, steps, sizeof steps, err, sizeof err);
    if (rc && rc != CINFER_ENOMEM) {
        fprintf(stderr, "cinfer plan: %s\n", err);
        return 1;
    }
    if (json) {
        cJSON *o = plan_json(&p, steps, rc == 0);
        char *text = cJSON_PrintUnformatted(o);
        if (text) printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
    } else {
        for (const char *s = steps; *s;) {
            const char *nl = strchr(s, '\n');
            int n = nl ? (int)(nl - s) : (int)strlen(s);
            printf("step: %.*s\n", n, s);
            s += n + (nl != NULL);
        }
        char text[4096];
        cinfer_plan_format(&p, text, sizeof text);
        printf("%s\n", text);
    }
    if (rc) {
        fprintf(stderr, "cinfer plan: budget %.1f MiB: nothing fits; the smallest plan needs %.1f MiB\n",
                po.mem_bytes / 1048576.0, p.peak_bytes / 1048576.0);
        return 1;
    }
    return 0;
}
