/*
 * instantiate.cu — every kernel template of runtime/kernels/cuda/cf_cuda.cuh
 * for every weight type the CUDA path supports and for awkward shapes
 * (rows not a multiple of 16 or 64, head_dim 8, 80 and 256, GQA, windows,
 * soft-capping), so that clang's syntax check (make test, tests/test_cuda.c)
 * analyses each body as NVRTC would after the generated code instantiates
 * it.  Not compiled into anything.
 */
#include "prelude_cuda.h"
#include "cf_cuda.cuh"

#define CF_K(name, nt) extern "C" __global__ void __launch_bounds__(nt) name(const cf_cuda_env *__restrict__ E)

#define MATMULS(T, tag)                                                                                      \
    CF_K(mv_##tag, CFK_MV_THREADS) { cfk_mv<T, 4096, 4096>(E->arena, E->arena + 8192, E->W[0], E->n_tokens); } \
    CF_K(mv_odd_##tag, CFK_MV_THREADS) { cfk_mv<T, 173, 768>(E->arena, E->arena, E->W[0], E->n_tokens); }     \
    CF_K(mm_##tag, CFK_MM_THREADS) { cfk_mm<T, 11008, 4096>(E->arena, E->arena, E->W[1], E->n_tokens); }      \
    CF_K(mm_odd_##tag, CFK_MM_THREADS) { cfk_mm<T, 100, 256>(E->arena, E->arena, E->W[1], E->n_tokens); }     \
    CF_K(rows_##tag, CFK_EW_THREADS) { cfk_get_rows<T, 512, 0>(E, E->arena, E->W[2]); }

MATMULS(CFK_T_BF16, bf16)
MATMULS(CFK_T_Q6_K, q6_k)
MATMULS(CFK_T_F32, f32)
MATMULS(CFK_T_F16, f16)
MATMULS(CFK_T_Q8_0, q8_0)
MATMULS(CFK_T_Q4_0, q4_0)
MATMULS(CFK_T_Q4_K, q4_k)

/* plain types: rows of any length */
CF_K(mv_f32_172, CFK_MV_THREADS) { cfk_mv<CFK_T_F32, 64, 172>(E->arena, E->arena, E->W[0], E->n_tokens); }
CF_K(mm_f16_172, CFK_MM_THREADS) { cfk_mm<CFK_T_F16, 64, 172>(E->arena, E->arena, E->W[0], E->n_tokens); }
CF_K(rows_bf16_100, CFK_EW_THREADS) { cfk_get_rows<CFK_T_BF16, 100, 1>(E, E->arena, E->W[0]); }

CF_K(norm_rms, CFK_ROW_THREADS) { cfk_rms_norm<4096>(E->arena, E->arena, (const float *)E->W[3], 1e-5f); }
CF_K(norm_rms_small, CFK_ROW_THREADS) { cfk_rms_norm<8>(E->arena, E->arena, (const float *)E->W[3], 1e-6f); }
CF_K(norm_layer, CFK_ROW_THREADS) {
    cfk_layer_norm<768>(E->arena, E->arena, (const float *)E->W[3], (const float *)E->W[4], 1e-5f);
}
CF_K(rope_norm, CFK_ROPE_THREADS(128)) {
    cfk_rope<32, 128, 128, 0>(E, E->arena, nullptr, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0);
}
CF_K(rope_neox_partial, CFK_ROPE_THREADS(32)) {
    cfk_rope<32, 80, 32, 2>(E, E->arena, nullptr, 1000000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0);
}
CF_K(rope_ff_yarn, CFK_ROPE_THREADS(128)) {
    cfk_rope<32, 128, 128, 2>(E, E->arena, (const float *)E->W[6], 1000000000.0f, 0.025f, 1.0f, 1.0f, 32.0f, 1.0f, 8192);
}

#define ATTENTION(NH, NKV, HD, WIN, tag)                                                                   \
    CF_K(kv_##tag, CFK_EW_THREADS) { cfk_kv_store<NKV * HD>(E, 3, E->arena, E->arena + 4096); }               \
    CF_K(ad_##tag, CFK_ATT_THREADS) { cfk_att_decode<NH, NKV, HD, WIN>(E, 3, E->arena, 0.125f, 0.0f); }        \
    CF_K(ac_##tag, CFK_ATT_COMBINE_THREADS(HD)) { cfk_att_combine<NH, HD>(E, E->arena); }                    \
    CF_K(ap_##tag, CFK_ATT_PF_THREADS) { cfk_att_prefill<NH, NKV, HD, WIN>(E, 3, E->arena, E->arena, 0.125f, 50.0f); }

ATTENTION(16, 8, 256, 4096, win256)
ATTENTION(32, 8, 128, 0, gqa128)
ATTENTION(8, 4, 8, 0, tiny)
ATTENTION(32, 32, 80, 0, mha80)

CF_K(ew_add, CFK_EW_THREADS) { cfk_add<4096>(E, E->arena, E->arena, E->arena + 4096); }
CF_K(ew_add_row, CFK_EW_THREADS) { cfk_add_row<4096>(E, E->arena, E->arena, (const float *)E->W[5]); }
CF_K(ew_scale, CFK_EW_THREADS) { cfk_scale<4096>(E, E->arena, E->arena, 0.5f); }
CF_K(ew_swiglu, CFK_EW_THREADS) { cfk_swiglu_op<11008>(E, E->arena, E->arena, E->arena + 11008); }
CF_K(ew_gelu, CFK_EW_THREADS) { cfk_gelu_op<3072>(E, E->arena, E->arena); }
CF_K(ew_geglu, CFK_EW_THREADS) { cfk_geglu_op<3072>(E, E->arena, E->arena, E->arena + 3072); }
CF_K(ew_split, CFK_EW_THREADS) { cfk_copy_cols<3072, 1024, 1024>(E, E->arena, E->arena + 9999); }
CF_K(ew_mul, CFK_EW_THREADS) { cfk_mul<4096>(E, E->arena, E->arena, E->arena + 4096); }
CF_K(norm_rms_nil, CFK_ROW_THREADS) { cfk_rms_norm<256>(E->arena, E->arena, nullptr, 1e-6f); }
CF_K(ew_relu_sqr, CFK_EW_THREADS) { cfk_relu_sqr<11008>(E, E->arena, E->arena); }
CF_K(ew_mul_row, CFK_EW_THREADS) { cfk_mul_row<4096, 4096>(E, E->arena, E->arena, (const float *)E->W[5]); }
CF_K(ew_mul_row1, CFK_EW_THREADS) { cfk_mul_row<4096, 1>(E, E->arena, E->arena, (const float *)E->W[5]); }
CF_K(ew_pos_log_scale, CFK_EW_THREADS) { cfk_pos_log_scale<4096, 8192>(E, E->arena, E->arena, 0.1f, 1.0f); }
CF_K(ew_post, CFK_EW_THREADS) { cfk_logits_post<256000>(E, (const float *)E->W[7], 1.0f, 30.0f); }
