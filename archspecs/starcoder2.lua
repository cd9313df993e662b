-- archspecs/starcoder2.lua — StarCoder 2.
-- llama.cpp llm_build_starcoder2: LayerNorm with bias (eps
-- attention.layer_norm_epsilon) instead of RMSNorm, biases on q/k/v/o and on
-- both FFN projections, NEOX RoPE, GQA, and a plain (not gated) GELU FFN.
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = n_embd // n_head
local n_rot     = hparam("rope.dimension_count", head_dim)
local freq_base = hparam("rope.freq_base", 10000.0)
local eps       = hparam("attention.layer_norm_epsilon", 1e-5)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 16384) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local output   = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local function ln(x, name)
  return layer_norm(x, weight(name .. ".weight", {n_embd}), weight(name .. ".bias", {n_embd}), eps)
end

local x = embed(tok_embd)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = ln(x, p .. "attn_norm")
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, q_dim}), h, weight(p .. "attn_q.bias", {q_dim}))
  local k = matmul(weight(p .. "attn_k.weight", {n_embd, kv_dim}), h, weight(p .. "attn_k.bias", {kv_dim}))
  local v = matmul(weight(p .. "attn_v.weight", {n_embd, kv_dim}), h, weight(p .. "attn_v.bias", {kv_dim}))
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim})
  x = add(x, matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a, weight(p .. "attn_output.bias", {n_embd})))
  h = ln(x, p .. "ffn_norm")
  local u = gelu(matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h, weight(p .. "ffn_up.bias", {n_ff})))
  x = add(x, matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), u, weight(p .. "ffn_down.bias", {n_embd})))
end
logits(output, ln(x, "output_norm"))
