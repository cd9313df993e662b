-- archspecs/arcee.lua — Arcee AFM.
-- llama.cpp llm_build_arcee: the llama block (RMSNorm, RoPE in the "norm"
-- layout with rope_freqs divisors when present) whose FFN is not gated:
-- ffn_down(relu(ffn_up h)²); output optional (tied).
local hp = transformer_hparams{n_ctx = 65536}
local ff = rope_factors(hp)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q, k = rope_qk(q, k, hp, "norm", nil, ff)
  local a = attend(q, k, v, hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  x = add(x, matmul(weight(p .. "ffn_down.weight", {hp.n_ff, hp.n_embd}),
                    relu_sqr(matmul(weight(p .. "ffn_up.weight", {hp.n_embd, hp.n_ff}), h))))
end
logits(output, norm(x, "output_norm.weight", hp))
