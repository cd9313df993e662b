#!/bin/sh
# tools/bench.sh — `make bench`: cinfer against llama.cpp (the "peer") on the
# same files, the same thread counts, interleaved.  Never part of `make test`.
#
#   1. builds ../shared/tools/mkmodel.c and membw.c into $BUILD/tools/
#   2. makes the benchmark models in $BENCH_DIR (default $BUILD/bench; not
#      committed; reused when present, so one shared folder serves several
#      checkouts; types the runtime cannot run are skipped with a note).
#      BENCH_MODELS picks the parts (default "dense dense1b dense7b depth"):
#      - dense: the 336M-parameter llama-shape model of DESIGN.md §7 (dim 1024,
#        24 layers, 16 heads, 4 KV heads, ffn 2816, llama-spm vocabulary) as
#        F16, quantized with `cinfer quantize`: q4_0 (--pure, like DESIGN's
#        190 MB file: output.weight Q4_0 too), q8_0, q4_k_m (llama-quantize's
#        mixture);
#      - dense1b: a 1B-class llama of Llama-3.2-1B's shape (dim 2048, 16
#        layers, 32 heads, 8 KV heads, ffn 8192, the Llama-3 vocabulary of
#        ggml-vocab-llama-bpe.gguf, 128256 tokens, tied embeddings, rope base
#        500000; 1.24B parameters) as F16, quantized to q4_0 (--pure), q8_0,
#        q4_k_m;
#      - dense7b: a Llama-2-7B-shape model (dim 4096, 32 layers, 32 heads, 32 KV
#        heads, ffn 11008, llama-spm vocabulary; 6.74B parameters) as F16
#        (13.5 GB, deleted once quantized unless BENCH_KEEP_F16=1), quantized to
#        q4_k_m (3.8 GiB);
#      - depth: the dense 336M model again, with context_length 32768 so that
#        its context holds the depths (anchor-336m-c32k), q4_0 (--pure; also
#        q4_k_m with BENCH_DEPTH_TYPES="q4_0 q4_k_m"); pp and tg at each of
#        BENCH_DEPTHS tokens already in the KV cache (cinfer bench -d,
#        llama-bench -d) against llama-bench with flash attention off and on
#        (-fa 0,1), BENCH_DEPTH_ROUNDS (1) rounds: llama-bench fills each
#        depth twice (once per -fa), 41k tokens a round at the default depths;
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
#        F32, quantized with `cinfer quantize`: q8_0, q4_0 (--pure); the
#        recurrent-layer kernels' table (bench_ssm) follows the summary;
#   3. measures memory read bandwidth (membw, median of 7) at every thread
#      count used: at the start, before each table file and at the end; the
#      bound uses the median of those samples (one sample of this VM's
#      membw swung from 27 to 40 GB/s within minutes)
#   4. for each file, BENCH_ROUNDS times: cinfer bench, then the peer, so
#      A B A B stay close in time: pp and tg at BENCH_THREADS, then tg alone at
#      each other count of BENCH_TG_THREADS.  The peer is llama.cpp's own
#      llama-bench built natively ($LLAMA_BENCH, ../shared/tools/peer-native.sh)
#      when it is there, else peer-bench.mjs (llama.cpp inside node-llama-cpp,
#      when $PEER_DIR holds it; no depth part then)
#   5. prints markdown tables: per file and thread count the median over
#      rounds of each engine's t/s, cinfer/peer ratios and the fraction of the
#      decode bound (membw at that thread count / weight bytes a token reads;
#      for the MoE model the active experts' bytes only) each reaches; the
#      depth curves; how long each part took; everything is saved under
#      $BENCH_DIR/results-<time>/ (summary.md is what was printed).
#
# Settings (environment): BENCH_MODELS, BENCH_DIR, BENCH_TYPES ("q4_0 q8_0
# q4_k_m", the 336M model's), BENCH_1B_TYPES ("q4_0 q8_0 q4_k_m"),
# BENCH_7B_TYPES ("q4_k_m"), BENCH_DEPTH_TYPES ("q4_0"), BENCH_DEPTHS
# ("0,4096,16384"), BENCH_DEPTH_ROUNDS (1), BENCH_MOE_TYPES ("q4_0 q8_0"), BENCH_HYBRID_TYPES ("q8_0
# q4_0"), BENCH_P (512), BENCH_N (128), BENCH_R (3 repetitions per run, the
# 336M, MoE and hybrid files), BENCH_R_LARGE (2: the 1B, 7B and depth runs),
# BENCH_ROUNDS (2), BENCH_THREADS (2: pp and tg), BENCH_TG_THREADS ("1
# $BENCH_THREADS": tg), BENCH_QUANT (cinfer's --quant for every file: auto)
# and BENCH_QUANT_<type> for one type (e.g. BENCH_QUANT_q4_k_m=int8int8),
# BENCH_KEEP_F16, LLAMA_BENCH (../peer-native/llama.cpp/build/bin/llama-bench),
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
TYPES_1B=${BENCH_1B_TYPES:-"q4_0 q8_0 q4_k_m"}
TYPES_7B=${BENCH_7B_TYPES:-"q4_k_m"}
DEPTH_TYPES=${BENCH_DEPTH_TYPES:-"q4_0"}
DEPTH_ROUNDS=${BENCH_DEPTH_ROUNDS:-1}
DEPTHS=${BENCH_DEPTHS:-"0,4096,16384"}
MOE_TYPES=${BENCH_MOE_TYPES:-"q4_0 q8_0"}
MODELS=${BENCH_MODELS:-"dense dense1b dense7b depth"}
HYBRID_TYPES=${BENCH_HYBRID_TYPES:-"q8_0 q4_0"}
HYBRID_SHAPE=${BENCH_HYBRID_SHAPE:-}
HYBRID_NAME=granitehybrid-1b
[ -z "$HYBRID_SHAPE" ] || HYBRID_NAME=granitehybrid-custom
LLAMA_BENCH=${LLAMA_BENCH:-../peer-native/llama.cpp/build/bin/llama-bench}
P=${BENCH_P:-512}
N=${BENCH_N:-128}
R=${BENCH_R:-3}
R_LARGE=${BENCH_R_LARGE:-2}
ROUNDS=${BENCH_ROUNDS:-2}
THREADS=${BENCH_THREADS:-2}
TG_THREADS=${BENCH_TG_THREADS:-"1 $THREADS"}
PEER_DIR=${PEER_DIR:-peer}
CINFER=$BUILD/cinfer
DIR=${BENCH_DIR:-$BUILD/bench}
VOCAB=$SHARED/vocab/llama.cpp/ggml-vocab-llama-spm.gguf
VOCAB_L3=$SHARED/vocab/llama.cpp/ggml-vocab-llama-bpe.gguf
NAME=${BENCH_NAME:-anchor-336m}
SHAPE=${BENCH_SHAPE:-"--dim 1024 --layers 24 --heads 16 --kv-heads 4 --ffn 2816"}
NAME_1B=anchor-1b
SHAPE_1B="--dim 2048 --layers 16 --heads 32 --kv-heads 8 --ffn 8192 --tied --rope-base 500000"
NAME_7B=anchor-7b
SHAPE_7B="--dim 4096 --layers 32 --heads 32 --kv-heads 32 --ffn 11008"
NAME_DEPTH=$NAME-c32k
MOE_NAME=${BENCH_MOE_NAME:-moe-qwen2moe-1.4b}
MOE_SHAPE=${BENCH_MOE_SHAPE:-"--arch qwen2moe --dim 1024 --layers 24 --heads 16 --kv-heads 4 --ffn 2816 --experts 64 --experts-used 8 --expert-ffn 256 --shared-ffn 1024"}

say() { printf '%s\n' "$*" >&2; }
die() { say "bench: $*"; exit 1; }
now() { date +%s; }

[ -x "$CINFER" ] || die "$CINFER missing (make BUILD=$BUILD first)"
[ -f "$SHARED/tools/mkmodel.c" ] && [ -f "$VOCAB" ] ||
    die "$SHARED (tools/mkmodel.c, vocab/llama.cpp) absent: nothing to benchmark on"
command -v jq >/dev/null 2>&1 || die "jq is needed for the summary (apt-get install jq)"
for model in $MODELS; do
    case $model in dense|dense1b|dense7b|depth|moe|hybrid) ;;
    *) die "BENCH_MODELS: unknown part '$model' (dense, dense1b, dense7b, depth, moe, hybrid)" ;;
    esac
done

mkdir -p "$BUILD/tools" "$DIR"
[ "$BUILD/tools/mkmodel" -nt "$SHARED/tools/mkmodel.c" ] ||
    $CC -O2 -o "$BUILD/tools/mkmodel" "$SHARED/tools/mkmodel.c" -lm
[ "$BUILD/tools/membw" -nt "$SHARED/tools/membw.c" ] ||
    $CC -O3 -march=native -pthread -o "$BUILD/tools/membw" "$SHARED/tools/membw.c"

PEER=""
if [ -x "$LLAMA_BENCH" ]; then
    PEER=native
    PEER_NAME="llama.cpp llama-bench ($LLAMA_BENCH, $("$LLAMA_BENCH" --version 2>&1 | sed -n 's/^version: //p' | head -1))"
elif command -v node >/dev/null 2>&1 && [ -d "$PEER_DIR/node_modules/node-llama-cpp" ]; then
    PEER=node
    PEER_NAME="llama.cpp in node-llama-cpp 3.22.1 (peer-bench.mjs)"
else
    say "bench: no peer (no $LLAMA_BENCH, no node or $PEER_DIR/node_modules/node-llama-cpp; see $SHARED/tools/README.md): cinfer only"
    PEER_NAME="none"
fi

T_START=$(now)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
RES=$DIR/results-$stamp
mkdir -p "$RES"
load() { printf '%s | %s\n' "$(uptime | sed 's/.*load average/load average/')" \
    "$(top -bn1 2>/dev/null | sed -n 's/^%\{0,1\}Cpu(s): *//p' | head -1)"; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs"
    echo "cinfer: $commit ($("$CINFER" --version 2>/dev/null | head -1))"
    echo "peer: $PEER_NAME"
    echo "load at start: $(load)"
} | tee "$RES/machine.txt" >&2
TIMES=$RES/times.txt
: >"$TIMES"
# part_time PART WHAT START: one line of the timing list
part_time() { echo "- $1: $2 $(($(now) - $3)) s" >>"$TIMES"; }

# ---- model files ---------------------------------------------------------------
TABLE_FILES=""  # the main table's files
DEPTH_FILES=""  # the depth curves'
# mk_f16 FILE NAME VOCAB CTX SHAPE...: the random-weight F16 model, once
mk_f16() {
    out=$1 name=$2 vocab=$3 ctx=$4
    shift 4
    [ -f "$out" ] && return 0
    say "bench: making $out (mkmodel, random weights)"
    "$BUILD/tools/mkmodel" -o "$out.tmp" --type f16 "$@" --ctx "$ctx" --vocab-from "$vocab" \
        --name "$name" >&2
    mv "$out.tmp" "$out"
}
# quantized SRC OUT TYPE: OUT from SRC with `cinfer quantize` unless it is
# there and not older than SRC (SRC may be gone: deleted after quantizing)
quantized() {
    src=$1 out=$2 t=$3
    extra=""
    [ "$t" = q4_0 ] && extra=--pure
    if [ -f "$out" ] && ! [ "$out" -ot "$src" ]; then return 0; fi
    [ -f "$src" ] || return 1
    say "bench: cinfer quantize $src -> $t $extra"
    # shellcheck disable=SC2086
    "$CINFER" quantize "$src" "$out" --type "$t" $extra -t "$THREADS" >&2 ||
        { say "bench: note: cannot make $out, skipped"; return 1; }
}
upper() { echo "$1" | tr a-z A-Z; }
# dense_part NAME VOCAB CTX TYPES KEEP_F16 SHAPE...: prints the quantized files
dense_part() {
    name=$1 vocab=$2 ctx=$3 types=$4 keep=$5
    shift 5
    need=""
    for t in $types; do [ -f "$DIR/$name-$(upper "$t").gguf" ] || need=1; done
    f16=$DIR/$name-F16.gguf
    [ -z "$need" ] || mk_f16 "$f16" "$name" "$vocab" "$ctx" "$@"
    for t in $types; do
        f=$DIR/$name-$(upper "$t").gguf
        quantized "$f16" "$f" "$t" && printf ' %s' "$f"
    done
    [ -n "$keep" ] || rm -f "$f16"
}
# make_part PART: its files, added to TABLE_FILES or DEPTH_FILES
make_part() {
    model=$1
    case $model in
    dense)
        # shellcheck disable=SC2086
        TABLE_FILES="$TABLE_FILES $(dense_part "$NAME" "$VOCAB" 2048 "$TYPES" 1 $SHAPE)" ;;
    dense1b)
        [ -f "$VOCAB_L3" ] || die "$VOCAB_L3 absent (the Llama-3 vocabulary of the 1B model)"
        # shellcheck disable=SC2086
        TABLE_FILES="$TABLE_FILES $(dense_part "$NAME_1B" "$VOCAB_L3" 131072 "$TYPES_1B" 1 $SHAPE_1B)" ;;
    dense7b)
        # shellcheck disable=SC2086
        TABLE_FILES="$TABLE_FILES $(dense_part "$NAME_7B" "$VOCAB" 4096 "$TYPES_7B" "${BENCH_KEEP_F16:-}" $SHAPE_7B)" ;;
    depth)
        # shellcheck disable=SC2086
        DEPTH_FILES="$DEPTH_FILES $(dense_part "$NAME_DEPTH" "$VOCAB" 32768 "$DEPTH_TYPES" 1 $SHAPE)" ;;
    moe)
        for t in $MOE_TYPES; do
            f=$DIR/$MOE_NAME-$(upper "$t").gguf
            if [ ! -f "$f" ]; then
                say "bench: making $f (mkmodel --type $t, random weights)"
                # shellcheck disable=SC2086
                "$BUILD/tools/mkmodel" -o "$f.tmp" --type "$t" $MOE_SHAPE --ctx 2048 --vocab-from "$VOCAB" \
                    --name "$MOE_NAME" >&2 || { say "bench: note: cannot make $f, skipped"; rm -f "$f.tmp"; continue; }
                mv "$f.tmp" "$f"
            fi
            TABLE_FILES="$TABLE_FILES $f"
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
            f=$DIR/$HYBRID_NAME-$(upper "$t").gguf
            quantized "$HF32" "$f" "$t" && TABLE_FILES="$TABLE_FILES $f"
        done ;;
    esac
}

# ---- memory bandwidth ----------------------------------------------------------------
# at every thread count used: at the start, before each table file and at the
# end (bw_sample); the bound uses the median of the samples (bw), robust to
# both a busy spell and a transient high reading
TLIST=$(printf '%s\n' "$THREADS" $TG_THREADS | awk 'NF && !seen[$0]++' | tr '\n' ' ')
median() { sed -n 's/.*median \([0-9.]*\) GB\/s.*/\1/p'; }
membw() { "$BUILD/tools/membw" 1024 "$1" 7 | tee -a "$RES/membw.txt" | median; }
bw_samples() { eval "echo \$BWS_$1"; }
bw_sample() { for t in $TLIST; do eval "BWS_$t=\"$(bw_samples "$t") $(membw "$t")\""; done; }
bw() { bw_samples "$1" | tr ' ' '\n' | awk 'NF' | sort -g |
       awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
bw_sample
say "bench: memory read bandwidth (median) $(for t in $TLIST; do printf '%s GB/s on %s thread(s); ' "$(bw "$t")" "$t"; done)"

# ---- interleaved runs -----------------------------------------------------------------
# --quant for file $1: BENCH_QUANT_<type> (type: what follows the file name's
# last '-', lower case), else BENCH_QUANT
quant_for() {
    b=$(basename "$1" .gguf)
    t=$(echo "${b##*-}" | tr 'A-Z' 'a-z')
    eval "q=\${BENCH_QUANT_$t:-}"
    echo "${q:-${BENCH_QUANT:-auto}}"
}
# r_for FILE: repetitions per run
r_for() {
    case $(basename "$1") in
    "$NAME_1B"-*|"$NAME_7B"-*) echo "$R_LARGE" ;;
    *) echo "$R" ;;
    esac
}
# peer_run OUT LOG ARGS...: the peer on one file; its JSON into OUT
peer_run() {
    out=$1 log=$2
    shift 2
    if [ "$PEER" = native ]; then
        "$LLAMA_BENCH" "$@" -o json >"$out" 2>"$log" ||
            { say "bench: peer failed (see $log)"; rm -f "$out"; }
    elif [ "$PEER" = node ]; then
        # peer-bench.mjs takes the file first, then llama-bench-style -p -n -r -t
        m=$2
        shift 2
        node "$SHARED/tools/peer-bench.mjs" "$m" "$@" --json --peer "$PEER_DIR" >"$out" 2>"$log" ||
            { say "bench: peer failed (see $log)"; rm -f "$out"; }
    fi
}
SKIPPED=""
# measure_table FILE: the table runs, ROUNDS times
measure_table() {
    f=$1
    bw_sample
    b=$(basename "$f" .gguf)
    q=$(quant_for "$f")
    r=$(r_for "$f")
    i=1
    while [ "$i" -le "$ROUNDS" ]; do
        for t in $TLIST; do
            p=0
            [ "$t" = "$THREADS" ] && p=$P
            say "bench: $b round $i/$ROUNDS, -t $t: cinfer --quant $q"
            if ! "$CINFER" bench "$f" -p "$p" -n "$N" -r "$r" -t "$t" --quant "$q" --bw "$(bw "$t")" --json \
                >"$RES/$b.cinfer.t$t.$i.json" 2>"$RES/$b.cinfer.t$t.$i.log"; then
                say "bench: note: $b skipped, cinfer cannot run it: $(tail -1 "$RES/$b.cinfer.t$t.$i.log")"
                rm -f "$RES/$b".*.json
                SKIPPED="$SKIPPED $f"
                return 0
            fi
            [ -z "$PEER" ] && continue
            say "bench: $b round $i/$ROUNDS, -t $t: peer"
            peer_run "$RES/$b.peer.t$t.$i.json" "$RES/$b.peer.t$t.$i.log" -m "$f" -p "$p" -n "$N" -r "$r" -t "$t"
        done
        i=$((i + 1))
    done
}
# measure_depth FILE: the depth runs, DEPTH_ROUNDS times
measure_depth() {
    f=$1
    b=$(basename "$f" .gguf)
    q=$(quant_for "$f")
    i=1
    while [ "$i" -le "$DEPTH_ROUNDS" ]; do
        say "bench: $b depths $DEPTHS round $i/$DEPTH_ROUNDS: cinfer --quant $q"
        if ! "$CINFER" bench "$f" -d "$DEPTHS" -p "$P" -n "$N" -r "$R_LARGE" -t "$THREADS" --quant "$q" --json \
            >"$RES/$b.depth.cinfer.$i.json" 2>"$RES/$b.depth.cinfer.$i.log"; then
            say "bench: note: $b skipped, cinfer cannot run it: $(tail -1 "$RES/$b.depth.cinfer.$i.log")"
            rm -f "$RES/$b".depth.*.json
            SKIPPED="$SKIPPED $f"
            return 0
        fi
        if [ "$PEER" = native ]; then
            say "bench: $b depths $DEPTHS round $i/$DEPTH_ROUNDS: peer -fa 0,1"
            peer_run "$RES/$b.depth.peer.$i.json" "$RES/$b.depth.peer.$i.log" -m "$f" -d "$DEPTHS" -fa 0,1 \
                -p "$P" -n "$N" -r "$R_LARGE" -t "$THREADS"
        fi
        i=$((i + 1))
    done
}

# ---- the parts, one after the other: files, then their runs ----------------------------
for model in $MODELS; do
    t0=$(now)
    before="$TABLE_FILES $DEPTH_FILES"
    make_part "$model"
    # shellcheck disable=SC2086
    TABLE_FILES=$(echo $TABLE_FILES) DEPTH_FILES=$(echo $DEPTH_FILES) # one space between names
    part_time "$model" "files ready in" "$t0"
    for f in $TABLE_FILES $DEPTH_FILES; do
        case " $before " in *" $f "*) continue ;; esac
        t1=$(now)
        case " $DEPTH_FILES " in *" $f "*) measure_depth "$f" ;; *) measure_table "$f" ;; esac
        part_time "$model" "$(basename "$f" .gguf) measured in" "$t1"
    done
    part_time "$model" "whole part" "$t0"
done
[ -n "$TABLE_FILES$DEPTH_FILES" ] || die "no model file to run"

echo "load at end: $(load)" | tee -a "$RES/machine.txt" >&2
bw_sample

# ---- summary ---------------------------------------------------------------------------
JQ_DEFS='
  def m(xs): if (xs|length) == 0 then null
             else (xs|sort) as $s | ($s|length) as $n
                  | (if $n % 2 == 1 then $s[($n-1)/2] else ($s[$n/2-1] + $s[$n/2]) / 2 end) end;
  def f1(x): if x == null then "-" else (x*10|round/10|tostring) end;
  def f2(x): if x == null then "-" else (x*100|round/100|tostring) end;
  def ratio(a; b): if a == null or b == null or b == 0 then "-" else f2(a/b) end;
  def pct(x): if x == null then "-" else ((x*100|round|tostring) + "%") end;
  def rounds(xs): xs | map(.*10|round/10|tostring) | join(", ");
  def ours: (.engine // "") | startswith("cinfer");'
# table_rows MODE: MODE table (one row per file and thread count) or rounds
table_rows() {
    for f in $TABLE_FILES; do
        b=$(basename "$f" .gguf)
        for t in $TLIST; do
            ls "$RES/$b".*.t"$t".*.json >/dev/null 2>&1 || continue
            cat "$RES/$b".*.t"$t".*.json | jq -s -r --arg b "$b" --arg mode "$1" --argjson t "$t" \
                --argjson bw "$(bw "$t")" "$JQ_DEFS"'
              (map(.[])) as $all
              | ($all | map(select(ours))) as $c
              | ($all | map(select(ours|not))) as $p
              | ($c | map(select(.n_prompt > 0) | .avg_ts)) as $cpp
              | ($c | map(select(.n_gen > 0) | .avg_ts)) as $ctg
              | ($p | map(select(.n_prompt > 0) | .avg_ts)) as $ppp
              | ($p | map(select(.n_gen > 0) | .avg_ts)) as $ptg
              | ($bw * 1e9 / $c[0].decode_bytes_per_token) as $bound
              | if $mode == "table" then
                  "| \($b) | \($c[0].precision)\(if $c[0].weight_types then " (\($c[0].weight_types))" else "" end) | \($c[0].model_size/1048576|round) | \($t) | \(f1(m($cpp))) | \(f1(m($ppp))) | \(ratio(m($cpp); m($ppp))) | \(f1(m($ctg))) | \(f1(m($ptg))) | **\(ratio(m($ctg); m($ptg)))** | \($bw) | \(f1($bound)) | \(pct(m($ctg)/$bound)) | \(if m($ptg) then pct(m($ptg)/$bound) else "-" end) |"
                else "- \($b) -t \($t): cinfer \(if ($cpp|length) > 0 then "pp [\(rounds($cpp))] " else "" end)tg [\(rounds($ctg))]; peer \(if ($ppp|length) > 0 then "pp [\(rounds($ppp))] " else "" end)tg [\(rounds($ptg))]" end'
        done
    done
}
# depth_rows MODE: one row per file and depth, or the per-round values
depth_rows() {
    for f in $DEPTH_FILES; do
        b=$(basename "$f" .gguf)
        ls "$RES/$b".depth.*.json >/dev/null 2>&1 || continue
        for d in $(echo "$DEPTHS" | tr ',' ' '); do
            cat "$RES/$b".depth.*.json | jq -s -r --arg b "$b" --arg mode "$1" --argjson d "$d" "$JQ_DEFS"'
              (map(.[]) | map(select(.n_depth == $d))) as $all
              | ($all | map(select(ours))) as $c
              | ($all | map(select((ours|not) and .flash_attn == 0))) as $p0
              | ($all | map(select((ours|not) and .flash_attn == 1))) as $p1
              | def pp(xs): xs | map(select(.n_prompt > 0) | .avg_ts);
                def tg(xs): xs | map(select(.n_gen > 0) | .avg_ts);
                def best(a; b): if a == null then b elif b == null then a elif a > b then a else b end;
              if $mode == "table" then
                "| \($b) | \($d) | \(f1(m(pp($c)))) | \(f1(m(pp($p0)))) | \(f1(m(pp($p1)))) | \(ratio(m(pp($c)); best(m(pp($p0)); m(pp($p1))))) | \(f1(m(tg($c)))) | \(f1(m(tg($p0)))) | \(f1(m(tg($p1)))) | **\(ratio(m(tg($c)); best(m(tg($p0)); m(tg($p1)))))** |"
              else "- \($b) d\($d): cinfer pp [\(rounds(pp($c)))] tg [\(rounds(tg($c)))]; peer -fa 0 pp [\(rounds(pp($p0)))] tg [\(rounds(tg($p0)))]; -fa 1 pp [\(rounds(pp($p1)))] tg [\(rounds(tg($p1)))]" end'
        done
    done
}
{
    echo "cinfer bench vs $PEER_NAME: -p $P -n $N, $ROUNDS interleaved rounds (A B A B), median over the rounds of each run's mean t/s"
    echo
    if [ -n "$TABLE_FILES" ]; then
        echo "pp and tg at -t $THREADS, tg alone at the other thread counts; -r $R repetitions per run ($NAME_1B, $NAME_7B: -r $R_LARGE); peer with its defaults (flash attention auto)."
        echo "Decode bound = membw at that thread count (the median of its samples: at the start, before each table file, at the end) / weight bytes a token reads (all tensors but token_embd, of which a token reads one row unless it is also the output)."
        echo
        echo "| file | cinfer --quant | MiB | threads | cinfer pp$P | peer pp$P | pp ratio | cinfer tg$N | peer tg$N | tg ratio | membw GB/s | bound t/s | cinfer/bound | peer/bound |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        table_rows table
        echo
    fi
    if [ -n "$DEPTH_FILES" ]; then
        echo "Depth: pp$P and tg$N with d tokens already in the KV cache (cinfer bench -d, llama-bench -d $DEPTHS), -t $THREADS, -r $R_LARGE, $DEPTH_ROUNDS round(s); peer with flash attention off (-fa 0) and on (-fa 1); ratios against the faster of the two."
        echo
        echo "| file | depth | cinfer pp$P | peer pp$P fa0 | peer pp$P fa1 | pp ratio | cinfer tg$N | peer tg$N fa0 | peer tg$N fa1 | tg ratio |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        depth_rows table
        echo
    fi
    echo "per round (t/s):"
    table_rows rounds
    depth_rows rounds
    for f in $SKIPPED; do echo "- skipped (cinfer cannot run it): $(basename "$f")"; done
    echo
    case " $MODELS " in *" hybrid "*)
        if [ -x "$BUILD/bench_ssm" ]; then
            echo "recurrent-layer kernels, one layer ($BUILD/bench_ssm -t 1 -n $P: CPU time of one thread):"
            echo
            "$BUILD/bench_ssm" -t 1 -n "$P" | tail -n +3
            echo
        fi ;;
    esac
    echo "membw (median of the samples): $(for t in $TLIST; do printf '%s GB/s on %s thread(s) (samples:%s); ' "$(bw "$t")" "$t" "$(bw_samples "$t")"; done)"
    cat "$RES/machine.txt"
    echo "time taken (whole run $(($(now) - T_START)) s):"
    cat "$TIMES"
} | tee "$RES/summary.md"
say "bench: results in $RES"
