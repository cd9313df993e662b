-- archspecs/qwen2.lua — Qwen 1.5 / Qwen 2 / Qwen 2.5 (dense).
-- llama.cpp llm_build_qwen2: the llama block with biases on q, k and v (added
-- before RoPE; none on attn_output) and RoPE in the NEOX layout.
local hp = transformer_hparams{eps = 1e-6, n_ctx = 32768}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp, true)
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
