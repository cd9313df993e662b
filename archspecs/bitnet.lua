-- archspecs/bitnet.lua — Microsoft BitNet b1.58.
-- llama.cpp llm_build_bitnet: the llama block (RMSNorm, NEOX RoPE, SwiGLU)
-- with ternary projections (TQ1_0/TQ2_0, or any type) and two sub-norms:
-- attn_sub_norm on the attention output before attn_output, ffn_sub_norm
-- on the SwiGLU output before ffn_down.  Each projection may carry a
-- one-element <name>.scale its output is multiplied by; the output is always
-- the token embedding.
local hp = transformer_hparams{n_ctx = 4096}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})

-- x · W of tensor `name`, times name.scale when the file has it
local function proj(x, name, n_in, n_out)
  local y = matmul(weight(name .. ".weight", {n_in, n_out}), x)
  local s = weight(name .. ".scale", {1}, {optional = true})
  return s and mul_row(y, s) or y
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local q = proj(h, p .. "attn_q", hp.n_embd, hp.q_dim)
  local k = proj(h, p .. "attn_k", hp.n_embd, hp.kv_dim)
  local v = proj(h, p .. "attn_v", hp.n_embd, hp.kv_dim)
  q, k = rope_qk(q, k, hp, "neox")
  local a = norm(attend(q, k, v, hp, il), p .. "attn_sub_norm.weight", hp)
  x = add(proj(a, p .. "attn_output", hp.q_dim, hp.n_embd), x)
  h = norm(x, p .. "ffn_norm.weight", hp)
  local g = swiglu(proj(h, p .. "ffn_gate", hp.n_embd, hp.n_ff), proj(h, p .. "ffn_up", hp.n_embd, hp.n_ff))
  g = rms_norm(g, weight(p .. "ffn_sub_norm.weight", {hp.n_ff}), hp.eps)
  x = add(proj(g, p .. "ffn_down", hp.n_ff, hp.n_embd), x)
end
logits(tok_embd, norm(x, "output_norm.weight", hp))
