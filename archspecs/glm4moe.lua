-- archspecs/glm4moe.lua — GLM-4.5 / GLM-4.5-Air / GLM-4.6 (Zhipu).
-- llama.cpp llm_build_glm4_moe: q/k/v with (optional) biases, optional
-- per-head q/k RMSNorm, partial rotary (rope.dimension_count of head_dim,
-- NEOX layout); post_attention_norm is the FFN's input norm;
-- leading_dense_block_count dense SwiGLU blocks, then routed experts —
-- sigmoid scores (expert_gating_func, sigmoid when absent), exp_probs_b
-- selection bias, renormalised (expert_weights_norm), x expert_weights_scale —
-- plus expert_shared_count shared experts.  The nextn_predict_layers NextN/MTP
-- blocks after the trunk (speculative decoding heads) are not run.
local n_nextn = hparam("nextn_predict_layers", 0)
local hp = moe_hparams(transformer_hparams{eps = 1e-5, n_ctx = 131072, rope_scaling = true,
                                           n_layer = hparam("block_count") - n_nextn})
local sections = gguf_len(ARCH .. ".rope.dimension_sections")
if sections then not_supported(ARCH .. ".rope.dimension_sections", "[" .. sections .. " values] (M-RoPE)") end
local n_dense  = hparam("leading_dense_block_count", 0)
local n_ff_exp = hparam("expert_feed_forward_length")
local n_shared = hparam("expert_shared_count", 0)
local gating_id = hparam("expert_gating_func", 2)
local gating = ({[1] = "softmax", [2] = "sigmoid", [3] = "softmax_weight"})[gating_id]
if not gating then not_supported(ARCH .. ".expert_gating_func", gating_id) end
local w_norm  = hparam("expert_weights_norm", false)
local w_scale = hparam("expert_weights_scale", 0)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local function proj(h, p, name, n)
  return matmul(weight(p .. name .. ".weight", {hp.n_embd, n}), h,
                weight(p .. name .. ".bias", {n}, {optional = true}))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local q, k, v = proj(h, p, "attn_q", hp.q_dim), proj(h, p, "attn_k", hp.kv_dim), proj(h, p, "attn_v", hp.kv_dim)
  local qn = weight(p .. "attn_q_norm.weight", {hp.head_dim}, {optional = true})
  local kn = weight(p .. "attn_k_norm.weight", {hp.head_dim}, {optional = true})
  if qn then q = rms_norm(q, qn, hp.eps, {group = hp.head_dim}) end
  if kn then k = rms_norm(k, kn, hp.eps, {group = hp.head_dim}) end
  q, k = rope_qk(q, k, hp, "neox")
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il)))
  h = norm(x, p .. "post_attention_norm.weight", hp)
  if il < n_dense then
    x = add(x, gated_ffn(h, p, hp, swiglu))
  else
    local f = moe_ffn(h, p, hp, {n_ff = n_ff_exp, gating = gating, norm = w_norm, scale = w_scale,
                                 sel_bias = weight(p .. "exp_probs_b.bias", {hp.n_expert})})
    if n_shared > 0 then f = add(f, shared_expert(h, p, hp, n_ff_exp * n_shared, false)) end
    x = add(x, f)
  end
end
logits(output, norm(x, "output_norm.weight", hp))
