-- archspecs/gpt2.lua — GPT-2.
-- llama.cpp llm_build_gpt2: learned absolute position embeddings added to the
-- token embeddings (no RoPE), LayerNorm with bias, fused attn_qkv with bias
-- (rows: q | k | v, multi-head attention), biases on every projection, a
-- plain GELU FFN, and a separate output matrix.
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = n_embd // n_head
local eps       = hparam("attention.layer_norm_epsilon", 1e-5)
local n_ctx     = hparam("context_length", 1024)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer, n_ctx_train = n_ctx }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local pos_embd = weight("position_embd.weight", {n_embd, n_ctx})
local output   = weight("output.weight", {n_embd, n_vocab})
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local function ln(x, name)
  return layer_norm(x, weight(name .. ".weight", {n_embd}), weight(name .. ".bias", {n_embd}), eps)
end

local x = add(embed(tok_embd), embed_positions(pos_embd))
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = ln(x, p .. "attn_norm")
  local qkv = matmul(weight(p .. "attn_qkv.weight", {n_embd, q_dim + 2 * kv_dim}), h,
                     weight(p .. "attn_qkv.bias", {q_dim + 2 * kv_dim}))
  local a = attention(split(qkv, 0, q_dim), split(qkv, q_dim, kv_dim), split(qkv, q_dim + kv_dim, kv_dim),
                      {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim})
  x = add(x, matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a, weight(p .. "attn_output.bias", {n_embd})))
  h = ln(x, p .. "ffn_norm")
  local u = gelu(matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h, weight(p .. "ffn_up.bias", {n_ff})))
  x = add(x, matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), u, weight(p .. "ffn_down.bias", {n_embd})))
end
logits(output, ln(x, "output_norm"))
