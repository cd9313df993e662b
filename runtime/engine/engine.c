/*
 * engine.c — see engine.h.  Everything is allocated in eng_ctx_new; the
 * eval loop only fills the env and calls the generated forward.
 */
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "eng_cuda.h"
#include "kernels/kern.h"
#include "kernels/kern_mm.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* One conversion: tensor t (file type) → dst (its compiled type). */
typedef struct {
    const gguf_tensor *t;
    int dst_type;
    void *dst;
} repack_job;

typedef struct {
    const gguf_file *g;
    repack_job *jobs;
    int n_jobs;
    atomic_int next;   /* next job to take */
    atomic_int failed; /* first failure wins the message */
    char *err;
    size_t err_len;
    /* progress: source bytes converted so far, reported by the calling thread */
    atomic_size_t done_bytes;
    size_t total_bytes;
    pthread_t caller;
    void (*progress)(void *user, size_t done, size_t total);
    void *progress_user;
} repack_work;

static int convert(const repack_job *j, char *err, size_t err_len) {
    const gguf_tensor *t = j->t;
    int n_cols = (int)t->ne[0], n_rows = (int)(t->n_elems / (uint64_t)t->ne[0]);
    if (j->dst_type == CF_F32) {
        size_t rb = kern_row_bytes((int)t->type, n_cols);
        if (!rb) return snprintf(err, err_len, "tensor '%s': cannot dequantize %s", t->name,
                                 ggml_type_name(t->type)), -1;
        for (int r = 0; r < n_rows; r++)
            kern_dequant_row_isa(kern_best_isa(), (int)t->type, (const char *)t->data + (size_t)r * rb,
                                 (float *)j->dst + (size_t)r * (size_t)n_cols, n_cols);
        return 0;
    }
    return kern_repack(j->dst_type, (int)t->type, t->data, n_rows, n_cols, j->dst, err, err_len)
               ? -1 : 0;
}

static void *repack_thread(void *arg) {
    repack_work *w = arg;
    char e[512];
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->n_jobs && !atomic_load(&w->failed);)
        if (convert(&w->jobs[i], e, sizeof e)) {
            if (!atomic_exchange(&w->failed, 1)) snprintf(w->err, w->err_len, "%s", e);
        } else { /* the source is not read again: out of RSS (page cache keeps it) */
            (void)gguf_release_pages(w->g, w->jobs[i].t->data, w->jobs[i].t->n_bytes);
            size_t done = atomic_fetch_add(&w->done_bytes, w->jobs[i].t->n_bytes) + w->jobs[i].t->n_bytes;
            if (w->progress && pthread_equal(pthread_self(), w->caller))
                w->progress(w->progress_user, done, w->total_bytes);
        }
    return NULL;
}

/* Run the jobs on up to n_threads threads (the calling thread included). */
static int run_jobs(const gguf_file *g, repack_job *jobs, int n_jobs, int n_threads,
                    void (*progress)(void *, size_t, size_t), void *progress_user, char *err,
                    size_t err_len) {
    repack_work w = {.g = g, .jobs = jobs, .n_jobs = n_jobs, .err = err, .err_len = err_len,
                     .caller = pthread_self(), .progress = progress, .progress_user = progress_user};
    atomic_init(&w.next, 0);
    atomic_init(&w.failed, 0);
    atomic_init(&w.done_bytes, 0);
    for (int i = 0; i < n_jobs; i++) w.total_bytes += jobs[i].t->n_bytes;
    if (n_threads > n_jobs) n_threads = n_jobs;
    if (n_threads > 64) n_threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < n_threads; i++)
        if (!pthread_create(&th[started], NULL, repack_thread, &w)) started++;
    repack_thread(&w);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    return atomic_load(&w.failed) ? -1 : 0;
}

static int is_repacked(const eng_model *m, int i) {
    return m->region && (const char *)m->W[i] >= (const char *)m->region &&
           (const char *)m->W[i] < (const char *)m->region + m->repacked_bytes;
}

/* Map the weights the first forward pass reads in full now, in one madvise
 * per tensor, instead of by page faults inside the first token (measured in
 * docs/precisions.md, "time to first token").  An untied token_embd is
 * skipped (get_rows reads a few rows of it), and nothing is done when the
 * weights would not fit in half the RAM (they would evict each other). */
static void populate_mapped(eng_model *m, const gguf_file *g, const cf_model_desc *d) {
    int tied = 1;
    for (int i = 0; i < d->n_weights; i++)
        if (!strcmp(d->weight_names[i], "output.weight")) tied = 0;
    uint64_t total = 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < d->n_weights; i++)
        if (!is_repacked(m, i)) total += gguf_find_tensor(g, d->weight_names[i])->n_bytes;
    if (pages <= 0 || page <= 0 || total > (uint64_t)pages * (uint64_t)page / 2) return;
    for (int i = 0; i < d->n_weights; i++) {
        if (is_repacked(m, i) || (!tied && !strcmp(d->weight_names[i], "token_embd.weight"))) continue;
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        (void)gguf_populate(g, t->data, t->n_bytes); /* advice: failure costs only faults */
    }
}

static int bind_core(eng_model *m, const gguf_file *g, const cf_model_desc *d, void (*forward)(cf_env *),
                     int n_threads, void (*progress)(void *user, size_t done, size_t total),
                     void *progress_user, int streamed, char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    m->W = calloc((size_t)d->n_weights, sizeof *m->W);
    repack_job *jobs = calloc((size_t)d->n_weights, sizeof *jobs);
    int n_jobs = 0;
    if (!m->W || !jobs) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        if (!t) {
            snprintf(err, err_len, "tensor '%s': compiled code needs it, the file lacks it",
                     d->weight_names[i]);
            goto fail;
        }
        for (int k = 0; k < 4; k++)
            if (t->ne[k] != d->weight_shapes[i * 4 + k]) {
                snprintf(err, err_len, "tensor '%s': dim %d is %lld in the file, compiled for %ld",
                         t->name, k, (long long)t->ne[k], d->weight_shapes[i * 4 + k]);
                goto fail;
            }
        int dst = d->weight_types[i];
        if ((int)t->type == dst) {
            m->W[i] = t->data;
            continue;
        }
        if (streamed) {
            snprintf(err, err_len, "tensor '%s': streaming needs its file type %s, compiled for %s "
                     "(use --quant native or a .giw)", t->name, ggml_type_name(t->type),
                     ggml_type_name((uint32_t)dst));
            goto fail;
        }
        /* W[i] stays NULL until the region exists; jobs are in weight order */
        /* Conversions a precision asks for: anything with a kernel → F32, and
         * → the interleaved types; never out of a repacked type. */
        int n_cols = (int)t->ne[0];
        uint64_t n_rows = t->n_elems / (uint64_t)t->ne[0];
        size_t bytes = 0;
        int from_ok = (int)t->type < GGUF_CINFER_TYPE_FIRST && kern_type_supported((int)t->type);
        if (from_ok && dst == CF_F32) bytes = (size_t)t->n_elems * sizeof(float);
        else if (from_ok && n_rows <= 0x7fffffff)
            bytes = kern_repack_bytes(dst, (int)n_rows, n_cols);
        if (!bytes) {
            snprintf(err, err_len, "tensor '%s': type %s in the file, compiled for %s", t->name,
                     ggml_type_name(t->type), ggml_type_name((uint32_t)dst));
            goto fail;
        }
        jobs[n_jobs++] = (repack_job){t, dst, (void *)(uintptr_t)m->repacked_bytes};
        m->repacked_bytes += (bytes + 63) & ~(size_t)63; /* 64-byte aligned: SIMD, cache lines */
    }
    if (n_jobs) {
        /* One anonymous region for every converted tensor, with transparent
         * huge pages where the kernel offers them: 2 MiB faults instead of
         * 4 KiB ones.  Measured on the 336M Q8_0 model (docs/precisions.md):
         * int8 repack CPU time 1.63 s -> 0.32 s, f32 5.0 s -> 3.2 s, against
         * one posix_memalign per tensor. */
        void *r = mmap(NULL, m->repacked_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (r == MAP_FAILED) {
            snprintf(err, err_len, "out of memory for %zu bytes of repacked weights (%d tensors)",
                     m->repacked_bytes, n_jobs);
            m->repacked_bytes = 0;
            goto fail;
        }
        (void)madvise(r, m->repacked_bytes, MADV_HUGEPAGE);
        m->region = r;
        for (int k = 0; k < n_jobs; k++) jobs[k].dst = (char *)r + (uintptr_t)jobs[k].dst;
        for (int i = 0, k = 0; i < d->n_weights; i++)
            if (!m->W[i]) m->W[i] = jobs[k++].dst;
    }
    if (n_jobs) {
        double t0 = now_ms();
        if (run_jobs(g, jobs, n_jobs, n_threads > 0 ? n_threads : pool_default_threads(), progress,
                     progress_user, err, err_len))
            goto fail;
        m->repack_ms = now_ms() - t0;
        m->n_repacked = n_jobs;
    }
    free(jobs);
    if (!streamed) populate_mapped(m, g, d);
    m->g = g;
    m->desc = d;
    m->forward = forward;
    return 0;
fail:
    free(jobs);
    eng_model_release(m);
    return -1;
}

int eng_model_bind_threads(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                           void (*forward)(cf_env *), int n_threads,
                           void (*progress)(void *user, size_t done, size_t total), void *progress_user,
                           char *err, size_t err_len) {
    return bind_core(m, g, d, forward, n_threads, progress, progress_user, 0, err, err_len);
}

int eng_model_bind_streamed(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                            void (*forward)(cf_env *), int ahead, int keep, int moe_cache, char *err,
                            size_t err_len) {
    if (bind_core(m, g, d, forward, 1, NULL, NULL, 1, err, err_len)) return -1;
    if (stream_new(g, d, m->W, ahead, keep, moe_cache, &m->stream, err, err_len)) {
        eng_model_release(m);
        return -1;
    }
    return 0;
}

int eng_model_bind(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                   void (*forward)(cf_env *), char *err, size_t err_len) {
    return eng_model_bind_threads(m, g, d, forward, 0, NULL, NULL, err, err_len);
}

int eng_model_bind_cuda(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                        void (*forward)(cf_cuda_host *), const cuda_image *image, const cuda_dev *dev,
                        char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    if (ecu_model_new(dev, g, d, forward, image, &m->cuda, err, err_len)) return -1;
    m->g = g;
    m->desc = d;
    return 0;
}

void eng_model_release(eng_model *m) {
    if (!m) return;
    ecu_model_free(m->cuda);
    m->cuda = NULL;
    stream_free(m->stream);
    m->stream = NULL;
    if (m->region) munmap(m->region, m->repacked_bytes);
    free(m->W);
    m->region = NULL;
    m->W = NULL;
    m->n_repacked = 0;
    m->repacked_bytes = 0;
}

void eng_ctx_free(eng_ctx *c) {
    if (!c) return;
    ecu_ctx_free(c->cuda);
    for (int i = 0; c->snaps && i < c->n_snaps; i++) {
        free(c->snaps[i].state);
        free(c->snaps[i].logits);
    }
    free(c->snaps);
    free(c->state);
    if (c->kv_region) munmap(c->kv_region, c->kv_region_bytes);
    free(c->kv_k);
    free(c->kv_v);
    free(c->arena);
    free(c->logits);
    free(c->positions);
    pool_free(c->pool);
    free(c);
}

/* cf_kernels.matmul when streaming: say which weight comes next, then multiply. */
static void stream_matmul(cf_env *E, float *y, const float *x, const void *w, int type, int n_out, int n_in,
                          int n_tokens) {
    eng_ctx *c = (eng_ctx *)((char *)E - offsetof(eng_ctx, env));
    stream_touch(c->m->stream, w);
    c->kern_base->matmul(E, y, x, w, type, n_out, n_in, n_tokens);
}

/* cf_kernels.moe_matmul when streaming: say which experts the route chose
 * (ids: int32 bits in the route's float slots, prelude.h), then multiply. */
static void stream_moe_matmul(cf_env *E, float *y, const float *x, const float *route, const void *w, int type,
                              int n_out, int n_in, int n_expert, int k, int x_per_slot, const float *bias,
                              float *scratch, int n_tokens) {
    eng_ctx *c = (eng_ctx *)((char *)E - offsetof(eng_ctx, env));
    unsigned char seen[KERN_MOE_MAX_EXPERTS] = {0};
    int ids[KERN_MOE_MAX_EXPERTS], n = 0;
    for (long t = 0; t < n_tokens; t++)
        for (int j = 0; j < k; j++) {
            int32_t e;
            memcpy(&e, route + t * 2 * k + k + j, sizeof e);
            if (e >= 0 && e < n_expert && e < KERN_MOE_MAX_EXPERTS && !seen[e]) seen[e] = 1, ids[n++] = e;
        }
    stream_experts(c->m->stream, w, ids, n, k);
    c->kern_base->moe_matmul(E, y, x, route, w, type, n_out, n_in, n_expert, k, x_per_slot, bias, scratch, n_tokens);
}

/* Widest matmul input: ne[0] of every weight bounds it. */
static int max_n_in(const cf_model_desc *d) {
    long w = 0;
    for (int i = 0; i < d->n_weights; i++)
        if (d->weight_shapes[i * 4] > w) w = d->weight_shapes[i * 4];
    return (int)w;
}

/* The KV cache's place in one region: layer after layer, K then V, each
 * 64-byte aligned; a layer without keys (recurrent) or values (MLA) gets
 * none.  Returns the region's bytes; with base, points c->kv_k / kv_v into it. */
static size_t kv_layout(eng_ctx *c, const cf_model_desc *d, int n_ctx, char *base) {
    size_t off = 0;
    for (int l = 0; l < d->n_layer; l++) {
        if (d->kv_dim[l] > 0) {
            if (base) c->kv_k[l] = base + off;
            off += ((size_t)n_ctx * kern_kv_row_bytes(c->kv_type_k, d->kv_dim[l]) + 63) & ~(size_t)63;
        }
        if (d->kv_dim_v[l] > 0) {
            if (base) c->kv_v[l] = base + off;
            off += ((size_t)n_ctx * kern_kv_row_bytes(c->kv_type_v, d->kv_dim_v[l]) + 63) & ~(size_t)63;
        }
    }
    return off;
}

int eng_ctx_new(const eng_model *m, int n_ctx, int n_threads, int logits_all, int act_quant,
                eng_ctx **out, char *err, size_t err_len) {
    eng_ctx_opts o = {.n_ctx = n_ctx, .n_threads = n_threads, .logits_all = logits_all,
                      .act_quant = act_quant};
    return eng_ctx_open(m, &o, out, err, err_len);
}

int eng_ctx_open(const eng_model *m, const eng_ctx_opts *o, eng_ctx **out, char *err,
                 size_t err_len) {
    *out = NULL;
    const cf_model_desc *d = m->desc;
    int n_ctx = o->n_ctx, n_threads = o->n_threads, logits_all = o->logits_all;
    int act_quant = o->act_quant;
    if (o->n_snapshots < 0 || o->n_snapshots > ENG_MAX_SNAPSHOTS)
        return snprintf(err, err_len, "%d state snapshots: expected 0 (default %d) .. %d",
                        o->n_snapshots, ENG_DEFAULT_SNAPSHOTS, ENG_MAX_SNAPSHOTS), -1;
    if (n_ctx <= 0) n_ctx = d->n_ctx_train < 4096 ? d->n_ctx_train : 4096;
    if (n_ctx < 1) n_ctx = 512;
    eng_ctx *c = calloc(1, sizeof *c);
    if (!c) return snprintf(err, err_len, "out of memory"), -1;
    c->m = m;
    c->n_ctx = n_ctx;
    c->logits_all = logits_all;
    if (m->cuda) { /* the GPU holds the rest */
        c->logits = calloc((logits_all ? (size_t)d->n_batch : 1) * (size_t)d->n_vocab, sizeof(float));
        if (!c->logits || ecu_ctx_new(m->cuda, n_ctx, logits_all, &c->cuda, err, err_len)) {
            if (!c->logits) snprintf(err, err_len, "out of memory");
            eng_ctx_free(c);
            return -1;
        }
        c->env.logits_all = logits_all;
        c->kv_type_k = c->kv_type_v = CF_F32; /* eng_cuda.c: its own f32 cache */
        *out = c;
        return 0;
    }
    size_t scratch = act_quant ? kern_scratch_bytes_act(n_ctx, d->n_batch, max_n_in(d))
                               : kern_scratch_bytes(n_ctx);
    if (pool_new(n_threads, &c->pool) || pool_reserve(c->pool, scratch)) {
        free(c);
        return snprintf(err, err_len, "cannot start %d threads", n_threads), -1;
    }
    if (eng_kv_types_check(d, o->kv_type_k, o->kv_type_v, err, err_len)) {
        pool_free(c->pool);
        free(c);
        return -1;
    }
    c->kv_type_k = o->kv_type_k;
    c->kv_type_v = o->kv_type_v;
    c->arena = calloc((size_t)d->arena_floats, sizeof(float));
    c->kv_k = calloc((size_t)d->n_layer, sizeof *c->kv_k);
    c->kv_v = calloc((size_t)d->n_layer, sizeof *c->kv_v);
    size_t n_logit_rows = logits_all ? (size_t)d->n_batch : 1;
    c->logits = calloc(n_logit_rows * (size_t)d->n_vocab, sizeof(float));
    c->positions = calloc((size_t)d->n_batch, sizeof(int));
    int ok = c->arena && c->kv_k && c->kv_v && c->logits && c->positions;
    /* The KV cache (kv_layout): one anonymous region of zero pages, with
     * transparent huge pages where the kernel offers them.  Attention reads
     * a kv head's slice of each row, short runs a whole row apart: huge
     * pages spare the TLB misses (bench_att, 1 token at depth 16384, 16/4
     * heads of 64, F16, 1 thread: 9.5 -> 5.4 ms a layer with one kv head per
     * att_block call, 3.7 -> 3.0 with the kv-head ranges). */
    const size_t kv_total = ok ? kv_layout(c, d, n_ctx, NULL) : 0;
    if (kv_total) {
        void *r = mmap(NULL, kv_total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ok = r != MAP_FAILED;
        if (ok) {
            (void)madvise(r, kv_total, MADV_HUGEPAGE); /* advice: failure costs only speed */
            c->kv_region = r;
            c->kv_region_bytes = kv_total;
            kv_layout(c, d, n_ctx, r);
        }
    }
    /* recurrent state: the live one and the snapshots prefix reuse restores */
    if (ok && d->state_floats > 0) {
        c->state_floats = d->state_floats;
        c->state = calloc((size_t)d->state_floats, sizeof(float));
        c->n_snaps = o->n_snapshots ? o->n_snapshots : ENG_DEFAULT_SNAPSHOTS;
        c->snaps = calloc((size_t)c->n_snaps, sizeof *c->snaps);
        ok = c->state && c->snaps;
        for (int i = 0; ok && i < c->n_snaps; i++) {
            c->snaps[i].pos = -1;
            c->snaps[i].state = malloc((size_t)d->state_floats * sizeof(float));
            c->snaps[i].logits = malloc((size_t)d->n_vocab * sizeof(float));
            ok = c->snaps[i].state && c->snaps[i].logits;
        }
    }
    if (!ok) {
        eng_ctx_free(c);
        return snprintf(err, err_len, "out of memory for a %d-position context (%ld floats of "
                        "recurrent state, %d snapshots)", n_ctx, d->state_floats,
                        d->state_floats > 0 ? (o->n_snapshots ? o->n_snapshots : ENG_DEFAULT_SNAPSHOTS) : 0), -1;
    }
    c->kern_base = kern_table(kern_best_isa());
    c->kern_stream = *c->kern_base;
    c->kern_stream.matmul = stream_matmul;
    c->kern_stream.matmul_n = kern_matmul_n_each; /* each weight through stream_matmul */
    c->kern_stream.moe_matmul = stream_moe_matmul;
    c->env = (cf_env){
        .K = m->stream ? &c->kern_stream : c->kern_base,
        .W = m->W,
        .arena = c->arena,
        .kv_k = c->kv_k,
        .kv_v = c->kv_v,
        .logits = c->logits,
        .positions = c->positions,
        .pool = c->pool,
        .n_ctx = n_ctx,
        .logits_all = logits_all,
        .act_quant = act_quant ? 1 : 0,
        .state = c->state,
        .kv_type_k = c->kv_type_k,
        .kv_type_v = c->kv_type_v,
    };
    *out = c;
    return 0;
}

const char *eng_kv_type_name(int type) {
    switch (type) {
    case CF_F32: return "f32";
    case CF_F16: return "f16";
    case CF_Q8_0: return "q8_0";
    case CF_Q4_0: return "q4_0";
    default: return NULL;
    }
}

int eng_kv_type_parse(const char *name) {
    static const int types[] = {CF_F32, CF_F16, CF_Q8_0, CF_Q4_0};
    for (size_t i = 0; name && i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(name, eng_kv_type_name(types[i]))) return types[i];
    return -1;
}

int eng_kv_types_check(const cf_model_desc *d, int kv_type_k, int kv_type_v, char *err, size_t err_len) {
    const int types[2] = {kv_type_k, kv_type_v};
    for (int w = 0; w < 2; w++)
        if (!kern_kv_type_supported(types[w]))
            return snprintf(err, err_len, "KV cache type %d (%s): expected f32, f16, q8_0 or q4_0", types[w],
                            w ? "V" : "K"), -1;
    for (int l = 0; l < d->n_layer; l++)
        for (int w = 0; w < 2; w++) {
            const int n = w ? d->kv_dim_v[l] : d->kv_dim[l];
            if (n > 0 && !kern_kv_row_bytes(types[w], n))
                return snprintf(err, err_len, "cache type %s: layer %d's %s row is %d values (n_head_kv x "
                                "head_dim%s), not a multiple of %d", eng_kv_type_name(types[w]), l, w ? "V" : "K",
                                n, w ? "_v" : "", kern_type_block(types[w])), -1;
        }
    return 0;
}

size_t eng_kv_bytes(const cf_model_desc *d, int n_ctx, int kv_type_k, int kv_type_v) {
    size_t total = 0;
    for (int l = 0; l < d->n_layer; l++)
        for (int w = 0; w < 2; w++) {
            const int n = w ? d->kv_dim_v[l] : d->kv_dim[l];
            const size_t rb = n > 0 ? kern_kv_row_bytes(w ? kv_type_v : kv_type_k, n) : 0;
            if (n > 0 && !rb) return 0;
            total += (size_t)n_ctx * rb;
        }
    return total;
}

/* ==== non-finite logits =======================================================
 * eng_eval checks the logits of every batch (one pass over n_logits x n_vocab
 * floats; a forward pass costs thousands of times more).  When one is inf or
 * NaN, the batch runs once more through a kernel table whose entries check
 * each output they write, to name the first op, its weight and its layer that
 * produced a non-finite value.  The rerun recomputes the same KV rows from
 * the same inputs with the same kernels, so the cache is unchanged. */

static int all_finite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

typedef struct {
    cf_env env;                /* first: the wrappers get &env and find the rest */
    cf_kernels table;          /* the real table with the checked ops swapped in */
    const cf_kernels *real;
    const cf_model_desc *desc;
    const char *last_weight;   /* most recent op's weight, for ops without one */
    int last_layer;
    char what[256];            /* the first non-finite output, described */
} eng_check;

static int layer_of(const char *name) {
    int l;
    return name && sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* Record op's output y (n floats) when it is the first non-finite one. */
static void check_out(eng_check *C, const char *op, const void *w, int layer, const float *y, size_t n) {
    const char *name = NULL;
    for (int i = 0; w && i < C->desc->n_weights; i++)
        if (C->env.W[i] == w) name = C->desc->weight_names[i];
    if (name) C->last_weight = name;
    if (layer < 0) layer = name ? layer_of(name) : C->last_layer;
    if (layer >= 0) C->last_layer = layer;
    if (C->what[0] || all_finite(y, n)) return;
    const char *wn = name ? name : C->last_weight, *sep = !wn ? "" : name ? " " : " after ";
    if (layer >= 0)
        snprintf(C->what, sizeof C->what, "layer %d: the output of %s%s%s", layer, op, sep, wn ? wn : "");
    else
        snprintf(C->what, sizeof C->what, "the output of %s%s%s (outside the layers)", op, sep,
                 wn ? wn : "");
}

#define CHK(E) ((eng_check *)(E))

static void chk_matmul(cf_env *E, float *y, const float *x, const void *w, int type, int n_out, int n_in,
                       int n_tok) {
    CHK(E)->real->matmul(E, y, x, w, type, n_out, n_in, n_tok);
    check_out(CHK(E), "matmul", w, -1, y, (size_t)n_out * n_tok);
}
static void chk_get_rows(cf_env *E, float *y, const void *w, int type, int n, const int *ids, int n_tok) {
    CHK(E)->real->get_rows(E, y, w, type, n, ids, n_tok);
    check_out(CHK(E), "get_rows", w, -1, y, (size_t)n * n_tok);
}
static void chk_rms_norm(cf_env *E, float *y, const float *x, const float *w, int n, float eps, int n_tok) {
    CHK(E)->real->rms_norm(E, y, x, w, n, eps, n_tok);
    check_out(CHK(E), "rms_norm", w, -1, y, (size_t)n * n_tok);
}
static void chk_rope(cf_env *E, float *x, int n_head, int head_dim, int n_rot, float freq_base, int mode,
                     float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow,
                     int n_ctx_orig, const float *freq_factors, int n_tok) {
    CHK(E)->real->rope(E, x, n_head, head_dim, n_rot, freq_base, mode, freq_scale, ext_factor, attn_factor,
                       beta_fast, beta_slow, n_ctx_orig, freq_factors, n_tok);
    check_out(CHK(E), "rope", freq_factors, -1, x, (size_t)n_head * head_dim * n_tok);
}
static void chk_attention(cf_env *E, float *out, const float *q, const float *k, const float *v,
                          const float *sinks, int layer, int n_head, int n_head_kv, int head_dim, int head_dim_v,
                          float scale, int window, float softcap, int n_tok) {
    CHK(E)->real->attention(E, out, q, k, v, sinks, layer, n_head, n_head_kv, head_dim, head_dim_v, scale, window,
                            softcap, n_tok);
    check_out(CHK(E), "attention", NULL, layer, out, (size_t)n_head * head_dim_v * n_tok);
}
static void chk_swiglu(cf_env *E, float *y, const float *g, const float *u, int n, int n_tok) {
    CHK(E)->real->swiglu(E, y, g, u, n, n_tok);
    check_out(CHK(E), "swiglu", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_add(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    CHK(E)->real->add(E, y, a, b, n, n_tok);
    check_out(CHK(E), "add", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_add_row(cf_env *E, float *y, const float *x, const float *b, int n, int n_tok) {
    CHK(E)->real->add_row(E, y, x, b, n, n_tok);
    check_out(CHK(E), "add_row", b, -1, y, (size_t)n * n_tok);
}
static void chk_scale(cf_env *E, float *y, const float *x, float s, int n, int n_tok) {
    CHK(E)->real->scale(E, y, x, s, n, n_tok);
    check_out(CHK(E), "scale", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_gelu(cf_env *E, float *y, const float *x, int n, int n_tok) {
    CHK(E)->real->gelu(E, y, x, n, n_tok);
    check_out(CHK(E), "gelu", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_geglu(cf_env *E, float *y, const float *g, const float *u, int n, int n_tok) {
    CHK(E)->real->geglu(E, y, g, u, n, n_tok);
    check_out(CHK(E), "geglu", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_layer_norm(cf_env *E, float *y, const float *x, const float *w, const float *b, int n,
                           float eps, int n_tok) {
    CHK(E)->real->layer_norm(E, y, x, w, b, n, eps, n_tok);
    check_out(CHK(E), "layer_norm", w, -1, y, (size_t)n * n_tok);
}
static void chk_logits_post(cf_env *E, float *logits, const float *bias, int n_vocab, int n_rows, float scale,
                            float softcap) {
    CHK(E)->real->logits_post(E, logits, bias, n_vocab, n_rows, scale, softcap);
    check_out(CHK(E), "logits_post", bias, -1, logits, (size_t)n_vocab * n_rows);
}
static void chk_mul_row(cf_env *E, float *y, const float *x, const float *w, int n_w, int n, int n_tok) {
    CHK(E)->real->mul_row(E, y, x, w, n_w, n, n_tok);
    check_out(CHK(E), "mul_row", w, -1, y, (size_t)n * n_tok);
}
static void chk_mul(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    CHK(E)->real->mul(E, y, a, b, n, n_tok);
    check_out(CHK(E), "mul", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_relu_sqr(cf_env *E, float *y, const float *x, int n, int n_tok) {
    CHK(E)->real->relu_sqr(E, y, x, n, n_tok);
    check_out(CHK(E), "relu_sqr", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_xielu(cf_env *E, float *y, const float *x, float alpha_n, float alpha_p, float beta, float eps,
                      int n, int n_tok) {
    CHK(E)->real->xielu(E, y, x, alpha_n, alpha_p, beta, eps, n, n_tok);
    check_out(CHK(E), "xielu", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_pos_log_scale(cf_env *E, float *y, const float *x, float scale, int floor_scale, float offset,
                              int n, int n_tok) {
    CHK(E)->real->pos_log_scale(E, y, x, scale, floor_scale, offset, n, n_tok);
    check_out(CHK(E), "pos_log_scale", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_tanh(cf_env *E, float *y, const float *x, int n, int n_tok) {
    CHK(E)->real->tanh_(E, y, x, n, n_tok);
    check_out(CHK(E), "tanh", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_sub(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    CHK(E)->real->sub(E, y, a, b, n, n_tok);
    check_out(CHK(E), "sub", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_concat(cf_env *E, float *y, const float *a, int n_a, const float *b, int n_b, int n_tok) {
    CHK(E)->real->concat(E, y, a, n_a, b, n_b, n_tok);
    check_out(CHK(E), "concat", NULL, -1, y, (size_t)(n_a + n_b) * n_tok);
}
static void chk_match_norm(cf_env *E, float *y, const float *x, const float *ref, int n, int n_group, int n_tok) {
    CHK(E)->real->match_norm(E, y, x, ref, n, n_group, n_tok);
    check_out(CHK(E), "match_norm", NULL, -1, y, (size_t)n * n_group * n_tok);
}
static void chk_mix_groups(cf_env *E, float *y, const float *x, const float *c, int n, int n_group, int n_tok) {
    CHK(E)->real->mix_groups(E, y, x, c, n, n_group, n_tok);
    check_out(CHK(E), "mix_groups", NULL, -1, y, (size_t)n * n_group * n_tok);
}
static void chk_axpy_groups(cf_env *E, float *y, const float *p, const float *v, const float *c, float bias, int n,
                            int n_group, int n_tok) {
    CHK(E)->real->axpy_groups(E, y, p, v, c, bias, n, n_group, n_tok);
    check_out(CHK(E), "axpy_groups", NULL, -1, y, (size_t)n * n_group * n_tok);
}
static void chk_add_groups(cf_env *E, float *y, const float *x, const float *v, int n, int n_group, int g0,
                           int n_tok) {
    CHK(E)->real->add_groups(E, y, x, v, n, n_group, g0, n_tok);
    check_out(CHK(E), "add_groups", NULL, -1, y, (size_t)n * n_group * n_tok);
}
static void chk_gaussian_topk(cf_env *E, float *y, const float *x, float std_mul, int n, int n_tok) {
    CHK(E)->real->gaussian_topk(E, y, x, std_mul, n, n_tok);
    check_out(CHK(E), "gaussian_topk", NULL, -1, y, (size_t)n * n_tok);
}

static void chk_moe_matmul(cf_env *E, float *y, const float *x, const float *route, const void *w, int type,
                           int n_out, int n_in, int n_expert, int k, int x_per_slot, const float *bias,
                           float *scratch, int n_tok) {
    CHK(E)->real->moe_matmul(E, y, x, route, w, type, n_out, n_in, n_expert, k, x_per_slot, bias, scratch, n_tok);
    check_out(CHK(E), "moe_matmul", w, -1, y, (size_t)n_tok * k * n_out);
}
static void chk_moe_sum(cf_env *E, float *y, const float *x, const float *route, const float *expert_scale, int n,
                        int k, int n_tok) {
    CHK(E)->real->moe_sum(E, y, x, route, expert_scale, n, k, n_tok);
    check_out(CHK(E), "moe_sum", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_head_matmul(cf_env *E, float *y, const float *x, const void *w, int type, int n_out, int n_in,
                            int n_head, int head_rows, int row0, int transposed, float *scratch, int n_tok) {
    CHK(E)->real->head_matmul(E, y, x, w, type, n_out, n_in, n_head, head_rows, row0, transposed, scratch, n_tok);
    check_out(CHK(E), "head_matmul", w, -1, y, (size_t)n_tok * n_head * n_out);
}
static void chk_mul_sigmoid(cf_env *E, float *y, const float *x, const float *g, int n, int n_g, int n_tok) {
    CHK(E)->real->mul_sigmoid(E, y, x, g, n, n_g, n_tok);
    check_out(CHK(E), "mul_sigmoid", NULL, -1, y, (size_t)n * n_tok);
}
static void chk_swiglu_oai(cf_env *E, float *y, const float *g, const float *u, float alpha, float limit, int n,
                           int n_tok) {
    CHK(E)->real->swiglu_oai(E, y, g, u, alpha, limit, n, n_tok);
    check_out(CHK(E), "swiglu_oai", NULL, -1, y, (size_t)n * n_tok);
}

/* Rerun the batch in c->env with checked kernels; describe the first
 * non-finite output in what. */
static void diagnose_nonfinite(eng_ctx *c, char *what, size_t what_len) {
    eng_check *C = calloc(1, sizeof *C);
    if (!C) {
        snprintf(what, what_len, "no memory to find the layer");
        return;
    }
    /* streaming: the unstreamed kernels (stream_matmul finds its eng_ctx from
     * the env it gets, which here is C's; the file mapping pages the weights
     * back in without the read-ahead) */
    C->real = c->m->stream ? c->kern_base : c->env.K;
    C->desc = c->m->desc;
    C->last_layer = -1;
    C->table = *C->real; /* ops added later run unchecked rather than not at all */
    C->table.matmul = chk_matmul;
    C->table.matmul_n = kern_matmul_n_each; /* each weight through chk_matmul */
    C->table.get_rows = chk_get_rows;
    C->table.rms_norm = chk_rms_norm;
    C->table.rope = chk_rope;
    C->table.attention = chk_attention;
    C->table.swiglu = chk_swiglu;
    C->table.add = chk_add;
    C->table.add_row = chk_add_row;
    C->table.scale = chk_scale;
    C->table.gelu = chk_gelu;
    C->table.geglu = chk_geglu;
    C->table.layer_norm = chk_layer_norm;
    C->table.logits_post = chk_logits_post;
    C->table.mul_row = chk_mul_row;
    C->table.mul = chk_mul;
    C->table.relu_sqr = chk_relu_sqr;
    C->table.xielu = chk_xielu;
    C->table.pos_log_scale = chk_pos_log_scale;
    C->table.tanh_ = chk_tanh;
    C->table.sub = chk_sub;
    C->table.concat = chk_concat;
    C->table.match_norm = chk_match_norm;
    C->table.mix_groups = chk_mix_groups;
    C->table.axpy_groups = chk_axpy_groups;
    C->table.add_groups = chk_add_groups;
    C->table.gaussian_topk = chk_gaussian_topk;
    C->table.moe_matmul = chk_moe_matmul;
    C->table.moe_sum = chk_moe_sum;
    C->table.head_matmul = chk_head_matmul;
    C->table.mul_sigmoid = chk_mul_sigmoid;
    C->table.swiglu_oai = chk_swiglu_oai;
    C->env = c->env;
    C->env.K = &C->table;
    c->m->forward(&C->env);
    snprintf(what, what_len, "%s", C->what[0] ? C->what : "not reproduced by a checked rerun");
    free(C);
}

int eng_eval(eng_ctx *c, const int *tokens, int n, char *err, size_t err_len) {
    const cf_model_desc *d = c->m->desc;
    if (n <= 0) return 0;
    if (c->snap_deferred) { /* one token continues the deferred snapshot's position: superseded */
        if (n == 1) c->snap_deferred = 0;
        else eng_snapshot_flush(c);
    }
    if (c->n_past + n > c->n_ctx)
        return snprintf(err, err_len, "context full: %d positions used + %d new > n_ctx %d",
                        c->n_past, n, c->n_ctx), -1;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= d->n_vocab)
            return snprintf(err, err_len, "token id %d at %d out of range [0, %d)", tokens[i], i,
                            d->n_vocab), -1;
    /* bidirectional attention: every token's state depends on every other one */
    if (d->encoder && c->n_past)
        return snprintf(err, err_len, "encoder: an input is evaluated whole from position 0 (%d positions "
                        "already evaluated)", c->n_past), -1;
    if (d->encoder && n > d->n_batch)
        return snprintf(err, err_len, "encoder: %d tokens exceed the %d it evaluates at once", n, d->n_batch), -1;
    for (int i = 0; i < n; i += d->n_batch) {
        int nb = n - i < d->n_batch ? n - i : d->n_batch;
        if (c->cuda) {
            float *hid = c->env.hidden ? c->env.hidden + (size_t)i * (size_t)d->n_embd : NULL;
            if (ecu_eval(c->cuda, tokens + i, nb, c->n_past, c->logits, hid, err, err_len)) return -1;
            c->n_past += nb;
            c->n_logits = c->logits_all ? nb : 1;
            continue;
        }
        c->env.tokens = tokens + i;
        c->env.pos = c->n_past;
        for (int t = 0; t < nb; t++) c->positions[t] = c->n_past + t;
        c->env.n_tokens = nb;
        c->m->forward(&c->env);
        c->n_logits = c->logits_all ? nb : 1;
        /* an encoder writes env.hidden, not the logits (not checked) */
        if (!d->encoder && !all_finite(c->logits, (size_t)c->n_logits * (size_t)d->n_vocab)) {
            char what[300];
            diagnose_nonfinite(c, what, sizeof what);
            c->n_logits = 0;
            return snprintf(err, err_len, "non-finite logits (inf/NaN) for the tokens at positions %d..%d; "
                            "first in %s", c->n_past, c->n_past + nb - 1, what), -1;
        }
        c->n_past += nb;
    }
    return 0;
}

const float *eng_logits(const eng_ctx *c) {
    return c->logits + (size_t)(c->n_logits > 0 ? c->n_logits - 1 : 0) * (size_t)c->m->desc->n_vocab;
}

/* ---- recurrent state: snapshots for prefix reuse ---------------------------------
 * The KV cache can forget its tail (attention at position p reads only
 * positions <= p), a recurrent state cannot: it is what all positions left.
 * So going back to position p restores the state saved at the largest
 * snapshot position <= p (or the zero state of position 0); the caller
 * evaluates the tokens from there again.  Snapshots past the kept position
 * describe a history that is being replaced and are dropped.  When the ring
 * is full, a new snapshot replaces the oldest one except the earliest (the
 * system prompt's end, the likeliest prefix of the next conversation). */

int eng_truncate(eng_ctx *c, int n_past) {
    if (n_past < 0) n_past = 0;
    if (n_past >= c->n_past) return c->n_past;
    c->snap_deferred = 0; /* its position is past n_past: of the history being replaced */
    if (!c->state) {
        c->n_past = n_past;
        return n_past;
    }
    eng_snap *best = NULL;
    for (int i = 0; i < c->n_snaps; i++) {
        eng_snap *s = &c->snaps[i];
        if (s->pos > n_past) s->pos = -1; /* of the history being replaced */
        else if (s->pos > 0 && (!best || s->pos > best->pos)) best = s;
    }
    const cf_model_desc *d = c->m->desc;
    if (best) {
        memcpy(c->state, best->state, (size_t)c->state_floats * sizeof(float));
        if (best->has_logits) memcpy(c->logits, best->logits, (size_t)d->n_vocab * sizeof(float));
        c->n_logits = best->has_logits ? 1 : 0;
        c->n_past = best->pos;
    } else {
        memset(c->state, 0, (size_t)c->state_floats * sizeof(float));
        c->n_logits = 0;
        c->n_past = 0;
    }
    return c->n_past;
}

void eng_snapshot(eng_ctx *c) {
    c->snap_deferred = 0;
    if (!c->state || c->n_past <= 0) return;
    eng_snap *s = NULL, *first = NULL;
    for (int i = 0; i < c->n_snaps; i++) {
        eng_snap *x = &c->snaps[i];
        if (x->pos == c->n_past) s = x; /* refresh */
        if (x->pos >= 0 && (!first || x->pos < first->pos)) first = x;
    }
    for (int i = 0; !s && i < c->n_snaps; i++)
        if (c->snaps[i].pos < 0) s = &c->snaps[i];
    if (!s) { /* full: the oldest but the earliest */
        for (int i = 0; i < c->n_snaps; i++) {
            eng_snap *x = &c->snaps[i];
            if ((x != first || c->n_snaps == 1) && (!s || x->stamp < s->stamp)) s = x;
        }
    }
    const cf_model_desc *d = c->m->desc;
    memcpy(s->state, c->state, (size_t)c->state_floats * sizeof(float));
    s->has_logits = c->n_logits > 0;
    if (s->has_logits) memcpy(s->logits, eng_logits(c), (size_t)d->n_vocab * sizeof(float));
    s->pos = c->n_past;
    s->stamp = ++c->snap_clock;
}

void eng_snapshot_deferred(eng_ctx *c) {
    c->snap_deferred = c->state && c->n_past > 0;
}

void eng_snapshot_flush(eng_ctx *c) {
    if (c->snap_deferred) eng_snapshot(c);
}

int eng_snapshot_at(const eng_ctx *c, int pos) {
    if (c->snap_deferred && pos == c->n_past) return 1;
    for (int i = 0; c->state && i < c->n_snaps; i++)
        if (c->snaps[i].pos == pos) return 1;
    return 0;
}

void eng_set_history(eng_ctx *c, int n_past, int has_logits) {
    c->snap_deferred = 0; /* the state was replaced */
    c->n_past = n_past;
    c->n_logits = has_logits ? 1 : 0;
    for (int i = 0; c->state && i < c->n_snaps; i++) c->snaps[i].pos = -1;
    eng_snapshot(c);
}
