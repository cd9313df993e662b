-- archspecs/falcon.lua — TII Falcon (7B, 40B).
-- llama.cpp llm_build_falcon: a parallel block — attention and a plain GELU
-- FFN (no biases) both read the LayerNorm of the block input (Falcon-40B:
-- attention reads a second LayerNorm, attn_norm_2), the layer output is
-- (ffn + attention) + x; fused attn_qkv (rows q | k | v) with multi-query
-- attention, NEOX RoPE; output optional (tied).
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 2048}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = ln(x, p .. "attn_norm", hp, true)
  local h_attn = weight(p .. "attn_norm_2.weight", {hp.n_embd}, {optional = true})
                 and ln(x, p .. "attn_norm_2", hp, true) or h
  local qkv = matmul(weight(p .. "attn_qkv.weight", {hp.n_embd, hp.q_dim + 2 * hp.kv_dim}), h_attn)
  local q, k = rope_qk(split(qkv, 0, hp.q_dim), split(qkv, hp.q_dim, hp.kv_dim), hp, "neox")
  local a = attend(q, k, split(qkv, hp.q_dim + hp.kv_dim, hp.kv_dim), hp, il)
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a)
  x = add(add(plain_ffn(h, p, hp, gelu), a), x)
end
logits(output, ln(x, "output_norm", hp, true))
