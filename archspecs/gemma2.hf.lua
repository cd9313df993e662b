-- archspecs/gemma2.hf.lua — Hugging Face Gemma2ForCausalLM onto
-- archspecs/gemma2.lua.  Vocabulary: runtime/formats/hf.c.  Norms as in
-- gemma.hf.lua (add = 1).  A soft-capping of null in config.json turns it
-- off (0 for the archspec); absent keys take HF's defaults (50, 30).  The
-- query scale must be 1/sqrt(head_dim), what gemma2.lua computes.
local function head_dim(c) return c.head_dim or c.hidden_size // c.num_attention_heads end
return {
  architectures = {"Gemma2ForCausalLM"},
  hparams = {
    embedding_length                   = "hidden_size",
    block_count                        = "num_hidden_layers",
    feed_forward_length                = "intermediate_size",
    ["attention.head_count"]           = "num_attention_heads",
    ["attention.head_count_kv"]        = opt("num_key_value_heads"),
    ["attention.key_length"]           = opt("head_dim"),
    ["attention.layer_norm_rms_epsilon"] = float("rms_norm_eps"),
    ["rope.freq_base"]                 = float(opt("rope_theta")),
    context_length                     = opt("max_position_embeddings"),
    vocab_size                         = "vocab_size",
    ["attention.sliding_window"]       = opt("sliding_window"),
    attn_logit_softcapping             = float{"attn_logit_softcapping", 50.0, null = 0.0},
    final_logit_softcapping            = float{"final_logit_softcapping", 30.0, null = 0.0},
  },
  expect = {
    hidden_act = {null, "gelu_pytorch_tanh"}, hidden_activation = {null, "gelu_pytorch_tanh"},
    rope_scaling = null, attention_bias = false,
    query_pre_attn_scalar = function(v, c) return v == head_dim(c) end,
  },
  tie_word_embeddings = true,
  tensors = {
    {"model.embed_tokens",                   "token_embd"},
    {"model.norm",                           "output_norm", add = 1},
    {"model.layers.%d.input_layernorm",      "blk.%d.attn_norm", add = 1},
    {"model.layers.%d.self_attn.q_proj",     "blk.%d.attn_q"},
    {"model.layers.%d.self_attn.k_proj",     "blk.%d.attn_k"},
    {"model.layers.%d.self_attn.v_proj",     "blk.%d.attn_v"},
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
