-- archspecs/gpt-oss.lua — OpenAI gpt-oss-20b / gpt-oss-120b.
-- llama.cpp llm_build_openai_moe (src/models/openai-moe.cpp): q/k/v/o with
-- biases, head_dim attention.key_length (q width n_head * head_dim, not
-- n_embd), NEOX RoPE with YaRN; attention sinks (attn_sinks: one logit per
-- head in every softmax's denominator); a sliding window of
-- attention.sliding_window on the layers attention.sliding_window_pattern
-- marks (an array of booleans, or a period n: layer il slides when
-- il % n < n - 1; default 2, i.e. the even layers), which may use RoPE base
-- rope.freq_base_swa; post_attention_norm before the experts.  Experts:
-- router with bias, the top k chosen on the raw logits and weighted by a
-- softmax over those k, gate/up/down with per-expert biases, gpt-oss's
-- clamped SwiGLU (alpha 1.702, limit 7).  Expert tensors are usually MXFP4.
local hp = moe_hparams(transformer_hparams{eps = 1e-5, freq_base = 150000.0, n_ctx = 131072,
                                           rope_scaling = true})
local window   = hparam("attention.sliding_window")
local base_swa = hparam("rope.freq_base_swa", hp.freq_base)
local n_ff_exp = hparam("expert_feed_forward_length")
local pattern  = gguf_arr(ARCH .. ".attention.sliding_window_pattern")
local period   = pattern and 0 or hparam("attention.sliding_window_pattern", 2)
local function is_swa(il)
  if pattern then return pattern[il + 1] == true or pattern[il + 1] == 1 end
  return period == 0 or il % period < period - 1
end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output   = weight("output.weight", {hp.n_embd, hp.n_vocab})

local function proj(h, p, name, n)
  return matmul(weight(p .. name .. ".weight", {hp.n_embd, n}), h,
                weight(p .. name .. ".bias", {n}, {optional = true}))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local swa = is_swa(il)
  local h = norm(x, p .. "attn_norm.weight", hp)
  local q, k, v = proj(h, p, "attn_q", hp.q_dim), proj(h, p, "attn_k", hp.kv_dim), proj(h, p, "attn_v", hp.kv_dim)
  q, k = rope_qk(q, k, hp, "neox", swa and base_swa or hp.freq_base)
  local a = attend(q, k, v, hp, il, {window = swa and window or 0,
                                     sinks = weight(p .. "attn_sinks.weight", {hp.n_head})})
  x = add(x, matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a,
                    weight(p .. "attn_output.bias", {hp.n_embd})))
  x = add(x, moe_ffn(norm(x, p .. "post_attention_norm.weight", hp), p, hp,
                     {n_ff = n_ff_exp, gating = "softmax_weight", biases = true,
                      act = function(g, u) return swiglu_oai(g, u, {alpha = 1.702, limit = 7.0}) end}))
end
logits(output, norm(x, "output_norm.weight", hp))
