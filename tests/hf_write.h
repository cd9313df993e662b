/*
 * hf_write.h — test-side writers for Hugging Face checkpoint folders
 * (formats/hf.h reads them):
 *   - safetensors files and text files;
 *   - a GGUF model written back as an HF folder through the inverse of its
 *     family's mapping table (archspecs/<arch>.hf.lua): names, transforms
 *     (norm offsets, Conv1D transposes, llama.cpp's Q/K permutation undone),
 *     config.json from the hparams, a tokenizer.json from the GGUF vocabulary;
 *   - an assembled HF file written as a GGUF with llama.cpp's conventions
 *     (Q/K rows permuted as convert_hf_to_gguf.py does, no rope.layout key);
 *   - GPTQ (AutoGPTQ v1 / GPTQModel v2) and AWQ (AutoAWQ GEMM) packers that
 *     quantize given F32 weights and pack them the way those libraries store
 *     them, returning the exact values s·(q − z) a correct loader reproduces.
 * Errors: 0 or -1 with a message in err.
 */
#ifndef CINFER_TEST_HF_WRITE_H
#define CINFER_TEST_HF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

typedef struct {
    char name[200];   /* HF tensor name */
    uint32_t dtype;   /* ST_* (formats/safetensors.h) */
    int n_dims;
    int64_t shape[4]; /* row-major: shape[0] outermost */
    void *data;       /* owned (free) */
    size_t n_bytes;
} hfw_tensor;

/* Write tensors as one safetensors file (header padded to 8 bytes). */
int hfw_safetensors(const char *path, const hfw_tensor *t, size_t n, char *err, size_t err_len);
/* Write text into dir/name. */
int hfw_text(const char *dir, const char *name, const char *text, char *err, size_t err_len);
void hfw_tensors_free(hfw_tensor *t, size_t n);

typedef struct {
    uint32_t dtype;  /* ST_F32 (default 0 = F32), ST_F16 or ST_BF16 for every tensor */
    int n_shards;    /* > 1: model-0000i-of-0000n.safetensors + model.safetensors.index.json */
    bool tokenizer;  /* write tokenizer.json + tokenizer_config.json from the GGUF vocabulary */
    const char *tokenizer_json; /* instead: copy this tokenizer.json file */
} hfw_opts;

/* The GGUF model g as a Hugging Face folder dir (created). */
int hfw_from_gguf(const gguf_file *g, const char *dir, const hfw_opts *o, char *err, size_t err_len);
/* Tensors of g in HF form (names, transforms, dtype), before writing: *out
 * (n) owned by the caller (hfw_tensors_free). */
int hfw_hf_tensors(const gguf_file *g, uint32_t dtype, hfw_tensor **out, size_t *n, char *err, size_t err_len);

/* The assembled HF file hf (hf_open) as an F32 GGUF at path, llama.cpp's way. */
int hfw_gguf_from_hf(const gguf_file *hf, const char *path, char *err, size_t err_len);

/* ---- GPTQ / AWQ ------------------------------------------------------------- */

enum { HFW_GPTQ = 1, HFW_GPTQ_V2, HFW_AWQ };

typedef struct {
    int format;      /* HFW_* */
    int bits;        /* 2, 3, 4, 8 (AWQ: 4) */
    int group_size;  /* -1: one group */
    bool sym;        /* GPTQ symmetric (zero = 2^(bits-1)) */
    bool act_order;  /* GPTQ desc_act: a permutation decides the groups (g_idx) */
    uint64_t seed;   /* for the act-order permutation */
} hfw_quant;

/* Quantize W (n_out rows of n_in, row-major, the Linear's weight) and pack
 * it as module `module` ("model.layers.0.self_attn.q_proj"): appends the
 * parts (qweight, qzeros, scales, and g_idx for GPTQ) to *ts (grown with
 * realloc; *n updated).  deq (n_out * n_in) receives the exact values the
 * packed form means, s·(q − z), row-major like W. */
int hfw_quantize(const hfw_quant *q, const char *module, const float *W, int n_out, int n_in, hfw_tensor **ts,
                 size_t *n, float *deq, char *err, size_t err_len);
/* The config.json "quantization_config" object for q, as JSON text (static). */
const char *hfw_quant_config(const hfw_quant *q);

#endif
