-- archspecs/stablelm.lua — Stability StableLM 2 (1.6B, 3B; Zephyr).
-- llama.cpp llm_build_stablelm: LayerNorm with bias, q/k/v (fused or
-- separate, biases when present), NEOX RoPE on the first
-- rope.dimension_count dims (partial rotary), SwiGLU.  With ffn_norm the
-- block is sequential; without it (StableLM 2 12B) the FFN reads the
-- attention's input norm (parallel residual).  The 12B's per-head
-- LayerNorm q/k norms are refused.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 4096}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  if weight(p .. "attn_q_norm.weight", {hp.head_dim, hp.n_head}, {optional = true}) then
    not_supported("tensor " .. p .. "attn_q_norm.weight", "per-head LayerNorm of q and k")
  end
  local h = ln(x, p .. "attn_norm", hp, true)
  local q, k, v = qkv_any(h, p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  local a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il))
  local ffn_inp = add(a, x)
  local has_ffn_norm = weight(p .. "ffn_norm.weight", {hp.n_embd}, {optional = true})
  local hf = has_ffn_norm and ln(ffn_inp, p .. "ffn_norm", hp, true) or h
  x = add(gated_ffn(hf, p, hp, swiglu), ffn_inp)
end
logits(output, ln(x, "output_norm", hp, true))
