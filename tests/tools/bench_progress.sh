#!/bin/sh
# Long-running benchmark work shows progress on a terminal and stays quiet otherwise: each
# bench/compare-*.sh script and prd-bench, run tiny under script(1) (which gives them a
# terminal), must print "[name] what (i/n) elapsed" on stderr; the same with --json, or with
# stderr going to a file, must not.
# prd-test-labels: bench no-asan no-tsan
# usage: bench_progress.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v script >/dev/null || { echo "FAIL: script(1) is missing (util-linux)"; exit 1; }
bench=$build/bin/prd-bench
fails=0

# on_tty NAME CMD: runs CMD with a terminal for stdout and stderr; its output in $tmp/NAME
on_tty() {
  script -qec "$2" /dev/null > "$tmp/$1" 2>&1 || { cat "$tmp/$1"; echo "FAIL: $2"; exit 1; }
}
expect() {   # FILE PATTERN
  if grep -qE "$2" "$tmp/$1"; then echo "ok - $1 shows '$2'"
  else echo "FAIL: $1 lacks '$2':"; cat "$tmp/$1"; fails=$((fails + 1)); fi
}
expect_not() {
  if grep -qF "$2" "$tmp/$1"; then echo "FAIL: $1 shows '$2':"; cat "$tmp/$1"; fails=$((fails + 1))
  else echo "ok - $1 has no '$2'"; fi
}

cache="sh $src/bench/compare-cache.sh --rounds 1 --iters 20000 --bench $bench"
on_tty cache_tty "$cache"
expect cache_tty '\[compare-cache\] round 1: [a-z]+ \(1/[0-9]+\) [0-9]+s'
expect cache_tty 'ratio \(theirs/ours\)'
on_tty cache_file "$cache 2>$tmp/cache_err"
expect_not cache_err '[compare-cache]'

deferred="sh $src/bench/compare-deferred.sh --rounds 1 --pairs 2000 --sizes 64 --bench $bench"
on_tty deferred_tty "$deferred"
expect deferred_tty '\[compare-deferred\] round 1: [a-z]+ \(2/[0-9]+\) [0-9]+s'
on_tty deferred_json "$deferred --json"
expect deferred_json 'min_ratio_vs_best_external'
expect_not deferred_json '[compare-deferred]'

if [ -f "$build/lib/libprudence-malloc.so" ]; then
  malloc="sh $src/bench/compare-malloc.sh --rounds 1 --scale 0.01 --build $build"
  on_tty malloc_tty "$malloc"
  expect malloc_tty '\[compare-malloc\] round 1: random under [a-z]+ \(1/[0-9]+\) [0-9]+s'
  on_tty malloc_json "$malloc --json"
  expect malloc_json '"summary":true'
  expect_not malloc_json '[compare-malloc]'
fi

on_tty prd_tty "$bench vmem --smoke"
expect prd_tty '\[vmem\] [a-z ]+ \([0-9]+/[0-9]+\) [0-9.]+s'
on_tty prd_json "$bench vmem --smoke --json"
expect_not prd_json '[vmem]'

[ $fails = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "ok - progress on a terminal, none with --json or into a file"
