-- archspecs/ernie4_5.lua — Baidu ERNIE 4.5 (dense, 0.3B).
-- llama.cpp llm_build_ernie4_5: the llama block — RMSNorm, q/k/v (fused or
-- separate, biases when present) with head_dim from attention.key_length,
-- RoPE in the "norm" layout, SwiGLU; output optional (tied).  An
-- attn_output.bias in the file is loaded by llama.cpp but not used, so it is
-- not used here either.  The MoE variant is general.architecture ernie4_5-moe.
local hp = transformer_hparams{n_ctx = 131072}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

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
