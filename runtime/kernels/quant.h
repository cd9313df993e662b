/*
 * quant.h — ggml's reference quantizers: one row of floats into the blocks
 * of a GGML type, byte for byte as ggml writes them (quantize_row_*_ref in
 * ggml-quants.c, ported with the same float operations in the same order).
 * Used by the file quantizer (formats/quantize.h, `cinfer quantize`) and by
 * the kernels' repacking into other precisions (kern_r8.c).
 */
#ifndef CINFER_QUANT_H
#define CINFER_QUANT_H

#include <stddef.h>
#include <stdint.h>


/* Parse a tensor type name (ggml_type_name, case-insensitive: "q6_k",
 * "Q8_0", "f16") into a ggml type id that quant_row can produce; -1 if
 * unknown or not producible. */
int quant_type_parse(const char *name);

/* 1 when quant_row can write type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4).  The other IQ types
 * and TQ1_0/TQ2_0 are not written: llama.cpp makes most of them only with an
 * importance matrix. */
int quant_type_supported(int type);
/* Quantize one row of n floats (n a multiple of the type's block size) into
 * dst with ggml's reference quantizer for type; returns the bytes written
 * (ggml_row_bytes(type, n)), 0 for an unsupported type or bad n. */
size_t quant_row(int type, const float *src, void *dst, int64_t n);

#endif
