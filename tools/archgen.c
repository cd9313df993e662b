/*
 * archgen — seeded random-weight GGUF test models, one per architecture family.
 *
 *   archgen -o DIR [--vocab-from FILE.gguf] [--seed N] [NAME...]   write DIR/<NAME>.gguf
 *   archgen --list                                                 NAME, architecture, what it exercises
 *
 * Every family in the table at the end of this file gets one small file (F32,
 * 2-4 MB, a forward pass takes milliseconds) with exactly the GGUF keys and
 * tensors llama.cpp's loader expects for that architecture (src/llama-arch.cpp,
 * src/llama-model.cpp, src/models/<family>.cpp and the converters in
 * conversion/ of the llama.cpp tree cinfer is checked against), the
 * tokenizer of ../shared/models/stories260K/stories260K.gguf (every tokenizer.*
 * key copied verbatim, so prompts tokenize alike in every file) and
 * context_length 512.  tests/data/arch/ holds llama.cpp's outputs for these
 * files and the sha256 of each (tests/data/arch/README.md).
 *
 * Determinism: the files are compared byte for byte with the committed
 * sha256s on every machine, so no value may depend on the libm, the compiler
 * or its flags.  Weights come from xoshiro256** seeded by splitmix64 from
 * (seed, family, tensor name); normals are Irwin-Hall sums of twelve 16-bit
 * uniforms (exact in double), scaled by a double std and rounded once to
 * float (volatile temporaries keep compilers from fusing the multiply-add).
 * The only libm function used is sqrt (of the fan-in), which IEEE 754
 * requires to be correctly rounded, so it is the same everywhere.
 *
 * Weight scales (chosen so logits are O(1), attention is far from uniform,
 * routers pick different experts per token and greedy continuations do not
 * collapse into one repeated token): every matrix has std 1/sqrt(row length)
 * ("fan-in"), so each projection keeps its input's scale; q/k x QK_S;
 * residual-branch outputs x g->out_s (branch_scale); norms 1 + N(0, 0.1^2),
 * post-branch norms g->post_mean times that (pnorm); biases N(0, 0.3^2);
 * routers std 2/sqrt(row length); token embeddings N(0, 0.5^2), or
 * N(0, 0.09^2) when the output is tied.  Families deviate where a feature
 * would otherwise not show (clamps, soft-caps, ternary weights, multipliers);
 * the family functions say so.  tests/data/arch/README.md has the reasons and
 * the measured logit statistics.
 *
 * C11, libc and sqrt from libm.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ==== GGUF constants ========================================================== */

enum { GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32,
       GGUF_BOOL, GGUF_STR, GGUF_ARR, GGUF_U64, GGUF_I64, GGUF_F64 };
#define GGUF_ALIGN 32       /* default alignment; general.alignment is not written */
#define GGML_TYPE_F32 0

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("archgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ==== PRNG and value fills ==================================================== */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
typedef struct { uint64_t s[4]; } rng_t;
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xoshiro(rng_t *r) { /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return res;
}
static uint64_t fnv1a(uint64_t h, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) { h ^= *p; h *= 0x100000001b3ull; }
    return h;
}
/* one stream per (seed, family, tensor name) */
static void rng_init(rng_t *r, uint64_t seed, const char *family, const char *tensor) {
    uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, family), "/");
    uint64_t sm = seed ^ fnv1a(h, tensor);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&sm);
}
/* Irwin-Hall: the sum of 12 uniform 16-bit integers, centred and scaled to
 * variance ~1 (range about +-6).  Exact in double. */
static double rng_normal(rng_t *r) {
    int64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t v = xoshiro(r);
        sum += (int64_t)(v & 0xffff) + (int64_t)((v >> 16) & 0xffff) + (int64_t)((v >> 32) & 0xffff) +
               (int64_t)(v >> 48);
    }
    return (double)(2 * sum - 786420) / 131072.0; /* (sum - 12*65535/2) / 65536 */
}
/* uniform integer in [0, n) (n small; the modulo bias is irrelevant here) */
static uint32_t rng_below(rng_t *r, uint32_t n) { return (uint32_t)((xoshiro(r) >> 32) % n); }

/* 1/sqrt(n): IEEE 754 requires sqrt and division to be correctly rounded, so
 * this is the same double everywhere (the only libm call in this file). */
static double inv_sqrt_u(uint64_t n) { return 1.0 / sqrt((double)n); }

/* ==== byte buffer ============================================================= */

typedef struct { uint8_t *p; size_t n, cap; } buf_t;
static void put(buf_t *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 1024;
        b->p = realloc(b->p, b->cap);
        if (!b->p) die("out of memory");
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf_t *b, uint32_t v) { uint8_t c[4] = {v, v >> 8, v >> 16, v >> 24}; put(b, c, 4); }
static void put_u64(buf_t *b, uint64_t v) { put_u32(b, (uint32_t)v); put_u32(b, (uint32_t)(v >> 32)); }
static void put_f32(buf_t *b, float f) { uint32_t u; memcpy(&u, &f, 4); put_u32(b, u); }
static void put_str(buf_t *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }

/* ==== tokenizer copy ========================================================== */

typedef struct { const uint8_t *p, *end; } rd_t;
static void need(rd_t *r, uint64_t n) { if ((uint64_t)(r->end - r->p) < n) die("vocab file: truncated GGUF"); }
static uint32_t rd_u32(rd_t *r) {
    need(r, 4);
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}
static uint64_t rd_u64(rd_t *r) { uint64_t lo = rd_u32(r); return lo | (uint64_t)rd_u32(r) << 32; }
static void skip_value(rd_t *r, uint32_t type, int depth) {
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (depth > 4) die("vocab file: arrays nested too deep");
    if (type == GGUF_STR) { uint64_t n = rd_u64(r); need(r, n); r->p += n; return; }
    if (type == GGUF_ARR) {
        uint32_t et = rd_u32(r);
        uint64_t n = rd_u64(r);
        if (et > GGUF_F64) die("vocab file: bad array element type %u", et);
        if (et == GGUF_STR || et == GGUF_ARR) { for (uint64_t i = 0; i < n; i++) skip_value(r, et, depth + 1); return; }
        if (n > (uint64_t)(r->end - r->p) / (uint64_t)sz[et]) die("vocab file: truncated array");
        r->p += n * (uint64_t)sz[et];
        return;
    }
    if (type > GGUF_F64) die("vocab file: bad value type %u", type);
    need(r, (uint64_t)sz[type]);
    r->p += sz[type];
}

typedef struct { buf_t kv; uint64_t n_kv; uint32_t n_vocab; } vocab_t;

/* every tokenizer.* key/value of the file, verbatim; n_vocab from tokenizer.ggml.tokens */
static void load_vocab(const char *path, vocab_t *v) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open vocabulary file '%s'", path);
    if (fseek(f, 0, SEEK_END) != 0) die("cannot seek '%s'", path);
    long sz = ftell(f);
    if (sz <= 0 || fseek(f, 0, SEEK_SET) != 0) die("cannot size '%s'", path);
    uint8_t *data = malloc((size_t)sz);
    if (!data || fread(data, 1, (size_t)sz, f) != (size_t)sz) die("cannot read '%s'", path);
    fclose(f);
    rd_t r = {data, data + sz};
    if (rd_u32(&r) != 0x46554747u) die("'%s' is not a GGUF file", path);
    uint32_t ver = rd_u32(&r);
    if (ver != 2 && ver != 3) die("'%s': GGUF version %u (need 2 or 3)", path, ver);
    (void)rd_u64(&r);
    uint64_t n_kv = rd_u64(&r);
    memset(v, 0, sizeof *v);
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint8_t *start = r.p;
        uint64_t klen = rd_u64(&r);
        need(&r, klen);
        const char *key = (const char *)r.p;
        r.p += klen;
        uint32_t type = rd_u32(&r);
        const uint8_t *val = r.p;
        skip_value(&r, type, 0);
        if (klen >= 10 && !memcmp(key, "tokenizer.", 10)) {
            put(&v->kv, start, (size_t)(r.p - start));
            v->n_kv++;
            if (klen == 21 && !memcmp(key, "tokenizer.ggml.tokens", 21) && type == GGUF_ARR) {
                rd_t a = {val + 4, r.end};
                v->n_vocab = (uint32_t)rd_u64(&a);
            }
        }
    }
    free(data);
    if (!v->n_vocab) die("'%s' has no tokenizer.ggml.tokens array", path);
}

/* ==== the model being built =================================================== */

enum { FILL_NORMAL, FILL_SSM_A, FILL_TERNARY, FILL_VALUES };

typedef struct {
    char name[96];
    int nd;
    uint64_t ne[4];     /* GGUF order: ne[0] is the row length */
    int fill;
    double mean, std;   /* FILL_NORMAL: mean + std z; FILL_SSM_A: jitter std; FILL_TERNARY: scale */
    uint64_t period;    /* FILL_SSM_A */
    float *values;      /* FILL_VALUES: explicit data (owned) */
    uint64_t off;
} tensor_t;

typedef struct {
    const char *family;   /* file stem */
    const char *arch;     /* general.architecture, prefix of the arch keys */
    uint64_t seed;
    const vocab_t *vocab;
    buf_t kv;
    uint64_t n_kv;
    tensor_t *t;
    int n_t, cap_t;
    uint32_t n_vocab;
    double out_s;         /* std multiplier of the residual-branch output projections (branch_scale) */
    double post_mean;     /* mean of post-branch norm weights (pnorm) */
} gen_t;

/* ---- keys ---- */
static const char *akey(gen_t *g, const char *k, char *buf, size_t cap) {
    if (!strncmp(k, "general.", 8) || !strncmp(k, "tokenizer.", 10) || !strncmp(k, "xielu.", 6)) return k;
    snprintf(buf, cap, "%s.%s", g->arch, k);
    return buf;
}
static void key_hdr(gen_t *g, const char *k, uint32_t type) {
    char b[160];
    put_str(&g->kv, akey(g, k, b, sizeof b));
    put_u32(&g->kv, type);
    g->n_kv++;
}
static void k_u32(gen_t *g, const char *k, uint32_t v) { key_hdr(g, k, GGUF_U32); put_u32(&g->kv, v); }
static void k_f32(gen_t *g, const char *k, float v) { key_hdr(g, k, GGUF_F32); put_f32(&g->kv, v); }
static void k_bool(gen_t *g, const char *k, int v) { uint8_t c = v != 0; key_hdr(g, k, GGUF_BOOL); put(&g->kv, &c, 1); }
static void k_str(gen_t *g, const char *k, const char *v) { key_hdr(g, k, GGUF_STR); put_str(&g->kv, v); }
static void k_arr_u32(gen_t *g, const char *k, const uint32_t *v, int n) {
    key_hdr(g, k, GGUF_ARR); put_u32(&g->kv, GGUF_U32); put_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++) put_u32(&g->kv, v[i]);
}
static void k_arr_bool(gen_t *g, const char *k, const int *v, int n) {
    key_hdr(g, k, GGUF_ARR); put_u32(&g->kv, GGUF_BOOL); put_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++) { uint8_t c = v[i] != 0; put(&g->kv, &c, 1); }
}
static void k_arr_f32(gen_t *g, const char *k, const float *v, int n) {
    key_hdr(g, k, GGUF_ARR); put_u32(&g->kv, GGUF_F32); put_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++) put_f32(&g->kv, v[i]);
}

/* ---- tensors ---- */
static tensor_t *t_add(gen_t *g, int nd, uint64_t a, uint64_t b, uint64_t c, const char *fmt, va_list ap) {
    if (g->n_t == g->cap_t) {
        g->cap_t = g->cap_t ? 2 * g->cap_t : 128;
        g->t = realloc(g->t, (size_t)g->cap_t * sizeof *g->t);
        if (!g->t) die("out of memory");
    }
    tensor_t *t = &g->t[g->n_t++];
    memset(t, 0, sizeof *t);
    int n = vsnprintf(t->name, sizeof t->name, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof t->name) die("%s: tensor name too long", g->family);
    for (int i = 0; i < g->n_t - 1; i++)
        if (!strcmp(g->t[i].name, t->name)) die("%s: tensor '%s' added twice", g->family, t->name);
    if (!a || !b || !c) die("%s: tensor '%s' has a zero dimension", g->family, t->name);
    t->nd = nd;
    t->ne[0] = a; t->ne[1] = b; t->ne[2] = c; t->ne[3] = 1;
    t->fill = FILL_NORMAL;
    return t;
}
#define T_VARARGS(nd, a, b, c) \
    va_list ap; va_start(ap, fmt); tensor_t *t = t_add(g, nd, a, b, c, fmt, ap); va_end(ap)

/* Residual-branch outputs (the projections that write into the residual
 * stream) get their std multiplied by g->out_s.  Each block normalises its
 * input, so this only sets how much the layers weigh against the token
 * embedding in the stream: with the embedding dominating, a random model's
 * next token is a function of the current one (and with a tied output, the
 * current token itself), and greedy continuations repeat. */
static double branch_scale(const gen_t *g, const char *name) {
    static const char *const outs[] = {".attn_output.weight", ".ffn_down.weight", ".ffn_down_shexp.weight",
                                       ".ffn_down_exps.weight", ".ssm_out.weight", ".shortconv.out_proj.weight",
                                       ".proj.weight"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        size_t k = strlen(outs[i]);
        if (n >= k && !strcmp(name + n - k, outs[i])) return g->out_s;
    }
    return 1.0;
}

/* weight matrix {in, out}: N(0, s^2 / in) */
__attribute__((format(printf, 5, 6)))
static tensor_t *mat_s(gen_t *g, double s, uint64_t in, uint64_t out, const char *fmt, ...) {
    T_VARARGS(2, in, out, 1);
    t->std = s * branch_scale(g, t->name) * inv_sqrt_u(in);
    return t;
}
#define mat(g, in, out, ...) mat_s(g, 1.0, in, out, __VA_ARGS__)
/* expert stack {in, out, n_expert}: N(0, s^2 / in) */
__attribute__((format(printf, 6, 7)))
static tensor_t *exps_s(gen_t *g, double s, uint64_t in, uint64_t out, uint64_t n_exp, const char *fmt, ...) {
    T_VARARGS(3, in, out, n_exp);
    t->std = s * branch_scale(g, t->name) * inv_sqrt_u(in);
    return t;
}
#define exps(g, in, out, n, ...) exps_s(g, 1.0, in, out, n, __VA_ARGS__)
/* norm weight: 1 + N(0, 0.1^2); n2 > 1 makes it 2-D {n, n2} */
__attribute__((format(printf, 4, 5)))
static tensor_t *norm2(gen_t *g, uint64_t n, uint64_t n2, const char *fmt, ...) {
    T_VARARGS(n2 > 1 ? 2 : 1, n, n2, 1);
    t->mean = 1.0; t->std = 0.1;
    return t;
}
#define norm(g, n, ...) norm2(g, n, 1, __VA_ARGS__)
/* q/k norm weights of the families whose attention scale is 1 (gemma3n,
 * gemma4: no 1/sqrt(head_dim)): 0.4 * (1 + N(0, 0.1^2)), so scores have std
 * ~0.16 sqrt(head_dim) (~1), not sqrt(head_dim) */
__attribute__((format(printf, 3, 4)))
static tensor_t *qknorm(gen_t *g, uint64_t n, const char *fmt, ...) {
    T_VARARGS(1, n, 1, 1);
    t->mean = 0.4; t->std = 0.04;
    return t;
}
/* post-branch norm weight (applied to a branch's output before the residual
 * add): g->post_mean * (1 + N(0, 0.1^2)), the post-norm form of branch_scale */
__attribute__((format(printf, 3, 4)))
static tensor_t *pnorm(gen_t *g, uint64_t n, const char *fmt, ...) {
    T_VARARGS(1, n, 1, 1);
    t->mean = g->post_mean; t->std = 0.1 * g->post_mean;
    return t;
}
/* 1-D vector N(mean, std^2) (biases, scales) */
__attribute__((format(printf, 5, 6)))
static tensor_t *vec(gen_t *g, uint64_t n, double mean, double std, const char *fmt, ...) {
    T_VARARGS(1, n, 1, 1);
    t->mean = mean; t->std = std;
    return t;
}
#define BIAS_STD 0.3
#define bias(g, n, ...) vec(g, n, 0.0, BIAS_STD, __VA_ARGS__)
/* any shape N(mean, std^2) */
__attribute__((format(printf, 8, 9)))
static tensor_t *dense(gen_t *g, int nd, uint64_t a, uint64_t b, uint64_t c, double mean, double std, const char *fmt, ...) {
    T_VARARGS(nd, a, b, c);
    t->mean = mean; t->std = std;
    return t;
}
/* SSM decay A (stored as -exp(A_log)): -(1 + i % period) * (1 + N(0, 0.05^2)), always negative */
__attribute__((format(printf, 6, 7)))
static tensor_t *ssm_a(gen_t *g, int nd, uint64_t a, uint64_t b, uint64_t period, const char *fmt, ...) {
    T_VARARGS(nd, a, b, 1);
    t->fill = FILL_SSM_A; t->std = 0.05; t->period = period;
    return t;
}
/* BitNet b1.58 weight {in, out}: each value -s, 0 or +s (uniform), s = 1.6/sqrt(in)
 * (so the std, s*sqrt(2/3), is about 1.3/sqrt(in)) */
__attribute__((format(printf, 4, 5)))
static tensor_t *ternary(gen_t *g, uint64_t in, uint64_t out, const char *fmt, ...) {
    T_VARARGS(2, in, out, 1);
    t->fill = FILL_TERNARY; t->std = 1.6 * branch_scale(g, t->name) * inv_sqrt_u(in);
    return t;
}
/* explicit values (copied) */
__attribute__((format(printf, 5, 6)))
static tensor_t *values(gen_t *g, uint64_t n, uint64_t n2, const float *v, const char *fmt, ...) {
    T_VARARGS(n2 > 1 ? 2 : 1, n, n2, 1);
    t->fill = FILL_VALUES;
    t->values = malloc((size_t)(n * n2) * sizeof(float));
    if (!t->values) die("out of memory");
    memcpy(t->values, v, (size_t)(n * n2) * sizeof(float));
    return t;
}

static void fill_tensor(const gen_t *g, const tensor_t *t, float *x, uint64_t n) {
    rng_t r;
    rng_init(&r, g->seed, g->family, t->name);
    for (uint64_t i = 0; i < n; i++) {
        switch (t->fill) {
        case FILL_NORMAL: {
            volatile double z = t->std * rng_normal(&r); /* volatile: no fused multiply-add */
            x[i] = (float)(t->mean + z);
            break;
        }
        case FILL_SSM_A: {
            volatile double z = t->std * rng_normal(&r);
            volatile double u = 1.0 + z;
            x[i] = (float)(-(double)(1 + i % t->period) * u);
            break;
        }
        case FILL_TERNARY: {
            uint32_t q = rng_below(&r, 3);
            x[i] = (float)((double)((int)q - 1) * t->std);
            break;
        }
        case FILL_VALUES: x[i] = t->values[i]; break;
        }
    }
}

/* ==== family building blocks ================================================== */

/* the hyperparameters most families share (GGUF names) */
typedef struct {
    uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    float rope_base, eps;
} hp_t;

#define N_CTX 512
#define L(fmt) "blk.%d." fmt

/* general.*, block_count .. head_count_kv, rope base/dims, norm eps; key_length/value_length
 * only when head_dim != n_embd / n_head */
enum { HP_RMS = 1, HP_LAYERNORM = 2, HP_NO_ROPE = 4, HP_NO_HEADS_KV = 8, HP_KEYLEN = 16, HP_NO_FF = 32 };
static void std_keys(gen_t *g, const hp_t *h, int flags) {
    k_u32(g, "block_count", h->n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", h->n_embd);
    if (!(flags & HP_NO_FF)) k_u32(g, "feed_forward_length", h->n_ff);
    k_u32(g, "attention.head_count", h->n_head);
    if (!(flags & HP_NO_HEADS_KV)) k_u32(g, "attention.head_count_kv", h->n_head_kv);
    if (!(flags & HP_NO_ROPE)) {
        k_f32(g, "rope.freq_base", h->rope_base);
        k_u32(g, "rope.dimension_count", h->n_rot);
    }
    if (flags & HP_LAYERNORM) k_f32(g, "attention.layer_norm_epsilon", h->eps);
    if (flags & HP_RMS) k_f32(g, "attention.layer_norm_rms_epsilon", h->eps);
    if ((flags & HP_KEYLEN) || (h->n_head && h->head_dim * h->n_head != h->n_embd)) {
        k_u32(g, "attention.key_length", h->head_dim);
        k_u32(g, "attention.value_length", h->head_dim);
    }
    k_u32(g, "vocab_size", g->n_vocab);
}
static hp_t hp_default(void) {
    return (hp_t){.n_embd = 128, .n_layer = 3, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 256,
                  .n_rot = 32, .rope_base = 10000.0f, .eps = 1e-5f};
}

/* token embedding {n_embd, n_vocab}: std 1 (untied) or tied_std (the output reuses it) */
static void tok_embd(gen_t *g, uint32_t n_embd, double std) {
    dense(g, 2, n_embd, g->n_vocab, 1, 0.0, std, "token_embd.weight");
}
#define EMBD_STD 0.5          /* untied */
#define TIED_EMBD_STD 0.09    /* tied output: logits = h . e with |h| ~ sqrt(n_embd) after the final norm: ~N(0, 1) */
static void output(gen_t *g, uint32_t n_embd) { mat(g, n_embd, g->n_vocab, "output.weight"); }

enum { ATT_QKV_BIAS = 1, ATT_O_BIAS = 2, ATT_QK_NORM = 4, ATT_FUSED = 8 };
/* q and k projections have std 1.3/sqrt(n_embd), so attention scores have std
 * ~1.7 (without q/k norms): attention is peaked, not an average over the
 * context (averaging makes every position alike and greedy runs repeat);
 * sharper still makes the models chaotic (a Q4_0 copy drifts far from F32) */
#define QK_S 1.3
/* q/k/v/o of one layer; q_dim = n_head * head_dim, kv_dim = n_head_kv * head_dim */
static void attn(gen_t *g, int l, uint32_t n_embd, uint32_t q_dim, uint32_t kv_dim, uint32_t head_dim, int flags) {
    if (flags & ATT_FUSED) {
        mat_s(g, QK_S, n_embd, q_dim + 2 * kv_dim, L("attn_qkv.weight"), l);
        if (flags & ATT_QKV_BIAS) bias(g, q_dim + 2 * kv_dim, L("attn_qkv.bias"), l);
    } else {
        mat_s(g, QK_S, n_embd, q_dim, L("attn_q.weight"), l);
        mat_s(g, QK_S, n_embd, kv_dim, L("attn_k.weight"), l);
        mat(g, n_embd, kv_dim, L("attn_v.weight"), l);
        if (flags & ATT_QKV_BIAS) {
            bias(g, q_dim, L("attn_q.bias"), l);
            bias(g, kv_dim, L("attn_k.bias"), l);
            bias(g, kv_dim, L("attn_v.bias"), l);
        }
    }
    mat(g, q_dim, n_embd, L("attn_output.weight"), l);
    if (flags & ATT_O_BIAS) bias(g, n_embd, L("attn_output.bias"), l);
    if (flags & ATT_QK_NORM) {
        norm(g, head_dim, L("attn_q_norm.weight"), l);
        norm(g, head_dim, L("attn_k_norm.weight"), l);
    }
}
/* gated FFN down(act(gate x) * up x); sfx "" or "_shexp" */
static void ffn_glu(gen_t *g, int l, const char *sfx, uint32_t n_embd, uint32_t n_ff) {
    char nm[64];
    snprintf(nm, sizeof nm, L("ffn_gate%s.weight"), l, sfx); mat(g, n_embd, n_ff, "%s", nm);
    snprintf(nm, sizeof nm, L("ffn_up%s.weight"), l, sfx);   mat(g, n_embd, n_ff, "%s", nm);
    snprintf(nm, sizeof nm, L("ffn_down%s.weight"), l, sfx); mat(g, n_ff, n_embd, "%s", nm);
}
/* non-gated FFN down(act(up x + b) + b) */
static void ffn_plain(gen_t *g, int l, uint32_t n_embd, uint32_t n_ff, int biases) {
    mat(g, n_embd, n_ff, L("ffn_up.weight"), l);
    if (biases) bias(g, n_ff, L("ffn_up.bias"), l);
    mat(g, n_ff, n_embd, L("ffn_down.weight"), l);
    if (biases) bias(g, n_embd, L("ffn_down.bias"), l);
}
#define ROUTER_STD 2.0   /* router logits ~N(0, 4): routing decisions differ from token to token */
/* router + gate/up/down expert stacks */
static void moe(gen_t *g, int l, uint32_t n_embd, uint32_t n_ff_exp, uint32_t n_exp, int gated) {
    mat_s(g, ROUTER_STD, n_embd, n_exp, L("ffn_gate_inp.weight"), l);
    if (gated) exps(g, n_embd, n_ff_exp, n_exp, L("ffn_gate_exps.weight"), l);
    exps(g, n_embd, n_ff_exp, n_exp, L("ffn_up_exps.weight"), l);
    exps(g, n_ff_exp, n_embd, n_exp, L("ffn_down_exps.weight"), l);
}
/* LayerNorm weight and bias; the final one's bias is small (it is a constant
 * logit offset W_out . b) */
static void layernorm(gen_t *g, uint32_t n, const char *base, int l) {
    char nm[80];
    if (l >= 0) snprintf(nm, sizeof nm, "blk.%d.%s", l, base);
    else snprintf(nm, sizeof nm, "%s", base);
    norm(g, n, "%s.weight", nm);
    vec(g, n, 0.0, l >= 0 ? BIAS_STD : 0.05, "%s.bias", nm);
}
/* YaRN rope scaling keys as the converters write them */
static void yarn(gen_t *g, float factor, uint32_t orig_ctx) {
    k_str(g, "rope.scaling.type", "yarn");
    k_f32(g, "rope.scaling.factor", factor);
    k_u32(g, "rope.scaling.original_context_length", orig_ctx);
}

/* ==== families ================================================================ */
static void llama_block(gen_t *g, int l, const hp_t *h, int att_flags);
static void llama_like(gen_t *g, const hp_t *h, int hp_flags, int att_flags, int tied);
/* Each function writes the keys (besides general.* and tokenizer.*) and the
 * tensors of one family, named and shaped as llama.cpp's loader expects. */

/* llama: Llama 2 / Mistral style: GQA, NORM RoPE, SwiGLU, untied output */
static void fam_llama(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    llama_like(g, &h, HP_RMS, 0, 0);
}

/* llama3: Llama 3.1+ style: RoPE base 5e5 with rope_freqs (per-dimension
 * frequency divisors, what llama 3.1+ GGUFs carry): 1 for the fast half of
 * the rotary pairs, rising linearly to 8 for the slowest quarter (the shape
 * of llama 3.1's factors) */
static void fam_llama3(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 500000.0f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = i < 8 ? 1.0f : i >= 12 ? 8.0f : (float)(1.0 + 7.0 * (i - 7) / 5.0);
    values(g, h.n_rot / 2, 1, f, "rope_freqs.weight");
    for (int l = 0; l < (int)h.n_layer; l++) llama_block(g, l, &h, 0);
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* qwen2: q/k/v biases, NEOX RoPE, GQA, untied */
static void fam_qwen2(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* qwen3: per-head q/k RMS norm, head_dim 64 != n_embd / n_head, tied output */
static void fam_qwen3(gen_t *g) {
    hp_t h = hp_default();
    h.head_dim = h.n_rot = 64;
    h.rope_base = 1000000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* gemma: embeddings x sqrt(n_embd), MQA (1 kv head), head_dim 64 (key_length), GELU, tied */
static void fam_gemma(gen_t *g) {
    g->out_s = 8.0; /* the embedding is scaled by sqrt(n_embd): layers must outweigh it */
    hp_t h = hp_default();
    h.n_head_kv = 1;
    h.head_dim = h.n_rot = 64;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* gemma2: attention and final logit soft-caps (set low, 8 and 5, so that they
 * bend the values these weights produce), sliding window 8 on every other layer
 * (even layers), post-attention and post-FFN norms, GELU, tied */
static void fam_gemma2(gen_t *g) {
    g->post_mean = 5.0;
    hp_t h = hp_default();
    h.n_layer = 4;
    h.head_dim = h.n_rot = 64;
    h.n_ff = 128;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    k_u32(g, "attention.sliding_window", 8);
    k_f32(g, "attn_logit_softcapping", 8.0f);
    k_f32(g, "final_logit_softcapping", 5.0f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        pnorm(g, h.n_embd, L("post_attention_norm.weight"), l);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
        pnorm(g, h.n_embd, L("post_ffw_norm.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* gemma3: 5 local : 1 global layers (window 8), RoPE base 1e6 global / 1e4 local,
 * per-head q/k norm, post norms, GELU, tied */
static void fam_gemma3(gen_t *g) {
    g->post_mean = 4.0;
    hp_t h = hp_default();
    h.n_layer = 6;
    h.n_ff = 128;
    h.head_dim = h.n_rot = 32;
    h.rope_base = 1000000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    k_u32(g, "attention.sliding_window", 8);
    k_f32(g, "rope.freq_base_swa", 10000.0f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        pnorm(g, h.n_embd, L("post_attention_norm.weight"), l);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
        pnorm(g, h.n_embd, L("post_ffw_norm.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* phi3: fused attn_qkv (q | k | v rows) and fused ffn_up (gate | up rows), NEOX RoPE */
static void fam_phi3(gen_t *g) {
    hp_t h = hp_default();
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, ATT_FUSED);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        mat(g, h.n_embd, 2 * h.n_ff, L("ffn_up.weight"), l);
        mat(g, h.n_ff, h.n_embd, L("ffn_down.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* granite multipliers: embedding_scale, residual_scale, logit_scale as granite
 * 3.0; attention.scale 0.25 instead of its 1/128 (which with random q/k makes
 * attention uniform), still unlike the default 1/sqrt(head_dim) */
static void granite_keys(gen_t *g) {
    k_f32(g, "embedding_scale", 12.0f);
    k_f32(g, "residual_scale", 0.22f);
    k_f32(g, "attention.scale", 0.25f);
    k_f32(g, "logit_scale", 8.0f);
}
/* the output of the granite families: logits are divided by logit_scale 8 */
static void granite_output(gen_t *g, uint32_t n_embd) { mat_s(g, 8.0, n_embd, g->n_vocab, "output.weight"); }
/* granite: the four granite multipliers (granite 3.0 values), NORM RoPE.  Untied
 * (real granite ties it): with a tied output the x12 embedding would dominate
 * and the model would repeat its input token */
static void fam_granite(gen_t *g) {
    g->out_s = 4.0; /* x residual_scale 0.22 */
    hp_t h = hp_default();
    std_keys(g, &h, HP_RMS);
    granite_keys(g);
    tok_embd(g, h.n_embd, 0.1); /* x embedding_scale 12 */
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
    granite_output(g, h.n_embd);
}

/* starcoder2: LayerNorm with bias, biases on q/k/v/o and the non-gated GELU FFN */
static void fam_starcoder2(gen_t *g) {
    hp_t h = hp_default();
    h.n_ff = 384;
    std_keys(g, &h, HP_LAYERNORM);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS | ATT_O_BIAS);
        layernorm(g, h.n_embd, "ffn_norm", l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 1);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* gpt2: learned absolute positions, fused qkv with bias, MHA, LayerNorms, GELU */
static void fam_gpt2(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_ff = 384;
    std_keys(g, &h, HP_LAYERNORM | HP_NO_ROPE);
    tok_embd(g, h.n_embd, EMBD_STD);
    dense(g, 2, h.n_embd, N_CTX, 1, 0.0, EMBD_STD, "position_embd.weight");
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_FUSED | ATT_QKV_BIAS | ATT_O_BIAS);
        layernorm(g, h.n_embd, "ffn_norm", l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 1);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* ---- mixture of experts (issue 17) ---- */

/* llama-moe: Mixtral style, llama arch with 8 experts, top-2, softmax then
 * renormalised over the chosen 2 */
static void fam_llama_moe(gen_t *g) {
    hp_t h = hp_default();
    h.n_ff = 32;
    h.rope_base = 1000000.0f;
    std_keys(g, &h, HP_RMS);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 2);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, h.n_ff, 8, 1);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* qwen2moe: q/k/v biases, 8 experts top-4 softmax without renormalisation, a
 * shared expert scaled by sigmoid(ffn_gate_inp_shexp . x) */
static void fam_qwen2moe(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 4);
    k_u32(g, "expert_feed_forward_length", 32);
    k_u32(g, "expert_shared_feed_forward_length", 64);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, 32, 8, 1);
        mat_s(g, ROUTER_STD, h.n_embd, 1, L("ffn_gate_inp_shexp.weight"), l)->nd = 1;
        ffn_glu(g, l, "_shexp", h.n_embd, 64);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* qwen3moe: per-head q/k norm, head_dim 64, 16 experts top-4 softmax renormalised */
static void fam_qwen3moe(gen_t *g) {
    hp_t h = hp_default();
    h.head_dim = h.n_rot = 64;
    h.n_ff = 256;
    h.rope_base = 1000000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS);
    k_u32(g, "expert_count", 16);
    k_u32(g, "expert_used_count", 4);
    k_u32(g, "expert_feed_forward_length", 32);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, 32, 16, 1);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* granitemoe: granite multipliers on Mixtral-style experts (8, top-2) plus a
 * shared expert (granite MoE shared), untied */
static void fam_granitemoe(gen_t *g) {
    g->out_s = 4.0; /* x residual_scale 0.22 */
    hp_t h = hp_default();
    h.n_ff = 32;
    std_keys(g, &h, HP_RMS);
    granite_keys(g);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_shared_feed_forward_length", 64);
    tok_embd(g, h.n_embd, 0.1); /* x embedding_scale 12 */
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, h.n_ff, 8, 1);
        ffn_glu(g, l, "_shexp", h.n_embd, 64);
    }
    norm(g, h.n_embd, "output_norm.weight");
    granite_output(g, h.n_embd);
}

/* olmoe: q/k RMS norm over the whole projection (n_embd / kv width, not per
 * head), 8 experts top-2 softmax without renormalisation, MHA */
static void fam_olmoe(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_ff = 32;
    std_keys(g, &h, HP_RMS);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 2);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, 0);
        norm(g, h.n_embd, L("attn_q_norm.weight"), l);
        norm(g, h.n_embd, L("attn_k_norm.weight"), l);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, h.n_ff, 8, 1);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* MLA attention of one deepseek2 layer in the split form current converters
 * write (attn_k_b / attn_v_b, key_length_mla); q_lora 0 = direct attn_q; q_s:
 * std multiplier of the query projection (QK_S sharpens attention) */
static void mla(gen_t *g, int l, uint32_t n_embd, uint32_t n_head, uint32_t q_lora, uint32_t kv_lora,
                uint32_t rope, uint32_t nope, uint32_t v_dim, double q_s) {
    if (q_lora) {
        norm(g, q_lora, L("attn_q_a_norm.weight"), l);
        mat(g, n_embd, q_lora, L("attn_q_a.weight"), l);
        mat_s(g, q_s, q_lora, n_head * (nope + rope), L("attn_q_b.weight"), l);
    } else {
        mat_s(g, q_s, n_embd, n_head * (nope + rope), L("attn_q.weight"), l);
    }
    norm(g, kv_lora, L("attn_kv_a_norm.weight"), l);
    mat(g, n_embd, kv_lora + rope, L("attn_kv_a_mqa.weight"), l);
    /* k_b {nope, kv_lora, n_head} maps the latent to each head's k_nope (as its
     * transpose, for the absorbed form); v_b {kv_lora, v_dim, n_head} to v */
    dense(g, 3, nope, kv_lora, n_head, 0.0, inv_sqrt_u(kv_lora), L("attn_k_b.weight"), l);
    exps(g, kv_lora, v_dim, n_head, L("attn_v_b.weight"), l);
    mat(g, n_head * v_dim, n_embd, L("attn_output.weight"), l);
}
static void mla_keys(gen_t *g, uint32_t q_lora, uint32_t kv_lora, uint32_t rope, uint32_t nope, uint32_t v_dim) {
    if (q_lora) k_u32(g, "attention.q_lora_rank", q_lora);
    k_u32(g, "attention.kv_lora_rank", kv_lora);
    k_u32(g, "attention.key_length", kv_lora + rope);
    k_u32(g, "attention.value_length", kv_lora);
    k_u32(g, "attention.key_length_mla", nope + rope);
    k_u32(g, "attention.value_length_mla", v_dim);
    k_u32(g, "rope.dimension_count", rope);
}

/* deepseek2: DeepSeek-V3 / Kimi-K2 style.  MLA with q LoRA; leading dense layer;
 * 8 routed experts in 4 groups (top-2 groups, top-2 experts), sigmoid scores,
 * exp_probs_b selection bias, weights renormalised and x2.5, one shared expert;
 * YaRN (factor 4, original context 128) with the mscale folded into the
 * attention scale */
static void fam_deepseek2(gen_t *g) {
    const uint32_t d = 128, n_head = 4, q_lora = 64, kv_lora = 64, rope = 16, nope = 32, v_dim = 32;
    const uint32_t n_layer = 3, n_exp = 8, ff_exp = 32;
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", 256);
    k_u32(g, "attention.head_count", n_head);
    k_u32(g, "attention.head_count_kv", 1);
    k_f32(g, "rope.freq_base", 10000.0f);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f);
    k_u32(g, "vocab_size", g->n_vocab);
    k_u32(g, "leading_dense_block_count", 1);
    mla_keys(g, q_lora, kv_lora, rope, nope, v_dim);
    k_u32(g, "expert_feed_forward_length", ff_exp);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_group_count", 4);
    k_u32(g, "expert_group_used_count", 2);
    k_u32(g, "expert_shared_count", 1);
    k_f32(g, "expert_weights_scale", 2.5f);
    k_bool(g, "expert_weights_norm", 1);
    k_u32(g, "expert_gating_func", 2);
    yarn(g, 4.0f, 128);
    k_f32(g, "rope.scaling.yarn_log_multiplier", 0.1f);
    tok_embd(g, d, EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        mla(g, l, d, n_head, q_lora, kv_lora, rope, nope, v_dim, 1.0); /* YaRN's mscale^2 already sharpens */
        norm(g, d, L("ffn_norm.weight"), l);
        if (l < 1) {
            ffn_glu(g, l, "", d, 256);
            continue;
        }
        moe(g, l, d, ff_exp, n_exp, 1);
        vec(g, n_exp, 0.0, 1.0, L("exp_probs_b.bias"), l);
        ffn_glu(g, l, "_shexp", d, ff_exp);
    }
    norm(g, d, "output_norm.weight");
    output(g, d);
}

/* deepseek2-lite: DeepSeek-V2-Lite style.  llama.cpp picks the direct-q ("lite")
 * attention by block count (26 or 27), so 26 thin layers; MLA without q LoRA;
 * 24 leading dense layers, then 8 experts top-2 softmax (not renormalised) and
 * 2 shared experts; plain RoPE */
static void fam_deepseek2_lite(gen_t *g) {
    const uint32_t d = 64, n_head = 2, kv_lora = 32, rope = 16, nope = 32, v_dim = 32;
    const uint32_t n_layer = 26, n_dense = 24, n_exp = 8, ff_exp = 32, n_ff = 32;
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", n_ff);
    k_u32(g, "attention.head_count", n_head);
    k_u32(g, "attention.head_count_kv", 1);
    k_f32(g, "rope.freq_base", 10000.0f);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f);
    k_u32(g, "vocab_size", g->n_vocab);
    k_u32(g, "leading_dense_block_count", n_dense);
    mla_keys(g, 0, kv_lora, rope, nope, v_dim);
    k_u32(g, "expert_feed_forward_length", ff_exp);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_shared_count", 2);
    k_f32(g, "expert_weights_scale", 1.0f);
    k_u32(g, "expert_gating_func", 1);
    tok_embd(g, d, EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        mla(g, l, d, n_head, 0, kv_lora, rope, nope, v_dim, QK_S);
        norm(g, d, L("ffn_norm.weight"), l);
        if (l < (int)n_dense) {
            ffn_glu(g, l, "", d, n_ff);
            continue;
        }
        moe(g, l, d, ff_exp, n_exp, 1);
        ffn_glu(g, l, "_shexp", d, 2 * ff_exp);
    }
    norm(g, d, "output_norm.weight");
    output(g, d);
}

/* gpt-oss: attention sinks, sliding window 8 on even layers, q/k/v/o biases,
 * head_dim 64 (q width 256 != n_embd), YaRN (factor 32, original 4096, base
 * 150000), post-attention norm before the experts, 8 experts top-2 with router
 * and expert biases, softmax over the selected logits, clamped SwiGLU
 * (alpha 1.702, limit 7: gate/up experts have std 3 so the clamp is hit).
 * F32 here; MXFP4 experts come later. */
static void fam_gpt_oss(gen_t *g) {
    hp_t h = hp_default();
    h.n_layer = 4;
    h.head_dim = h.n_rot = 64;
    h.rope_base = 150000.0f;
    h.n_ff = 32;
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_feed_forward_length", h.n_ff);
    k_u32(g, "attention.sliding_window", 8);
    yarn(g, 32.0f, 4096);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS | ATT_O_BIAS);
        vec(g, h.n_head, 0.5, 1.0, L("attn_sinks.weight"), l);
        norm(g, h.n_embd, L("post_attention_norm.weight"), l);
        mat_s(g, ROUTER_STD, h.n_embd, 8, L("ffn_gate_inp.weight"), l);
        vec(g, 8, 0.0, 1.0, L("ffn_gate_inp.bias"), l);
        exps_s(g, 3.0, h.n_embd, h.n_ff, 8, L("ffn_gate_exps.weight"), l);
        exps_s(g, 3.0, h.n_embd, h.n_ff, 8, L("ffn_up_exps.weight"), l);
        exps_s(g, 0.3, h.n_ff, h.n_embd, 8, L("ffn_down_exps.weight"), l);
        dense(g, 2, h.n_ff, 8, 1, 0.0, BIAS_STD, L("ffn_gate_exps.bias"), l);
        dense(g, 2, h.n_ff, 8, 1, 0.0, BIAS_STD, L("ffn_up_exps.bias"), l);
        dense(g, 2, h.n_embd, 8, 1, 0.0, BIAS_STD, L("ffn_down_exps.bias"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* glm4moe: GLM-4.5-Air style.  Partial rotary (16 of 32 dims, NEOX), q/k/v
 * biases, leading dense layer, 8 experts top-2, sigmoid + exp_probs_b,
 * renormalised x2.5, one shared expert, post-attention norm as the FFN norm;
 * one NextN/MTP layer (blk.3, nextn_predict_layers 1) that inference skips */
static void fam_glm4moe(gen_t *g) {
    hp_t h = hp_default();
    h.n_layer = 3;
    h.n_rot = 16;
    const uint32_t n_exp = 8, ff_exp = 32, n_all = h.n_layer + 1;
    h.n_ff = 128;
    hp_t hk = h;
    hk.n_layer = n_all;
    std_keys(g, &hk, HP_RMS);
    k_u32(g, "nextn_predict_layers", 1);
    k_u32(g, "leading_dense_block_count", 1);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_feed_forward_length", ff_exp);
    k_u32(g, "expert_shared_count", 1);
    k_f32(g, "expert_weights_scale", 2.5f);
    k_bool(g, "expert_weights_norm", 1);
    k_u32(g, "expert_gating_func", 2);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)n_all; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS);
        norm(g, h.n_embd, L("post_attention_norm.weight"), l);
        if (l < 1) {
            ffn_glu(g, l, "", h.n_embd, h.n_ff);
        } else {
            moe(g, l, h.n_embd, ff_exp, n_exp, 1);
            vec(g, n_exp, 0.0, 1.0, L("exp_probs_b.bias"), l);
            ffn_glu(g, l, "_shexp", h.n_embd, ff_exp);
        }
        if (l == (int)h.n_layer) { /* the MTP block */
            mat(g, 2 * h.n_embd, h.n_embd, L("nextn.eh_proj.weight"), l);
            norm(g, h.n_embd, L("nextn.enorm.weight"), l);
            norm(g, h.n_embd, L("nextn.hnorm.weight"), l);
            norm(g, h.n_embd, L("nextn.shared_head_norm.weight"), l);
        }
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* ---- state-space and linear-attention models (issue 18) ---- */

/* the ssm.* keys of a Mamba-2 mixer */
typedef struct { uint32_t d_inner, d_state, n_group, n_head, d_conv; } ssm2_t;
static void ssm2_keys(gen_t *g, const ssm2_t *m) {
    k_u32(g, "ssm.conv_kernel", m->d_conv);
    k_u32(g, "ssm.inner_size", m->d_inner);
    k_u32(g, "ssm.state_size", m->d_state);
    k_u32(g, "ssm.time_step_rank", m->n_head);
    k_u32(g, "ssm.group_count", m->n_group);
}
/* one Mamba-2 mixer: ssm_in -> [z | x B C | dt], causal conv over x B C, SSD
 * scan per head, gated grouped RMS norm, ssm_out.  dt bias N(-3, 1) (softplus
 * ~0.05: slow decay, long memory); A = -(1 + h % n_head) jittered */
static void ssm2(gen_t *g, int l, uint32_t n_embd, const ssm2_t *m, int with_norm) {
    const uint32_t conv_ch = m->d_inner + 2 * m->n_group * m->d_state;
    mat(g, n_embd, 2 * m->d_inner + 2 * m->n_group * m->d_state + m->n_head, L("ssm_in.weight"), l);
    mat(g, m->d_conv, conv_ch, L("ssm_conv1d.weight"), l);
    bias(g, conv_ch, L("ssm_conv1d.bias"), l);
    vec(g, m->n_head, -3.0, 1.0, L("ssm_dt.bias"), l);
    ssm_a(g, 2, 1, m->n_head, m->n_head, L("ssm_a"), l);
    norm2(g, 1, m->n_head, L("ssm_d"), l);
    if (with_norm) norm2(g, m->d_inner / m->n_group, m->n_group, L("ssm_norm.weight"), l);
    mat(g, m->d_inner, n_embd, L("ssm_out.weight"), l);
}

/* mamba: Mamba-1 selective scan (d_inner 256, state 16, dt_rank 32, conv 4),
 * tied.  (dt_rank is 32, not the usual n_embd/16 = 8: ssm_dt's rows must be a
 * multiple of the Q8_0/Q4_0 block for `cinfer quantize`, which has no F16
 * fallback for 32-block types; llama-quantize falls back to F16.) */
static void fam_mamba(gen_t *g) {
    const uint32_t d = 128, n_layer = 4, di = 256, ds = 16, dtr = 32, dc = 4;
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", 0);
    k_u32(g, "attention.head_count", 0);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    k_u32(g, "ssm.conv_kernel", dc);
    k_u32(g, "ssm.inner_size", di);
    k_u32(g, "ssm.state_size", ds);
    k_u32(g, "ssm.time_step_rank", dtr);
    k_bool(g, "ssm.dt_b_c_rms", 0);
    k_u32(g, "vocab_size", g->n_vocab);
    tok_embd(g, d, TIED_EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        mat(g, d, 2 * di, L("ssm_in.weight"), l);
        mat(g, dc, di, L("ssm_conv1d.weight"), l);
        bias(g, di, L("ssm_conv1d.bias"), l);
        mat(g, di, dtr + 2 * ds, L("ssm_x.weight"), l);
        mat(g, dtr, di, L("ssm_dt.weight"), l);
        vec(g, di, -3.0, 1.0, L("ssm_dt.bias"), l);
        ssm_a(g, 2, ds, di, ds, L("ssm_a"), l);
        norm(g, di, L("ssm_d"), l);
        mat(g, di, d, L("ssm_out.weight"), l);
    }
    norm(g, d, "output_norm.weight");
}

/* mamba2: SSD scan, 4 heads of 64, state 32, 2 groups, grouped RMS norm, tied */
static void fam_mamba2(gen_t *g) {
    const uint32_t d = 128, n_layer = 4;
    const ssm2_t m = {.d_inner = 256, .d_state = 32, .n_group = 2, .n_head = 4, .d_conv = 4};
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", 0);
    k_u32(g, "attention.head_count", 0);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    ssm2_keys(g, &m);
    k_u32(g, "vocab_size", g->n_vocab);
    tok_embd(g, d, TIED_EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        ssm2(g, l, d, &m, 1);
    }
    norm(g, d, "output_norm.weight");
}

/* qwen3next: 3 gated-DeltaNet layers then 1 full-attention layer
 * (full_attention_interval 4).  DeltaNet: attn_qkv (q, k: 2 heads of 32; v: 4
 * heads of 32) + attn_gate (z), short conv 4 over q|k|v, beta/alpha from ssm_ba,
 * decay A and dt bias per value head, gated RMS norm, ssm_out.  Attention:
 * gated (attn_q emits query and gate per head), per-head q/k norm, partial
 * rotary 16 of 64.  Every layer: post-attention norm, 8 experts top-2
 * renormalised plus a sigmoid-gated shared expert */
static void fam_qwen3next(gen_t *g) {
    const uint32_t d = 128, n_layer = 4, n_head = 4, n_head_kv = 2, hd = 64;
    const uint32_t hk = 32, n_k = 2, n_v = 4, hv = 32, dc = 4, n_exp = 8, ff_exp = 32, ff_sh = 32;
    const uint32_t key_dim = hk * n_k, value_dim = hv * n_v;
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", 256);
    k_u32(g, "attention.head_count", n_head);
    k_u32(g, "attention.head_count_kv", n_head_kv);
    k_u32(g, "attention.key_length", hd);
    k_u32(g, "attention.value_length", hd);
    k_f32(g, "rope.freq_base", 10000000.0f);
    k_u32(g, "rope.dimension_count", 16);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f);
    k_u32(g, "vocab_size", g->n_vocab);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_feed_forward_length", ff_exp);
    k_u32(g, "expert_shared_feed_forward_length", ff_sh);
    k_u32(g, "ssm.conv_kernel", dc);
    k_u32(g, "ssm.state_size", hk);
    k_u32(g, "ssm.group_count", n_k);
    k_u32(g, "ssm.time_step_rank", n_v);
    k_u32(g, "ssm.inner_size", value_dim);
    k_u32(g, "full_attention_interval", 4);
    tok_embd(g, d, EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        norm(g, d, L("post_attention_norm.weight"), l);
        if ((l + 1) % 4 == 0) {
            mat(g, d, 2 * n_head * hd, L("attn_q.weight"), l);
            mat(g, d, n_head_kv * hd, L("attn_k.weight"), l);
            mat(g, d, n_head_kv * hd, L("attn_v.weight"), l);
            mat(g, n_head * hd, d, L("attn_output.weight"), l);
            norm(g, hd, L("attn_q_norm.weight"), l);
            norm(g, hd, L("attn_k_norm.weight"), l);
        } else {
            mat(g, d, 2 * key_dim + value_dim, L("attn_qkv.weight"), l);
            mat(g, d, value_dim, L("attn_gate.weight"), l);
            mat(g, dc, 2 * key_dim + value_dim, L("ssm_conv1d.weight"), l);
            vec(g, n_v, 1.0, 1.0, L("ssm_dt.bias"), l);
            ssm_a(g, 1, n_v, 1, n_v, L("ssm_a"), l);
            mat(g, d, 2 * n_v, L("ssm_ba.weight"), l);
            norm(g, hv, L("ssm_norm.weight"), l);
            mat(g, value_dim, d, L("ssm_out.weight"), l);
        }
        moe(g, l, d, ff_exp, n_exp, 1);
        mat_s(g, ROUTER_STD, d, 1, L("ffn_gate_inp_shexp.weight"), l)->nd = 1;
        ffn_glu(g, l, "_shexp", d, ff_sh);
    }
    norm(g, d, "output_norm.weight");
    output(g, d);
}

/* granitehybrid: Granite 4.0-H style.  Mamba-2 layers (4 heads of 64, state 32,
 * 1 group) and one attention layer (blk.2; a layer is attention iff its
 * head_count_kv entry is non-zero), no RoPE (rope.scaling.finetuned false),
 * granite multipliers, every layer 8 experts top-2 + a shared expert, untied */
static void fam_granitehybrid(gen_t *g) {
    g->out_s = 4.0; /* x residual_scale 0.22 */
    const uint32_t d = 128, n_layer = 4, n_head = 4, n_head_kv = 2, hd = 32, n_exp = 8, ff = 32, ff_sh = 64;
    const ssm2_t m = {.d_inner = 256, .d_state = 32, .n_group = 1, .n_head = 4, .d_conv = 4};
    const uint32_t kv[4] = {0, 0, n_head_kv, 0};
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", ff);
    k_u32(g, "attention.head_count", n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, 4);
    k_u32(g, "attention.key_length", hd);
    k_u32(g, "attention.value_length", hd);
    k_f32(g, "rope.freq_base", 10000.0f);
    k_bool(g, "rope.scaling.finetuned", 0);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    k_u32(g, "vocab_size", g->n_vocab);
    granite_keys(g);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_shared_feed_forward_length", ff_sh);
    ssm2_keys(g, &m);
    tok_embd(g, d, 0.1); /* x embedding_scale 12 */
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        if (kv[l]) attn(g, l, d, n_head * hd, n_head_kv * hd, hd, 0);
        else ssm2(g, l, d, &m, 1);
        norm(g, d, L("ffn_norm.weight"), l);
        moe(g, l, d, ff, n_exp, 1);
        ffn_glu(g, l, "_shexp", d, ff_sh);
    }
    norm(g, d, "output_norm.weight");
    granite_output(g, d);
}

/* nemotron_h: Nemotron-H style layer pattern M - M * - (Mamba-2 with 2 groups
 * and grouped norm / ReLU^2 MLP / attention without RoPE), chosen by the
 * per-layer head_count_kv and feed_forward_length arrays (both 0 = Mamba) */
static void fam_nemotron_h(gen_t *g) {
    const uint32_t d = 128, n_layer = 5, n_head = 4, n_head_kv = 2, hd = 32, ff = 384;
    const ssm2_t m = {.d_inner = 256, .d_state = 32, .n_group = 2, .n_head = 4, .d_conv = 4};
    const uint32_t kv[5] = {0, 0, 0, n_head_kv, 0}, ffa[5] = {0, ff, 0, 0, ff};
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_arr_u32(g, "feed_forward_length", ffa, 5);
    k_u32(g, "attention.head_count", n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, 5);
    k_u32(g, "attention.key_length", hd);
    k_u32(g, "attention.value_length", hd);
    k_f32(g, "attention.layer_norm_epsilon", 1e-5f);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    k_u32(g, "vocab_size", g->n_vocab);
    ssm2_keys(g, &m);
    tok_embd(g, d, EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        if (kv[l]) attn(g, l, d, n_head * hd, n_head_kv * hd, hd, 0);
        else if (ffa[l]) ffn_plain(g, l, d, ff, 0);
        else ssm2(g, l, d, &m, 1);
    }
    norm(g, d, "output_norm.weight");
    output(g, d);
}

/* falcon-h1: every layer runs attention and a Mamba-2 mixer in parallel on the
 * same normed input (sum of both), then a gated FFN; NORM RoPE */
static void fam_falcon_h1(gen_t *g) {
    const uint32_t d = 128, n_layer = 3, n_head = 4, n_head_kv = 2, hd = 32, ff = 256;
    const ssm2_t m = {.d_inner = 128, .d_state = 32, .n_group = 1, .n_head = 2, .d_conv = 4};
    hp_t h = {.n_embd = d, .n_layer = n_layer, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd,
              .n_ff = ff, .n_rot = hd, .rope_base = 100000.0f, .eps = 1e-5f};
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    ssm2_keys(g, &m);
    tok_embd(g, d, EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        attn(g, l, d, n_head * hd, n_head_kv * hd, hd, 0);
        ssm2(g, l, d, &m, 1);
        /* this llama.cpp looks the FFN norm up as "blk.N.ffn_norm", without the
         * ".weight" suffix (models/falcon-h1.cpp, tn(LLM_TENSOR_FFN_NORM, i)) */
        norm(g, d, L("ffn_norm"), l);
        ffn_glu(g, l, "", d, ff);
    }
    norm(g, d, "output_norm.weight");
    output(g, d);
}

/* lfm2: LFM2 style.  Short-convolution layers (in_proj -> B, C, x; causal conv
 * of length 3 over B*x; C * conv; out_proj) and one attention layer (blk.2,
 * per-head q/k norm, GQA), gated FFN everywhere, final norm named
 * token_embd_norm, tied */
static void fam_lfm2(gen_t *g) {
    const uint32_t d = 128, n_layer = 4, n_head = 4, n_head_kv = 2, hd = 32, ff = 256, l_cache = 3;
    const uint32_t kv[4] = {0, 0, n_head_kv, 0};
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", ff);
    k_u32(g, "attention.head_count", n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, 4);
    k_f32(g, "rope.freq_base", 1000000.0f);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    k_u32(g, "vocab_size", g->n_vocab);
    k_u32(g, "shortconv.l_cache", l_cache);
    tok_embd(g, d, TIED_EMBD_STD);
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        if (kv[l]) {
            attn(g, l, d, n_head * hd, n_head_kv * hd, hd, ATT_QK_NORM);
        } else {
            mat(g, l_cache, d, L("shortconv.conv.weight"), l);
            mat(g, d, 3 * d, L("shortconv.in_proj.weight"), l);
            mat(g, d, d, L("shortconv.out_proj.weight"), l);
        }
        norm(g, d, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", d, ff);
    }
    norm(g, d, "token_embd_norm.weight");
}

/* ---- benchmark models (not test models: not in FAMILIES, no references) ---- */

/* The shape of `archgen --bench granitehybrid`: Granite-4.0-H-1B's layer
 * (n_embd 1536, Mamba-2 with 48 heads of 64, state 128, 1 group, conv 4;
 * attention with 12 heads of 128, 4 KV heads, NoPE; a dense SwiGLU FFN of
 * 4096) over 40 layers, one in ten attention; the flags below change it. */
static struct {
    uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, ssm_heads, ssm_state, attn_every;
} bench_shape = {1536, 40, 4096, 12, 4, 48, 128, 10};

static void fam_granitehybrid_bench(gen_t *g) {
    g->out_s = 4.0; /* x residual_scale 0.22, as granitehybrid */
    const uint32_t d = bench_shape.n_embd, L_ = bench_shape.n_layer, hd = d / bench_shape.n_head;
    const ssm2_t m = {.d_inner = 2 * d, .d_state = bench_shape.ssm_state, .n_group = 1,
                      .n_head = bench_shape.ssm_heads, .d_conv = 4};
    uint32_t kv[256];
    if (L_ > 256 || (2 * d) % m.n_head || d % bench_shape.n_head) die("bench shape: bad layer count or heads");
    for (uint32_t l = 0; l < L_; l++) kv[l] = l % bench_shape.attn_every == bench_shape.attn_every - 1 ? bench_shape.n_head_kv : 0;
    k_u32(g, "block_count", L_);
    k_u32(g, "context_length", 4096);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", bench_shape.n_ff);
    k_u32(g, "attention.head_count", bench_shape.n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, L_);
    k_u32(g, "attention.key_length", hd);
    k_u32(g, "attention.value_length", hd);
    k_f32(g, "rope.freq_base", 10000.0f);
    k_bool(g, "rope.scaling.finetuned", 0);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-5f);
    k_u32(g, "vocab_size", g->n_vocab);
    granite_keys(g);
    ssm2_keys(g, &m);
    tok_embd(g, d, 0.1);
    for (int l = 0; l < (int)L_; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        if (kv[l]) attn(g, l, d, bench_shape.n_head * hd, bench_shape.n_head_kv * hd, hd, 0);
        else ssm2(g, l, d, &m, 1);
        norm(g, d, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", d, bench_shape.n_ff);
    }
    norm(g, d, "output_norm.weight");
    granite_output(g, d);
}

/* ---- the other families (issue 19) ---- */

/* a llama-shaped pre-norm block: attn_norm, attention, ffn_norm, gated FFN */
static void llama_block(gen_t *g, int l, const hp_t *h, int att_flags) {
    norm(g, h->n_embd, L("attn_norm.weight"), l);
    attn(g, l, h->n_embd, h->n_head * h->head_dim, h->n_head_kv * h->head_dim, h->head_dim, att_flags);
    norm(g, h->n_embd, L("ffn_norm.weight"), l);
    ffn_glu(g, l, "", h->n_embd, h->n_ff);
}
/* a family whose file is llama-shaped blocks with the given keys/flags */
static void llama_like(gen_t *g, const hp_t *h, int hp_flags, int att_flags, int tied) {
    std_keys(g, h, hp_flags);
    tok_embd(g, h->n_embd, tied ? TIED_EMBD_STD : 1.0);
    for (int l = 0; l < (int)h->n_layer; l++) llama_block(g, l, h, att_flags);
    norm(g, h->n_embd, "output_norm.weight");
    if (!tied) output(g, h->n_embd);
}

/* gemma4: Gemma 4 E2B style.  6 layers S S S F S F (sliding window 8 /
 * full attention, sliding_window_pattern array), different head sizes (full
 * 64 with 1 kv head, sliding 32 with 2: key_length(_swa), per-layer
 * head_count_kv), proportional RoPE on full layers (rope_freqs: 8 rotated
 * pairs, the rest 1e30 = unrotated), base 1e6 full / 1e4 sliding, q/k norm
 * and a weightless v norm, attention scale 1, the last 2 layers reuse the KV
 * of the last layer of their kind that has one (shared_kv_layers: blk.4 uses
 * blk.2's, blk.5 blk.3's, llama.cpp's rule) and have a double-wide FFN (per-layer
 * feed_forward_length), per-layer embeddings (32 per layer: per_layer_token_embd,
 * per_layer_model_proj, inp_gate/proj/post_norm), layer_output_scale, post
 * norms, GELU, final soft-cap 5, tied */
static void fam_gemma4(gen_t *g) {
    g->post_mean = 4.0;
    const uint32_t d = 128, n_layer = 6, n_head = 4, hd_full = 64, hd_swa = 32, n_pl = 32, ff = 64;
    const int swa[6] = {1, 1, 1, 0, 1, 0};
    uint32_t kv[6], ffa[6];
    for (int l = 0; l < 6; l++) { kv[l] = swa[l] ? 2 : 1; ffa[l] = l >= 4 ? 2 * ff : ff; }
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_arr_u32(g, "feed_forward_length", ffa, 6);
    k_u32(g, "attention.head_count", n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, 6);
    k_u32(g, "attention.key_length", hd_full);
    k_u32(g, "attention.value_length", hd_full);
    k_u32(g, "attention.key_length_swa", hd_swa);
    k_u32(g, "attention.value_length_swa", hd_swa);
    k_f32(g, "rope.freq_base", 1000000.0f);
    k_f32(g, "rope.freq_base_swa", 10000.0f);
    k_u32(g, "rope.dimension_count", hd_full);
    k_u32(g, "rope.dimension_count_swa", hd_swa);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f);
    k_u32(g, "attention.sliding_window", 8);
    k_arr_bool(g, "attention.sliding_window_pattern", swa, 6);
    k_u32(g, "attention.shared_kv_layers", 2);
    k_u32(g, "embedding_length_per_layer_input", n_pl);
    k_f32(g, "final_logit_softcapping", 5.0f);
    k_u32(g, "vocab_size", g->n_vocab);
    tok_embd(g, d, TIED_EMBD_STD);
    dense(g, 2, n_pl * n_layer, g->n_vocab, 1, 0.0, 1.0, "per_layer_token_embd.weight");
    mat(g, d, n_pl * n_layer, "per_layer_model_proj.weight");
    norm(g, n_pl, "per_layer_proj_norm.weight");
    float rf[32];
    for (int i = 0; i < 32; i++) rf[i] = i < 8 ? 1.0f : 1e30f;
    values(g, hd_full / 2, 1, rf, "rope_freqs.weight");
    for (int l = 0; l < (int)n_layer; l++) {
        const uint32_t hd = swa[l] ? hd_swa : hd_full, has_kv = l < 4;
        norm(g, d, L("attn_norm.weight"), l);
        mat(g, d, n_head * hd, L("attn_q.weight"), l);
        if (has_kv) {
            mat(g, d, kv[l] * hd, L("attn_k.weight"), l);
            mat(g, d, kv[l] * hd, L("attn_v.weight"), l);
            qknorm(g, hd, L("attn_k_norm.weight"), l);
        }
        mat(g, n_head * hd, d, L("attn_output.weight"), l);
        qknorm(g, hd, L("attn_q_norm.weight"), l);
        pnorm(g, d, L("post_attention_norm.weight"), l);
        vec(g, 1, 0.7, 0.1, L("layer_output_scale.weight"), l);
        norm(g, d, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", d, ffa[l]);
        pnorm(g, d, L("post_ffw_norm.weight"), l);
        mat(g, d, n_pl, L("inp_gate.weight"), l);
        mat(g, n_pl, d, L("proj.weight"), l);
        pnorm(g, d, L("post_norm.weight"), l);
    }
    norm(g, d, "output_norm.weight");
}

/* gemma4-moe: Gemma 4 26B-A4B style MoE layers.  4 layers S S S F (window 8),
 * every layer a dense GELU MLP in parallel with 8 experts top-2 (router on the
 * RMS-normed residual x ffn_gate_inp.scale / sqrt(n_embd), softmax
 * renormalised, per-expert output scale ffn_down_exps.scale), each branch with
 * its own pre/post norms; head sizes 64 full / 32 sliding; tied */
static void fam_gemma4_moe(gen_t *g) {
    g->post_mean = 5.0;
    const uint32_t d = 128, n_layer = 4, n_head = 4, hd_full = 64, hd_swa = 32, ff = 64, n_exp = 8, ff_exp = 32;
    const int swa[4] = {1, 1, 1, 0};
    uint32_t kv[4];
    for (int l = 0; l < 4; l++) kv[l] = swa[l] ? 2 : 1;
    k_u32(g, "block_count", n_layer);
    k_u32(g, "context_length", N_CTX);
    k_u32(g, "embedding_length", d);
    k_u32(g, "feed_forward_length", ff);
    k_u32(g, "attention.head_count", n_head);
    k_arr_u32(g, "attention.head_count_kv", kv, 4);
    k_u32(g, "attention.key_length", hd_full);
    k_u32(g, "attention.value_length", hd_full);
    k_u32(g, "attention.key_length_swa", hd_swa);
    k_u32(g, "attention.value_length_swa", hd_swa);
    k_f32(g, "rope.freq_base", 1000000.0f);
    k_f32(g, "rope.freq_base_swa", 10000.0f);
    k_u32(g, "rope.dimension_count", hd_full);
    k_u32(g, "rope.dimension_count_swa", hd_swa);
    k_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f);
    k_u32(g, "attention.sliding_window", 8);
    k_arr_bool(g, "attention.sliding_window_pattern", swa, 4);
    k_u32(g, "attention.shared_kv_layers", 0);
    k_u32(g, "embedding_length_per_layer_input", 0);
    k_u32(g, "expert_count", n_exp);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_feed_forward_length", ff_exp);
    k_f32(g, "final_logit_softcapping", 5.0f);
    k_u32(g, "vocab_size", g->n_vocab);
    tok_embd(g, d, TIED_EMBD_STD);
    float rf[32];
    for (int i = 0; i < 32; i++) rf[i] = i < 8 ? 1.0f : 1e30f;
    values(g, hd_full / 2, 1, rf, "rope_freqs.weight");
    for (int l = 0; l < (int)n_layer; l++) {
        const uint32_t hd = swa[l] ? hd_swa : hd_full;
        norm(g, d, L("attn_norm.weight"), l);
        mat(g, d, n_head * hd, L("attn_q.weight"), l);
        mat(g, d, kv[l] * hd, L("attn_k.weight"), l);
        mat(g, d, kv[l] * hd, L("attn_v.weight"), l);
        mat(g, n_head * hd, d, L("attn_output.weight"), l);
        qknorm(g, hd, L("attn_q_norm.weight"), l);
        qknorm(g, hd, L("attn_k_norm.weight"), l);
        pnorm(g, d, L("post_attention_norm.weight"), l);
        norm(g, d, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", d, ff);
        pnorm(g, d, L("post_ffw_norm.weight"), l);
        /* the router sees rms_norm(x) / sqrt(n_embd) * scale: scale ~ sqrt(n_embd) keeps its logits O(1) */
        mat_s(g, ROUTER_STD, d, n_exp, L("ffn_gate_inp.weight"), l);
        vec(g, d, 11.3, 1.0, L("ffn_gate_inp.scale"), l);
        norm(g, d, L("pre_ffw_norm_2.weight"), l);
        norm(g, d, L("post_ffw_norm_1.weight"), l);
        norm(g, d, L("post_ffw_norm_2.weight"), l);
        exps(g, d, ff_exp, n_exp, L("ffn_gate_exps.weight"), l);
        exps(g, d, ff_exp, n_exp, L("ffn_up_exps.weight"), l);
        exps(g, ff_exp, d, n_exp, L("ffn_down_exps.weight"), l);
        vec(g, n_exp, 1.0, 0.3, L("ffn_down_exps.scale"), l);
    }
    norm(g, d, "output_norm.weight");
}

/* gemma3n: Gemma 3n style.  AltUp (4 streams: altup_proj / altup_unembd_proj,
 * per-layer predict/correct coefficients and router), LAuReL (rank 64),
 * per-layer embeddings (256 per layer, llama.cpp's fixed n_embd_altup),
 * activation sparsity on the first layers (llama.cpp applies it to layers < 10),
 * 2 layers: sliding window 8 then global (sliding_window_pattern array), q/k norm, weightless v norm, post norms,
 * GELU, tied */
static void fam_gemma3n(gen_t *g) {
    g->post_mean = 6.0;
    const uint32_t d = 128, n_layer = 2, n_head = 4, n_head_kv = 2, hd = 32, ff = 128;
    const uint32_t n_altup = 4, laurel = 64, n_pl = 256;
    const int swa[2] = {1, 0};
    hp_t h = {.n_embd = d, .n_layer = n_layer, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd,
              .n_ff = ff, .n_rot = hd, .rope_base = 1000000.0f, .eps = 1e-6f};
    std_keys(g, &h, HP_RMS | HP_KEYLEN);
    k_f32(g, "rope.freq_base_swa", 10000.0f);
    k_u32(g, "attention.sliding_window", 8);
    k_arr_bool(g, "attention.sliding_window_pattern", swa, 2);
    k_u32(g, "embedding_length_per_layer_input", n_pl);
    k_f32(g, "final_logit_softcapping", 30.0f);
    tok_embd(g, d, TIED_EMBD_STD);
    dense(g, 3, d, d, n_altup - 1, 0.0, inv_sqrt_u(d), "altup_proj.weight");
    dense(g, 3, d, d, n_altup - 1, 0.0, inv_sqrt_u(d), "altup_unembd_proj.weight");
    dense(g, 2, n_pl * n_layer, g->n_vocab, 1, 0.0, 1.0, "per_layer_token_embd.weight");
    mat(g, d, n_pl * n_layer, "per_layer_model_proj.weight");
    norm(g, n_pl, "per_layer_proj_norm.weight");
    for (int l = 0; l < (int)n_layer; l++) {
        norm(g, d, L("attn_norm.weight"), l);
        attn(g, l, d, n_head * hd, n_head_kv * hd, hd, 0);
        qknorm(g, hd, L("attn_q_norm.weight"), l);
        qknorm(g, hd, L("attn_k_norm.weight"), l);
        pnorm(g, d, L("post_attention_norm.weight"), l);
        norm(g, d, L("ffn_norm.weight"), l);
        ffn_glu(g, l, "", d, ff);
        pnorm(g, d, L("post_ffw_norm.weight"), l);
        mat(g, d, n_pl, L("inp_gate.weight"), l);
        mat(g, n_pl, d, L("proj.weight"), l);
        pnorm(g, d, L("post_norm.weight"), l);
        dense(g, 2, n_altup, n_altup, 1, 0.0, 0.3, L("altup_correct_coef.weight"), l);
        norm(g, d, L("altup_correct_scale.weight"), l);
        dense(g, 2, n_altup, n_altup * n_altup, 1, 0.0, 0.3, L("altup_predict_coef.weight"), l);
        mat(g, d, n_altup, L("altup_router.weight"), l);
        norm(g, d, L("altup_router_norm.weight"), l);
        mat(g, d, laurel, L("laurel_l.weight"), l);
        mat(g, laurel, d, L("laurel_r.weight"), l);
        norm(g, d, L("laurel_post_norm.weight"), l);
    }
    norm(g, d, "output_norm.weight");
}

/* mistral3: Ministral 3 style llama block with YaRN (factor 4, original
 * context 32, beta fast 32 / slow 1) and llama-4 attention temperature
 * scaling (scale 0.1, floor = original context: positions >= 31 get
 * 1 + 0.1 log(1 + floor((pos + 1) / 32)))
 * the references' long prompt and the greedy steps reach it */
static void fam_mistral3(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    std_keys(g, &h, HP_RMS);
    yarn(g, 4.0f, 32);
    k_f32(g, "rope.scaling.yarn_beta_fast", 32.0f);
    k_f32(g, "rope.scaling.yarn_beta_slow", 1.0f);
    k_f32(g, "rope.scaling.yarn_log_multiplier", 1.0f);
    k_f32(g, "attention.temperature_scale", 0.1f);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) llama_block(g, l, &h, 0);
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* mellum: MoE with per-head q/k norm, 8 experts top-2 renormalised, sliding
 * window 8 on 3 of every 4 layers (4 layers) */
static void fam_mellum(gen_t *g) {
    hp_t h = hp_default();
    h.n_layer = 4;
    h.n_ff = 256;
    std_keys(g, &h, HP_RMS);
    k_u32(g, "expert_count", 8);
    k_u32(g, "expert_used_count", 2);
    k_u32(g, "expert_feed_forward_length", 32);
    k_u32(g, "attention.sliding_window", 8);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        moe(g, l, h.n_embd, 32, 8, 1);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* nemotron: LayerNorm with bias (weights stored as 1 + w by the converter),
 * partial rotary 16 of 32 (NEOX), non-gated ReLU^2 FFN */
static void fam_nemotron(gen_t *g) {
    hp_t h = hp_default();
    h.n_rot = 16;
    h.n_ff = 384;
    std_keys(g, &h, HP_LAYERNORM);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, 0);
        layernorm(g, h.n_embd, "ffn_norm", l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 0);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* glm4: GLM-4-0414 style.  Fused gate|up ffn_up, post-attention and post-FFN
 * norms ("sandwich"), partial rotary 16 of 32, q/k/v biases */
static void fam_glm4(gen_t *g) {
    g->post_mean = 1.5;
    hp_t h = hp_default();
    h.n_rot = 16;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS);
        pnorm(g, h.n_embd, L("post_attention_norm.weight"), l);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        mat(g, h.n_embd, 2 * h.n_ff, L("ffn_up.weight"), l);
        mat(g, h.n_ff, h.n_embd, L("ffn_down.weight"), l);
        pnorm(g, h.n_embd, L("post_ffw_norm.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* phi2: parallel attention and FFN on one LayerNorm, q/k/v/o biases, partial
 * rotary 16 of 32 (NEOX), GELU FFN with biases, output bias, MHA */
static void fam_phi2(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_rot = 16;
    h.n_ff = 384;
    std_keys(g, &h, HP_LAYERNORM);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_QKV_BIAS | ATT_O_BIAS);
        ffn_plain(g, l, h.n_embd, h.n_ff, 1);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
    bias(g, g->n_vocab, "output.bias");
}

/* olmo2: no pre-norms: post-attention and post-FFN norms on the branch
 * outputs, q/k RMS norm over the whole projection (q n_embd, k kv width) */
static void fam_olmo2(gen_t *g) {
    g->post_mean = 1.5;
    hp_t h = hp_default();
    h.rope_base = 500000.0f;
    h.eps = 1e-6f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("attn_q_norm.weight"), l);
        norm(g, h.n_head_kv * h.head_dim, L("attn_k_norm.weight"), l);
        pnorm(g, h.n_embd, L("post_attention_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
        pnorm(g, h.n_embd, L("post_ffw_norm.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* command-r: parallel attention + FFN on one LayerNorm without bias, NORM
 * RoPE, logit_scale 0.5, tied */
static void fam_command_r(gen_t *g) {
    g->out_s = 2.0;
    hp_t h = hp_default();
    std_keys(g, &h, HP_LAYERNORM);
    k_f32(g, "logit_scale", 0.5f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, 0);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* cohere2: Command R7B style.  Parallel block as command-r; sliding window 8
 * with RoPE on 3 of every 4 layers, the 4th global without RoPE; logit_scale
 * 0.5, tied */
static void fam_cohere2(gen_t *g) {
    g->out_s = 2.0;
    hp_t h = hp_default();
    h.n_layer = 4;
    std_keys(g, &h, HP_LAYERNORM);
    k_u32(g, "attention.sliding_window", 8);
    k_f32(g, "logit_scale", 0.5f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, 0);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* exaone4: EXAONE 4.0 1.2B style.  No pre-norms: post-attention and post-FFN
 * norms, per-head q/k norm, tied (its sliding-window form needs 64 layers in
 * llama.cpp) */
static void fam_exaone4(gen_t *g) {
    g->post_mean = 2.0;
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        pnorm(g, h.n_embd, L("post_attention_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
        pnorm(g, h.n_embd, L("post_ffw_norm.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* smollm3: llama block with NoPE on every 4th layer (llama.cpp's fixed step 4;
 * 4 layers, blk.3 without RoPE), tied */
static void fam_smollm3(gen_t *g) {
    hp_t h = hp_default();
    h.n_layer = 4;
    h.rope_base = 2000000.0f;
    llama_like(g, &h, HP_RMS, 0, 1);
}

/* internlm2: llama-shaped (separate q/k/v as the converter writes them) */
static void fam_internlm2(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 1000000.0f;
    llama_like(g, &h, HP_RMS, 0, 0);
}

/* ernie4_5: ERNIE 4.5 0.3B style llama-shaped dense model, head_dim 64, tied */
static void fam_ernie4_5(gen_t *g) {
    hp_t h = hp_default();
    h.head_dim = h.n_rot = 64;
    h.rope_base = 500000.0f;
    llama_like(g, &h, HP_RMS, 0, 1);
}

/* hunyuan-dense: per-head q/k norm, NTK-alpha RoPE baked into the base as the
 * converter does (1e4 * 1000^(32/30)), rope.scaling.type none, tied */
static void fam_hunyuan_dense(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 15848932.0f;
    std_keys(g, &h, HP_RMS);
    k_str(g, "rope.scaling.type", "none");
    k_f32(g, "rope.scaling.factor", 1.0f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) llama_block(g, l, &h, ATT_QK_NORM);
    norm(g, h.n_embd, "output_norm.weight");
}

/* seed_oss: q/k/v biases, head_dim 64 != n_embd / n_head, the FFN norm named
 * post_attention_norm */
static void fam_seed_oss(gen_t *g) {
    hp_t h = hp_default();
    h.head_dim = h.n_rot = 64;
    h.rope_base = 10000000.0f;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QKV_BIAS);
        norm(g, h.n_embd, L("post_attention_norm.weight"), l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* apertus: xIELU activation (per-layer alpha_n, alpha_p, beta, eps arrays),
 * non-gated FFN, per-head q/k norm, llama-3 rope_freqs */
static void fam_apertus(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 12000000.0f;
    h.n_ff = 384;
    std_keys(g, &h, HP_RMS);
    const float an[3] = {0.8f, 1.2f, 0.5f}, apos[3] = {0.9f, 0.6f, 1.4f}, be[3] = {0.5f, 0.5f, 0.5f};
    const float ep[3] = {-1e-6f, -1e-6f, -1e-6f};
    k_arr_f32(g, "xielu.alpha_n", an, 3);
    k_arr_f32(g, "xielu.alpha_p", apos, 3);
    k_arr_f32(g, "xielu.beta", be, 3);
    k_arr_f32(g, "xielu.eps", ep, 3);
    tok_embd(g, h.n_embd, EMBD_STD);
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = i < 8 ? 1.0f : i >= 12 ? 8.0f : (float)(1.0 + 7.0 * (i - 7) / 5.0);
    values(g, h.n_rot / 2, 1, f, "rope_freqs.weight");
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, ATT_QK_NORM);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 0);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* arcee: AFM style llama block with a non-gated ReLU^2 FFN */
static void fam_arcee(gen_t *g) {
    hp_t h = hp_default();
    h.n_ff = 384;
    std_keys(g, &h, HP_RMS);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        attn(g, l, h.n_embd, h.n_head * h.head_dim, h.n_head_kv * h.head_dim, h.head_dim, 0);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 0);
    }
    norm(g, h.n_embd, "output_norm.weight");
    output(g, h.n_embd);
}

/* stablelm: StableLM 2 1.6B style.  LayerNorm with bias, q/k/v biases, partial
 * rotary 8 of 32 (NEOX), gated FFN */
static void fam_stablelm(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_rot = 8;
    std_keys(g, &h, HP_LAYERNORM);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_QKV_BIAS);
        layernorm(g, h.n_embd, "ffn_norm", l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* gptneox: parallel residual (x + attn(ln1 x) + mlp(ln2 x)), fused qkv with
 * bias, partial rotary 8 of 32 (NEOX), GELU FFN with biases, MHA */
static void fam_gptneox(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_rot = 8;
    h.n_ff = 384;
    std_keys(g, &h, HP_LAYERNORM);
    k_bool(g, "use_parallel_residual", 1);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_FUSED | ATT_QKV_BIAS | ATT_O_BIAS);
        layernorm(g, h.n_embd, "ffn_norm", l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 1);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* falcon: Falcon-7B style.  Parallel attention + FFN on one LayerNorm with
 * bias, MQA (1 kv head), fused qkv without bias, NEOX RoPE, GELU FFN without
 * biases */
static void fam_falcon(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 1;
    h.n_ff = 512;
    std_keys(g, &h, HP_LAYERNORM);
    tok_embd(g, h.n_embd, EMBD_STD);
    for (int l = 0; l < (int)h.n_layer; l++) {
        layernorm(g, h.n_embd, "attn_norm", l);
        attn(g, l, h.n_embd, h.n_embd, h.n_head_kv * h.head_dim, h.head_dim, ATT_FUSED);
        ffn_plain(g, l, h.n_embd, h.n_ff, 0);
    }
    layernorm(g, h.n_embd, "output_norm", -1);
    output(g, h.n_embd);
}

/* bitnet: BitNet b1.58 style.  Every projection ternary ({-s, 0, +s} per
 * tensor, as the converter's weight_quant leaves them: exact in TQ1_0/TQ2_0),
 * sub-norms before attn_output (attn_sub_norm) and ffn_down (ffn_sub_norm),
 * gated FFN, tied */
static void fam_bitnet(gen_t *g) {
    hp_t h = hp_default();
    h.rope_base = 500000.0f;
    std_keys(g, &h, HP_RMS);
    k_str(g, "rope.scaling.type", "linear");
    k_f32(g, "rope.scaling.factor", 1.0f);
    tok_embd(g, h.n_embd, TIED_EMBD_STD);
    const uint32_t kvd = h.n_head_kv * h.head_dim;
    for (int l = 0; l < (int)h.n_layer; l++) {
        norm(g, h.n_embd, L("attn_norm.weight"), l);
        norm(g, h.n_embd, L("attn_sub_norm.weight"), l);
        ternary(g, h.n_embd, h.n_embd, L("attn_q.weight"), l);
        ternary(g, h.n_embd, kvd, L("attn_k.weight"), l);
        ternary(g, h.n_embd, kvd, L("attn_v.weight"), l);
        ternary(g, h.n_embd, h.n_embd, L("attn_output.weight"), l);
        norm(g, h.n_embd, L("ffn_norm.weight"), l);
        norm(g, h.n_ff, L("ffn_sub_norm.weight"), l);
        ternary(g, h.n_embd, h.n_ff, L("ffn_gate.weight"), l);
        ternary(g, h.n_ff, h.n_embd, L("ffn_down.weight"), l);
        ternary(g, h.n_embd, h.n_ff, L("ffn_up.weight"), l);
    }
    norm(g, h.n_embd, "output_norm.weight");
}

/* an encoder's common keys: bidirectional attention, pooling type, 2 token types */
static void encoder_keys(gen_t *g, uint32_t pooling) {
    k_bool(g, "attention.causal", 0);
    k_u32(g, "pooling_type", pooling);
    k_u32(g, "tokenizer.ggml.token_type_count", 2); /* the one tokenizer key not copied from the vocabulary */
}

/* bert: BERT / BGE style encoder.  Bidirectional attention, learned positions
 * and token-type embeddings, embedding LayerNorm, post-LN blocks (attn_output_norm,
 * layer_output_norm), q/k/v/o biases, GELU FFN with biases, CLS pooling
 * (pooling_type 2), no output head */
static void fam_bert(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.n_ff = 384;
    h.eps = 1e-12f;
    std_keys(g, &h, HP_LAYERNORM | HP_NO_ROPE);
    encoder_keys(g, 2);
    tok_embd(g, h.n_embd, EMBD_STD);
    dense(g, 2, h.n_embd, 2, 1, 0.0, 0.5, "token_types.weight");
    dense(g, 2, h.n_embd, N_CTX, 1, 0.0, 0.5, "position_embd.weight");
    layernorm(g, h.n_embd, "token_embd_norm", -1);
    for (int l = 0; l < (int)h.n_layer; l++) {
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_QKV_BIAS | ATT_O_BIAS);
        layernorm(g, h.n_embd, "attn_output_norm", l);
        ffn_plain(g, l, h.n_embd, h.n_ff, 1);
        layernorm(g, h.n_embd, "layer_output_norm", l);
    }
}

/* nomic-bert: nomic-embed style encoder.  Bidirectional attention, RoPE (NEOX,
 * base 1000) instead of learned positions, fused qkv without bias, post-LN
 * blocks, SwiGLU FFN, token types, mean pooling (pooling_type 1) */
static void fam_nomic_bert(gen_t *g) {
    hp_t h = hp_default();
    h.n_head_kv = 4;
    h.rope_base = 1000.0f;
    h.eps = 1e-12f;
    std_keys(g, &h, HP_LAYERNORM);
    encoder_keys(g, 1);
    tok_embd(g, h.n_embd, EMBD_STD);
    dense(g, 2, h.n_embd, 2, 1, 0.0, 0.5, "token_types.weight");
    layernorm(g, h.n_embd, "token_embd_norm", -1);
    for (int l = 0; l < (int)h.n_layer; l++) {
        attn(g, l, h.n_embd, h.n_embd, h.n_embd, h.head_dim, ATT_FUSED);
        layernorm(g, h.n_embd, "attn_output_norm", l);
        ffn_glu(g, l, "", h.n_embd, h.n_ff);
        layernorm(g, h.n_embd, "layer_output_norm", l);
    }
}

/* ==== family table ============================================================ */

typedef struct {
    const char *name;      /* file stem */
    const char *arch;      /* general.architecture */
    void (*build)(gen_t *);
    const char *exercises;
} family_t;

static const family_t FAMILIES[] = {
    {"llama", "llama", fam_llama, "Llama 2 / Mistral style: GQA 4/2, NORM RoPE, SwiGLU, untied output"},
    {"llama3", "llama", fam_llama3, "Llama 3.1 style: RoPE base 5e5 with rope_freqs frequency divisors (1..8)"},
    {"qwen2", "qwen2", fam_qwen2, "q/k/v biases, NEOX RoPE, GQA 4/2, untied"},
    {"qwen3", "qwen3", fam_qwen3, "per-head q/k RMS norm, head_dim 64 != n_embd/n_head, tied"},
    {"gemma", "gemma", fam_gemma, "embeddings x sqrt(n_embd), MQA, head_dim 64 (key_length), GELU, tied"},
    {"gemma2", "gemma2", fam_gemma2,
     "attention (8) and final (5) logit soft-caps, sliding window 8 on even layers, post-attn/post-FFN norms, GELU, tied"},
    {"gemma3", "gemma3", fam_gemma3,
     "5 local : 1 global (window 8), RoPE base 1e6 global / 1e4 local, per-head q/k norm, post norms, GELU, tied"},
    {"phi3", "phi3", fam_phi3, "fused attn_qkv and fused gate|up ffn_up, NEOX RoPE"},
    {"granite", "granite", fam_granite, "embedding/residual/attention/logit multipliers"},
    {"starcoder2", "starcoder2", fam_starcoder2, "LayerNorm with bias, q/k/v/o biases, non-gated GELU FFN with biases"},
    {"gpt2", "gpt2", fam_gpt2, "learned absolute positions, fused qkv with bias, MHA, LayerNorms, GELU, no RoPE"},
    {"llama-moe", "llama", fam_llama_moe, "Mixtral style: 8 experts top-2, softmax renormalised over the chosen"},
    {"qwen2moe", "qwen2moe", fam_qwen2moe,
     "q/k/v biases, 8 experts top-4 softmax not renormalised, sigmoid-gated shared expert"},
    {"qwen3moe", "qwen3moe", fam_qwen3moe, "per-head q/k norm, head_dim 64, 16 experts top-4 renormalised"},
    {"granitemoe", "granitemoe", fam_granitemoe, "granite multipliers, 8 experts top-2, shared expert"},
    {"olmoe", "olmoe", fam_olmoe, "q/k norm over the whole projection, 8 experts top-2 not renormalised, MHA"},
    {"deepseek2", "deepseek2", fam_deepseek2,
     "MLA with q LoRA (split attn_k_b/attn_v_b), leading dense layer, grouped routing (4 groups, top-2), sigmoid + "
     "exp_probs_b, renormalised x2.5, shared expert, YaRN mscale"},
    {"deepseek2-lite", "deepseek2", fam_deepseek2_lite,
     "MLA without q LoRA (26 layers: llama.cpp's lite rule), 24 dense layers then 8 experts top-2 softmax, 2 shared"},
    {"gpt-oss", "gpt-oss", fam_gpt_oss,
     "attention sinks, SWA 8 on even layers, q/k/v/o biases, YaRN, router + expert biases, softmax over top-2, "
     "clamped SwiGLU (alpha 1.702, limit 7)"},
    {"glm4moe", "glm4moe", fam_glm4moe,
     "partial rotary 16/32, q/k/v biases, leading dense layer, sigmoid + exp_probs_b x2.5, shared expert, "
     "a skipped NextN/MTP layer"},
    {"mamba", "mamba", fam_mamba, "Mamba-1 selective scan, conv 4, recurrent state, tied"},
    {"mamba2", "mamba2", fam_mamba2, "Mamba-2 SSD scan, 4 heads, 2 groups, grouped RMS norm, tied"},
    {"qwen3next", "qwen3next", fam_qwen3next,
     "gated DeltaNet (attn_qkv + attn_gate, short conv, ssm_ba, gated norm) 3 : 1 gated full attention with q/k norm and "
     "partial rotary 16/64, experts + sigmoid-gated shared expert"},
    {"granitehybrid", "granitehybrid", fam_granitehybrid,
     "Mamba-2 layers + one NoPE attention layer (per-layer head_count_kv), granite multipliers, experts + shared"},
    {"nemotron_h", "nemotron_h", fam_nemotron_h,
     "layer pattern Mamba-2 / ReLU^2 MLP / NoPE attention from per-layer head_count_kv and feed_forward_length"},
    {"falcon-h1", "falcon-h1", fam_falcon_h1, "attention and Mamba-2 in parallel in every layer, gated FFN"},
    {"lfm2", "lfm2", fam_lfm2, "short-conv layers + attention with q/k norm (per-layer head_count_kv), token_embd_norm, tied"},
    {"gemma4", "gemma4", fam_gemma4,
     "E2B style: SWA pattern array, head sizes 64 full / 32 sliding, proportional RoPE (rope_freqs), q/k/v norms, "
     "shared-KV layers with double-wide FFN, per-layer embeddings, layer_output_scale, final soft-cap, tied"},
    {"gemma4-moe", "gemma4", fam_gemma4_moe,
     "26B-A4B style: dense GELU MLP in parallel with 8 experts top-2 (scaled router on the normed residual, "
     "per-expert output scale), SWA 3:1, tied"},
    {"gemma3n", "gemma3n", fam_gemma3n,
     "AltUp (4 streams), LAuReL, per-layer embeddings, activation sparsity, sliding + global layer, q/k/v norms, tied"},
    {"mistral3", "mistral3", fam_mistral3, "YaRN (factor 4, original 32) and llama-4 attention temperature scaling"},
    {"mellum", "mellum", fam_mellum, "per-head q/k norm, 8 experts top-2, SWA 8 on 3 of 4 layers"},
    {"nemotron", "nemotron", fam_nemotron, "LayerNorm with bias, partial rotary 16/32, non-gated ReLU^2 FFN"},
    {"glm4", "glm4", fam_glm4, "fused gate|up, sandwich post-norms, partial rotary 16/32, q/k/v biases"},
    {"phi2", "phi2", fam_phi2, "parallel attention + FFN, partial rotary 16/32, biases everywhere, output bias, MHA"},
    {"olmo2", "olmo2", fam_olmo2, "post-norms only, q/k norm over the whole projection"},
    {"command-r", "command-r", fam_command_r, "parallel attention + FFN, LayerNorm without bias, logit_scale, tied"},
    {"cohere2", "cohere2", fam_cohere2,
     "parallel block, SWA 8 with RoPE on 3 of 4 layers and a global NoPE layer, logit_scale, tied"},
    {"exaone4", "exaone4", fam_exaone4, "post-norms only, per-head q/k norm, tied"},
    {"smollm3", "smollm3", fam_smollm3, "NoPE on every 4th layer, tied"},
    {"internlm2", "internlm2", fam_internlm2, "llama-shaped, untied"},
    {"ernie4_5", "ernie4_5", fam_ernie4_5, "llama-shaped, head_dim 64, tied"},
    {"hunyuan-dense", "hunyuan-dense", fam_hunyuan_dense, "per-head q/k norm, NTK-alpha RoPE base, tied"},
    {"seed_oss", "seed_oss", fam_seed_oss, "q/k/v biases, head_dim 64, FFN norm named post_attention_norm"},
    {"apertus", "apertus", fam_apertus, "xIELU FFN (per-layer parameters), per-head q/k norm, rope_freqs"},
    {"arcee", "arcee", fam_arcee, "non-gated ReLU^2 FFN"},
    {"stablelm", "stablelm", fam_stablelm, "LayerNorm with bias, q/k/v biases, partial rotary 8/32, MHA"},
    {"gptneox", "gptneox", fam_gptneox, "parallel residual, fused qkv with bias, partial rotary 8/32, GELU, MHA"},
    {"falcon", "falcon", fam_falcon, "parallel attention + FFN on one LayerNorm, MQA, fused qkv, GELU"},
    {"bitnet", "bitnet", fam_bitnet, "ternary projections, attn/ffn sub-norms, tied"},
    {"bert", "bert", fam_bert,
     "encoder: bidirectional, learned positions + token types, embedding LayerNorm, post-LN, biases, GELU, CLS pooling"},
    {"nomic-bert", "nomic-bert", fam_nomic_bert,
     "encoder: bidirectional, RoPE, fused qkv, post-LN, SwiGLU, token types, mean pooling"},
};
#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

/* ==== writer ================================================================== */

static uint64_t write_model(const family_t *fam, const vocab_t *vocab, uint64_t seed, const char *path,
                            uint64_t *n_params) {
    gen_t g = {.family = fam->name, .arch = fam->arch, .seed = seed, .vocab = vocab, .n_vocab = vocab->n_vocab,
               .out_s = 1.5, .post_mean = 1.0};
    char desc[256];
    snprintf(desc, sizeof desc, "cinfer tools/archgen.c test model '%s' (random weights, seed %llu); not for use",
             fam->name, (unsigned long long)seed);
    k_str(&g, "general.architecture", fam->arch);
    k_str(&g, "general.type", "model");
    /* a neutral name: llama.cpp keys vocabulary quirks on general.name (phi3, modern-bert, ...) */
    k_str(&g, "general.name", "cinfer archgen test model");
    k_str(&g, "general.description", desc);
    k_u32(&g, "general.file_type", 0);
    fam->build(&g);
    k_u32(&g, "general.quantization_version", 2);

    uint64_t off = 0, max_el = 0;
    *n_params = 0;
    for (int i = 0; i < g.n_t; i++) {
        tensor_t *t = &g.t[i];
        uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        t->off = off;
        off += (n * 4 + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
        *n_params += n;
        if (n > max_el) max_el = n;
    }
    buf_t h = {0};
    put_u32(&h, 0x46554747u);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)g.n_t);
    put_u64(&h, g.n_kv + vocab->n_kv);
    put(&h, g.kv.p, g.kv.n);
    put(&h, vocab->kv.p, vocab->kv.n);
    for (int i = 0; i < g.n_t; i++) {
        put_str(&h, g.t[i].name);
        put_u32(&h, (uint32_t)g.t[i].nd);
        for (int d = 0; d < g.t[i].nd; d++) put_u64(&h, g.t[i].ne[d]);
        put_u32(&h, GGML_TYPE_F32);
        put_u64(&h, g.t[i].off);
    }
    static const uint8_t zeros[GGUF_ALIGN];
    put(&h, zeros, (GGUF_ALIGN - h.n % GGUF_ALIGN) % GGUF_ALIGN);

    FILE *f = fopen(path, "wb");
    if (!f) die("cannot create '%s'", path);
    if (fwrite(h.p, 1, h.n, f) != h.n) die("write '%s' failed", path);
    float *x = malloc((size_t)max_el * sizeof(float));
    buf_t le = {0};
    if (!x) die("out of memory");
    uint64_t total = h.n;
    for (int i = 0; i < g.n_t; i++) {
        tensor_t *t = &g.t[i];
        uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        fill_tensor(&g, t, x, n);
        le.n = 0;
        for (uint64_t k = 0; k < n; k++) put_f32(&le, x[k]);
        uint64_t pad = (GGUF_ALIGN - (n * 4) % GGUF_ALIGN) % GGUF_ALIGN;
        put(&le, zeros, (size_t)pad);
        if (fwrite(le.p, 1, le.n, f) != le.n) die("write '%s' failed", path);
        total += le.n;
        free(t->values);
    }
    if (fclose(f) != 0) die("write '%s' failed", path);
    free(x); free(le.p); free(h.p); free(g.kv.p); free(g.t);
    return total;
}

static void usage(void) {
    fprintf(stderr,
            "usage: archgen -o DIR [--vocab-from FILE.gguf] [--seed N] [NAME...]\n"
            "       archgen --list\n"
            "       archgen -o DIR --bench granitehybrid [--dim N] [--layers N] [--ffn N] [--heads N]\n"
            "               [--kv-heads N] [--ssm-heads N] [--ssm-state N] [--attn-every N]\n"
            "writes DIR/NAME.gguf for every family (or the NAMEs given); --list prints\n"
            "NAME<TAB>ARCHITECTURE<TAB>WHAT IT EXERCISES per family.  --bench writes\n"
            "DIR/granitehybrid-bench.gguf, a benchmark model of realistic size (default:\n"
            "Granite-4.0-H-1B's layer shape, 40 layers), F32, not a test model\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *out_dir = NULL, *vocab_path = "../shared/models/stories260K/stories260K.gguf";
    uint64_t seed = 1;
    const char *only[256];
    int n_only = 0, list = 0;
    const char *bench = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(a, "--vocab-from") && i + 1 < argc) vocab_path = argv[++i];
        else if (!strcmp(a, "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--list")) list = 1;
        else if (!strcmp(a, "--bench") && i + 1 < argc) bench = argv[++i];
        else if (!strcmp(a, "--dim") && i + 1 < argc) bench_shape.n_embd = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--layers") && i + 1 < argc) bench_shape.n_layer = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--ffn") && i + 1 < argc) bench_shape.n_ff = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--heads") && i + 1 < argc) bench_shape.n_head = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--kv-heads") && i + 1 < argc) bench_shape.n_head_kv = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--ssm-heads") && i + 1 < argc) bench_shape.ssm_heads = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--ssm-state") && i + 1 < argc) bench_shape.ssm_state = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--attn-every") && i + 1 < argc) bench_shape.attn_every = (uint32_t)atoi(argv[++i]);
        else if (a[0] == '-') usage();
        else if (n_only < 256) only[n_only++] = a;
        else usage();
    }
    if (list) {
        for (int i = 0; i < N_FAMILIES; i++) printf("%s\t%s\t%s\n", FAMILIES[i].name, FAMILIES[i].arch, FAMILIES[i].exercises);
        return 0;
    }
    if (!out_dir) usage();
    if (bench) {
        if (strcmp(bench, "granitehybrid") || n_only) usage();
        if (!bench_shape.n_embd || !bench_shape.n_layer || !bench_shape.n_head || !bench_shape.n_head_kv ||
            !bench_shape.ssm_heads || !bench_shape.ssm_state || !bench_shape.attn_every)
            die("bench shape: every size must be positive");
        static const family_t fam = {"granitehybrid-bench", "granitehybrid", fam_granitehybrid_bench,
                                     "benchmark model: Granite-4.0-H-1B-like hybrid"};
        vocab_t vocab;
        load_vocab(vocab_path, &vocab);
        mkdir(out_dir, 0777);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", out_dir, fam.name);
        uint64_t n_params, bytes = write_model(&fam, &vocab, seed, path, &n_params);
        printf("%s\t%llu bytes\t%llu params\n", path, (unsigned long long)bytes, (unsigned long long)n_params);
        free(vocab.kv.p);
        return 0;
    }
    for (int k = 0; k < n_only; k++) {
        int found = 0;
        for (int i = 0; i < N_FAMILIES; i++) found |= !strcmp(FAMILIES[i].name, only[k]);
        if (!found) die("unknown family '%s' (archgen --list shows them)", only[k]);
    }
    vocab_t vocab;
    load_vocab(vocab_path, &vocab);
    mkdir(out_dir, 0777);
    for (int i = 0; i < N_FAMILIES; i++) {
        int want = n_only == 0;
        for (int k = 0; k < n_only; k++) want |= !strcmp(FAMILIES[i].name, only[k]);
        if (!want) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", out_dir, FAMILIES[i].name);
        uint64_t n_params;
        uint64_t bytes = write_model(&FAMILIES[i], &vocab, seed, path, &n_params);
        printf("%s\t%llu bytes\t%llu params\n", path, (unsigned long long)bytes, (unsigned long long)n_params);
    }
    free(vocab.kv.p);
    return 0;
}
