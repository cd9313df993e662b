-- archspecs/gemma2.lua — Gemma 2.
-- llama.cpp llm_build_gemma2: gemma plus attention-score soft-capping
-- (attn_logit_softcapping), RMSNorms after attention and after the FFN
-- (post_attention_norm, post_ffw_norm) before each residual add, a sliding
-- window on even layers (il % 2 == 0), and final logit soft-capping.
-- The query scale is 1/sqrt(head_dim) (llama.cpp's choice for 2B/9B and
-- unknown sizes; the 27B model uses 1/sqrt(n_embd / n_head)).
local hp = transformer_hparams{eps = 1e-6, n_ctx = 8192}
local window    = hparam("attention.sliding_window", 4096)
local attn_cap  = hparam("attn_logit_softcapping", 50.0)
local final_cap = hparam("final_logit_softcapping", 30.0)
local tok_embd  = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})

local x = scale(embed(tok_embd), math.sqrt(hp.n_embd))
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il, {window = (il % 2 == 0) and window or 0, softcap = attn_cap})
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a)
  x = add(x, norm(a, p .. "post_attention_norm.weight", hp))
  local f = gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, geglu)
  x = add(x, norm(f, p .. "post_ffw_norm.weight", hp))
end
logits(tok_embd, norm(x, "output_norm.weight", hp), {softcap = final_cap})
