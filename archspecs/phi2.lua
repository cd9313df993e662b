-- archspecs/phi2.lua — Microsoft Phi-2 (and Phi-1.5).
-- llama.cpp llm_build_phi2: a parallel block — one LayerNorm with bias
-- feeds attention and a plain GELU FFN (biases on both projections), the
-- layer output is (attention + ffn) + x; q/k/v fused or separate with
-- biases, NEOX RoPE on the first rope.dimension_count dims (partial
-- rotary); q is scaled by 1/sqrt(head_dim) after RoPE and the attention
-- itself uses scale 1 (as llama.cpp, for precision); attn_output has a
-- bias; the logits get output.bias.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 2048}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})
local output_b = weight("output.bias", {hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = ln(x, p .. "attn_norm", hp, true)
  local q, k, v = qkv_any(h, p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  q = scale(q, 1.0 / math.sqrt(hp.head_dim))
  local a = linear(attend(q, k, v, hp, il, {scale = 1.0}), p .. "attn_output", hp.q_dim, hp.n_embd)
  x = add(add(a, plain_ffn(h, p, hp, gelu)), x)
end
logits(output, ln(x, "output_norm", hp, true), {bias = output_b})
