/*
 * engine.c — see engine.h.  Everything is allocated in eng_ctx_new; the
 * eval loop only fills the env and calls the generated forward.
 */
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "eng_cuda.h"
#include "kernels/kern.h"

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

int eng_model_bind_threads(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                           void (*forward)(cf_env *), int n_threads,
                           void (*progress)(void *user, size_t done, size_t total), void *progress_user,
                           char *err, size_t err_len) {
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
    populate_mapped(m, g, d);
    m->g = g;
    m->desc = d;
    m->forward = forward;
    return 0;
fail:
    free(jobs);
    eng_model_release(m);
    return -1;
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
    if (c->kv_k)
        for (int l = 0; l < c->m->desc->n_layer; l++) {
            free(c->kv_k[l]);
            free(c->kv_v[l]);
        }
    free(c->kv_k);
    free(c->kv_v);
    free(c->arena);
    free(c->logits);
    free(c->positions);
    pool_free(c->pool);
    free(c);
}

/* Widest matmul input: ne[0] of every weight bounds it. */
static int max_n_in(const cf_model_desc *d) {
    long w = 0;
    for (int i = 0; i < d->n_weights; i++)
        if (d->weight_shapes[i * 4] > w) w = d->weight_shapes[i * 4];
    return (int)w;
}

int eng_ctx_new(const eng_model *m, int n_ctx, int n_threads, int logits_all, int act_quant,
                eng_ctx **out, char *err, size_t err_len) {
    *out = NULL;
    const cf_model_desc *d = m->desc;
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
        *out = c;
        return 0;
    }
    size_t scratch = act_quant ? kern_scratch_bytes_act(n_ctx, d->n_batch, max_n_in(d))
                               : kern_scratch_bytes(n_ctx);
    if (pool_new(n_threads, &c->pool) || pool_reserve(c->pool, scratch)) {
        free(c);
        return snprintf(err, err_len, "cannot start %d threads", n_threads), -1;
    }
    c->arena = calloc((size_t)d->arena_floats, sizeof(float));
    c->kv_k = calloc((size_t)d->n_layer, sizeof *c->kv_k);
    c->kv_v = calloc((size_t)d->n_layer, sizeof *c->kv_v);
    size_t n_logit_rows = logits_all ? (size_t)d->n_batch : 1;
    c->logits = calloc(n_logit_rows * (size_t)d->n_vocab, sizeof(float));
    c->positions = calloc((size_t)d->n_batch, sizeof(int));
    int ok = c->arena && c->kv_k && c->kv_v && c->logits && c->positions;
    for (int l = 0; ok && l < d->n_layer; l++) {
        size_t n = (size_t)n_ctx * (size_t)(d->kv_dim[l] > 0 ? d->kv_dim[l] : 1);
        c->kv_k[l] = calloc(n, sizeof(float));
        /* no V cache where the values are the keys' prefix (MLA) */
        c->kv_v[l] = d->kv_dim_v[l] > 0 ? calloc((size_t)n_ctx * (size_t)d->kv_dim_v[l], sizeof(float))
                                        : NULL;
        ok = c->kv_k[l] && (c->kv_v[l] || d->kv_dim_v[l] <= 0);
    }
    if (!ok) {
        eng_ctx_free(c);
        return snprintf(err, err_len, "out of memory for a %d-position context", n_ctx), -1;
    }
    c->env = (cf_env){
        .K = kern_table(kern_best_isa()),
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
    };
    *out = c;
    return 0;
}

int eng_eval(eng_ctx *c, const int *tokens, int n, char *err, size_t err_len) {
    const cf_model_desc *d = c->m->desc;
    if (n <= 0) return 0;
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
        c->n_past += nb;
        c->n_logits = c->logits_all ? nb : 1;
    }
    return 0;
}

const float *eng_logits(const eng_ctx *c) {
    return c->logits + (size_t)(c->n_logits > 0 ? c->n_logits - 1 : 0) * (size_t)c->m->desc->n_vocab;
}

void eng_truncate(eng_ctx *c, int n_past) {
    if (n_past >= 0 && n_past < c->n_past) c->n_past = n_past;
}
