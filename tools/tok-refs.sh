#!/bin/sh
# tok-refs.sh — llama.cpp's token ids for the tokenizers and pre-tokenizers of
# issue 19's families, into tests/data/tok/ (README there; tests/test_tok_fam.c
# checks cinfer against them).  `make tok-refs` runs it.
#
# Two kinds of vocabularies:
#  - derived from the llama.cpp vocabularies in ../shared (so the tests run
#    wherever ../shared is): ggml-vocab-llama-bpe.gguf with tokenizer.ggml.pre
#    set to each pre-tokenizer name and its BOS keys dropped (the regex and
#    the name's defaults are what differ; the merges are Llama 3's), and
#    ggml-vocab-llama-spm.gguf read as a unigram ("t5") vocabulary (its
#    SentencePiece scores as log-probabilities), with add_space_prefix, and
#    with remove_extra_whitespaces;
#  - real ones that only llama.cpp's source tree holds (LLAMA_SRC/models):
#    ggml-vocab-nomic-bert-moe.gguf (XLM-RoBERTa's unigram vocabulary with
#    its precompiled charsmap); gemma-4 and command-r come with llama.cpp's
#    own .inp/.out vectors and need no ids from here.
# Texts: ../shared's ggml-vocab-llama-bpe.gguf.inp (llama.cpp's tokenizer
# test texts) and tests/data/tok/texts.inp (CamelCase, digits, scripts with
# marks, NFKC-normalised forms, whitespace runs).
#
# Environment (defaults in brackets):
#   LLAMA_SRC  llama.cpp source: include/llama.h, models/   [../peer/llama-src]
#   LLAMA_LIB  its shared libraries (libllama.so ...)       [../peer-native/llama.cpp/build/bin]
#   BUILD, SHARED, CC as in the Makefile                    [build, ../shared, cc]
set -eu
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CC=${CC:-cc}
LLAMA_SRC=${LLAMA_SRC:-../peer/llama-src}
LLAMA_LIB=${LLAMA_LIB:-../peer-native/llama.cpp/build/bin}
# the libraries' folder absolute: it becomes the tools' rpath
[ -n "${LLAMA_LIB:-}" ] && [ -d "$LLAMA_LIB" ] && LLAMA_LIB=$(cd "$LLAMA_LIB" && pwd)
OUT=tests/data/tok
V=$SHARED/vocab/llama.cpp

die() { echo "tok-refs: $*" >&2; exit 1; }
[ -f "$LLAMA_SRC/include/llama.h" ] || die "no llama.cpp source at LLAMA_SRC=$LLAMA_SRC"
[ -f "$LLAMA_LIB/libllama.so" ] || die "no libllama.so in LLAMA_LIB=$LLAMA_LIB"
[ -f "$V/ggml-vocab-llama-bpe.gguf" ] || die "no $V/ggml-vocab-llama-bpe.gguf"
[ -f "$BUILD/libcinfer.a" ] || die "build $BUILD/libcinfer.a first (make tok-refs does)"

mkdir -p "$BUILD/tools" "$BUILD/tok-refs"
$CC -std=c11 -O2 -Wall -Wextra -Werror -o "$BUILD/tools/ref_tok" tools/ref_tok.c -I"$LLAMA_SRC/include" \
    -I"$LLAMA_SRC/ggml/include" -L"$LLAMA_LIB" -lllama -Wl,-rpath,"$LLAMA_LIB"
$CC -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iruntime -Iinclude -Itemplates -o "$BUILD/tools/gguf_set" \
    tools/gguf_set.c "$BUILD/libcinfer.a" -lxxhash -lm
W=$BUILD/tok-refs

# ids of both text files for one vocabulary: $OUT/<name>.out, <name>-texts.out
refs() {
    name=$1 vocab=$2
    "$BUILD/tools/ref_tok" -m "$vocab" -f "$V/ggml-vocab-llama-bpe.gguf.inp" >"$OUT/$name.out"
    "$BUILD/tools/ref_tok" -m "$vocab" -f "$OUT/texts.inp" >"$OUT/$name-texts.out"
    echo "  REF     $OUT/$name.out $OUT/$name-texts.out"
}

for pre in tekken glm4 seed-coder hunyuan-dense roberta-bpe mellum2; do
    "$BUILD/tools/gguf_set" "$V/ggml-vocab-llama-bpe.gguf" "$W/bpe-$pre.gguf" "tokenizer.ggml.pre=str:$pre" \
        tokenizer.ggml.bos_token_id=drop tokenizer.ggml.add_bos_token=drop
    refs "pre-$pre" "$W/bpe-$pre.gguf"
done
"$BUILD/tools/gguf_set" "$V/ggml-vocab-llama-spm.gguf" "$W/ugm-spm.gguf" tokenizer.ggml.model=str:t5 \
    tokenizer.ggml.add_space_prefix=bool:true
refs ugm-llama-spm "$W/ugm-spm.gguf"
"$BUILD/tools/gguf_set" "$V/ggml-vocab-llama-spm.gguf" "$W/ugm-spm-ws.gguf" tokenizer.ggml.model=str:t5 \
    tokenizer.ggml.add_space_prefix=bool:false tokenizer.ggml.remove_extra_whitespaces=bool:true
refs ugm-llama-spm-ws "$W/ugm-spm-ws.gguf"
if [ -f "$LLAMA_SRC/models/ggml-vocab-nomic-bert-moe.gguf" ]; then
    refs ugm-nomic-bert-moe "$LLAMA_SRC/models/ggml-vocab-nomic-bert-moe.gguf"
else
    echo "tok-refs: $LLAMA_SRC/models/ggml-vocab-nomic-bert-moe.gguf absent: its ids are kept as they are" >&2
fi
