-- archspecs/gemma.hf.lua — Hugging Face GemmaForCausalLM (Gemma 1) onto
-- archspecs/gemma.lua.  Vocabulary: runtime/formats/hf.c.  Gemma's RMSNorm
-- multiplies by (1 + w) and HF stores w; GGUF stores 1 + w (llama.cpp's
-- converter adds 1), so every norm weight gets add = 1 at load (a small F32
-- copy).  The output projection is the token embedding.
return {
  architectures = {"GemmaForCausalLM"},
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
  },
  expect = {
    hidden_act = {"gelu", "gelu_pytorch_tanh"}, hidden_activation = {null, "gelu_pytorch_tanh"},
    rope_scaling = null, attention_bias = false,
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
    {"model.layers.%d.post_attention_layernorm", "blk.%d.ffn_norm", add = 1},
    {"model.layers.%d.mlp.gate_proj",        "blk.%d.ffn_gate"},
    {"model.layers.%d.mlp.up_proj",          "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.down_proj",        "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
