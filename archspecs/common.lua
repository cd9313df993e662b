-- archspecs/common.lua — helpers shared by the archspecs.  The compiler runs
-- this file before each archspec in the same sandbox, so these globals are
-- available there.  llama.lua spells everything out and needs none of them;
-- read it first.

-- Hyperparameters most decoder-only transformers share, from "<arch>.*" keys
-- with llama.cpp's defaults, and the model{} declaration.  d overrides:
--   eps_key (default "attention.layer_norm_rms_epsilon"), eps, freq_base, n_ctx.
-- head_dim is attention.key_length when present (qwen3, gemma), else n_embd/n_head.
function transformer_hparams(d)
  d = d or {}
  local hp = {}
  hp.n_embd    = hparam("embedding_length")
  hp.n_layer   = hparam("block_count")
  hp.n_ff      = hparam("feed_forward_length")
  hp.n_head    = hparam("attention.head_count")
  hp.n_head_kv = hparam("attention.head_count_kv", hp.n_head)
  hp.head_dim  = hparam("attention.key_length", hp.n_embd // hp.n_head)
  hp.n_rot     = hparam("rope.dimension_count", hp.head_dim)
  hp.freq_base = hparam("rope.freq_base", d.freq_base or 10000.0)
  hp.eps       = hparam(d.eps_key or "attention.layer_norm_rms_epsilon", d.eps or 1e-5)
  hp.n_vocab   = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")
  hp.q_dim     = hp.n_head * hp.head_dim
  hp.kv_dim    = hp.n_head_kv * hp.head_dim
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

-- RoPE on q and k ("norm" or "neox" layout), base freq_base or the model's.
function rope_qk(q, k, hp, mode, freq_base)
  local function r(x, n_head)
    return rope(x, {n_head = n_head, head_dim = hp.head_dim, n_rot = hp.n_rot,
                    freq_base = freq_base or hp.freq_base, mode = mode})
  end
  return r(q, hp.n_head), r(k, hp.n_head_kv)
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
