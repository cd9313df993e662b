-- archspecs/apertus.lua — Swiss AI Apertus.
-- llama.cpp llm_build_apertus: the llama block with a per-head q/k RMS norm
-- before NEOX RoPE (rope_freqs divisors when present), attn_output with its
-- bias when present, and a plain FFN with the xIELU activation whose four
-- parameters are per-layer GGUF arrays (xielu.alpha_n, alpha_p, beta, eps —
-- llama.cpp's keys carry no architecture prefix); untied output.
local hp = transformer_hparams{n_ctx = 65536}
local ff = rope_factors(hp)
local xielu_p = {}
for _, k in ipairs{"alpha_n", "alpha_p", "beta", "eps"} do
  xielu_p[k] = gguf_arr("xielu." .. k)
  if not xielu_p[k] or #xielu_p[k] < hp.n_layer then
    error(string.format("GGUF key 'xielu.%s' must be an array of %d values (one per layer)", k, hp.n_layer))
  end
end
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local output = weight("output.weight", {hp.n_embd, hp.n_vocab})

local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  local q, k, v = qkv_any(norm(x, p .. "attn_norm.weight", hp), p, hp)
  q = rms_norm(q, weight(p .. "attn_q_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  k = rms_norm(k, weight(p .. "attn_k_norm.weight", {hp.head_dim}), hp.eps, {group = hp.head_dim})
  q, k = rope_qk(q, k, hp, "neox", nil, ff)
  x = add(x, linear(attend(q, k, v, hp, il), p .. "attn_output", hp.q_dim, hp.n_embd))
  local u = matmul(weight(p .. "ffn_up.weight", {hp.n_embd, hp.n_ff}), norm(x, p .. "ffn_norm.weight", hp))
  u = xielu(u, {alpha_n = xielu_p.alpha_n[il + 1], alpha_p = xielu_p.alpha_p[il + 1],
                beta = xielu_p.beta[il + 1], eps = xielu_p.eps[il + 1]})
  x = add(x, matmul(weight(p .. "ffn_down.weight", {hp.n_ff, hp.n_embd}), u))
end
logits(output, norm(x, "output_norm.weight", hp))
