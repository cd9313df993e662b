/*
 * ir.h — the compiler's intermediate representation.
 *
 * An archspec (Lua) describes a model as calls to a fixed op vocabulary; each
 * call appends one op to an ir_program.  The IR is deliberately flat: an
 * ordered list of ops over activation values (each value is a (n_tokens, n)
 * f32 matrix living in the arena) and bound weights (GGUF tensors with their
 * type and shape checked at bind time).  The emitter turns each op into one
 * kernel call with every dimension as a literal; it never needs to know what
 * model family it is compiling.
 */
#ifndef CINFER_IR_H
#define CINFER_IR_H

#include <stdint.h>

#include "formats/gguf.h"

/* Op vocabulary.  Keep ir_op_info in ir.c in the same order.  "wiN": param
 * i[N] holds a further weight id (-1: none). */
typedef enum {
    IR_EMBED,     /* out(n) = get_rows(w0, tokens) */
    IR_POS_EMBED, /* out(n) = get_rows(w0, positions) — learned absolute positions */
    IR_RMS_NORM,  /* out(n) = rms_norm(in0, w0, f[0]=eps) over i[0] groups of i[1] per token */
    IR_LAYER_NORM,/* out(n) = layer_norm(in0, w0, bias wi0, f[0]=eps) */
    IR_MATMUL,    /* out(i[0]=n_out) = in0(i[1]=n_in) · w0ᵀ */
    IR_ADD_ROW,   /* out(n) = in0 + floats [i[0], i[0]+n) of w0 (a bias, or row i[0]/n of an
                   * F32 matrix), broadcast over tokens; in place */
    IR_SCALE,     /* out(n) = in0 * f[0]; in place */
    IR_ROPE,      /* out = rope(in0; i[0]=n_head, i[1]=head_dim, i[2]=n_rot, i[3]=mode, f[0]=freq_base;
                   * YaRN f[1]=freq_scale, f[2]=ext_factor, f[3]=attn_factor, f[4]=beta_fast,
                   * f[5]=beta_slow, i[4]=n_ctx_orig; w0 = freq factors (n_rot/2) or -1); in place */
    IR_ATTENTION, /* out(n_head*head_dim_v) = attn(in0=q, in1=k, in2=v; in2 -1: values = key prefix;
                   * in1 and in2 -1: read layer i[0]'s cache as filled); i[0]=layer, i[1]=n_head,
                   * i[2]=n_head_kv, i[3]=head_dim, i[4]=window (0: none), i[5]=head_dim_v, sinks wi6,
                   * f[0]=scale, f[1]=softcap) */
    IR_SWIGLU,    /* out(n) = silu(in0) * in1 */
    IR_GEGLU,     /* out(n) = gelu(in0) * in1 */
    IR_GELU,      /* out(n) = gelu(in0); in place */
    IR_ADD,       /* out(n) = in0 + in1; in place */
    IR_SPLIT,     /* out(n) = columns [i[0], i[0]+n) of in0 (width i[1]) */
    IR_LOGITS,    /* E->logits = last or all rows of in0(i[1]=n_in) · w0ᵀ (i[0]=n_vocab) + bias wi2,
                   * then * f[0] (scale) and capped c·tanh(l/c) with c = f[1] when > 0 */
    /* issue-19 families */
    IR_MUL_ROW,   /* out(n) = in0 * w0 per row (w0 of n, or of 1: a scalar); in place */
    IR_MUL,       /* out(n) = in0 * in1; in place */
    IR_RELU_SQR,  /* out(n) = max(in0, 0)²; in place */
    IR_XIELU,     /* out(n) = xielu(in0; f[0]=alpha_n, f[1]=alpha_p, f[2]=beta, f[3]=eps, raw GGUF
                   * values); in place */
    IR_MATMUL_SLICE,/* out(i[0]=n_out) = in0(i[1]=n_in) · (matrix i[2] of the 3-D w0)ᵀ; i[3] = its
                   * byte offset in w0 (w0 keeps its file type) */
    IR_TANH,      /* out(n) = tanh(in0); in place */
    IR_SUB,       /* out(n) = in0 - in1; in place */
    IR_CONCAT,    /* out(n) = [in0 | in1] per row */
    IR_MATCH_NORM,/* out(n) = each of the i[0] groups of in0 rescaled to |in1| (width n / i[0]); in place */
    IR_MIX_GROUPS,/* out(n) = group j: Σ_k in1[j*i[0]+k] · group k of in0 (i[0] groups) */
    IR_AXPY_GROUPS,/* out(n) = group j: in1 * (in2[j] + f[0]) + group j of in0 (i[0] groups); in place */
    IR_ADD_GROUPS,/* out(n) = group g of in0 + in1 for g >= i[1] (i[0] groups); in place */
    IR_GAUSSIAN_TOPK,/* out(n) = max(in0 - (mean + f[0] std), 0) per row; in place */
    IR_POS_LOG_SCALE,/* out(n) = in0 * (1 + f[0] ln(1 + floor((pos + f[1]) / i[0]))) per token; in place */
    /* mixture of experts, latent attention */
    IR_MOE_ROUTE, /* out(2 i[1]) route of logits in0(i[0]=n_expert): i[1]=k, i[2]=gating (CF_GATING_*),
                   * i[3]=norm, i[4]=n_group, i[5]=n_group_used, selection bias wi6, f[0]=scale */
    IR_MOE_MATMUL,/* out(i[3]*i[0]) slot j = expert route(in1)[j] of w0 (i[2] matrices of i[0]=n_out
                   * rows of i[1]=n_in) · in0 (width n_in, or k*n_in per slot when i[4]); bias wi5 */
    IR_MOE_SUM,   /* out(n) = Σ_j weight_j of route in1 · slot j of in0 (width i[0]=k * n), each
                   * slot first times its expert's entry of the per-expert scale wi1 */
    IR_MUL_SIGMOID,/* out(n) = in0 * sigmoid(in1), in1 of width n or i[0]=1; in place */
    IR_SWIGLU_OAI,/* out(n) = clamped swiglu(in0=gate, in1=up; f[0]=alpha, f[1]=limit) */
    IR_HEAD_SPLIT,/* out(i[0]*i[3]) = per head h of in0 (i[0] heads of i[1]): columns [i[2], +i[3]) */
    IR_HEAD_CONCAT,/* out(i[0]*(i[1]+i[2])) = per head [in0 head (i[1]) | in1 head (i[2])]; i[3], i[4]:
                   * head strides of in0, in1 (0: one head broadcast), i[5], i[6]: their widths */
    IR_HEAD_MATMUL,/* out(i[2]*i[0]) = per head h: w0 rows [h*i[3] + i[4], +i[0]) · head h of in0
                   * (i[2] heads of i[1]); i[5] = 1: transposed (rows [h*i[3] + i[4], +i[1]) of i[0]) */
    /* encoders */
    IR_EMBEDDINGS,/* an encoder's output: E->hidden = in0 (i[0] = n_embd) of every token; no logits */
    /* recurrent layers: the op's state is E->state + state_off (state_floats floats) */
    IR_SSM_CONV,  /* out(n) = causal conv of in0 (n channels) with w0 (n rows of i[0]=d_conv taps),
                   * bias wi1, then i[2]=act (CF_ACT_*); state (d_conv-1, n) */
    IR_SSM_SCAN,  /* out(i[0]*i[1]) = scan(in0=x (i[0]=n_head x i[1]=head_dim), in1=dt (n_head),
                   * in2=[B|C] (2 x i[3]=n_group x i[2]=d_state)); A w0, D wi5, dt bias wi6,
                   * i[4]=a_per_state (Mamba-1); state (n_head, head_dim, d_state) */
    IR_DELTA_NET, /* out(i[1]*i[3]) = gated delta rule(in0=qkv, in1=ba; i[0]=n_k_head, i[1]=n_v_head,
                   * i[2]=d_k, i[3]=d_v, f[0]=eps); A w0, dt bias wi5; state (n_v_head, d_k, d_v) */
    IR_RMS_NORM_GROUPS, /* out(n) = rms_norm per group of i[1] (i[0] groups), each with its own
                   * weights (w0: n floats), f[0]=eps */
    IR_OP_COUNT
} ir_opcode;

#define IR_MAX_IN 3
#define IR_MAX_I 8
#define IR_MAX_F 6

typedef struct {
    ir_opcode code;
    int out;               /* value id, -1 for none */
    int in[IR_MAX_IN];     /* value ids, -1 unused */
    int w;                 /* weight id, -1 for none */
    int64_t i[IR_MAX_I];   /* integer params */
    float f[IR_MAX_F];     /* float params */
    int file;              /* index into ir_program.files of the Lua chunk that created the op */
    int line;              /* and its line there */
    int scratch_per_tok;   /* floats of op-local scratch ($scratch) per batch token ... */
    long scratch_min;      /* ... and at least this many; 0, 0: none */
    long state_off;        /* recurrent ops: offset of the op's state in E->state ($state) */
    long state_floats;     /* ... and its size (0: the op keeps no state) */
} ir_op;

typedef struct {
    int n;        /* floats per token row */
    int def;      /* op index that defines it */
    int last_use; /* op index of the last reader (filled by ir_liveness) */
    int alias;    /* value whose buffer this one shares (in-place ops), or -1 */
    int kind;     /* IR_VAL_ACT, or IR_VAL_ROUTE (read only by the moe ops) */
} ir_value;

enum { IR_VAL_ACT = 0, IR_VAL_ROUTE = 1 };

typedef struct {
    char *name;              /* GGUF tensor name */
    const gguf_tensor *t;    /* bound tensor */
    int type;                /* type the code computes with: t->type, or the repacked
                              * type a compute precision chose (compile.c) */
} ir_weight;

typedef struct {
    char *arch;              /* general.architecture */
    char *archspec_path;     /* for messages, e.g. "archspecs/llama.lua" */
    char *files[4];          /* Lua chunks ops come from (archspec, archspecs/common.lua), for #line */
    int n_files;
    uint64_t fingerprint;    /* gguf_fingerprint */
    /* hyperparameters the runtime needs (set by the archspec) */
    int n_vocab, n_embd, n_layer, n_ctx_train;
    int *kv_dim;             /* (n_layer) K floats per position, from attention ops */
    int *kv_dim_v;           /* (n_layer) V floats per position (0: values read from K) */
    long *state_dim;         /* (n_layer) recurrent state floats, from the recurrent ops */
    long state_floats;       /* their sum: the model's E->state */
    ir_op *ops;
    int n_ops, cap_ops;
    ir_value *values;
    int n_values, cap_values;
    ir_weight *weights;
    int n_weights, cap_weights;
    int logits_op;           /* index of the IR_LOGITS op (or an encoder's IR_EMBEDDINGS), -1 until set */
    int encoder;             /* 1: the output is IR_EMBEDDINGS (bidirectional attention, no logits) */
} ir_program;

typedef struct {
    const char *name;   /* "rms_norm" */
    int n_in;           /* activation inputs */
    int has_w;          /* takes a weight */
    int inplace;        /* 1: output may share in0's buffer; 2: must (the kernel works in place) */
    unsigned wi;        /* bit N: i[N] is a further weight id (-1: none), read as is (never
                         * repacked: biases, sinks, selection biases) */
} ir_op_info;

const ir_op_info *ir_info(ir_opcode c);

ir_program *ir_new(void);
void ir_free(ir_program *p);
/* Append; returns the index or -1 on allocation failure. */
int ir_add_value(ir_program *p, int n, int def);
int ir_add_op(ir_program *p, const ir_op *op);
int ir_add_weight(ir_program *p, const char *name, const gguf_tensor *t);
/* Fill last_use of every value. */
void ir_liveness(ir_program *p);

#endif
