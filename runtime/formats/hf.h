/*
 * hf.h — Hugging Face checkpoint folders as GGUF models.
 *
 * Owns: reading a folder as `transformers` writes it —
 *   config.json                   hyperparameters, "architectures", quantization_config
 *   model.safetensors, or shards named by model.safetensors.index.json ("weight_map")
 *   tokenizer.json, tokenizer_config.json, chat_template.jinja / .json,
 *   generation_config.json        tokenizer, chat template, end-of-generation ids
 *   quantize_config.json (AutoGPTQ), quant_config.json (AutoAWQ)   when config.json has none
 * — and presenting it as a gguf_file assembled from parts (gguf.h
 * gguf_open_parts) with llama.cpp's names and conventions, so everything
 * that takes a GGUF (compiler, engine, tokenizer, chat templates, .giw,
 * bundles) takes the folder too.
 *
 * The mapping per family is data: archspecs/<arch>.hf.lua next to the
 * archspec it feeds (hf_map below, the vocabulary of those files):
 *   architectures = {"LlamaForCausalLM", ...}   config.json "architectures"[0] it serves
 *   hparams = {KEY = ENTRY, ...}     GGUF "<arch>.KEY" from config.json; ENTRY is
 *       "name"                          required config key
 *       opt("name")                     only when present (and not null)
 *       {"name", DEFAULT}               DEFAULT (a value, or function(config)) when absent
 *       {..., null = V}                 V when the key is present but null
 *       float(ENTRY)                    a float key (JSON may write 10000 for 10000.0)
 *   constants = {KEY = VALUE}         GGUF "<arch>.KEY" set to VALUE
 *   expect = {NAME = SPEC}            config values the archspec computes, else refused:
 *       SPEC a value, null (absent or null), a list of allowed values, or
 *       function(value, config) -> true when allowed; absent keys pass
 *   tie_word_embeddings = BOOL        HF's default when config.json lacks the key
 *   tied_output = "alias"            tied: output.weight is the embedding (same data);
 *                                    otherwise (default) output.weight is left out
 *   strip_prefix = {"transformer."}  removed from tensor names before matching
 *   tensors = {{HF_MODULE, GGUF_NAME, OPTIONS}, ...}   "%d" stands for the layer;
 *       HF_MODULE.weight -> GGUF_NAME.weight, .bias -> .bias, GPTQ/AWQ parts -> .weight
 *       add = X          GGUF value = HF value + X (Gemma's (1 + w) norms); F32 copy
 *       transpose = true HF stores (in, out) (GPT-2 Conv1D); transposed copy
 *       permute = KEY    the GGUF file of llama.cpp's converter permutes these rows
 *                        (RoPE pairs) with head count "<arch>.KEY"; the loader keeps
 *                        HF order (the mapping then sets rope.layout), writers of
 *                        GGUF-order files apply it (hf_permute_rows)
 *   ignore = {HF_NAME, ...}           tensors to skip (buffers such as rotary inv_freq)
 * Every other tensor is an error naming it: nothing is silently dropped.
 *
 * Tensors: F32, F16 and BF16 matrices point into the safetensors mappings
 * (zero copy) unless a transform or misalignment forces a copy; vectors
 * (norms, biases) are converted to F32, as llama.cpp's converter writes them.
 * Shapes reversed (safetensors is row-major, GGUF ne[0] is the row).
 * Tied embeddings (config tie_word_embeddings): a checkpoint that stores only
 * lm_head uses it as token_embd.
 *
 * GPTQ (AutoGPTQ/GPTQModel: qweight, qzeros, scales, g_idx; 2/3/4/8 bits,
 * any group size, act-order, sym or not, checkpoint_format gptq or gptq_v2)
 * and AWQ (AutoAWQ GEMM packing, 4 bits) modules are re-expressed losslessly
 * at load: w = s·(q − z) with s the fp16 scale becomes ggml Q4_0 (d = s,
 * code = q − z + 8) when every q − z of the tensor lies in [−8, 7], Q5_0
 * when in [−16, 15], Q8_0 when in [−128, 127] — exact, as the kernels
 * compute d·code in f32 — provided every 32-element block of a row shares
 * one group (group size a multiple of 32, act-order whose g_idx keeps blocks
 * whole) and every scale is an fp16 value; otherwise the tensor is the exact
 * F32 dequantization (4 bytes per weight).  --quant precisions then apply as
 * to any GGUF of those types.  The re-expression runs at open, on one thread
 * per CPU (strips of outputs), into memory the assembled file owns.
 *
 * Metadata written: general.architecture, general.name (config.json
 * _name_or_path, else the folder's name, ORG/NAME for a Hugging Face cache
 * snapshot .../models--ORG--NAME/snapshots/REV), the
 * hparams/constants, tokenizer.huggingface.json (the tokenizer.json text, the
 * GGUF spec's key), tokenizer.huggingface.config (the tokenizer_config.json
 * text), tokenizer.huggingface.eos_token_ids (i32 array from
 * generation_config.json / config.json eos_token_id), tokenizer.chat_template
 * (and tokenizer.chat_template.NAME for named templates).
 *
 * Hostile input: every file is size-capped, every JSON value type-checked,
 * shard names from the index must be plain file names in the folder (no
 * '/', no leading '.'), every shape and dtype checked against what the
 * mapping and the quantization format imply.  Errors: 0 or a negative GGUF_E*
 * code (gguf.h) with one line "hf: DIR: what (where, expected vs actual)".
 * Never exits, never prints.
 */
#ifndef CINFER_HF_H
#define CINFER_HF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* Largest config-like JSON file read (config.json, the index, tokenizer files). */
#define HF_MAX_JSON_BYTES (64u << 20)

/* True when path is a directory holding a config.json. */
bool hf_is_folder(const char *path);

/* Open the checkpoint folder dir (see above).  *out is closed with
 * gguf_close, which also unmaps the shards. */
int hf_open(const char *dir, gguf_file **out, char *err, size_t err_len);

/* ---- the mapping tables -------------------------------------------------- */

typedef struct {
    char *hf;        /* HF module pattern, "model.layers.%d.self_attn.q_proj" */
    char *gguf;      /* GGUF tensor base, "blk.%d.attn_q" */
    char *permute;   /* NULL, or the hparam key of the head count ("attention.head_count") */
    float add;       /* GGUF value = HF value + add */
    bool transpose;  /* HF stores the transpose (in, out) */
} hf_map_tensor;

typedef struct {
    char *key;        /* GGUF key without the "<arch>." prefix */
    char *config_key; /* the config.json key it comes from */
    bool is_float;
} hf_map_hparam;

typedef struct {
    char arch[64];            /* "llama": the archspec, general.architecture */
    char file[128];           /* "archspecs/llama.hf.lua" */
    char **architectures;     /* (n_architectures) config.json names */
    size_t n_architectures;
    hf_map_tensor *tensors;   /* (n_tensors) in file order */
    size_t n_tensors;
    hf_map_hparam *hparams;   /* (n_hparams) sorted by key */
    size_t n_hparams;
    char **constant_keys;     /* (n_constants) keys of `constants` */
    size_t n_constants;
    char **ignore;            /* (n_ignore) */
    size_t n_ignore;
    char **strip_prefix;      /* (n_strip_prefix) */
    size_t n_strip_prefix;
    bool tie_default;
    bool output_alias;
    void *lua;                /* the Lua state holding the table (private) */
} hf_map;

/* The mapping of archspec `arch` ("llama"; archspecs/llama.hf.lua), or of the
 * one whose `architectures` list holds the config.json name `hf_arch`
 * ("LlamaForCausalLM") when arch is NULL.  0, GGUF_ENOTFOUND (no mapping:
 * err lists the supported names) or GGUF_EFORMAT (a broken mapping file,
 * with its file:line). */
int hf_map_load(const char *arch, const char *hf_arch, hf_map **out, char *err, size_t err_len);
void hf_map_free(hf_map *m); /* NULL is a no-op */

/* HF name `name` matched against pattern `pat` (at most one "%d"): 1 and the
 * layer in *layer (-1 without "%d"), or 0. */
int hf_match(const char *pat, const char *name, int *layer);

/* llama.cpp's Q/K row permutation (convert_hf_to_gguf LlamaModel.permute):
 * a (n_rows, row_bytes) matrix of n_head heads, HF rotate-half row order ->
 * GGUF pair order (to_gguf) or back.  GGUF row h*hd + 2i + j is HF row
 * h*hd + j*hd/2 + i (hd = n_rows / n_head, i < hd/2, j < 2).  -1 when n_rows
 * is not a multiple of 2 * n_head. */
int hf_permute_rows(const void *src, void *dst, int64_t n_rows, size_t row_bytes, int n_head, bool to_gguf);

#endif
