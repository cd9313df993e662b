/*
 * test_cuda.c — the CUDA backend without a GPU (docs/cuda.md says what this
 * leaves unverified):
 *   cuda/        golden .cu sources, determinism, clang's CUDA front end on
 *                the goldens, the template and every kernel instantiation,
 *                the host half compiled by libtcc and the plans it yields,
 *                cache keys, weight layout and context sizes, refusals (ops,
 *                types, precisions), the dlopen layer's "not found" path;
 *   cuda_emul/   the device kernels' per-thread arithmetic
 *                (runtime/kernels/cuda/cfk_quant.cuh) compiled as C and held
 *                to the CPU kernels bit for bit;
 *   cuda_mock/   --device cuda end to end against tests/cuda/mock_cuda.c, a
 *                stand-in libcuda/libnvrtc that checks every call and
 *                computes nothing.
 */
#include <dlfcn.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/f16.h"
#include "cinfer.h"
#include "compiler/compile.h"
#include "engine/eng_cuda.h"
#include "formats/gguf.h"
#include "gpu/cuda.h"
#include "http_client.h"
#include "kernels/cuda/cfk_geom.h"
#include "kernels/cuda/cfk_quant.cuh"
#include "kernels/kern.h"
#include "kernels/kern_elem.h"
#include "test.h"

typedef struct {
    const char *model; /* under ../shared */
    const char *golden;
} cu_golden;

static const cu_golden goldens[] = {
    {"models/stories260K/stories260K.gguf", "generated/stories260K.cu"},
    {"models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf", "generated/TinyStories-656K-Q8_0.cu"},
};

static char *generate_cu(const char *model_path, char *err, size_t err_len) {
    gguf_file *g = NULL;
    char *src = NULL;
    size_t len;
    cc_options o = {.device = CC_DEVICE_CUDA};
    if (gguf_open(model_path, &g, err, err_len) || cc_generate(g, &o, &src, &len, err, err_len)) src = NULL;
    gguf_close(g);
    return src;
}

/* The random-weight test model of an archgen family (tools/archgen.c, vocabulary
 * from stories260K) in the test's temporary folder: its path in buf, or NULL
 * (test_not_run) where archgen or stories260K is absent. */
static const char *archgen_model(const char *family, char *buf, size_t cap) {
    const char *build = getenv("CINFER_BUILD"), *vocab = shared_path("models/stories260K/stories260K.gguf");
    char gen[1024], cmd[4096], *out = NULL;
    snprintf(gen, sizeof gen, "%s/tools/archgen", build && *build ? build : "build");
    snprintf(buf, cap, "%s/archgen/%s.gguf", test_tmpdir(), family);
    if (!vocab || access(gen, X_OK)) {
        test_not_run("the %s test model: %s", family, vocab ? "no tools/archgen build" : "no stories260K vocabulary");
        return NULL;
    }
    if (access(buf, R_OK)) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/archgen' && '%s' -o '%s/archgen' --vocab-from '%s' %s", test_tmpdir(),
                 gen, test_tmpdir(), vocab, family);
        if (run_cmd(cmd, true, &out)) test_fail(__FILE__, __LINE__, "%s: %s", cmd, out ? out : "");
        free(out);
    }
    return access(buf, R_OK) ? NULL : buf;
}

TEST(cuda, golden_sources_match) {
    for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
        const char *m = shared_path(goldens[i].model);
        if (!m) SKIP("%s/%s absent", shared_root(), goldens[i].model);
        char err[1024];
        char *src = generate_cu(m, err, sizeof err);
        EXPECT_MSG(src, "%s: %s", m, err);
        char *want = read_file(goldens[i].golden, NULL);
        EXPECT_MSG(want, "%s missing (run make golden)", goldens[i].golden);
        if (src && want && strcmp(src, want)) {
            size_t k = 0;
            while (src[k] && src[k] == want[k]) k++;
            int line = 1;
            for (size_t q = 0; q < k; q++) line += src[q] == '\n';
            test_fail(__FILE__, __LINE__, "%s differs from fresh output at line %d (run make golden if the "
                      "change is intended)", goldens[i].golden, line);
        }
        free(src);
        free(want);
    }
}

TEST(cuda, emission_is_deterministic) {
    NEED_SHARED(m, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char err[512];
    char *a = generate_cu(m, err, sizeof err), *b = generate_cu(m, err, sizeof err);
    EXPECT(a && b && strcmp(a, b) == 0);
    /* and it is not the C source */
    EXPECT(a && strstr(a, "CF_KERNEL(cf_mv") && strstr(a, "void cf_cuda_forward(cf_cuda_host *H)") &&
           !strstr(a, "void cf_forward(cf_env *E)"));
    free(a);
    free(b);
}

/* ---- clang's CUDA front end ------------------------------------------------------ */

#define CLANG_CUDA                                                                                     \
    "clang -x cuda -fsyntax-only -nocudainc -nocudalib -Wno-unknown-cuda-version -std=c++17 -Wall "   \
    "-Wextra -Werror --cuda-gpu-arch=sm_75 --cuda-gpu-arch=sm_80 -include tests/cuda/clang_decls.cuh " \
    "-Itemplates -Iruntime/kernels/cuda"

/* Both device passes (sm_75: the FMA tiles; sm_80: mma.sync, the branch sm_90
 * takes too: Debian 12's clang 14 has no sm_90) and the host
 * pass, over the goldens, the template alone, a synthetic K-quant model's
 * source and tests/cuda/instantiate.cu (every kernel, every weight type),
 * in one clang run. */
TEST(cuda, clang_syntax_check) {
    NEED_TOOL("clang", "clang");
    char extra[1024] = "";
    const char *k = shared_path("models/synthetic/synth-d256-Q4_K_M.gguf");
    if (k) {
        char err[512];
        char *src = generate_cu(k, err, sizeof err);
        EXPECT_MSG(src, "%s", err);
        snprintf(extra, sizeof extra, "%s/synth-q4_k_m.cu", test_tmpdir());
        FILE *f = fopen(extra, "w");
        if (f && src) fputs(src, f);
        if (f) fclose(f);
        free(src);
    } else {
        test_not_run("the K-quant model's CUDA source (%s/models/synthetic absent)", shared_root());
    }
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, CLANG_CUDA " templates/forward.cu.in tests/cuda/instantiate.cu %s %s %s 2>&1",
             access(goldens[0].golden, R_OK) == 0 ? goldens[0].golden : "",
             access(goldens[1].golden, R_OK) == 0 ? goldens[1].golden : "", extra);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s:\n%s", cmd, out ? out : "");
    free(out);
}

/* The check fails on what NVRTC would reject: an undeclared built-in, a
 * type error in a template body instantiated only through the model. */
TEST(cuda, clang_syntax_check_can_fail) {
    NEED_TOOL("clang", "clang");
    char path[512], cmd[2048], *out = NULL;
    snprintf(path, sizeof path, "%s/bad.cu", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("#include \"prelude_cuda.h\"\n#include \"cf_cuda.cuh\"\n"
          "extern \"C\" __global__ void k(const cf_cuda_env *E) { cfk_mv<CFK_T_Q4_K, 64, 256>(E->arena, "
          "E->arena, E, E->n_tokens); __threadfence_magic(); }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, CLANG_CUDA " %s 2>&1", path);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st != 0 && out && strstr(out, "__threadfence_magic"), "%s", out ? out : "");
    free(out);
}

/* ---- the host half and its plans ---------------------------------------------------- */

typedef struct {
    gguf_file *g;
    cc_module *mod;
    char *src;
} host_half;

static int open_host_half(const char *model, host_half *h) {
    char err[1024];
    size_t len;
    memset(h, 0, sizeof *h);
    cc_options o = {.device = CC_DEVICE_CUDA};
    if (gguf_open(model, &h->g, err, sizeof err) || cc_generate(h->g, &o, &h->src, &len, err, sizeof err) ||
        cc_build(h->g, &o, &h->mod, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", model, err);
        return -1;
    }
    return 0;
}

static void close_host_half(host_half *h) {
    cc_module_free(h->mod);
    gguf_close(h->g);
    free(h->src);
}

/* Dimension `which` of the template arguments body<TYPE, N_OUT, N_IN> of a kernel. */
static int kernel_dim(const char *src, const char *kernel, const char *body, int which) {
    char key[96];
    snprintf(key, sizeof key, "CF_KERNEL(%s,", kernel);
    const char *p = strstr(src, key);
    if (!p) return -1;
    p = strstr(p, body);
    if (!p) return -1;
    int d[3];
    if (sscanf(p + strlen(body), "%d, %d, %d", &d[0], &d[1], &d[2]) != 3) return -1;
    return d[which];
}

static int is(const char *kernel, const char *prefix) { return !strncmp(kernel, prefix, strlen(prefix)); }

static void check_plan(const host_half *h, int T, int want_hidden, int logits_all, int n_ctx) {
    ecu_plan p = {.want_hidden = want_hidden, .logits_all = logits_all, .att_splits = ecu_att_splits(n_ctx)};
    char err[512];
    EXPECT_MSG(ecu_plan_build(&p, h->mod->cuda_forward, T, err, sizeof err) == 0, "%s", err);
    p.l = calloc((size_t)p.n, sizeof *p.l);
    p.cap = p.n;
    EXPECT(ecu_plan_build(&p, h->mod->cuda_forward, T, err, sizeof err) == 0);
    const cf_model_desc *d = h->mod->desc;
    int n_mm = 0, n_mv = 0, n_dec = 0, n_cmb = 0, n_pf = 0, n_kv = 0, n_hid = 0, n_last = 0, n_all = 0;
    for (int i = 0; i < p.n && !test_failed(); i++) {
        const ecu_launch *l = &p.l[i];
        const char *name = l->kernel;
        char key[96];
        snprintf(key, sizeof key, "CF_KERNEL(%s,", name);
        EXPECT_MSG(strstr(h->src, key), "T=%d: the plan launches %s, the source does not define it", T, name);
        EXPECT_MSG(l->grid[0] >= 1 && l->grid[1] >= 1 && l->grid[1] <= 65535 && l->block >= 1 && l->block <= 1024,
                   "%s: grid (%u, %u) block %u", name, l->grid[0], l->grid[1], l->block);
        /* its buffers are inside the arena and its weights real slots */
        for (int b = -1; b < 3; b++) {
            long off = b < 0 ? l->out : l->in[b];
            EXPECT_MSG(off >= -1 && off < d->arena_floats, "%s: arena offset %ld of %ld", name, off, d->arena_floats);
        }
        EXPECT_MSG(l->w >= -1 && l->w < d->n_weights && l->w2 >= -1 && l->w2 < d->n_weights, "%s: weight slots %d %d",
                   name, l->w, l->w2);
        EXPECT_MSG(l->layer >= 0 && l->layer < d->n_layer, "%s: layer %d", name, l->layer);
        if (is(name, "cf_mv_")) {
            int n_out = kernel_dim(h->src, name, "cfk_mv<", 1);
            EXPECT_MSG(n_out > 0 && l->grid[0] * CFK_MV_ROWS >= (unsigned)n_out &&
                           (l->grid[0] - 1) * CFK_MV_ROWS < (unsigned)n_out && l->block == CFK_MV_THREADS && l->w >= 0,
                       "%s: %u blocks of %d rows for %d outputs", name, l->grid[0], CFK_MV_ROWS, n_out);
            n_mv++;
        } else if (is(name, "cf_mm_")) {
            int n_out = kernel_dim(h->src, name, "cfk_mm<", 1);
            EXPECT_MSG(n_out > 0 && l->grid[0] * CFK_MM_BN >= (unsigned)n_out &&
                           l->grid[1] * CFK_MM_BM >= (unsigned)T && (l->grid[1] - 1) * CFK_MM_BM < (unsigned)T,
                       "%s: grid (%u, %u) for %d outputs x %d tokens", name, l->grid[0], l->grid[1], n_out, T);
            n_mm++;
        } else if (is(name, "cf_kv_")) {
            n_kv++;
            EXPECT_EQ_I(l->grid[0], T);
            EXPECT_EQ_I(l->layer, n_kv - 1); /* one per layer, in order, sharing the kernel */
        } else if (is(name, "cf_ad_")) {
            n_dec++;
            EXPECT_EQ_I(l->grid[1], ecu_att_splits(n_ctx));
        } else if (is(name, "cf_ac_")) n_cmb++;
        else if (is(name, "cf_ap_")) {
            n_pf++;
            EXPECT_EQ_I(l->grid[1], (T + CFK_ATT_Q - 1) / CFK_ATT_Q);
        } else if (is(name, "cf_lh_")) n_hid++;
        else if (is(name, "cf_lm_")) n_last++;
        else if (is(name, "cf_lv_") || is(name, "cf_la_")) {
            n_all++;
            EXPECT_MSG(T <= CFK_MV_MAX_T ? is(name, "cf_lv_") : is(name, "cf_la_"), "T=%d: %s", T, name);
        }
    }
    const int n_layer = d->n_layer;
    EXPECT_EQ_I(n_kv, n_layer);
    if (T == 1) {
        EXPECT_MSG(n_mm == 0 && n_pf == 0 && n_dec == n_layer && n_cmb == n_layer,
                   "decode: %d tiled matmuls, %d prompt attentions, %d/%d split attentions", n_mm, n_pf, n_dec, n_cmb);
        EXPECT_MSG(p.scratch_floats > 0, "decode attention needs scratch");
    } else {
        EXPECT_MSG(n_dec == 0 && n_pf == n_layer, "T=%d: %d decode attentions, %d prompt attentions", T, n_dec, n_pf);
        EXPECT_MSG(T <= CFK_MV_MAX_T ? n_mm == 0 && n_mv > 0 : n_mv == 0 && n_mm > 0, "T=%d: %d mv, %d mm", T, n_mv,
                   n_mm);
    }
    EXPECT_EQ_I(n_hid, want_hidden);
    EXPECT_MSG(logits_all ? n_all == 1 && n_last == 0 : n_last == 1 && n_all == 0, "logits: %d last, %d all", n_last,
               n_all);
    free(p.l);
}

TEST(cuda, host_half_plans) {
    static const char *models[] = {"models/stories260K/stories260K.gguf",
                                   "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf",
                                   "models/synthetic/synth-d256-Q4_K_M.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        NEED_SHARED(m, models[i]);
        host_half h;
        if (open_host_half(m, &h)) continue;
        EXPECT(h.mod->cuda_forward && !h.mod->forward && h.mod->cuda_image.data == NULL);
        EXPECT_EQ_I(h.mod->desc->abi_version, CF_ABI_VERSION);
        EXPECT_EQ_I(h.mod->desc->n_batch, 512);
        const int Ts[] = {1, 2, CFK_MV_MAX_T, CFK_MV_MAX_T + 1, 63, 64, 65, 512};
        for (size_t t = 0; t < sizeof Ts / sizeof *Ts && !test_failed(); t++)
            for (int hid = 0; hid < 2; hid++)
                for (int all = 0; all < 2; all++) check_plan(&h, Ts[t], hid, all, t % 2 ? 4096 : 300);
        close_host_half(&h);
    }
}

/* A request outside the kernels' geometry fails the plan with the op named. */
static void fake_forward_big_head(cf_cuda_host *H) {
    H->ops->attention(H, 7, "cf_kv_1", "cf_ad_1", "cf_ac_1", "cf_ap_1", 0, 0, 0, 0, 0, 8, 8, 512, H->n_tokens);
}
static void fake_forward_grid(cf_cuda_host *H) { H->ops->rope(H, 3, "cf_x_2", 0, -1, 70000, 128, H->n_tokens); }

TEST(cuda, plan_refuses_what_kernels_cannot_serve) {
    ecu_plan p = {.att_splits = 1};
    char err[512];
    EXPECT(ecu_plan_build(&p, fake_forward_big_head, 1, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "op 7") && strstr(err, "head_dim"), "%s", err);
    EXPECT(ecu_plan_build(&p, fake_forward_grid, 1, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "op 3") && strstr(err, "cf_x_2") && strstr(err, "70000"), "%s", err);
}

/* ---- cache keys, layout, sizes ---------------------------------------------------------- */

TEST(cuda, cache_key) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char err[512], dir[1024], base[1200], p[1200];
    snprintf(dir, sizeof dir, "%s/cache", test_tmpdir());
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    gguf_file *g = NULL;
    EXPECT(gguf_open(m, &g, err, sizeof err) == 0);
    const char *src = "extern \"C\" __global__ void k() {}";
    cc_cuda_target t = {"NVIDIA H200", 9, 0, 12040, 12, 4, "sm_90"};
    EXPECT_MSG(cc_cuda_cache_path(g, src, strlen(src), &t, base, sizeof base, err, sizeof err) == 0, "%s", err);
    char fp[32];
    snprintf(fp, sizeof fp, "/%016llx-", (unsigned long long)gguf_fingerprint(g));
    EXPECT_MSG(!strncmp(base, dir, strlen(dir)) && strstr(base, fp) && strlen(base) > 6 &&
                   !strcmp(base + strlen(base) - 6, ".cubin"),
               "%s", base);
    EXPECT(cc_cuda_cache_path(g, src, strlen(src), &t, p, sizeof p, err, sizeof err) == 0 && !strcmp(p, base));
    /* every field of the target and the source move the key */
    cc_cuda_target v[] = {t, t, t, t, t, t};
    v[0].name = "NVIDIA A100";
    v[1].cc_minor = 1;
    v[2].driver_version = 12050;
    v[3].nvrtc_minor = 5;
    v[4].arch = "compute_90";
    v[5].cc_major = 8;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        EXPECT(cc_cuda_cache_path(g, src, strlen(src), &v[i], p, sizeof p, err, sizeof err) == 0);
        EXPECT_MSG(strcmp(p, base), "target field %zu does not change the key", i);
    }
    EXPECT(cc_cuda_cache_path(g, src, strlen(src) - 1, &t, p, sizeof p, err, sizeof err) == 0 && strcmp(p, base));
    EXPECT(cc_cuda_cache_path(g, src, strlen(src), &v[4], p, sizeof p, err, sizeof err) == 0 &&
           !strcmp(p + strlen(p) - 4, ".ptx"));
    gguf_close(g);
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
}

TEST(cuda, weight_layout_and_context_bytes) {
    NEED_SHARED(m, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    host_half h;
    if (open_host_half(m, &h)) return;
    const cf_model_desc *d = h.mod->desc;
    size_t *off = calloc((size_t)d->n_weights, sizeof *off), *bytes = calloc((size_t)d->n_weights, sizeof *bytes);
    size_t total = 0, sum = 0;
    char err[512];
    EXPECT_MSG(ecu_weight_layout(h.g, d, off, bytes, &total, err, sizeof err) == 0, "%s", err);
    int q8 = 0;
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(h.g, d->weight_names[i]);
        EXPECT_EQ_I(bytes[i], t->n_bytes);
        EXPECT_EQ_I(off[i] % ECU_ALIGN, 0);
        if (i) EXPECT(off[i] >= off[i - 1] + bytes[i - 1]);
        EXPECT(off[i] + bytes[i] <= total);
        sum += bytes[i];
        q8 += t->type == GGML_TYPE_Q8_0 && d->weight_types[i] == GGML_TYPE_Q8_0; /* uploaded as in the file */
    }
    EXPECT_MSG(q8 > 0, "the Q8_0 model's matmul weights keep Q8_0 on CUDA");
    EXPECT(total >= sum && total < sum + (size_t)d->n_weights * ECU_ALIGN);
    EXPECT_EQ_I(total % ECU_ALIGN, 0);
    /* a file whose tensor type differs from the compiled one is refused */
    cf_model_desc bad = *d;
    int *types = malloc((size_t)d->n_weights * sizeof *types);
    memcpy(types, d->weight_types, (size_t)d->n_weights * sizeof *types);
    for (int i = 0; i < d->n_weights; i++)
        if (types[i] == GGML_TYPE_Q8_0) {
            types[i] = GGML_TYPE_Q4_K;
            break;
        }
    bad.weight_types = types;
    EXPECT(ecu_weight_layout(h.g, &bad, off, bytes, &total, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "Q8_0 in the file, compiled for Q4_K"), "%s", err);
    free(types);
    /* context bytes */
    ecu_ctx_bytes cb;
    const int n_ctx = 1000;
    EXPECT(ecu_ctx_bytes_for(d, h.mod->cuda_forward, n_ctx, 0, &cb, err, sizeof err) == 0);
    size_t kv = 0;
    for (int l = 0; l < d->n_layer; l++) kv += 2 * (((size_t)n_ctx * d->kv_dim[l] * 4 + ECU_ALIGN - 1) / ECU_ALIGN * ECU_ALIGN);
    EXPECT_EQ_I(cb.kv, kv);
    EXPECT(cb.arena >= (size_t)d->arena_floats * 4 && cb.arena < (size_t)d->arena_floats * 4 + ECU_ALIGN);
    EXPECT(cb.logits >= (size_t)d->n_vocab * 4 && cb.logits < (size_t)d->n_vocab * 4 + ECU_ALIGN);
    EXPECT(cb.hidden >= (size_t)d->n_batch * d->n_embd * 4);
    EXPECT(cb.scratch >= 4 * (size_t)ecu_att_splits(n_ctx) * 2); /* at least (n_head, splits, hd + 2) */
    EXPECT_EQ_I(cb.total, cb.kv + cb.arena + cb.logits + cb.hidden + cb.scratch + cb.env);
    ecu_ctx_bytes all;
    EXPECT(ecu_ctx_bytes_for(d, h.mod->cuda_forward, n_ctx, 1, &all, err, sizeof err) == 0);
    EXPECT(all.logits >= (size_t)d->n_batch * d->n_vocab * 4);
    free(off);
    free(bytes);
    close_host_half(&h);
}

/* ---- refusals ------------------------------------------------------------------------------ */

TEST(cuda, unsupported_type_and_precision_are_clear) {
    NEED_SHARED(m5, "models/synthetic/synth-d256-Q5_K_M.gguf");
    char err[1024], model[1024];
    snprintf(model, sizeof model, "%s", m5);
    gguf_file *g = NULL;
    char *src = NULL;
    size_t len;
    cc_options o = {.device = CC_DEVICE_CUDA};
    EXPECT(gguf_open(model, &g, err, sizeof err) == 0);
    EXPECT(cc_generate(g, &o, &src, &len, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "not supported on --device cuda: tensor '") && strstr(err, "is Q5_K") &&
                   strstr(err, "archspecs/"),
               "%s", err);
    free(src);
    gguf_close(g);
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    EXPECT(gguf_open(m, &g, err, sizeof err) == 0);
    o.precision = CINFER_PRECISION_INT4;
    EXPECT(cc_generate(g, &o, &src, &len, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "--quant int4 is not supported on --device cuda"), "%s", err);
    gguf_close(g);
}

/* An op without a kernel line in templates/ops.cu.in (the MoE and SSM ops of
 * other branches until they get one): refused at compile time, by name, with
 * the archspec line. */
TEST(cuda, unsupported_op_is_clear) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char dir[512], cmd[4096], *out = NULL, err[1024];
    snprintf(dir, sizeof dir, "%s/specs", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/templates %s/runtime/kernels && cp -r archspecs %s/ && cp templates/* %s/templates/ && "
             "cp -r runtime/kernels/cuda %s/runtime/kernels/ && sed '/^\\/\\*@kernel rope\\*\\//,+1d' templates/ops.cu.in "
             "> %s/templates/ops.cu.in",
             dir, dir, dir, dir, dir, dir);
    EXPECT_MSG(run_cmd(cmd, true, &out) == 0, "%s", out ? out : "");
    free(out);
    setenv("CINFER_SPEC_DIR", dir, 1);
    gguf_file *g = NULL;
    char *src = NULL;
    size_t len;
    cc_options o = {.device = CC_DEVICE_CUDA};
    EXPECT(gguf_open(m, &g, err, sizeof err) == 0);
    EXPECT(cc_generate(g, &o, &src, &len, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "not supported on --device cuda: op 'rope' (archspecs/llama.lua:"), "%s", err);
    /* the C path does not need the CUDA line */
    o.device = CC_DEVICE_CPU;
    EXPECT_MSG(cc_generate(g, &o, &src, &len, err, sizeof err) == 0, "%s", err);
    free(src);
    gguf_close(g);
    unsetenv("CINFER_SPEC_DIR");
}

/* Families with ops (or forms of attention) the CUDA path has no kernel for
 * are refused at compile time with the op and the archspec line; the CPU
 * compiles them. */
TEST(cuda, unsupported_family_ops_are_clear) {
    static const struct {
        const char *family, *want;
    } cases[] = {
        {"gemma3n", "op 'matmul_slice' (archspecs/gemma3n.lua:"},
        {"apertus", "op 'xielu' (archspecs/apertus.lua:"},
        {"gpt-oss", "op 'attention' with attention sinks (archspecs/"},
        {"qwen3moe", "op 'moe_route' (archspecs/"},
        {"deepseek2", "op 'head_split' (archspecs/deepseek2.lua:"},
        {"bert", "op 'attention' without a causal mask (an encoder's) (archspecs/"},
        {"mamba", "op 'ssm_conv' (archspecs/mamba.lua:"}, /* recurrent state stays on the CPU */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[1024], err[1024];
        if (!archgen_model(cases[i].family, path, sizeof path)) return;
        gguf_file *g = NULL;
        char *src = NULL;
        size_t len;
        cc_options o = {.device = CC_DEVICE_CUDA};
        EXPECT_MSG(gguf_open(path, &g, err, sizeof err) == 0, "%s", err);
        if (!g) continue;
        EXPECT_MSG(cc_generate(g, &o, &src, &len, err, sizeof err) != 0 &&
                       strstr(err, "not supported on --device cuda: ") && strstr(err, cases[i].want),
                   "%s: want '%s', got '%s'", cases[i].family, cases[i].want, err);
        free(src);
        src = NULL;
        o.device = CC_DEVICE_CPU; /* the same model on the CPU compiles */
        EXPECT_MSG(cc_generate(g, &o, &src, &len, err, sizeof err) == 0, "%s on the CPU: %s", cases[i].family, err);
        free(src);
        gguf_close(g);
    }
}

/* ---- the dlopen layer: what a machine without CUDA says -------------------------------------------- */

TEST(cuda, driver_not_found_is_clear) {
    char err[2048];
    cuda_dev *d = NULL;
    setenv("CINFER_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    EXPECT(cuda_open(0, &d, err, sizeof err) != 0 && d == NULL);
    EXPECT_MSG(strstr(err, "no CUDA driver: libcuda.so.1 not found") && strstr(err, "/nonexistent/libcuda.so.1") &&
                   strstr(err, "CINFER_CUDA_DRIVER"),
               "%s", err);
    unsetenv("CINFER_CUDA_DRIVER");
    /* the default search: every place it looks is named */
    void *h = NULL;
    char path[512];
    if (cuda_load_driver(&h, path, sizeof path, err, sizeof err) == 0) {
        test_not_run("the driver search's 'not found' message: this machine has %s", path);
        dlclose(h);
    } else {
        EXPECT_MSG(strstr(err, "libcuda.so.1 (via the dynamic loader") && strstr(err, "/usr/lib64/libcuda.so.1") &&
                       strstr(err, "install the NVIDIA driver"),
                   "%s", err);
    }
    setenv("CINFER_NVRTC", "/nonexistent/libnvrtc.so.12", 1);
    EXPECT(cuda_load_nvrtc(&h, path, sizeof path, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "no NVRTC") && strstr(err, "/nonexistent/libnvrtc.so.12") && strstr(err, "CINFER_NVRTC"),
               "%s", err);
    unsetenv("CINFER_NVRTC");
    if (cuda_load_nvrtc(&h, path, sizeof path, err, sizeof err) == 0) {
        test_not_run("NVRTC's 'not found' message: this machine has %s", path); /* stays loaded (cuda_close) */
    } else {
        EXPECT_MSG(strstr(err, "libnvrtc.so.12") && strstr(err, "libnvrtc.so.13") &&
                       strstr(err, "/usr/local/cuda/lib64/libnvrtc.so.12"),
                   "%s", err);
    }
}

TEST(cuda, cli_without_driver) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char cmd[2048], *out = NULL;
    int st;
    static const char *const cmds[] = {"run", "bench", "serve", "chat"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char want[128];
        snprintf(cmd, sizeof cmd, "CINFER_CUDA_DRIVER=/nonexistent/libcuda.so.1 %s %s %s --device cuda%s </dev/null 2>&1",
                 cinfer_bin(), cmds[i], m, i == 2 ? " --port 0" : "");
        snprintf(want, sizeof want, "cinfer %s: --device cuda: no CUDA driver: libcuda.so.1 not found", cmds[i]);
        st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st != 0 && out && strstr(out, want), "%s: %d: %s", cmd, st, out ? out : "");
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s run %s --device tpu 2>&1", cinfer_bin(), m);
    st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st != 0 && out && strstr(out, "--device 'tpu': expected cpu, cuda or cuda:N"), "%s", out ? out : "");
    free(out);
    /* the CPU-memory features refuse the GPU before any driver is looked for */
    static const char *const mixes[][3] = {
        {"run", "--stream-weights", "cinfer run: --device cuda: --stream-weights streams CPU weights"},
        {"bench", "--mem 1G", "cinfer bench: --device cuda: --mem plans CPU memory"},
    };
    for (size_t i = 0; i < sizeof mixes / sizeof *mixes; i++) {
        snprintf(cmd, sizeof cmd, "CINFER_CUDA_DRIVER=/nonexistent/libcuda.so.1 %s %s %s --device cuda %s 2>&1",
                 cinfer_bin(), mixes[i][0], m, mixes[i][1]);
        st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st != 0 && out && strstr(out, mixes[i][2]) && !strstr(out, "libcuda"), "%s: %d: %s", cmd, st,
                   out ? out : "");
        free(out);
    }
    cinfer_model *cm = NULL;
    char err[1024];
    EXPECT(cinfer_model_open(m, &(cinfer_model_options){.device = CINFER_DEVICE_CUDA, .stream_weights = 1}, &cm, err,
                             sizeof err) == CINFER_EARG && !cm && strstr(err, "--stream-weights"));
    EXPECT(cinfer_model_open(m, &(cinfer_model_options){.device = CINFER_DEVICE_CUDA, .mem_bytes = 1u << 30}, &cm,
                             err, sizeof err) == CINFER_EARG && !cm && strstr(err, "--mem"));
}

/* ---- cuda_emul: the kernels' arithmetic against the CPU kernels ------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A row of n elements of type t: random bytes, finite random f16 scales. */
static void random_row(int t, unsigned char *row, int n) {
    size_t nb = cfk_row_bytes(t, n);
    for (size_t i = 0; i < nb; i++) row[i] = (unsigned char)rnd();
    int blk = t == CFK_T_Q8_0 ? 34 : t == CFK_T_Q4_0 ? 18 : t == CFK_T_Q4_K ? 144 : t == CFK_T_Q6_K ? 210 : 0;
    int at[2] = {t == CFK_T_Q6_K ? 208 : 0, t == CFK_T_Q4_K ? 2 : -1};
    for (size_t b = 0; blk && b < nb; b += (size_t)blk)
        for (int k = 0; k < 2; k++)
            if (at[k] >= 0) {
                uint16_t h = f32_to_f16(((float)(rnd() % 2000) - 1000.0f) * 1e-4f);
                memcpy(row + b + (size_t)at[k], &h, 2);
            }
    if (t == CFK_T_F32)
        for (int i = 0; i < n; i++) {
            float f = ((float)(rnd() % 20001) - 10000.0f) * 1e-3f;
            memcpy(row + 4 * (size_t)i, &f, 4);
        }
}

TEST(cuda_emul, type_ids_are_ggml) {
    EXPECT_EQ_I(CFK_T_F32, GGML_TYPE_F32);
    EXPECT_EQ_I(CFK_T_F16, GGML_TYPE_F16);
    EXPECT_EQ_I(CFK_T_BF16, GGML_TYPE_BF16);
    EXPECT_EQ_I(CFK_T_Q8_0, GGML_TYPE_Q8_0);
    EXPECT_EQ_I(CFK_T_Q4_0, GGML_TYPE_Q4_0);
    EXPECT_EQ_I(CFK_T_Q4_K, GGML_TYPE_Q4_K);
    EXPECT_EQ_I(CFK_T_Q6_K, GGML_TYPE_Q6_K);
    static const int types[] = {CFK_T_F32, CFK_T_F16, CFK_T_BF16, CFK_T_Q8_0, CFK_T_Q4_0, CFK_T_Q4_K, CFK_T_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        EXPECT_EQ_I(cfk_row_bytes(types[i], 512), kern_row_bytes(types[i], 512));
}

/* Every half-unit of a row decoded by the device code equals the CPU
 * reference's dequantization bit for bit. */
TEST(cuda_emul, dequant_matches_cpu) {
    static const int types[] = {CFK_T_F32, CFK_T_F16, CFK_T_BF16, CFK_T_Q8_0, CFK_T_Q4_0, CFK_T_Q4_K, CFK_T_Q6_K};
    enum { N = 1024 };
    static unsigned char row[N * 4];
    static float want[N], got[N];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const int t = types[ti];
        for (int rep = 0; rep < 20 && !test_failed(); rep++) {
            random_row(t, row, N);
            kern_dequant_row(t, row, want, N);
            for (int h = 0; h < N / 16; h++) cfk_dequant16(t, row, h >> 1, h & 1, got + 16 * h);
            for (int i = 0; i < N; i++)
                if (memcmp(&got[i], &want[i], 4)) {
                    test_fail(__FILE__, __LINE__, "%s element %d: device %.9g, CPU %.9g",
                              ggml_type_name((uint32_t)t), i, (double)got[i], (double)want[i]);
                    break;
                }
            if (CFK_TYPE_PLAIN(t))
                for (int k = 0; k < N; k += 37) EXPECT(!memcmp((float[]){cfk_elem(t, row, k)}, &want[k], 4));
        }
    }
}

TEST(cuda_emul, half_precision_conversions) {
    for (uint32_t h = 0; h < 65536; h++) {
        float a = cfk_f16((unsigned short)h), b = f16_to_f32((uint16_t)h);
        if (memcmp(&a, &b, 4)) {
            test_fail(__FILE__, __LINE__, "f16 %04x: %.9g vs %.9g", h, (double)a, (double)b);
            break;
        }
        a = cfk_bf16((unsigned short)h), b = bf16_to_f32((uint16_t)h);
        if (memcmp(&a, &b, 4)) {
            test_fail(__FILE__, __LINE__, "bf16 %04x", h);
            break;
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rnd() << 16 ^ rnd();
        float f;
        memcpy(&f, &u, 4);
        if (cfk_to_f16(f) != f32_to_f16(f) || cfk_to_bf16(f) != f32_to_bf16(f)) {
            test_fail(__FILE__, __LINE__, "f32 %08x: f16 %04x vs %04x, bf16 %04x vs %04x", u, cfk_to_f16(f),
                      f32_to_f16(f), cfk_to_bf16(f), f32_to_bf16(f));
            break;
        }
    }
}

TEST(cuda_emul, activations_match_cpu) {
    enum { N = 4096 };
    static float x[N], u[N], y[N], want[N];
    for (int i = 0; i < N; i++) {
        x[i] = ((float)(rnd() % 40001) - 20000.0f) * 7e-4f; /* -14 .. 14: both table ends */
        u[i] = ((float)(rnd() % 2001) - 1000.0f) * 1e-3f;
    }
    kern_gelu(NULL, want, x, N, 1);
    for (int i = 0; i < N; i++) y[i] = cfk_gelu(x[i]);
    for (int i = 0; i < N; i++)
        if (y[i] != want[i]) {
            test_fail(__FILE__, __LINE__, "gelu(%.9g): device %.9g, CPU %.9g", (double)x[i], (double)y[i],
                      (double)want[i]);
            break;
        }
    kern_sc_swiglu_row(want, x, u, N);
    for (int i = 0; i < N; i++) y[i] = cfk_swiglu(x[i], u[i]);
    EXPECT(memcmp(y, want, sizeof y) == 0);
}

/* cfk_rope's angle and rotation, done as the kernel does per thread, equal
 * the CPU rope for both layouts and a partial rotation. */
TEST(cuda_emul, rope_matches_cpu) {
    enum { NH = 4, HD = 64 };
    static const struct {
        int n_rot, mode, ff, n_ctx_orig;
        float base, freq_scale, ext_factor, attn_factor;
    } cases[] = {
        {64, CF_ROPE_NORM, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f},
        {64, CF_ROPE_NEOX, 0, 0, 1000000.0f, 1.0f, 0.0f, 1.0f},
        {32, CF_ROPE_NEOX, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f},
        {64, CF_ROPE_NORM, 1, 0, 500000.0f, 1.0f, 0.0f, 1.0f},           /* Llama 3.1 rope_freqs */
        {64, CF_ROPE_NEOX, 0, 4096, 1000000.0f, 0.25f, 1.0f, 1.0f},      /* YaRN (mistral3) */
        {32, CF_ROPE_NEOX, 1, 8192, 10000.0f, 0.125f, 1.0f, 0.9f},      /* all of it, partial */
        {64, CF_ROPE_NORM, 0, 0, 10000.0f, 0.5f, 0.0f, 1.0f},            /* linear scaling */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        float ff[HD / 2];
        for (int i = 0; i < HD / 2; i++) ff[i] = 1.0f + (float)(rnd() % 8000) * 1e-3f;
        const float *f = cases[c].ff ? ff : NULL;
        for (int pos = 0; pos < 5000; pos += 997) {
            float x[NH * HD], y[NH * HD];
            for (int i = 0; i < NH * HD; i++) x[i] = y[i] = ((float)(rnd() % 2001) - 1000.0f) * 1e-3f;
            cf_env E = {.pos = pos};
            kern_drv_rope(&E, x, NH, HD, cases[c].n_rot, cases[c].base, cases[c].mode, cases[c].freq_scale,
                          cases[c].ext_factor, cases[c].attn_factor, 32.0f, 1.0f, cases[c].n_ctx_orig, f, 1);
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < cases[c].n_rot / 2; i++) { /* thread i of block (0, h) */
                    float co, si;
                    cfk_rope_cs(pos, i, cases[c].n_rot, cases[c].base, cases[c].freq_scale, cases[c].ext_factor,
                                cases[c].attn_factor, 32.0f, 1.0f, cases[c].n_ctx_orig, f, &co, &si);
                    float *hx = y + h * HD;
                    const int i0 = cases[c].mode == CF_ROPE_NEOX ? i : 2 * i;
                    const int i1 = cases[c].mode == CF_ROPE_NEOX ? i + cases[c].n_rot / 2 : 2 * i + 1;
                    const float x0 = hx[i0], x1 = hx[i1];
                    hx[i0] = x0 * co - x1 * si;
                    hx[i1] = x0 * si + x1 * co;
                }
            EXPECT_MSG(memcmp(x, y, sizeof x) == 0, "rope case %zu at position %d differs", c, pos);
        }
    }
}

/* ---- cuda_mock: --device cuda end to end against a stand-in driver ---------------------------------------------- */

typedef struct {
    int inits, compiles, module_loads, launches, graph_captures, graph_launches, graph_nodes;
    int kernels_resolved, htod, dtoh, bad;
    long long weight_bytes_copied;
    char arch_option[64];
    int headers_seen, header_cf_cuda;
    char first_kernel[64], why[256];
    long long live_bytes;
    int elf_kernels;
} mock_stats_t; /* tests/cuda/mock_cuda.c */

static void *mock_open(const char **path_out) {
    static char path[1024];
    char cmd[2048], *out = NULL;
    snprintf(path, sizeof path, "%s/mock/libcuda_mock.so", test_tmpdir());
    if (access(path, R_OK)) {
        snprintf(cmd, sizeof cmd, "mkdir -p %s/mock && cc -std=c11 -O1 -shared -fPIC -Wall -Wextra -Werror -Itemplates "
                 "-o %s tests/cuda/mock_cuda.c 2>&1", test_tmpdir(), path);
        if (run_cmd(cmd, true, &out)) {
            test_fail(__FILE__, __LINE__, "%s: %s", cmd, out ? out : "");
            free(out);
            return NULL;
        }
        free(out);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) test_fail(__FILE__, __LINE__, "dlopen %s: %s", path, dlerror());
    *path_out = path;
    return h;
}

static int gen_cb(const char *text, size_t len, int32_t id, void *user) {
    (void)text, (void)len, (void)id;
    ++*(int *)user;
    return 0;
}

/* cinfer serve --device cuda on the stand-in driver: it starts (the model on
 * the "GPU"), answers a completion over HTTP, and stops on SIGTERM. */
static void serve_on_mock(const char *cache, const char *lib, const char *model) {
    char cmd[8192], log[512], pidf[512], url[256] = "", *out = NULL, *text = NULL;
    snprintf(log, sizeof log, "%s/serve-cuda.err", test_tmpdir());
    snprintf(pidf, sizeof pidf, "%s/serve-cuda.pid", test_tmpdir());
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s CINFER_CUDA_DRIVER=%s CINFER_NVRTC=%s %s serve %s --device cuda "
             "--port 0 --no-webui </dev/null >%s 2>&1 & echo $! >%s", cache, lib, lib, cinfer_bin(), model, log, pidf);
    run_cmd(cmd, false, &out);
    free(out);
    char *pid_text = read_file(pidf, NULL);
    const pid_t pid = pid_text ? (pid_t)atoi(pid_text) : 0;
    free(pid_text);
    for (int i = 0; i < 200 && pid > 0 && !url[0]; i++) { /* at most 20 s to say where it listens */
        free(text);
        text = read_file(log, NULL);
        const char *a = text ? strstr(text, "API at ") : NULL;
        if (a) sscanf(a + 7, "%255s", url);
        else usleep(100000);
    }
    EXPECT_MSG(url[0] && strstr(url, "/v1"), "serve --device cuda did not start: %s", text ? text : "");
    if (url[0] && strstr(url, "/v1")) {
        *strstr(url, "/v1") = 0;
        http_body b = {0};
        long status = http_request(url, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":3,\"temperature\":0}",
                                   NULL, &b, NULL);
        EXPECT_MSG(status == 200 && b.p && strstr(b.p, "\"choices\""), "serve --device cuda: %ld: %s", status,
                   b.p ? b.p : "");
        free(b.p);
    }
    if (pid > 0) {
        kill(pid, SIGTERM);
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) usleep(50000);
        EXPECT_MSG(kill(pid, 0) != 0, "serve --device cuda did not stop on SIGTERM");
        if (kill(pid, 0) == 0) kill(pid, SIGKILL);
    }
    free(text);
}

TEST(cuda_mock, device_cuda_end_to_end) {
    NEED_SHARED(model, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s", model);
    const char *lib = NULL;
    void *h = mock_open(&lib);
    if (!h) return;
    mock_stats_t *st = dlsym(h, "mock_stats");
    void (*reset)(void) = (void (*)(void))dlsym(h, "mock_reset");
    EXPECT(st && reset);
    if (!st || !reset) return;
    char cache[1024], err[2048];
    snprintf(cache, sizeof cache, "%s/mock-cache", test_tmpdir());
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("CINFER_CUDA_DRIVER", lib, 1);
    setenv("CINFER_NVRTC", lib, 1);
    for (int round = 0; round < 2; round++) { /* the second opens from the cubin cache */
        reset();
        cinfer_model *m = NULL;
        cinfer_session *s = NULL;
        cinfer_model_options mo = {.device = CINFER_DEVICE_CUDA};
        if (cinfer_model_open(mpath, &mo, &m, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "open: %s", err);
            break;
        }
        EXPECT_MSG(strstr(cinfer_model_device(m), "cuda:0 Mock GPU (sm_80, 8.0 GiB, driver 12.4, NVRTC 12.4)"), "%s",
                   cinfer_model_device(m));
        EXPECT_EQ_I(st->compiles, round == 0 ? 1 : 0);
        if (round == 0) {
            EXPECT_STR_EQ(st->arch_option, "--gpu-architecture=sm_80");
            EXPECT_MSG(st->headers_seen == 3 && st->header_cf_cuda, "NVRTC got %d headers", st->headers_seen);
        }
        EXPECT_EQ_I(st->module_loads, 1);
        /* shared kernels: resolved once per launch request at most, not per layer and variant */
        EXPECT_MSG(st->kernels_resolved > 10, "%d kernels resolved", st->kernels_resolved);
        EXPECT_MSG(st->weight_bytes_copied > 600000, "%lld bytes uploaded", st->weight_bytes_copied);
        cinfer_session_options so = {.n_ctx = 256};
        EXPECT_MSG(cinfer_session_new(m, &so, &s, err, sizeof err) == 0, "%s", err);
        if (!s) {
            cinfer_model_close(m);
            break;
        }
        /* a 3-token prompt (one batch), then each of the 5 tokens sampled is evaluated
         * (one token each): one graph, captured at the first, launched 5 times */
        int32_t prompt[3] = {1, 400, 27};
        int n_out = 0;
        cinfer_gen_options go = {.max_tokens = 5, .temperature = 0};
        cinfer_gen_result res;
        int launches_before = st->launches;
        EXPECT_MSG(cinfer_generate_tokens(s, prompt, 3, &go, gen_cb, &n_out, &res, err, sizeof err) == 0, "%s", err);
        EXPECT_EQ_I(res.n_generated, 5);
        EXPECT_MSG(!strncmp(st->first_kernel, "cf_x_", 5), "first kernel %s", st->first_kernel); /* get_rows */
        EXPECT_MSG(st->launches > launches_before, "the prompt batch launched kernels");
        EXPECT_EQ_I(st->graph_captures, 1);
        EXPECT_EQ_I(st->graph_launches, 5);
        EXPECT_MSG(st->graph_nodes > 20, "%d nodes captured", st->graph_nodes);
        EXPECT_MSG(st->bad == 0, "the mock driver saw %d bad calls, first: %s", st->bad, st->why);
        /* a session on CUDA refuses save/load clearly */
        char path[1024];
        snprintf(path, sizeof path, "%s/sess.bin", test_tmpdir());
        EXPECT(cinfer_session_save(s, path, err, sizeof err) == CINFER_EUNSUPPORTED && strstr(err, "--device cuda"));
        /* embeddings read the hidden states back (no graph: hidden states asked) */
        float emb[128];
        EXPECT_MSG(cinfer_embed(s, prompt, 1, CINFER_POOL_LAST | CINFER_EMBED_RAW, emb, 128, err, sizeof err) == 0,
                   "%s", err);
        EXPECT_EQ_I(st->graph_captures, 1);
        EXPECT_MSG(st->bad == 0, "the mock driver saw %d bad calls, first: %s", st->bad, st->why);
        cinfer_session_free(s);
        cinfer_model_close(m);
        EXPECT_MSG(st->live_bytes == 0, "%lld bytes of device memory never freed", st->live_bytes);
    }
    /* the CLI on the mock: run and bench with --device cuda */
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s CINFER_CUDA_DRIVER=%s CINFER_NVRTC=%s %s run %s --device cuda "
             "--temp 0 -n 3 -p 'Once' -v 2>&1", cache, lib, lib, cinfer_bin(), mpath);
    int rc = run_cmd(cmd, true, &out);
    EXPECT_MSG(rc == 0 && out && strstr(out, "CUDA cache hit") && strstr(out, "Mock GPU"), "%s: %s", cmd,
               out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s CINFER_CUDA_DRIVER=%s CINFER_NVRTC=%s %s bench %s --device cuda "
             "-p 8 -n 4 -r 1 2>&1", cache, lib, lib, cinfer_bin(), mpath);
    rc = run_cmd(cmd, true, &out);
    EXPECT_MSG(rc == 0 && out && strstr(out, "cuda:0") && strstr(out, "tg4"), "%s: %s", cmd, out ? out : "");
    free(out);
    serve_on_mock(cache, lib, mpath);
    unsetenv("CINFER_CUDA_DRIVER");
    unsetenv("CINFER_NVRTC");
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
    dlclose(h);
}

/* ---- cuda_nvrtc: the real NVRTC, where this machine has one (no GPU needed) ---------------------- */

/* NVRTC compiles a generated source and the kernel instantiations to
 * cubins: the kernels' CUDA C++, the built-ins they use and the inline PTX
 * (mma.sync, cvt) pass NVRTC and ptxas.  Only in make check-cuda
 * (CINFER_CUDA_ARCHS, e.g. "75 80 86 89 90 120"): all of it for every listed
 * architecture.  Without NVRTC (CI: Debian has no CUDA toolkit) noted as not
 * run. */
TEST(cuda_nvrtc, sources_compile_to_cubins) {
    const char *archs = getenv("CINFER_CUDA_ARCHS");
    if (!archs || !*archs) /* NVRTC takes 10-20 s here */
        return test_not_run("NVRTC on every kernel instantiation: make check-cuda");
    char list[256];
    snprintf(list, sizeof list, "%s", archs);
    char err[4096];
    char *hdr[CC_CUDA_N_HEADERS + 1] = {0};
    const char *h4[CC_CUDA_N_HEADERS + 1], *n4[CC_CUDA_N_HEADERS + 1];
    size_t hl;
    for (int i = 0; i < CC_CUDA_N_HEADERS; i++) {
        EXPECT_MSG(cc_spec_file(cc_cuda_header_files[i], &hdr[i], &hl, err, sizeof err) == 0, "%s", err);
        h4[i] = hdr[i], n4[i] = cc_cuda_header_names[i];
    }
    /* instantiate.cu includes prelude_cuda.h: give it that header too */
    EXPECT(cc_spec_file("templates/prelude_cuda.h", &hdr[CC_CUDA_N_HEADERS], &hl, err, sizeof err) == 0);
    h4[CC_CUDA_N_HEADERS] = hdr[CC_CUDA_N_HEADERS], n4[CC_CUDA_N_HEADERS] = "prelude_cuda.h";
    const char *model = shared_path("models/stories260K/stories260K.gguf");
    char *srcs[2] = {model ? generate_cu(model, err, sizeof err) : NULL, read_file("tests/cuda/instantiate.cu", NULL)};
    const char *names[2] = {"generated/stories260K.cu", "tests/cuda/instantiate.cu"};
    if (!model) test_not_run("NVRTC on a generated source: %s/models/stories260K absent", shared_root());
    for (char *tok = strtok(list, " ,"); tok; tok = strtok(NULL, " ,")) {
        const int cc = atoi(tok);
        cuda_dev *d = NULL;
        if (cuda_open_nvrtc(cc / 10, cc % 10, &d, err, sizeof err)) {
            test_not_run("NVRTC compiles of the CUDA sources: %s", err);
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (!srcs[i]) continue;
            cuda_image im;
            char *log = NULL;
            int rc = cuda_compile(d, srcs[i], names[i], CC_CUDA_N_HEADERS + 1, h4, n4, &im, &log, err, sizeof err);
            EXPECT_MSG(rc == 0, "sm_%d %s: %s\n%s", cc, names[i], err, log ? log : "");
            if (!rc) {
                char want[16];
                snprintf(want, sizeof want, "sm_%d", cc);
                EXPECT_MSG(im.is_cubin && !strcmp(im.arch, want) && im.len > 1000 && !memcmp(im.data, "\177ELF", 4),
                           "sm_%d %s: %s image of %zu bytes", cc, names[i], im.arch, im.len);
            }
            free(log);
            cuda_image_free(&im);
        }
        cuda_close(d);
    }
    for (int i = 0; i < 2; i++) free(srcs[i]);
    for (int i = 0; i <= CC_CUDA_N_HEADERS; i++) free(hdr[i]);
}

/* The mock driver with the real NVRTC (make check-cuda, where this machine
 * has NVRTC): the model's source compiled for sm_80 through
 * cinfer_model_open, the cubin cached and loaded, and every kernel any plan
 * launches found in the cubin's symbol table; a generation runs its
 * launches and graph. */
TEST(cuda_mock, real_nvrtc_cubin_has_every_planned_kernel) {
    NEED_SHARED(model, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char mpath[1024], err[4096], nvrtc[512];
    snprintf(mpath, sizeof mpath, "%s", model);
    const char *archs = getenv("CINFER_CUDA_ARCHS");
    if (!archs || !*archs) /* NVRTC takes about 10 s here */
        return test_not_run("the real NVRTC with the mock driver: make check-cuda");
    void *hn = NULL;
    if (cuda_load_nvrtc(&hn, nvrtc, sizeof nvrtc, err, sizeof err)) {
        test_not_run("the real NVRTC with the mock driver: %s", err);
        return;
    }
    const char *lib = NULL;
    void *h = mock_open(&lib);
    if (!h) return;
    mock_stats_t *st = dlsym(h, "mock_stats");
    void (*reset)(void) = (void (*)(void))dlsym(h, "mock_reset");
    if (!st || !reset) return test_fail(__FILE__, __LINE__, "mock symbols");
    reset();
    char cache[1024];
    snprintf(cache, sizeof cache, "%s/nvrtc-cache", test_tmpdir());
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("CINFER_CUDA_DRIVER", lib, 1);
    setenv("CINFER_NVRTC", nvrtc, 1);
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    cinfer_model_options mo = {.device = CINFER_DEVICE_CUDA};
    if (cinfer_model_open(mpath, &mo, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "open: %s", err);
    } else {
        EXPECT_MSG(st->elf_kernels > 10 && st->kernels_resolved > 10 && st->bad == 0,
                   "cubin with %d kernels, %d resolved, %d bad (%s)", st->elf_kernels, st->kernels_resolved, st->bad,
                   st->why);
        cinfer_session_options so = {.n_ctx = 128};
        EXPECT_MSG(cinfer_session_new(m, &so, &s, err, sizeof err) == 0, "%s", err);
        int32_t prompt[8] = {1, 400, 27, 5, 9, 33, 100, 2};
        int n_out = 0;
        cinfer_gen_options go = {.max_tokens = 3, .temperature = 0};
        EXPECT_MSG(s && cinfer_generate_tokens(s, prompt, 8, &go, gen_cb, &n_out, NULL, err, sizeof err) == 0, "%s", err);
        EXPECT_MSG(st->graph_launches == 3 && st->launches > 0 && st->bad == 0, "%d graph launches, %d bad (%s)",
                   st->graph_launches, st->bad, st->why);
        cinfer_session_free(s);
        cinfer_model_close(m);
    }
    unsetenv("CINFER_CUDA_DRIVER");
    unsetenv("CINFER_NVRTC");
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
    dlclose(h);
}

/* ---- cuda_exec: the real kernels run on the CPU (mock driver, execute mode) ------------------------ */

/* cinfer's CUDA path with the generated kernels compiled by the host C++
 * compiler against tests/cuda/emu.h and run thread by thread (coroutines
 * switched at barriers and shuffles, mma.sync emulated from its PTX fragment
 * layout) by tests/cuda/mock_cuda.c: the planner's grids, the kernels'
 * indexing, the split decode attention and its combine, the graph replay
 * and the tensor-core tile path are held to the CPU kernels.  Per model: a
 * prompt of 9 tokens (tiled matmuls, prompt attention) and 4 decode steps
 * (matvec, split attention, the decode graph), every logit compared. */
typedef struct {
    const char *model;
    double tol;   /* max |cuda - cpu| / max |cpu| */
    int n_prompt; /* prompt tokens (0: 9) */
} exec_case;

static double exec_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double max_abs(const float *x, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* "archgen:FAMILY": the family's archgen model; else a path under shared/. */
static const char *exec_model_path(const char *model, char *buf, size_t cap) {
    if (!strncmp(model, "archgen:", 8)) return archgen_model(model + 8, buf, cap);
    const char *m = shared_path(model);
    if (!m) return test_not_run("cuda_exec on %s: %s/%s absent", model, shared_root(), model), NULL;
    return snprintf(buf, cap, "%s", m), buf;
}

static void exec_compare(const exec_case *c) {
    char mpath[1024], err[2048];
    if (!exec_model_path(c->model, mpath, sizeof mpath)) return;
    const double t0 = exec_now();
    cinfer_model *cpu = NULL, *gpu = NULL;
    cinfer_session *sc = NULL, *sg = NULL;
    cinfer_model_options oc = {.precision = CINFER_PRECISION_NATIVE}, og = {.device = CINFER_DEVICE_CUDA};
    /* the CPU side with an F32 KV cache, as the GPU keeps its own */
    cinfer_session_options so_c = {.n_ctx = 64, .activations = CINFER_ACT_F32, .n_threads = 1,
                                   .cache_type_k = CINFER_KV_F32, .cache_type_v = CINFER_KV_F32},
                           so_g = {.n_ctx = 64};
    if (cinfer_model_open(mpath, &oc, &cpu, err, sizeof err) || cinfer_session_new(cpu, &so_c, &sc, err, sizeof err) ||
        cinfer_model_open(mpath, &og, &gpu, err, sizeof err) || cinfer_session_new(gpu, &so_g, &sg, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", c->model, err);
    } else {
        const int n_vocab = cinfer_model_n_vocab(cpu);
        const int n_prompt = c->n_prompt > 0 ? c->n_prompt : 9;
        int32_t ids[64] = {1, 34, 71, 5, 270, 9, 33, 100, 12, 45, 300, 7, 61};
        for (int i = 13; i < 64; i++) ids[i] = (37 * i + 11) % 500;
        double worst = 0;
        for (int step = 0; step < 5 && !test_failed() && n_prompt + 4 <= 64; step++) {
            /* step 0: the first n_prompt tokens at once; then one more token each */
            const size_t n = (size_t)(n_prompt + step);
            for (size_t i = 0; i < n; i++) ids[i] %= n_vocab;
            EXPECT_MSG(cinfer_eval(sc, ids, n, err, sizeof err) == 0, "cpu: %s", err);
            EXPECT_MSG(cinfer_eval(sg, ids, n, err, sizeof err) == 0, "cuda: %s", err);
            const float *lc = cinfer_logits(sc), *lg = cinfer_logits(sg);
            if (!lc || !lg) break;
            const double scale = max_abs(lc, n_vocab) > 0 ? max_abs(lc, n_vocab) : 1;
            double diff = 0, dot = 0, nc = 0, ng = 0;
            for (int i = 0; i < n_vocab; i++) {
                diff = fabs(lc[i] - lg[i]) > diff ? fabs(lc[i] - lg[i]) : diff;
                dot += (double)lc[i] * lg[i], nc += (double)lc[i] * lc[i], ng += (double)lg[i] * lg[i];
            }
            const double rel = diff / scale, cosine = dot / sqrt(nc * ng + 1e-30);
            worst = rel > worst ? rel : worst;
            EXPECT_MSG(rel <= c->tol && cosine >= 0.9999, "%s, %s (%zu tokens): max |diff| %.3g of max |logit| %.3g "
                       "(%.3g relative, bound %.3g), cosine %.7f", c->model, step ? "decode" : "prompt", n, diff,
                       scale, rel, c->tol, cosine);
        }
        printf("    %s: worst relative logit difference %.3g (bound %.3g), %.1f s\n", c->model, worst, c->tol,
               exec_now() - t0);
    }
    cinfer_session_free(sg);
    cinfer_model_close(gpu);
    cinfer_session_free(sc);
    cinfer_model_close(cpu);
}

static void exec_models(const exec_case *cases, int n) {
    NEED_TOOL("g++", "g++");
    const char *lib = NULL;
    void *h = mock_open(&lib);
    if (!h) return;
    mock_stats_t *st = dlsym(h, "mock_stats");
    void (*reset)(void) = (void (*)(void))dlsym(h, "mock_reset");
    if (!st || !reset) return test_fail(__FILE__, __LINE__, "mock symbols");
    char dir[1024], cache[1100];
    snprintf(dir, sizeof dir, "%s/exec", test_tmpdir());
    snprintf(cache, sizeof cache, "%s/cache", dir);
    mkdir(dir, 0755);
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("CINFER_CUDA_DRIVER", lib, 1);
    setenv("CINFER_NVRTC", lib, 1);
    setenv("CINFER_MOCK_EXEC", dir, 1);
    for (int i = 0; i < n; i++) {
        reset();
        exec_compare(&cases[i]);
        EXPECT_MSG(st->bad == 0, "%s: the stand-in driver saw %d bad calls, first: %s", cases[i].model, st->bad, st->why);
        char mp[1024];
        const int present = strncmp(cases[i].model, "archgen:", 8) ? shared_path(cases[i].model) != NULL
                                                                     : exec_model_path(cases[i].model, mp, sizeof mp) != NULL;
        EXPECT_MSG(!present || (st->graph_launches == 4 && st->compiles == 1),
                   "%s: %d graph launches, %d compiles", cases[i].model, st->graph_launches, st->compiles);
    }
    unsetenv("CINFER_MOCK_EXEC");
    unsetenv("CINFER_CUDA_DRIVER");
    unsetenv("CINFER_NVRTC");
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
    dlclose(h);
}

/* F32 models take the f32 tiles (FMAs); the others the emulated tensor
 * cores with f16 (bf16) operands, hence their looser bounds (each about 4x
 * the difference measured, 2026-12-02).  Together they hold every weight
 * type of the CUDA path and every op: LayerNorm with bias, GELU and GEGLU,
 * learned positions, split, scale, a sliding window and soft caps (gemma2),
 * biases and neox rope (qwen2, phi3), mul, relu_sqr, mul_row, RoPE freq
 * factors, YaRN and pos_log_scale, a logits bias, weightless rms_norm and
 * shared-KV attention (issue-19 families), and every archgen family the
 * CUDA path accepts ("archgen:" models, made at test time).  make test runs
 * the first group (about 25 s on this loaded machine), make check-cuda
 * (CINFER_CUDA_EXEC_ALL=1) all (about 3 minutes). */
static const exec_case exec_cases[] = {
    {"models/stories260K/stories260K.gguf", 2e-6, 0},          /* F32 tiles; measured 4.6e-7 */
    {"models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf", 2e-3, 0}, /* Q8_0, f16 mma; 6.9e-4 */
    {"archgen:llama3", 6e-6, 0},                               /* rope freq factors; 1.4e-6 */
    {"archgen:mistral3", 6e-6, 40},                            /* YaRN, pos_log_scale (positions >= 31); 1.4e-6 */
    {"archgen:phi2", 3e-4, 0},                                 /* logits bias, GELU; 5.7e-5 */
    {"archgen:gemma4", 8e-4, 0},                               /* shared KV, weightless rms_norm, mul, mul_row,
                                                                * window, GEGLU, soft cap; 2.0e-4 */
    {NULL, 0, 0},                                              /* the rest: make check-cuda */
    {"models/arch/gemma2.gguf", 2e-4, 0},                      /* window, soft caps, GEGLU; 5.3e-5 */
    {"archgen:arcee", 4e-6, 0},                                /* relu_sqr; 9.2e-7 */
    {"archgen:bitnet", 5e-6, 0},                               /* mul_row; 1.0e-6 */
    {"models/synthetic/synth-d256-Q4_K_M.gguf", 4e-4, 0},      /* Q4_K + Q6_K; 9.5e-5 */
    {"models/synthetic/synth-d256-BF16.gguf", 2e-3, 0},        /* bf16 mma; 4.1e-4 */
    {"models/arch/gpt2.gguf", 1e-4, 0},                        /* LayerNorm, GELU, positions; 2.5e-5 */
    {"models/synthetic/synth-d256-Q4_0.gguf", 4e-4, 0},        /* 8.3e-5 */
    {"models/synthetic/synth-d256-F16.gguf", 3e-4, 0},         /* 6.3e-5 */
    {"models/arch/qwen2.gguf", 3e-6, 0},                       /* biases, neox; 7.2e-7 */
    {"models/arch/phi3.gguf", 3e-6, 0},                        /* 8.5e-7 */
    {"archgen:nemotron", 4e-6, 0},                             /* relu_sqr; 8.1e-07 */
    {"archgen:olmo2", 4e-6, 0},                                /* 8.1e-07 */
    {"archgen:cohere2", 4e-6, 0},                              /* 9.3e-07 */
    {"archgen:command-r", 4e-6, 0},                            /* 7.8e-07 */
    {"archgen:granite", 3e-6, 0},                              /* 5.9e-07 */
    {"archgen:falcon", 2e-4, 0},                               /* parallel blocks, GELU; 3.3e-05 */
    {"archgen:stablelm", 5e-6, 0},                             /* 1.1e-06 */
    {"archgen:glm4", 5e-6, 0},                                 /* 1.1e-06 */
    {"archgen:gptneox", 2e-4, 0},                              /* partial neox rope, GELU; 3.3e-05 */
    {"archgen:internlm2", 4e-6, 0},                            /* 8.8e-07 */
    {"archgen:exaone4", 4e-6, 0},                              /* 8.5e-07 */
    {"archgen:ernie4_5", 5e-6, 0},                             /* 1.2e-06 */
    {"archgen:hunyuan-dense", 3e-6, 0},                        /* 6.6e-07 */
    {"archgen:seed_oss", 4e-6, 0},                             /* 9.3e-07 */
    {"archgen:smollm3", 6e-6, 0},                              /* 1.4e-06 */
    {"archgen:qwen3", 4e-6, 0},                                /* 8.6e-07 */
    {"archgen:gemma3", 6e-4, 0},                               /* 0.00013 */
    {"archgen:gemma", 8e-5, 0},                                /* 1.9e-05 */
    {"archgen:starcoder2", 2e-4, 0},                           /* LayerNorm biases, GELU; 4.3e-05 */
};

TEST(cuda_exec, kernels_match_cpu) {
    const char *all = getenv("CINFER_CUDA_EXEC_ALL");
    int n = 0;
    while (exec_cases[n].model) n++;
    if (all && *all && strcmp(all, "0")) {
        exec_models(exec_cases, n);
        exec_models(exec_cases + n + 1, (int)(sizeof exec_cases / sizeof *exec_cases) - n - 1);
    } else {
        exec_models(exec_cases, n);
        printf("    %d more models: make check-cuda\n",
                     (int)(sizeof exec_cases / sizeof *exec_cases) - n - 1);
    }
}
