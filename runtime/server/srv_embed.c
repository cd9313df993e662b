/*
 * srv_embed.c — POST /v1/embeddings (srv_embed.h): request parsing and
 * validation, the computation (cinfer_embed per input) and the OpenAI
 * response with float arrays or base64.
 */
#include "srv_embed.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct srv_embed {
    int n_in;        /* inputs */
    int32_t **ids;   /* (n_in) token ids of each input */
    int *n_ids;      /* (n_in) */
    long n_tokens;   /* sum of n_ids */
    int n_embd;
    int pooling;     /* CINFER_POOL_* */
    int base64;      /* encoding_format "base64" */
    float *vec;      /* (n_in, n_embd) after srv_embed_run */
};

void srv_embed_free(srv_embed *e) {
    if (!e) return;
    for (int i = 0; e->ids && i < e->n_in; i++) free(e->ids[i]);
    free(e->ids);
    free(e->n_ids);
    free(e->vec);
    free(e);
}

long srv_embed_n_tokens(const srv_embed *e) { return e->n_tokens; }

typedef struct {
    unsigned *status;
    char *param, *msg;
    size_t param_len, msg_len;
} bad_out;

static srv_embed *bad(bad_out *b, srv_embed *e, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static srv_embed *bad(bad_out *b, srv_embed *e, unsigned status, const char *param, const char *fmt, ...) {
    *b->status = status;
    snprintf(b->param, b->param_len, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, b->msg_len, fmt, ap);
    va_end(ap);
    srv_embed_free(e);
    return NULL;
}

/* 1 when v is a JSON number holding an integer. */
static int is_int(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    return d > -9e15 && d < 9e15 && d == (double)(long long)d; /* range first: the cast is UB outside */
}

srv_embed *srv_embed_parse(const cinfer_model *m, int n_ctx, const cJSON *r, unsigned *status, char *param,
                           size_t param_len, char *msg, size_t msg_len) {
    bad_out b = {status, param, msg, param_len, msg_len};
    if (!cJSON_IsObject(r)) return bad(&b, NULL, 400, NULL, "the request body must be a JSON object");
    srv_embed *e = calloc(1, sizeof *e);
    if (!e) return bad(&b, NULL, 500, NULL, "out of memory");
    e->n_embd = cinfer_model_n_embd(m);
    const int n_vocab = cinfer_model_n_vocab(m);
    /* an embedding model pools as its file says (BGE: CLS); mean otherwise */
    const int own = cinfer_model_pooling(m);
    e->pooling = own == CINFER_POOL_CLS || own == CINFER_POOL_LAST ? own : CINFER_POOL_MEAN;
    /* an encoder evaluates an input whole: at most its batch */
    if (cinfer_model_is_encoder(m) && cinfer_model_n_batch(m) < n_ctx) n_ctx = cinfer_model_n_batch(m);

    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "encoding_format");
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64")))
            return bad(&b, e, 400, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        e->base64 = !strcmp(fmt->valuestring, "base64");
    }
    const cJSON *dim = cJSON_GetObjectItemCaseSensitive(r, "dimensions");
    if (dim && !cJSON_IsNull(dim) && !(is_int(dim) && dim->valuedouble == e->n_embd))
        return bad(&b, e, 400, "dimensions", "'dimensions': this model's embeddings have %d dimensions", e->n_embd);
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(r, "pooling");
    if (pool && !cJSON_IsNull(pool)) {
        const char *p = cJSON_IsString(pool) ? pool->valuestring : "";
        e->pooling = !strcmp(p, "mean") ? CINFER_POOL_MEAN
                     : !strcmp(p, "last") ? CINFER_POOL_LAST
                     : !strcmp(p, "cls")  ? CINFER_POOL_CLS
                                          : -1;
        if (e->pooling < 0) return bad(&b, e, 400, "pooling", "'pooling' must be \"mean\", \"last\" or \"cls\"");
    }

    const cJSON *in = cJSON_GetObjectItemCaseSensitive(r, "input");
    if (!in || cJSON_IsNull(in)) return bad(&b, e, 400, "input", "'input' is required");
    /* the shape: one string, one token list, or an array of either */
    int n = 0, token_list = 0;
    if (cJSON_IsString(in)) n = 1;
    else if (cJSON_IsArray(in)) {
        n = cJSON_GetArraySize(in);
        if (n == 0) return bad(&b, e, 400, "input", "'input' must not be an empty array");
        const cJSON *x0 = cJSON_GetArrayItem(in, 0);
        token_list = cJSON_IsNumber(x0);
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, in) {
            int ok = token_list ? is_int(x) : cJSON_IsString(x) || cJSON_IsArray(x);
            if (!ok)
                return bad(&b, e, 400, "input",
                           "'input[%d]': expected %s (input is a string, an array of strings, an array of "
                           "token ids or an array of arrays of token ids)",
                           i, token_list ? "a token id (integer)" : "a string or an array of token ids");
            i++;
        }
        if (token_list) n = 1;
    } else {
        return bad(&b, e, 400, "input", "'input' must be a string or an array");
    }
    if (n > SRV_EMBED_MAX_INPUTS)
        return bad(&b, e, 400, "input", "'input' has %d entries; at most %d per request", n, SRV_EMBED_MAX_INPUTS);
    e->ids = calloc((size_t)n, sizeof *e->ids);
    e->n_ids = calloc((size_t)n, sizeof *e->n_ids);
    if (!e->ids || !e->n_ids) return bad(&b, e, 500, NULL, "out of memory");
    e->n_in = n;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_IsString(in) || token_list ? in : cJSON_GetArrayItem(in, i);
        char where[48];
        if (cJSON_IsString(in)) snprintf(where, sizeof where, "input");
        else snprintf(where, sizeof where, token_list ? "input" : "input[%d]", i);
        size_t cnt = 0;
        if (cJSON_IsString(x)) {
            size_t cap = (size_t)n_ctx + 1;
            if (!(e->ids[i] = malloc(cap * sizeof **e->ids))) return bad(&b, e, 500, NULL, "out of memory");
            int rc = cinfer_tokenize(m, x->valuestring, strlen(x->valuestring), 1, 1, e->ids[i], cap, &cnt);
            if (rc && rc != CINFER_EARG) return bad(&b, e, 500, where, "tokenizer failed (%d)", rc);
            /* keep what the text needs, not n_ctx per input (2048 inputs per request) */
            int32_t *fit = realloc(e->ids[i], (cnt < cap ? cnt + 1 : cap) * sizeof **e->ids);
            if (fit) e->ids[i] = fit;
        } else {
            int k = cJSON_GetArraySize(x), j = 0;
            cnt = (size_t)k;
            if (k > n_ctx) goto too_long;
            if (!(e->ids[i] = malloc(((size_t)k + 1) * sizeof **e->ids))) return bad(&b, e, 500, NULL, "out of memory");
            const cJSON *t;
            cJSON_ArrayForEach(t, x) {
                if (!is_int(t) || t->valuedouble < 0 || t->valuedouble >= n_vocab)
                    return bad(&b, e, 400, where, "'%s[%d]' must be a token id in [0, %d)", where, j, n_vocab);
                e->ids[i][j++] = (int32_t)t->valuedouble;
            }
        }
        if (cnt == 0) return bad(&b, e, 400, where, "'%s' is empty (0 tokens)", where);
    too_long:
        if (cnt > (size_t)n_ctx)
            return bad(&b, e, 400, where, "'%s' is %zu tokens; %s %d", where, cnt,
                       cinfer_model_is_encoder(m) ? "this encoder embeds at most" : "the context holds", n_ctx);
        e->n_ids[i] = (int)cnt;
        e->n_tokens += (long)cnt;
    }
    return e;
}

int srv_embed_run(srv_embed *e, cinfer_session *s, char *err, size_t err_len) {
    e->vec = malloc((size_t)e->n_in * (size_t)e->n_embd * sizeof *e->vec);
    if (!e->vec) {
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    for (int i = 0; i < e->n_in; i++) {
        int rc = cinfer_embed(s, e->ids[i], e->n_ids[i], e->pooling, e->vec + (size_t)i * (size_t)e->n_embd,
                              e->n_embd, err, err_len);
        if (rc) return rc;
    }
    return 0;
}

/* "[f0,f1,...]" with %.9g (float round trip), or the base64 of the floats'
 * little-endian bytes.  malloc'd. */
static char *format_vec(const float *v, int n, int base64) {
    if (base64) {
        size_t nb = (size_t)n * sizeof *v;
        unsigned char *raw = malloc(nb);
        char *out = malloc(4 * ((nb + 2) / 3) + 1);
        if (!raw || !out) {
            free(raw);
            free(out);
            return NULL;
        }
        for (int i = 0; i < n; i++) { /* little-endian whatever the host */
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) raw[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        sodium_bin2base64(out, 4 * ((nb + 2) / 3) + 1, raw, nb, sodium_base64_VARIANT_ORIGINAL);
        free(raw);
        return out;
    }
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i])) return NULL; /* JSON has no NaN/Inf */
    size_t cap = (size_t)n * 18 + 3, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[len++] = '[';
    for (int i = 0; i < n; i++) len += (size_t)snprintf(out + len, cap - len, "%s%.9g", i ? "," : "", v[i]);
    out[len++] = ']';
    out[len] = 0;
    return out;
}

cJSON *srv_embed_body(const srv_embed *e, const char *model_name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < e->n_in; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", i);
        char *t = format_vec(e->vec + (size_t)i * (size_t)e->n_embd, e->n_embd, e->base64);
        if (!t) {
            cJSON_Delete(d);
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddItemToObject(d, "embedding", e->base64 ? cJSON_CreateString(t) : cJSON_CreateRaw(t));
        free(t);
        cJSON_AddItemToArray(data, d);
    }
    cJSON_AddStringToObject(o, "model", model_name);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)e->n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)e->n_tokens);
    return o;
}
