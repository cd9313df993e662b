-- archspecs/qwen2.hf.lua — Hugging Face Qwen2ForCausalLM (Qwen 1.5 / 2 / 2.5
-- dense) onto archspecs/qwen2.lua.  Vocabulary: runtime/formats/hf.c.  The
-- q/k/v biases come with their modules (q_proj.bias -> blk.N.attn_q.bias);
-- RoPE is rotate-half in both formats, so nothing is permuted.
return {
  architectures = {"Qwen2ForCausalLM"},
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
  expect = {hidden_act = "silu", rope_scaling = null, use_sliding_window = false},
  tie_word_embeddings = false,
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
    {"model.layers.%d.mlp.gate_proj",        "blk.%d.ffn_gate"},
    {"model.layers.%d.mlp.up_proj",          "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.down_proj",        "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
