-- archspecs/granite.lua — IBM Granite 3.x (dense).
-- llama.cpp llm_build_granite: the llama graph with four multipliers:
-- embeddings × embedding_scale, attention scores × attention.scale (instead
-- of 1/sqrt(head_dim)), each residual branch × residual_scale, logits
-- ÷ logit_scale.
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = n_embd // n_head
local n_rot     = hparam("rope.dimension_count", head_dim)
local freq_base = hparam("rope.freq_base", 10000.0)
local eps       = hparam("attention.layer_norm_rms_epsilon", 1e-6)
local embd_mul  = hparam("embedding_scale", 1.0)
local attn_mul  = hparam("attention.scale", 1.0 / math.sqrt(head_dim))
local res_mul   = hparam("residual_scale", 1.0)
local logit_div = hparam("logit_scale", 1.0)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 4096) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local out_norm = weight("output_norm.weight", {n_embd})
local output   = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local x = scale(embed(tok_embd), embd_mul)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, q_dim}), h)
  local k = matmul(weight(p .. "attn_k.weight", {n_embd, kv_dim}), h)
  local v = matmul(weight(p .. "attn_v.weight", {n_embd, kv_dim}), h)
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "norm"})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "norm"})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim,
                                scale = attn_mul})
  x = add(x, scale(matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a), res_mul))
  h = rms_norm(x, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  local g = matmul(weight(p .. "ffn_gate.weight", {n_embd, n_ff}), h)
  local u = matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h)
  x = add(x, scale(matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), swiglu(g, u)), res_mul))
end
logits(output, rms_norm(x, out_norm, eps), {scale = 1.0 / logit_div})
