-- archspecs/phi3.lua — Phi-3 / Phi-3.5 (mini, medium; 4k context).
-- llama.cpp llm_build_phi3: fused attn_qkv (rows: q | k | v) and fused
-- ffn_up (rows: gate | up), NEOX RoPE, the llama block otherwise.  The
-- sliding-window key some Phi-3 files carry is not applied (newer llama.cpp
-- ignores it for phi3).  Not supported yet: the rope_factors_long/short of the
-- 128k-context models.
local hp = transformer_hparams{n_ctx = 4096}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local qkv = matmul(weight(p .. "attn_qkv.weight", {hp.n_embd, hp.q_dim + 2 * hp.kv_dim}), h)
  local q, k = rope_qk(split(qkv, 0, hp.q_dim), split(qkv, hp.q_dim, hp.kv_dim), hp, "neox")
  local a = attend(q, k, split(qkv, hp.q_dim + hp.kv_dim, hp.kv_dim), hp, il)
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  h = norm(x, p .. "ffn_norm.weight", hp)
  local gu = matmul(weight(p .. "ffn_up.weight", {hp.n_embd, 2 * hp.n_ff}), h)
  x = add(x, matmul(weight(p .. "ffn_down.weight", {hp.n_ff, hp.n_embd}),
                    swiglu(split(gu, 0, hp.n_ff), split(gu, hp.n_ff, hp.n_ff))))
end
logits(output, norm(x, "output_norm.weight", hp))
