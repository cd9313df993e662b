-- archspecs/gemma3.hf.lua — Hugging Face Gemma3ForCausalLM (the text-only
-- Gemma 3, model_type gemma3_text) onto archspecs/gemma3.lua.  Vocabulary:
-- runtime/formats/hf.c.  Every norm, the per-head q/k norms included, gets
-- add = 1 (see gemma.hf.lua).  The local/global layer pattern comes from
-- sliding_window_pattern, or from layer_types in newer configs (layer il is
-- global when il % pattern == pattern - 1; any other arrangement is refused).
local function head_dim(c) return c.head_dim or c.hidden_size // c.num_attention_heads end
local function pattern_of_layer_types(c)
  local t = c.layer_types
  if t == nil or t == null then return nil end
  local p
  for i = 1, #t do
    if t[i] == "full_attention" then p = i break end
  end
  if not p then error("layer_types has no full_attention layer") end
  for i = 1, #t do
    local want = (i % p == 0) and "full_attention" or "sliding_attention"
    if t[i] ~= want then
      error(string.format("layer_types[%d] is %s: not a repeating pattern of %d", i - 1, tostring(t[i]), p))
    end
  end
  return p
end
return {
  architectures = {"Gemma3ForCausalLM"},
  hparams = {
    embedding_length                   = "hidden_size",
    block_count                        = "num_hidden_layers",
    feed_forward_length                = "intermediate_size",
    ["attention.head_count"]           = "num_attention_heads",
    ["attention.head_count_kv"]        = opt("num_key_value_heads"),
    ["attention.key_length"]           = opt("head_dim"),
    ["attention.layer_norm_rms_epsilon"] = float("rms_norm_eps"),
    ["rope.freq_base"]                 = float(opt("rope_theta")),
    ["rope.freq_base_swa"]             = float(opt("rope_local_base_freq")),
    context_length                     = opt("max_position_embeddings"),
    vocab_size                         = "vocab_size",
    ["attention.sliding_window"]       = opt("sliding_window"),
    ["attention.sliding_window_pattern"] = {"sliding_window_pattern", pattern_of_layer_types},
    final_logit_softcapping            = float{"final_logit_softcapping", 0.0, null = 0.0},
  },
  expect = {
    hidden_act = {null, "gelu_pytorch_tanh"}, hidden_activation = {null, "gelu_pytorch_tanh"},
    rope_scaling = null, attention_bias = false, attn_logit_softcapping = null,
    query_pre_attn_scalar = function(v, c) return v == head_dim(c) end,
  },
  tie_word_embeddings = true,
  tensors = {
    {"model.embed_tokens",                   "token_embd"},
    {"model.norm",                           "output_norm", add = 1},
    {"lm_head",                              "output"},
    {"model.layers.%d.input_layernorm",      "blk.%d.attn_norm", add = 1},
    {"model.layers.%d.self_attn.q_proj",     "blk.%d.attn_q"},
    {"model.layers.%d.self_attn.k_proj",     "blk.%d.attn_k"},
    {"model.layers.%d.self_attn.v_proj",     "blk.%d.attn_v"},
    {"model.layers.%d.self_attn.q_norm",     "blk.%d.attn_q_norm", add = 1},
    {"model.layers.%d.self_attn.k_norm",     "blk.%d.attn_k_norm", add = 1},
    {"model.layers.%d.self_attn.o_proj",     "blk.%d.attn_output"},
    {"model.layers.%d.post_attention_layernorm", "blk.%d.post_attention_norm", add = 1},
    {"model.layers.%d.pre_feedforward_layernorm", "blk.%d.ffn_norm", add = 1},
    {"model.layers.%d.post_feedforward_layernorm", "blk.%d.post_ffw_norm", add = 1},
    {"model.layers.%d.mlp.gate_proj",        "blk.%d.ffn_gate"},
    {"model.layers.%d.mlp.up_proj",          "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.down_proj",        "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
