-- archspecs/gpt2.hf.lua — Hugging Face GPT2LMHeadModel onto archspecs/gpt2.lua.
-- Vocabulary: runtime/formats/hf.c.  GPT-2's Conv1D stores its weights as
-- (in, out), the transpose of a Linear: those four get transpose = true (a
-- copy at load).  Checkpoints saved from GPT2LMHeadModel prefix names with
-- "transformer.", ones saved from GPT2Model do not.  gpt2.lua needs an
-- output matrix: with tied embeddings output.weight is the embedding (same
-- data, no copy).
return {
  architectures = {"GPT2LMHeadModel"},
  strip_prefix = {"transformer."},
  hparams = {
    embedding_length                   = "n_embd",
    block_count                        = "n_layer",
    feed_forward_length                = {"n_inner", function(c) return 4 * c.n_embd end},
    ["attention.head_count"]           = "n_head",
    ["attention.layer_norm_epsilon"]   = float("layer_norm_epsilon"),
    context_length                     = "n_positions",
    vocab_size                         = "vocab_size",
  },
  expect = {
    activation_function = {"gelu_new", "gelu_pytorch_tanh"}, scale_attn_weights = {null, true},
    scale_attn_by_inverse_layer_idx = {null, false}, add_cross_attention = {null, false},
  },
  tie_word_embeddings = true,
  tied_output = "alias",
  tensors = {
    {"wte",                                  "token_embd"},
    {"wpe",                                  "position_embd"},
    {"ln_f",                                 "output_norm"},
    {"lm_head",                              "output"},
    {"h.%d.ln_1",                            "blk.%d.attn_norm"},
    {"h.%d.attn.c_attn",                     "blk.%d.attn_qkv", transpose = true},
    {"h.%d.attn.c_proj",                     "blk.%d.attn_output", transpose = true},
    {"h.%d.ln_2",                            "blk.%d.ffn_norm"},
    {"h.%d.mlp.c_fc",                        "blk.%d.ffn_up", transpose = true},
    {"h.%d.mlp.c_proj",                      "blk.%d.ffn_down", transpose = true},
  },
  ignore = {"h.%d.attn.bias", "h.%d.attn.masked_bias"},
}
