-- archspecs/qwen2moe.lua — Qwen 1.5-MoE / Qwen2-57B-A14B.
-- llama.cpp llm_build_qwen2moe: qwen2 attention (q/k/v biases, NEOX RoPE)
-- and an FFN of routed experts — softmax router, top-k, the chosen
-- probabilities as weights, not renormalised — plus one shared SwiGLU
-- expert scaled by sigmoid(ffn_gate_inp_shexp . h).  Expert width
-- expert_feed_forward_length (else feed_forward_length / expert_used_count),
-- shared width expert_shared_feed_forward_length (else feed_forward_length).
local hp = moe_hparams(transformer_hparams{eps = 1e-6, n_ctx = 32768, rope_scaling = true})
local n_ff_exp = hparam("expert_feed_forward_length", 0)
if n_ff_exp == 0 then n_ff_exp = hp.n_ff // hp.n_expert_used end
local n_ff_shexp = hparam("expert_shared_feed_forward_length", 0)
if n_ff_shexp == 0 then n_ff_shexp = hp.n_ff end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp, true)
  q, k = rope_qk(q, k, hp, "neox")
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), attend(q, k, v, hp, il)))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  local f = moe_ffn(h, p, hp, {n_ff = n_ff_exp, gating = "softmax", norm = false})
  x = add(x, add(f, shared_expert(h, p, hp, n_ff_shexp, true)))
end
logits(output, norm(x, "output_norm.weight", hp))
