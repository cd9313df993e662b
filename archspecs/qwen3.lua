-- archspecs/qwen3.lua — Qwen 3 (dense).
-- llama.cpp llm_build_qwen3: as qwen2 without biases, plus a per-head RMSNorm
-- of q and k (attn_q_norm/attn_k_norm, head_dim values) after the projections
-- and before RoPE; head_dim comes from attention.key_length when present.
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = hparam("attention.key_length", n_embd // n_head)
local n_rot     = hparam("rope.dimension_count", head_dim)
local freq_base = hparam("rope.freq_base", 1000000.0)
local eps       = hparam("attention.layer_norm_rms_epsilon", 1e-6)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 32768) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local out_norm = weight("output_norm.weight", {n_embd})
local output   = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local x = embed(tok_embd)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, q_dim}), h)
  local k = matmul(weight(p .. "attn_k.weight", {n_embd, kv_dim}), h)
  local v = matmul(weight(p .. "attn_v.weight", {n_embd, kv_dim}), h)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {head_dim}), eps, {group = head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {head_dim}), eps, {group = head_dim})
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim})
  x = add(x, matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a))
  h = rms_norm(x, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  local g = matmul(weight(p .. "ffn_gate.weight", {n_embd, n_ff}), h)
  local u = matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h)
  x = add(x, matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), swiglu(g, u)))
end
logits(output, rms_norm(x, out_norm, eps))
