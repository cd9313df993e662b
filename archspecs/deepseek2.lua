-- archspecs/deepseek2.lua — DeepSeek-V2 / V2.5 / V3 / R1, Kimi K2 (and the
-- V2-Lite layout).  llama.cpp llm_build_deepseek2 (src/models/deepseek2.cpp).
--
-- Attention is multi-head latent attention (MLA).  Each token's keys and
-- values are compressed into one latent c = rmsnorm(kv_a_mqa h)[:kv_lora]
-- (kv_lora_rank floats) plus one RoPE key k_pe shared by every head; the
-- KV cache holds exactly [c | k_pe] per position (MQA with one kv head), not
-- the per-head keys and values.  Per head, key = [k_nope | k_pe] with
-- k_nope = W_kb,h c and value = W_vb,h c; the query [q_nope | q_pe] comes
-- from the q LoRA (q_b(rmsnorm(q_a h))) or, in the "lite" layout, attn_q h.
-- Absorbed form (what llama.cpp runs for MLA files): q_nope · k_nope =
-- (W_kb,hᵀ q_nope) · c, so each head attends over the cached latents with the
-- query [W_kb,hᵀ q_nope | q_pe], the weighted latent sum o_h is mapped to the
-- head's value by W_vb,h, and no per-head key or value is ever formed.
-- Decode then reads kv_lora + rope floats per cached position instead of
-- n_head * (k + v) (measured against the expanded form: docs/architecture.md).
-- W_kb/W_vb are attn_k_b [nope, kv_lora, n_head] / attn_v_b [kv_lora, v, n_head]
-- (current converters, attention.key_length_mla set) or the rows of the
-- combined attn_kv_b [kv_lora, n_head * (nope + v)] (older files).
--
-- FFN: leading_dense_block_count dense SwiGLU blocks, then routed experts
-- (expert_gating_func: 1 softmax, 2 sigmoid, 3 softmax over the chosen; exp_probs_b;
-- expert groups; expert_weights_norm; expert_weights_scale) plus
-- expert_shared_count shared experts (one SwiGLU of their summed width).
-- RoPE (NORM layout) on the rope parts only; YaRN with mscale folded into the
-- attention scale as llama.cpp does ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]).

local n_nextn  = hparam("nextn_predict_layers", 0)   -- MTP blocks after the trunk: not run
local yarn_mul = hparam("rope.scaling.yarn_log_multiplier", 0) / 0.1
local hp = moe_hparams(transformer_hparams{eps = 1e-6, n_ctx = 163840,
                                           n_layer = hparam("block_count") - n_nextn})
hp.rope = rope_scaling(yarn_mul)
local n_head    = hp.n_head
local q_lora    = hparam("attention.q_lora_rank", 0)    -- 0: the lite layout's direct attn_q
local kv_lora   = hparam("attention.kv_lora_rank")
local n_rot     = hparam("rope.dimension_count")
local split_kb  = hparam("attention.key_length_mla", 0) > 0
local dk        = split_kb and hparam("attention.key_length_mla") or hparam("attention.key_length")
local dv        = split_kb and hparam("attention.value_length_mla") or hparam("attention.value_length")
local nope      = dk - n_rot
local n_dense   = hparam("leading_dense_block_count", 0)
local n_ff_exp  = hparam("expert_feed_forward_length")
local n_shared  = hparam("expert_shared_count", 0)
local w_scale   = hparam("expert_weights_scale", 0)
local w_norm    = hparam("expert_weights_norm", false)
local gating_id = hparam("expert_gating_func", 0)
if gating_id == 0 then   -- older V2 files: softmax (llama.cpp's GLM-4.7-Lite exception kept)
  gating_id = ((hp.n_layer == 47 or hp.n_layer == 48) and hp.n_vocab == 154880) and 2 or 1
end
local gating = ({[1] = "softmax", [2] = "sigmoid", [3] = "softmax_weight"})[gating_id]
if not gating then not_supported(ARCH .. ".expert_gating_func", gating_id) end
local temp = hparam("attention.temperature_scale", 0)
if temp ~= 0 then not_supported(ARCH .. ".attention.temperature_scale", temp) end
if nope < 1 then not_supported(ARCH .. ".attention.key_length", dk) end

-- attention scale: 1/sqrt(dk) times YaRN's mscale squared
local fs = hp.rope.freq_scale or 1
local mscale = (hp.rope.attn_factor or 1) * (1 + 0.1 * math.log(1 / fs)) *
               (1 + 0.1 * yarn_mul * math.log(1 / fs))
local kq_scale = mscale * mscale / math.sqrt(dk)

local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output   = output_weight(hp, tok_embd)

-- MLA of block p (layer il) on the normalised input h
local function mla(h, p, il)
  local q
  if q_lora > 0 then
    q = matmul(weight(p .. "attn_q_a.weight", {hp.n_embd, q_lora}), h)
    q = rms_norm(q, weight(p .. "attn_q_a_norm.weight", {q_lora}), hp.eps)
    q = matmul(weight(p .. "attn_q_b.weight", {q_lora, n_head * dk}), q)
  else
    q = matmul(weight(p .. "attn_q.weight", {hp.n_embd, n_head * dk}), h)
  end
  local kv = matmul(weight(p .. "attn_kv_a_mqa.weight", {hp.n_embd, kv_lora + n_rot}), h)
  local c = rms_norm(split(kv, 0, kv_lora), weight(p .. "attn_kv_a_norm.weight", {kv_lora}), hp.eps)
  local k_pe = rope_heads(split(kv, kv_lora, n_rot), 1, n_rot, n_rot, hp, "norm")
  local q_pe = rope_heads(head_split(q, n_head, nope, n_rot), n_head, n_rot, n_rot, hp, "norm")
  local q_nope = head_split(q, n_head, 0, nope)
  local q_abs, v_up
  if split_kb then
    q_abs = head_matmul(weight(p .. "attn_k_b.weight", {nope, kv_lora, n_head}), q_nope,
                        {n_head = n_head})
    v_up = function(o)
      return head_matmul(weight(p .. "attn_v_b.weight", {kv_lora, dv, n_head}), o, {n_head = n_head})
    end
  else
    local kv_b = weight(p .. "attn_kv_b.weight", {kv_lora, n_head * (nope + dv)})
    q_abs = head_matmul(kv_b, q_nope, {n_head = n_head, transposed = true, head_rows = nope + dv,
                                       n_out = kv_lora})
    v_up = function(o)
      return head_matmul(kv_b, o, {n_head = n_head, head_rows = nope + dv, row0 = nope, n_out = dv})
    end
  end
  local a = attention(head_concat(q_abs, q_pe, n_head), head_concat(c, k_pe, 1), nil,
                      {layer = il, n_head = n_head, n_head_kv = 1, head_dim = kv_lora + n_rot,
                       head_dim_v = kv_lora, scale = kq_scale})
  return matmul(weight(p .. "attn_output.weight", {n_head * dv, hp.n_embd}), v_up(a))
end

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  x = add(x, mla(norm(x, p .. "attn_norm.weight", hp), p, il))
  local h = norm(x, p .. "ffn_norm.weight", hp)
  if il < n_dense then
    x = add(x, gated_ffn(h, p, hp, swiglu))
  else
    local f = moe_ffn(h, p, hp, {n_ff = n_ff_exp, gating = gating, norm = w_norm, scale = w_scale,
                                 sel_bias = weight(p .. "exp_probs_b.bias", {hp.n_expert},
                                                   {optional = true})})
    if n_shared > 0 then f = add(f, shared_expert(h, p, hp, n_ff_exp * n_shared, false)) end
    x = add(x, f)
  end
end
logits(output, norm(x, "output_norm.weight", hp))
