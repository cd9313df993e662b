-- archspecs/gemma3n.lua — Gemma 3n (E2B, E4B).
-- llama.cpp llm_build_gemma3n (src/models/gemma3n.cpp).  The hidden state is
-- n_altup = 4 streams of n_embd (AltUp), kept here as one value of 4·n_embd
-- per token, stream s at columns [s·n_embd, (s+1)·n_embd); stream 0 is the
-- active one.  llama.cpp fixes n_altup 4, the active stream 0, LAuReL rank
-- 64 (the tensors carry it), 256 per-layer-input values per layer, KV on the
-- first 20 layers (the rest reuse the last sliding / full layer's), and
-- activation sparsity (gaussian top-k, std multiplier normal icdf(0.95)) on
-- the first 10 layers.
--  * embeddings × sqrt(n_embd); streams 1..3 = altup_proj[s] · x rescaled to
--    x's magnitude; per-layer inputs as in gemma4;
--  * each layer: predict — coefficients altup_predict_coef · tanh(altup_router
--    · rms_norm(active) / n_embd) mix the streams (plus the streams);
--    attention block on the active prediction (q/k norms, weightless v norm,
--    NEOX RoPE with the layer kind's base, scale 1, sliding window on SWA
--    layers), LAuReL (laurel_r · laurel_l · h, normed, + h) added and / sqrt 2,
--    GEGLU FFN (sparse gate on the first layers) with post norms; correct —
--    every stream += (out - active prediction) · (1 + altup_correct_coef ·
--    modalities); the per-layer input branch (on active · altup_correct_scale)
--    is added to streams 1..3;
--  * the end: streams 1..3 through altup_unembd_proj, rescaled to stream 0's
--    magnitude, the four averaged; final RMS norm, tied output, soft-cap.
local hp = transformer_hparams{eps = 1e-6, n_ctx = 32768}
local n_altup, i_act, n_pl = 4, 0, hparam("embedding_length_per_layer_input", 256)
local n_kv_layers, n_sparse, std_mul = 20, 10, 1.6448533535003662
local window   = hparam("attention.sliding_window")
local base_swa = hparam("rope.freq_base_swa", 10000.0)
local final_cap = hparam("final_logit_softcapping", 30.0)   -- llama.cpp's default
local is_swa = swa_layers(hp, 5)
local d = hp.n_embd
local tok_embd = weight("token_embd.weight", {d, hp.n_vocab})
local output = output_weight(hp, tok_embd)
local altup_proj = weight("altup_proj.weight", {d, d, n_altup - 1})
local altup_unembd = weight("altup_unembd_proj.weight", {d, d, n_altup - 1})

local function stream(xs, s) return split(xs, s * d, d) end
-- the router's modalities of the active stream a (n_altup per token)
local function modalities(a, p)
  local r = scale(rms_norm(a, weight(p .. "altup_router_norm.weight", {d}), hp.eps), 1.0 / d)
  return tanh(matmul(weight(p .. "altup_router.weight", {d, n_altup}), r))
end

local x = scale(embed(tok_embd), math.sqrt(d))
local pl = scale(embed(weight("per_layer_token_embd.weight", {n_pl * hp.n_layer, hp.n_vocab})), math.sqrt(n_pl))
local proj = scale(matmul(weight("per_layer_model_proj.weight", {d, n_pl * hp.n_layer}), x), 1.0 / math.sqrt(d))
proj = rms_norm(proj, weight("per_layer_proj_norm.weight", {n_pl}), hp.eps, {group = n_pl})
pl = scale(add(proj, pl), 1.0 / math.sqrt(2.0))

local added = matmul(altup_proj, x, nil, {slice = 0})
for s = 1, n_altup - 2 do added = concat(added, matmul(altup_proj, x, nil, {slice = s})) end
local xs = concat(x, match_norm(added, x))

for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local local_layer = is_swa[il]
  local coefs = matmul(weight(p .. "altup_predict_coef.weight", {n_altup, n_altup * n_altup}),
                       modalities(stream(xs, i_act), p))
  local pred = add(mix_groups(xs, coefs), xs)
  local active = stream(pred, i_act)
  local h = norm(active, p .. "attn_norm.weight", hp)
  local lr = matmul(weight(p .. "laurel_r.weight", {64, d}), matmul(weight(p .. "laurel_l.weight", {d, 64}), h))
  local laurel = add(rms_norm(lr, weight(p .. "laurel_post_norm.weight", {d}), hp.eps), h)

  local q = matmul(weight(p .. "attn_q.weight", {d, hp.q_dim}), h)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  local base = local_layer and base_swa or hp.freq_base
  local a
  local att_o = {n_head = hp.n_head, n_head_kv = hp.n_head_kv, head_dim = hp.head_dim, scale = 1.0,
                 window = local_layer and window or 0}
  if il < n_kv_layers then
    local k = matmul(weight(p .. "attn_k.weight", {d, hp.kv_dim}), h)
    local v = matmul(weight(p .. "attn_v.weight", {d, hp.kv_dim}), h)
    k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
    v = rms_norm(v, nil, hp.eps, {group = hp.head_dim})
    q, k = rope_qk(q, k, hp, "neox", base)
    att_o.layer = il
    a = attention(q, k, v, att_o)
  else
    q = rope(q, {n_head = hp.n_head, head_dim = hp.head_dim, n_rot = hp.n_rot, freq_base = base, mode = "neox"})
    att_o.layer = n_kv_layers - (local_layer and 2 or 1)
    a = attention(q, nil, nil, att_o)
  end
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, d}), a)
  a = add(norm(a, p .. "post_attention_norm.weight", hp), active)
  local attn_laurel = scale(add(a, laurel), 1.0 / math.sqrt(2.0))

  local f = norm(attn_laurel, p .. "ffn_norm.weight", hp)
  local up = matmul(weight(p .. "ffn_up.weight", {d, hp.n_ff}), f)
  local gate = matmul(weight(p .. "ffn_gate.weight", {d, hp.n_ff}), f)
  if il < n_sparse then gate = gaussian_topk(gate, std_mul) end
  f = matmul(weight(p .. "ffn_down.weight", {hp.n_ff, d}), mul(up, gelu(gate)))
  local out = add(norm(f, p .. "post_ffw_norm.weight", hp), attn_laurel)

  -- correct: every stream moves by the innovation, per-stream weighted
  local innovation = sub(out, active)
  local cc = matmul(weight(p .. "altup_correct_coef.weight", {n_altup, n_altup}), modalities(out, p))
  local corrected = axpy_groups(pred, innovation, cc, {bias = 1.0})
  -- the per-layer input branch, added to streams 1..3
  local first = mul_row(stream(corrected, i_act), weight(p .. "altup_correct_scale.weight", {d}))
  first = gelu(matmul(weight(p .. "inp_gate.weight", {d, n_pl}), first))
  first = matmul(weight(p .. "proj.weight", {n_pl, d}), mul(first, split(pl, il * n_pl, n_pl)))
  first = norm(first, p .. "post_norm.weight", hp)
  xs = add_groups(corrected, first, {from = 1})
end

local s0 = stream(xs, i_act)
local un = matmul(altup_unembd, stream(xs, 1), nil, {slice = 0})
for s = 2, n_altup - 1 do un = concat(un, matmul(altup_unembd, stream(xs, s), nil, {slice = s - 1})) end
un = match_norm(un, s0)
local y = stream(xs, 0)
for s = 0, n_altup - 2 do y = add(y, split(un, s * d, d)) end
y = scale(y, 1.0 / n_altup)
logits(output, norm(y, "output_norm.weight", hp), {softcap = final_cap})
