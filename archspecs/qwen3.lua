-- archspecs/qwen3.lua — Qwen 3 (dense).
-- llama.cpp llm_build_qwen3: as qwen2 without biases, plus a per-head RMSNorm
-- of q and k (attn_q_norm/attn_k_norm, head_dim values) after the projections
-- and before RoPE; head_dim comes from attention.key_length when present.
local hp = transformer_hparams{eps = 1e-6, freq_base = 1000000.0, n_ctx = 32768}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
