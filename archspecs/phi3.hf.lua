-- archspecs/phi3.hf.lua — Hugging Face Phi3ForCausalLM (Phi-3 / 3.5 with
-- 4k-style RoPE) onto archspecs/phi3.lua.  Vocabulary: runtime/formats/hf.c.
-- Both formats fuse q|k|v (qkv_proj -> attn_qkv) and gate|up (gate_up_proj ->
-- ffn_up), in the same row order.  The longrope scaling of the 128k models is
-- refused (rope_scaling must be null).
return {
  architectures = {"Phi3ForCausalLM"},
  hparams = {
    embedding_length                   = "hidden_size",
    block_count                        = "num_hidden_layers",
    feed_forward_length                = "intermediate_size",
    ["attention.head_count"]           = "num_attention_heads",
    ["attention.head_count_kv"]        = opt("num_key_value_heads"),
    ["attention.layer_norm_rms_epsilon"] = float("rms_norm_eps"),
    ["rope.freq_base"]                 = float(opt("rope_theta")),
    context_length                     = opt("max_position_embeddings"),
    vocab_size                         = "vocab_size",
  },
  expect = {hidden_act = "silu", rope_scaling = null, partial_rotary_factor = {null, 1, 1.0}},
  tie_word_embeddings = false,
  tensors = {
    {"model.embed_tokens",                   "token_embd"},
    {"model.norm",                           "output_norm"},
    {"lm_head",                              "output"},
    {"model.layers.%d.input_layernorm",      "blk.%d.attn_norm"},
    {"model.layers.%d.self_attn.qkv_proj",   "blk.%d.attn_qkv"},
    {"model.layers.%d.self_attn.o_proj",     "blk.%d.attn_output"},
    {"model.layers.%d.post_attention_layernorm", "blk.%d.ffn_norm"},
    {"model.layers.%d.mlp.gate_up_proj",     "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.down_proj",        "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
