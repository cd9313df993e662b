-- archspecs/hunyuan-dense.lua — Tencent Hunyuan dense (0.5B-7B).
-- llama.cpp llm_build_hunyuan_vl (hunyuan-dense shares it): the llama block
-- with NEOX RoPE and a per-head RMS norm of q and k applied after RoPE (not
-- before, as qwen3 does); SwiGLU; output optional (tied).  NTK-alpha RoPE:
-- with rope.scaling.alpha the base becomes base · alpha^(head_dim /
-- (head_dim - 2)) (converters usually bake it into rope.freq_base already).
-- M-RoPE (rope.dimension_sections, Hunyuan-VL) is refused.
local hp = transformer_hparams{n_ctx = 262144}
local alpha = hparam("rope.scaling.alpha", 0.0)
if alpha > 0 then hp.freq_base = hp.freq_base * alpha ^ (hp.head_dim / (hp.head_dim - 2)) end
local sections = gguf_arr(ARCH .. ".rope.dimension_sections")
if sections and (sections[1] or 0) > 0 then
  not_supported(ARCH .. ".rope.dimension_sections", table.concat(sections, ","))
end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "output_norm.weight", hp))
