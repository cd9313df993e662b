-- archspecs/lfm2.lua — LiquidAI LFM2: short-convolution and attention layers.
-- llama.cpp llm_build_lfm2: a layer is a conv layer when its
-- attention.head_count_kv entry is 0.  Conv layer (build_shortconv_block):
-- [b | c | x] = shortconv.in_proj h; y = c * conv(b * x) with a causal
-- depthwise conv of shortconv.l_cache taps, no bias, no activation (the state
-- keeps the last l_cache - 1 inputs b * x); shortconv.out_proj y.  Attention
-- layer: per-head q/k RMSNorm, NEOX RoPE, GQA with the layer's own
-- head_count_kv (a sliding window when attention.sliding_window is set).
-- Every layer: x += mixer(RMSNorm x); x += SwiGLU FFN(RMSNorm x).  The final
-- norm is token_embd_norm; the output is tied unless output.weight exists.
-- MoE variants (LFM2-8B-A1B, arch lfm2moe) are another architecture.
local hp = transformer_hparams{n_ctx = 128000}
local l_cache = hparam("shortconv.l_cache")
local window = hparam("attention.sliding_window", 0)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = output_weight(hp, tok_embd)
local n = hp.n_embd

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = norm(x, p .. "attn_norm.weight", hp)
  local n_head_kv = hparam_layer("attention.head_count_kv", il)
  local y
  if n_head_kv == 0 then
    local bcx = matmul(weight(p .. "shortconv.in_proj.weight", {n, 3 * n}), h)
    local bx = mul(split(bcx, 0, n), split(bcx, 2 * n, n))
    local conv = ssm_conv(bx, weight(p .. "shortconv.conv.weight", {l_cache, n}), {layer = il})
    y = matmul(weight(p .. "shortconv.out_proj.weight", {n, n}), mul(split(bcx, n, n), conv))
  else
    local kv_dim = n_head_kv * hp.head_dim
    local q = matmul(weight(p .. "attn_q.weight", {n, hp.q_dim}), h)
    local k = matmul(weight(p .. "attn_k.weight", {n, kv_dim}), h)
    local v = matmul(weight(p .. "attn_v.weight", {n, kv_dim}), h)
    q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
    k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
    q = rope_heads(q, hp.n_head, hp.head_dim, hp.n_rot, hp, "neox")
    k = rope_heads(k, n_head_kv, hp.head_dim, hp.n_rot, hp, "neox")
    local a = attention(q, k, v, {layer = il, n_head = hp.n_head, n_head_kv = n_head_kv,
                                  head_dim = hp.head_dim, window = window})
    y = matmul(weight(p .. "attn_output.weight", {hp.q_dim, n}), a)
  end
  x = add(x, y)
  x = add(x, gated_ffn(norm(x, p .. "ffn_norm.weight", hp), p, hp, swiglu))
end
logits(output, norm(x, "token_embd_norm.weight", hp))
