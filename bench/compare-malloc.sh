#!/bin/sh
# bench/compare-malloc.sh: every workload of `prd-bench malloc` under glibc, jemalloc,
# mimalloc, tcmalloc and libprudence-malloc (LD_PRELOAD), interleaved: in round r the
# allocators run in an order rotated by r, each workload in a fresh process.  Medians of the
# rounds; ratios are libprudence-malloc over the best of the others (smaller is better).
#
#   bench/compare-malloc.sh [--quick] [--json] [--rounds N] [--scale X] [--build DIR]
#     --quick   under a minute: 3 rounds, workloads at their base size (default: 5 rounds,
#               three times the base size, a few minutes)
#     --scale X the workloads at X times their base size (tests/tools/bench_progress.sh runs
#               them tiny)
#     --json    one JSON line per workload and allocator, then per workload, then the summary
#               {"bench":"malloc","summary":true,"geomean_time_vs_best":T,
#                "geomean_rss_vs_best":R,"deferred_time_vs_best":D,"threads_time_vs_best":H,
#                "bigloop_time_vs_best":B,"bigmix_time_vs_best":X,
#                "alternate_time_vs_best":L,...}
#   T and R: geometric means over random, larson, prodcons, realloc; D: the deferred workload
#   (prd_call_rcu(free) for every allocator; prd_free_deferred for ours once it exists);
#   H: the threads workload (thread churn: short-lived threads that allocate a little);
#   B: the bigloop workload (blocks of 5 - 25 MiB), apart because it measures the big-block
#   path alone; X: the bigmix workload (threads churning blocks of up to 300,000 B among small
#   ones), apart because it measures the heap arena's bound on free pages; L: the alternate
#   workload (two sizes taking turns), apart because it measures what a class keeps between
#   its turns.
#   Allocators whose library is absent are skipped and named on stderr.  On a terminal,
#   stderr shows progress (bench/common.sh), except with --json.
set -eu
. "$(dirname "$0")/common.sh"
rounds=5 scale=3 json=0 build=build
while [ $# -gt 0 ]; do
  case $1 in
    --quick) scale=1; rounds=3 ;;
    --json) json=1 ;;
    --rounds) rounds=$2; shift ;;
    --scale) scale=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--quick] [--json] [--rounds N] [--scale X] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
peers compare-malloc "$build" jemalloc mimalloc tcmalloc
workloads="random larson prodcons realloc deferred threads bigloop bigmix alternate"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
nalloc=$(echo $names | wc -w)
progress_init compare-malloc $json
steps=$((rounds * $(echo $workloads | wc -w) * nalloc)) step=0
r=0
while [ $r -lt "$rounds" ]; do
  for w in $workloads; do
    i=0
    while [ $i -lt "$nalloc" ]; do
      pick $i $r
      step=$((step + 1))
      progress "round $((r + 1)): $w under $n" $step $steps
      line=$(LD_PRELOAD=$pre "$bench" malloc --workload "$w" --json --scale $scale)
      vals=$(echo "$line" | sed -n 's/.*"seconds":\([0-9.]*\),"peak_rss_kb":\([0-9]*\).*/\1 \2/p')
      [ -n "$vals" ] || { echo "compare-malloc: $w under $n printed: $line" >&2; exit 1; }
      echo "$w $n $vals" >> "$tmp"
      i=$((i + 1))
    done
  done
  r=$((r + 1))
done
progress_done
awk -v json=$json -v names="$names" -v workloads="$workloads" "$AWK_MEDIAN"'
{ k = $1 SUBSEP $2; ns[k]++; t[k, ns[k]] = $3; m[k, ns[k]] = $4 }
END {
  na = split(names, A, " "); nw = split(workloads, W, " ")
  for (i = 1; i <= nw; i++) for (j = 1; j <= na; j++) {
    k = W[i] SUBSEP A[j]; n = ns[k]
    for (q = 1; q <= n; q++) { x[q] = t[k, q]; y[q] = m[k, q] }
    T[k] = median(x, n); R[k] = median(y, n)
    if (json) printf "{\"bench\":\"malloc\",\"workload\":\"%s\",\"allocator\":\"%s\",\"seconds\":%.4f,\"peak_rss_kb\":%d,\"runs\":%d}\n", W[i], A[j], T[k], R[k], n
  }
  if (!json) {
    printf "%-10s", "seconds"; for (j = 1; j <= na; j++) printf " %10s", A[j]; printf " %9s %9s\n", "vs best", "rss best"
  }
  lt = 0; lr = 0; lj = 0; nt = 0; D = 0; H = 0; B = 0; X = 0; L = 0
  for (i = 1; i <= nw; i++) {
    bt = -1; br = -1; bn = ""
    for (j = 1; j < na; j++) {
      k = W[i] SUBSEP A[j]
      if (bt < 0 || T[k] < bt) { bt = T[k]; bn = A[j] }
      if (br < 0 || R[k] < br) br = R[k]
    }
    o = W[i] SUBSEP "prudence"
    rt = T[o] / bt; rr = R[o] / br
    je = W[i] SUBSEP "jemalloc"; rj = (je in R) ? R[o] / R[je] : 0
    if (W[i] == "deferred") D = rt
    else if (W[i] == "threads") H = rt
    else if (W[i] == "bigloop") B = rt
    else if (W[i] == "bigmix") X = rt
    else if (W[i] == "alternate") L = rt
    else { lt += log(rt); lr += log(rr); if (rj > 0) lj += log(rj); nt++ }
    if (json) printf "{\"bench\":\"malloc\",\"workload\":\"%s\",\"time_vs_best\":%.3f,\"best\":\"%s\",\"rss_vs_best\":%.3f,\"rss_vs_jemalloc\":%.3f}\n", W[i], rt, bn, rr, rj
    else {
      printf "%-10s", W[i]; for (j = 1; j <= na; j++) printf " %10.4f", T[W[i], A[j]]; printf " %9.3f %9.3f\n", rt, rr
    }
  }
  if (!json) {
    printf "%-10s", "peak KiB"; printf "\n"
    for (i = 1; i <= nw; i++) { printf "%-10s", W[i]; for (j = 1; j <= na; j++) printf " %10d", R[W[i], A[j]]; printf "\n" }
  }
  gt = exp(lt / nt); gr = exp(lr / nt); gj = exp(lj / nt)
  if (json) printf "{\"bench\":\"malloc\",\"summary\":true,\"geomean_time_vs_best\":%.3f,\"geomean_rss_vs_best\":%.3f,\"deferred_time_vs_best\":%.3f,\"threads_time_vs_best\":%.3f,\"bigloop_time_vs_best\":%.3f,\"bigmix_time_vs_best\":%.3f,\"alternate_time_vs_best\":%.3f,\"geomean_rss_vs_jemalloc\":%.3f,\"allocators\":\"%s\"}\n", gt, gr, D, H, B, X, L, gj, names
  else printf "prudence over the best of the others: time geomean %.3f, peak RSS geomean %.3f (vs jemalloc %.3f), deferred time %.3f, threads time %.3f, bigloop time %.3f, bigmix time %.3f, alternate time %.3f\n", gt, gr, gj, D, H, B, X, L
}' "$tmp"
