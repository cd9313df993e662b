-- archspecs/gemma4.lua — Gemma 4 (E2B/E4B, 31B, 26B-A4B).
-- llama.cpp llm_build_gemma4 (src/models/gemma4.cpp):
--  * embeddings × sqrt(n_embd); per layer kinds from the
--    sliding_window_pattern array: sliding layers (window
--    attention.sliding_window, head size key_length_swa, RoPE base
--    rope.freq_base_swa over rope.dimension_count_swa dims) and full layers
--    (key_length, rope.freq_base, rope.dimension_count, and rope_freqs
--    divisors: "proportional RoPE", pairs with a huge divisor do not turn);
--    per-layer head_count_kv and feed_forward_length arrays;
--  * per-head RMS norms of q (attn_q_norm) and k (attn_k_norm) before NEOX
--    RoPE, a weightless RMS norm of v; no attn_v: the values are the
--    un-normed keys; attention scale 1;
--  * the last attention.shared_kv_layers layers have no k/v of their own:
--    each reads the KV of the last layer of its kind that has one
--    (llama.cpp: sliding -> block n_kv - 2, full -> n_kv - 1, n_kv the
--    count of layers with KV);
--  * post-attention and post-FFN RMS norms before the residual adds, GEGLU;
--  * per-layer embeddings (embedding_length_per_layer_input > 0): a
--    per_layer_token_embd row per token, scaled by sqrt(n_pl), plus the
--    RMS-normed per_layer_model_proj of the scaled embedding / sqrt(n_embd),
--    all / sqrt(2); each layer adds per_layer_proj(gelu(inp_gate x) · its
--    slice), RMS-normed by post_norm, to its output;
--  * layer_output_scale (one value) multiplies each layer's output; final
--    logit soft-capping; output optional (tied).
--  * MoE layers (26B-A4B: the layers with ffn_gate_inp): the dense GEGLU
--    MLP (ffn_norm, post_ffw_norm_1) in parallel with expert_count GEGLU
--    experts (pre_ffw_norm_2, post_ffw_norm_2), summed before post_ffw_norm;
--    the router reads rms_norm(x) / sqrt(n_embd) · ffn_gate_inp.scale
--    (softmax, top expert_used_count, renormalised) and each expert's output
--    is scaled by its ffn_down_exps.scale entry.
local n_embd   = hparam("embedding_length")
local n_layer  = hparam("block_count")
local eps      = hparam("attention.layer_norm_rms_epsilon", 1e-6)
local n_vocab  = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")
local hd_full  = hparam("attention.key_length")
local hd_swa   = hparam("attention.key_length_swa")
local rot_full = hparam("rope.dimension_count", hd_full)
local rot_swa  = hparam("rope.dimension_count_swa", rot_full)
local base_full = hparam("rope.freq_base", 10000.0)
local base_swa = hparam("rope.freq_base_swa", 10000.0)
local window   = hparam("attention.sliding_window")
local n_shared = hparam("attention.shared_kv_layers", 0)
local n_pl     = hparam("embedding_length_per_layer_input")
local final_cap = hparam("final_logit_softcapping", 0.0)
local n_expert = hparam("expert_count", 0)
local n_used   = n_expert > 0 and hparam("expert_used_count") or 0
local n_ff_exp = n_expert > 0 and hparam("expert_feed_forward_length") or 0
local swa = gguf_arr(ARCH .. ".attention.sliding_window_pattern")
if not swa or #swa < n_layer then error("gemma4: attention.sliding_window_pattern must be an array of block_count flags") end
model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer, n_ctx_train = hparam("context_length", 131072) }

local n_kv = n_layer - n_shared   -- layers < n_kv store their own K/V
local function is_swa(il) return swa[il + 1] == true or swa[il + 1] == 1 end

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local output = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd
local rope_freqs = weight("rope_freqs.weight", {hd_full // 2}, {optional = true})

local x = scale(embed(tok_embd), math.sqrt(n_embd))
local pl  -- (n_tokens, n_layer * n_pl): the per-layer inputs, layer il at column il * n_pl
if n_pl > 0 then
  pl = scale(embed(weight("per_layer_token_embd.weight", {n_pl * n_layer, n_vocab})), math.sqrt(n_pl))
  local proj = scale(matmul(weight("per_layer_model_proj.weight", {n_embd, n_pl * n_layer}), x),
                     1.0 / math.sqrt(n_embd))
  proj = rms_norm(proj, weight("per_layer_proj_norm.weight", {n_pl}), eps, {group = n_pl})
  pl = scale(add(proj, pl), 1.0 / math.sqrt(2.0))
end

for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local gate_inp = n_expert > 0 and weight(p .. "ffn_gate_inp.weight", {n_embd, n_expert}, {optional = true})
  local local_layer = is_swa(il)
  local hd = local_layer and hd_swa or hd_full
  local n_head = hparam_layer("attention.head_count", il)
  local n_head_kv = hparam_layer("attention.head_count_kv", il, n_head)
  local n_ff = hparam_layer("feed_forward_length", il)
  local rope_o = {n_head = n_head, head_dim = hd, n_rot = local_layer and rot_swa or rot_full,
                  freq_base = local_layer and base_swa or base_full, mode = "neox",
                  freq_factors = (not local_layer) and rope_freqs or nil}
  local att_o = {n_head = n_head, n_head_kv = n_head_kv, head_dim = hd, scale = 1.0,
                 window = local_layer and window or 0}

  local h = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local q = matmul(weight(p .. "attn_q.weight", {n_embd, n_head * hd}), h)
  q = rope(rms_norm(q, weight(p .. "attn_q_norm.weight", {hd}), eps, {group = hd}), rope_o)
  local a
  if il < n_kv then
    local k = matmul(weight(p .. "attn_k.weight", {n_embd, n_head_kv * hd}), h)
    local wv = weight(p .. "attn_v.weight", {n_embd, n_head_kv * hd}, {optional = true})
    local v = rms_norm(wv and matmul(wv, h) or k, nil, eps, {group = hd})
    k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hd}), eps, {group = hd})
    rope_o.n_head = n_head_kv
    k = rope(k, rope_o)
    att_o.layer = il
    a = attention(q, k, v, att_o)
  else
    if n_kv < 2 then error("gemma4: shared KV layers need at least two layers with KV") end
    att_o.layer = n_kv - (local_layer and 2 or 1)
    a = attention(q, nil, nil, att_o)
  end
  a = matmul(weight(p .. "attn_output.weight", {n_head * hd, n_embd}), a)
  local attn_out = add(rms_norm(a, weight(p .. "post_attention_norm.weight", {n_embd}), eps), x)
  h = rms_norm(attn_out, weight(p .. "ffn_norm.weight", {n_embd}), eps)
  local f = matmul(weight(p .. "ffn_down.weight", {n_ff, n_embd}),
                   geglu(matmul(weight(p .. "ffn_gate.weight", {n_embd, n_ff}), h),
                         matmul(weight(p .. "ffn_up.weight", {n_embd, n_ff}), h)))
  if gate_inp then
    f = rms_norm(f, weight(p .. "post_ffw_norm_1.weight", {n_embd}), eps)
    local r = scale(rms_norm(attn_out, nil, eps), 1.0 / math.sqrt(n_embd))
    r = mul_row(r, weight(p .. "ffn_gate_inp.scale", {n_embd}))
    local route = moe_route(matmul(gate_inp, r), {k = n_used, gating = "softmax", norm = true})
    local he = rms_norm(attn_out, weight(p .. "pre_ffw_norm_2.weight", {n_embd}), eps)
    local g, u
    local gu = weight(p .. "ffn_gate_up_exps.weight", {n_embd, 2 * n_ff_exp, n_expert}, {optional = true})
    if gu then
      gu = moe_matmul(gu, he, route)                    -- per slot [gate | up]
      g, u = head_split(gu, n_used, 0, n_ff_exp), head_split(gu, n_used, n_ff_exp, n_ff_exp)
    else
      g = moe_matmul(weight(p .. "ffn_gate_exps.weight", {n_embd, n_ff_exp, n_expert}), he, route)
      u = moe_matmul(weight(p .. "ffn_up_exps.weight", {n_embd, n_ff_exp, n_expert}), he, route)
    end
    local d = moe_matmul(weight(p .. "ffn_down_exps.weight", {n_ff_exp, n_embd, n_expert}), geglu(g, u), route)
    local e = moe_sum(d, route, weight(p .. "ffn_down_exps.scale", {n_expert}, {optional = true}))
    f = add(f, rms_norm(e, weight(p .. "post_ffw_norm_2.weight", {n_embd}), eps))
  end
  x = add(rms_norm(f, weight(p .. "post_ffw_norm.weight", {n_embd}), eps), attn_out)
  if pl then
    local g = gelu(matmul(weight(p .. "inp_gate.weight", {n_embd, n_pl}), x))
    g = matmul(weight(p .. "proj.weight", {n_pl, n_embd}), mul(g, split(pl, il * n_pl, n_pl)))
    x = add(x, rms_norm(g, weight(p .. "post_norm.weight", {n_embd}), eps))
  end
  local out_scale = weight(p .. "layer_output_scale.weight", {1}, {optional = true})
  if out_scale then x = mul_row(x, out_scale) end
end
logits(output, rms_norm(x, weight("output_norm.weight", {n_embd}), eps), {softcap = final_cap})
