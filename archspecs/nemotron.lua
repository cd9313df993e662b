-- archspecs/nemotron.lua — NVIDIA Nemotron (Minitron, Nemotron-4 style).
-- llama.cpp llm_build_nemotron: LayerNorms with bias (the converter stores
-- the weights as 1 + w), q/k/v (fused or separate, biases when present),
-- NEOX RoPE on the first rope.dimension_count dims (partial rotary),
-- attn_output with its bias when present, and a plain FFN with ReLU²
-- (ffn_up / ffn_down biases when present); untied output.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 4096}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(ln(x, p .. "attn_norm", hp, true), p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  x = add(linear(attend(q, k, v, hp, il), p .. "attn_output", hp.q_dim, hp.n_embd), x)
  x = add(plain_ffn(ln(x, p .. "ffn_norm", hp, true), p, hp, relu_sqr), x)
end
logits(output, ln(x, "output_norm", hp, true))
