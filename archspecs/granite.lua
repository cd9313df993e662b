-- archspecs/granite.lua — IBM Granite 3.x (dense).
-- llama.cpp llm_build_granite: the llama graph with four multipliers:
-- embeddings × embedding_scale, attention scores × attention.scale (instead
-- of 1/sqrt(head_dim)), each residual branch × residual_scale, logits
-- ÷ logit_scale; rope_freqs (RoPE frequency divisors) when the file has them.
local hp = transformer_hparams{eps = 1e-6, n_ctx = 4096}
local embd_mul  = hparam("embedding_scale", 1.0)
local attn_mul  = hparam("attention.scale", 1.0 / math.sqrt(hp.head_dim))
local res_mul   = hparam("residual_scale", 1.0)
local logit_div = hparam("logit_scale", 1.0)
local tok_embd  = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output    = output_weight(hp, tok_embd)

local x = scale(embed(tok_embd), embd_mul)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, hparam("rope.layout", "norm"), nil, rope_factors(hp))  -- "neox": HF rows (granite.hf.lua)
  local a = attend(q, k, v, hp, il, {scale = attn_mul})
  x = add(x, scale(matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a), res_mul))
  x = add(x, scale(gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu), res_mul))
end
logits(output, norm(x, "output_norm.weight", hp), {scale = 1.0 / logit_div})
