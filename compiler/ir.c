/*
 * ir.c — storage for the IR (see ir.h): growable op/value/weight arrays and
 * the liveness pass the emitter's buffer allocator relies on.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const ir_op_info op_info[IR_OP_COUNT] = {
    [IR_EMBED] = {"embed", 0, 1, 0, 0},
    [IR_POS_EMBED] = {"pos_embed", 0, 1, 0, 0},
    [IR_RMS_NORM] = {"rms_norm", 1, 1, 0, 0},
    [IR_LAYER_NORM] = {"layer_norm", 1, 1, 0, 1u << 0},
    [IR_MATMUL] = {"matmul", 1, 1, 0, 0},
    [IR_ADD_ROW] = {"add_row", 1, 1, 1, 0},
    [IR_SCALE] = {"scale", 1, 0, 1, 0},
    [IR_ROPE] = {"rope", 1, 0, 2, 0},
    [IR_ATTENTION] = {"attention", 3, 0, 0, 1u << 6},
    [IR_SWIGLU] = {"swiglu", 2, 0, 0, 0},
    [IR_GEGLU] = {"geglu", 2, 0, 0, 0},
    [IR_GELU] = {"gelu", 1, 0, 1, 0},
    [IR_ADD] = {"add", 2, 0, 1, 0},
    [IR_SPLIT] = {"split", 1, 0, 0, 0},
    [IR_LOGITS] = {"logits", 1, 1, 0, 1u << 2},
    [IR_MUL_ROW] = {"mul_row", 1, 1, 1, 0},
    [IR_MUL] = {"mul", 2, 0, 1, 0},
    [IR_RELU_SQR] = {"relu_sqr", 1, 0, 1, 0},
    [IR_XIELU] = {"xielu", 1, 0, 1, 0},
    [IR_MATMUL_SLICE] = {"matmul_slice", 1, 1, 0, 0},
    [IR_TANH] = {"tanh", 1, 0, 1, 0},
    [IR_SUB] = {"sub", 2, 0, 1, 0},
    [IR_CONCAT] = {"concat", 2, 0, 0, 0},
    [IR_MATCH_NORM] = {"match_norm", 2, 0, 1, 0},
    [IR_MIX_GROUPS] = {"mix_groups", 2, 0, 0, 0},
    [IR_AXPY_GROUPS] = {"axpy_groups", 3, 0, 1, 0},
    [IR_ADD_GROUPS] = {"add_groups", 2, 0, 1, 0},
    [IR_GAUSSIAN_TOPK] = {"gaussian_topk", 1, 0, 1, 0},
    [IR_POS_LOG_SCALE] = {"pos_log_scale", 1, 0, 1, 0},
    [IR_MOE_ROUTE] = {"moe_route", 1, 0, 0, 1u << 6},
    [IR_MOE_MATMUL] = {"moe_matmul", 2, 1, 0, 1u << 5},
    [IR_MOE_SUM] = {"moe_sum", 2, 0, 0, 1u << 1},
    [IR_MUL_SIGMOID] = {"mul_sigmoid", 2, 0, 1, 0},
    [IR_SWIGLU_OAI] = {"swiglu_oai", 2, 0, 0, 0},
    [IR_HEAD_SPLIT] = {"head_split", 1, 0, 0, 0},
    [IR_HEAD_CONCAT] = {"head_concat", 2, 0, 0, 0},
    [IR_HEAD_MATMUL] = {"head_matmul", 1, 1, 0, 0},
    [IR_EMBEDDINGS] = {"embeddings", 1, 0, 0, 0},
    [IR_SSM_CONV] = {"ssm_conv", 1, 1, 0, 1u << 1},
    [IR_SSM_SCAN] = {"ssm_scan", 3, 1, 0, 1u << 5 | 1u << 6},
    [IR_DELTA_NET] = {"delta_net", 2, 1, 0, 1u << 5},
    [IR_RMS_NORM_GROUPS] = {"rms_norm_groups", 1, 1, 0, 0},
};

const ir_op_info *ir_info(ir_opcode c) { return (unsigned)c < IR_OP_COUNT ? &op_info[c] : NULL; }

ir_program *ir_new(void) {
    ir_program *p = calloc(1, sizeof *p);
    if (p) p->logits_op = -1;
    return p;
}

void ir_free(ir_program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_weights; i++) free(p->weights[i].name);
    free(p->weights);
    free(p->values);
    free(p->ops);
    free(p->kv_dim);
    free(p->kv_dim_v);
    free(p->state_dim);
    free(p->arch);
    free(p->archspec_path);
    for (int i = 0; i < p->n_files; i++) free(p->files[i]);
    free(p);
}

/* Grow *arr (elements of size sz) so that it holds at least need elements. */
static int grow(void **arr, int *cap, int need, size_t sz) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *na = realloc(*arr, (size_t)nc * sz);
    if (!na) return -1;
    *arr = na;
    *cap = nc;
    return 0;
}

int ir_add_value(ir_program *p, int n, int def) {
    if (grow((void **)&p->values, &p->cap_values, p->n_values + 1, sizeof *p->values)) return -1;
    p->values[p->n_values] = (ir_value){.n = n, .def = def, .last_use = def, .alias = -1,
                                        .kind = IR_VAL_ACT};
    return p->n_values++;
}

int ir_add_op(ir_program *p, const ir_op *op) {
    if (grow((void **)&p->ops, &p->cap_ops, p->n_ops + 1, sizeof *p->ops)) return -1;
    p->ops[p->n_ops] = *op;
    return p->n_ops++;
}

int ir_add_weight(ir_program *p, const char *name, const gguf_tensor *t) {
    for (int i = 0; i < p->n_weights; i++)
        if (strcmp(p->weights[i].name, name) == 0) return i; /* bound once, shared */
    if (grow((void **)&p->weights, &p->cap_weights, p->n_weights + 1, sizeof *p->weights)) return -1;
    char *dup = strdup(name);
    if (!dup) return -1;
    p->weights[p->n_weights] = (ir_weight){.name = dup, .t = t, .type = (int)t->type};
    return p->n_weights++;
}

void ir_liveness(ir_program *p) {
    for (int v = 0; v < p->n_values; v++) p->values[v].last_use = p->values[v].def;
    for (int o = 0; o < p->n_ops; o++)
        for (int k = 0; k < IR_MAX_IN; k++) {
            int v = p->ops[o].in[k];
            if (v >= 0 && o > p->values[v].last_use) p->values[v].last_use = o;
        }
}
