-- archspecs/llama.lua — Llama (1/2/3), Mistral dense, TinyLlama, SmolLM ...,
-- and Mixtral (the llama block with routed experts).
-- The reference computation is llama.cpp's llm_build_llama: pre-norm blocks
-- with RMSNorm, RoPE in the "norm" layout (adjacent pairs), grouped-query
-- attention and a SwiGLU feed-forward — or, when expert_count > 0, a
-- mixture of SwiGLU experts.  Keys and tensor names follow llama.cpp's GGUF
-- conventions (LLM_KV_*, LLM_TENSOR_*).

-- Hyperparameters: hparam(k) reads "llama.<k>"; a second argument is the
-- default used when the key is absent.
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
-- llama.cpp's converter permutes q/k rows into adjacent RoPE pairs ("norm");
-- a Hugging Face checkpoint keeps rotate-half order (archspecs/llama.hf.lua).
local rope_mode = hparam("rope.layout", "norm")
local n_expert  = hparam("expert_count", 0)             -- Mixtral: 8
local n_used    = n_expert > 0 and hparam("expert_used_count") or 0  -- Mixtral: 2

model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 2048) }

-- Global tensors.  ne[0] is the row length (input features).
local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local out_norm = weight("output_norm.weight", {n_embd})
-- Tied embeddings: without output.weight the embedding matrix projects to logits.
local output   = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd
-- Llama 3.1+: RoPE frequency divisors, one per rotated pair (pair i turns by
-- angle / rope_freqs[i]); absent in Llama 1/2 and Mistral files.
local rope_freqs = weight("rope_freqs.weight", {n_rot // 2}, {optional = true})

local x = embed(tok_embd)                                  -- (n_tokens, n_embd)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  -- attention
  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, n_head * head_dim}), h)
  local k = matmul(weight(p .. "attn_k.weight", {n_embd, n_head_kv * head_dim}), h)
  local v = matmul(weight(p .. "attn_v.weight", {n_embd, n_head_kv * head_dim}), h)
  q = rope(q, {n_head = n_head, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = rope_mode,
               freq_factors = rope_freqs})
  k = rope(k, {n_head = n_head_kv, head_dim = head_dim, n_rot = n_rot, freq_base = freq_base, mode = rope_mode,
               freq_factors = rope_freqs})
  local a = attention(q, k, v, {layer = il, n_head = n_head, n_head_kv = n_head_kv,
                                head_dim = head_dim})   -- scale defaults to 1/sqrt(head_dim)
  x = add(x, matmul(weight(p .. "attn_output.weight", {n_head * head_dim, n_embd}), a))
  h = rms_norm(x, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  if n_expert == 0 then
    -- feed-forward: down(silu(gate(h)) * up(h))
    local g = matmul(weight(p .. "ffn_gate.weight", {n_embd, n_ff}), h)
    local u = matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h)
    x = add(x, matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}), swiglu(g, u)))
  else
    -- experts (Mixtral): the router's softmax picks n_used of n_expert, their
    -- weights renormalised; each chosen expert is the FFN above with its own
    -- slice of the 3-D tensors (ne[2] = expert), and the outputs are summed
    -- with the weights.  Widths of the per-expert values: n_used * n_ff.
    local route = moe_route(matmul(weight(p .. "ffn_gate_inp.weight", {n_embd, n_expert}), h),
                            {k = n_used, gating = "softmax", norm = true})
    local g = moe_matmul(weight(p .. "ffn_gate_exps.weight", {n_embd, n_ff, n_expert}), h, route)
    local u = moe_matmul(weight(p .. "ffn_up_exps.weight", {n_embd, n_ff, n_expert}), h, route)
    local d = moe_matmul(weight(p .. "ffn_down_exps.weight", {n_ff, n_embd, n_expert}), swiglu(g, u), route)
    x = add(x, moe_sum(d, route))
  end
end

x = rms_norm(x, out_norm, eps)
logits(output, x)
