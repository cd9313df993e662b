/*
 * quantize.c — `cinfer quantize IN.gguf OUT.gguf --type T`: re-quantize a
 * GGUF model the way llama.cpp's llama-quantize does (runtime/formats/quantize.h has
 * the rules and the byte-compatibility notes).  One line per tensor on
 * stderr with -v, a summary line always.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "formats/gguf.h"
#include "formats/quantize.h"

static void quantize_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer quantize IN.gguf OUT.gguf --type TYPE [options]\n"
            "  --type TYPE                  f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k_s q3_k_m q3_k_l\n"
            "                               q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs mxfp4_moe\n"
            "                               (mxfp4_moe: expert tensors MXFP4, everything else Q8_0)\n"
            "                               (q3_k/q4_k/q5_k = the _m mixes; case does not matter)\n"
            "  --pure                       no mixture: every quantized tensor gets the type's base type\n"
            "  --token-embedding-type T     type of token_embd.weight (a tensor type: q8_0, q6_k, f16, ...)\n"
            "  --output-tensor-type T       type of output.weight\n"
            "  -t N                         threads (default: physical cores)\n"
            "  -v                           one line per tensor\n"
            "Tensor types follow llama-quantize: 1-D tensors, norms, routers and positional\n"
            "embeddings are copied; output.weight becomes Q6_K unless the type is Q8_0 or\n"
            "--pure/--output-tensor-type say otherwise; K mixtures give attn_v and ffn_down\n"
            "more bits in some layers.  OUT is written as OUT.partial and renamed.\n");
}

typedef struct {
    int verbose;
    double bytes_done;
    cli_progress prog; /* a terminal only */
} quant_ui;

static void report(const quant_tensor_report *r, void *user) {
    quant_ui *ui = user;
    ui->bytes_done += (double)r->bytes_in;
    if (!ui->verbose) {
        cli_progress_update(&ui->prog, ui->bytes_done);
        return;
    }
    cli_progress_end(&ui->prog);
    char shape[96];
    int k = snprintf(shape, sizeof shape, "[%lld", (long long)r->ne[0]);
    for (uint32_t d = 1; d < r->n_dims && k < (int)sizeof shape; d++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, ", %lld", (long long)r->ne[d]);
    if (k < (int)sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
    fprintf(stderr, "[%4d/%4d] %-36s %-18s %6s -> %-6s %9.2f MiB -> %9.2f MiB%s\n", r->index + 1,
            r->n_tensors, r->name, shape, ggml_type_name((uint32_t)r->type_in),
            ggml_type_name((uint32_t)r->type_out), r->bytes_in / 1048576.0, r->bytes_out / 1048576.0,
            r->fallback ? " (fallback: row length)" : r->type_in == r->type_out ? " (copied)" : "");
}

int cli_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type = NULL;
    quant_options o = quant_options_default();
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--pure")) {
            o.pure = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = 1;
        } else if (!strcmp(a, "--type") || !strcmp(a, "--token-embedding-type") ||
                   !strcmp(a, "--output-tensor-type") || !strcmp(a, "-t")) {
            if (!v) {
                fprintf(stderr, "cinfer quantize: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--type")) {
                type = v;
            } else if (!strcmp(a, "-t")) {
                char *end;
                errno = 0;
                long t = strtol(v, &end, 10);
                if (!*v || *end || errno || t < 0 || t > 1024) {
                    fprintf(stderr, "cinfer quantize: -t: '%s' is not a thread count\n", v);
                    return 2;
                }
                o.n_threads = (int)t;
            } else {
                int t = quant_type_parse(v);
                if (t < 0) {
                    fprintf(stderr, "cinfer quantize: %s: '%s' is not a tensor type cinfer can write\n", a, v);
                    return 2;
                }
                if (!strcmp(a, "--output-tensor-type")) o.output_type = t;
                else o.token_embd_type = t;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cinfer quantize: unknown option '%s' (see cinfer quantize --help)\n", a);
            return 2;
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else if (!type) {
            type = a; /* llama-quantize's positional form: IN OUT TYPE */
        } else {
            fprintf(stderr, "cinfer quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!in || !out || !type) {
        quantize_usage(stderr);
        return 2;
    }
    /* a safetensors input says how to get a GGUF (convert_hf_to_gguf.py) */
    static char cached[4096];
    if (cli_resolve_model("quantize", &in, cached, sizeof cached, CLI_MODEL_GGUF)) return 1;
    if (quant_ftype_parse(type, &o.ftype)) {
        fprintf(stderr, "cinfer quantize: unknown type '%s' (see cinfer quantize --help)\n", type);
        return 2;
    }
    quant_ui ui = {.verbose = verbose};
    struct stat sb;
    cli_progress_begin(&ui.prog, "quantizing", "MiB", stat(in, &sb) ? 0 : (double)sb.st_size, 1048576);
    o.on_tensor = report;
    o.user = &ui;
    char err[1024];
    quant_stats st;
    double t0 = (cli_now_ms() * 1e-3);
    int qrc = quant_file(in, out, &o, &st, err, sizeof err);
    cli_progress_end(&ui.prog);
    if (qrc) {
        fprintf(stderr, "cinfer quantize: %s\n", err);
        return 1;
    }
    /* n_fallback counts tensors whose row length is not a multiple of the chosen
     * type's block, so they got a fallback type; that type may be their own type
     * (then they are copied), so it is not a subset of the converted ones. */
    char fb[160] = "";
    if (st.n_fallback)
        snprintf(fb, sizeof fb, "; %d took a fallback type (row length not a multiple of the block, "
                 "see -v)", st.n_fallback);
    fprintf(stderr,
            "cinfer quantize: %s -> %s (%s%s): %d tensors: %d converted, %d copied%s; %.2f MiB -> %.2f MiB, "
            "file %.2f MiB, %.2f s\n",
            in, out, quant_ftype_name(o.ftype), o.pure ? ", pure" : "", st.n_tensors, st.n_quantized,
            st.n_tensors - st.n_quantized, fb, st.bytes_in / 1048576.0, st.bytes_out / 1048576.0,
            st.file_bytes / 1048576.0, (cli_now_ms() * 1e-3) - t0);
    return 0;
}
