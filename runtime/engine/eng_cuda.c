/*
 * eng_cuda.c — see eng_cuda.h.  Planning first (host only), then the device.
 *
 * Why plans: the generated host half (cf_cuda_forward) says which op comes
 * next and its dimensions; how many blocks of how many threads each kernel
 * takes is the kernels' business (runtime/kernels/cuda/cfk_geom.h), so it
 * lives here, next to the launches, in one place the tests can run without
 * a GPU.  A plan is rebuilt for every prompt batch (no allocation: the
 * launch array is sized at context creation) and built once for decode,
 * where it is captured into a CUDA graph: every kernel reads pos and
 * n_tokens from the context's cf_cuda_env in device memory, and the decode
 * attention is split over the whole cache (splits past the current position
 * return at once), so one graph serves every step.
 */
#include "eng_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cfk_geom.h"

_Static_assert(sizeof(cf_cuda_env) == 8 * sizeof(void *) + 6 * sizeof(int),
               "cf_cuda_env: the host and the device must agree on its layout");
_Static_assert(sizeof(cf_cuda_args) == 6 * sizeof(void *) + 2 * sizeof(int),
               "cf_cuda_args: the host and the device must agree on its layout");

/* ==== planning ================================================================= */

int ecu_att_splits(int n_ctx) { return (n_ctx + CFK_ATT_SPLIT - 1) / CFK_ATT_SPLIT; }

static unsigned cdiv(long a, long b) { return (unsigned)((a + b - 1) / b); }

static ecu_plan *plan_of(cf_cuda_host *H) { return (ecu_plan *)H->plan; }

static void plan_fail(ecu_plan *p, int k, const char *what) {
    if (!p->err[0]) snprintf(p->err, sizeof p->err, "op %d: %s", k, what);
}

/* The buffers of one launch. */
typedef struct {
    long out, in0, in1, in2;
    int w, w2, layer;
} bufs;

static void add(ecu_plan *p, int k, const char *kernel, long gx, long gy, long block, bufs b) {
    if (!kernel || gx < 1 || gx > 0x7fffffffL || gy < 1 || gy > 65535 || block < 1 || block > 1024) {
        char what[200];
        snprintf(what, sizeof what, "kernel %s: grid (%ld, %ld) of %ld threads is outside CUDA's limits",
                 kernel ? kernel : "(none)", gx, gy, block);
        plan_fail(p, k, what);
        return;
    }
    if (p->n < p->cap)
        p->l[p->n] = (ecu_launch){kernel, k, {(unsigned)gx, (unsigned)gy}, (unsigned)block,
                                  b.out, {b.in0, b.in1, b.in2}, b.w, b.w2, b.layer};
    p->n++;
}

static bufs mk(long out, long in0, long in1, long in2, int w, int w2, int layer) {
    return (bufs){out, in0, in1, in2, w, w2, layer};
}

static void op_get_rows(cf_cuda_host *H, int k, const char *kern, long out, int w, int n, int T) {
    (void)n;
    add(plan_of(H), k, kern, T, 1, CFK_EW_THREADS, mk(out, -1, -1, -1, w, -1, 0));
}

static void op_rms_norm(cf_cuda_host *H, int k, const char *kern, long out, long in, int w, int n_groups, int n,
                        int T) {
    (void)n;
    add(plan_of(H), k, kern, (long)T * n_groups, 1, CFK_ROW_THREADS, mk(out, in, -1, -1, w, -1, 0));
}

static void op_layer_norm(cf_cuda_host *H, int k, const char *kern, long out, long in, int w, int w2, int n,
                          int T) {
    (void)n;
    add(plan_of(H), k, kern, T, 1, CFK_ROW_THREADS, mk(out, in, -1, -1, w, w2, 0));
}

/* Up to CFK_MV_MAX_T tokens read each weight row once (decode: memory
 * bound); more go through the tiled kernel (tensor cores). */
static void tiled_or_mv(ecu_plan *p, int k, const char *mv, const char *mm, int n_out, int T, bufs b) {
    if (T <= CFK_MV_MAX_T) add(p, k, mv, cdiv(n_out, CFK_MV_ROWS), 1, CFK_MV_THREADS, b);
    else add(p, k, mm, cdiv(n_out, CFK_MM_BN), cdiv(T, CFK_MM_BM), CFK_MM_THREADS, b);
}

static void op_matmul(cf_cuda_host *H, int k, const char *mv, const char *mm, long out, long in, int w, int type,
                      int n_out, int n_in, int T) {
    (void)type, (void)n_in;
    tiled_or_mv(plan_of(H), k, mv, mm, n_out, T, mk(out, in, -1, -1, w, -1, 0));
}

static void op_elementwise(cf_cuda_host *H, int k, const char *kern, long out, long in0, long in1, int w, int n,
                           int T) {
    add(plan_of(H), k, kern, cdiv((long)n * T, CFK_EW_THREADS), 1, CFK_EW_THREADS,
        mk(out, in0, in1, -1, w, -1, 0));
}

static void op_rope(cf_cuda_host *H, int k, const char *kern, long x, int w, int n_head, int n_rot, int T) {
    add(plan_of(H), k, kern, T, n_head, CFK_ROPE_THREADS(n_rot), mk(x, -1, -1, -1, w, -1, 0));
}

static void op_attention(cf_cuda_host *H, int k, const char *kv, const char *dec, const char *cmb, const char *pf,
                         long out, long q, long kk, long v, int layer, int n_head, int n_head_kv, int head_dim,
                         int T) {
    ecu_plan *p = plan_of(H);
    if (head_dim > CFK_ATT_MAX_HD || n_head_kv < 1 || n_head % n_head_kv) {
        plan_fail(p, k, "attention: head_dim above CFK_ATT_MAX_HD or n_head not a multiple of n_head_kv");
        return;
    }
    const bufs b = mk(out, q, kk, v, -1, -1, layer);
    if (kk >= 0 || v >= 0) add(p, k, kv, T, 1, CFK_EW_THREADS, b); /* k = v = none: read layer's cache as filled */
    if (T == 1) {
        if (p->att_splits < 1) {
            plan_fail(p, k, "decode attention needs att_splits >= 1");
            return;
        }
        add(p, k, dec, n_head, p->att_splits, CFK_ATT_THREADS, b);
        add(p, k, cmb, n_head, 1, CFK_ATT_COMBINE_THREADS(head_dim), b);
        long need = (long)n_head * p->att_splits * CFK_ATT_PARTIAL(head_dim);
        if (need > p->scratch_floats) p->scratch_floats = need;
    } else {
        add(p, k, pf, n_head, cdiv(T, CFK_ATT_Q), CFK_ATT_PF_THREADS, b);
    }
}

static void op_logits(cf_cuda_host *H, int k, const char *hid, const char *last, const char *mv, const char *mm,
                      const char *post_kern, long in, int w, int bias, int type, int n_vocab, int n_in, int post,
                      int T) {
    ecu_plan *p = plan_of(H);
    (void)type;
    const bufs b = mk(-1, in, -1, -1, w, bias, 0);
    if (p->want_hidden) add(p, k, hid, cdiv((long)n_in * T, CFK_EW_THREADS), 1, CFK_EW_THREADS, b);
    if (p->logits_all) tiled_or_mv(p, k, mv, mm, n_vocab, T, b);
    else add(p, k, last, cdiv(n_vocab, CFK_MV_ROWS), 1, CFK_MV_THREADS, b);
    if (post)
        add(p, k, post_kern, cdiv((long)n_vocab * (p->logits_all ? T : 1), CFK_EW_THREADS), 1, CFK_EW_THREADS, b);
}

static const cf_cuda_ops planner = {
    .get_rows = op_get_rows,
    .rms_norm = op_rms_norm,
    .layer_norm = op_layer_norm,
    .matmul = op_matmul,
    .elementwise = op_elementwise,
    .rope = op_rope,
    .attention = op_attention,
    .logits = op_logits,
};

int ecu_plan_build(ecu_plan *p, void (*forward)(cf_cuda_host *), int T, char *err, size_t err_len) {
    p->n = 0;
    p->scratch_floats = 0;
    p->err[0] = 0;
    cf_cuda_host H = {.ops = &planner, .plan = p, .n_tokens = T};
    forward(&H);
    if (p->err[0]) return snprintf(err, err_len, "CUDA plan for %d tokens: %s", T, p->err), -1;
    return 0;
}

/* The plans a context can run: T = 1, 2 and n_batch, with and without the
 * hidden states (for one logits mode).  Their largest launch count and
 * scratch size the context; their kernels are every kernel the model needs. */
typedef struct {
    int max_launches;
    long scratch_floats;
} plan_bounds;

static int bound_plans(void (*forward)(cf_cuda_host *), int n_batch, int att_splits, int logits_all,
                       plan_bounds *b, void (*each)(void *, const ecu_plan *), void *user, char *err,
                       size_t err_len) {
    memset(b, 0, sizeof *b);
    const int Ts[3] = {1, n_batch > 1 ? 2 : 1, n_batch};
    for (int i = 0; i < 3; i++)
        for (int hid = 0; hid < 2; hid++) {
            ecu_plan p = {.want_hidden = hid, .logits_all = logits_all, .att_splits = att_splits};
            if (ecu_plan_build(&p, forward, Ts[i], err, err_len)) return -1;
            if (each) { /* a second pass that stores the launches */
                p.l = calloc((size_t)p.n, sizeof *p.l);
                p.cap = p.n;
                if (!p.l) return snprintf(err, err_len, "out of memory"), -1;
                if (ecu_plan_build(&p, forward, Ts[i], err, err_len)) {
                    free(p.l);
                    return -1;
                }
                each(user, &p);
                free(p.l);
            }
            if (p.n > b->max_launches) b->max_launches = p.n;
            if (p.scratch_floats > b->scratch_floats) b->scratch_floats = p.scratch_floats;
        }
    return 0;
}

/* ==== layout and sizes ========================================================== */

static size_t align_up(size_t n) { return (n + ECU_ALIGN - 1) & ~(size_t)(ECU_ALIGN - 1); }

int ecu_weight_layout(const gguf_file *g, const cf_model_desc *d, size_t *off, size_t *bytes, size_t *total,
                      char *err, size_t err_len) {
    size_t at = 0;
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        if (!t)
            return snprintf(err, err_len, "tensor '%s': compiled code needs it, the file lacks it",
                            d->weight_names[i]), -1;
        for (int k = 0; k < 4; k++)
            if (t->ne[k] != d->weight_shapes[i * 4 + k])
                return snprintf(err, err_len, "tensor '%s': dim %d is %lld in the file, compiled for %ld", t->name,
                                k, (long long)t->ne[k], d->weight_shapes[i * 4 + k]), -1;
        if ((int)t->type != d->weight_types[i])
            return snprintf(err, err_len, "tensor '%s': type %s in the file, compiled for %s", t->name,
                            ggml_type_name(t->type), ggml_type_name((uint32_t)d->weight_types[i])), -1;
        off[i] = at;
        bytes[i] = (size_t)t->n_bytes;
        at = align_up(at + bytes[i]);
    }
    *total = at ? at : ECU_ALIGN;
    return 0;
}

static size_t kv_bytes(const cf_model_desc *d, int n_ctx) {
    size_t n = 0;
    for (int l = 0; l < d->n_layer; l++)
        n += 2 * align_up((size_t)n_ctx * (size_t)(d->kv_dim[l] > 0 ? d->kv_dim[l] : 1) * sizeof(float));
    return n;
}

static size_t env_bytes(const cf_model_desc *d) {
    return align_up(sizeof(cf_cuda_env) + (size_t)d->n_batch * sizeof(int)) +
           align_up(2 * (size_t)d->n_layer * sizeof(void *));
}

int ecu_ctx_bytes_for(const cf_model_desc *d, void (*forward)(cf_cuda_host *), int n_ctx, int logits_all,
                      ecu_ctx_bytes *out, char *err, size_t err_len) {
    plan_bounds b;
    if (n_ctx < 1) return snprintf(err, err_len, "n_ctx %d: expected >= 1", n_ctx), -1;
    if (bound_plans(forward, d->n_batch, ecu_att_splits(n_ctx), logits_all, &b, NULL, NULL, err, err_len))
        return -1;
    *out = (ecu_ctx_bytes){
        .kv = kv_bytes(d, n_ctx),
        .arena = align_up((size_t)d->arena_floats * sizeof(float)),
        .logits = align_up((size_t)(logits_all ? d->n_batch : 1) * (size_t)d->n_vocab * sizeof(float)),
        .hidden = align_up((size_t)d->n_batch * (size_t)d->n_embd * sizeof(float)),
        .scratch = align_up((size_t)(b.scratch_floats > 0 ? b.scratch_floats : 1) * sizeof(float)),
        .env = env_bytes(d),
    };
    out->total = out->kv + out->arena + out->logits + out->hidden + out->scratch + out->env;
    return 0;
}

/* ==== device ====================================================================== */

struct ecu_model {
    const cuda_dev *dev;
    const cf_model_desc *desc;
    void (*forward)(cf_cuda_host *);
    CUmodule mod;
    /* the kernels any plan names, by the address of the name string (the
     * host half's literals): sorted by it, so a launch finds its function
     * without comparing strings */
    const char **names;
    CUfunction *fn;
    int n_fn, cap_fn;
    CUdeviceptr weights;  /* every weight, ecu_weight_layout */
    size_t weight_bytes;
    CUdeviceptr wtab;     /* (n_weights) device addresses: cf_cuda_env.W */
    CUdeviceptr *waddr;   /* (n_weights) the same, on the host: cf_cuda_args.w */
};

struct ecu_ctx {
    const ecu_model *m;
    int n_ctx, logits_all;
    CUstream stream;
    CUdeviceptr block;    /* one allocation: env + tokens, KV table, arena, KV, logits, hidden, scratch */
    size_t block_bytes;
    CUdeviceptr env_dev, logits_dev, hidden_dev;
    unsigned char *staging; /* pinned: cf_cuda_env then the step's tokens, copied to env_dev */
    ecu_plan plan;        /* prompt batches: rebuilt per call */
    ecu_plan plan1;       /* one token, no hidden states: the decode graph */
    CUgraphExec graph;
    CUdeviceptr arena_dev;
};

#define CK(call, what)                                                                 \
    do {                                                                               \
        if (cuda_check(dev, (call), (what), err, err_len)) goto fail;                   \
    } while (0)

/* bound_plans callback: resolve every kernel a plan uses. */
typedef struct {
    ecu_model *m;
    char *err;
    size_t err_len;
    int failed;
} resolve_job;

static int find_fn(const ecu_model *m, const char *name) {
    int lo = 0, hi = m->n_fn;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((uintptr_t)m->names[mid] < (uintptr_t)name) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void resolve_kernels(void *user, const ecu_plan *p) {
    resolve_job *j = user;
    ecu_model *m = j->m;
    for (int i = 0; i < p->n && !j->failed; i++) {
        const char *name = p->l[i].kernel;
        int at = find_fn(m, name);
        if (at < m->n_fn && m->names[at] == name) continue;
        if (m->n_fn == m->cap_fn) {
            int nc = m->cap_fn ? 2 * m->cap_fn : 256;
            const char **nn = realloc(m->names, (size_t)nc * sizeof *nn);
            if (nn) m->names = nn;
            CUfunction *nf = nn ? realloc(m->fn, (size_t)nc * sizeof *nf) : NULL;
            if (!nf) {
                snprintf(j->err, j->err_len, "out of memory");
                j->failed = 1;
                return;
            }
            m->fn = nf;
            m->cap_fn = nc;
        }
        CUfunction f = NULL;
        CUresult rc = m->dev->api.cuModuleGetFunction(&f, m->mod, name);
        if (rc != CUDA_SUCCESS) {
            char e[256];
            cuda_check(m->dev, rc, "cuModuleGetFunction", e, sizeof e);
            snprintf(j->err, j->err_len, "the CUDA module lacks kernel %s of op %d (%s)", name, p->l[i].op, e);
            j->failed = 1;
            return;
        }
        memmove(m->names + at + 1, m->names + at, (size_t)(m->n_fn - at) * sizeof *m->names);
        memmove(m->fn + at + 1, m->fn + at, (size_t)(m->n_fn - at) * sizeof *m->fn);
        m->names[at] = name;
        m->fn[at] = f;
        m->n_fn++;
    }
}

void ecu_model_free(ecu_model *m) {
    if (!m) return;
    const cuda_dev *dev = m->dev;
    char e[64];
    if (!cuda_bind_thread(dev, e, sizeof e)) {
        if (m->wtab) dev->api.cuMemFree(m->wtab);
        if (m->weights) dev->api.cuMemFree(m->weights);
        if (m->mod) dev->api.cuModuleUnload(m->mod);
    }
    free(m->fn);
    free(m->names);
    free(m->waddr);
    free(m);
}

size_t ecu_model_weight_bytes(const ecu_model *m) { return m->weight_bytes; }

int ecu_model_new(const cuda_dev *dev, const gguf_file *g, const cf_model_desc *d,
                  void (*forward)(cf_cuda_host *), const cuda_image *image, ecu_model **out, char *err,
                  size_t err_len) {
    *out = NULL;
    size_t *off = NULL, *bytes = NULL;
    CUdeviceptr *addr = NULL;
    ecu_model *m = calloc(1, sizeof *m);
    if (!m) return snprintf(err, err_len, "out of memory"), -1;
    m->dev = dev;
    m->desc = d;
    m->forward = forward;
    if (!image || !image->data) {
        snprintf(err, err_len, "no compiled CUDA module (NVRTC did not run)");
        goto fail;
    }
    if (cuda_bind_thread(dev, err, err_len)) goto fail;
    CK(dev->api.cuModuleLoadData(&m->mod, image->data), image->is_cubin ? "cuModuleLoadData (cubin)"
                                                                         : "cuModuleLoadData (PTX, JIT by the driver)");
    /* every kernel any plan of this model can launch, by name, once */
    plan_bounds b;
    resolve_job rj = {m, err, err_len, 0};
    for (int all = 0; all < 2 && !rj.failed; all++)
        if (bound_plans(forward, d->n_batch, 1, all, &b, resolve_kernels, &rj, err, err_len)) goto fail;
    if (rj.failed) goto fail;
    /* weights: one allocation, GGUF bytes as they are */
    off = calloc((size_t)d->n_weights + 1, sizeof *off);
    bytes = calloc((size_t)d->n_weights + 1, sizeof *bytes);
    addr = calloc((size_t)d->n_weights + 1, sizeof *addr);
    if (!off || !bytes || !addr) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    if (ecu_weight_layout(g, d, off, bytes, &m->weight_bytes, err, err_len)) goto fail;
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc (%.1f MiB of weights)", m->weight_bytes / 1048576.0);
    CK(dev->api.cuMemAlloc(&m->weights, m->weight_bytes), what);
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        addr[i] = m->weights + off[i];
        CK(dev->api.cuMemcpyHtoD(addr[i], t->data, bytes[i]), "cuMemcpyHtoD (weights)");
    }
    CK(dev->api.cuMemAlloc(&m->wtab, (size_t)(d->n_weights > 0 ? d->n_weights : 1) * sizeof *addr),
       "cuMemAlloc (weight table)");
    CK(dev->api.cuMemcpyHtoD(m->wtab, addr, (size_t)d->n_weights * sizeof *addr), "cuMemcpyHtoD (weight table)");
    free(off);
    free(bytes);
    m->waddr = addr;
    *out = m;
    return 0;
fail:
    free(off);
    free(bytes);
    free(addr);
    ecu_model_free(m);
    return -1;
}

void ecu_ctx_free(ecu_ctx *c) {
    if (!c) return;
    const cuda_dev *dev = c->m->dev;
    char e[64];
    if (!cuda_bind_thread(dev, e, sizeof e)) {
        if (c->graph) dev->api.cuGraphExecDestroy(c->graph);
        if (c->stream) dev->api.cuStreamDestroy(c->stream);
        if (c->block) dev->api.cuMemFree(c->block);
        if (c->staging) dev->api.cuMemFreeHost(c->staging);
    }
    free(c->plan.l);
    free(c->plan1.l);
    free(c);
}

int ecu_ctx_new(const ecu_model *m, int n_ctx, int logits_all, ecu_ctx **out, char *err, size_t err_len) {
    *out = NULL;
    const cuda_dev *dev = m->dev;
    const cf_model_desc *d = m->desc;
    ecu_ctx *c = calloc(1, sizeof *c);
    if (!c) return snprintf(err, err_len, "out of memory"), -1;
    c->m = m;
    c->n_ctx = n_ctx;
    c->logits_all = logits_all;
    ecu_ctx_bytes sz;
    plan_bounds b;
    const int splits = ecu_att_splits(n_ctx);
    if (ecu_ctx_bytes_for(d, m->forward, n_ctx, logits_all, &sz, err, err_len) ||
        bound_plans(m->forward, d->n_batch, splits, logits_all, &b, NULL, NULL, err, err_len))
        goto fail;
    c->plan = (ecu_plan){.l = calloc((size_t)b.max_launches, sizeof(ecu_launch)), .cap = b.max_launches,
                         .logits_all = logits_all, .att_splits = splits};
    c->plan1 = (ecu_plan){.l = calloc((size_t)b.max_launches, sizeof(ecu_launch)), .cap = b.max_launches,
                          .logits_all = logits_all, .att_splits = splits};
    if (!c->plan.l || !c->plan1.l) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    if (ecu_plan_build(&c->plan1, m->forward, 1, err, err_len)) goto fail;
    if (cuda_bind_thread(dev, err, err_len)) goto fail;
    CK(dev->api.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    char what[128];
    c->block_bytes = sz.total;
    snprintf(what, sizeof what, "cuMemAlloc (%.1f MiB for a %d-position context: KV cache %.1f MiB)",
             sz.total / 1048576.0, n_ctx, sz.kv / 1048576.0);
    CK(dev->api.cuMemAlloc(&c->block, c->block_bytes), what);
    CK(dev->api.cuMemsetD8(c->block, 0, c->block_bytes), "cuMemsetD8");
    /* carve the block: env + tokens | KV pointer table | arena | KV | logits | hidden | scratch */
    CUdeviceptr at = c->block;
    c->env_dev = at;
    at += align_up(sizeof(cf_cuda_env) + (size_t)d->n_batch * sizeof(int));
    CUdeviceptr kvtab = at;
    at += align_up(2 * (size_t)d->n_layer * sizeof(void *));
    CUdeviceptr arena = at;
    c->arena_dev = arena;
    at += sz.arena;
    CUdeviceptr *kvp = calloc(2 * (size_t)d->n_layer + 1, sizeof *kvp);
    if (!kvp) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    for (int l = 0; l < d->n_layer; l++) {
        size_t one = align_up((size_t)n_ctx * (size_t)(d->kv_dim[l] > 0 ? d->kv_dim[l] : 1) * sizeof(float));
        kvp[l] = at;
        kvp[d->n_layer + l] = at + one;
        at += 2 * one;
    }
    c->logits_dev = at;
    at += sz.logits;
    c->hidden_dev = at;
    at += sz.hidden;
    CUdeviceptr scratch = at;
    CUresult rc = dev->api.cuMemcpyHtoD(kvtab, kvp, 2 * (size_t)d->n_layer * sizeof *kvp);
    free(kvp);
    CK(rc, "cuMemcpyHtoD (KV table)");
    /* the host copy of the env, with the fixed device addresses; pos, n_tokens, tokens per step */
    CK(dev->api.cuMemAllocHost((void **)&c->staging, sizeof(cf_cuda_env) + (size_t)d->n_batch * sizeof(int)),
       "cuMemAllocHost (staging)");
    cf_cuda_env *env = (cf_cuda_env *)c->staging;
    *env = (cf_cuda_env){
        .W = (const void *const *)(uintptr_t)m->wtab,
        .arena = (float *)(uintptr_t)arena,
        .kv_k = (float *const *)(uintptr_t)kvtab,
        .kv_v = (float *const *)(uintptr_t)(kvtab + (size_t)d->n_layer * sizeof(void *)),
        .logits = (float *)(uintptr_t)c->logits_dev,
        .hidden = (float *)(uintptr_t)c->hidden_dev,
        .scratch = (float *)(uintptr_t)scratch,
        .tokens = (const int *)(uintptr_t)(c->env_dev + sizeof(cf_cuda_env)),
        .n_ctx = n_ctx,
        .att_splits = splits,
        .logits_all = logits_all,
    };
    *out = c;
    return 0;
fail:
    ecu_ctx_free(c);
    return -1;
}

static int launch_plan(ecu_ctx *c, const ecu_plan *p, char *err, size_t err_len) {
    const ecu_model *m = c->m;
    const cuda_dev *dev = m->dev;
    CUdeviceptr env = c->env_dev;
    for (int i = 0; i < p->n; i++) {
        const ecu_launch *l = &p->l[i];
        int at = find_fn(m, l->kernel);
        if (at >= m->n_fn || m->names[at] != l->kernel)
            return snprintf(err, err_len, "kernel %s of op %d was not resolved at load", l->kernel, l->op), -1;
#define ARENA(off) ((off) >= 0 ? (float *)(uintptr_t)(c->arena_dev + (CUdeviceptr)(off) * sizeof(float)) : NULL)
#define WEIGHT(s) ((s) >= 0 ? (const void *)(uintptr_t)m->waddr[s] : NULL)
        cf_cuda_args a = {ARENA(l->out), {ARENA(l->in[0]), ARENA(l->in[1]), ARENA(l->in[2])}, WEIGHT(l->w),
                          WEIGHT(l->w2), l->layer, 0};
#undef ARENA
#undef WEIGHT
        void *params[] = {&env, &a};
        CK(dev->api.cuLaunchKernel(m->fn[at], l->grid[0], l->grid[1], 1, l->block, 1, 1, 0, c->stream, params, NULL),
           "cuLaunchKernel");
    }
    return 0;
fail:
    return -1;
}

int ecu_eval(ecu_ctx *c, const int *tokens, int n, int pos, float *logits, float *hidden, char *err,
             size_t err_len) {
    const cuda_dev *dev = c->m->dev;
    const cf_model_desc *d = c->m->desc;
    if (n < 1 || n > d->n_batch || pos < 0 || pos + n > c->n_ctx)
        return snprintf(err, err_len, "CUDA eval: %d tokens at %d (n_batch %d, n_ctx %d)", n, pos, d->n_batch,
                        c->n_ctx), -1;
    if (cuda_bind_thread(dev, err, err_len)) return -1;
    cf_cuda_env *env = (cf_cuda_env *)c->staging;
    env->pos = pos;
    env->n_tokens = n;
    memcpy(c->staging + sizeof *env, tokens, (size_t)n * sizeof *tokens);
    CK(dev->api.cuMemcpyHtoDAsync(c->env_dev, c->staging, sizeof *env + (size_t)n * sizeof *tokens, c->stream),
       "cuMemcpyHtoDAsync (step)");
    if (n == 1 && !hidden) {
        if (!c->graph) { /* the first decode step: capture the launches once */
            CUgraph g = NULL;
            CK(dev->api.cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
            int lrc = launch_plan(c, &c->plan1, err, err_len);
            CUresult erc = dev->api.cuStreamEndCapture(c->stream, &g);
            if (lrc) {
                if (g) dev->api.cuGraphDestroy(g);
                return -1;
            }
            CK(erc, "cuStreamEndCapture");
            CUresult irc = dev->api.cuGraphInstantiateWithFlags(&c->graph, g, 0);
            dev->api.cuGraphDestroy(g);
            if (irc != CUDA_SUCCESS) c->graph = NULL;
            CK(irc, "cuGraphInstantiateWithFlags");
        }
        CK(dev->api.cuGraphLaunch(c->graph, c->stream), "cuGraphLaunch");
    } else {
        c->plan.want_hidden = hidden != NULL;
        if (ecu_plan_build(&c->plan, c->m->forward, n, err, err_len)) return -1;
        if (c->plan.n > c->plan.cap)
            return snprintf(err, err_len, "CUDA plan of %d launches exceeds the %d reserved", c->plan.n,
                            c->plan.cap), -1;
        if (launch_plan(c, &c->plan, err, err_len)) return -1;
    }
    const size_t rows = c->logits_all ? (size_t)n : 1;
    CK(dev->api.cuMemcpyDtoHAsync(logits, c->logits_dev, rows * (size_t)d->n_vocab * sizeof(float), c->stream),
       "cuMemcpyDtoHAsync (logits)");
    if (hidden)
        CK(dev->api.cuMemcpyDtoHAsync(hidden, c->hidden_dev, (size_t)n * (size_t)d->n_embd * sizeof(float),
                                      c->stream), "cuMemcpyDtoHAsync (hidden states)");
    CK(dev->api.cuStreamSynchronize(c->stream), "CUDA forward (cuStreamSynchronize)");
    return 0;
fail:
    return -1;
}
