-- archspecs/cohere2.lua — Cohere Command R7B / Command A.
-- llama.cpp llm_build_cohere2: command-r's parallel block (one LayerNorm
-- without bias, output (ffn + x) + attention) with interleaved attention:
-- of every attention.sliding_window_pattern (4) layers the first 3 use a
-- sliding window and RoPE ("norm" layout), the last is global and has no
-- position encoding at all (NoPE); logits × logit_scale; tied output.
local hp = transformer_hparams{eps_key = "attention.layer_norm_epsilon", n_ctx = 8192}
local window = hparam("attention.sliding_window")
local logit_scale = hparam("logit_scale")
local is_swa = swa_layers(hp, 4)
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local h = layer_norm(x, weight(p .. "attn_norm.weight", {hp.n_embd}), nil, hp.eps)
  local q, k, v = qkv_any(h, p, hp)
  if is_swa[il] then q, k = rope_qk(q, k, hp, "norm") end
  local a = attend(q, k, v, hp, il, {window = is_swa[il] and window or 0})
  a = matmul(weight(p .. "attn_output.weight", {hp.q_dim, hp.n_embd}), a)
  x = add(add(gated_ffn(h, p, hp, swiglu), x), a)
end
logits(tok_embd, layer_norm(x, weight("output_norm.weight", {hp.n_embd}), nil, hp.eps),
       {scale = logit_scale})
