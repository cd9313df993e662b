-- archspecs/mellum.lua — JetBrains Mellum (12B-A2.5B MoE).
-- llama.cpp llama_model_mellum: qwen3moe's block — per-head q/k RMSNorm
-- before NEOX RoPE, routed experts only (softmax router, top-k, weights
-- renormalised) — with a sliding window (attention.sliding_window) on 3 of
-- every 4 layers (attention.sliding_window_pattern), where RoPE runs without
-- its scaling (freq_scale 1, no YaRN).  q/k/v fused (attn_qkv) or separate,
-- biases when the file has them.  Expert width expert_feed_forward_length
-- (per layer or one value), else feed_forward_length / expert_used_count.
local hp = moe_hparams(transformer_hparams{eps = 1e-6, n_ctx = 8192, rope_scaling = true})
if hp.n_expert == 0 or hp.n_expert_used == 0 then
  not_supported(ARCH .. ".expert_count", hp.n_expert)   -- llama.cpp: n_expert must be > 0
end
local window = hparam("attention.sliding_window", 0)
local is_swa = window > 0 and swa_layers(hp, 4) or {}
local hp_plain = {}                                      -- hp without RoPE scaling (SWA layers)
for key, val in pairs(hp) do hp_plain[key] = val end
hp_plain.rope = {}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local n_ff_exp = hparam_layer("expert_feed_forward_length", il, 0)
  if n_ff_exp == 0 then n_ff_exp = hp.n_ff // hp.n_expert_used end
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q, k = rope_qk(q, k, is_swa[il] and hp_plain or hp, "neox")
  local a = attend(q, k, v, hp, il, {window = is_swa[il] and window or 0})
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a))
  x = add(x, moe_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, {n_ff = n_ff_exp, norm = true}))
end
logits(output, norm(x, "output_norm.weight", hp))
