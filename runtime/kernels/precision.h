/*
 * precision.h — the compute precisions (include/cinfer.h CINFER_PRECISION_*):
 * their names and what each one computes with — the weight type a matmul
 * weight is repacked into and whether activations are quantized.
 *
 * One table that the compiler (which types to bind), the engine's .giw files
 * (which types a saved precision may hold) and the library API (names on the
 * command line and in errors) all read, so none of them asks another.
 * Rationale for each choice: docs/precisions.md.
 */
#ifndef CINFER_PRECISION_H
#define CINFER_PRECISION_H

/* "auto", "native", "f32", "int8", "int8int8", "int4", "int4mix"; NULL for an
 * id outside CINFER_PRECISION_*. */
const char *prec_name(int precision);
/* The CINFER_PRECISION_* named name (exact, lower case), or -1. */
int prec_from_name(const char *name);

/* The weight type a matmul weight named `name` (rows of n_cols elements,
 * n_rows rows per matrix — ne[1]; a 3-D expert tensor holds ne[2] such
 * matrices and each must be repackable on its own — GGUF type src_type)
 * computes with under `precision`: src_type
 * for native, when the tensor cannot be repacked (rows not a multiple of 8,
 * kern_repack_bytes says 0) or already has the target type; CF_F32 for f32;
 * CF_Q8_0_R8 / CF_Q4_0_R8 for the int precisions (int4mix: attn_v.weight,
 * ffn_down.weight, output.weight and the experts' ffn_down_exps.weight /
 * ffn_down_shexp.weight Q8_0_R8); auto: the lossless repack
 * (Q4_0 -> Q4_0_R8, Q8_0 -> Q8_0_R8, Q4_K/Q5_K/Q6_K/IQ4_XS -> Q4_K_R8/
 * Q5_K_R8/Q6_K_R8/IQ4_XS_R8 where the columns are a multiple of 256; IQ4_XS
 * stays native in aarch64 builds, which have no NEON leaves for it), every
 * other type as it is. */
int prec_weight_type(int precision, const char *name, int src_type, long n_rows, long n_cols);

/* cf_env.act_quant a precision runs with by default: 0 (f32 activations) for
 * f32 and int8, 1 (Q8_0 activations) for int8int8, int4, int4mix; -1 for
 * auto and native (the session's choice). */
int prec_act_quant(int precision);

#endif
