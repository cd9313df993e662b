-- archspecs/olmoe.lua — OLMoE (AllenAI).
-- llama.cpp llm_build_olmoe: llama attention with RMSNorm of the whole q and k
-- projections (attn_q_norm/attn_k_norm of n_embd and kv width, not per head)
-- before NEOX RoPE, and routed experts of width feed_forward_length: softmax
-- router, top-k, the chosen probabilities as weights (not renormalised).
local hp = moe_hparams(transformer_hparams{eps = 1e-5, n_ctx = 4096, rope_scaling = true})
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.q_dim}), hp.eps)
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.kv_dim}), hp.eps)
  q, k = rope_qk(q, k, hp, "neox")
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il)))
  x = add(x, moe_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, {n_ff = hp.n_ff, norm = false}))
end
logits(output, norm(x, "output_norm.weight", hp))
