/*
 * test_compile.c — the model compiler: golden emitted sources, that they
 * build with -Werror under gcc and under libtcc, that templates compile on
 * their own, archspec error reporting, and `cinfer run`/`compile` end to end
 * (greedy text equal to the documented stories260K output, JIT, AOT and a
 * standalone executable).
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "test.h"

typedef struct {
    const char *model; /* under ../shared */
    const char *golden;
} golden_case;

static const golden_case goldens[] = {
    {"models/stories260K/stories260K.gguf", "generated/stories260K.c"},
    {"models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf", "generated/TinyStories-656K-Q8_0.c"},
};

static char *generate(const char *model_path) {
    char err[1024];
    gguf_file *g = NULL;
    char *src = NULL;
    size_t len;
    cc_options o = {0};
    if (gguf_open(model_path, &g, err, sizeof err) || cc_generate(g, &o, &src, &len, err, sizeof err))
        test_fail(__FILE__, __LINE__, "%s: %s", model_path, err);
    gguf_close(g);
    return src;
}

TEST(compile, golden_sources_match) {
    for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
        const char *m = shared_path(goldens[i].model);
        if (!m) SKIP("%s/%s absent", shared_root(), goldens[i].model);
        char *src = generate(m);
        char *want = read_file(goldens[i].golden, NULL);
        EXPECT_MSG(want, "%s missing (run make golden)", goldens[i].golden);
        if (src && want && strcmp(src, want)) {
            size_t k = 0;
            while (src[k] && src[k] == want[k]) k++;
            int line = 1;
            for (size_t q = 0; q < k; q++) line += src[q] == '\n';
            test_fail(__FILE__, __LINE__, "%s differs from fresh output at line %d (run make golden "
                      "if the change is intended)", goldens[i].golden, line);
        }
        free(src);
        free(want);
    }
}

TEST(compile, emission_is_deterministic) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char *a = generate(m), *b = generate(m);
    EXPECT(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
}

TEST(compile, goldens_build_with_werror) {
    char cmd[1024], *out = NULL;
    for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
        snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Wextra -Werror -O1 -c %s -o %s/golden%zu.o",
                 goldens[i].golden, test_tmpdir(), i);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == 0, "%s: %s", cmd, out ? out : "");
        free(out);
    }
}

TEST(compile, template_compiles_alone) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror -Itemplates -x c -fsyntax-only templates/forward.c.in");
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s", out ? out : "");
    free(out);
}

/* Write src to a temp archspec and compile the model with it; return err. */
static int spec_error(const char *model, const char *src, char *err, size_t err_len) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad.lua", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs(src, f);
    fclose(f);
    gguf_file *g = NULL;
    char *out = NULL;
    size_t len;
    cc_options o = {.archspec_path = path};
    int rc = gguf_open(model, &g, err, err_len);
    if (!rc) rc = cc_generate(g, &o, &out, &len, err, err_len);
    free(out);
    gguf_close(g);
    return rc;
}

TEST(compile, archspec_errors_name_file_and_line) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char model[1024], err[1024];
    snprintf(model, sizeof model, "%s", m);
    /* wrong shape: expected vs actual */
    EXPECT(spec_error(model, "local n = hparam('embedding_length')\n"
                             "model{n_vocab=512, n_embd=n, n_layer=5}\n"
                             "local w = weight('token_embd.weight', {n + 1, 512})\n",
                      err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "token_embd.weight") && strstr(err, "[64, 512"),
               "message: %s", err);
    /* missing key */
    EXPECT(spec_error(model, "\n\nlocal n = hparam('no_such_key')\n", err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "llama.no_such_key"), "message: %s", err);
    /* missing tensor */
    EXPECT(spec_error(model, "model{n_vocab=512, n_embd=64, n_layer=5}\nweight('blk.9.x', {64})\n",
                      err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:2:") && strstr(err, "blk.9.x"), "message: %s", err);
    /* Lua syntax error */
    EXPECT(spec_error(model, "model{\n", err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:"), "message: %s", err);
    /* no logits */
    EXPECT(spec_error(model, "model{n_vocab=512, n_embd=64, n_layer=5}\n", err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "logits"), "message: %s", err);
    /* sandbox */
    EXPECT(spec_error(model, "os.execute('true')\n", err, sizeof err) != 0);
    EXPECT(spec_error(model, "io.open('/etc/passwd')\n", err, sizeof err) != 0);
}

/* compiler/emit.c matmul_group: consecutive matmuls of one input become one
 * matmul_n line with their in-place bias adds after it; a matmul whose
 * output is never read (its buffer freed at once, so the next output may
 * take it) is not grouped; runs of more than CF_MATMUL_N_MAX split. */
TEST(compile, matmuls_of_one_input_are_grouped) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/group.lua", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("model{n_vocab = 512, n_embd = 64, n_layer = 5}\n"
          "local tok = weight('token_embd.weight', {64, 512})\n"
          "local b = weight('blk.0.attn_norm.weight', {64})\n"
          "local h = embed(tok)\n"
          "local q = matmul(weight('blk.0.attn_q.weight', {64, 64}), h, b)\n"      /* q and o: one group, */
          "local o = matmul(weight('blk.0.attn_output.weight', {64, 64}), h, b)\n" /* the bias adds after */
          "local x = add(q, o)\n"
          "local dead = matmul(weight('blk.0.attn_k.weight', {64, 32}), x)\n"      /* never read: alone */
          "local ms = {}\n"                                                        /* 9 more of x: 8 + 1 */
          "for i = 1, 9 do ms[i] = matmul(weight('blk.' .. (i % 5) .. '.attn_q.weight', {64, 64}), x) end\n"
          "local s = x\n"
          "for i = 1, 9 do s = add(s, ms[i]) end\n"
          "logits(tok, s)\n",
          f);
    fclose(f);
    gguf_file *g = NULL;
    char *src = NULL;
    size_t len;
    cc_options o = {.archspec_path = path};
    EXPECT_MSG(!gguf_open(m, &g, err, sizeof err) && !cc_generate(g, &o, &src, &len, err, sizeof err), "%s", err);
    gguf_close(g);
    if (!src) return;
    const char *body = strstr(src, "void cf_forward(cf_env *E) {");
    EXPECT(body != NULL);
    if (!body) {
        free(src);
        return;
    }
    /* q and o: one call, then both bias adds */
    const char *g2 = strstr(body, "K->matmul_n(E, 2, ");
    EXPECT_MSG(g2 && strstr(g2, "blk.0.attn_q.weight, blk.0.attn_output.weight */"), "q/o not grouped:\n%s", body);
    const char *a1 = g2 ? strstr(g2, "K->add_row(") : NULL, *a2 = a1 ? strstr(a1 + 1, "K->add_row(") : NULL;
    const char *next_mm = g2 ? strstr(g2 + 1, "K->matmul") : NULL;
    EXPECT_MSG(a1 && a2 && next_mm && a2 < next_mm, "the bias adds do not follow the group");
    /* the dead output alone, then the 9 others as 8 + 1 */
    EXPECT_MSG(strstr(body, "T); /* blk.0.attn_k.weight */") && !strstr(body, "blk.0.attn_k.weight, "),
               "a matmul whose output is never read was grouped:\n%s", body);
    const char *g8 = strstr(body, "K->matmul_n(E, 8, ");
    EXPECT_MSG(g8, "no group of CF_MATMUL_N_MAX:\n%s", body);
    EXPECT_MSG(g8 && strstr(g8, "K->matmul(E, A + ") && !strstr(g8 + 1, "K->matmul_n("), "the ninth is not alone");
    free(src);
}

/* The ops of the issue-19 families check what they are given, at the line
 * that called them. */
TEST(compile, family_op_errors_name_the_line) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char model[1024], err[1024];
    snprintf(model, sizeof model, "%s", m);
    const char *head = "model{n_vocab=512, n_embd=64, n_layer=5}\n"
                       "local x = embed(weight('token_embd.weight', {64, 512}))\n";
    char src[2048];
    /* k = v = nil reads a cache no earlier op of that layer filled */
    snprintf(src, sizeof src, "%sattention(x, nil, nil, {layer = 1, n_head = 8, head_dim = 8})\n", head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "no earlier attention op"), "message: %s", err);
    /* ... or one of another width */
    snprintf(src, sizeof src, "%sattention(x, x, x, {layer = 1, n_head = 8, head_dim = 8})\n"
                              "attention(x, nil, nil, {layer = 1, n_head = 16, n_head_kv = 4, head_dim = 4})\n", head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:4:") && strstr(err, "width differs"), "message: %s", err);
    /* RoPE frequency factors: n_rot / 2 values */
    snprintf(src, sizeof src, "%srope(x, {n_head = 8, head_dim = 8, freq_factors = weight('blk.0.attn_norm.weight', {64})})\n",
             head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "n_rot/2 = 4"), "message: %s", err);
    /* mul_row: a weight of the width or one element */
    snprintf(src, sizeof src, "%smul_row(x, weight('blk.0.ffn_down.weight', {172, 64}))\n", head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "mul_row"), "message: %s", err);
    /* logits bias: n_vocab values */
    snprintf(src, sizeof src, "%slogits(weight('output.weight', {64, 512}), x, {bias = weight('blk.0.attn_norm.weight', {64})})\n",
             head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "logits bias"), "message: %s", err);
    /* a matrix of a 3-D weight: a 2-D one has none */
    snprintf(src, sizeof src, "%smatmul(weight('blk.0.attn_q.weight', {64, 64}), x, nil, {slice = 1})\n", head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "needs a 3-D weight"), "message: %s", err);
    /* groups: the width must be whole groups */
    snprintf(src, sizeof src, "%smix_groups(x, split(x, 0, 10))\n", head);
    EXPECT(spec_error(model, src, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:3:") && strstr(err, "mix_groups"), "message: %s", err);
    /* a variant an archspec does not implement */
    EXPECT(spec_error(model, "\nnot_supported(ARCH .. '.attention.sliding_window', 4096)\n", err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "bad.lua:2:") && strstr(err, "not supported: llama.attention.sliding_window=4096"),
               "message: %s", err);
}

/* A copy of a model with general.architecture set to one no archspec has. */
TEST(compile, unsupported_architecture_is_clear) {
    NEED_SHARED(m, "models/arch/mamba.gguf");
    char model[1024], path[1200], err[1024];
    snprintf(model, sizeof model, "%s", m);
    snprintf(path, sizeof path, "%s/rwkv7.gguf", test_tmpdir());
    const char *k[] = {"general.architecture"}, *v[] = {"rwkv7"};
    EXPECT(gguf_edit_copy(model, path, NULL, k, v, 1) == 0);
    gguf_file *g = NULL;
    char *src_c = NULL;
    size_t len;
    cc_options o = {0};
    EXPECT(gguf_open(path, &g, err, sizeof err) == 0);
    EXPECT(g && cc_generate(g, &o, &src_c, &len, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "architecture 'rwkv7' is not supported; supported: ") &&
                   strstr(err, "llama") && strstr(err, "qwen2moe") && strstr(err, "gemma3n, gemma4") &&
                   strstr(err, "mamba2") &&
                   !strstr(err, "common") && !strstr(err, ".hf"),
               "message: %s", err);
    free(src_c);
    gguf_close(g);
}

/* ---- the CLI end to end -------------------------------------------------- */

static char *stories_bos_text(void) {
    const char *ref = shared_path("models/reference/stories260K.bos.json");
    if (!ref) return NULL;
    char *txt = read_file(ref, NULL);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    char *s = j ? strdup(cJSON_GetObjectItem(j, "generated_text")->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

static void check_greedy_run(const char *extra) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char *want = stories_bos_text();
    if (!want) SKIP("reference absent");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s/cache %s run %s %s --temp 0 -n 100",
             test_tmpdir(), cinfer_bin(), m, extra);
    int st = run_cmd(cmd, false, &out);
    EXPECT_EQ_I(st, 0);
    size_t wl = strlen(want);
    EXPECT_MSG(out && strncmp(out, want, wl) == 0 && out[wl] == '\n',
               "%s:\n got: %s\nwant: %s", cmd, out ? out : "", want);
    free(out);
    free(want);
}

TEST(cli, run_greedy_jit) { check_greedy_run("--jit"); }
TEST(cli, run_greedy_aot) { check_greedy_run("--aot"); }

TEST(cli, aot_second_run_hits_cache) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s/cache2 %s run %s --aot -v -n 4 --temp 0",
             test_tmpdir(), cinfer_bin(), m);
    run_cmd(cmd, true, &out);
    EXPECT_MSG(out && strstr(out, "cache miss"), "%s", out ? out : "");
    free(out);
    run_cmd(cmd, true, &out);
    EXPECT_MSG(out && strstr(out, "cache hit") && !strstr(out, "cache miss"), "%s", out ? out : "");
    free(out);
}

TEST(cli, standalone_executable) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char *want = stories_bos_text();
    if (!want) SKIP("reference absent");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s compile %s --aot -o %s/stories", cinfer_bin(), m, test_tmpdir());
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/stories %s --temp 0 -n 100", test_tmpdir(), m);
    st = run_cmd(cmd, false, &out);
    EXPECT_EQ_I(st, 0);
    EXPECT_MSG(out && strncmp(out, want, strlen(want)) == 0, "got: %s", out ? out : "");
    free(out);
    /* the wrong model is refused */
    const char *other = shared_path("models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    if (other) {
        snprintf(cmd, sizeof cmd, "%s/stories %s -n 1", test_tmpdir(), other);
        st = run_cmd(cmd, true, &out);
        EXPECT(st != 0 && out && strstr(out, "fingerprint"));
        free(out);
    }
    free(want);
}

TEST(cli, dump_logits_and_prompt_ids) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char cmd[2048], path[512], *out = NULL;
    snprintf(path, sizeof path, "%s/logits.json", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s run %s --prompt-ids '1 403 407 261 378' -n 0 --dump-logits %s",
             cinfer_bin(), m, path);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    char *txt = read_file(path, NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    EXPECT(j != NULL);
    if (j) {
        EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItem(j, "prompt_ids")), 5);
        cJSON *lg = cJSON_GetObjectItem(j, "logits");
        EXPECT_EQ_I(cJSON_GetArraySize(lg), 512);
        /* reference: argmax after "Once upon a time" is 432 */
        int best = 0;
        for (int i = 1; i < cJSON_GetArraySize(lg); i++)
            if (cJSON_GetArrayItem(lg, i)->valuedouble > cJSON_GetArrayItem(lg, best)->valuedouble)
                best = i;
        EXPECT_EQ_I(best, 432);
    }
    cJSON_Delete(j);
    free(txt);
}

TEST(cli, bad_arguments_fail_cleanly) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char cmd[2048], *out = NULL;
    const char *cases[] = {"--temp abc", "-n -5", "--prompt-ids '1 x'", "--quant int3",
                           "--bogus", "--prompt-ids '1 99999'", "-c 4 -p 'Once upon a time there was'"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "%s run %s %s", cinfer_bin(), m, cases[i]);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st != 0 && st < 128 && out && strstr(out, "cinfer"), "%s -> %d: %s", cmd, st,
                   out ? out : "");
        free(out);
    }
}

/* ---- variants an archspec refuses ------------------------------------------------ */

#include "formats/gguf_write.h"

/* dst = src with metadata key set to v (replaced, or appended), tensors as they are. */
static int copy_with_key(const char *src, const char *dst, const char *key, gguf_value v) {
    char err[512];
    gguf_file *g = NULL;
    if (gguf_open(src, &g, err, sizeof err)) return test_fail(__FILE__, __LINE__, "%s", err), -1;
    gguf_out out;
    if (gguf_out_open(&out, dst, ".partial", g, err, sizeof err)) {
        gguf_close(g);
        return test_fail(__FILE__, __LINE__, "%s", err), -1;
    }
    gguf_writer *w = &out.w;
    const gguf_kv_set set[] = {{key, v}};
    const uint64_t n = gguf_n_tensors(g);
    gguf_w_header(w, g, n, NULL, NULL, set, 1);
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_tensor_info(w, t->name, t->n_dims, t->ne, t->type, t->offset);
    }
    gguf_w_pad(w, gguf_alignment(g));
    const uint64_t data0 = w->off;
    for (uint64_t done = 0; done < n; done++) { /* in offset order */
        const gguf_tensor *next = NULL;
        for (uint64_t i = 0; i < n; i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            if (t->offset >= w->off - data0 && (!next || t->offset < next->offset)) next = t;
        }
        gguf_w_zeros(w, next->offset - (w->off - data0));
        gguf_w_bytes(w, next->data, (size_t)next->n_bytes);
    }
    int rc = w->err || gguf_out_close(&out) || gguf_out_commit(&out, err, sizeof err) ? -1 : 0;
    gguf_out_abort(&out);
    gguf_close(g);
    if (rc) test_fail(__FILE__, __LINE__, "writing %s failed", dst);
    return rc;
}

/* The archgen model of family with key set to v must be refused at compile
 * time with want (and the archspec's file:line), never compiled. */
static void expect_refused(const char *family, const char *key, gguf_value v, const char *want) {
    NEED_SHARED(vocab, "models/stories260K/stories260K.gguf");
    char cmd[2000], src[1200], dst[1200], err[1024], *out = NULL;
    const char *dir = test_tmpdir(), *build = getenv("CINFER_BUILD");
    snprintf(src, sizeof src, "%s/%s.gguf", dir, family);
    snprintf(dst, sizeof dst, "%s/%s-refused.gguf", dir, family);
    snprintf(cmd, sizeof cmd, "'%s/tools/archgen' -o '%s' --vocab-from '%s' %s", build && *build ? build : "build",
             dir, vocab, family);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s: %s", cmd, out ? out : "");
    free(out);
    if (st || copy_with_key(src, dst, key, v)) return;
    gguf_file *g = NULL;
    char *c = NULL;
    size_t len;
    cc_options o = {0};
    EXPECT(gguf_open(dst, &g, err, sizeof err) == 0);
    EXPECT(g && cc_generate(g, &o, &c, &len, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, want) && strstr(err, "archspecs/"), "%s with %s: message: %s", family, key, err);
    free(c);
    gguf_close(g);
}

TEST(compile, moe_variants_not_implemented_are_refused) {
    expect_refused("deepseek2", "deepseek2.expert_gating_func", gguf_val_u32(4),
                   "not supported: deepseek2.expert_gating_func=4");
    expect_refused("qwen3moe", "qwen3moe.rope.scaling.type", gguf_val_str("longrope"),
                   "not supported: qwen3moe.rope.scaling.type=longrope");
    expect_refused("glm4moe", "glm4moe.expert_gating_func", gguf_val_u32(4),
                   "not supported: glm4moe.expert_gating_func=4");
    expect_refused("deepseek2", "deepseek2.attention.temperature_scale", gguf_val_u32(2),
                   "not supported: deepseek2.attention.temperature_scale=2");
}

/* An inf/NaN float hyperparameter is refused by name at the archspec line
 * that reads it (it once became a 'nanf' C literal that tcc could not compile). */
TEST(compile, nonfinite_hparams_are_refused) {
    gguf_value nan = {.type = GGUF_VT_FLOAT32}, inf = {.type = GGUF_VT_FLOAT32};
    nan.v.f64 = NAN;
    inf.v.f64 = -INFINITY;
    expect_refused("llama", "llama.attention.layer_norm_rms_epsilon", nan,
                   "GGUF key 'llama.attention.layer_norm_rms_epsilon' is NaN, not a finite number");
    expect_refused("deepseek2", "deepseek2.expert_weights_scale", inf,
                   "GGUF key 'deepseek2.expert_weights_scale' is -inf, not a finite number");
}
