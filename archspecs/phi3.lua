-- archspecs/phi3.lua — Phi-3 / Phi-3.5 (mini, medium; 4k context).
-- llama.cpp llm_build_phi3: fused attn_qkv (rows: q | k | v) and fused
-- ffn_up (rows: gate | up), NEOX RoPE, the llama block otherwise.  The
-- sliding window key of some Phi-3 files is not applied (newer llama.cpp
-- ignores it for phi3); rope_factors_long/short (128k models) are not
-- supported yet and rejected as unknown tensors are ignored.
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = n_embd // n_head
local n_rot     = hparam("rope.dimension_count", head_dim)
local freq_base = hparam("rope.freq_base", 10000.0)
local eps       = hparam("attention.layer_norm_rms_epsilon", 1e-5)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 4096) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local out_norm = weight("output_norm.weight", {n_embd})
local output   = weight("output.weight", {n_embd, n_vocab})
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local x = embed(tok_embd)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local qkv = matmul(weight(p .. "attn_qkv.weight", {n_embd, q_dim + 2 * kv_dim}), h)
  local q = split(qkv, 0, q_dim)
  local k = split(qkv, q_dim, kv_dim)
  local v = split(qkv, q_dim + kv_dim, kv_dim)
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim})
  x = add(x, matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a))
  h = rms_norm(x, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  local gu = matmul(weight(p .. "ffn_up.weight", {n_embd, 2 * n_ff}), h)
  x = add(x, matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}),
                    swiglu(split(gu, 0, n_ff), split(gu, n_ff, n_ff))))
end
logits(output, rms_norm(x, out_norm, eps))
