#!/bin/sh
# bench/compare-kv.sh: `prd-bench kv` (a key-value server's RSS / usable bytes and SET rate)
# under glibc, jemalloc, mimalloc, tcmalloc and libprudence-malloc (LD_PRELOAD), interleaved:
# in round r the allocators run in an order rotated by r, each in a fresh process (and each of
# its phases in a fresh child).  Medians of the rounds.
#
#   bench/compare-kv.sh [--rounds N] [--json] [--build DIR] [-- prd-bench kv options]
#     default: 3 rounds, `prd-bench kv` at its defaults (1M SETs per phase, 2 s wait); options
#     after -- go to every run (--keys 200000 --wait-ms 0 for a quick look)
#   Per allocator and phase (A: 512 B SETs, fresh; B: 100 B and 2,000 B SETs, all dropped,
#   then A's SETs): SET/s, RSS MiB, usable MiB, RSS / usable, and the RSS (MiB) once every key
#   is dropped, at once and after the wait; with `-- --latency`, the slowest SET (ms) too.
set -eu
. "$(dirname "$0")/common.sh"
rounds=3 json=0 build=build
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --json) json=1 ;;
    --build) build=$2; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--rounds N] [--json] [--build DIR] [-- kv options]" >&2; exit 2 ;;
  esac
  shift
done
peers compare-kv "$build" jemalloc mimalloc tcmalloc
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run_kv() {
  out=$(LD_PRELOAD=$pre "$bench" kv --json "$@")
  vals=$(echo "$out" | sed -n 's/.*"phase":"\([AB]\)".*"set_per_s":\([0-9]*\),"rss_kb":\([0-9]*\),"usable_kb":\([0-9]*\),"ratio":\([0-9.]*\),"drop_rss_kb":\([0-9]*\),"wait_rss_kb":\([0-9]*\)\(,"max_set_ms":\([0-9.]*\)\)\{0,1\}.*/\1 \2 \3 \4 \5 \6 \7 \9/p')
  [ -n "$vals" ] || { echo "compare-kv: under $n printed: $out" >&2; exit 1; }
  echo "$vals" | while read -r line; do echo "$n $line"; done >> "$tmp"
}
each_run compare-kv "$rounds" $json run_kv "$@"
awk -v json=$json -v names="$names" "$AWK_MEDIAN"'
{ k = $1 SUBSEP $2; ns[k]++; seen[$2] = 1; for (c = 3; c <= 8; c++) v[k, c, ns[k]] = $c
  if (NF >= 9) { v[k, 9, ns[k]] = $9; lat = 1 } }
END {
  na = split(names, A, " ")
  if (!json) printf "%-10s %5s %10s %9s %9s %8s %9s %9s%s\n", "allocator", "phase", "SET/s", "RSS MiB", "usable", "RSS/use", "dropped", "waited", lat ? "  slowest SET ms" : ""
  for (p = 1; p <= 2; p++) {
    ph = p == 1 ? "A" : "B"
    if (!(ph in seen)) continue
    for (j = 1; j <= na; j++) {
      a = A[j]; k = a SUBSEP ph; n = ns[k]
      if (n == 0) continue
      for (c = 3; c <= (lat ? 9 : 8); c++) { for (q = 1; q <= n; q++) x[q] = v[k, c, q]; M[c] = median(x, n) }
      if (json) printf "{\"bench\":\"kv\",\"allocator\":\"%s\",\"phase\":\"%s\",\"set_per_s\":%d,\"rss_kb\":%d,\"usable_kb\":%d,\"ratio\":%.3f,\"drop_rss_kb\":%d,\"wait_rss_kb\":%d%s,\"runs\":%d}\n", a, ph, M[3], M[4], M[5], M[6], M[7], M[8], lat ? sprintf(",\"max_set_ms\":%.3f", M[9]) : "", n
      else printf "%-10s %5s %10d %9.1f %9.1f %8.3f %9.1f %9.1f%s\n", a, ph, M[3], M[4] / 1024, M[5] / 1024, M[6], M[7] / 1024, M[8] / 1024, lat ? sprintf("  %14.3f", M[9]) : ""
    }
  }
}' "$tmp"
