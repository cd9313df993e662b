-- archspecs/glm4.lua — GLM-4 (0414) dense.
-- llama.cpp llm_build_glm4: a pre-norm block with "sandwich" norms — RMSNorm
-- of the attention output (post_attention_norm) and of the FFN output
-- (post_ffw_norm) before each residual add; q/k/v (fused or separate, with
-- the biases the file has); RoPE in the "norm" layout on the first
-- rope.dimension_count dims of each head (partial rotary); one ffn_up of
-- rows gate | up into SwiGLU.  The NextN/MTP layers at the end
-- (nextn_predict_layers) are in the file but not run, as in llama.cpp.
-- M-RoPE (rope.dimension_sections, GLM-4V) is refused.
local n_nextn = hparam("nextn_predict_layers", 0)
local hp = transformer_hparams{n_layer = hparam("block_count") - n_nextn, n_ctx = 32768}
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
  q, k = rope_qk(q, k, hp, "norm")
  local a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il))
  x = add(x, norm(a, p .. "post_attention_norm.weight", hp))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  local gu = matmul(weight(p .. "ffn_up.weight", {hp.n_embd, 2 * hp.n_ff}), h)
  local f = matmul(weight(p .. "ffn_down.weight", {hp.n_ff, hp.n_embd}),
                   swiglu(split(gu, 0, hp.n_ff), split(gu, hp.n_ff, hp.n_ff)))
  x = add(x, norm(f, p .. "post_ffw_norm.weight", hp))
end
logits(output, norm(x, "output_norm.weight", hp))
