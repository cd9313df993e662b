#!/bin/bash
# ttft.sh — time from process start to the first generated token, cinfer vs
# llama.cpp (node-llama-cpp in ./peer, tools/ttft.mjs), same GGUF file, same
# prompt, same threads; median of N warm runs (one untimed warm-up each).
#
#   tools/ttft.sh MODEL.gguf [N=5] [THREADS=2] [CINFER=build/cinfer]
#
# cinfer: wall time of `cinfer run MODEL -p "Once upon a time" -n 1 --temp 0`
# (process start to exit, so it also counts printing and teardown: an upper
# bound on its first token); llama.cpp: performance.now() at the first
# sampled token (ms since node's process start), printed by tools/ttft.mjs.
set -e
M=${1:?usage: tools/ttft.sh MODEL.gguf [N] [THREADS] [CINFER]}
N=${2:-5}; T=${3:-2}; BIN=${4:-build/cinfer}
P="Once upon a time"
here=$(cd "$(dirname "$0")" && pwd)
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
ms() { date +%s%N; }
"$BIN" run "$M" -p "$P" -n 1 --temp 0 -t "$T" >/dev/null 2>&1   # warm-up
UV_THREADPOOL_SIZE=1 node "$here/ttft.mjs" "$M" -p "$P" -t "$T" >/dev/null
c=(); l=()
for i in $(seq "$N"); do
  s=$(ms); "$BIN" run "$M" -p "$P" -n 1 --temp 0 -t "$T" >/dev/null 2>&1; e=$(ms)
  c+=($(( (e - s) / 1000000 )))
  l+=($(UV_THREADPOOL_SIZE=1 node "$here/ttft.mjs" "$M" -p "$P" -t "$T" | sed -E 's/ttft_ms=([0-9]+).*/\1/'))
done
echo "cinfer    first token (wall, process start to exit): ${c[*]} ms; median $(printf '%s\n' "${c[@]}" | median) ms"
echo "llama.cpp first token (node-llama-cpp, from process start): ${l[*]} ms; median $(printf '%s\n' "${l[@]}" | median) ms"
