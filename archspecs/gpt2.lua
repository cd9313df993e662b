-- archspecs/gpt2.lua — GPT-2.
-- llama.cpp llm_build_gpt2: learned absolute position embeddings added to the
-- token embeddings (no RoPE), LayerNorm with bias, fused attn_qkv with bias
-- (rows: q | k | v), biases on every projection, a plain GELU FFN, and a
-- separate output matrix.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 1024}
local n_ctx = hparam("context_length", 1024)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local pos_embd = weight("position_embd.weight", {hp.n_embd, n_ctx})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local function ln(x, name)
  return layer_norm(x, weight(name .. ".weight", {hp.n_embd}), weight(name .. ".bias", {hp.n_embd}), hp.eps)
end
local function linear(x, name, n_in, n_out)
  return matmul(weight(name .. ".weight", {n_in, n_out}), x, weight(name .. ".bias", {n_out}))
end

local x = add(embed(tok_embd), embed_positions(pos_embd))
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local qkv = linear(ln(x, p .. "attn_norm"), p .. "attn_qkv", hp.n_embd, hp.q_dim + 2 * hp.kv_dim)
  local a = attend(split(qkv, 0, hp.q_dim), split(qkv, hp.q_dim, hp.kv_dim),
                   split(qkv, hp.q_dim + hp.kv_dim, hp.kv_dim), hp, il)
  x = add(x, linear(a, p .. "attn_output", hp.q_dim, hp.n_embd))
  local u = gelu(linear(ln(x, p .. "ffn_norm"), p .. "ffn_up", hp.n_embd, hp.n_ff))
  x = add(x, linear(u, p .. "ffn_down", hp.n_ff, hp.n_embd))
end
logits(output, ln(x, "output_norm"))
