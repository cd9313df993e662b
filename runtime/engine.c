/*
 * engine.c — see engine.h.  Everything is allocated in eng_ctx_new; the
 * eval loop only fills the env and calls the generated forward.
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"

int eng_model_bind(eng_model *m, const gguf_file *g, const cf_model_desc *d,
                   void (*forward)(cf_env *), char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    m->W = calloc((size_t)d->n_weights, sizeof *m->W);
    if (!m->W) return snprintf(err, err_len, "out of memory"), -1;
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        if (!t) {
            snprintf(err, err_len, "tensor '%s': compiled code needs it, the file lacks it",
                     d->weight_names[i]);
            goto fail;
        }
        if ((int)t->type != d->weight_types[i]) {
            snprintf(err, err_len, "tensor '%s': type %s in the file, compiled for %s", t->name,
                     ggml_type_name(t->type), ggml_type_name((uint32_t)d->weight_types[i]));
            goto fail;
        }
        for (int k = 0; k < 4; k++)
            if (t->ne[k] != d->weight_shapes[i * 4 + k]) {
                snprintf(err, err_len, "tensor '%s': dim %d is %lld in the file, compiled for %ld",
                         t->name, k, (long long)t->ne[k], d->weight_shapes[i * 4 + k]);
                goto fail;
            }
        m->W[i] = t->data;
    }
    m->g = g;
    m->desc = d;
    m->forward = forward;
    return 0;
fail:
    free(m->W);
    m->W = NULL;
    return -1;
}

void eng_model_release(eng_model *m) {
    if (!m) return;
    free(m->W);
    m->W = NULL;
}

void eng_ctx_free(eng_ctx *c) {
    if (!c) return;
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
        c->kv_v[l] = calloc(n, sizeof(float));
        ok = c->kv_k[l] && c->kv_v[l];
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
    for (int i = 0; i < n; i += d->n_batch) {
        int nb = n - i < d->n_batch ? n - i : d->n_batch;
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
