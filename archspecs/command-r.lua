-- archspecs/command-r.lua — Cohere Command R (35B).
-- llama.cpp llm_build_command_r: a parallel block — one LayerNorm without
-- bias feeds both attention and the SwiGLU FFN, and the layer output is
-- (ffn + x) + attention; RoPE in the "norm" layout; logits × logit_scale;
-- the output projection is always the token embedding.  The per-head
-- LayerNorm q/k norms of the 64+ layer models (Command R+) are refused.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 8192}
if hp.n_layer >= 64 then
  not_supported(ARCH .. ".block_count", hp.n_layer .. " (per-head LayerNorm of q and k)")
end
local logit_scale = hparam("logit_scale", 1.0)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = layer_norm(x, weight(p .. "attn_norm.weight", {hp.n_embd}), nil, hp.eps)
  local q, k, v = qkv_any(h, p, hp)
  q, k = rope_qk(q, k, hp, "norm")
  local a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il))
  x = add(add(gated_ffn(h, p, hp, swiglu), x), a)
end
logits(tok_embd, layer_norm(x, weight("output_norm.weight", {hp.n_embd}), nil, hp.eps),
       {scale = logit_scale})
