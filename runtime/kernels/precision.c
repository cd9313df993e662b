/*
 * precision.c — the compute-precision table (see precision.h).
 */
#include "precision.h"

#include <string.h>

#include "cinfer.h"
#include "kern.h"
#include "kern_kquants.h"
#include "kern_r8.h"

static const char *const precision_names[CINFER_PRECISION_COUNT] = {
    [CINFER_PRECISION_AUTO] = "auto",     [CINFER_PRECISION_NATIVE] = "native",
    [CINFER_PRECISION_F32] = "f32",
    [CINFER_PRECISION_INT8] = "int8",     [CINFER_PRECISION_INT8INT8] = "int8int8",
    [CINFER_PRECISION_INT4] = "int4",     [CINFER_PRECISION_INT4MIX] = "int4mix",
};

const char *prec_name(int p) { return p >= 0 && p < CINFER_PRECISION_COUNT ? precision_names[p] : NULL; }

int prec_from_name(const char *name) {
    for (int p = 0; name && p < CINFER_PRECISION_COUNT; p++)
        if (!strcmp(name, precision_names[p])) return p;
    return -1;
}

int prec_act_quant(int precision) {
    switch (precision) {
    case CINFER_PRECISION_F32: case CINFER_PRECISION_INT8: return 0;
    case CINFER_PRECISION_INT8INT8: case CINFER_PRECISION_INT4: case CINFER_PRECISION_INT4MIX: return 1;
    default: return -1;
    }
}

/* Does the tensor name end with suffix ("blk.3.attn_v.weight", "attn_v.weight")? */
static int name_is(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix) && (n == k || name[n - k - 1] == '.');
}

int prec_weight_type(int precision, const char *name, int src_type, long n_rows, long n_cols) {
    int dst;
    switch (precision) {
    case CINFER_PRECISION_AUTO: /* lossless only: the same blocks, interleaved */
        dst = src_type == CF_Q4_0 ? CF_Q4_0_R8 : src_type == CF_Q8_0 ? CF_Q8_0_R8 : src_type;
        dst = src_type == KERN_T_Q4_K ? CF_Q4_K_R8 : src_type == KERN_T_Q5_K ? CF_Q5_K_R8
            : src_type == KERN_T_Q6_K ? CF_Q6_K_R8 : dst;
#if !defined(__aarch64__) /* IQ4_XS_R8 has no NEON leaves: aarch64 keeps IQ4_XS native */
        if (src_type == KERN_T_IQ4_XS) dst = CF_IQ4_XS_R8;
#endif
        break;
    case CINFER_PRECISION_F32: dst = CF_F32; break;
    case CINFER_PRECISION_INT8: case CINFER_PRECISION_INT8INT8: dst = CF_Q8_0_R8; break;
    case CINFER_PRECISION_INT4: dst = CF_Q4_0_R8; break;
    case CINFER_PRECISION_INT4MIX:
        /* measured (docs/precisions.md): keeping these three in 8 bits cuts the
         * logit error of int4 3-18x on the trained test models; output.weight
         * alone matters most where it is not tied to the embeddings; the
         * experts' down projections are ffn_down's MoE counterparts */
        dst = name_is(name, "attn_v.weight") || name_is(name, "ffn_down.weight") ||
                      name_is(name, "output.weight") || name_is(name, "ffn_down_exps.weight") ||
                      name_is(name, "ffn_down_shexp.weight")
                  ? CF_Q8_0_R8 : CF_Q4_0_R8;
        break;
    default: return src_type;
    }
    if (dst == src_type || dst == CF_F32) return dst;
    if (n_rows % 8 || n_rows > 0x7fffffff || n_cols > 0x7fffffff) return src_type;
    if (!kern_repack_bytes(dst, (int)n_rows, (int)n_cols)) return src_type;
    return dst;
}
