-- archspecs/gptneox.lua — EleutherAI GPT-NeoX / Pythia.
-- llama.cpp llm_build_gptneox: LayerNorms with bias, fused attn_qkv with
-- bias (rows q | k | v), NEOX RoPE on the first rope.dimension_count dims
-- (partial rotary, rotary_pct), attn_output and a plain GELU FFN with
-- biases.  use_parallel_residual: x + attn(ln1 x) + ffn(ln2 x), summed as
-- (ffn + x) + attn; otherwise sequential.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 2048}
local parallel = hparam("use_parallel_residual")
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = ln(x, p .. "attn_norm", hp, true)
  local qkv = matmul(weight(p .. "attn_qkv.weight", {hp.n_embd, hp.q_dim + 2 * hp.kv_dim}), h,
                     weight(p .. "attn_qkv.bias", {hp.q_dim + 2 * hp.kv_dim}))
  local q, k = rope_qk(split(qkv, 0, hp.q_dim), split(qkv, hp.q_dim, hp.kv_dim), hp, "neox")
  local a = attend(q, k, split(qkv, hp.q_dim + hp.kv_dim, hp.kv_dim), hp, il)
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a,
             weight(p .. "attn_output.bias", {hp.n_embd}))
  if parallel then
    x = add(add(plain_ffn(ln(x, p .. "ffn_norm", hp, true), p, hp, gelu), x), a)
  else
    x = add(a, x)
    x = add(plain_ffn(ln(x, p .. "ffn_norm", hp, true), p, hp, gelu), x)
  end
end
logits(output, ln(x, "output_norm", hp, true))
