/*
 * fuzz_gguf.c — libFuzzer target for the model-file parsers: the GGUF loader
 * (gguf_open_mem), and on the same bytes the safetensors reader and format
 * detection.  Built and run by `make fuzz` (clang -fsanitize=fuzzer,address,
 * undefined).  Beyond "no crash, no sanitizer report" it checks the loader's
 * contract: an error is one line beginning "gguf: ", and on success every
 * key and tensor is reachable through the lookups and every tensor's bytes
 * lie inside the input (touched, so ASan sees any overrun).  The same bytes
 * also go through gguf_open_parts as the header image of an assembled file
 * (formats/hf.h) with a virtual data section.
 */
#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "formats/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static volatile uint8_t sink;

static void walk_value(const gguf_value *v, int depth) {
    CHECK(depth <= 16);
    if (v->type == GGUF_VT_STRING && v->v.str.len) sink ^= (uint8_t)v->v.str.ptr[v->v.str.len - 1];
    if (v->type != GGUF_VT_ARRAY) return;
    uint64_t n = v->v.arr.n;
    for (uint64_t i = 0; i < n && i < 64; i++) {
        gguf_value e;
        CHECK(gguf_arr_elem(v, i, &e) == GGUF_OK);
        walk_value(&e, depth + 1);
    }
    if (n) { /* the last element too: the index must cover all n */
        gguf_value e;
        CHECK(gguf_arr_elem(v, n - 1, &e) == GGUF_OK);
        walk_value(&e, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    gguf_file *g = NULL;
    int rc = gguf_open_mem(data, size, &g, err, sizeof err);
    if (rc) {
        CHECK(g == NULL);
        CHECK(!strncmp(err, "gguf: ", 6) && !strchr(err, '\n'));
    } else {
        CHECK(gguf_data_offset(g) <= size && gguf_alignment(g) && !(gguf_alignment(g) & (gguf_alignment(g) - 1)));
        for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
            const gguf_kv *kv = gguf_kv_at(g, i);
            char key[512];
            if (kv->key.len < sizeof key) {
                memcpy(key, kv->key.ptr, kv->key.len);
                key[kv->key.len] = 0;
                CHECK(gguf_find_key(g, key) == (int64_t)i);
                uint32_t u32;
                float f;
                gguf_str s;
                gguf_get_u32(g, key, &u32, err, sizeof err);
                gguf_get_f32(g, key, &f, err, sizeof err);
                gguf_get_str(g, key, &s, err, sizeof err);
            }
            walk_value(&kv->value, 0);
        }
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            CHECK(gguf_find_tensor(g, t->name) == t);
            CHECK(t->n_bytes > 0 && (const uint8_t *)t->data >= data &&
                  (const uint8_t *)t->data + t->n_bytes <= data + size);
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
        }
        (void)gguf_fingerprint(g);
        gguf_close(g);
    }

    /* the same bytes as the header image of an assembled file (gguf_open_parts):
     * every tensor's data is one zeroed buffer, the virtual data section 1 MiB */
    static uint64_t zeros[1 << 17];
    static const void *ptrs[64];
    uint64_t n_t = 0;
    if (size >= 16) memcpy(&n_t, data + 8, 8);
    if (n_t <= 64) {
        for (uint64_t i = 0; i < n_t; i++) ptrs[i] = zeros;
        gguf_parts parts = {.data = ptrs, .n_data = n_t, .data_bytes = sizeof zeros};
        gguf_file *pg = NULL;
        if (gguf_open_parts(data, size, &parts, &pg, err, sizeof err) == 0) {
            for (uint64_t i = 0; i < gguf_n_tensors(pg); i++) {
                const gguf_tensor *t = gguf_tensor_at(pg, i);
                CHECK(t->data == zeros && t->n_bytes <= sizeof zeros);
            }
            (void)gguf_fingerprint(pg);
            gguf_close(pg);
        } else {
            CHECK(pg == NULL && !strncmp(err, "gguf: ", 6) && !strchr(err, '\n'));
        }
    }

    st_file *s = NULL;
    if (st_open_mem(data, size, &s, err, sizeof err) == 0) {
        for (uint64_t i = 0; i < st_n_tensors(s); i++) {
            const st_tensor *t = st_tensor_at(s, i);
            CHECK(st_find_tensor(s, t->name) == t);
            if (t->n_bytes) sink ^= ((const uint8_t *)t->data)[t->n_bytes - 1];
        }
        st_close(s);
    } else {
        CHECK(!strncmp(err, "safetensors: ", 13) && !strchr(err, '\n'));
    }
    (void)modelfile_detect_mem(data, size < 16 ? size : 16, size, err, sizeof err);
    return 0;
}
