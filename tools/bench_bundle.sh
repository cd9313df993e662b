#!/bin/sh
# make bench-bundle: start-up and heap of a bundle (docs/bundle.md), never
# part of make test.  The 336M llama-shape model of DESIGN.md §7 (mkmodel,
# random weights, llama-spm vocabulary) as Q4_0 --pure, shared with make
# bench under $BUILD/bench; bundled with the default precision (auto: the
# Q4_0 weights are stored as Q4_0_R8, nothing repacked at start).  Reports,
# with a warm page cache, the median of BENCH_R (5) runs of
#   process start -> first generated token (wall time of -n 1; the stats line's
#   "first token" is from inside the process), for the bundle and for
#   `cinfer run --aot` on the GGUF (cached object; repacks at load),
#   and llama.cpp's llama-bench -p 0 -n 1 -r 1 (load + warm-up + one token)
#   when $PEER_NATIVE/llama-bench exists;
# the bundle's first start with an empty stamp cache (it hashes the weights);
# heap = the largest RssAnon (/proc/PID/status: private anonymous memory, i.e.
# everything but mapped files) sampled every 5 ms during a 32-token run, with
# RssFile (the mapped weights that are resident) at that moment.
set -eu
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CC=${CC:-cc}
R=${BENCH_R:-5}
T=${BENCH_THREADS:-2}
PEER_NATIVE=${PEER_NATIVE:-../peer-native/llama.cpp/build/bin}
DIR=$BUILD/bench
NAME=anchor-336m
VOCAB=$SHARED/vocab/llama.cpp/ggml-vocab-llama-spm.gguf
CINFER=$BUILD/cinfer
mkdir -p "$DIR" "$BUILD/tools"
[ -f "$SHARED/tools/mkmodel.c" ] && [ -f "$VOCAB" ] || { echo "bench-bundle: $SHARED absent" >&2; exit 1; }
[ "$BUILD/tools/mkmodel" -nt "$SHARED/tools/mkmodel.c" ] || $CC -O2 -o "$BUILD/tools/mkmodel" "$SHARED/tools/mkmodel.c" -lm
F16=$DIR/$NAME-F16.gguf
Q4=$DIR/$NAME-Q4_0.gguf
[ -f "$F16" ] || { "$BUILD/tools/mkmodel" -o "$F16.tmp" --type f16 --dim 1024 --layers 24 --heads 16 --kv-heads 4 \
    --ffn 2816 --ctx 2048 --vocab-from "$VOCAB" --name "$NAME" >&2 && mv "$F16.tmp" "$F16"; }
[ -f "$Q4" ] || "$CINFER" quantize "$F16" "$Q4" --type q4_0 --pure -t "$T" >&2
EXE=$DIR/$NAME-Q4_0.bundle
[ "$EXE" -nt "$Q4" ] && [ "$EXE" -nt "$CINFER" ] || "$CINFER" bundle "$Q4" -o "$EXE" >&2

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# wall seconds of one run of "$@", its stderr in $DIR/last.err
wall() { s=$(now); "$@" >/dev/null 2>"$DIR/last.err"; e=$(now); echo "$e - $s" | bc; }
peak() { sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$DIR/last.err" | tail -1; }
# "max RssAnon MiB, RssFile MiB then" of "$@" sampled while it runs
anon() {
    "$@" >/dev/null 2>&1 &
    pid=$!
    best=0; file=0
    while kill -0 "$pid" 2>/dev/null; do
        set -- $(awk '/^RssAnon/ {a=$2} /^RssFile/ {f=$2} END {print a+0, f+0}' /proc/$pid/status 2>/dev/null || echo 0 0)
        [ "$1" -gt "$best" ] && { best=$1; file=$2; }
        sleep 0.005
    done
    wait "$pid" || true
    echo "$best $file" | awk '{printf "%.1f MiB (mapped weights resident then: %.1f MiB)", $1 / 1024, $2 / 1024}'
}

export XDG_CACHE_HOME=$DIR/cache
rm -rf "$XDG_CACHE_HOME/cinfer/bundles"
cat "$EXE" "$Q4" >/dev/null # warm page cache
first=$(wall "$EXE" -p "Once upon a time" -n 1 --temp 0 -t "$T")
b=""; for i in $(seq "$R"); do b="$b $(wall "$EXE" -p "Once upon a time" -n 1 --temp 0 -t "$T")"; done
b_med=$(printf '%s\n' $b | median); b_rss=$(peak)
"$CINFER" run "$Q4" --aot -p x -n 1 -t "$T" >/dev/null 2>&1 # compile and cache the object
c=""; for i in $(seq "$R"); do c="$c $(wall "$CINFER" run "$Q4" --aot -p "Once upon a time" -n 1 --temp 0 -t "$T")"; done
c_med=$(printf '%s\n' $c | median); c_rss=$(peak)
payload=$(env -i "$EXE" --info | sed -n 's/^weights: *\([0-9]*\) bytes.*/\1/p')
b_heap=$(anon "$EXE" -p "Once upon a time" -n 32 --temp 0 -t "$T")
b_heap4k=$(anon "$EXE" -p "Once upon a time" -n 32 --temp 0 -t "$T" -c 4096)
c_heap=$(anon "$CINFER" run "$Q4" --aot -p "Once upon a time" -n 32 --temp 0 -t "$T")
size=$(stat -c %s "$EXE")
echo "bench-bundle: $(date -u '+%Y-%m-%d %H:%M UTC'), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), -t $T, median of $R"
printf '  bundle %s: %.1f MiB (weights %.1f MiB)\n' "$(basename "$EXE")" "$(echo "$size / 1048576" | bc -l)" "$(echo "$payload / 1048576" | bc -l)"
printf '  bundle           start -> first token %.3f s (first start, hashing the weights: %.3f s), peak RSS %.1f MiB\n' "$b_med" "$first" "$b_rss"
printf '                   heap %s; at -c 4096: %s\n' "$b_heap" "$b_heap4k"
printf '  cinfer run --aot start -> first token %.3f s (repacks Q4_0 -> Q4_0_R8 at load), peak RSS %.1f MiB\n' "$c_med" "$c_rss"
printf '                   heap %s\n' "$c_heap"
if [ -x "$PEER_NATIVE/llama-bench" ]; then
    l=""; for i in $(seq "$R"); do l="$l $(wall env LD_LIBRARY_PATH="$PEER_NATIVE" "$PEER_NATIVE/llama-bench" -m "$Q4" -p 0 -n 1 -r 1 -t "$T")"; done
    printf '  llama.cpp llama-bench -p 0 -n 1 -r 1 (load + warm-up + 1 token) %.3f s\n' "$(printf '%s\n' $l | median)"
else
    echo "  llama.cpp: no $PEER_NATIVE/llama-bench"
fi
