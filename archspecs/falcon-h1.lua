-- archspecs/falcon-h1.lua — TII Falcon-H1: attention and a Mamba-2 mixer in
-- parallel in every layer.  llama.cpp llm_build_falcon_h1: h = RMSNorm(x);
-- x += attention(h) (NEOX RoPE, GQA, attn_output without its bias) +
-- mamba2_mixer(h) (archspecs/common.lua; ssm_norm optional); then x +=
-- SwiGLU FFN(RMSNorm x) with optional biases.  The FFN norm is looked up as
-- blk.N.ffn_norm, as this llama.cpp does (files written by converters that
-- name it ffn_norm.weight load too).  The µP multipliers of the HF config are
-- folded into the weights by the converter; llama.cpp applies none.
local hp = transformer_hparams{n_ctx = 16384}
ssm_hparams(hp)
local attn_scale = hparam("attention.scale", 0.0)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)
local n = hp.n_embd

local function linear(h, name, n_in, n_out, bias)
  local b = bias ~= false and weight(name .. ".bias", {n_out}, {optional = true}) or nil
  return matmul(weight(name .. ".weight", {n_in, n_out}), h, b)
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local q, k = rope_qk(linear(h, p .. "attn_q", n, hp.q_dim), linear(h, p .. "attn_k", n, hp.kv_dim), hp, "neox")
  local a = attend(q, k, linear(h, p .. "attn_v", n, hp.kv_dim), hp, il,
                   {scale = attn_scale ~= 0 and attn_scale or nil})
  x = add(add(linear(a, p .. "attn_output", hp.q_dim, n, false), mamba2_mixer(h, p, hp, il)), x)
  local fw = weight(p .. "ffn_norm", {n}, {optional = true}) or weight(p .. "ffn_norm.weight", {n})
  local f = rms_norm(x, fw, hp.eps)
  local g = linear(f, p .. "ffn_gate", n, hp.n_ff)
  x = add(linear(swiglu(g, linear(f, p .. "ffn_up", n, hp.n_ff)), p .. "ffn_down", hp.n_ff, n), x)
end
logits(output, norm(x, "output_norm.weight", hp))
