-- archspecs/gemma.lua — Gemma (1).
-- llama.cpp llm_build_gemma: embeddings scaled by sqrt(n_embd); norm weights
-- used as stored (the converter already stores 1 + w); NEOX RoPE; q scaled by
-- 1/sqrt(head_dim) (here: the attention scale, its default); a GEGLU
-- feed-forward with the tanh GELU; output tied to the token embedding.
local hp = transformer_hparams{eps = 1e-6, n_ctx = 8192}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})

local x = scale(embed(tok_embd), math.sqrt(hp.n_embd))
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "neox")
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, geglu))
end
logits(tok_embd, norm(x, "output_norm.weight", hp))
