/*
 * test_gguf.c — the GGUF loader on files built here byte by byte: one small
 * valid file exercising every value type (nested arrays, string arrays, every
 * scalar), and a table of single mutations of it that a loader must refuse
 * with a one-line error naming the problem.  Also: truncation at every offset,
 * typed accessor messages, the ggml type table against ggml's numbers, and
 * `cinfer inspect` exit status / stderr on broken files.
 *
 * Every image is handed to gguf_open_mem in a malloc'd buffer of exactly its
 * size, so under ASan any read past the end is caught.
 */
#include "formats/gguf.h"
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

/* ==== a tiny GGUF writer ==================================================== */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gb;

static void gb_put(gb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u8(gb *b, uint8_t v) { gb_put(b, &v, 1); }
static void gb_u16(gb *b, uint16_t v) { gb_put(b, &v, 2); }
static void gb_u32(gb *b, uint32_t v) { gb_put(b, &v, 4); }
static void gb_u64(gb *b, uint64_t v) { gb_put(b, &v, 8); }
static void gb_f32(gb *b, float v) { gb_put(b, &v, 4); }
static void gb_f64(gb *b, double v) { gb_put(b, &v, 8); }
static void gb_strn(gb *b, const char *s, size_t n) {
    gb_u64(b, n);
    gb_put(b, s, n);
}
static void gb_str(gb *b, const char *s) { gb_strn(b, s, strlen(s)); }
static void gb_key(gb *b, const char *key, uint32_t type) {
    gb_str(b, key);
    gb_u32(b, type);
}
static void gb_tensor(gb *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off) {
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gb_u64(b, (uint64_t)ne[d]);
    gb_u32(b, type);
    gb_u64(b, off);
}
/* Array body nested depth deep; the innermost is u8 [7, 9]. */
static void gb_nested(gb *b, int depth) {
    if (depth == 1) {
        gb_u32(b, GGUF_VT_UINT8);
        gb_u64(b, 2);
        gb_u8(b, 7);
        gb_u8(b, 9);
        return;
    }
    gb_u32(b, GGUF_VT_ARRAY);
    gb_u64(b, 1);
    gb_nested(b, depth - 1);
}

/* Mutations of the valid file; M_NONE is the valid file itself. */
enum mut {
    M_NONE, M_V2, M_BAD_MAGIC, M_V1, M_V99, M_BIG_ENDIAN, M_NT_HUGE, M_NKV_HUGE, M_NT_PLUS1,
    M_STR_PAST_EOF, M_KEY_PAST_EOF, M_EMPTY_KEY, M_KEY_NUL, M_DUP_KEY, M_VTYPE_BAD, M_BOOL_BAD,
    M_ARR_ETYPE_BAD, M_ARR_HUGE, M_STRARR_HUGE, M_NESTED_HUGE, M_NEST_DEEP,
    M_ALIGN_0, M_ALIGN_3, M_ALIGN_U64, M_ALIGN_STR,
    M_NDIMS_0, M_NDIMS_5, M_DIM_0, M_DIM_NEG, M_DIM_OVERFLOW, M_BYTES_OVERFLOW, M_ROW_OVERFLOW, M_TYPE_99, M_TYPE_4,
    M_BLOCK_MULT, M_NAME_EMPTY, M_DUP_TENSOR, M_TENSOR_PAST_EOF, M_TENSOR_OFF_HUGE, M_OVERLAP, M_UNALIGNED,
    M_DATA_TRUNC,
};

#define N_KV_VALID 25
#define N_TENSORS_VALID 4

/* The valid file: every value type, 4 tensors (F32, Q8_0, F16, 4-D Q4_K). */
static gb build(enum mut m) {
    gb b = {0};
    gb_put(&b, m == M_BAD_MAGIC ? "GGUX" : "GGUF", 4);
    uint32_t ver = m == M_V2 ? 2 : m == M_V1 ? 1 : m == M_V99 ? 99 : m == M_BIG_ENDIAN ? 0x03000000u : 3;
    gb_u32(&b, ver);
    gb_u64(&b, m == M_NT_HUGE ? 1ull << 62 : m == M_NT_PLUS1 ? N_TENSORS_VALID + 1 : N_TENSORS_VALID);
    gb_u64(&b, m == M_NKV_HUGE ? 1ull << 62 : N_KV_VALID + (m == M_DUP_KEY));

    gb_key(&b, "general.architecture", GGUF_VT_STRING);
    gb_str(&b, "llama");
    if (m == M_ALIGN_U64) {
        gb_key(&b, "general.alignment", GGUF_VT_UINT64);
        gb_u64(&b, 32);
    } else if (m == M_ALIGN_STR) {
        gb_key(&b, "general.alignment", GGUF_VT_STRING);
        gb_str(&b, "32");
    } else {
        gb_key(&b, "general.alignment", GGUF_VT_UINT32);
        gb_u32(&b, m == M_ALIGN_0 ? 0 : m == M_ALIGN_3 ? 3 : 32);
    }
    if (m == M_KEY_PAST_EOF) {
        gb_u64(&b, 1u << 20); /* key length, then nothing like that many bytes */
        gb_put(&b, "general.name", 12);
    } else {
        gb_key(&b, m == M_EMPTY_KEY ? "" : "general.name", GGUF_VT_STRING);
    }
    if (m == M_STR_PAST_EOF) {
        gb_u64(&b, 1u << 20);
        gb_put(&b, "tiny", 4);
    } else {
        gb_str(&b, "tiny");
    }
    if (m == M_KEY_NUL) {
        gb_strn(&b, "llama.block\0count", 17);
        gb_u32(&b, GGUF_VT_UINT32);
    } else {
        gb_key(&b, "llama.block_count", m == M_VTYPE_BAD ? 13 : GGUF_VT_UINT32);
    }
    gb_u32(&b, 1);
    if (m == M_DUP_KEY) {
        gb_key(&b, "llama.block_count", GGUF_VT_UINT32);
        gb_u32(&b, 2);
    }
    gb_key(&b, "t.u8", GGUF_VT_UINT8), gb_u8(&b, 200);
    gb_key(&b, "t.i8", GGUF_VT_INT8), gb_u8(&b, (uint8_t)-5);
    gb_key(&b, "t.u16", GGUF_VT_UINT16), gb_u16(&b, 60000);
    gb_key(&b, "t.i16", GGUF_VT_INT16), gb_u16(&b, (uint16_t)-300);
    gb_key(&b, "t.u32", GGUF_VT_UINT32), gb_u32(&b, 4000000000u);
    gb_key(&b, "t.i32", GGUF_VT_INT32), gb_u32(&b, (uint32_t)-70000);
    gb_key(&b, "t.f32", GGUF_VT_FLOAT32), gb_f32(&b, 0.5f);
    gb_key(&b, "t.bool", GGUF_VT_BOOL), gb_u8(&b, m == M_BOOL_BAD ? 2 : 1);
    gb_key(&b, "t.u64", GGUF_VT_UINT64), gb_u64(&b, 1ull << 40);
    gb_key(&b, "t.i64", GGUF_VT_INT64), gb_u64(&b, (uint64_t)-(1ll << 40));
    gb_key(&b, "t.f64", GGUF_VT_FLOAT64), gb_f64(&b, 0.25);
    gb_key(&b, "t.i32neg", GGUF_VT_INT32), gb_u32(&b, (uint32_t)-1);
    gb_key(&b, "t.strs", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_STRING);
    gb_u64(&b, m == M_STRARR_HUGE ? 1ull << 60 : 4);
    gb_str(&b, "a"), gb_str(&b, "bb"), gb_str(&b, ""), gb_str(&b, "dddd");
    gb_key(&b, "t.u32s", GGUF_VT_ARRAY);
    gb_u32(&b, m == M_ARR_ETYPE_BAD ? 77 : GGUF_VT_UINT32);
    gb_u64(&b, m == M_ARR_HUGE ? 1ull << 61 : 3);
    gb_u32(&b, 1), gb_u32(&b, 2), gb_u32(&b, 3);
    gb_key(&b, "t.f32s", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_FLOAT32);
    gb_u64(&b, 2);
    gb_f32(&b, -1.5f), gb_f32(&b, 3.0f);
    /* [[1, 2], [], [3]] as i32, and [["x"]] */
    gb_key(&b, "t.nested", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_ARRAY);
    gb_u64(&b, m == M_NESTED_HUGE ? 1ull << 60 : 3);
    gb_u32(&b, GGUF_VT_INT32), gb_u64(&b, 2), gb_u32(&b, 1), gb_u32(&b, 2);
    gb_u32(&b, GGUF_VT_INT32), gb_u64(&b, 0);
    gb_u32(&b, GGUF_VT_INT32), gb_u64(&b, 1), gb_u32(&b, 3);
    gb_key(&b, "t.nested_str", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_ARRAY), gb_u64(&b, 1);
    gb_u32(&b, GGUF_VT_STRING), gb_u64(&b, 1), gb_str(&b, "x");
    gb_key(&b, "t.deep", GGUF_VT_ARRAY);
    gb_nested(&b, m == M_NEST_DEEP ? 9 : 8);
    gb_key(&b, "t.empty", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_UINT8), gb_u64(&b, 0);
    gb_key(&b, "t.bools", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_BOOL), gb_u64(&b, 3), gb_u8(&b, 1), gb_u8(&b, 0), gb_u8(&b, 1);
    gb_key(&b, "t.i16s", GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_INT16), gb_u64(&b, 2), gb_u16(&b, (uint16_t)-2), gb_u16(&b, 5);

    /* tensors: data [0,64) [64,200) [224,232) [256,544) */
    int64_t ne0[4] = {8, 2};
    if (m == M_DIM_0) ne0[1] = 0;
    if (m == M_DIM_NEG) ne0[1] = -2;
    if (m == M_DIM_OVERFLOW) ne0[0] = ne0[1] = 1ll << 32;
    uint32_t t0type = GGML_TYPE_F32;
    if (m == M_BYTES_OVERFLOW) ne0[0] = ne0[1] = 1ll << 31, t0type = GGML_TYPE_F64;
    if (m == M_ROW_OVERFLOW) ne0[0] = 1ll << 62, ne0[1] = 1; /* one row of 2^64 bytes (found by the fuzzer) */
    gb_tensor(&b, m == M_NAME_EMPTY ? "" : "tok.weight", 2, ne0, t0type, 0);
    int64_t ne1[4] = {m == M_BLOCK_MULT ? 33 : 64, 2};
    uint32_t t1type = m == M_TYPE_99 ? 99 : m == M_TYPE_4 ? 4 : GGML_TYPE_Q8_0;
    gb_tensor(&b, "q.weight", 2, ne1, t1type, m == M_OVERLAP ? 32 : 64);
    int64_t ne2[5] = {4, 1, 1, 1, 1};
    uint32_t nd2 = m == M_NDIMS_0 ? 0 : m == M_NDIMS_5 ? 5 : 1;
    gb_tensor(&b, m == M_DUP_TENSOR ? "q.weight" : "norm", nd2, ne2, GGML_TYPE_F16, m == M_UNALIGNED ? 208 : 224);
    int64_t ne3[4] = {256, 1, 1, 2};
    uint64_t off3 = m == M_TENSOR_PAST_EOF ? 4096 : m == M_TENSOR_OFF_HUGE ? UINT64_MAX - 31 : 256;
    gb_tensor(&b, "blk.0.x", 4, ne3, GGML_TYPE_Q4_K, off3);

    while (b.n % 32) gb_u8(&b, 0);
    size_t data = b.n;
    size_t data_bytes = m == M_DATA_TRUNC ? 543 : 544;
    for (size_t i = 0; i < data_bytes; i++) gb_u8(&b, (uint8_t)(i * 7 + 1));
    (void)data;
    return b;
}

/* Open a heap copy of exactly n bytes of b. */
static int open_copy(const uint8_t *p, size_t n, gguf_file **g, char *err, size_t err_len, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    if (n) memcpy(*copy, p, n);
    return gguf_open_mem(*copy, n, g, err, err_len);
}

static bool one_line(const char *s) { return strchr(s, '\n') == NULL && strchr(s, '\r') == NULL; }

/* ==== the valid file ======================================================== */

TEST(gguf, valid_file_all_value_types) {
    gb b = build(M_NONE);
    gguf_file *g = NULL;
    char err[512] = "";
    uint8_t *copy;
    int rc = open_copy(b.p, b.n, &g, err, sizeof err, &copy);
    EXPECT_MSG(rc == 0, "open: %s", err);
    if (rc) goto out;
    EXPECT_EQ_I(gguf_version(g), 3);
    EXPECT_EQ_I(gguf_alignment(g), 32);
    EXPECT_EQ_I(gguf_n_kv(g), N_KV_VALID);
    EXPECT_EQ_I(gguf_n_tensors(g), N_TENSORS_VALID);
    EXPECT_EQ_I(gguf_size(g), b.n);
    EXPECT_EQ_I(gguf_data_offset(g) % 32, 0);
    EXPECT_EQ_I(gguf_data_offset(g) + 544, b.n);
    EXPECT(gguf_base(g) == copy);

    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool bo;
    gguf_str s;
    EXPECT_EQ_I(gguf_get_u32(g, "llama.block_count", &u32, err, sizeof err), 0);
    EXPECT_EQ_I(u32, 1);
    EXPECT_EQ_I(gguf_get_u32(g, "t.u8", &u32, err, sizeof err), 0);
    EXPECT_EQ_I(u32, 200);
    EXPECT_EQ_I(gguf_get_i64(g, "t.i8", &i64, err, sizeof err), 0);
    EXPECT_EQ_I(i64, -5);
    EXPECT_EQ_I(gguf_get_u32(g, "t.u16", &u32, err, sizeof err), 0);
    EXPECT_EQ_I(u32, 60000);
    EXPECT_EQ_I(gguf_get_i64(g, "t.i16", &i64, err, sizeof err), 0);
    EXPECT_EQ_I(i64, -300);
    EXPECT_EQ_I(gguf_get_u32(g, "t.u32", &u32, err, sizeof err), 0);
    EXPECT_EQ_I(u32, 4000000000u);
    EXPECT_EQ_I(gguf_get_i64(g, "t.i32", &i64, err, sizeof err), 0);
    EXPECT_EQ_I(i64, -70000);
    EXPECT_EQ_I(gguf_get_f32(g, "t.f32", &f, err, sizeof err), 0);
    EXPECT_NEAR(f, 0.5, 0);
    EXPECT_EQ_I(gguf_get_bool(g, "t.bool", &bo, err, sizeof err), 0);
    EXPECT(bo);
    EXPECT_EQ_I(gguf_get_u64(g, "t.u64", &u64, err, sizeof err), 0);
    EXPECT_EQ_I(u64, 1ull << 40);
    EXPECT_EQ_I(gguf_get_i64(g, "t.i64", &i64, err, sizeof err), 0);
    EXPECT_EQ_I(i64, -(1ll << 40));
    EXPECT_EQ_I(gguf_get_f32(g, "t.f64", &f, err, sizeof err), 0);
    EXPECT_NEAR(f, 0.25, 0);
    EXPECT_EQ_I(gguf_get_u64(g, "t.u32", &u64, err, sizeof err), 0);
    EXPECT_EQ_I(u64, 4000000000u);
    EXPECT_EQ_I(gguf_get_str(g, "general.architecture", &s, err, sizeof err), 0);
    EXPECT(gguf_str_eq(s, "llama"));
    EXPECT(!gguf_str_eq(s, "llam"));
    EXPECT(!gguf_str_eq(s, "llamas"));

    const gguf_value *a;
    EXPECT_EQ_I(gguf_get_arr(g, "t.strs", GGUF_VT_STRING, &a, err, sizeof err), 0);
    EXPECT_EQ_I(a->v.arr.n, 4);
    EXPECT(gguf_str_eq(a->v.arr.strs[0], "a"));
    EXPECT(gguf_str_eq(a->v.arr.strs[1], "bb"));
    EXPECT(gguf_str_eq(a->v.arr.strs[2], ""));
    EXPECT(gguf_str_eq(a->v.arr.strs[3], "dddd"));
    EXPECT_EQ_I(gguf_get_arr(g, "t.u32s", GGUF_VT_UINT32, &a, err, sizeof err), 0);
    gguf_value e;
    EXPECT_EQ_I(a->v.arr.n, 3);
    for (uint64_t i = 0; i < 3; i++) {
        EXPECT_EQ_I(gguf_arr_elem(a, i, &e), 0);
        EXPECT_EQ_I(e.type, GGUF_VT_UINT32);
        EXPECT_EQ_I(e.v.u64, i + 1);
    }
    EXPECT_EQ_I(gguf_arr_elem(a, 3, &e), GGUF_ENOTFOUND);
    EXPECT_EQ_I(gguf_get_arr(g, "t.f32s", GGUF_VT_FLOAT32, &a, err, sizeof err), 0);
    gguf_arr_elem(a, 0, &e);
    EXPECT_NEAR(e.v.f64, -1.5, 0);
    EXPECT_EQ_I(gguf_get_arr(g, "t.i16s", GGUF_VT_INT16, &a, err, sizeof err), 0);
    gguf_arr_elem(a, 0, &e);
    EXPECT_EQ_I(e.v.i64, -2);
    EXPECT_EQ_I(gguf_get_arr(g, "t.bools", GGUF_VT_BOOL, &a, err, sizeof err), 0);
    gguf_arr_elem(a, 1, &e);
    EXPECT(!e.v.b);
    gguf_arr_elem(a, 2, &e);
    EXPECT(e.v.b);

    /* nested: [[1, 2], [], [3]] */
    EXPECT_EQ_I(gguf_get_arr(g, "t.nested", GGUF_VT_ARRAY, &a, err, sizeof err), 0);
    EXPECT_EQ_I(a->v.arr.n, 3);
    if (a->v.arr.n == 3) {
        const gguf_value *x = a->v.arr.elems;
        EXPECT_EQ_I(x[0].type, GGUF_VT_ARRAY);
        EXPECT_EQ_I(x[0].v.arr.type, GGUF_VT_INT32);
        EXPECT_EQ_I(x[0].v.arr.n, 2);
        EXPECT_EQ_I(x[1].v.arr.n, 0);
        EXPECT_EQ_I(x[2].v.arr.n, 1);
        gguf_arr_elem(&x[0], 1, &e);
        EXPECT_EQ_I(e.v.i64, 2);
        gguf_arr_elem(&x[2], 0, &e);
        EXPECT_EQ_I(e.v.i64, 3);
        gguf_arr_elem(a, 2, &e);
        EXPECT_EQ_I(e.type, GGUF_VT_ARRAY);
        EXPECT_EQ_I(e.v.arr.n, 1);
    }
    EXPECT_EQ_I(gguf_get_arr(g, "t.nested_str", GGUF_VT_ARRAY, &a, err, sizeof err), 0);
    EXPECT(a->v.arr.elems[0].v.arr.type == GGUF_VT_STRING && gguf_str_eq(a->v.arr.elems[0].v.arr.strs[0], "x"));
    /* 8 levels deep is accepted */
    EXPECT_EQ_I(gguf_get_arr(g, "t.deep", GGUF_VT_ARRAY, &a, err, sizeof err), 0);
    int depth = 1;
    while (a->v.arr.type == GGUF_VT_ARRAY) a = &a->v.arr.elems[0], depth++;
    EXPECT_EQ_I(depth, 8);
    gguf_arr_elem(a, 1, &e);
    EXPECT_EQ_I(e.v.u64, 9);
    EXPECT_EQ_I(gguf_get_arr(g, "t.empty", GGUF_VT_COUNT, &a, err, sizeof err), 0);
    EXPECT_EQ_I(a->v.arr.n, 0);

    /* keys in file order; offsets point at the key length */
    EXPECT(gguf_str_eq(gguf_kv_at(g, 0)->key, "general.architecture"));
    EXPECT_EQ_I(gguf_kv_at(g, 0)->offset, 24);
    EXPECT(gguf_kv_at(g, N_KV_VALID) == NULL);
    EXPECT_EQ_I(gguf_find_key(g, "general.name"), 2);
    EXPECT_EQ_I(gguf_find_key(g, "nope"), -1);
    EXPECT(gguf_get(g, "general.nam") == NULL);

    /* tensors */
    static const struct { const char *name; uint32_t type, n_dims; int64_t ne[4]; uint64_t off, bytes; } want[] = {
        {"tok.weight", GGML_TYPE_F32, 2, {8, 2, 1, 1}, 0, 64},
        {"q.weight", GGML_TYPE_Q8_0, 2, {64, 2, 1, 1}, 64, 136},
        {"norm", GGML_TYPE_F16, 1, {4, 1, 1, 1}, 224, 8},
        {"blk.0.x", GGML_TYPE_Q4_K, 4, {256, 1, 1, 2}, 256, 288},
    };
    for (int i = 0; i < 4; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, want[i].name);
        EXPECT_MSG(t != NULL, "tensor %s not found", want[i].name);
        if (!t) continue;
        EXPECT(t == gguf_tensor_at(g, (uint64_t)i));
        EXPECT_STR_EQ(t->name, want[i].name);
        EXPECT_EQ_I(t->type, want[i].type);
        EXPECT_EQ_I(t->n_dims, want[i].n_dims);
        for (int d = 0; d < 4; d++) EXPECT_EQ_I(t->ne[d], want[i].ne[d]);
        EXPECT_EQ_I(t->offset, want[i].off);
        EXPECT_EQ_I(t->n_bytes, want[i].bytes);
        EXPECT(t->data == copy + gguf_data_offset(g) + want[i].off);
        EXPECT_EQ_I(((const uint8_t *)t->data)[0], (uint8_t)(want[i].off * 7 + 1));
    }
    EXPECT(gguf_find_tensor(g, "tok.weigh") == NULL);
    EXPECT(gguf_find_tensor(g, "") == NULL);
    EXPECT(gguf_tensor_at(g, 4) == NULL);
out:
    gguf_close(g);
    gguf_close(NULL);
    free(copy);
    free(b.p);
}

TEST(gguf, version2_accepted) {
    gb b = build(M_V2);
    gguf_file *g = NULL;
    char err[512] = "";
    uint8_t *copy;
    EXPECT_MSG(open_copy(b.p, b.n, &g, err, sizeof err, &copy) == 0, "%s", err);
    if (g) EXPECT_EQ_I(gguf_version(g), 2);
    gguf_close(g);
    free(copy);
    free(b.p);
}

TEST(gguf, fingerprint_covers_header_not_data) {
    gb b = build(M_NONE);
    gguf_file *g = NULL, *g2 = NULL;
    char err[512];
    uint8_t *c1, *c2;
    open_copy(b.p, b.n, &g, err, sizeof err, &c1);
    uint64_t f1 = g ? gguf_fingerprint(g) : 0;
    gguf_close(g);
    /* same again: stable */
    open_copy(b.p, b.n, &g, err, sizeof err, &c2);
    EXPECT(g && gguf_fingerprint(g) == f1);
    /* a tensor data byte: same fingerprint */
    c2[b.n - 1] ^= 0xff;
    EXPECT(g && gguf_fingerprint(g) == f1);
    gguf_close(g);
    /* a metadata byte ("tiny" → "tinz"): different */
    uint8_t *p = memmem(c2, b.n, "tiny", 4);
    EXPECT(p != NULL);
    if (p) p[3] = 'z';
    EXPECT_EQ_I(gguf_open_mem(c2, b.n, &g2, err, sizeof err), 0);
    EXPECT(g2 && gguf_fingerprint(g2) != f1);
    gguf_close(g2);
    free(c1);
    free(c2);
    free(b.p);
}

/* ==== broken files ========================================================== */

static const struct {
    enum mut m;
    int code;
    const char *want[3]; /* substrings the message must contain */
} broken[] = {
    {M_BAD_MAGIC, GGUF_EFORMAT, {"bad magic", "offset 0", "'GGUX'"}},
    {M_V1, GGUF_EFORMAT, {"version 1", "expected 2 or 3"}},
    {M_V99, GGUF_EFORMAT, {"version 99", "expected 2 or 3"}},
    {M_BIG_ENDIAN, GGUF_EFORMAT, {"version 50331648", "big-endian"}},
    {M_NT_HUGE, GGUF_EFORMAT, {"n_tensors 4611686018427387904", "impossible"}},
    {M_NKV_HUGE, GGUF_EFORMAT, {"n_kv 4611686018427387904", "impossible"}},
    {M_NT_PLUS1, GGUF_EFORMAT, {"tensor 4"}},
    {M_STR_PAST_EOF, GGUF_EFORMAT, {"key 'general.name'", "length 1048576 exceeds"}},
    {M_KEY_PAST_EOF, GGUF_EFORMAT, {"kv 2", "key at offset", "length 1048576 exceeds"}},
    {M_EMPTY_KEY, GGUF_EFORMAT, {"kv 2", "empty key"}},
    {M_KEY_NUL, GGUF_EFORMAT, {"kv 3", "NUL"}},
    {M_DUP_KEY, GGUF_EFORMAT, {"key 'llama.block_count'", "duplicate key", "first at offset"}},
    {M_VTYPE_BAD, GGUF_EFORMAT, {"key 'llama.block_count'", "value type 13", "expected 0..12"}},
    {M_BOOL_BAD, GGUF_EFORMAT, {"key 't.bool'", "expected 0 or 1, got 2"}},
    {M_ARR_ETYPE_BAD, GGUF_EFORMAT, {"key 't.u32s'", "element type 77"}},
    {M_ARR_HUGE, GGUF_EFORMAT, {"key 't.u32s'", "array of 2305843009213693952 u32"}},
    {M_STRARR_HUGE, GGUF_EFORMAT, {"key 't.strs'", "array of 1152921504606846976 str"}},
    {M_NESTED_HUGE, GGUF_EFORMAT, {"key 't.nested'", "array of 1152921504606846976 arr"}},
    {M_NEST_DEEP, GGUF_EFORMAT, {"key 't.deep'", "nested 9 deep, limit 8"}},
    {M_ALIGN_0, GGUF_EFORMAT, {"general.alignment", "value 0 is not a nonzero power of two"}},
    {M_ALIGN_3, GGUF_EFORMAT, {"general.alignment", "value 3 is not a nonzero power of two"}},
    {M_ALIGN_U64, GGUF_EFORMAT, {"general.alignment", "expected type u32, got u64"}},
    {M_ALIGN_STR, GGUF_EFORMAT, {"general.alignment", "expected type u32, got str"}},
    {M_NDIMS_0, GGUF_EFORMAT, {"tensor 'norm'", "n_dims 0", "expected 1..4"}},
    {M_NDIMS_5, GGUF_EFORMAT, {"tensor 'norm'", "n_dims 5", "expected 1..4"}},
    {M_DIM_0, GGUF_EFORMAT, {"tensor 'tok.weight'", "dimension 1", "is 0, expected >= 1"}},
    {M_DIM_NEG, GGUF_EFORMAT, {"tensor 'tok.weight'", "dimension 1", "is -2, expected >= 1"}},
    {M_DIM_OVERFLOW, GGUF_EFORMAT, {"tensor 'tok.weight'", "overflow"}},
    {M_BYTES_OVERFLOW, GGUF_EFORMAT, {"tensor 'tok.weight'", "overflows 64 bits"}},
    {M_ROW_OVERFLOW, GGUF_EFORMAT, {"tensor 'tok.weight'", "overflows 64 bits"}},
    {M_TYPE_99, GGUF_EFORMAT, {"tensor 'q.weight'", "unknown ggml type id 99"}},
    {M_TYPE_4, GGUF_EFORMAT, {"tensor 'q.weight'", "unknown ggml type id 4"}},
    {M_BLOCK_MULT, GGUF_EFORMAT, {"tensor 'q.weight'", "ne[0] = 33 is not a multiple of the block size 32", "Q8_0"}},
    {M_NAME_EMPTY, GGUF_EFORMAT, {"tensor 0", "empty name"}},
    {M_DUP_TENSOR, GGUF_EFORMAT, {"tensor 'q.weight'", "duplicate tensor name", "tensor 1"}},
    {M_TENSOR_PAST_EOF, GGUF_EFORMAT, {"tensor 'blk.0.x'", "+ 288 bytes past end of file"}},
    {M_TENSOR_OFF_HUGE, GGUF_EFORMAT, {"tensor 'blk.0.x'", "past end of file"}},
    {M_OVERLAP, GGUF_EFORMAT, {"tensor 'q.weight'", "[32, 168) overlaps tensor 'tok.weight' [0, 64)"}},
    {M_UNALIGNED, GGUF_EFORMAT, {"tensor 'norm'", "data offset 208 is not a multiple of the alignment 32"}},
    {M_DATA_TRUNC, GGUF_EFORMAT, {"tensor 'blk.0.x'", "past end of file"}},
};

TEST(gguf, broken_files_rejected_with_one_line_errors) {
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        gb b = build(broken[i].m);
        gguf_file *g = (gguf_file *)&b; /* must be reset to NULL */
        char err[512] = "";
        uint8_t *copy;
        int rc = open_copy(b.p, b.n, &g, err, sizeof err, &copy);
        EXPECT_MSG(rc == broken[i].code, "mutation %d: rc %d, expected %d (%s)", broken[i].m, rc, broken[i].code, err);
        EXPECT_MSG(g == NULL, "mutation %d: handle not NULL on error", broken[i].m);
        if (getenv("CINFER_SHOW_ERRORS")) printf("    mutation %2d: %s\n", broken[i].m, err);
        EXPECT_MSG(!strncmp(err, "gguf: ", 6) && one_line(err), "mutation %d: message not one 'gguf: ' line: %s",
                   broken[i].m, err);
        for (int k = 0; k < 3 && broken[i].want[k]; k++)
            EXPECT_MSG(strstr(err, broken[i].want[k]), "mutation %d: message lacks \"%s\": %s", broken[i].m,
                       broken[i].want[k], err);
        if (rc == 0) gguf_close(g);
        free(copy);
        free(b.p);
    }
}

/* Every prefix of the valid file (whose last tensor ends at end of file) must
 * be refused cleanly: through the header, metadata, tensor table, padding and
 * data. */
TEST(gguf, truncated_at_every_offset) {
    gb b = build(M_NONE);
    int failures = 0;
    /* where the last tensor's u64 offset field starts: name, n_dims, 4 dims, type */
    const uint8_t *name = memmem(b.p, b.n, "blk.0.x", 7);
    size_t last_off_field = name ? (size_t)(name - b.p) + 7 + 4 + 4 * 8 + 4 : 0;
    for (size_t n = 0; n < b.n; n++) {
        gguf_file *g = NULL;
        char err[512] = "";
        uint8_t *copy;
        int rc = open_copy(b.p, n, &g, err, sizeof err, &copy);
        if (rc != GGUF_EFORMAT || g || strncmp(err, "gguf: ", 6) || !one_line(err)) {
            if (failures++ < 5) test_fail(__FILE__, __LINE__, "prefix %zu: rc %d, err '%s'", n, rc, err);
        }
        if (n == 40) EXPECT_MSG(strstr(err, "n_kv 25 at offset 16 is impossible: 16 bytes left"), "%s", err);
        if (n == last_off_field + 3)
            EXPECT_MSG(strstr(err, "tensor 'blk.0.x' (offset ") && strstr(err, "data offset at offset") &&
                       strstr(err, "need 8 bytes, 3 left"), "%s", err);
        if (n == b.n - 1) EXPECT_MSG(strstr(err, "tensor 'blk.0.x': data offset"), "%s", err);
        if (n == 10) EXPECT_MSG(strstr(err, "file is 10 bytes, a GGUF header needs 24"), "%s", err);
        gguf_close(g);
        free(copy);
    }
    EXPECT_EQ_I(failures, 0);
    free(b.p);
}

/* The error buffer may be tiny or absent; the return code still says what. */
TEST(gguf, small_or_null_error_buffer) {
    gb b = build(M_TYPE_99);
    gguf_file *g = NULL;
    char err[8];
    memset(err, 'x', sizeof err);
    EXPECT_EQ_I(gguf_open_mem(b.p, b.n, &g, err, sizeof err), GGUF_EFORMAT);
    EXPECT_EQ_I(strlen(err), 7);
    EXPECT_EQ_I(gguf_open_mem(b.p, b.n, &g, NULL, 0), GGUF_EFORMAT);
    EXPECT_EQ_I(gguf_open_mem(NULL, 0, &g, err, sizeof err), GGUF_EFORMAT);
    free(b.p);
}

/* A vocab-only file may end right after its tables, without padding. */
TEST(gguf, no_tensors_no_padding) {
    gb b = {0};
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 0);
    gb_u64(&b, 1);
    gb_key(&b, "general.architecture", GGUF_VT_STRING);
    gb_str(&b, "x"); /* 24 + 8 + 20 + 4 + 9 = 65 bytes, not a multiple of 32 */
    gguf_file *g = NULL;
    char err[256] = "";
    uint8_t *copy;
    EXPECT_MSG(open_copy(b.p, b.n, &g, err, sizeof err, &copy) == 0, "%s", err);
    if (g) {
        EXPECT_EQ_I(gguf_data_offset(g), b.n);
        EXPECT_EQ_I(gguf_n_tensors(g), 0);
    }
    gguf_close(g);
    free(copy);
    free(b.p);
}

TEST(gguf, open_errors_name_the_path) {
    gguf_file *g = NULL;
    char err[512];
    EXPECT_EQ_I(gguf_open("/nonexistent/x.gguf", &g, err, sizeof err), GGUF_EIO);
    EXPECT_MSG(strstr(err, "'/nonexistent/x.gguf'") && strstr(err, "No such file"), "%s", err);
    EXPECT_EQ_I(gguf_open("/tmp", &g, err, sizeof err), GGUF_EIO);
    EXPECT_MSG(strstr(err, "not a regular file"), "%s", err);
    char path[512];
    snprintf(path, sizeof path, "%s/empty.gguf", test_tmpdir());
    FILE *f = fopen(path, "wb");
    if (f) fclose(f);
    EXPECT_EQ_I(gguf_open(path, &g, err, sizeof err), GGUF_EFORMAT);
    EXPECT_MSG(strstr(err, "empty"), "%s", err);
    EXPECT(g == NULL);
}

TEST(gguf, open_file_maps_and_validates) {
    gb b = build(M_NONE);
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/valid.gguf", test_tmpdir());
    FILE *f = fopen(path, "wb");
    EXPECT(f && fwrite(b.p, 1, b.n, f) == b.n);
    if (f) fclose(f);
    gguf_file *g = NULL;
    EXPECT_MSG(gguf_open(path, &g, err, sizeof err) == 0, "%s", err);
    if (g) {
        const gguf_tensor *t = gguf_find_tensor(g, "blk.0.x");
        EXPECT(t && !memcmp(t->data, b.p + b.n - 288, 288));
        EXPECT_EQ_I(gguf_size(g), b.n);
    }
    gguf_close(g);
    free(b.p);
}

/* ==== typed accessors ======================================================= */

TEST(gguf, typed_accessor_errors) {
    gb b = build(M_NONE);
    gguf_file *g = NULL;
    char err[512] = "";
    EXPECT_EQ_I(gguf_open_mem(b.p, b.n, &g, err, sizeof err), 0);
    if (!g) {
        free(b.p);
        return;
    }
    uint32_t u32 = 77;
    int64_t i64;
    float f;
    bool bo;
    gguf_str s;
    const gguf_value *a;
    EXPECT_EQ_I(gguf_get_u32(g, "llama.nope", &u32, err, sizeof err), GGUF_ENOTFOUND);
    EXPECT_STR_EQ(err, "gguf: key 'llama.nope' not found");
    EXPECT_EQ_I(u32, 77);
    EXPECT_EQ_I(gguf_get_u32(g, "general.name", &u32, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 'general.name': expected u32, got str");
    EXPECT_EQ_I(gguf_get_u32(g, "t.i32neg", &u32, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.i32neg': value -1 (i32) out of range for u32");
    EXPECT_EQ_I(gguf_get_u32(g, "t.u64", &u32, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.u64': value 1099511627776 (u64) out of range for u32");
    uint64_t u64 = 0;
    EXPECT_EQ_I(gguf_get_u64(g, "t.i64", &u64, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.i64': value -1099511627776 (i64) out of range for u64");
    EXPECT_EQ_I(gguf_get_i64(g, "t.f32", &i64, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.f32': expected i64, got f32");
    EXPECT_EQ_I(gguf_get_f32(g, "t.u32", &f, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.u32': expected f32, got u32");
    EXPECT_EQ_I(gguf_get_bool(g, "t.u8", &bo, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.u8': expected bool, got u8");
    EXPECT_EQ_I(gguf_get_str(g, "t.strs", &s, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.strs': expected str, got array of 4 str");
    EXPECT_EQ_I(gguf_get_arr(g, "t.strs", GGUF_VT_UINT32, &a, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.strs': expected array of u32, got array of 4 str");
    EXPECT_EQ_I(gguf_get_arr(g, "t.u8", GGUF_VT_COUNT, &a, err, sizeof err), GGUF_ETYPE);
    EXPECT_STR_EQ(err, "gguf: key 't.u8': expected array of any, got u8");
    EXPECT_EQ_I(gguf_get_str(g, "missing", &s, NULL, 0), GGUF_ENOTFOUND);
    EXPECT_STR_EQ(gguf_vtype_name(99), "invalid");
    EXPECT_EQ_I(gguf_vtype_size(GGUF_VT_UINT16), 2);
    EXPECT_EQ_I(gguf_vtype_size(GGUF_VT_STRING), 0);
    gguf_close(g);
    free(b.p);
}

/* ==== type table ============================================================ */

/* ggml's block size and bytes per block for every type id, as listed in
 * ggml.c type_traits (written out independently of gguf.c's table). */
TEST(gguf, ggml_type_table_matches_ggml) {
    static const struct { uint32_t id; const char *name; uint32_t blck, size; } ggml[] = {
        {0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22}, {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {9, "Q8_1", 32, 36},
        {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
        {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 256, 110},
        {22, "IQ2_S", 256, 82}, {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1}, {25, "I16", 1, 2},
        {26, "I32", 1, 4}, {27, "I64", 1, 8}, {28, "F64", 1, 8}, {29, "IQ1_M", 256, 56},
        {30, "BF16", 1, 2}, {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66}, {39, "MXFP4", 32, 17},
    };
    int known = 0;
    for (uint32_t id = 0; id < 64; id++) {
        const ggml_type_info *ti = ggml_type_get(id);
        int k = -1;
        for (size_t i = 0; i < sizeof ggml / sizeof ggml[0]; i++)
            if (ggml[i].id == id) k = (int)i;
        if (k < 0) {
            EXPECT_MSG(ti == NULL, "type id %u should be unknown", id);
            EXPECT_STR_EQ(ggml_type_name(id), "unknown");
            EXPECT_EQ_I(ggml_row_bytes(id, 256), 0);
            continue;
        }
        known++;
        EXPECT_MSG(ti != NULL, "type id %u missing", id);
        if (!ti) continue;
        EXPECT_STR_EQ(ti->name, ggml[k].name);
        EXPECT_STR_EQ(ggml_type_name(id), ggml[k].name);
        EXPECT_EQ_I(ti->blck_size, ggml[k].blck);
        EXPECT_EQ_I(ti->type_size, ggml[k].size);
        EXPECT_EQ_I(ggml_row_bytes(id, 4096), 4096 / ggml[k].blck * ggml[k].size);
        if (ggml[k].blck > 1) EXPECT_EQ_I(ggml_row_bytes(id, ggml[k].blck + 1), 0);
    }
    EXPECT_EQ_I(known, 32);
    EXPECT_EQ_I(ggml_row_bytes(GGML_TYPE_F32, UINT64_MAX), 0); /* overflow */
    EXPECT_STR_EQ(gguf_file_type_name(15), "MOSTLY_Q4_K_M");
    EXPECT_STR_EQ(gguf_file_type_name(36), "MOSTLY_TQ1_0");
    EXPECT_STR_EQ(gguf_file_type_name(5), "unknown");
    EXPECT_STR_EQ(gguf_file_type_name(1000), "unknown");
}

/* ==== the command line on broken files ====================================== */

TEST(gguf, cli_inspect_broken_files_exit_nonzero_one_line) {
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    static const struct { enum mut m; const char *want; } cases[] = {
        {M_TENSOR_PAST_EOF, "tensor 'blk.0.x': data offset"},
        {M_TYPE_99, "unknown ggml type id 99"},
        {M_NKV_HUGE, "n_kv 4611686018427387904"},
        {M_NEST_DEEP, "nested 9 deep"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gb b = build(cases[i].m);
        char path[512], cmd[1024];
        snprintf(path, sizeof path, "%s/broken-%d.gguf", test_tmpdir(), cases[i].m);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(b.p, 1, b.n, f);
            fclose(f);
        }
        free(b.p);
        for (int json = 0; json < 2; json++) {
            snprintf(cmd, sizeof cmd, "%s inspect %s '%s' 2>&1 >/dev/null", cinfer_bin(), json ? "--json" : "", path);
            char *out = NULL;
            int st = run_cmd(cmd, false, &out);
            EXPECT_MSG(st == 1, "%s: exit %d, expected 1", cmd, st);
            size_t len = out ? strlen(out) : 0;
            EXPECT_MSG(len > 0 && out[len - 1] == '\n' && strchr(out, '\n') == out + len - 1,
                       "%s: stderr is not exactly one line: '%s'", cmd, out ? out : "");
            EXPECT_MSG(out && strstr(out, cases[i].want) && strstr(out, "cinfer inspect: "),
                       "%s: stderr lacks '%s': %s", cmd, cases[i].want, out ? out : "");
            free(out);
        }
    }
}

/* One tensor (type, ne0 elements) at data offset `off` after a table with
 * general.alignment = align, optionally a cinfer.version key; *table_end:
 * where the table ends (the data section starts there rounded up to align). */
static gb build_aligned(uint32_t align, uint32_t type, int64_t ne0, uint64_t off, bool giw, size_t *table_end) {
    gb b = {0};
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 1);
    gb_u64(&b, giw ? 2 : 1);
    gb_key(&b, "general.alignment", GGUF_VT_UINT32);
    gb_u32(&b, align);
    if (giw) gb_key(&b, "cinfer.version", GGUF_VT_STRING), gb_str(&b, "0.1.0");
    int64_t ne[1] = {ne0};
    gb_tensor(&b, "t", 1, ne, type, off);
    *table_end = b.n;
    while (b.n % align) gb_u8(&b, 0);
    for (uint64_t i = 0; i < off + 256; i++) gb_u8(&b, 0);
    return b;
}

/* general.alignment may be any power of two, even 1, but a tensor's data must
 * still sit at its element alignment (else kernels do misaligned loads,
 * which UBSan reports); a .giw needs general.alignment >= 64. */
TEST(gguf, tensor_data_element_aligned) {
    struct {
        uint32_t align, type;
        int64_t ne0;
        uint32_t need; /* element alignment; 0: a .giw, refused whatever the offset */
        const char *want;
    } cases[] = {
        {1, GGML_TYPE_F32, 8, 4, "not aligned to 4 bytes as type F32 needs (general.alignment is 1)"},
        {2, GGML_TYPE_F32, 8, 4, "not aligned to 4 bytes as type F32 needs (general.alignment is 2)"},
        {1, GGML_TYPE_F16, 8, 2, "not aligned to 2 bytes as type F16 needs"},
        {1, GGML_TYPE_F64, 8, 8, "not aligned to 8 bytes as type F64 needs"},
        {1, GGML_TYPE_Q8_0, 32, 2, "not aligned to 2 bytes as type Q8_0 needs"},
        {1, GGML_TYPE_I8, 8, 1, ""},
        {32, GGML_TYPE_F32, 8, 0, "a .giw file (one with a cinfer.version key) needs >= 64, got 32"},
        {1, GGML_TYPE_F32, 8, 0, "needs >= 64, got 1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n_ok = 0, n_bad = 0;
        for (uint64_t off = 0; off < 16; off += cases[k].align) {
            size_t end;
            gb b = build_aligned(cases[k].align, cases[k].type, cases[k].ne0, off, cases[k].need == 0, &end);
            uint64_t at = (end + cases[k].align - 1) / cases[k].align * cases[k].align + off;
            bool bad = cases[k].need == 0 || at % cases[k].need != 0;
            gguf_file *g = NULL;
            char err[512] = "";
            uint8_t *copy;
            int rc = open_copy(b.p, b.n, &g, err, sizeof err, &copy);
            if (bad)
                EXPECT_MSG(rc == GGUF_EFORMAT && strstr(err, cases[k].want) && one_line(err),
                           "case %zu, data at %llu: rc %d: %s", k, (unsigned long long)at, rc, err);
            else
                EXPECT_MSG(rc == 0 && g && ((const uint8_t *)gguf_tensor_at(g, 0)->data - copy) == (ptrdiff_t)at,
                           "case %zu, data at %llu: rc %d: %s", k, (unsigned long long)at, rc, err);
            n_bad += bad, n_ok += !bad;
            gguf_close(g);
            free(copy);
            free(b.p);
        }
        /* each case saw what it is about */
        EXPECT_MSG(cases[k].need == 0 ? n_bad > 0 : n_ok > 0 && (cases[k].need <= 1 || n_bad > 0),
                   "case %zu: %d accepted, %d refused offsets", k, n_ok, n_bad);
    }
    /* the .giw control: alignment 64 opens */
    size_t end;
    gb b = build_aligned(64, GGML_TYPE_F32, 8, 64, true, &end);
    gguf_file *g = NULL;
    char err[512] = "";
    uint8_t *copy;
    EXPECT_MSG(open_copy(b.p, b.n, &g, err, sizeof err, &copy) == 0, "%s", err);
    gguf_close(g);
    free(copy);
    free(b.p);
}
