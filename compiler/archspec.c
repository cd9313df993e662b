/*
 * archspec.c — runs an architecture descriptor (archspecs/<arch>.lua) in an
 * embedded Lua 5.4 state and records what it asks for as IR.
 *
 * The Lua side sees a small, fixed vocabulary (documented in
 * docs/architecture.md):
 *   gguf(key [, default])        raw metadata value (number, string, boolean)
 *   hparam(suffix [, default])   gguf("<arch>." .. suffix)
 *   gguf_len(key)                length of an array key (nil if absent)
 *   gguf_arr(key)                an array of numbers/booleans as a sequence (nil if absent)
 *   hparam_layer(suffix, il [, default])  element il of a per-layer array key (or its scalar)
 *   model{n_vocab=, n_embd=, n_layer=, n_ctx_train=}
 *   weight(name, {ne0, ne1, ...} [, {optional=true}])  → weight or nil
 *   embed(w)  embed_positions(w)  rms_norm(x, w or nil, eps [, {group=}])
 *   layer_norm(x, w, b, eps)  matmul(w, x [, bias])
 *   rope(x, {n_head, head_dim, n_rot, mode, freq_base, freq_factors, freq_scale,
 *            ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig})
 *   attention(q, k, v, {layer, n_head, n_head_kv, head_dim, head_dim_v, scale, window,
 *             softcap, sinks, causal})        v nil: values = the first head_dim_v of each key;
 *                                  k, v nil: read layer's KV cache as an earlier op filled it
 *   swiglu(g, u)  geglu(g, u)  gelu(x)  add(a, b)  scale(x, s)  split(x, off, n)
 *   add_row(x, w [, row])
 *   logits(w, x [, {scale=, softcap=, bias=}])  or, for an encoder,  embeddings(x)
 *   mul_row(x, w)  mul(a, b)  relu_sqr(x)  xielu(x, {alpha_n, alpha_p, beta, eps})
 *   tanh(x)  sub(a, b)  concat(a, b)  matmul(w3d, x, nil, {slice = s})
 *   groups of a row: match_norm(x, ref)  mix_groups(x, c)  axpy_groups(p, v, c, {bias})
 *   add_groups(x, v, {from})  gaussian_topk(x, std_mul)
 *   pos_log_scale(x, {scale, floor_scale, offset})  (attention temperature tuning)
 *   moe_route(logits, {k, gating, norm, scale, bias, n_group, n_group_used}) → route
 *   moe_matmul(w_exps, x, route [, bias])  moe_sum(y, route [, expert_scale])
 *   mul_sigmoid(x, g)  swiglu_oai(g, u, {alpha, limit})
 *   head_split(x, n_head, off, width)  head_concat(a, b, n_head)
 *   head_matmul(w, x, {n_head, n_out, head_rows, row0, transposed})
 *   mul(a, b)  relu_sqr(x)
 *   recurrent layers (each keeps a fixed-size state in E->state, opts.layer names its layer):
 *   ssm_conv(x, w, {layer, bias, act})  causal depthwise conv1d (Mamba, DeltaNet, LFM2)
 *   ssm_scan(x, dt, bc, {layer, A, D, dt_bias, n_head, d_state, n_group})  Mamba-1/2 scan
 *   delta_net(qkv, ba, {layer, A, dt_bias, n_k_head, n_v_head, d_k, d_v, eps})  gated DeltaNet
 * Activation values are tables {n = width} carrying a hidden id.  Every error
 * goes through luaL_error, so it names the archspec file and line; the state
 * is sandboxed (no io/os/require).
 */
#include "archspec.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_ssm.h"

typedef struct {
    const gguf_file *g;
    ir_program *p;
} spec_ctx;

static spec_ctx *ctx_of(lua_State *L) {
    return (spec_ctx *)lua_touserdata(L, lua_upvalueindex(1));
}

/* Where the Lua code that called the current C function stands: index of its
 * chunk in p->files (added on first sight) and line. */
static void caller_pos(lua_State *L, ir_program *p, int *file, int *line) {
    lua_Debug ar;
    *file = 0;
    *line = 0;
    if (!lua_getstack(L, 1, &ar) || !lua_getinfo(L, "Sl", &ar)) return;
    *line = ar.currentline;
    const char *src = ar.source[0] == '@' ? ar.source + 1 : ar.short_src;
    for (int i = 0; i < p->n_files; i++)
        if (!strcmp(p->files[i], src)) {
            *file = i;
            return;
        }
    if (p->n_files < (int)(sizeof p->files / sizeof *p->files)) {
        p->files[p->n_files] = strdup(src);
        if (p->files[p->n_files]) *file = p->n_files++;
    }
}

/* ---- metadata access ------------------------------------------------------ */

/* Push the scalar value of a GGUF kv; arrays are not scalars. */
static void push_gguf_value(lua_State *L, const char *key, const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        lua_pushinteger(L, (lua_Integer)v->v.u64);
        break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        lua_pushinteger(L, (lua_Integer)v->v.i64);
        break;
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64:
        /* an inf/NaN hyperparameter would become a C literal that does not compile (or a
         * forward pass that computes nothing): refused here, named */
        if (!isfinite(v->v.f64))
            luaL_error(L, "GGUF key '%s' is %s, not a finite number", key,
                       isnan(v->v.f64) ? "NaN" : v->v.f64 > 0 ? "inf" : "-inf");
        lua_pushnumber(L, v->v.f64);
        break;
    case GGUF_VT_BOOL:
        lua_pushboolean(L, v->v.b);
        break;
    case GGUF_VT_STRING:
        lua_pushlstring(L, v->v.str.ptr, (size_t)v->v.str.len);
        break;
    default:
        luaL_error(L, "GGUF key '%s' is an array; use gguf_len()", key);
    }
}

static int l_gguf_key(lua_State *L, const char *key) {
    const gguf_value *v = gguf_get(ctx_of(L)->g, key);
    if (v) {
        push_gguf_value(L, key, v);
        return 1;
    }
    if (lua_gettop(L) >= 2) { /* default given */
        lua_pushvalue(L, 2);
        return 1;
    }
    return luaL_error(L, "missing GGUF key '%s' (required, no default)", key);
}

static int l_gguf(lua_State *L) { return l_gguf_key(L, luaL_checkstring(L, 1)); }

static int l_hparam(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->p->arch, luaL_checkstring(L, 1));
    return l_gguf_key(L, key);
}

/* gguf_arr(key): an array of numbers or booleans as a Lua sequence (1-based),
 * or nil when the key is absent or not an array; per-layer hyperparameters. */
static int l_gguf_arr(lua_State *L) {
    const char *key = luaL_checkstring(L, 1);
    const gguf_value *v = gguf_get(ctx_of(L)->g, key);
    if (!v || v->type != GGUF_VT_ARRAY) {
        lua_pushnil(L);
        return 1;
    }
    if (v->v.arr.type == GGUF_VT_STRING || v->v.arr.type == GGUF_VT_ARRAY || v->v.arr.n > 65536)
        return luaL_error(L, "GGUF key '%s': gguf_arr reads arrays of up to 65536 numbers or "
                          "booleans", key);
    lua_createtable(L, (int)v->v.arr.n, 0);
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        gguf_value e;
        if (gguf_arr_elem(v, i, &e)) return luaL_error(L, "GGUF key '%s': element %I unreadable", key,
                                                       (lua_Integer)i);
        push_gguf_value(L, key, &e);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* hparam_layer(suffix, il [, default]): "<arch>.suffix" for layer il — element
 * il of an array value (per-layer keys: head_count_kv of hybrids), or the
 * value itself when it is a scalar (llama.cpp's get_key_or_arr). */
static int l_hparam_layer(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->p->arch, luaL_checkstring(L, 1));
    lua_Integer il = luaL_checkinteger(L, 2);
    const gguf_value *v = gguf_get(c->g, key);
    if (!v) {
        if (lua_gettop(L) >= 3) {
            lua_pushvalue(L, 3);
            return 1;
        }
        return luaL_error(L, "missing GGUF key '%s' (required, no default)", key);
    }
    if (v->type != GGUF_VT_ARRAY) {
        push_gguf_value(L, key, v);
        return 1;
    }
    gguf_value e;
    if (il < 0 || gguf_arr_elem(v, (uint64_t)il, &e))
        return luaL_error(L, "GGUF key '%s': no element %I (array of %I)", key, il,
                          (lua_Integer)v->v.arr.n);
    push_gguf_value(L, key, &e);
    return 1;
}

static int l_gguf_len(lua_State *L) {
    const gguf_value *v = gguf_get(ctx_of(L)->g, luaL_checkstring(L, 1));
    if (!v || v->type != GGUF_VT_ARRAY) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)v->v.arr.n);
    return 1;
}

static int field_int(lua_State *L, int t, const char *k, int required, lua_Integer def) {
    lua_getfield(L, t, k);
    int isnum;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    int isnil = lua_isnil(L, -1);
    lua_pop(L, 1);
    if (isnil) {
        if (required) return luaL_error(L, "missing field '%s'", k);
        return (int)def;
    }
    if (!isnum) return luaL_error(L, "field '%s' must be an integer", k);
    if (v < 0 || v > 0x7fffffff) return luaL_error(L, "field '%s' out of range: %I", k, v);
    return (int)v;
}

static double field_num(lua_State *L, int t, const char *k, int required, double def) {
    lua_getfield(L, t, k);
    int isnum;
    lua_Number v = lua_tonumberx(L, -1, &isnum);
    int isnil = lua_isnil(L, -1);
    lua_pop(L, 1);
    if (isnil) {
        if (required) return luaL_error(L, "missing field '%s'", k);
        return def;
    }
    if (!isnum) return luaL_error(L, "field '%s' must be a number", k);
    return v;
}

static int l_model(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    c->p->n_vocab = field_int(L, 1, "n_vocab", 1, 0);
    c->p->n_embd = field_int(L, 1, "n_embd", 1, 0);
    c->p->n_layer = field_int(L, 1, "n_layer", 1, 0);
    c->p->n_ctx_train = field_int(L, 1, "n_ctx_train", 0, 2048);
    if (c->p->n_layer < 1 || c->p->n_embd < 1 || c->p->n_vocab < 1)
        return luaL_error(L, "model{}: n_vocab, n_embd and n_layer must be >= 1");
    free(c->p->kv_dim);
    free(c->p->kv_dim_v);
    free(c->p->state_dim);
    c->p->kv_dim = calloc((size_t)c->p->n_layer, sizeof(int));
    c->p->kv_dim_v = calloc((size_t)c->p->n_layer, sizeof(int));
    c->p->state_dim = calloc((size_t)c->p->n_layer, sizeof(long));
    c->p->state_floats = 0;
    if (!c->p->kv_dim || !c->p->kv_dim_v || !c->p->state_dim) return luaL_error(L, "out of memory");
    return 0;
}

/* ---- weights ------------------------------------------------------------- */

#define WEIGHT_MT "cinfer.weight"
#define VALUE_MT "cinfer.value"

static int l_weight(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int optional = 0;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "optional");
        optional = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    const gguf_tensor *t = gguf_find_tensor(c->g, name);
    if (!t) {
        if (optional) {
            lua_pushnil(L);
            return 1;
        }
        return luaL_error(L, "tensor '%s' not found in the model file (required)", name);
    }
    int n_dims = (int)luaL_len(L, 2);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return luaL_error(L, "tensor '%s': expected shape needs 1..4 dims", name);
    int64_t ne[GGUF_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < n_dims; d++) {
        lua_geti(L, 2, d + 1);
        ne[d] = (int64_t)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (ne[d] != t->ne[d])
            return luaL_error(L,
                              "tensor '%s': shape [%I, %I, %I, %I] in the file, archspec expects "
                              "[%I, %I, %I, %I] (dim %d differs)",
                              name, (lua_Integer)t->ne[0], (lua_Integer)t->ne[1],
                              (lua_Integer)t->ne[2], (lua_Integer)t->ne[3], (lua_Integer)ne[0],
                              (lua_Integer)ne[1], (lua_Integer)ne[2], (lua_Integer)ne[3], d);
    int id = ir_add_weight(c->p, name, t);
    if (id < 0) return luaL_error(L, "out of memory");
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, id);
    lua_setfield(L, -2, "_w");
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)t->ne[0]);
    lua_setfield(L, -2, "ne0");
    luaL_setmetatable(L, WEIGHT_MT);
    return 1;
}

static int check_weight(lua_State *L, int idx, int need_type_f32) {
    spec_ctx *c = ctx_of(L);
    if (!lua_istable(L, idx) || !lua_getmetatable(L, idx))
        return luaL_error(L, "argument #%d: expected a weight (from weight())", idx);
    luaL_getmetatable(L, WEIGHT_MT);
    int ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!ok) return luaL_error(L, "argument #%d: expected a weight (from weight())", idx);
    lua_getfield(L, idx, "_w");
    int id = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    const gguf_tensor *t = c->p->weights[id].t;
    if (need_type_f32 && t->type != GGML_TYPE_F32)
        return luaL_error(L, "tensor '%s': type %s, this op needs F32", t->name,
                          ggml_type_name(t->type));
    if (!need_type_f32 && !kern_type_supported((int)t->type))
        return luaL_error(L, "tensor '%s': type %s has no CPU kernel yet", t->name,
                          ggml_type_name(t->type));
    return id;
}

/* ---- values and ops ------------------------------------------------------ */

/* The value id at idx; kind: the IR_VAL_* it must be. */
static int check_value_kind(lua_State *L, int idx, int kind) {
    if (!lua_istable(L, idx) || !lua_getmetatable(L, idx))
        return luaL_error(L, "argument #%d: expected an activation value", idx);
    luaL_getmetatable(L, VALUE_MT);
    int ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!ok) return luaL_error(L, "argument #%d: expected an activation value", idx);
    lua_getfield(L, idx, "_v");
    int id = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    int got = ctx_of(L)->p->values[id].kind;
    if (got != kind)
        return luaL_error(L, "argument #%d: expected %s, got %s", idx,
                          kind == IR_VAL_ROUTE ? "a route (from moe_route())" : "an activation value",
                          got == IR_VAL_ROUTE ? "a route" : "an activation value");
    return id;
}

static int check_value(lua_State *L, int idx) { return check_value_kind(L, idx, IR_VAL_ACT); }

static int value_n(lua_State *L, int v) { return ctx_of(L)->p->values[v].n; }

/* Append op (out width n_out, or no output when n_out == 0); push the value. */
static int emit_op(lua_State *L, ir_op *op, int n_out) {
    spec_ctx *c = ctx_of(L);
    caller_pos(L, c->p, &op->file, &op->line);
    op->out = -1;
    int o = ir_add_op(c->p, op);
    if (o < 0) return luaL_error(L, "out of memory");
    if (n_out <= 0) return 0;
    int v = ir_add_value(c->p, n_out, o);
    if (v < 0) return luaL_error(L, "out of memory");
    c->p->ops[o].out = v;
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, v);
    lua_setfield(L, -2, "_v");
    lua_pushinteger(L, n_out);
    lua_setfield(L, -2, "n");
    luaL_setmetatable(L, VALUE_MT);
    return 1;
}

static ir_op new_op(ir_opcode code) {
    ir_op op = {.code = code, .out = -1, .in = {-1, -1, -1}, .w = -1};
    return op;
}

static const gguf_tensor *wt(lua_State *L, int w) { return ctx_of(L)->p->weights[w].t; }

static int l_embed(lua_State *L) {
    ir_op op = new_op(IR_EMBED);
    op.w = check_weight(L, 1, 0);
    return emit_op(L, &op, (int)wt(L, op.w)->ne[0]);
}

/* rms_norm(x, w, eps [, {group = g}]): normalise each token's row, or each of
 * its width/g groups of g values, with a weight of g shared by the groups
 * (per-head q/k norm) or, when w has the whole width ([g, width/g]), one row
 * of it per group (Mamba-2's grouped norm); w nil: no weight multiply
 * (ggml_rms_norm alone). */
static int l_rms_norm(lua_State *L) {
    ir_op op = new_op(IR_RMS_NORM);
    op.in[0] = check_value(L, 1);
    op.w = lua_isnil(L, 2) ? -1 : check_weight(L, 2, 1);
    op.f[0] = (float)luaL_checknumber(L, 3);
    int n = value_n(L, op.in[0]);
    int group = lua_istable(L, 4) ? field_int(L, 4, "group", 0, n) : n;
    if (group < 1 || n % group)
        return luaL_error(L, "rms_norm: group %d does not divide the width %d", group, n);
    if (op.w >= 0) {
        const gguf_tensor *t = wt(L, op.w);
        if (group < n && t->ne[0] == group && t->n_elems == (uint64_t)n)
            op.code = IR_RMS_NORM_GROUPS;
        else if (t->ne[0] != group || t->n_elems != (uint64_t)group)
            return luaL_error(L, "rms_norm: weight '%s' has %I elements, expected %d%s",
                              t->name, (lua_Integer)t->n_elems, group,
                              group < n ? " (or one row per group)" : "");
    }
    op.i[0] = n / group;
    op.i[1] = group;
    return emit_op(L, &op, n);
}

/* Check that weight `w` is an F32 vector of n elements. */
static void check_vector(lua_State *L, int w, int n, const char *what) {
    const gguf_tensor *t = wt(L, w);
    if (t->n_dims != 1 || t->ne[0] != n)
        luaL_error(L, "%s: '%s' must be a vector of %d, file has [%I, %I]", what, t->name, n,
                   (lua_Integer)t->ne[0], (lua_Integer)t->ne[1]);
}

/* layer_norm(x, w, b, eps): (x - mean) / sqrt(var + eps) * w + b; b may be nil. */
static int l_layer_norm(lua_State *L) {
    ir_op op = new_op(IR_LAYER_NORM);
    op.in[0] = check_value(L, 1);
    op.w = check_weight(L, 2, 1);
    op.i[0] = lua_isnil(L, 3) ? -1 : check_weight(L, 3, 1);
    op.f[0] = (float)luaL_checknumber(L, 4);
    int n = value_n(L, op.in[0]);
    check_vector(L, op.w, n, "layer_norm");
    if (op.i[0] >= 0) check_vector(L, (int)op.i[0], n, "layer_norm");
    return emit_op(L, &op, n);
}

/* matmul(w, x [, bias [, {slice = s}]]): x · wᵀ (+ bias, an F32 vector of the
 * output width); slice: w is 3-D and x multiplies its matrix s (ne[2] index). */
static int l_matmul(lua_State *L) {
    ir_op op = new_op(IR_MATMUL);
    op.w = check_weight(L, 1, 0);
    op.in[0] = check_value(L, 2);
    const gguf_tensor *t = wt(L, op.w);
    int n_in = value_n(L, op.in[0]);
    if (lua_istable(L, 4)) {
        lua_getfield(L, 4, "slice");
        int has_slice = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (has_slice) {
            int s = field_int(L, 4, "slice", 1, 0);
            if (!lua_isnoneornil(L, 3)) return luaL_error(L, "matmul: a slice takes no bias");
            if (t->ne[0] != n_in || t->n_dims != 3 || s >= t->ne[2] || t->ne[3] != 1)
                return luaL_error(L, "matmul: slice %d of weight '%s' [%I, %I, %I]: needs a 3-D weight "
                                  "of row length %d and more than %d matrices", s, t->name,
                                  (lua_Integer)t->ne[0], (lua_Integer)t->ne[1],
                                  (lua_Integer)t->ne[2], n_in, s);
            op.code = IR_MATMUL_SLICE;
            op.i[0] = t->ne[1];
            op.i[1] = n_in;
            op.i[2] = s;
            op.i[3] = (int64_t)((uint64_t)s * (uint64_t)t->ne[1] * ggml_row_bytes(t->type, (uint64_t)t->ne[0]));
            return emit_op(L, &op, (int)t->ne[1]);
        }
    }
    if (t->ne[0] != n_in || t->n_dims > 2)
        return luaL_error(L, "matmul: weight '%s' is [%I, %I], input width is %d", t->name,
                          (lua_Integer)t->ne[0], (lua_Integer)t->ne[1], n_in);
    op.i[0] = t->ne[1];
    op.i[1] = n_in;
    if (lua_isnoneornil(L, 3)) return emit_op(L, &op, (int)t->ne[1]);
    int bias = check_weight(L, 3, 1);
    check_vector(L, bias, (int)t->ne[1], "matmul bias");
    emit_op(L, &op, (int)t->ne[1]);
    ir_op add = new_op(IR_ADD_ROW);
    add.in[0] = check_value(L, -1);
    add.w = bias;
    return emit_op(L, &add, (int)t->ne[1]);
}

/* scale(x, s): x * s. */
static int l_scale(lua_State *L) {
    ir_op op = new_op(IR_SCALE);
    op.in[0] = check_value(L, 1);
    op.f[0] = (float)luaL_checknumber(L, 2);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* gelu(x): tanh-approximation GELU, as llama.cpp evaluates it (F16 table). */
static int l_gelu(lua_State *L) {
    ir_op op = new_op(IR_GELU);
    op.in[0] = check_value(L, 1);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* split(x, offset, width): columns [offset, offset + width) of x. */
static int l_split(lua_State *L) {
    ir_op op = new_op(IR_SPLIT);
    op.in[0] = check_value(L, 1);
    lua_Integer off = luaL_checkinteger(L, 2), w = luaL_checkinteger(L, 3);
    int n = value_n(L, op.in[0]);
    if (off < 0 || w < 1 || off + w > n)
        return luaL_error(L, "split: columns [%I, %I) outside the width %d", off, off + w, n);
    op.i[0] = off;
    op.i[1] = n;
    return emit_op(L, &op, (int)w);
}

/* embed_positions(w): rows pos..pos+n_tokens-1 of w (learned absolute positions). */
static int l_embed_positions(lua_State *L) {
    ir_op op = new_op(IR_POS_EMBED);
    op.w = check_weight(L, 1, 0);
    return emit_op(L, &op, (int)wt(L, op.w)->ne[0]);
}

/* rope(x, {n_head, head_dim, n_rot, mode, freq_base [, YaRN: freq_scale,
 * ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig]}) */
static int l_rope(lua_State *L) {
    ir_op op = new_op(IR_ROPE);
    op.in[0] = check_value(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    op.i[0] = field_int(L, 2, "n_head", 1, 0);
    op.i[1] = field_int(L, 2, "head_dim", 1, 0);
    op.i[2] = field_int(L, 2, "n_rot", 0, op.i[1]);
    lua_getfield(L, 2, "mode");
    const char *mode = lua_isnil(L, -1) ? "norm" : lua_tostring(L, -1);
    if (!mode || (strcmp(mode, "norm") && strcmp(mode, "neox")))
        return luaL_error(L, "rope: mode must be \"norm\" or \"neox\"");
    op.i[3] = strcmp(mode, "neox") == 0 ? 2 : 0;
    lua_pop(L, 1);
    op.f[0] = (float)field_num(L, 2, "freq_base", 0, 10000.0);
    op.f[1] = (float)field_num(L, 2, "freq_scale", 0, 1.0);
    op.f[2] = (float)field_num(L, 2, "ext_factor", 0, 0.0);
    op.f[3] = (float)field_num(L, 2, "attn_factor", 0, 1.0);
    op.f[4] = (float)field_num(L, 2, "beta_fast", 0, 32.0);
    op.f[5] = (float)field_num(L, 2, "beta_slow", 0, 1.0);
    op.i[4] = field_int(L, 2, "n_ctx_orig", 0, 0);
    if (op.f[1] <= 0) return luaL_error(L, "rope: freq_scale must be > 0");
    if (op.f[2] != 0 && op.i[4] < 1) return luaL_error(L, "rope: YaRN (ext_factor != 0) needs n_ctx_orig");
    lua_getfield(L, 2, "freq_factors");
    int has_ff = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (has_ff) {
        lua_getfield(L, 2, "freq_factors");
        op.w = check_weight(L, lua_gettop(L), 1);
        lua_pop(L, 1);
        if (wt(L, op.w)->n_dims != 1 || wt(L, op.w)->ne[0] != op.i[2] / 2)
            return luaL_error(L, "rope: freq_factors '%s' has %I values, expected n_rot/2 = %I",
                              wt(L, op.w)->name, (lua_Integer)wt(L, op.w)->ne[0],
                              (lua_Integer)(op.i[2] / 2));
    }
    int n = value_n(L, op.in[0]);
    if (op.i[0] * op.i[1] != n)
        return luaL_error(L, "rope: n_head %I x head_dim %I != input width %d", (lua_Integer)op.i[0],
                          (lua_Integer)op.i[1], n);
    if (op.i[2] > op.i[1] || op.i[2] % 2)
        return luaL_error(L, "rope: n_rot %I must be even and <= head_dim %I", (lua_Integer)op.i[2],
                          (lua_Integer)op.i[1]);
    return emit_op(L, &op, n);
}

/* An optional weight field of table t: its id, or -1. */
static int field_weight(lua_State *L, int t, const char *k) {
    lua_getfield(L, t, k);
    int id = -1;
    if (!lua_isnil(L, -1)) id = check_weight(L, lua_gettop(L), 1);
    lua_pop(L, 1);
    return id;
}

/* attention(q, k, v, {...}).  k and v nil: no new keys/values; the queries
 * read the KV cache of `layer`, which an earlier attention op (of that
 * layer, with k and v) fills in the same forward call — layers that share
 * another layer's KV (Gemma 3n/4). */
static int l_attention(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    ir_op op = new_op(IR_ATTENTION);
    op.in[0] = check_value(L, 1);
    int shared = lua_isnil(L, 2) && lua_isnil(L, 3);
    if (!shared) {
        op.in[1] = check_value(L, 2);
        op.in[2] = lua_isnil(L, 3) ? -1 : check_value(L, 3);
    }
    luaL_checktype(L, 4, LUA_TTABLE);
    op.i[0] = field_int(L, 4, "layer", 1, 0);
    op.i[1] = field_int(L, 4, "n_head", 1, 0);
    op.i[2] = field_int(L, 4, "n_head_kv", 0, op.i[1]);
    op.i[3] = field_int(L, 4, "head_dim", 1, 0);
    op.i[5] = field_int(L, 4, "head_dim_v", 0, op.i[3]);
    op.f[0] = (float)field_num(L, 4, "scale", 0, 1.0 / sqrt((double)op.i[3]));
    op.i[4] = field_int(L, 4, "window", 0, 0);
    op.f[1] = (float)field_num(L, 4, "softcap", 0, 0.0);
    op.i[6] = field_weight(L, 4, "sinks");
    if (op.f[1] < 0) return luaL_error(L, "attention: softcap must be >= 0");
    lua_getfield(L, 4, "causal");
    int bidirectional = !lua_isnil(L, -1) && !lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (bidirectional) {
        if (op.i[4]) return luaL_error(L, "attention: a sliding window needs causal attention");
        op.i[4] = CF_ATT_BIDIRECTIONAL;
    }
    if (!c->p->kv_dim) return luaL_error(L, "attention: call model{} first");
    if (op.i[0] >= c->p->n_layer)
        return luaL_error(L, "attention: layer %I out of range (n_layer %d)", (lua_Integer)op.i[0],
                          c->p->n_layer);
    if (op.i[2] < 1 || op.i[1] % op.i[2])
        return luaL_error(L, "attention: n_head %I is not a multiple of n_head_kv %I",
                          (lua_Integer)op.i[1], (lua_Integer)op.i[2]);
    if (op.i[5] < 1 || (!shared && op.in[2] < 0 && op.i[5] > op.i[3]))
        return luaL_error(L, "attention: head_dim_v %I must be >= 1 (and <= head_dim %I when the "
                          "values are the keys' prefix, v = nil)", (lua_Integer)op.i[5],
                          (lua_Integer)op.i[3]);
    if (op.i[6] >= 0) check_vector(L, (int)op.i[6], (int)op.i[1], "attention sinks");
    int kv = (int)(op.i[2] * op.i[3]), kv_v = (int)(op.i[2] * op.i[5]);
    if (shared) {
        if (value_n(L, op.in[0]) != op.i[1] * op.i[3])
            return luaL_error(L, "attention: width q %d does not match n_head %I, head_dim %I",
                              value_n(L, op.in[0]), (lua_Integer)op.i[1], (lua_Integer)op.i[3]);
        if (c->p->kv_dim[op.i[0]] != kv || c->p->kv_dim_v[op.i[0]] != kv_v)
            return luaL_error(L, "attention: k and v nil read layer %I's KV cache, but %s (this "
                              "op's n_head_kv x head_dim is %d, x head_dim_v %d)",
                              (lua_Integer)op.i[0],
                              c->p->kv_dim[op.i[0]] ? "its width differs" :
                              "no earlier attention op of that layer stored keys and values",
                              kv, kv_v);
        return emit_op(L, &op, (int)(op.i[1] * op.i[5]));
    }
    if (value_n(L, op.in[0]) != op.i[1] * op.i[3] || value_n(L, op.in[1]) != kv ||
        (op.in[2] >= 0 && value_n(L, op.in[2]) != kv_v))
        return luaL_error(L, "attention: widths q %d, k %d, v %d do not match n_head %I, "
                          "n_head_kv %I, head_dim %I, head_dim_v %I", value_n(L, op.in[0]),
                          value_n(L, op.in[1]), op.in[2] >= 0 ? value_n(L, op.in[2]) : 0,
                          (lua_Integer)op.i[1], (lua_Integer)op.i[2], (lua_Integer)op.i[3],
                          (lua_Integer)op.i[5]);
    if (c->p->kv_dim[op.i[0]])
        return luaL_error(L, "attention: layer %I already has an attention op", (lua_Integer)op.i[0]);
    c->p->kv_dim[op.i[0]] = kv;
    c->p->kv_dim_v[op.i[0]] = op.in[2] >= 0 ? kv_v : 0;
    return emit_op(L, &op, (int)(op.i[1] * op.i[5]));
}

static int binary(lua_State *L, ir_opcode code) {
    ir_op op = new_op(code);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    int n = value_n(L, op.in[0]);
    if (value_n(L, op.in[1]) != n)
        return luaL_error(L, "%s: widths differ (%d vs %d)", ir_info(code)->name, n,
                          value_n(L, op.in[1]));
    return emit_op(L, &op, n);
}

static int l_swiglu(lua_State *L) { return binary(L, IR_SWIGLU); }
static int l_geglu(lua_State *L) { return binary(L, IR_GEGLU); }
static int l_add(lua_State *L) { return binary(L, IR_ADD); }
/* ---- recurrent layers (state-space models, linear attention) ---------------------
 * Each of these ops owns a fixed-size part of the model's recurrent state
 * (E->state): what the previous tokens left, carried from call to call.  The
 * archspec names the layer (opts.layer) the way attention() does; the state is
 * laid out in op order and counted per layer (cf_model_desc.state_dim). */

/* Reserve `floats` of state for op, counted against `layer`. */
static void take_state(lua_State *L, ir_op *op, int layer, long floats, const char *what) {
    spec_ctx *c = ctx_of(L);
    if (!c->p->state_dim) luaL_error(L, "%s: call model{} first", what);
    if (layer >= c->p->n_layer)
        luaL_error(L, "%s: layer %d out of range (n_layer %d)", what, layer, c->p->n_layer);
    op->state_off = c->p->state_floats;
    op->state_floats = floats;
    c->p->state_floats += floats;
    c->p->state_dim[layer] += floats;
}

/* An optional weight field of table t: its id, or -1 when the field is nil;
 * it must be an F32 tensor of n elements. */
static int opt_weight_field(lua_State *L, int t, const char *k, long n, const char *what) {
    lua_getfield(L, t, k);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return -1;
    }
    int id = check_weight(L, lua_gettop(L), 1);
    lua_pop(L, 1);
    if (wt(L, id)->n_elems != (uint64_t)n)
        luaL_error(L, "%s: %s '%s' has %I elements, expected %d", what, k, wt(L, id)->name,
                   (lua_Integer)wt(L, id)->n_elems, (int)n);
    return id;
}

/* ssm_conv(x, w, {layer=, bias=, act="silu"|"none"}): causal depthwise conv1d
 * over x's channels; w [d_conv, width] (F32), the state its d_conv - 1 last
 * input rows. */
static int l_ssm_conv(lua_State *L) {
    ir_op op = new_op(IR_SSM_CONV);
    op.in[0] = check_value(L, 1);
    op.w = check_weight(L, 2, 1);
    luaL_checktype(L, 3, LUA_TTABLE);
    int n = value_n(L, op.in[0]), layer = field_int(L, 3, "layer", 1, 0);
    const gguf_tensor *t = wt(L, op.w);
    if (t->n_dims != 2 || t->ne[1] != n || t->ne[0] < 2 || t->ne[0] > 64)
        return luaL_error(L, "ssm_conv: weight '%s' is [%I, %I], expected [d_conv 2..64, %d]",
                          t->name, (lua_Integer)t->ne[0], (lua_Integer)t->ne[1], n);
    op.i[0] = t->ne[0];
    op.i[1] = opt_weight_field(L, 3, "bias", n, "ssm_conv");
    lua_getfield(L, 3, "act");
    const char *act = lua_isnil(L, -1) ? "none" : lua_tostring(L, -1);
    if (!act || (strcmp(act, "none") && strcmp(act, "silu")))
        return luaL_error(L, "ssm_conv: act must be \"none\" or \"silu\"");
    op.i[2] = strcmp(act, "silu") ? 0 : 1;
    lua_pop(L, 1);
    take_state(L, &op, layer, (long)(op.i[0] - 1) * n, "ssm_conv");
    return emit_op(L, &op, n);
}

/* ssm_scan(x, dt, bc, {layer=, A=, D=, dt_bias=, n_head=, d_state=, n_group=1}):
 * the selective scan.  A [n_head] (Mamba-2, or [1, n_head]) or [d_state,
 * n_head] (Mamba-1: head_dim must be 1), D and dt_bias optional [n_head]. */
static int l_ssm_scan(lua_State *L) {
    ir_op op = new_op(IR_SSM_SCAN);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    op.in[2] = check_value(L, 3);
    luaL_checktype(L, 4, LUA_TTABLE);
    int layer = field_int(L, 4, "layer", 1, 0), n_head = field_int(L, 4, "n_head", 1, 0);
    int d_state = field_int(L, 4, "d_state", 1, 0), n_group = field_int(L, 4, "n_group", 0, 1);
    int n = value_n(L, op.in[0]);
    if (n_head < 1 || n % n_head || d_state < 1 || n_group < 1 || n_head % n_group)
        return luaL_error(L, "ssm_scan: width %d, n_head %d, n_group %d: heads must divide the width "
                          "and groups the heads", n, n_head, n_group);
    if (value_n(L, op.in[1]) != n_head || value_n(L, op.in[2]) != 2 * n_group * d_state)
        return luaL_error(L, "ssm_scan: dt has width %d (expected n_head %d), bc %d (expected "
                          "2 * n_group * d_state = %d)", value_n(L, op.in[1]), n_head,
                          value_n(L, op.in[2]), 2 * n_group * d_state);
    lua_getfield(L, 4, "A");
    if (lua_isnil(L, -1)) return luaL_error(L, "ssm_scan: missing field 'A'");
    op.w = check_weight(L, lua_gettop(L), 1);
    lua_pop(L, 1);
    const gguf_tensor *a = wt(L, op.w);
    int head_dim = n / n_head;
    if (a->n_elems == (uint64_t)n_head) {
        op.i[4] = 0;
    } else if (a->ne[0] == d_state && a->ne[1] == n_head && a->n_dims == 2 && head_dim == 1) {
        op.i[4] = 1;
    } else {
        return luaL_error(L, "ssm_scan: A '%s' is [%I, %I]: expected [n_head %d] (Mamba-2) or "
                          "[d_state %d, n_head] with head_dim 1 (Mamba-1; head_dim is %d)", a->name,
                          (lua_Integer)a->ne[0], (lua_Integer)a->ne[1], n_head, d_state, head_dim);
    }
    op.i[0] = n_head;
    op.i[1] = head_dim;
    op.i[2] = d_state;
    op.i[3] = n_group;
    op.i[5] = opt_weight_field(L, 4, "D", n_head, "ssm_scan");
    op.i[6] = opt_weight_field(L, 4, "dt_bias", n_head, "ssm_scan");
    take_state(L, &op, layer, (long)n * d_state, "ssm_scan");
    return emit_op(L, &op, n);
}

/* delta_net(qkv, ba, {layer=, A=, dt_bias=, n_k_head=, n_v_head=, d_k=, d_v=, eps=}):
 * the gated delta rule (templates/prelude.h); A and dt_bias [n_v_head]. */
static int l_delta_net(lua_State *L) {
    ir_op op = new_op(IR_DELTA_NET);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    int layer = field_int(L, 3, "layer", 1, 0);
    int nk = field_int(L, 3, "n_k_head", 1, 0), nv = field_int(L, 3, "n_v_head", 1, 0);
    int dk = field_int(L, 3, "d_k", 1, 0), dv = field_int(L, 3, "d_v", 1, 0);
    if (nk < 1 || nv < 1 || nv % nk || dk < 1 || dv < 1 || dk > 1024 || dv > 1024)
        return luaL_error(L, "delta_net: n_k_head %d, n_v_head %d (a multiple of it), d_k %d, d_v "
                          "%d (1..1024) expected", nk, nv, dk, dv);
    if (value_n(L, op.in[0]) != 2 * nk * dk + nv * dv || value_n(L, op.in[1]) != 2 * nv)
        return luaL_error(L, "delta_net: qkv has width %d (expected 2 * %d * %d + %d * %d = %d), "
                          "ba %d (expected %d)", value_n(L, op.in[0]), nk, dk, nv, dv,
                          2 * nk * dk + nv * dv, value_n(L, op.in[1]), 2 * nv);
    lua_getfield(L, 3, "A");
    if (lua_isnil(L, -1)) return luaL_error(L, "delta_net: missing field 'A'");
    op.w = check_weight(L, lua_gettop(L), 1);
    lua_pop(L, 1);
    if (wt(L, op.w)->n_elems != (uint64_t)nv)
        return luaL_error(L, "delta_net: A '%s' has %I elements, expected n_v_head %d",
                          wt(L, op.w)->name, (lua_Integer)wt(L, op.w)->n_elems, nv);
    op.i[0] = nk;
    op.i[1] = nv;
    op.i[2] = dk;
    op.i[3] = dv;
    op.i[5] = opt_weight_field(L, 3, "dt_bias", nv, "delta_net");
    op.f[0] = (float)field_num(L, 3, "eps", 1, 0);
    op.scratch_min = kern_delta_net_scratch_floats(nv, dk, dv);
    take_state(L, &op, layer, (long)nv * dv * dk, "delta_net");
    return emit_op(L, &op, nv * dv);
}

/* ---- mixture of experts ---------------------------------------------------- */

/* moe_route(logits, {k=, gating="softmax"|"sigmoid"|"softmax_weight", norm=, scale=,
 * bias=weight, n_group=, n_group_used=}) → route (the k chosen experts and weights
 * of each token; see cf_kernels.moe_route). */
static int l_moe_route(lua_State *L) {
    ir_op op = new_op(IR_MOE_ROUTE);
    op.in[0] = check_value(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n_expert = value_n(L, op.in[0]);
    op.i[0] = n_expert;
    op.i[1] = field_int(L, 2, "k", 1, 0);
    lua_getfield(L, 2, "gating");
    const char *g = lua_isnil(L, -1) ? "softmax" : lua_tostring(L, -1);
    if (!g) return luaL_error(L, "moe_route: gating must be a string");
    op.i[2] = !strcmp(g, "softmax") ? CF_GATING_SOFTMAX : !strcmp(g, "sigmoid") ? CF_GATING_SIGMOID
              : !strcmp(g, "softmax_weight") ? CF_GATING_SOFTMAX_WEIGHT : -1;
    if (op.i[2] < 0)
        return luaL_error(L, "moe_route: gating \"%s\": expected \"softmax\", \"sigmoid\" or "
                          "\"softmax_weight\"", g);
    lua_pop(L, 1);
    lua_getfield(L, 2, "norm");
    op.i[3] = lua_toboolean(L, -1);
    lua_pop(L, 1);
    op.f[0] = (float)field_num(L, 2, "scale", 0, 1.0);
    op.i[4] = field_int(L, 2, "n_group", 0, 1);
    op.i[5] = field_int(L, 2, "n_group_used", 0, op.i[4]);
    op.i[6] = field_weight(L, 2, "bias");
    if (op.i[1] < 1 || op.i[1] > n_expert || op.i[1] > KERN_MOE_MAX_K)
        return luaL_error(L, "moe_route: k %I must be 1..min(n_expert %d, %d)", (lua_Integer)op.i[1],
                          n_expert, KERN_MOE_MAX_K);
    if (n_expert > KERN_MOE_MAX_EXPERTS)
        return luaL_error(L, "moe_route: %d experts, at most %d", n_expert, KERN_MOE_MAX_EXPERTS);
    if (op.i[4] < 1 || n_expert % op.i[4] || op.i[5] < 1 || op.i[5] > op.i[4] ||
        op.i[5] * (n_expert / op.i[4]) < op.i[1])
        return luaL_error(L, "moe_route: %I groups (%I used) of %d experts cannot give k %I",
                          (lua_Integer)op.i[4], (lua_Integer)op.i[5], n_expert, (lua_Integer)op.i[1]);
    if (op.i[6] >= 0) check_vector(L, (int)op.i[6], n_expert, "moe_route bias");
    emit_op(L, &op, (int)(2 * op.i[1]));
    ctx_of(L)->p->values[ctx_of(L)->p->n_values - 1].kind = IR_VAL_ROUTE;
    return 1;
}

static const ir_op *route_op(lua_State *L, int route) {
    spec_ctx *c = ctx_of(L);
    return &c->p->ops[c->p->values[route].def];
}

/* moe_matmul(w, x, route [, bias]): w a 3-D expert tensor [n_in, n_out,
 * n_expert]; x of width n_in (shared by the k slots) or k * n_in (one row
 * per slot); bias [n_out, n_expert] F32 or nil.  → width k * n_out. */
static int l_moe_matmul(lua_State *L) {
    ir_op op = new_op(IR_MOE_MATMUL);
    op.w = check_weight(L, 1, 0);
    op.in[0] = check_value(L, 2);
    op.in[1] = check_value_kind(L, 3, IR_VAL_ROUTE);
    const gguf_tensor *t = wt(L, op.w);
    const ir_op *r = route_op(L, op.in[1]);
    const int k = (int)r->i[1], n_in = (int)t->ne[0], n_out = (int)t->ne[1];
    if (t->ne[3] != 1 || t->ne[2] != r->i[0])
        return luaL_error(L, "moe_matmul: '%s' is [%I, %I, %I], expected [n_in, n_out, %I] (one "
                          "matrix per expert of the route)", t->name, (lua_Integer)t->ne[0],
                          (lua_Integer)t->ne[1], (lua_Integer)t->ne[2], (lua_Integer)r->i[0]);
    int nx = value_n(L, op.in[0]);
    if (nx != n_in && nx != k * n_in)
        return luaL_error(L, "moe_matmul: input width %d, expected %d (shared) or %d (k = %d slots)",
                          nx, n_in, k * n_in, k);
    op.i[0] = n_out;
    op.i[1] = n_in;
    op.i[2] = t->ne[2];
    op.i[3] = k;
    op.i[4] = k > 1 && nx == k * n_in; /* one row per slot */
    op.i[5] = -1;
    if (!lua_isnoneornil(L, 4)) {
        op.i[5] = check_weight(L, 4, 1);
        const gguf_tensor *b = wt(L, (int)op.i[5]);
        if (b->ne[0] != n_out || b->ne[1] != t->ne[2] || b->n_dims != 2)
            luaL_error(L, "moe_matmul: bias '%s' is [%I, %I], expected [%d, %I]", b->name,
                       (lua_Integer)b->ne[0], (lua_Integer)b->ne[1], n_out, (lua_Integer)t->ne[2]);
    }
    op.scratch_per_tok = k * (n_in + n_out + 1); /* kern_moe_scratch_floats per token */
    op.scratch_min = kern_moe_scratch_floats(1, n_in, n_out, k);
    return emit_op(L, &op, k * n_out);
}

/* moe_sum(y, route [, expert_scale]): Σ over the k slots of y (width k * n)
 * weighted by the route → width n; expert_scale an F32 vector of one value
 * per expert multiplying its slots first (Gemma 4's ffn_down_exps.scale). */
static int l_moe_sum(lua_State *L) {
    ir_op op = new_op(IR_MOE_SUM);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value_kind(L, 2, IR_VAL_ROUTE);
    const ir_op *r = route_op(L, op.in[1]);
    int k = (int)r->i[1], n = value_n(L, op.in[0]);
    if (n % k) return luaL_error(L, "moe_sum: width %d is not k = %d slots", n, k);
    op.i[0] = k;
    op.i[1] = -1;
    if (!lua_isnoneornil(L, 3)) {
        op.i[1] = check_weight(L, 3, 1);
        check_vector(L, (int)op.i[1], (int)r->i[0], "moe_sum expert_scale");
    }
    return emit_op(L, &op, n / k);
}

/* mul_sigmoid(x, g): x * sigmoid(g), g of x's width or of width 1. */
static int l_mul_sigmoid(lua_State *L) {
    ir_op op = new_op(IR_MUL_SIGMOID);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    int n = value_n(L, op.in[0]), ng = value_n(L, op.in[1]);
    if (ng != n && ng != 1) return luaL_error(L, "mul_sigmoid: gate width %d, expected %d or 1", ng, n);
    op.i[0] = ng;
    return emit_op(L, &op, n);
}

/* swiglu_oai(g, u, {alpha=1.702, limit=7}) */
static int l_swiglu_oai(lua_State *L) {
    ir_op op = new_op(IR_SWIGLU_OAI);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    int n = value_n(L, op.in[0]);
    if (value_n(L, op.in[1]) != n)
        return luaL_error(L, "swiglu_oai: widths differ (%d vs %d)", n, value_n(L, op.in[1]));
    op.f[0] = lua_istable(L, 3) ? (float)field_num(L, 3, "alpha", 0, 1.702) : 1.702f;
    op.f[1] = lua_istable(L, 3) ? (float)field_num(L, 3, "limit", 0, 7.0) : 7.0f;
    return emit_op(L, &op, n);
}

/* ---- per-head layouts (MLA) ------------------------------------------------------ */

/* head_split(x, n_head, off, width): of each of x's n_head heads, columns [off, off + width). */
static int l_head_split(lua_State *L) {
    ir_op op = new_op(IR_HEAD_SPLIT);
    op.in[0] = check_value(L, 1);
    lua_Integer nh = luaL_checkinteger(L, 2), off = luaL_checkinteger(L, 3), w = luaL_checkinteger(L, 4);
    int n = value_n(L, op.in[0]);
    if (nh < 1 || n % nh || off < 0 || w < 1 || off + w > n / nh)
        return luaL_error(L, "head_split: %I heads of width %d, columns [%I, %I) do not fit", nh,
                          nh > 0 ? n / (int)nh : 0, off, off + w);
    op.i[0] = nh;
    op.i[1] = n / nh;
    op.i[2] = off;
    op.i[3] = w;
    return emit_op(L, &op, (int)(nh * w));
}

/* head_concat(a, b, n_head [, {a_heads=1} / {b_heads=1}]): per head [a_h | b_h];
 * a side with a_heads / b_heads = 1 is one head that every head repeats
 * (MLA's shared RoPE key). */
static int l_head_concat(lua_State *L) {
    ir_op op = new_op(IR_HEAD_CONCAT);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    lua_Integer nh = luaL_checkinteger(L, 3);
    int na = value_n(L, op.in[0]), nb = value_n(L, op.in[1]);
    int a_heads = lua_istable(L, 4) ? field_int(L, 4, "a_heads", 0, (int)nh) : (int)nh;
    int b_heads = lua_istable(L, 4) ? field_int(L, 4, "b_heads", 0, (int)nh) : (int)nh;
    if (nh < 1 || (a_heads != nh && a_heads != 1) || (b_heads != nh && b_heads != 1) ||
        na % a_heads || nb % b_heads)
        return luaL_error(L, "head_concat: widths %d and %d are not %I heads (or 1 shared head)",
                          na, nb, nh);
    op.i[0] = nh;
    op.i[1] = na / a_heads;
    op.i[2] = nb / b_heads;
    op.i[3] = a_heads == 1 ? 0 : op.i[1];
    op.i[4] = b_heads == 1 ? 0 : op.i[2];
    op.i[5] = na;
    op.i[6] = nb;
    return emit_op(L, &op, (int)(nh * (op.i[1] + op.i[2])));
}

/* head_matmul(w, x, {n_head=, n_out=, head_rows=, row0=0, transposed=false}):
 * x of n_head heads of n_in; head h's matrix is rows [h * head_rows + row0, ...)
 * of w (a 2-D tensor, or 3-D [n_in, head_rows, n_head]). */
static int l_head_matmul(lua_State *L) {
    ir_op op = new_op(IR_HEAD_MATMUL);
    op.w = check_weight(L, 1, 0);
    op.in[0] = check_value(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    const gguf_tensor *t = wt(L, op.w);
    int nh = field_int(L, 3, "n_head", 1, 0);
    lua_getfield(L, 3, "transposed");
    int tr = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int n = value_n(L, op.in[0]);
    if (nh < 1 || n % nh) return luaL_error(L, "head_matmul: width %d is not %d heads", n, nh);
    int n_in = n / nh;
    long rows = (long)(t->n_elems / (uint64_t)t->ne[0]);
    int head_rows = field_int(L, 3, "head_rows", 0, (int)(rows / nh));
    int row0 = field_int(L, 3, "row0", 0, 0);
    int n_out = field_int(L, 3, "n_out", 0, tr ? (int)t->ne[0] : head_rows - row0);
    if (tr ? (t->ne[0] != n_out) : (t->ne[0] != n_in))
        return luaL_error(L, "head_matmul: '%s' has rows of %I, expected %d", t->name,
                          (lua_Integer)t->ne[0], tr ? n_out : n_in);
    if (row0 + (tr ? n_in : n_out) > head_rows || (long)head_rows * nh > rows)
        return luaL_error(L, "head_matmul: %d heads of %d rows (from %d) do not fit '%s' (%ld rows)",
                          nh, tr ? n_in : n_out, row0, t->name, rows);
    op.i[0] = n_out;
    op.i[1] = n_in;
    op.i[2] = nh;
    op.i[3] = head_rows;
    op.i[4] = row0;
    op.i[5] = tr;
    op.scratch_per_tok = nh * n_in; /* act_quant: each head's converted row */
    return emit_op(L, &op, nh * n_out);
}

/* ---- issue-19 ops ---------------------------------------------------------- */

/* mul_row(x, w): x * w per row; w an F32 vector of x's width, or of one
 * element (a scalar weight). */
static int l_mul_row(lua_State *L) {
    ir_op op = new_op(IR_MUL_ROW);
    op.in[0] = check_value(L, 1);
    op.w = check_weight(L, 2, 1);
    int n = value_n(L, op.in[0]);
    const gguf_tensor *t = wt(L, op.w);
    if (t->n_elems != 1 && (t->n_dims != 1 || t->ne[0] != n))
        return luaL_error(L, "mul_row: weight '%s' is [%I, %I], expected [%d] or [1]", t->name,
                          (lua_Integer)t->ne[0], (lua_Integer)t->ne[1], n);
    op.i[0] = t->n_elems == 1 ? 1 : n;
    return emit_op(L, &op, n);
}

static int l_mul(lua_State *L) { return binary(L, IR_MUL); }

static int l_relu_sqr(lua_State *L) {
    ir_op op = new_op(IR_RELU_SQR);
    op.in[0] = check_value(L, 1);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* xielu(x, {alpha_n=, alpha_p=, beta=, eps=}): the raw GGUF values (xielu.*
 * arrays, one per layer); the kernel applies ggml_xielu's softplus. */
static int l_xielu(lua_State *L) {
    ir_op op = new_op(IR_XIELU);
    op.in[0] = check_value(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    op.f[0] = (float)field_num(L, 2, "alpha_n", 1, 0);
    op.f[1] = (float)field_num(L, 2, "alpha_p", 1, 0);
    op.f[2] = (float)field_num(L, 2, "beta", 1, 0);
    op.f[3] = (float)field_num(L, 2, "eps", 1, 0);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

static int l_tanh(lua_State *L) {
    ir_op op = new_op(IR_TANH);
    op.in[0] = check_value(L, 1);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

static int l_sub(lua_State *L) { return binary(L, IR_SUB); }

/* concat(a, b): [a | b] per token, width a.n + b.n. */
static int l_concat(lua_State *L) {
    ir_op op = new_op(IR_CONCAT);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    op.i[0] = value_n(L, op.in[0]);
    op.i[1] = value_n(L, op.in[1]);
    return emit_op(L, &op, (int)(op.i[0] + op.i[1]));
}

/* The number of groups of width n in a value of width `total` (an error
 * unless it divides). */
static int groups_of(lua_State *L, const char *what, int total, int n) {
    if (n < 1 || total % n)
        return luaL_error(L, "%s: width %d is not a whole number of groups of %d", what, total, n);
    return total / n;
}

/* match_norm(x, ref): each ref-wide group of x rescaled to ref's magnitude. */
static int l_match_norm(lua_State *L) {
    ir_op op = new_op(IR_MATCH_NORM);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    op.i[1] = value_n(L, op.in[1]);
    op.i[0] = groups_of(L, "match_norm", value_n(L, op.in[0]), (int)op.i[1]);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* mix_groups(x, c): G groups of x mixed per token by the G x G coefficients c
 * (width G²): group j of the result = Σ_k c[j*G + k] · group k. */
static int l_mix_groups(lua_State *L) {
    ir_op op = new_op(IR_MIX_GROUPS);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    int nc = value_n(L, op.in[1]), g = 1;
    while (g * g < nc) g++;
    if (g * g != nc) return luaL_error(L, "mix_groups: coefficients of width %d are not G x G", nc);
    op.i[0] = g;
    op.i[1] = value_n(L, op.in[0]) / g;
    groups_of(L, "mix_groups", value_n(L, op.in[0]), (int)op.i[1]);
    if (op.i[1] * g != value_n(L, op.in[0]))
        return luaL_error(L, "mix_groups: width %d is not %d groups", value_n(L, op.in[0]), g);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* axpy_groups(p, v, c [, {bias = b}]): group j of the result = v * (c[j] + b) +
 * group j of p; c has one value per group. */
static int l_axpy_groups(lua_State *L) {
    ir_op op = new_op(IR_AXPY_GROUPS);
    for (int k = 0; k < 3; k++) op.in[k] = check_value(L, k + 1);
    op.f[0] = lua_istable(L, 4) ? (float)field_num(L, 4, "bias", 0, 0.0) : 0.0f;
    op.i[0] = value_n(L, op.in[2]);
    op.i[1] = value_n(L, op.in[1]);
    if (op.i[0] * op.i[1] != value_n(L, op.in[0]))
        return luaL_error(L, "axpy_groups: p of width %d is not %I groups of v's width %I",
                          value_n(L, op.in[0]), (lua_Integer)op.i[0], (lua_Integer)op.i[1]);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* add_groups(x, v [, {from = g0}]): v added to every v-wide group g >= g0 of x. */
static int l_add_groups(lua_State *L) {
    ir_op op = new_op(IR_ADD_GROUPS);
    op.in[0] = check_value(L, 1);
    op.in[1] = check_value(L, 2);
    op.i[2] = value_n(L, op.in[1]);
    op.i[0] = groups_of(L, "add_groups", value_n(L, op.in[0]), (int)op.i[2]);
    op.i[1] = lua_istable(L, 3) ? field_int(L, 3, "from", 0, 0) : 0;
    if (op.i[1] > op.i[0]) return luaL_error(L, "add_groups: from %I > %I groups", (lua_Integer)op.i[1],
                                             (lua_Integer)op.i[0]);
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* gaussian_topk(x, std_mul): keep what exceeds mean + std_mul · std of the row. */
static int l_gaussian_topk(lua_State *L) {
    ir_op op = new_op(IR_GAUSSIAN_TOPK);
    op.in[0] = check_value(L, 1);
    op.f[0] = (float)luaL_checknumber(L, 2);
    if (value_n(L, op.in[0]) < 2) return luaL_error(L, "gaussian_topk: needs rows of 2 or more");
    return emit_op(L, &op, value_n(L, op.in[0]));
}

/* pos_log_scale(x, {scale=, floor_scale=, offset=}): each token's row times
 * 1 + scale · ln(1 + floor((pos + offset) / floor_scale)). */
static int l_pos_log_scale(lua_State *L) {
    ir_op op = new_op(IR_POS_LOG_SCALE);
    op.in[0] = check_value(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    op.f[0] = (float)field_num(L, 2, "scale", 1, 0);
    op.i[0] = field_int(L, 2, "floor_scale", 1, 0);
    op.f[1] = (float)field_num(L, 2, "offset", 0, 0.0);
    if (op.i[0] < 1) return luaL_error(L, "pos_log_scale: floor_scale must be >= 1");
    return emit_op(L, &op, value_n(L, op.in[0]));
}

static int l_logits(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    ir_op op = new_op(IR_LOGITS);
    op.w = check_weight(L, 1, 0);
    op.in[0] = check_value(L, 2);
    const gguf_tensor *t = wt(L, op.w);
    if (c->p->logits_op >= 0) return luaL_error(L, "logits: the output (logits or embeddings) is already set");
    if (t->ne[0] != value_n(L, op.in[0]) || t->ne[1] != c->p->n_vocab)
        return luaL_error(L, "logits: weight '%s' is [%I, %I], expected [%d, n_vocab %d]", t->name,
                          (lua_Integer)t->ne[0], (lua_Integer)t->ne[1], value_n(L, op.in[0]),
                          c->p->n_vocab);
    op.i[0] = t->ne[1];
    op.i[1] = t->ne[0];
    op.i[2] = -1;
    op.f[0] = 1.0f;
    if (lua_istable(L, 3)) {
        op.f[0] = (float)field_num(L, 3, "scale", 0, 1.0);
        op.f[1] = (float)field_num(L, 3, "softcap", 0, 0.0);
        if (op.f[1] < 0) return luaL_error(L, "logits: softcap must be >= 0");
        lua_getfield(L, 3, "bias");
        if (!lua_isnil(L, -1)) {
            op.i[2] = check_weight(L, lua_gettop(L), 1);
            check_vector(L, (int)op.i[2], c->p->n_vocab, "logits bias");
        }
        lua_pop(L, 1);
    }
    /* The output value is the scratch row for the last token's hidden state. */
    emit_op(L, &op, (int)t->ne[0]);
    c->p->logits_op = c->p->n_ops - 1;
    return 0;
}

/* add_row(x, w [, row]): x + w broadcast over the tokens; w is an F32 vector
 * of x's width, or an F32 matrix of rows that wide and `row` (default 0)
 * picks one (BERT adds token-type 0's embedding to every token). */
static int l_add_row(lua_State *L) {
    ir_op op = new_op(IR_ADD_ROW);
    op.in[0] = check_value(L, 1);
    op.w = check_weight(L, 2, 1);
    lua_Integer row = luaL_optinteger(L, 3, 0);
    const gguf_tensor *t = wt(L, op.w);
    int n = value_n(L, op.in[0]);
    if (t->ne[0] != n || t->n_dims > 2)
        return luaL_error(L, "add_row: '%s' is [%I, %I], rows must have the input width %d", t->name,
                          (lua_Integer)t->ne[0], (lua_Integer)t->ne[1], n);
    if (row < 0 || row >= t->ne[1])
        return luaL_error(L, "add_row: row %I outside '%s' (%I rows)", row, t->name, (lua_Integer)t->ne[1]);
    op.i[0] = row * n;
    return emit_op(L, &op, n);
}

/* embeddings(x): the model is an encoder and x (n_embd wide) its output:
 * the hidden state per token, pooled by the caller; no logits. */
static int l_embeddings(lua_State *L) {
    spec_ctx *c = ctx_of(L);
    ir_op op = new_op(IR_EMBEDDINGS);
    op.in[0] = check_value(L, 1);
    if (c->p->logits_op >= 0) return luaL_error(L, "embeddings: the output (logits or embeddings) is already set");
    if (value_n(L, op.in[0]) != c->p->n_embd)
        return luaL_error(L, "embeddings: input width %d, expected n_embd %d", value_n(L, op.in[0]), c->p->n_embd);
    op.i[0] = c->p->n_embd;
    emit_op(L, &op, 0);
    c->p->logits_op = c->p->n_ops - 1;
    c->p->encoder = 1;
    return 0;
}

/* ---- driver -------------------------------------------------------------- */

static int msgh(lua_State *L) {
    const char *m = lua_tostring(L, 1);
    lua_pushstring(L, m ? m : "(error object is not a string)");
    return 1;
}

/* Load and run one chunk under the traceback-free message handler. */
static int run_chunk(lua_State *L, const char *src, size_t len, const char *name, char *err,
                     size_t err_len) {
    char chunk[512];
    snprintf(chunk, sizeof chunk, "@%s", name);
    lua_pushcfunction(L, msgh);
    int rc = luaL_loadbufferx(L, src, len, chunk, "t");
    if (rc == LUA_OK) rc = lua_pcall(L, 0, 0, -2);
    if (rc != LUA_OK) snprintf(err, err_len, "archspec %s", lua_tostring(L, -1));
    lua_settop(L, 0);
    return rc == LUA_OK ? 0 : -1;
}

int archspec_build(const gguf_file *g, const char *common, size_t common_len, const char *src,
                   size_t src_len, const char *spec_name, ir_program **out, char *err,
                   size_t err_len) {
    *out = NULL;
    ir_program *p = ir_new();
    if (!p) return snprintf(err, err_len, "archspec: out of memory"), -1;
    gguf_str arch;
    if (gguf_get_str(g, "general.architecture", &arch, err, err_len)) {
        ir_free(p);
        return -1;
    }
    p->arch = strndup(arch.ptr, (size_t)arch.len);
    p->archspec_path = strdup(spec_name);
    p->fingerprint = gguf_fingerprint(g);
    if (!p->arch || !p->archspec_path) {
        ir_free(p);
        return snprintf(err, err_len, "archspec: out of memory"), -1;
    }

    lua_State *L = luaL_newstate();
    if (!L) {
        ir_free(p);
        return snprintf(err, err_len, "archspec: cannot create Lua state"), -1;
    }
    /* Sandbox: only pure libraries. */
    luaL_requiref(L, "_G", luaopen_base, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    lua_pop(L, 4);
    static const char *const unsafe[] = {"dofile", "loadfile", "load", "require", "collectgarbage"};
    for (size_t i = 0; i < sizeof unsafe / sizeof *unsafe; i++) {
        lua_pushnil(L);
        lua_setglobal(L, unsafe[i]);
    }
    luaL_newmetatable(L, WEIGHT_MT);
    luaL_newmetatable(L, VALUE_MT);
    lua_pop(L, 2);

    spec_ctx c = {g, p};
    static const luaL_Reg fns[] = {
        {"gguf", l_gguf}, {"hparam", l_hparam}, {"gguf_len", l_gguf_len}, {"model", l_model},
        {"gguf_arr", l_gguf_arr}, {"hparam_layer", l_hparam_layer},
        {"weight", l_weight}, {"embed", l_embed}, {"rms_norm", l_rms_norm}, {"matmul", l_matmul},
        {"rope", l_rope}, {"attention", l_attention}, {"swiglu", l_swiglu}, {"add", l_add},
        {"logits", l_logits}, {"layer_norm", l_layer_norm}, {"scale", l_scale},
        {"gelu", l_gelu}, {"geglu", l_geglu}, {"split", l_split},
        {"embed_positions", l_embed_positions}, {"mul_row", l_mul_row}, {"mul", l_mul},
        {"relu_sqr", l_relu_sqr}, {"xielu", l_xielu}, {"tanh", l_tanh}, {"sub", l_sub},
        {"concat", l_concat}, {"match_norm", l_match_norm}, {"mix_groups", l_mix_groups},
        {"axpy_groups", l_axpy_groups}, {"add_groups", l_add_groups},
        {"gaussian_topk", l_gaussian_topk}, {"pos_log_scale", l_pos_log_scale},
        {"moe_route", l_moe_route}, {"moe_matmul", l_moe_matmul}, {"moe_sum", l_moe_sum},
        {"mul_sigmoid", l_mul_sigmoid}, {"swiglu_oai", l_swiglu_oai}, {"head_split", l_head_split},
        {"head_concat", l_head_concat}, {"head_matmul", l_head_matmul}, {"add_row", l_add_row},
        {"embeddings", l_embeddings},
        {"ssm_conv", l_ssm_conv}, {"ssm_scan", l_ssm_scan}, {"delta_net", l_delta_net}, {NULL, NULL}};
    lua_pushglobaltable(L);
    lua_pushlightuserdata(L, &c);
    luaL_setfuncs(L, fns, 1);
    lua_pushstring(L, p->arch);
    lua_setfield(L, -2, "ARCH");
    lua_pop(L, 1);

    /* The spec's own chunk is files[0] even when common.lua defines helpers first. */
    p->files[0] = strdup(spec_name);
    p->n_files = p->files[0] ? 1 : 0;
    if ((common && run_chunk(L, common, common_len, "archspecs/common.lua", err, err_len)) ||
        run_chunk(L, src, src_len, spec_name, err, err_len)) {
        lua_close(L);
        ir_free(p);
        return -1;
    }
    lua_close(L);

    if (!p->kv_dim) {
        snprintf(err, err_len, "archspec %s: never called model{}", spec_name);
        ir_free(p);
        return -1;
    }
    if (p->logits_op < 0) {
        snprintf(err, err_len, "archspec %s: never called logits() (or embeddings() for an encoder)", spec_name);
        ir_free(p);
        return -1;
    }
    ir_liveness(p);
    *out = p;
    return 0;
}
