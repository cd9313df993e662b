-- archspecs/qwen3next.lua — Qwen3-Next: gated DeltaNet (linear attention) and
-- gated full-attention layers, experts in every layer.  llama.cpp
-- llm_build_qwen3next.  Layer il is recurrent per attention.recurrent_layers,
-- else when (il + 1) % full_attention_interval (default 4) != 0.
--   DeltaNet: qkv = attn_qkv h (or, in older files, the per-k-head
--   interleaved ssm_in h: [q k v z] per k head), z = attn_gate h, ba = ssm_ba h;
--   qkv = silu(causal conv(qkv)) (no bias); o = delta_net(qkv, ba) (the gated
--   delta rule: L2-normalised q, k, β = sigmoid(b), g = softplus(a + dt_bias)
--   · ssm_a; templates/prelude.h); o = RMSNorm_head(o) · silu(z); ssm_out o.
--   The state: the conv window and one d_v x d_k matrix per value head.
--   Attention: attn_q emits query and gate per head; per-head q/k RMSNorm,
--   partial NEOX RoPE (rope.dimension_count), GQA, out · sigmoid(gate),
--   attn_output.
-- Every layer: x += mixer(RMSNorm x); x += FFN(post_attention_norm x) with
-- softmax-routed experts (top-k renormalised, x expert_weights_scale) plus a
-- shared expert scaled by sigmoid(ffn_gate_inp_shexp · h).  The MTP/NextN
-- block (nextn_predict_layers) is not run.
local hp = moe_hparams(transformer_hparams{eps = 1e-6, n_ctx = 262144, rope_scaling = true})
ssm_hparams(hp)
local nk, nv, dk = hp.ssm_n_group, hp.ssm_n_head, hp.d_state
local dv = hp.d_inner // nv
local key_dim, value_dim = nk * dk, nv * dv
local interval = hparam("full_attention_interval", 4)
local attn_scale = hparam("attention.scale", 0.0)
local n_ff_exp = hparam("expert_feed_forward_length", 0)
if n_ff_exp == 0 then n_ff_exp = hp.n_ff // hp.n_expert_used end
local n_ff_shexp = hparam("expert_shared_feed_forward_length", 0)
if n_ff_shexp == 0 then n_ff_shexp = hp.n_ff end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)
local n = hp.n_embd

local function recurrent(il)
  if gguf_len(ARCH .. ".attention.recurrent_layers") then
    local r = hparam_layer("attention.recurrent_layers", il)
    return r == true or (type(r) == "number" and r ~= 0)
  end
  return (il + 1) % interval ~= 0
end

local function deltanet(h, p, il)
  local qkv, z
  local w_qkv = weight(p .. "attn_qkv.weight", {n, 2 * key_dim + value_dim}, {optional = true})
  if w_qkv then
    qkv = matmul(w_qkv, h)
    z = matmul(weight(p .. "attn_gate.weight", {n, value_dim}), h)
  else -- legacy ssm_in: per k head [q (dk) | k (dk) | v (r dv) | z (r dv)]
    local r = nv // nk
    local m = matmul(weight(p .. "ssm_in.weight", {n, 2 * key_dim + 2 * value_dim}), h)
    qkv = head_concat(head_concat(head_split(m, nk, 0, dk), head_split(m, nk, dk, dk), 1),
                      head_split(m, nk, 2 * dk, r * dv), 1)
    z = head_split(m, nk, 2 * dk + r * dv, r * dv)
  end
  local ba = matmul(weight(p .. "ssm_ba.weight", {n, 2 * nv}), h)
  qkv = ssm_conv(qkv, weight(p .. "ssm_conv1d.weight", {hp.d_conv, 2 * key_dim + value_dim}),
                 {layer = il, act = "silu"})
  local o = delta_net(qkv, ba, {layer = il, n_k_head = nk, n_v_head = nv, d_k = dk, d_v = dv,
                                eps = hp.eps, A = weight(p .. "ssm_a", {nv}),
                                dt_bias = weight(p .. "ssm_dt.bias", {nv})})
  o = swiglu(z, rms_norm(o, weight(p .. "ssm_norm.weight", {dv}), hp.eps, {group = dv}))
  return matmul(weight(p .. "ssm_out.weight", {value_dim, n}), o)
end

local function gated_attention(h, p, il)
  local hd = hp.head_dim
  local qg = matmul(weight(p .. "attn_q.weight", {n, 2 * hp.q_dim}), h)
  local q, gate = head_split(qg, hp.n_head, 0, hd), head_split(qg, hp.n_head, hd, hd)
  local k = matmul(weight(p .. "attn_k.weight", {n, hp.kv_dim}), h)
  local v = matmul(weight(p .. "attn_v.weight", {n, hp.kv_dim}), h)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hd}), hp.eps, {group = hd})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hd}), hp.eps, {group = hd})
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il, {scale = attn_scale ~= 0 and attn_scale or nil})
  return matmul(weight(p .. "attn_output.weight", {hp.q_dim, n}), mul_sigmoid(a, gate))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  x = add(recurrent(il) and deltanet(h, p, il) or gated_attention(h, p, il), x)
  h = norm(x, p .. "post_attention_norm.weight", hp)
  local f
  if weight(p .. "ffn_gate_inp.weight", {n, hp.n_expert}, {optional = true}) then
    f = moe_ffn(h, p, hp, {n_ff = n_ff_exp, norm = true, scale = hparam("expert_weights_scale", 0.0)})
    if weight(p .. "ffn_up_shexp.weight", {n, n_ff_shexp}, {optional = true}) then
      f = add(f, shared_expert(h, p, hp, n_ff_shexp, true))
    end
  else
    f = gated_ffn(h, p, hp, swiglu)
  end
  x = add(f, x)
end
logits(output, norm(x, "output_norm.weight", hp))
