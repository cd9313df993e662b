-- archspecs/nemotron_h.lua — NVIDIA Nemotron-H: Mamba-2, attention and MLP
-- layers in a per-layer pattern.  llama.cpp llm_build_nemotron_h: layer il is
-- Mamba-2 when its attention.head_count_kv and feed_forward_length entries
-- are both 0, attention (no RoPE, GQA with its own head_count_kv) when only
-- feed_forward_length is 0, else an MLP: ffn_down(relu(ffn_up h)²), optional
-- biases.  Each layer: x += mixer(RMSNorm x).  The RMS epsilon is
-- attention.layer_norm_rms_epsilon, else attention.layer_norm_epsilon.
-- Expert MLPs (Nemotron-H MoE) are not supported.
local eps = hparam("attention.layer_norm_rms_epsilon", hparam("attention.layer_norm_epsilon"))
local hp = transformer_hparams{eps = eps, n_ctx = 8192}
ssm_hparams(hp)
if hparam("expert_count", 0) > 0 then not_supported(ARCH .. ".expert_count", hparam("expert_count")) end
local attn_scale = hparam("attention.scale", 0.0)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)
local n = hp.n_embd

local function linear(h, name, n_in, n_out)
  return matmul(weight(name .. ".weight", {n_in, n_out}), h,
                weight(name .. ".bias", {n_out}, {optional = true}))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local n_head_kv = hparam_layer("attention.head_count_kv", il)
  local n_ff = hparam_layer("feed_forward_length", il)
  local y
  if n_head_kv == 0 and n_ff == 0 then
    y = mamba2_mixer(h, p, hp, il)
  elseif n_ff == 0 then
    local kv_dim = n_head_kv * hp.head_dim
    local a = attention(linear(h, p .. "attn_q", n, hp.q_dim), linear(h, p .. "attn_k", n, kv_dim),
                        linear(h, p .. "attn_v", n, kv_dim),
                        {layer = il, n_head = hp.n_head, n_head_kv = n_head_kv, head_dim = hp.head_dim,
                         scale = attn_scale ~= 0 and attn_scale or nil})
    y = linear(a, p .. "attn_output", hp.q_dim, n)
  else
    y = linear(relu_sqr(linear(h, p .. "ffn_up", n, n_ff)), p .. "ffn_down", n_ff, n)
  end
  x = add(y, x)
end
logits(output, norm(x, "output_norm.weight", hp))
