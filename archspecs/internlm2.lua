-- archspecs/internlm2.lua — InternLM 2 / 2.5.
-- llama.cpp llm_build_internlm2: the llama block — RMSNorm, q/k/v (fused or
-- separate, biases when present), RoPE in the "norm" layout, SwiGLU — with
-- an untied output.
local hp = transformer_hparams{n_ctx = 32768}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "norm")
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
