-- archspecs/gemma2.lua — Gemma 2.
-- llama.cpp llm_build_gemma2: gemma plus attention-score soft-capping
-- (attn_logit_softcapping), RMSNorms after attention and after the FFN
-- (post_attention_norm, post_ffw_norm) before each residual add, a sliding
-- window on even layers (il % 2 == 0), and final logit soft-capping.
-- The query scale is 1/sqrt(head_dim) (llama.cpp's choice for 2B/9B and
-- unknown sizes; the 27B model uses 1/sqrt(n_embd / n_head)).
local n_embd    = hparam("embedding_length")
local n_layer   = hparam("block_count")
local n_ff      = hparam("feed_forward_length")
local n_head    = hparam("attention.head_count")
local n_head_kv = hparam("attention.head_count_kv", n_head)
local head_dim  = hparam("attention.key_length", n_embd // n_head)
local n_rot     = hparam("rope.dimension_count", head_dim)
local freq_base = hparam("rope.freq_base", 10000.0)
local eps       = hparam("attention.layer_norm_rms_epsilon", 1e-6)
local window    = hparam("attention.sliding_window", 4096)
local attn_cap  = hparam("attn_logit_softcapping", 50.0)
local final_cap = hparam("final_logit_softcapping", 30.0)
local n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 8192) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local out_norm = weight("output_norm.weight", {n_embd})
local q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim

local x = scale(embed(tok_embd), math.sqrt(n_embd))
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, q_dim}), h)
  local k = matmul(weight(p .. "attn_k.weight", {n_embd, kv_dim}), h)
  local v = matmul(weight(p .. "attn_v.weight", {n_embd, kv_dim}), h)
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = "neox"})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv, head_dim = head_dim,
                                window = (il % 2 == 0) and window or 0, softcap = attn_cap})
  a = matmul(weight(p .. "attn_output.weight", {q_dim, n_embd}), a)
  x = add(x, rms_norm(a, weight(p .. "post_attention_norm.weight", {n_embd}), eps))
  h = rms_norm(x, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  local g = matmul(weight(p .. "ffn_gate.weight", {n_embd, n_ff}), h)
  local u = matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h)
  local f = matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), geglu(g, u))
  x = add(x, rms_norm(f, weight(p .. "post_ffw_norm.weight", {n_embd}), eps))
end
logits(tok_embd, rms_norm(x, out_norm, eps), {softcap = final_cap})
