#!/bin/sh
# prd-bench deferred's baselines of RCU programs as they are written: the batch mode (a
# per-thread array, one synchronize per full array, then free) and --readers on every
# grace-period source this build has.  Each smoke run must measure every mode with the readers
# running (a reader that finds a freed object fails the run), report grace periods per second,
# and end with the summary keys that compare Prudence with batch; compare-deferred.sh must end
# with the best-batch keys.  A source named by PRUDENCE_OPTIONS other than --source must fail.
# prd-test-labels: bench no-asan no-tsan
# usage: bench_deferred_batch.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
bench=$build/bin/prd-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() {   # FILE PATTERN
  if grep -qE "$2" "$tmp/$1"; then echo "ok - $1 has '$2'"
  else fail "$1 lacks '$2':"; cat "$tmp/$1"; fi
}

sources=builtin
[ -f "$build/lib/libprudence-urcu.so" ] && sources="builtin urcu-memb urcu-qsbr"
for s in $sources; do
  if ! "$bench" deferred --smoke --json --readers 1 --source "$s" > "$tmp/$s" 2> "$tmp/$s.err"
  then
    fail "prd-bench deferred --smoke --readers 1 --source $s"; cat "$tmp/$s" "$tmp/$s.err"
    continue
  fi
  for m in prudence oblivious malloc batch; do
    for z in 64 4096; do
      expect "$s" "\"mode\":\"$m\",\"size\":$z,\"threads\":[0-9]+,\"readers\":1,\"source\":\"$s\",\"batch\":4096,.*\"gp_s\":[0-9]+,\"reader_sections_s\":[0-9]+,\"reader_errors\":0,"
    done
  done
  if [ "$s" = urcu-memb ]; then expect "$s" '"mode":"urcu","size":64'; fi
  expect "$s" '^\{"bench":"deferred","summary":true,"readers":1,"min_ratio_vs_batch":[0-9.]+,"rss_ratio_vs_batch":[0-9.]+,"rss_ratio_vs_batch_4096":[0-9.]+,"min_ratio_vs_oblivious":[0-9.]+,"ratio_vs_oblivious_4096":[0-9.]+,"min_ratio_vs_malloc_callrcu":[0-9.]+,"prd_malloc_min_ratio_vs_batch":[0-9.]+,"prd_malloc_rss_ratio_vs_batch":[0-9.]+\}$'
  # the batch ratios were computed (a missing batch or prudence point leaves them 0)
  if grep -q '"min_ratio_vs_batch":0.000' "$tmp/$s"; then fail "$s: no batch ratio"; fi
done

# a batch size that is not a multiple of the pairs: the last partial array is freed too
"$bench" deferred --smoke --json --modes batch --batch 7 > "$tmp/b7" || fail "--batch 7"
expect b7 '"mode":"batch","size":4096,.*"batch":7,'

# the environment's source and --source disagree: refused, never measured on the wrong one
if PRUDENCE_OPTIONS=rcu=urcu-qsbr "$bench" deferred --smoke --modes batch > /dev/null \
     2> "$tmp/env"; then
  fail "PRUDENCE_OPTIONS=rcu=urcu-qsbr with --source builtin was not refused"
else
  expect env 'PRUDENCE_OPTIONS names another grace-period source than --source builtin'
fi

sh "$src/bench/compare-deferred.sh" --rounds 1 --pairs 2000 --sizes 64,4096 --readers 1 \
  --our-modes prudence,oblivious,prd-malloc --bench "$bench" --json > "$tmp/cmp" 2> /dev/null ||
  fail "compare-deferred.sh --readers 1"
expect cmp '"readers": 1, "min_ratio_vs_best_external": [0-9.]+, "min_ratio_vs_best_batch": [0-9.]+, "rss_ratio_vs_best_batch": [0-9.]+, "rss_ratio_vs_best_batch_4096": [0-9.]+, "prd_malloc_min_ratio_vs_best_batch": [0-9.]+, "prd_malloc_rss_ratio_vs_best_batch": [0-9.]+\}$'
if grep -q '"min_ratio_vs_best_batch": 0[,}]' "$tmp/cmp"; then fail "compare: no batch ratio"; fi
if grep -q '"prd_malloc_min_ratio_vs_best_batch": 0[,}]' "$tmp/cmp"; then
  fail "compare: no prd-malloc ratio"
fi

[ $fails = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "ok - batch mode, readers on every source and the summaries"
