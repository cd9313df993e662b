/*
 * test_inspect.c — `cinfer inspect MODEL [--json]`.
 *
 * The binary ($CINFER_BIN) runs --json on every .gguf under ../shared and its
 * document is compared with the GGUF API (which test_gguf_models.c checks
 * against independent sources); cli_inspect is also called in-process (under
 * the sanitizers) with stdout captured, for text output, safetensors, refusal
 * of pickles, hostile strings and usage errors.
 */
#include "cli/cli.h"
#include "formats/gguf.h"
#include "test.h"

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Run cli_inspect in-process with stdout and stderr captured into malloc'd strings. */
static int inspect_capture(const char *a1, const char *a2, char **out, char **err) {
    char po[512], pe[512];
    snprintf(po, sizeof po, "%s/inspect.out", test_tmpdir());
    snprintf(pe, sizeof pe, "%s/inspect.err", test_tmpdir());
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    close(fo);
    close(fe);
    char *argv[4] = {"inspect", (char *)a1, (char *)a2, NULL};
    int argc = 1 + (a1 != NULL) + (a1 && a2);
    int rc = cli_inspect(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    *out = read_file(po, NULL);
    *err = read_file(pe, NULL);
    return rc;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

static void collect(const char *dir, char ***v, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        size_t l = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) collect(p, v, n);
        else if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) {
            *v = realloc(*v, (*n + 1) * sizeof **v);
            (*v)[(*n)++] = strdup(p);
        }
    }
    closedir(d);
}

TEST(inspect, json_every_shared_gguf_matches_loader) {
    NEED_SHARED(models, "models");
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    char **files = NULL;
    size_t n = 0;
    collect(models, &files, &n);
    const char *vocab = shared_path("vocab/llama.cpp");
    if (vocab) collect(vocab, &files, &n);
    EXPECT_MSG(n >= 50, "only %zu files", n);
    for (size_t f = 0; f < n; f++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s inspect --json '%s'", cinfer_bin(), files[f]);
        char *out = NULL;
        int st = run_cmd(cmd, false, &out);
        EXPECT_MSG(st == 0, "%s: exit %d", cmd, st);
        cJSON *j = out ? cJSON_Parse(out) : NULL;
        EXPECT_MSG(j != NULL, "%s: output is not JSON", cmd);
        gguf_file *g = NULL;
        char err[512];
        if (j && gguf_open(files[f], &g, err, sizeof err) == 0) {
            const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "architecture");
            gguf_str a;
            if (gguf_get_str(g, "general.architecture", &a, err, sizeof err) == 0)
                EXPECT_MSG(cJSON_IsString(arch) && gguf_str_eq(a, arch->valuestring), "%s: architecture", files[f]);
            else EXPECT(cJSON_IsNull(arch));
            EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "format")->valuestring, "gguf");
            EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(j, "gguf_version")->valuedouble, gguf_version(g));
            EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(j, "n_kv")->valuedouble, gguf_n_kv(g));
            EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "metadata")), gguf_n_kv(g));
            const cJSON *tot = cJSON_GetObjectItemCaseSensitive(j, "totals");
            uint64_t params = 0, bytes = 0;
            for (uint64_t i = 0; i < gguf_n_tensors(g); i++)
                params += gguf_tensor_at(g, i)->n_elems, bytes += gguf_tensor_at(g, i)->n_bytes;
            EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(tot, "n_tensors")->valuedouble, gguf_n_tensors(g));
            EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(tot, "n_params")->valuedouble, params);
            EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(tot, "n_bytes")->valuedouble, bytes);
            const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
            EXPECT_EQ_I(cJSON_GetArraySize(ts), gguf_n_tensors(g));
            uint64_t i = 0;
            const cJSON *te;
            cJSON_ArrayForEach(te, ts) {
                const gguf_tensor *t = gguf_tensor_at(g, i++);
                if (!t) break;
                EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(te, "name")->valuestring, t->name);
                EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(te, "type")->valuestring, ggml_type_name(t->type));
                const cJSON *sh = cJSON_GetObjectItemCaseSensitive(te, "shape");
                EXPECT_EQ_I(cJSON_GetArraySize(sh), t->n_dims);
                for (uint32_t d = 0; d < t->n_dims; d++) EXPECT_EQ_I(cJSON_GetArrayItem(sh, (int)d)->valuedouble, t->ne[d]);
                EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(te, "bytes")->valuedouble, t->n_bytes);
                EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(te, "offset")->valuedouble, t->offset);
            }
            const cJSON *pm = cJSON_GetObjectItemCaseSensitive(j, "parse_ms");
            EXPECT(cJSON_IsNumber(pm) && pm->valuedouble >= 0);
        }
        gguf_close(g);
        cJSON_Delete(j);
        free(out);
        free(files[f]);
    }
    free(files);
}

TEST(inspect, text_stories260K) {
    NEED_SHARED(path, "models/stories260K/stories260K.gguf");
    char *out = NULL, *err = NULL;
    int rc = inspect_capture(path, NULL, &out, &err);
    EXPECT_EQ_I(rc, 0);
    EXPECT_MSG(err && !*err, "stderr: %s", err ? err : "");
    static const char *want[] = {
        "format        GGUF v3\n", "architecture  llama\n", "alignment     32\n", "parse time    ",
        "metadata: 19 keys\n", "tokenizer.ggml.tokens", "arr[str,512]", "[\"<unk>\", \"<s>\", \"</s>\", ",
        "llama.embedding_length                       u32              64\n", "tensors: 48\n",
        "token_embd.weight", "[64, 512]", "parameters   292800\n", "F32          48 tensors, 292800 parameters",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        EXPECT_MSG(out && strstr(out, want[i]), "text output lacks \"%s\"", want[i]);
    free(out);
    free(err);
}

TEST(inspect, safetensors_text_and_json) {
    NEED_SHARED(path, "models/tinystories-656k/hf/model.safetensors");
    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(path, "--json", &out, &err), 0);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    EXPECT(j != NULL);
    if (j) {
        EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "format")->valuestring, "safetensors");
        EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "architecture")->valuestring, "LlamaForCausalLM");
        const cJSON *tot = cJSON_GetObjectItemCaseSensitive(j, "totals");
        EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(tot, "n_tensors")->valuedouble, 20);
        EXPECT_EQ_I(cJSON_GetObjectItemCaseSensitive(tot, "n_params")->valuedouble, 656000);
        const cJSON *f32 = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tot, "by_type"), "F32");
        EXPECT(f32 && cJSON_GetObjectItemCaseSensitive(f32, "n_tensors")->valuedouble == 20);
        EXPECT_STR_EQ(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "format")->valuestring, "pt");
    }
    cJSON_Delete(j);
    free(out);
    free(err);
    EXPECT_EQ_I(inspect_capture(path, NULL, &out, &err), 0);
    EXPECT_MSG(out && strstr(out, "format        safetensors") && strstr(out, "parameters   656000") &&
                   strstr(out, "model.norm.weight"), "%s", out ? out : "");
    free(out);
    free(err);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

TEST(inspect, refuses_pickles_and_unknown_files) {
    static const struct { const char *name, *bytes; size_t n; const char *want; } cases[] = {
        {"pytorch_model.bin", "PK\3\4\24\0\0\0", 8, "arbitrary code"},
        {"model.pt", "\x80\x04\x95", 3, "arbitrary code"},
        {"model.gguf", "not a model at all", 18, "unrecognised format"},
        {"empty.gguf", "", 0, "empty file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", test_tmpdir(), cases[i].name);
        write_bytes(path, cases[i].bytes, cases[i].n);
        char *out = NULL, *err = NULL;
        EXPECT_EQ_I(inspect_capture(path, NULL, &out, &err), 1);
        EXPECT_MSG(out && !*out, "stdout not empty: %s", out ? out : "");
        EXPECT_MSG(err && count_lines(err) == 1 && strstr(err, cases[i].want) && strstr(err, "cinfer inspect: "),
                   "%s: stderr: %s", cases[i].name, err ? err : "");
        free(out);
        free(err);
    }
}

TEST(inspect, usage_errors) {
    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(NULL, NULL, &out, &err), 2);
    EXPECT(err && strstr(err, "usage: cinfer inspect MODEL [--json]"));
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture("--bogus", NULL, &out, &err), 2);
    EXPECT(err && count_lines(err) == 1 && strstr(err, "unknown option '--bogus'"));
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture("a.gguf", "b.gguf", &out, &err), 2);
    EXPECT(err && count_lines(err) == 1 && strstr(err, "more than one MODEL"));
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture("/nonexistent/m.gguf", "--json", &out, &err), 1);
    EXPECT(err && count_lines(err) == 1 && strstr(err, "cannot open '/nonexistent/m.gguf'"));
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture("/tmp", NULL, &out, &err), 1);
    /* a directory is a model only as a Hugging Face folder (config.json) */
    EXPECT(err && count_lines(err) == 1 && strstr(err, "is a directory without config.json"));
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture("--help", NULL, &out, &err), 0);
    EXPECT(out && strstr(out, "usage:"));
    free(out), free(err);
}

/* A GGUF whose strings are hostile to the printers: invalid UTF-8, NUL-free
 * control bytes, quotes, a newline in a tensor name, a huge u64.  The JSON
 * must still parse and the text must keep one line per key and tensor. */
TEST(inspect, hostile_strings_stay_valid_json_and_one_line) {
    uint8_t b[1024];
    size_t n = 0;
#define PUT(p, k) (memcpy(b + n, (p), (k)), n += (k))
#define U32(v) do { uint32_t x_ = (v); PUT(&x_, 4); } while (0)
#define U64(v) do { uint64_t x_ = (v); PUT(&x_, 8); } while (0)
#define STR(s, k) do { U64(k); PUT(s, k); } while (0)
    PUT("GGUF", 4);
    U32(3);
    U64(1);
    U64(4);
    STR("general.architecture", 20); U32(GGUF_VT_STRING); STR("ll\xffma\"\x01", 7);
    STR("k\xc3\x28y", 4); U32(GGUF_VT_UINT64); U64(UINT64_MAX);
    STR("a.strs", 6); U32(GGUF_VT_ARRAY); U32(GGUF_VT_STRING); U64(2); STR("\xe2\x82", 2); STR("ok\n", 3);
    STR("a.nest", 6); U32(GGUF_VT_ARRAY); U32(GGUF_VT_ARRAY); U64(1); U32(GGUF_VT_FLOAT32); U64(1); U32(0x3f800000);
    STR("bad\nname\xfe", 9); U32(1); U64(8); U32(GGML_TYPE_F32); U64(0);
    while (n % 32) b[n++] = 0;
    memset(b + n, 0, 32);
    n += 32;
    char path[512];
    snprintf(path, sizeof path, "%s/hostile.gguf", test_tmpdir());
    write_bytes(path, b, n);

    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(path, "--json", &out, &err), 0);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    EXPECT_MSG(j != NULL, "not JSON: %s", out ? out : "");
    if (j) {
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
        EXPECT_EQ_I(cJSON_GetArraySize(ts), 1);
        EXPECT(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "architecture")));
        /* u64 beyond 2^53 is kept exact, as a string */
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        const cJSON *k = md ? md->child ? md->child->next : NULL : NULL;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(k, "value");
        EXPECT(cJSON_IsString(v) && !strcmp(v->valuestring, "18446744073709551615"));
    }
    cJSON_Delete(j);
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture(path, NULL, &out, &err), 0);
    /* header 10 lines + blank + "metadata:" + 4 keys + blank + "tensors:" + table header + 1 tensor
     * + blank + totals (4 lines + 1 type) */
    EXPECT_MSG(out && strstr(out, "bad?name") && strstr(out, "18446744073709551615"), "%s", out ? out : "");
    int lines = count_lines(out);
    EXPECT_MSG(lines == 10 + 1 + 1 + 4 + 1 + 1 + 1 + 1 + 1 + 5, "%d lines:\n%s", lines, out ? out : "");
    free(out), free(err);
#undef PUT
#undef U32
#undef U64
#undef STR
}

/* A .giw holds cinfer's repacked types (ids 100+): the per-type totals must
 * count them too, so the types add up to the tensor count (text and JSON). */
TEST(inspect, giw_totals_count_repacked_types) {
    NEED_SHARED(src, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    char giw[512], cmd[2048];
    snprintf(giw, sizeof giw, "%s/t8.giw", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s compile '%s' --quant int4 -o '%s'", cinfer_bin(), src, giw);
    EXPECT_EQ_I(run_cmd(cmd, true, NULL), 0);
    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(giw, "--json", &out, &err), 0);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    EXPECT(j != NULL);
    const cJSON *tot = cJSON_GetObjectItemCaseSensitive(j, "totals"), *e;
    double n = 0, bytes = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(tot, "by_type")) {
        n += cJSON_GetObjectItemCaseSensitive(e, "n_tensors")->valuedouble;
        bytes += cJSON_GetObjectItemCaseSensitive(e, "n_bytes")->valuedouble;
    }
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(tot, "n_tensors");
    EXPECT(nt && nt->valuedouble > 0);
    EXPECT_EQ_I(n, nt ? nt->valuedouble : -1);
    EXPECT_EQ_I(bytes, cJSON_GetObjectItemCaseSensitive(tot, "n_bytes")->valuedouble);
    EXPECT(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tot, "by_type"), "Q4_0_R8") != NULL);
    cJSON_Delete(j);
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture(giw, NULL, &out, &err), 0);
    EXPECT_MSG(out && strstr(out, "  Q4_0_R8 "), "%s", out ? out : "");
    free(out), free(err);
}

/* With no general.file_type, text and JSON both say "unknown". */
TEST(inspect, missing_file_type_same_in_text_and_json) {
    NEED_SHARED(path, "models/stories260K/stories260K.gguf");
    gguf_file *g = NULL;
    char e[256];
    if (gguf_open(path, &g, e, sizeof e)) SKIP("%s", e);
    uint32_t ft;
    int has = gguf_get_u32(g, "general.file_type", &ft, NULL, 0) == 0;
    gguf_close(g);
    if (has) SKIP("stories260K has general.file_type");
    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(path, NULL, &out, &err), 0);
    EXPECT_MSG(out && strstr(out, "file type     unknown"), "%s", out ? out : "");
    free(out), free(err);
    EXPECT_EQ_I(inspect_capture(path, "--json", &out, &err), 0);
    EXPECT_MSG(out && strstr(out, "\"file_type_name\":\t\"unknown\""), "%s", out ? out : "");
    free(out), free(err);
}

/* Safetensors names longer than the default column widen it: every tensor row
 * puts its type at the same column as the header's "type". */
TEST(inspect, safetensors_columns_align) {
    NEED_SHARED(path, "models/tinystories-656k/hf/model.safetensors");
    char *out = NULL, *err = NULL;
    EXPECT_EQ_I(inspect_capture(path, NULL, &out, &err), 0);
    const char *h = out ? strstr(out, "\n  #") : NULL;
    EXPECT(h != NULL);
    if (h) {
        h++;
        const char *type_col = strstr(h, " type ");
        long col = type_col ? type_col - h : -1;
        int rows = 0;
        for (const char *l = strchr(h, '\n'); l && l[1] == ' ' && l[2] == ' ' && l[3] >= '0' && l[3] <= '9';
             l = strchr(l + 1, '\n')) {
            rows++;
            EXPECT_MSG(l[1 + col] == ' ' && l[2 + col] != ' ', "misaligned row: %.120s", l + 1);
        }
        EXPECT(rows > 0);
    }
    free(out), free(err);
}
