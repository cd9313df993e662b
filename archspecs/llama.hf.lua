-- archspecs/llama.hf.lua — Hugging Face checkpoints of the llama family
-- (LlamaForCausalLM, MistralForCausalLM): how config.json and the safetensors
-- tensor names map onto what archspecs/llama.lua reads.  Read by
-- runtime/formats/hf.c, which documents the vocabulary: hparams (GGUF key
-- "llama.<key>" <- config.json key), expect (config values this archspec
-- computes; anything else is refused, never approximated), tensors (HF module
-- -> GGUF tensor name; ".weight"/".bias" and GPTQ/AWQ parts follow).
--
-- RoPE: llama.cpp's converter permutes q_proj/k_proj rows so that RoPE rotates
-- adjacent pairs ("norm" layout); HF checkpoints keep the rotate-half order.
-- The loader keeps the HF rows as they are (zero copy) and declares
-- rope.layout = "neox", which llama.lua passes to rope(); `permute` names the
-- head count of that permutation (used by writers that produce GGUF order).
return {
  architectures = {"LlamaForCausalLM", "MistralForCausalLM"},
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
  constants = {["rope.layout"] = "neox"},
  expect = {
    hidden_act = "silu", rope_scaling = null, attention_bias = false, mlp_bias = false,
    sliding_window = null,
    head_dim = function(v, c) return v == c.hidden_size // c.num_attention_heads end,
  },
  tie_word_embeddings = false,
  tensors = {
    {"model.embed_tokens",                   "token_embd"},
    {"model.norm",                           "output_norm"},
    {"lm_head",                              "output"},
    {"model.layers.%d.input_layernorm",      "blk.%d.attn_norm"},
    {"model.layers.%d.self_attn.q_proj",     "blk.%d.attn_q", permute = "attention.head_count"},
    {"model.layers.%d.self_attn.k_proj",     "blk.%d.attn_k", permute = "attention.head_count_kv"},
    {"model.layers.%d.self_attn.v_proj",     "blk.%d.attn_v"},
    {"model.layers.%d.self_attn.o_proj",     "blk.%d.attn_output"},
    {"model.layers.%d.post_attention_layernorm", "blk.%d.ffn_norm"},
    {"model.layers.%d.mlp.gate_proj",        "blk.%d.ffn_gate"},
    {"model.layers.%d.mlp.up_proj",          "blk.%d.ffn_up"},
    {"model.layers.%d.mlp.down_proj",        "blk.%d.ffn_down"},
  },
  ignore = {"model.layers.%d.self_attn.rotary_emb.inv_freq"},
}
