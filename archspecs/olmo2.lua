-- archspecs/olmo2.lua — OLMo 2.
-- llama.cpp llm_build_olmo2: no pre-norms — the block input goes straight
-- into the projections and the branch outputs are RMS-normed
-- (post_attention_norm, post_ffw_norm) before each residual add; q and k are
-- RMS-normed over the whole projection (attn_q_norm n_head·head_dim values,
-- attn_k_norm n_head_kv·head_dim) before NEOX RoPE; SwiGLU FFN; untied.
-- OLMo 3's sliding-window layers (attention.sliding_window) are refused.
local hp = transformer_hparams{eps = 1e-6, n_ctx = 4096}
local swa = hparam("attention.sliding_window", 0)
if swa > 0 then not_supported(ARCH .. ".attention.sliding_window", swa) end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(x, p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.q_dim}), hp.eps)
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.kv_dim}), hp.eps)
  q, k = rope_qk(q, k, hp, "neox")
  local a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il))
  x = add(x, norm(a, p .. "post_attention_norm.weight", hp))
  x = add(x, norm(gated_ffn(x, p, hp, swiglu), p .. "post_ffw_norm.weight", hp))
end
logits(output, norm(x, "output_norm.weight", hp))
