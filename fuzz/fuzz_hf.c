/*
 * fuzz_hf.c — libFuzzer target for Hugging Face checkpoint folders
 * (formats/hf.c): the input is cut at 0x1e bytes into config.json,
 * model.safetensors.index.json, model.safetensors, tokenizer_config.json and
 * quantize_config.json (a missing or empty part leaves the file out), written
 * into a scratch folder, and opened with hf_open.  Built and run by
 * `make fuzz-hf` (clang -fsanitize=fuzzer,address,undefined); seeds from
 * `make fuzz-hf` too: the TinyStories folder's config with a two-tensor
 * checkpoint, sharded and GPTQ variants.  Beyond "no crash, no sanitizer
 * report": an error is one line beginning "hf: "; on success every tensor's
 * bytes are touched (ASan sees an overrun) and its size matches its type.
 */
#include "formats/gguf.h"
#include "formats/hf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static volatile uint8_t sink;
static char dir[256];

static const char *const files[] = {"config.json", "model.safetensors.index.json", "model.safetensors",
                                    "tokenizer_config.json", "quantize_config.json"};

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    if (!n) return;
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz-hf-XXXXXX");
        CHECK(mkdtemp(dir));
    }
    size_t start = 0;
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        size_t end = start;
        while (end < size && data[end] != 0x1e) end++;
        put(files[k], data + (start < size ? start : size), start < size ? end - start : 0);
        start = end + 1;
    }
    char err[1024];
    gguf_file *g = NULL;
    int rc = hf_open(dir, &g, err, sizeof err);
    if (rc) {
        CHECK(g == NULL);
        CHECK(!strncmp(err, "hf: ", 4) && !strchr(err, '\n'));
        return 0;
    }
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        CHECK(gguf_find_tensor(g, t->name) == t);
        CHECK(t->n_bytes == ggml_row_bytes(t->type, (uint64_t)t->ne[0]) * (t->n_elems / (uint64_t)t->ne[0]));
        const uint8_t *p = t->data;
        if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
    }
    gguf_close(g);
    return 0;
}
