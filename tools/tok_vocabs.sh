#!/bin/sh
# tok_vocabs.sh — llama.cpp's own tokenizer test vocabularies that
# tests/test_tok_fam.c reads (Gemma 4 and Command R with llama.cpp's .inp/.out
# vectors, XLM-RoBERTa's unigram vocabulary), from the llama.cpp source that
# the npm package node-llama-cpp 3.22.1 ships (llama/gitRelease.bundle: release
# de3ff815 = v0.5.0, the llama.cpp every tests/data reference was made with),
# into $BUILD/llama-vocab/.  An install step (`make tok-vocabs`; .ci/run runs
# it): it fetches the package with npm.  Needs npm, git, tar.
set -eu
BUILD=${BUILD:-build}
NLC=node-llama-cpp@3.22.1
COMMIT=de3ff81
OUT=$BUILD/llama-vocab
W=$BUILD/llama-vocab.tmp
FILES="ggml-vocab-gemma-4.gguf ggml-vocab-gemma-4.gguf.inp ggml-vocab-gemma-4.gguf.out
ggml-vocab-command-r.gguf ggml-vocab-command-r.gguf.inp ggml-vocab-command-r.gguf.out
ggml-vocab-nomic-bert-moe.gguf"

die() { echo "tok-vocabs: $*" >&2; rm -rf "$W"; exit 1; }
for t in npm git tar; do command -v $t >/dev/null || die "$t not found"; done
rm -rf "$W" && mkdir -p "$W" "$OUT"
(cd "$W" && npm pack "$NLC" --silent >/dev/null) || die "npm pack $NLC failed"
tar -xzf "$W"/node-llama-cpp-*.tgz -C "$W" package/llama/gitRelease.bundle || die "no llama/gitRelease.bundle in $NLC"
git clone -q --no-checkout "$W/package/llama/gitRelease.bundle" "$W/src" || die "cannot clone the bundle of $NLC"
head=$(git -C "$W/src" rev-parse --short=7 HEAD)
[ "$head" = "$COMMIT" ] || die "$NLC ships llama.cpp $head, expected $COMMIT"
for f in $FILES; do
    git -C "$W/src" show "HEAD:models/$f" >"$OUT/$f" || die "models/$f not in llama.cpp $COMMIT"
done
rm -rf "$W"
echo "  VOCAB   $OUT ($(echo $FILES | wc -w) files of llama.cpp $COMMIT, from $NLC)"
