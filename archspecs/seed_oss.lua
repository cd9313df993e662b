-- archspecs/seed_oss.lua — ByteDance Seed-OSS.
-- llama.cpp llm_build_seed_oss: the llama block with q/k/v biases (when
-- present), head_dim from attention.key_length, NEOX RoPE and SwiGLU; the
-- FFN's pre-norm is stored as post_attention_norm; output optional (tied).
local hp = transformer_hparams{n_ctx = 524288}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "post_attention_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
