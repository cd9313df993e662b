-- archspecs/smollm3.lua — SmolLM3.
-- llama.cpp llm_build_smollm3: the llama block ("norm" RoPE, SwiGLU) where
-- every 4th layer (il + 1 divisible by 4, llama.cpp's fixed
-- n_no_rope_layer_step) has no position encoding (NoPE); q/k/v biases
-- when present; output optional (tied).
local hp = transformer_hparams{n_ctx = 65536}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  if (il + 1) % 4 ~= 0 then q, k = rope_qk(q, k, hp, "norm") end
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
