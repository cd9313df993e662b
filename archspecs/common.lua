-- archspecs/common.lua — helpers shared by the archspecs.  The compiler runs
-- this file before each archspec in the same sandbox, so these globals are
-- available there.  llama.lua spells everything out and needs none of them;
-- read it first.

-- The compile-time error for a variant an archspec does not implement:
-- "not supported: KEY=VALUE", reported at the line that called this (or
-- `level` frames further up).  KEY is the full GGUF key.
function not_supported(key, value, level)
  error(string.format("not supported: %s=%s", key, tostring(value)), (level or 1) + 1)
end

-- RoPE scaling (rope.scaling.*) as llama.cpp's llama_context applies it: the
-- rope() fields of the model's scaling.  No key or type "none": plain RoPE;
-- "linear": positions / factor; "yarn": YaRN (ext_factor 1, beta 32/1, the
-- original context, attn_factor = mscale corrections, rope.scaling.attn_factor).
-- yarn_log_mul: DeepSeek-2's mscale_all_dim (its yarn_log_multiplier / 0.1;
-- other families leave the key unread, as llama.cpp does).  Other types
-- (longrope, ...) are refused.
function rope_scaling(yarn_log_mul)
  local typ = hparam("rope.scaling.type", "linear")    -- llama.cpp's default
  local factor = hparam("rope.scaling.factor", 0)
  if factor == 0 then factor = hparam("rope.scale_linear", 0) end
  local freq_scale = (factor == 0 or typ == "none") and 1 or 1 / factor
  local attn = hparam("rope.scaling.attn_factor", 1.0)
  if typ == "linear" or typ == "none" then
    return {freq_scale = freq_scale, attn_factor = attn}
  elseif typ ~= "yarn" then
    not_supported(ARCH .. ".rope.scaling.type", typ, 2)
  end
  local f = 1 / freq_scale
  local function mscale(s, m) return s <= 1 and 1 or 0.1 * m * math.log(s) + 1 end
  local a
  if (yarn_log_mul or 0) ~= 0 then
    local m = (ARCH == "deepseek2" and yarn_log_mul ~= 1) and yarn_log_mul or 1
    a = mscale(f, m) / mscale(f, yarn_log_mul)
  else
    a = mscale(f, 1)
  end
  a = a / (1 + 0.1 * math.log(f))   -- the rope kernel multiplies this back in
  return {freq_scale = freq_scale, ext_factor = 1.0, attn_factor = a * attn,
          beta_fast = 32.0, beta_slow = 1.0,
          n_ctx_orig = hparam("rope.scaling.original_context_length", hparam("context_length", 2048))}
end

-- hparam(suffix [, default]) of a key that may also be a per-layer array:
-- the array's largest entry.
function hparam_max(suffix, default)
  local n = gguf_len(ARCH .. "." .. suffix)
  if not n then
    if default == nil then return hparam(suffix) end
    return hparam(suffix, default)
  end
  local m = 0
  for il = 0, n - 1 do m = math.max(m, hparam_layer(suffix, il)) end
  return m
end

-- Hyperparameters most decoder-only transformers share, from "<arch>.*" keys
-- with llama.cpp's defaults, and the model{} declaration.  d overrides:
--   eps_key (default "attention.layer_norm_rms_epsilon"), eps, freq_base, n_ctx,
--   n_layer (default block_count), rope_scaling (true: read rope.scaling.*
--   into hp.rope, which rope_qk applies; the dense families predate it and
--   leave it off).
-- head_dim is attention.key_length when present (qwen3, gemma), else n_embd/n_head.
-- Keys that hybrids give per layer (head_count_kv, feed_forward_length:
-- arrays) read as their largest entry here; such archspecs ask
-- hparam_layer(key, il) for each layer's own.
function transformer_hparams(d)
  d = d or {}
  local hp = {}
  hp.n_embd    = hparam("embedding_length")
  hp.n_layer   = d.n_layer or hparam("block_count")
  hp.n_ff      = hparam_max("feed_forward_length")
  hp.n_head    = hparam("attention.head_count")
  hp.n_head_kv = hparam_max("attention.head_count_kv", hp.n_head)
  hp.head_dim  = hparam("attention.key_length", hp.n_embd // hp.n_head)
  hp.n_rot     = hparam("rope.dimension_count", hp.head_dim)
  hp.freq_base = hparam("rope.freq_base", d.freq_base or 10000.0)
  hp.eps       = hparam(d.eps_key or "attention.layer_norm_rms_epsilon", d.eps or 1e-5)
  hp.n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")
  hp.q_dim     = hp.n_head * hp.head_dim
  hp.kv_dim    = hp.n_head_kv * hp.head_dim
  hp.rope      = d.rope_scaling and rope_scaling() or {}
  model{ n_vocab = hp.n_vocab, n_embd = hp.n_embd, n_layer = hp.n_layer,
         n_ctx_train = hparam("context_length", d.n_ctx or 2048) }
  return hp
end

-- The output projection: output.weight, or the token embedding when tied.
function output_weight(hp, tok_embd)
  return weight("output.weight", {hp.n_embd, hp.n_vocab}, {optional = true}) or tok_embd
end

-- q, k, v = separate projections of h for block prefix p ("blk.3."), with
-- their biases when bias is true.
function qkv_proj(h, p, hp, bias)
  local function proj(name, n)
    local b = bias and weight(p .. name .. ".bias", {n}) or nil
    return matmul(weight(p .. name .. ".weight", {hp.n_embd, n}), h, b)
  end
  return proj("attn_q", hp.q_dim), proj("attn_k", hp.kv_dim), proj("attn_v", hp.kv_dim)
end

-- rope() of x (n_head heads of head_dim, the first n_rot rotated) with the
-- model's base and scaling (hp.rope), or freq_base; freq_factors: a
-- rope_freqs weight (rope_factors()) or nil.
function rope_heads(x, n_head, head_dim, n_rot, hp, mode, freq_base, freq_factors)
  local o = {n_head = n_head, head_dim = head_dim, n_rot = n_rot,
             freq_base = freq_base or hp.freq_base, mode = mode, freq_factors = freq_factors}
  for key, val in pairs(hp.rope or {}) do o[key] = val end
  return rope(x, o)
end

-- RoPE on q and k ("norm" or "neox" layout), base freq_base or the model's.
function rope_qk(q, k, hp, mode, freq_base, freq_factors)
  return rope_heads(q, hp.n_head, hp.head_dim, hp.n_rot, hp, mode, freq_base, freq_factors),
         rope_heads(k, hp.n_head_kv, hp.head_dim, hp.n_rot, hp, mode, freq_base, freq_factors)
end

-- Llama 3.1-style RoPE frequency divisors: rope_freqs.weight (n_rot/2
-- values) when the file has it, else nil (llama.cpp get_rope_factors).
function rope_factors(hp)
  return weight("rope_freqs.weight", {hp.n_rot // 2}, {optional = true})
end

-- Causal attention of layer il with the model's head layout; opts may add
-- scale, window and softcap (see attention()).
function attend(q, k, v, hp, il, opts)
  local o = {layer = il, n_head = hp.n_head, n_head_kv = hp.n_head_kv, head_dim = hp.head_dim}
  for key, val in pairs(opts or {}) do o[key] = val end
  return attention(q, k, v, o)
end

-- ffn_down(act(ffn_gate h, ffn_up h)) of block p; act is swiglu or geglu.
function gated_ffn(h, p, hp, act)
  local g = matmul(weight(p .. "ffn_gate.weight", {hp.n_embd, hp.n_ff}), h)
  local u = matmul(weight(p .. "ffn_up.weight", {hp.n_embd, hp.n_ff}), h)
  return matmul(weight(p .. "ffn_down.weight", {hp.n_ff, hp.n_embd}), act(g, u))
end

-- RMSNorm of x with the n_embd-wide weight `name`.
function norm(x, name, hp)
  return rms_norm(x, weight(name, {hp.n_embd}), hp.eps)
end

-- ---- helpers of the issue-19 families (glm4, phi2, command-r, gptneox, ...) ----

-- x · wᵀ of the tensor `name` .. ".weight" (n_in -> n_out), plus its
-- name .. ".bias" when the file has one (llama.cpp's optional biases).
function linear(x, name, n_in, n_out)
  local b = weight(name .. ".bias", {n_out}, {optional = true})
  return matmul(weight(name .. ".weight", {n_in, n_out}), x, b)
end

-- q, k, v of block p as llama.cpp's create_tensor_qkv / build_qkv read
-- them: one fused attn_qkv (rows q | k | v, with attn_qkv.bias when present)
-- or separate attn_q/attn_k/attn_v, each with its bias when present.
-- q_dim and kv_dim default to hp's.
function qkv_any(h, p, hp, q_dim, kv_dim)
  q_dim, kv_dim = q_dim or hp.q_dim, kv_dim or hp.kv_dim
  local n_in = h.n
  local fused = weight(p .. "attn_qkv.weight", {n_in, q_dim + 2 * kv_dim}, {optional = true})
  if fused then
    local b = weight(p .. "attn_qkv.bias", {q_dim + 2 * kv_dim}, {optional = true})
    local qkv = matmul(fused, h, b)
    return split(qkv, 0, q_dim), split(qkv, q_dim, kv_dim), split(qkv, q_dim + kv_dim, kv_dim)
  end
  return linear(h, p .. "attn_q", n_in, q_dim), linear(h, p .. "attn_k", n_in, kv_dim),
         linear(h, p .. "attn_v", n_in, kv_dim)
end

-- LayerNorm of x with name .. ".weight" and, when present (or required by
-- bias == true), name .. ".bias"; width x.n.
function ln(x, name, hp, bias)
  local w = weight(name .. ".weight", {x.n})
  local b = weight(name .. ".bias", {x.n}, {optional = bias ~= true})
  return layer_norm(x, w, b, hp.eps)
end

-- ffn_down(act(ffn_up h)) of block p, not gated, with the biases the file has.
function plain_ffn(h, p, hp, act)
  local u = linear(h, p .. "ffn_up", hp.n_embd, hp.n_ff)
  return linear(act(u), p .. "ffn_down", hp.n_ff, hp.n_embd)
end

-- The layers that skip RoPE or use a sliding window follow one pattern
-- (llama.cpp set_swa_pattern): with n_pattern p, layer il is "local" (SWA)
-- when il % p < p - 1; an array sliding_window_pattern (one flag per
-- layer) overrides it.
function swa_layers(hp, n_pattern)
  local flags = gguf_arr(ARCH .. ".attention.sliding_window_pattern")
  local t = {}
  for il = 0, hp.n_layer - 1 do
    if flags then t[il] = flags[il + 1] == true or flags[il + 1] == 1
    else
      local np = hparam("attention.sliding_window_pattern", n_pattern)
      t[il] = np == 0 or il % np < np - 1
    end
  end
  return t
end

-- ---- mixture of experts ---------------------------------------------------------

-- Expert counts: hp.n_expert (expert_count), hp.n_expert_used
-- (expert_used_count), expert groups for limited routing (expert_group_count,
-- expert_group_used_count; 0: none).
function moe_hparams(hp)
  hp.n_expert      = hparam("expert_count")
  hp.n_expert_used = hparam("expert_used_count")
  hp.n_group       = hparam("expert_group_count", 0)
  hp.n_group_used  = hparam("expert_group_used_count", 0)
  return hp
end

-- The routed experts of block p (llama.cpp build_moe_ffn): router
-- ffn_gate_inp -> moe_route -> per chosen expert down(act(gate h, up h)) ->
-- weighted sum.  o: n_ff (each expert's width), gating ("softmax", "sigmoid",
-- "softmax_weight"), norm (renormalise the k weights), scale (routed scaling
-- factor; 0 or 1: none), sel_bias (selection-bias weight, DeepSeek-V3's
-- exp_probs_b), act (swiglu, or a function of (gate, up)), biases (router and
-- expert biases, gpt-oss).  Gate and up may be one fused ffn_gate_up_exps.
function moe_ffn(h, p, hp, o)
  local E, ff, k = hp.n_expert, o.n_ff, hp.n_expert_used
  local rb = o.biases and weight(p .. "ffn_gate_inp.bias", {E}) or nil
  local logits = matmul(weight(p .. "ffn_gate_inp.weight", {hp.n_embd, E}), h, rb)
  local grouped = (hp.n_group or 0) > 1
  local r = moe_route(logits, {k = k, gating = o.gating or "softmax", norm = o.norm,
                               scale = o.scale or 0, bias = o.sel_bias,
                               n_group = grouped and hp.n_group or 1,
                               n_group_used = grouped and hp.n_group_used or 1})
  local function exps(name, n_in, n_out, x)
    local b = o.biases and weight(p .. name .. ".bias", {n_out, E}) or nil
    return moe_matmul(weight(p .. name .. ".weight", {n_in, n_out, E}), x, r, b)
  end
  local g, u
  local fused = weight(p .. "ffn_gate_up_exps.weight", {hp.n_embd, 2 * ff, E}, {optional = true})
  if fused then
    if o.biases then not_supported(p .. "ffn_gate_up_exps.weight", "with expert biases", 2) end
    local gu = moe_matmul(fused, h, r)              -- per slot [gate | up]
    g, u = head_split(gu, k, 0, ff), head_split(gu, k, ff, ff)
  else
    g = exps("ffn_gate_exps", hp.n_embd, ff, h)
    u = exps("ffn_up_exps", hp.n_embd, ff, h)
  end
  return moe_sum(exps("ffn_down_exps", ff, hp.n_embd, (o.act or swiglu)(g, u)), r)
end

-- The shared expert of block p: a SwiGLU FFN of width n_ff on the _shexp
-- tensors, scaled by sigmoid(ffn_gate_inp_shexp . h) when gated (qwen2moe).
function shared_expert(h, p, hp, n_ff, gated)
  local g = matmul(weight(p .. "ffn_gate_shexp.weight", {hp.n_embd, n_ff}), h)
  local u = matmul(weight(p .. "ffn_up_shexp.weight", {hp.n_embd, n_ff}), h)
  local y = matmul(weight(p .. "ffn_down_shexp.weight", {n_ff, hp.n_embd}), swiglu(g, u))
  if gated then
    y = mul_sigmoid(y, matmul(weight(p .. "ffn_gate_inp_shexp.weight", {hp.n_embd}), h))
  end
  return y
end

-- ---- encoders (BERT family: embedding models) -------------------------------
-- llama.cpp src/models/bert.cpp builds bert, nomic-bert and their relatives
-- with one graph; bert_encoder(hp, opts) is that graph.  The input embedding
-- is the caller's (token + token type 0 [+ learned positions]); then
--   x = LayerNorm(x)                                 token_embd_norm
--   per layer:  a = attention(x)   (bidirectional unless attention.causal)
--               x = LayerNorm(x + a)                 attn_output_norm  (post-LN)
--               x = LayerNorm(x + ffn(x))            layer_output_norm
-- and the last x is the output: embeddings(x), pooled by the caller with the
-- GGUF's pooling_type.  q, k, v are fused (attn_qkv) or separate, with
-- optional biases and optional LayerNorms on q and k; the attention output
-- bias is optional.  opts: rope (NEOX RoPE on q and k, nomic-bert), ffn
-- ("gelu": up + bias, GELU, down + bias; "swiglu": silu(gate) * up, no biases).

-- Keys every encoder reads (LayerNorm eps, default 1e-12 as BERT's), the
-- model declaration, and the pooling the file declares: 0 none, 1 mean,
-- 2 cls, 3 last are for the caller; 4 (rank: a reranker's classifier head)
-- is not implemented.
function encoder_hparams(d)
  local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", eps = 1e-12, n_ctx = d and d.n_ctx or 512}
  hp.causal = hparam("attention.causal", false)
  local pooling = hparam("pooling_type", 0)
  if pooling == 4 then
    error("pooling_type 4 (rank: a reranker with a classification head) is not supported; embedding models use 0-3", 2)
  end
  return hp
end

-- LayerNorm of x with the n_embd-wide weight and bias `name`.weight/.bias.
function layer_norm_wb(x, name, hp)
  return layer_norm(x, weight(name .. ".weight", {hp.n_embd}), weight(name .. ".bias", {hp.n_embd}), hp.eps)
end

function bert_encoder(x, hp, opts)
  x = layer_norm_wb(x, "token_embd_norm", hp)
  for il = 0, hp.n_layer - 1 do
    local p = "blk." .. il .. "."
    local q, k, v = qkv_any(x, p, hp)
    if weight(p .. "attn_q_norm.weight", {hp.q_dim}, {optional = true}) then q = ln(q, p .. "attn_q_norm", hp) end
    if weight(p .. "attn_k_norm.weight", {hp.kv_dim}, {optional = true}) then k = ln(k, p .. "attn_k_norm", hp) end
    if opts.rope then q, k = rope_qk(q, k, hp, "neox") end
    local a = attend(q, k, v, hp, il, {causal = hp.causal})
    x = layer_norm_wb(add(x, linear(a, p .. "attn_output", hp.q_dim, hp.n_embd)), p .. "attn_output_norm", hp)
    local f
    if opts.ffn == "swiglu" then
      f = gated_ffn(x, p, hp, swiglu)
    else
      f = linear(gelu(linear(x, p .. "ffn_up", hp.n_embd, hp.n_ff)), p .. "ffn_down", hp.n_ff, hp.n_embd)
    end
    x = layer_norm_wb(add(x, f), p .. "layer_output_norm", hp)
  end
  embeddings(x)
end

-- ---- recurrent layers (state-space models, linear attention) --------------------
-- A recurrent layer is one whose mixer calls ssm_conv / ssm_scan / delta_net
-- with layer = il: each of those ops keeps a fixed-size state for that layer
-- (conv window, SSM or DeltaNet state) that the engine carries between calls,
-- saves with a session and snapshots for prefix reuse; an attention() call
-- gives the layer a KV cache.  A hybrid calls either (or both, falcon-h1) per
-- layer.

-- The Mamba-2 mixer's hyperparameters (ssm.*) added to hp: d_conv, d_inner,
-- d_state, ssm_n_head (time_step_rank), ssm_n_group (group_count, default 1).
function ssm_hparams(hp)
  hp.d_conv      = hparam("ssm.conv_kernel")
  hp.d_inner     = hparam("ssm.inner_size")
  hp.d_state     = hparam("ssm.state_size")
  hp.ssm_n_head  = hparam("ssm.time_step_rank")
  hp.ssm_n_group = hparam("ssm.group_count", 1)
  return hp
end

-- The Mamba-2 mixer of block p (layer il) on the normed input h
-- (llama.cpp build_mamba2_layer): ssm_in -> [z | x B C | dt]; causal conv
-- (with bias when the file has one) and silu over x B C; the SSD scan per
-- head with dt bias, A and the D skip; y * silu(z); the grouped RMS norm when
-- ssm_norm is present; ssm_out.
function mamba2_mixer(h, p, hp, il)
  local di, ds, ng, nh = hp.d_inner, hp.d_state, hp.ssm_n_group, hp.ssm_n_head
  local conv_ch = di + 2 * ng * ds
  local zxbcdt = matmul(weight(p .. "ssm_in.weight", {hp.n_embd, di + conv_ch + nh}), h)
  local xbc = ssm_conv(split(zxbcdt, di, conv_ch), weight(p .. "ssm_conv1d.weight", {hp.d_conv, conv_ch}),
                       {layer = il, act = "silu",
                        bias = weight(p .. "ssm_conv1d.bias", {conv_ch}, {optional = true})})
  local y = ssm_scan(split(xbc, 0, di), split(zxbcdt, di + conv_ch, nh), split(xbc, di, 2 * ng * ds),
                     {layer = il, n_head = nh, d_state = ds, n_group = ng,
                      A = weight(p .. "ssm_a", {1, nh}), D = weight(p .. "ssm_d", {1, nh}),
                      dt_bias = weight(p .. "ssm_dt.bias", {nh})})
  y = swiglu(split(zxbcdt, 0, di), y)
  local nw = weight(p .. "ssm_norm.weight", {di // ng, ng}, {optional = true})
  if nw then y = rms_norm(y, nw, hp.eps, {group = di // ng}) end
  return matmul(weight(p .. "ssm_out.weight", {di, hp.n_embd}), y)
end
