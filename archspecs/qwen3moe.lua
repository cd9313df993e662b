-- archspecs/qwen3moe.lua — Qwen3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder).
-- llama.cpp llm_build_qwen3moe: qwen3 attention (per-head q/k RMSNorm before
-- NEOX RoPE, no biases) and an FFN of routed experts only: softmax router,
-- top-k, weights renormalised over the chosen (norm_topk_prob).  Expert width
-- expert_feed_forward_length (else feed_forward_length / expert_used_count).
local hp = moe_hparams(transformer_hparams{eps = 1e-6, freq_base = 1000000.0, n_ctx = 32768,
                                           rope_scaling = true})
local n_ff_exp = hparam("expert_feed_forward_length", 0)
if n_ff_exp == 0 then n_ff_exp = hp.n_ff // hp.n_expert_used end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q, k = rope_qk(q, k, hp, "neox")
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il)))
  x = add(x, moe_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, {n_ff = n_ff_exp, norm = true}))
end
logits(output, norm(x, "output_norm.weight", hp))
