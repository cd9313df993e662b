-- archspecs/exaone4.lua — EXAONE 4.0.
-- llama.cpp llm_build_exaone4: no pre-norms — RMS norms on the attention and
-- FFN outputs (post_attention_norm, post_ffw_norm) before each residual add;
-- per-head q/k RMS norm before NEOX RoPE (with rope_freqs divisors when the
-- file has them); SwiGLU FFN; output optional (tied).  As in llama.cpp only
-- the 64-layer (32B) model interleaves attention: 3 of every 4 layers
-- (sliding_window_pattern) use a sliding window (attention.sliding_window,
-- default 4096) with RoPE, the 4th is global without RoPE.  NextN/MTP layers
-- (nextn_predict_layers) are not run.
local n_nextn = hparam("nextn_predict_layers", 0)
local hp = transformer_hparams{n_layer = hparam("block_count") - n_nextn, n_ctx = 65536}
local iswa = hp.n_layer == 64
local window = hparam("attention.sliding_window", 4096)
local is_swa = swa_layers(hp, 4)
local ff = rope_factors(hp)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local local_layer = iswa and is_swa[il]
  local q, k, v = qkv_any(x, p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  if local_layer or not iswa then q, k = rope_qk(q, k, hp, "neox", nil, ff) end
  local a = attend(q, k, v, hp, il, {window = local_layer and window or 0})
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a)
  x = add(x, norm(a, p .. "post_attention_norm.weight", hp))
  x = add(x, norm(gated_ffn(x, p, hp, swiglu), p .. "post_ffw_norm.weight", hp))
end
logits(output, norm(x, "output_norm.weight", hp))
