#!/bin/sh
# arch-refs.sh — rebuild tests/data/arch (llama.cpp references of the
# tools/archgen.c test models) from scratch.  `make arch-refs` runs it; run it
# by hand as  sh tools/arch-refs.sh [NAME ...]  (only those families; their
# manifest entries are replaced, the others kept).
#
# Needs llama.cpp: its source tree (headers, and the commit the references
# name) and a directory holding its shared libraries (libllama*.so,
# libggml*.so and the CPU backend(s)): the npm package node-llama-cpp's
# prebuilt binaries, as ../shared/tools/refgen/README.md sets them up, or a
# native build's build/bin.  Environment (defaults in brackets):
#   LLAMA_SRC       llama.cpp source            [../peer/llama-src]
#   LLAMA_LIB       its libraries               [the dir of the first libllama*.so under ../peer/nlc]
#   LLAMA_QUANTIZE  llama-quantize, optional: checks that `cinfer quantize` writes the same bytes
#                   [../peer-native/llama.cpp/build/bin/llama-quantize when it exists]
#   BUILD, SHARED, CC as in the Makefile        [build, ../shared, cc]
# Builds $BUILD/tools/ref-json (from ../shared/tools/refgen/ref-json.c) and
# $BUILD/tools/ref_embed (tools/ref_embed.c) against LLAMA_LIB, writes every
# family's F32 model and its cinfer-quantized Q8_0/Q4_0 variants under
# $BUILD/arch-refs, runs llama.cpp on them (tools/arch_refs.py) and writes
# tests/data/arch/*.json, plus stories260K-embeddings.json (llama.cpp's
# pooled embeddings of ../shared/models/stories260K/stories260K.gguf).
set -eu
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CC=${CC:-cc}
LLAMA_SRC=${LLAMA_SRC:-../peer/llama-src}
if [ -z "${LLAMA_LIB:-}" ]; then
    lib=$(find ../peer/nlc -name 'libllama*.so' 2>/dev/null | head -1)
    LLAMA_LIB=${lib:+$(dirname "$lib")}
fi
if [ -z "${LLAMA_QUANTIZE:-}" ] && [ -x ../peer-native/llama.cpp/build/bin/llama-quantize ]; then
    LLAMA_QUANTIZE=../peer-native/llama.cpp/build/bin/llama-quantize
fi
# the libraries' folder absolute: it becomes the tools' rpath
[ -n "${LLAMA_LIB:-}" ] && [ -d "$LLAMA_LIB" ] && LLAMA_LIB=$(cd "$LLAMA_LIB" && pwd)
OUT=tests/data/arch
VOCAB=$SHARED/models/stories260K/stories260K.gguf

die() { echo "arch-refs: $*" >&2; exit 1; }
[ -f "$LLAMA_SRC/include/llama.h" ] || die "no llama.cpp source at LLAMA_SRC=$LLAMA_SRC (include/llama.h)"
[ -n "$LLAMA_LIB" ] && ls "$LLAMA_LIB"/libllama*.so >/dev/null 2>&1 || die "no libllama*.so in LLAMA_LIB=${LLAMA_LIB:-(unset)}"
[ -f "$VOCAB" ] || die "no vocabulary model at $VOCAB"
[ -f "$SHARED/tools/refgen/ref-json.c" ] || die "no $SHARED/tools/refgen/ref-json.c"
[ -x "$BUILD/tools/archgen" ] && [ -x "$BUILD/cinfer" ] || die "build $BUILD/tools/archgen and $BUILD/cinfer first (make arch-refs does)"

libs="$(ls "$LLAMA_LIB"/libllama*.so | grep -v common | head -1) $(ls "$LLAMA_LIB"/libggml.*so "$LLAMA_LIB"/libggml.so 2>/dev/null | head -1) $LLAMA_LIB/libggml-base.so"
inc="-I$LLAMA_SRC/include -I$LLAMA_SRC/ggml/include"
mkdir -p "$BUILD/tools"
$CC -O2 -DREF_JSON_NEW_API -o "$BUILD/tools/ref-json" "$SHARED/tools/refgen/ref-json.c" $inc $libs -Wl,-rpath,"$LLAMA_LIB" -lm
$CC -std=c11 -O2 -Wall -Wextra -Werror -o "$BUILD/tools/ref_embed" tools/ref_embed.c $inc $libs -Wl,-rpath,"$LLAMA_LIB"

python3 tools/arch_refs.py --archgen "$BUILD/tools/archgen" --cinfer "$BUILD/cinfer" \
    --ref-json "$BUILD/tools/ref-json" --embed-ref "$BUILD/tools/ref_embed" --backend-dir "$LLAMA_LIB" \
    --llama-src "$LLAMA_SRC" --vocab-from "$VOCAB" --work "$BUILD/arch-refs" --out "$OUT" \
    ${LLAMA_QUANTIZE:+--llama-quantize "$LLAMA_QUANTIZE"} --stories-embeddings "$OUT/stories260K-embeddings.json" "$@"
