-- archspecs/nomic-bert.lua — Nomic Embed (nomic-embed-text v1/v1.5):
-- a BERT-style encoder with rotary positions and a SwiGLU feed-forward.
-- llama.cpp src/models/bert.cpp (LLM_ARCH_NOMIC_BERT): token embedding plus
-- token type 0, no learned positions; bert_encoder (archspecs/common.lua)
-- with fused attn_qkv, NEOX RoPE on q and k (rope.freq_base), bidirectional
-- attention, post-LN blocks, silu(ffn_gate) * ffn_up without biases.  The
-- output is pooled by the caller as nomic-bert.pooling_type says (mean).
local hp = encoder_hparams{n_ctx = 2048}
local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local types = weight("token_types.weight", {hp.n_embd, gguf("tokenizer.ggml.token_type_count", 2)}, {optional = true})

local x = embed(tok_embd)
if types then x = add_row(x, types, 0) end
bert_encoder(x, hp, {rope = true, ffn = "swiglu"})
