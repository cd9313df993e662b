#!/bin/sh
# bench_moe_stream.sh MODEL LIMIT_MIB [N_GEN] [CACHES...] — streamed MoE decode
# under a memory cgroup (v1 or v2, below this shell's own group) of LIMIT_MIB:
# for each --moe-cache-experts value (and "mem": --mem LIMIT, "native": not
# streamed) the file is evicted from the page cache, then `cinfer run`
# generates N_GEN greedy tokens; one line per run: gen tok/s, peak RSS,
# bytes read from storage, major faults, the LRU's hit rate (docs/memory.md).
# LIMIT_MIB 0: no cgroup and no eviction (MEM=N for the "mem" run's budget).
set -eu
M=$1; LIMIT=$2; N=${3:-16}; shift 3 2>/dev/null || shift $#
CACHES=${*:-"8 16 32 64 mem native"}
BIN=${CINFER:-build/cinfer}
cg=$(awk -F: '$2=="memory"{print "/sys/fs/cgroup/memory"$3}' /proc/self/cgroup)
if [ "$LIMIT" = 0 ]; then dir=""   # no limit: the page cache stays hot (no eviction either)
elif [ -n "$cg" ]; then dir=$cg/cinfer-bench-$$; mkdir "$dir"; echo $((LIMIT << 20)) > "$dir/memory.limit_in_bytes"
else dir=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)/cinfer-bench-$$; mkdir "$dir"; echo $((LIMIT << 20)) > "$dir/memory.max"; fi
trap '[ -z "$dir" ] || rmdir "$dir" 2>/dev/null || true' EXIT
evict() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$M"; }
echo "# $(date -u +%FT%TZ) $M limit ${LIMIT} MiB, -n $N -t 2, load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in $CACHES; do
  case $c in
    native) opt="--quant native" ;;
    mem) opt="--stream-weights --mem ${MEM:-$LIMIT}M" ;;
    *) opt="--stream-weights --moe-cache-experts $c" ;;
  esac
  [ -z "$dir" ] || evict
  join=${dir:+"echo \$\$ > $dir/cgroup.procs && "}
  err=$(sh -c "${join}exec $BIN run $M $opt -p 'Once upon a time' -n $N --temp 0 -t 2 -c 512" 2>&1 >/dev/null) || { echo "$c: failed: $(echo "$err" | tail -1)"; continue; }
  tps=$(echo "$err" | sed -n 's/.*gen [0-9]* tok \([0-9.]*\) tok\/s.*/\1/p')
  rss=$(echo "$err" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')
  io=$(echo "$err" | sed -n 's/.*faults, \([0-9.]*\) MiB read from storage.*/\1/p')
  flt=$(echo "$err" | sed -n 's/.* \([0-9]*\) major faults.*/\1/p')
  hit=$(echo "$err" | sed -n 's/.*experts: \([0-9]*\) per layer cached.*hit rate \([0-9.]*\) %.*/cache \1, hit \2 %/p')
  echo "$c: gen ${tps} tok/s, peak RSS ${rss} MiB, read ${io:-?} MiB, ${flt:-?} major faults${hit:+, $hit}"
done
