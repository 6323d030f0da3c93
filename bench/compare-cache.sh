#!/bin/sh
# compare-cache.sh: our magazine-layer hit pair (prd_cache_alloc + prd_cache_free) against the
# malloc/free pair of glibc, jemalloc, mimalloc and tcmalloc, one thread, same object size.
#
#   bench/compare-cache.sh [--rounds R] [--size S] [--iters N] [--bench PATH]
#
# Each round runs, in turn, `prd-bench cache --mode mag` (no preload) and `--mode malloc`
# under each allocator through LD_PRELOAD (glibc: no preload); the order rotates every round
# so no allocator always runs first.  Each run itself takes the median of its own interleaved
# rounds.  The script prints the median ns per pair of every allocator over the rounds and
# the ratio (their ns per pair) / (ours): >= 1.0 means our hit pair is no slower.  An
# allocator whose library is not installed is skipped and said so.  On a terminal, stderr
# shows progress (bench/common.sh).
set -eu
. "$(dirname "$0")/common.sh"

ROUNDS=5
SIZE=64
ITERS=2000000
BENCH=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --bench) BENCH="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--size S] [--iters N] [--bench PATH]" >&2; exit 2 ;;
  esac
done
find_bench "$BENCH"

names="prudence glibc"
[ -n "$JE" ] && names="$names jemalloc" || echo "# jemalloc: not installed, skipped"
[ -n "$MI" ] && names="$names mimalloc" || echo "# mimalloc: not installed, skipped"
[ -n "$TC" ] && names="$names tcmalloc" || echo "# tcmalloc: not installed, skipped"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_one() {   # name -> ns per pair on stdout
  case "$1" in
    prudence) "$BENCH" cache --mode mag --threads 1 --size "$SIZE" --iters "$ITERS" --rounds 3 --json ;;
    glibc) "$BENCH" cache --mode malloc --threads 1 --size "$SIZE" --iters "$ITERS" --rounds 3 --json ;;
    jemalloc) LD_PRELOAD="$JE" "$BENCH" cache --mode malloc --threads 1 --size "$SIZE" --iters "$ITERS" --rounds 3 --json ;;
    mimalloc) LD_PRELOAD="$MI" "$BENCH" cache --mode malloc --threads 1 --size "$SIZE" --iters "$ITERS" --rounds 3 --json ;;
    tcmalloc) LD_PRELOAD="$TC" "$BENCH" cache --mode malloc --threads 1 --size "$SIZE" --iters "$ITERS" --rounds 3 --json ;;
  esac | sed -n 's/.*"mode":"\(mag\|malloc\)".*"ns_per_pair":\([0-9.]*\).*/\2/p' | head -1
}

progress_init compare-cache 0
steps=$((ROUNDS * $(echo $names | wc -w))) step=0
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  # rotate the order by the round number
  set -- $names
  k=0
  while [ "$k" -lt $((r % $#)) ]; do first=$1; shift; set -- "$@" "$first"; k=$((k + 1)); done
  for n in "$@"; do
    step=$((step + 1))
    progress "round $((r + 1)): $n" $step $steps
    v=$(run_one "$n")
    echo "$v" >> "$tmp/$n"
  done
  r=$((r + 1))
done
progress_done

median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ours=$(median "$tmp/prudence")
echo "one thread, $SIZE-byte objects, $ITERS pairs per run, median of $ROUNDS rounds (order rotated)"
printf '%-10s %12s %22s\n' allocator ns/pair "ratio (theirs/ours)"
printf '%-10s %12.3f %22s\n' prudence "$ours" "(magazine hit pair)"
for n in $names; do
  [ "$n" = prudence ] && continue
  m=$(median "$tmp/$n")
  printf '%-10s %12.3f %22.3f\n' "$n" "$m" "$(awk -v a="$m" -v b="$ours" 'BEGIN {print a / b}')"
done
