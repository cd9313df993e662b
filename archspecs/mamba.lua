-- archspecs/mamba.lua — Mamba (1): state-space blocks, no attention.
-- llama.cpp llm_build_mamba / build_mamba_layer: per block h = RMSNorm(x);
-- [x | z] = ssm_in h; x = silu(causal conv(x) + conv bias) (kernel
-- ssm.conv_kernel, the state keeps its last d_conv - 1 inputs); [dt_in | B |
-- C] = ssm_x x; dt = ssm_dt dt_in + bias; the selective scan with A
-- [d_state, d_inner] (one decay per state and channel) and the D skip; y *
-- silu(z); x += ssm_out y.  Output tied to the embeddings when output.weight
-- is absent.  Falcon-Mamba's dt/B/C RMS norms (ssm.dt_b_c_rms) are not
-- supported.
local n_embd  = hparam("embedding_length")
local n_layer = hparam("block_count")
local eps     = hparam("attention.layer_norm_rms_epsilon", 1e-5)
local d_conv  = hparam("ssm.conv_kernel")
local d_inner = hparam("ssm.inner_size")
local d_state = hparam("ssm.state_size")
local dt_rank = hparam("ssm.time_step_rank")
local n_vocab = gguf_len("tokenizer.ggml.tokens") or hparam("vocab_size")
if hparam("ssm.dt_b_c_rms", false) then not_supported(ARCH .. ".ssm.dt_b_c_rms", true) end
model{ n_vocab = n_vocab, n_embd = n_embd, n_layer = n_layer,
       n_ctx_train = hparam("context_length", 1048576) }

local tok_embd = weight("token_embd.weight", {n_embd, n_vocab})
local output   = weight("output.weight", {n_embd, n_vocab}, {optional = true}) or tok_embd

local x = embed(tok_embd)
for il = 0, n_layer - 1 do
  local p = "blk." .. il .. "."
  local h  = rms_norm(x, weight(p .. "attn_norm.weight", {n_embd}), eps)
  local xz = matmul(weight(p .. "ssm_in.weight", {n_embd, 2 * d_inner}), h)
  local xi = ssm_conv(split(xz, 0, d_inner), weight(p .. "ssm_conv1d.weight", {d_conv, d_inner}),
                      {layer = il, bias = weight(p .. "ssm_conv1d.bias", {d_inner}), act = "silu"})
  local x_db = matmul(weight(p .. "ssm_x.weight", {d_inner, dt_rank + 2 * d_state}), xi)
  local dt = matmul(weight(p .. "ssm_dt.weight", {dt_rank, d_inner}), split(x_db, 0, dt_rank),
                    weight(p .. "ssm_dt.bias", {d_inner}))
  local y = ssm_scan(xi, dt, split(x_db, dt_rank, 2 * d_state),
                     {layer = il, n_head = d_inner, d_state = d_state,
                      A = weight(p .. "ssm_a", {d_state, d_inner}), D = weight(p .. "ssm_d", {d_inner})})
  y = swiglu(split(xz, d_inner, d_inner), y)
  x = add(matmul(weight(p .. "ssm_out.weight", {d_inner, n_embd}), y), x)
end
logits(output, rms_norm(x, weight("output_norm.weight", {n_embd}), eps))
