/*
 * quantize.h — GGUF re-quantization (`cinfer quantize`), compatible with
 * llama.cpp's llama-quantize.
 *
 * Owns: llama-quantize's choice of a type per tensor (llama_tensor_get_type
 * in src/llama-quant.cpp: which tensors stay as they are, the K-quant
 * mixtures, the output/token-embedding rules, the fallbacks for row lengths a
 * type cannot hold), and writing the result as a GGUF v3 file in
 * llama-quantize's layout (metadata copied, then
 * general.quantization_version = 2 and general.file_type appended; tensors
 * ordered like llama.cpp's loader orders them; data aligned to
 * general.alignment, 32 by default).  Rows are quantized by ggml's reference
 * quantizers (kernels/quant.h), so from an F32 input the whole file is
 * byte-identical to what llama-quantize (llama.cpp c392e509, no importance
 * matrix) writes with the same type and --pure/--token-embedding-type/
 * --output-tensor-type settings: checked for F16, BF16, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, IQ4_NL, IQ4_XS and
 * the --pure files of ../shared/models/synthetic (tests/test_quant.c).
 *
 * Rules (llama-quantize's, without --pure): 1-D tensors, norms, MoE routers,
 * positional embeddings and a few small per-architecture tensors are copied;
 * output.weight (or token_embd.weight when there is no output.weight)
 * becomes Q6_K unless the type is Q8_0 (Q8_0 when its rows do not fit
 * Q6_K's 256-value blocks); token_embd.weight keeps the file type; the K and
 * IQ4 mixtures give attn_v/ffn_down more bits in some layers.  A row length
 * the chosen type cannot hold falls back as current llama.cpp does (Q2_K,
 * Q3_K, TQ1_0, TQ2_0 → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0,
 * IQ4_XS → IQ4_NL; a 32-block type keeps its type), then F16 when the row
 * still is not a whole number of blocks.
 *
 * Input tensors of any type the kernels can dequantize (kern.h
 * kern_dequant_row) are converted to f32 and re-quantized; a tensor whose
 * chosen type equals its current type is copied unchanged (as
 * llama-quantize does; llama-quantize additionally asks for
 * --allow-requantize on quantized inputs, cinfer does not).
 *
 * Errors: functions return 0 or a negative QUANT_E* code and write one line
 * into err (what, which tensor, expected vs actual).  Never exits or prints.
 */
#ifndef CINFER_QUANTIZE_H
#define CINFER_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"

enum {
    QUANT_OK = 0,
    QUANT_EIO = -1,          /* input unreadable, output not writable */
    QUANT_EFORMAT = -2,      /* input is not a valid GGUF file */
    QUANT_EUNSUPPORTED = -3, /* type cannot be produced, or input cannot be dequantized */
    QUANT_EARG = -4,
    QUANT_ENOMEM = -5,
};

/* llama.cpp's file types (enum llama_ftype), written as general.file_type. */
enum quant_ftype {
    QUANT_FTYPE_ALL_F32 = 0,
    QUANT_FTYPE_F16 = 1,
    QUANT_FTYPE_Q4_0 = 2,
    QUANT_FTYPE_Q4_1 = 3,
    QUANT_FTYPE_Q8_0 = 7,
    QUANT_FTYPE_Q5_0 = 8,
    QUANT_FTYPE_Q5_1 = 9,
    QUANT_FTYPE_Q2_K = 10,
    QUANT_FTYPE_Q3_K_S = 11,
    QUANT_FTYPE_Q3_K_M = 12,
    QUANT_FTYPE_Q3_K_L = 13,
    QUANT_FTYPE_Q4_K_S = 14,
    QUANT_FTYPE_Q4_K_M = 15,
    QUANT_FTYPE_Q5_K_S = 16,
    QUANT_FTYPE_Q5_K_M = 17,
    QUANT_FTYPE_Q6_K = 18,
    QUANT_FTYPE_IQ4_NL = 25,
    QUANT_FTYPE_IQ4_XS = 30,
    QUANT_FTYPE_BF16 = 32,
    QUANT_FTYPE_MXFP4_MOE = 38, /* expert (3-D) tensors MXFP4, the rest Q8_0 */
};

/* Parse a file-type name as llama-quantize spells them, case-insensitive:
 * f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4_moe, q2_k, q3_k_s, q3_k_m,
 * q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs, and the aliases q3_k (=
 * q3_k_m), q4_k (= q4_k_m), q5_k (= q5_k_m).  Returns 0 and *ftype, or
 * QUANT_EARG. */
int quant_ftype_parse(const char *name, int *ftype);
/* "Q4_K_M"; NULL for ids not in enum quant_ftype. */
const char *quant_ftype_name(int ftype);
/* The ggml type most tensors of ftype get (Q4_K for Q4_K_M); -1 if unknown. */
int quant_ftype_base_type(int ftype);

/* Per-tensor report (quant_options.on_tensor): valid during the call. */
typedef struct {
    const char *name;
    int index, n_tensors;     /* 0-based position in the output, total */
    int64_t ne[4];
    uint32_t n_dims;
    int type_in, type_out;    /* ggml type ids */
    uint64_t bytes_in, bytes_out;
    int fallback;             /* 1: the row length forced a different type */
} quant_tensor_report;

typedef struct {
    int ftype;              /* enum quant_ftype (required) */
    int pure;               /* 1: no mixture; every quantized tensor gets the base type (--pure) */
    int token_embd_type;    /* ggml type for token_embd.weight, or -1 (the ftype's rules) */
    int output_type;        /* ggml type for output.weight, or -1 */
    int n_threads;          /* 0: pool_default_threads() */
    void (*on_tensor)(const quant_tensor_report *r, void *user); /* optional progress */
    void *user;
} quant_options;

typedef struct {
    int n_tensors, n_quantized, n_fallback;
    uint64_t bytes_in, bytes_out; /* tensor data only */
    uint64_t file_bytes;          /* size of the written file */
} quant_stats;

/* Defaults: ftype Q8_0, token_embd_type and output_type -1, n_threads 0. */
quant_options quant_options_default(void);

/* Read in_path (validated by gguf_open), write out_path.  The file is written
 * as out_path + ".partial", checked with gguf_open, and renamed into place;
 * on any error the partial file is removed and out_path is untouched.  st
 * may be NULL. */
int quant_file(const char *in_path, const char *out_path, const quant_options *o, quant_stats *st,
               char *err, size_t err_len);

#endif
