-- archspecs/granitemoe.lua — IBM Granite 3.x MoE (and Granite MoE Shared).
-- llama.cpp llm_build_granite with experts: granite's four multipliers
-- (embedding_scale, attention.scale, residual_scale on each branch,
-- logit_scale) around Mixtral-style experts (softmax, top-k, renormalised,
-- width feed_forward_length), plus a shared SwiGLU expert when
-- expert_shared_feed_forward_length > 0; the residual scale multiplies the
-- sum of both.
local hp = moe_hparams(transformer_hparams{eps = 1e-6, n_ctx = 4096, rope_scaling = true})
local embd_mul   = hparam("embedding_scale", 1.0)
local attn_mul   = hparam("attention.scale", 1.0 / math.sqrt(hp.head_dim))
local res_mul    = hparam("residual_scale", 1.0)
local logit_div  = hparam("logit_scale")
local n_ff_shexp = hparam("expert_shared_feed_forward_length", 0)
local tok_embd   = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output     = output_weight(hp, tok_embd)

local x = scale(embed(tok_embd), embd_mul)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "norm")
  local a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}),
                   attend(q, k, v, hp, il, {scale = attn_mul}),
                   weight(p .. "attn_output.bias", {hp.n_embd}, {optional = true}))
  x = add(x, scale(a, res_mul))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  local f = moe_ffn(h, p, hp, {n_ff = hp.n_ff, norm = true})
  if n_ff_shexp > 0 then f = add(f, shared_expert(h, p, hp, n_ff_shexp, false)) end
  x = add(x, scale(f, res_mul))
end
logits(output, norm(x, "output_norm.weight", hp), {scale = 1.0 / logit_div})
