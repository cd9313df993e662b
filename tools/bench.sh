#!/bin/sh
# tools/bench.sh — `make bench`: cinfer against llama.cpp (the "peer") on the
# same files, the same thread count, interleaved.  Never part of `make test`.
#
#   1. builds ../shared/tools/mkmodel.c and membw.c into $BUILD/tools/
#   2. makes the benchmark models in $BUILD/bench/ (not committed; reused when
#      present; types the runtime cannot run are skipped with a note):
#      - dense: the 336M-parameter llama-shape model of DESIGN.md §7 (dim 1024,
#        24 layers, 16 heads, 4 KV heads, ffn 2816, llama-spm vocabulary) as
#        F16, quantized with `cinfer quantize`: q4_0 (--pure, like DESIGN's
#        190 MB file: output.weight Q4_0 too), q8_0, q4_k_m (llama-quantize's
#        mixture);
#      - moe: a mixture of experts of Qwen1.5-MoE's proportions, qwen2moe
#        (dim 1024, 24 layers, 16 heads, 4 KV heads, 64 experts of width 256,
#        top-8, a sigmoid-gated shared expert of width 1024; 1.41B parameters,
#        about 0.29B active per token), written by mkmodel directly as q4_0
#        and q8_0 (routers F32, as llama-quantize leaves them);
#      - hybrid: a Granite-4.0-H-1B-like Mamba-2/attention hybrid
#        (granitehybrid: Granite-4.0-H-1B's layer — dim 1536, Mamba-2 with 48
#        heads of 64 and state 128, attention with 12 heads and 4 KV heads, a
#        SwiGLU FFN of 4096 — over 40 layers, 4 of them attention, llama-spm
#        vocabulary; 1.41B parameters) by `archgen --bench granitehybrid` as
#        F32, quantized with `cinfer quantize`: q8_0, q4_0 (--pure);
#   3. measures memory read bandwidth (membw, 1 and $THREADS threads, medians,
#      before and after the runs; the higher is used)
#   4. for each file, BENCH_ROUNDS times: cinfer bench, then the peer, so
#      A B A B stay close in time.  The peer is llama.cpp's own llama-bench
#      built natively ($LLAMA_BENCH, ../shared/tools/peer-native.sh) when it
#      is there, else peer-bench.mjs (llama.cpp inside node-llama-cpp, when
#      $PEER_DIR holds it)
#   5. prints the median over rounds of each engine's t/s, cinfer/peer ratios
#      and the fraction of the decode bound (bandwidth / weight bytes a token
#      reads; for the MoE model the active experts' bytes only) each reaches,
#      and saves everything under $BUILD/bench/results-<time>/.
#
#   6. prints the recurrent-layer kernels' table (bench_ssm: the chunked gated
#      delta rule against the token-by-token recurrence, the Mamba scans).
#
# Settings (environment): BENCH_MODELS ("dense moe hybrid"), BENCH_TYPES ("q4_0 q8_0
# q4_k_m", the dense model's), BENCH_MOE_TYPES ("q4_0 q8_0"), BENCH_HYBRID_TYPES
# ("q8_0 q4_0"), BENCH_P (512),
# BENCH_N (128), BENCH_R (3 repetitions per run), BENCH_ROUNDS (2),
# BENCH_QUANT (cinfer's --quant for every file: auto) and BENCH_QUANT_<type>
# for one file (e.g. BENCH_QUANT_q4_k_m=int8int8),
# BENCH_THREADS (2), LLAMA_BENCH (../peer-native/llama.cpp/build/bin/llama-bench),
# PEER_DIR (peer), SHARED (../shared), BUILD (build);
# BENCH_NAME and BENCH_SHAPE (mkmodel flags) replace the dense model, e.g. a
# small one to try the script: BENCH_NAME=tiny BENCH_SHAPE="--dim 256 --layers 2";
# BENCH_MOE_NAME and BENCH_MOE_SHAPE the MoE one, BENCH_HYBRID_SHAPE
# (archgen --bench flags) the hybrid (then named granitehybrid-custom).
# Needs: cc, jq; node >= 20 for peer-bench.mjs.
set -eu

BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CC=${CC:-cc}
TYPES=${BENCH_TYPES:-"q4_0 q8_0 q4_k_m"}
MOE_TYPES=${BENCH_MOE_TYPES:-"q4_0 q8_0"}
MODELS=${BENCH_MODELS:-"dense moe hybrid"}
HYBRID_TYPES=${BENCH_HYBRID_TYPES:-"q8_0 q4_0"}
HYBRID_SHAPE=${BENCH_HYBRID_SHAPE:-}
HYBRID_NAME=granitehybrid-1b
[ -z "$HYBRID_SHAPE" ] || HYBRID_NAME=granitehybrid-custom
LLAMA_BENCH=${LLAMA_BENCH:-../peer-native/llama.cpp/build/bin/llama-bench}
P=${BENCH_P:-512}
N=${BENCH_N:-128}
R=${BENCH_R:-3}
ROUNDS=${BENCH_ROUNDS:-2}
THREADS=${BENCH_THREADS:-2}
PEER_DIR=${PEER_DIR:-peer}
CINFER=$BUILD/cinfer
DIR=$BUILD/bench
VOCAB=$SHARED/vocab/llama.cpp/ggml-vocab-llama-spm.gguf
NAME=${BENCH_NAME:-anchor-336m}
SHAPE=${BENCH_SHAPE:-"--dim 1024 --layers 24 --heads 16 --kv-heads 4 --ffn 2816"}
MOE_NAME=${BENCH_MOE_NAME:-moe-qwen2moe-1.4b}
MOE_SHAPE=${BENCH_MOE_SHAPE:-"--arch qwen2moe --dim 1024 --layers 24 --heads 16 --kv-heads 4 --ffn 2816 --experts 64 --experts-used 8 --expert-ffn 256 --shared-ffn 1024"}

say() { printf '%s\n' "$*" >&2; }
die() { say "bench: $*"; exit 1; }

[ -x "$CINFER" ] || die "$CINFER missing (make BUILD=$BUILD first)"
[ -f "$SHARED/tools/mkmodel.c" ] && [ -f "$VOCAB" ] ||
    die "$SHARED (tools/mkmodel.c, vocab/llama.cpp) absent: nothing to benchmark on"
command -v jq >/dev/null 2>&1 || die "jq is needed for the summary (apt-get install jq)"

mkdir -p "$BUILD/tools" "$DIR"
[ "$BUILD/tools/mkmodel" -nt "$SHARED/tools/mkmodel.c" ] ||
    $CC -O2 -o "$BUILD/tools/mkmodel" "$SHARED/tools/mkmodel.c" -lm
[ "$BUILD/tools/membw" -nt "$SHARED/tools/membw.c" ] ||
    $CC -O3 -march=native -pthread -o "$BUILD/tools/membw" "$SHARED/tools/membw.c"

PEER=""
if [ -x "$LLAMA_BENCH" ]; then
    PEER=native
    PEER_NAME="llama.cpp llama-bench ($LLAMA_BENCH)"
elif command -v node >/dev/null 2>&1 && [ -d "$PEER_DIR/node_modules/node-llama-cpp" ]; then
    PEER=node
    PEER_NAME="llama.cpp in node-llama-cpp 3.22.1 (peer-bench.mjs)"
else
    say "bench: no peer (no $LLAMA_BENCH, no node or $PEER_DIR/node_modules/node-llama-cpp; see $SHARED/tools/README.md): cinfer only"
    PEER_NAME="none"
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
RES=$DIR/results-$stamp
mkdir -p "$RES"
load() { printf '%s | %s\n' "$(uptime | sed 's/.*load average/load average/')" \
    "$(top -bn1 2>/dev/null | sed -n 's/^%\{0,1\}Cpu(s): *//p' | head -1)"; }
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs"
    echo "load at start: $(load)"
} | tee "$RES/machine.txt" >&2

# ---- model files ---------------------------------------------------------------
FILES=""
# add_file FILE: keep it when the runtime can run it
add_file() {
    if ! err=$("$CINFER" bench "$1" -p 1 -n 0 -r 1 -t 1 --json 2>&1 >/dev/null); then
        say "bench: note: $(basename "$1") skipped, the runtime cannot run it yet: $(printf '%s' "$err" | tail -1)"
        return 0
    fi
    FILES="$FILES $1"
}
for model in $MODELS; do
    case $model in
    dense)
        F16=$DIR/$NAME-F16.gguf
        if [ ! -f "$F16" ]; then
            say "bench: making $F16 (mkmodel, random weights)"
            # shellcheck disable=SC2086
            "$BUILD/tools/mkmodel" -o "$F16.tmp" --type f16 $SHAPE --ctx 2048 --vocab-from "$VOCAB" \
                --name "$NAME" >&2
            mv "$F16.tmp" "$F16"
        fi
        for t in $TYPES; do
            T=$(echo "$t" | tr a-z A-Z)
            f=$DIR/$NAME-$T.gguf
            extra=""
            [ "$t" = q4_0 ] && extra=--pure
            if [ ! -f "$f" ] || [ "$f" -ot "$F16" ]; then
                say "bench: cinfer quantize $F16 -> $T $extra"
                "$CINFER" quantize "$F16" "$f" --type "$t" $extra -t "$THREADS" ||
                    { say "bench: note: cannot make $T, skipped"; continue; }
            fi
            add_file "$f"
        done ;;
    moe)
        for t in $MOE_TYPES; do
            T=$(echo "$t" | tr a-z A-Z)
            f=$DIR/$MOE_NAME-$T.gguf
            if [ ! -f "$f" ]; then
                say "bench: making $f (mkmodel --type $t, random weights)"
                # shellcheck disable=SC2086
                "$BUILD/tools/mkmodel" -o "$f.tmp" --type "$t" $MOE_SHAPE --ctx 2048 --vocab-from "$VOCAB" \
                    --name "$MOE_NAME" >&2 || { say "bench: note: cannot make $f, skipped"; rm -f "$f.tmp"; continue; }
                mv "$f.tmp" "$f"
            fi
            add_file "$f"
        done ;;
    hybrid)
        HF32=$DIR/$HYBRID_NAME-F32.gguf
        if [ ! -f "$HF32" ]; then
            [ -x "$BUILD/tools/archgen" ] || die "$BUILD/tools/archgen missing (make $BUILD/tools/archgen)"
            say "bench: making $HF32 (archgen --bench granitehybrid, random weights, ~5.6 GB F32)"
            mkdir -p "$DIR/archgen.tmp"
            # shellcheck disable=SC2086
            "$BUILD/tools/archgen" -o "$DIR/archgen.tmp" --bench granitehybrid $HYBRID_SHAPE \
                --vocab-from "$VOCAB" >&2
            mv "$DIR/archgen.tmp/granitehybrid-bench.gguf" "$HF32"
            rmdir "$DIR/archgen.tmp"
        fi
        for t in $HYBRID_TYPES; do
            T=$(echo "$t" | tr a-z A-Z)
            f=$DIR/$HYBRID_NAME-$T.gguf
            extra=""
            [ "$t" = q4_0 ] && extra=--pure
            if [ ! -f "$f" ] || [ "$f" -ot "$HF32" ]; then
                say "bench: cinfer quantize $HF32 -> $T $extra"
                "$CINFER" quantize "$HF32" "$f" --type "$t" $extra -t "$THREADS" ||
                    { say "bench: note: cannot make $T, skipped"; continue; }
            fi
            add_file "$f"
        done ;;
    *) die "BENCH_MODELS: unknown model '$model' (dense, moe, hybrid)" ;;
    esac
done
[ -n "$FILES" ] || die "no model file to run"

# ---- memory bandwidth ----------------------------------------------------------------
# measured before and after the runs; the bound uses the higher median, since
# a busy machine only ever lowers the measurement
median() { sed -n 's/.*median \([0-9.]*\) GB\/s.*/\1/p'; }
membw() { "$BUILD/tools/membw" 1024 "$1" 7 | tee -a "$RES/membw.txt" | median; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
BW1=$(membw 1)
BWT=$(membw "$THREADS")
say "bench: memory read bandwidth (median) $BW1 GB/s on 1 thread, $BWT GB/s on $THREADS thread(s)"

# ---- interleaved runs -----------------------------------------------------------------
# --quant for file $1: BENCH_QUANT_<type> (type from the file name, lower case), else BENCH_QUANT
quant_for() {
    t=$(basename "$1" .gguf | sed "s/^$NAME-//; s/^$MOE_NAME-//; s/^$HYBRID_NAME-//" | tr 'A-Z' 'a-z')
    eval "q=\${BENCH_QUANT_$t:-}"
    echo "${q:-${BENCH_QUANT:-auto}}"
}
for f in $FILES; do
    b=$(basename "$f" .gguf)
    i=1
    while [ "$i" -le "$ROUNDS" ]; do
        say "bench: $b round $i/$ROUNDS: cinfer --quant $(quant_for "$f")"
        "$CINFER" bench "$f" -p "$P" -n "$N" -r "$R" -t "$THREADS" --quant "$(quant_for "$f")" --bw "$BWT" --json \
            >"$RES/$b.cinfer.$i.json"
        if [ "$PEER" = native ]; then
            say "bench: $b round $i/$ROUNDS: peer (llama-bench)"
            "$LLAMA_BENCH" -m "$f" -p "$P" -n "$N" -r "$R" -t "$THREADS" -o json \
                >"$RES/$b.peer.$i.json" 2>"$RES/$b.peer.$i.log" ||
                { say "bench: peer failed on $b (see $RES/$b.peer.$i.log)"; rm -f "$RES/$b.peer.$i.json"; }
        elif [ "$PEER" = node ]; then
            say "bench: $b round $i/$ROUNDS: peer"
            node "$SHARED/tools/peer-bench.mjs" "$f" -p "$P" -n "$N" -r "$R" -t "$THREADS" --json \
                --peer "$PEER_DIR" >"$RES/$b.peer.$i.json" 2>"$RES/$b.peer.$i.log" ||
                { say "bench: peer failed on $b (see $RES/$b.peer.$i.log)"; rm -f "$RES/$b.peer.$i.json"; }
        fi
        i=$((i + 1))
    done
done
echo "load at end: $(load)" | tee -a "$RES/machine.txt" >&2
BW1=$(max "$BW1" "$(membw 1)")
BWT=$(max "$BWT" "$(membw "$THREADS")")

# ---- summary ---------------------------------------------------------------------------
# median over rounds of each round's avg_ts; the per-round values show the drift
summary() { # $1: table (one row per file) or rounds (per-round values)
    for f in $FILES; do
        b=$(basename "$f" .gguf)
        ls "$RES/$b".*.json >/dev/null 2>&1 || continue
        cat "$RES/$b".*.json | jq -s --arg b "$b" --arg mode "$1" --argjson bw "$BWT" -r '
          def m(xs): if (xs|length) == 0 then null
                     else (xs|sort) as $s | ($s|length) as $n
                          | (if $n % 2 == 1 then $s[($n-1)/2] else ($s[$n/2-1] + $s[$n/2]) / 2 end) end;
          def f1(x): if x == null then "-" else (x*10|round/10|tostring) end;
          def f2(x): if x == null then "-" else (x*100|round/100|tostring) end;
          def pct(x): if x == null then "-" else ((x*100|round|tostring) + "%") end;
          def rounds(xs): xs | map(.*10|round/10|tostring) | join(", ");
          (map(.[]) ) as $all
          | ($all | map(select((.engine // "")|startswith("cinfer")))) as $c
          | ($all | map(select((.engine // "")|startswith("cinfer")|not))) as $p
          | ($c | map(select(.n_prompt > 0) | .avg_ts)) as $cpp
          | ($c | map(select(.n_gen > 0) | .avg_ts)) as $ctg
          | ($p | map(select(.n_prompt > 0) | .avg_ts)) as $ppp
          | ($p | map(select(.n_gen > 0) | .avg_ts)) as $ptg
          | ($c[0].decode_bytes_per_token) as $bytes
          | ($bw * 1e9 / $bytes) as $bound
          | if $mode == "table" then "| \($b) | \($c[0].precision) | \($c[0].model_size/1048576*10|round/10) | \(f1(m($cpp))) | \(f1(m($ppp))) | \(if m($ppp) then f2(m($cpp)/m($ppp)) else "-" end) | \(f1(m($ctg))) | \(f1(m($ptg))) | \(if m($ptg) then f2(m($ctg)/m($ptg)) else "-" end) | \(f1($bound)) | \(pct(m($ctg)/$bound)) | \(if m($ptg) then pct(m($ptg)/$bound) else "-" end) |"
            else "- \($b): cinfer pp [\(rounds($cpp))] tg [\(rounds($ctg))]; peer pp [\(rounds($ppp))] tg [\(rounds($ptg))]" end'
    done
}
{
    echo "cinfer bench vs $PEER_NAME, -p $P -n $N -t $THREADS -r $R, $ROUNDS interleaved rounds, median t/s over the rounds"
    echo "membw medians (higher of start and end): $BW1 GB/s (1 thread), $BWT GB/s ($THREADS thread(s)); decode bound = $BWT GB/s / weight bytes per token (all tensors but token_embd, of which a token reads one row)"
    echo
    echo "| file | cinfer --quant | MiB | cinfer pp$P | peer pp$P | pp ratio | cinfer tg$N | peer tg$N | tg ratio | bound t/s | cinfer/bound | peer/bound |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    summary table
    echo
    echo "per round (t/s):"
    summary rounds
    echo
    if [ -x "$BUILD/bench_ssm" ]; then
        echo "recurrent-layer kernels, one layer ($BUILD/bench_ssm -t 1 -n $P: CPU time of one thread):"
        echo
        "$BUILD/bench_ssm" -t 1 -n "$P" | tail -n +3
        echo
    fi
    cat "$RES/machine.txt"
} | tee "$RES/summary.md"
say "bench: results in $RES"
