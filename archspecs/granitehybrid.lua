-- archspecs/granitehybrid.lua — IBM Granite 4.0-H: Mamba-2 and attention
-- layers.  llama.cpp llm_build_granite_hybrid: layer il is Mamba-2
-- (mamba2_mixer, archspecs/common.lua) when its attention.head_count_kv entry
-- is 0, else attention (GQA with the layer's head_count_kv, NORM RoPE unless
-- rope.scaling.finetuned is false — Granite 4.0-H uses none — attn_output
-- bias optional).  Granite's multipliers: embeddings x embedding_scale,
-- attention scores x attention.scale (else 1/sqrt(head_dim)), each residual
-- branch x residual_scale, logits / logit_scale (each only when set).  The
-- FFN: SwiGLU (optional biases), or with expert_count > 0 softmax-routed
-- experts (top-k renormalised, x expert_weights_scale) plus a shared SwiGLU
-- expert when expert_shared_feed_forward_length > 0.
local hp = transformer_hparams{n_ctx = 131072}
ssm_hparams(hp)
local embd_mul   = hparam("embedding_scale", 0.0)
local attn_mul   = hparam("attention.scale", 0.0)
local res_mul    = hparam("residual_scale", 0.0)
local logit_div  = hparam("logit_scale", 0.0)
local use_rope   = hparam("rope.scaling.finetuned", true)
local n_expert   = hparam("expert_count", 0)
local n_ff_shexp = hparam("expert_shared_feed_forward_length", 0)
if n_expert > 0 then moe_hparams(hp) end
local tok_embd   = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output     = output_weight(hp, tok_embd)
local n = hp.n_embd

local function linear(h, name, n_in, n_out)
  return matmul(weight(name .. ".weight", {n_in, n_out}), h,
                weight(name .. ".bias", {n_out}, {optional = true}))
end
local function residual(y) return res_mul ~= 0 and scale(y, res_mul) or y end

local x = embed(tok_embd)
if embd_mul ~= 0 then x = scale(x, embd_mul) end
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local n_head_kv = hparam_layer("attention.head_count_kv", il)
  local y
  if n_head_kv == 0 then
    y = mamba2_mixer(h, p, hp, il)
  else
    local kv_dim = n_head_kv * hp.head_dim
    local q, k = linear(h, p .. "attn_q", n, hp.q_dim), linear(h, p .. "attn_k", n, kv_dim)
    if use_rope then
      q = rope_heads(q, hp.n_head, hp.head_dim, hp.n_rot, hp, "norm")
      k = rope_heads(k, n_head_kv, hp.head_dim, hp.n_rot, hp, "norm")
    end
    local a = attention(q, k, linear(h, p .. "attn_v", n, kv_dim),
                        {layer = il, n_head = hp.n_head, n_head_kv = n_head_kv, head_dim = hp.head_dim,
                         scale = attn_mul ~= 0 and attn_mul or nil})
    y = linear(a, p .. "attn_output", hp.q_dim, n)
  end
  x = add(residual(y), x)
  local f = norm(x, p .. "ffn_norm.weight", hp)
  if n_expert > 0 then
    local m = moe_ffn(f, p, hp, {n_ff = hp.n_ff, norm = true, scale = hparam("expert_weights_scale", 0.0)})
    f = n_ff_shexp > 0 and add(m, shared_expert(f, p, hp, n_ff_shexp, false)) or m
  else
    f = linear(swiglu(linear(f, p .. "ffn_gate", n, hp.n_ff), linear(f, p .. "ffn_up", n, hp.n_ff)),
               p .. "ffn_down", hp.n_ff, n)
  end
  x = add(residual(f), x)
end
logits(output, norm(x, "output_norm.weight", hp), {scale = logit_div ~= 0 and 1.0 / logit_div or 1.0})
