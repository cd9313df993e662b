-- archspecs/gemma3.lua — Gemma 3 (text).
-- llama.cpp llm_build_gemma3: gemma2's block without attention soft-capping,
-- plus per-head q/k RMSNorm before RoPE; layer il is local (sliding window)
-- unless il % sliding_window_pattern == pattern - 1; local layers use RoPE
-- base rope.freq_base_swa (10000), global ones rope.freq_base.  Final
-- soft-capping only when the key is present; output.weight optional.
local hp = transformer_hparams{eps = 1e-6, freq_base = 1000000.0, n_ctx = 32768}
local base_loc  = hparam("rope.freq_base_swa", 10000.0)
local window    = hparam("attention.sliding_window", 1024)
local pattern   = hparam("attention.sliding_window_pattern", 6)
local final_cap = hparam("final_logit_softcapping", 0.0)
local tok_embd  = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output    = output_weight(hp, tok_embd)

local x = scale(embed(tok_embd), math.sqrt(hp.n_embd))
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local is_local = il % pattern < pattern - 1
  local q, k, v = qkv_proj(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q, k = rope_qk(q, k, hp, "neox", is_local and base_loc or hp.freq_base)
  local a = attend(q, k, v, hp, il, {window = is_local and window or 0})
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a)
  x = add(x, norm(a, p .. "post_attention_norm.weight", hp))
  local f = gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, geglu)
  x = add(x, norm(f, p .. "post_ffw_norm.weight", hp))
end
logits(output, norm(x, "output_norm.weight", hp), {softcap = final_cap})
