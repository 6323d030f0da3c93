#!/bin/sh
# bench/compare-decay.sh: `prd-bench decay` (RSS after a free-all and after the decay delay)
# under glibc, jemalloc, mimalloc and libprudence-malloc (LD_PRELOAD), interleaved: in round r
# the allocators run in an order rotated by r, each in a fresh process.  Medians of the rounds.
#
#   bench/compare-decay.sh [--rounds N] [--json] [--build DIR] [-- prd-bench decay options]
#     default: 3 rounds, `prd-bench decay` at its defaults (32 MiB live, 256 MiB freed, 21 s
#     wait); options after -- go to every run (--mib 64 --wait-ms 3000 for a quick look)
#   Per allocator: live KiB, RSS peak, after the free-all, after the wait (KiB), and the ms
#   until the RSS was within the goal (1.5 x live + 8 MiB; -1: never in the wait).
#   Allocators whose library is absent are skipped and named on stderr.
set -eu
. "$(dirname "$0")/common.sh"
rounds=3 json=0 build=build
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --json) json=1 ;;
    --build) build=$2; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--rounds N] [--json] [--build DIR] [-- decay options]" >&2; exit 2 ;;
  esac
  shift
done
peers compare-decay "$build" jemalloc mimalloc
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run_decay() {
  line=$(LD_PRELOAD=$pre "$bench" decay --json "$@")
  vals=$(echo "$line" | sed -n 's/.*"live_kb":\([0-9]*\),"rss_peak_kb":\([0-9]*\),"rss_free_kb":\([0-9]*\),"rss_wait_kb":\([0-9]*\),"goal_kb":\([0-9]*\),"goal_ms":\(-*[0-9]*\).*/\1 \2 \3 \4 \5 \6/p')
  [ -n "$vals" ] || { echo "compare-decay: under $n printed: $line" >&2; exit 1; }
  echo "$n $vals" >> "$tmp"
}
each_run compare-decay "$rounds" $json run_decay "$@"
awk -v json=$json -v names="$names" "$AWK_MEDIAN"'
{ a = $1; ns[a]++; for (c = 2; c <= 7; c++) v[a, c, ns[a]] = $c }
END {
  na = split(names, A, " ")
  if (!json) printf "%-10s %10s %10s %10s %10s %10s %9s\n", "allocator", "live KiB", "peak KiB", "free-all", "after wait", "goal KiB", "goal ms"
  for (j = 1; j <= na; j++) {
    a = A[j]; n = ns[a]
    for (c = 2; c <= 7; c++) { for (q = 1; q <= n; q++) x[q] = v[a, c, q]; M[c] = median(x, n) }
    if (json) printf "{\"bench\":\"decay\",\"allocator\":\"%s\",\"live_kb\":%d,\"rss_peak_kb\":%d,\"rss_free_kb\":%d,\"rss_wait_kb\":%d,\"goal_kb\":%d,\"goal_ms\":%d,\"runs\":%d}\n", a, M[2], M[3], M[4], M[5], M[6], M[7], n
    else printf "%-10s %10d %10d %10d %10d %10d %9d\n", a, M[2], M[3], M[4], M[5], M[6], M[7]
  }
}' "$tmp"
