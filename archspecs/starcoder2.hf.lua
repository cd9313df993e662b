-- archspecs/starcoder2.hf.lua — Hugging Face Starcoder2ForCausalLM onto
-- archspecs/starcoder2.lua.  Vocabulary: runtime/formats/hf.c.  LayerNorms
-- carry weight and bias, every projection a bias; c_fc/c_proj are the plain
-- GELU feed-forward.  Like llama.cpp, the sliding window is not applied.
return {
  architectures = {"Starcoder2ForCausalLM"},
  hparams = {
    embedding_length                   = "hidden_size",
    block_count                        = "num_hidden_layers",
    feed_forward_length                = "intermediate_size",
    ["attention.head_count"]           = "num_attention_heads",
    ["attention.head_count_kv"]        = opt("num_key_value_heads"),
    ["attention.layer_norm_epsilon"]   = float("norm_epsilon"),
    ["rope.freq_base"]                 = float(opt("rope_theta")),
    context_length                     = opt("max_position_embeddings"),
    vocab_size                         = "vocab_size",
  },
  expect = {hidden_act = {"gelu_pytorch_tanh", "gelu_new"}, rope_scaling = null, use_bias = true},
  tie_word_embeddings = true,
  tensors = {
    {"model.embed_tokens",                   "token_embd"},
    {"model.norm",                           "output_norm"},
    {"lm_head",                              "output"},
    {"model.layers.%d.input_layernorm",      "blk.%d.attn_norm"},
    {"model.layers.%d.self_attn.q_proj",     "blk.%d.attn_q"},
    {"model.layers.%d.self_attn.k_proj",     "blk.%d.attn_k"},
    {"model.layers.%d.self_attn.v_proj",     "blk.%d.attn_v"},
    {"model.layers.%d.self_attn.o_proj",     "blk.%d.attn_output"},
    {"model.layers.%d.post_attention_layernorm", "blk.%d.ffn_norm"},
    {"model.layers.%d.mlp.c_fc",             "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.c_proj",           "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
