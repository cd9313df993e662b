-- archspecs/starcoder2.lua — StarCoder 2.
-- llama.cpp llm_build_starcoder2: LayerNorm with bias (eps
-- attention.layer_norm_epsilon) instead of RMSNorm, biases on q/k/v/o and on
-- both FFN projections, NEOX RoPE, GQA, and a plain (not gated) GELU FFN.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 16384}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local function ln(x, name)
  return layer_norm(x, weight(name .. ".weight", {hp.n_embd}), weight(name .. ".bias", {hp.n_embd}), hp.eps)
end
local function linear(x, name, n_in, n_out)
  return matmul(weight(name .. ".weight", {n_in, n_out}), x, weight(name .. ".bias", {n_out}))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(ln(x, p .. "attn_norm"), p, hp, true)
  q, k = rope_qk(q, k, hp, "neox")
  x = add(x, linear(attend(q, k, v, hp, il), p .. "attn_output", hp.q_dim, hp.n_embd))
  local u = gelu(linear(ln(x, p .. "ffn_norm"), p .. "ffn_up", hp.n_embd, hp.n_ff))
  x = add(x, linear(u, p .. "ffn_down", hp.n_ff, hp.n_embd))
end
logits(output, ln(x, "output_norm"))
