#!/bin/sh
# fuzz/hf_seeds.sh CORPUS SHARED — seed inputs for fuzz/fuzz_hf.c: parts joined by 0x1e in the order
# config.json, model.safetensors.index.json, model.safetensors, tokenizer_config.json, quantize_config.json.
set -e
out=$1
shared=$2
RS=$(printf '\036')
cfg='{"architectures":["LlamaForCausalLM"],"hidden_size":8,"num_hidden_layers":1,"intermediate_size":16,"num_attention_heads":2,"num_key_value_heads":1,"rms_norm_eps":1e-6,"vocab_size":16,"tie_word_embeddings":true}'
# a two-tensor checkpoint: header length, header, data
st() { hdr=$1; n=$2; printf '%s' "$hdr" > "$out/.hdr"; len=$(wc -c < "$out/.hdr");
       python3 -c "import sys,struct; sys.stdout.buffer.write(struct.pack('<Q', $len))"; cat "$out/.hdr";
       head -c "$n" /dev/zero | tr '\0' '\077'; }
plain='{"model.norm.weight":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},"model.embed_tokens.weight":{"dtype":"BF16","shape":[16,8],"data_offsets":[32,288]}}'
{ printf '%s%s%s' "$cfg" "$RS" "$RS"; st "$plain" 288; printf '%s{"bos_token":"a"}' "$RS"; } > "$out/seed-plain"
{ printf '%s%s{"weight_map":{"model.norm.weight":"model.safetensors"}}%s' "$cfg" "$RS" "$RS"; st "$plain" 288; } > "$out/seed-index"
gptq='{"model.layers.0.mlp.up_proj.qweight":{"dtype":"I32","shape":[4,16],"data_offsets":[0,256]},"model.layers.0.mlp.up_proj.qzeros":{"dtype":"I32","shape":[1,2],"data_offsets":[256,264]},"model.layers.0.mlp.up_proj.scales":{"dtype":"F16","shape":[1,16],"data_offsets":[264,296]},"model.layers.0.mlp.up_proj.g_idx":{"dtype":"I32","shape":[32],"data_offsets":[296,424]}}'
qcfg='{"architectures":["LlamaForCausalLM"],"hidden_size":32,"num_hidden_layers":1,"intermediate_size":16,"num_attention_heads":2,"rms_norm_eps":1e-6,"vocab_size":16,"quantization_config":{"quant_method":"gptq","bits":4,"group_size":32,"desc_act":false,"sym":true}}'
{ printf '%s%s%s' "$qcfg" "$RS" "$RS"; st "$gptq" 424; } > "$out/seed-gptq"
if [ -f "$shared/models/tinystories-656k/hf/config.json" ]; then
  { cat "$shared/models/tinystories-656k/hf/config.json"; printf '%s%s' "$RS" "$RS"; st "$plain" 288; printf '%s' "$RS";
    cat "$shared/models/tinystories-656k/hf/tokenizer_config.json"; } > "$out/seed-tinystories"
fi
rm -f "$out/.hdr"
