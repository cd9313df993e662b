-- archspecs/bert.lua — BERT-style encoders (BERT, BGE, MiniLM, E5, ...):
-- embedding models, no output layer.
-- llama.cpp src/models/bert.cpp: the input is the token embedding plus the
-- token-type embedding of type 0 ("sentence A", which llama.cpp always uses)
-- plus learned absolute positions; then bert_encoder (archspecs/common.lua):
-- embedding LayerNorm, post-LN blocks with bidirectional attention, biases,
-- a GELU feed-forward.  The output is the last hidden state, pooled by the
-- caller as bert.pooling_type says (CLS for BGE, mean for MiniLM/E5).
local hp = encoder_hparams{n_ctx = 512}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local pos_embd = weight("position_embd.weight", {hp.n_embd, hparam("context_length", 512)})
local types = weight("token_types.weight", {hp.n_embd, gguf("tokenizer.ggml.token_type_count", 2)}, {optional = true})

local x = add(embed(tok_embd), embed_positions(pos_embd))
if types then x = add_row(x, types, 0) end
bert_encoder(x, hp, {ffn = "gelu"})
