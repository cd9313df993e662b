-- archspecs/mamba2.lua — Mamba-2: SSD blocks, no attention.
-- llama.cpp llm_build_mamba / build_mamba2_layer: per block h = RMSNorm(x),
-- x += mamba2_mixer(h) (archspecs/common.lua: ssm_in -> z, x B C, dt; causal
-- conv + silu; the SSD scan over ssm.time_step_rank heads sharing
-- ssm.group_count groups of B and C; y * silu(z), grouped RMS norm, ssm_out).
-- Output tied to the embeddings when output.weight is absent.
local hp = {n_embd = hparam("embedding_length"), n_layer = hparam("block_count"),
            eps = hparam("attention.layer_norm_rms_epsilon", 1e-5),
            n_vocab = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")}
ssm_hparams(hp)
model{ n_vocab = hp.n_vocab, n_embd = hp.n_embd, n_layer = hp.n_layer,
       n_ctx_train = hparam("context_length", 1048576) }

local tok_embd = weight("token_embd.weight", {hp.n_embd, hp.n_vocab})
local x = embed(tok_embd)
for il = 0, hp.n_layer - 1 do
  local p = "blk." .. il .. "."
  x = add(mamba2_mixer(norm(x, p .. "attn_norm.weight", hp), p, hp, il), x)
end
logits(output_weight(hp, tok_embd), norm(x, "output_norm.weight", hp))
