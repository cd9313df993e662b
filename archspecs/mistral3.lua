-- archspecs/mistral3.lua — Mistral 3 (Ministral 3 3B/8B/14B, text).
-- llama.cpp llm_build_mistral3: the llama block (RMSNorm, RoPE in the "norm"
-- layout with rope_freqs divisors when present, SwiGLU; the optional
-- attn_output / FFN biases) with YaRN RoPE scaling (rope.scaling.*: beta
-- fast/slow and the log multiplier from their keys) and llama-4 attention
-- temperature tuning: with attention.temperature_scale s != 0 the queries
-- (after RoPE) are multiplied by 1 + s · ln(1 + floor(pos / n_ctx_orig)),
-- n_ctx_orig the YaRN original context.  Output optional (tied).  The
-- mixture-of-experts layers (expert_count > 0) are refused.
local hp = transformer_hparams{n_ctx = 262144}
hp.rope = rope_scaling(hparam("rope.scaling.yarn_log_multiplier", 0.0))
if hp.rope.ext_factor then
  hp.rope.beta_fast = hparam("rope.scaling.yarn_beta_fast", 32.0)
  hp.rope.beta_slow = hparam("rope.scaling.yarn_beta_slow", 1.0)
end
local n_expert = hparam("expert_count", 0)
if n_expert > 0 then not_supported(ARCH .. ".expert_count", n_expert) end
local temp_scale = hparam("attention.temperature_scale", 0.0)
local n_ctx_orig = hparam("rope.scaling.original_context_length", hparam("context_length"))
local ff = rope_factors(hp)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "norm", nil, ff)
  if temp_scale ~= 0 then q = pos_log_scale(q, {scale = temp_scale, floor_scale = n_ctx_orig}) end
  x = add(x, linear(attend(q, k, v, hp, il), p .. "attn_output", hp.q_dim, hp.n_embd))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  local g = linear(h, p .. "ffn_gate", hp.n_embd, hp.n_ff)
  x = add(x, linear(swiglu(g, linear(h, p .. "ffn_up", hp.n_embd, hp.n_ff)), p .. "ffn_down", hp.n_ff, hp.n_embd))
end
logits(output, norm(x, "output_norm.weight", hp))
