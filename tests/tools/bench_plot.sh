#!/bin/sh
# make bench in miniature: `prd-bench all --json --smoke --out DIR` must write JSON lines for
# every benchmark, and bench/plot.py must turn them into PNGs (one function per kind).
# prd-test-labels: bench no-asan no-tsan
# usage: bench_plot.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/prd-bench" all --json --smoke --out "$tmp" 2>"$tmp/stderr" || { cat "$tmp/stderr"; exit 1; }
for f in "$tmp"/*.json; do
  grep -q '^{"bench":' "$f" || { echo "FAIL: $f holds no JSON lines:"; head -3 "$f"; exit 1; }
  if grep -v '^{' "$f" | grep -q .; then echo "FAIL: $f has non-JSON lines"; exit 1; fi
done
echo "ok - prd-bench all --json wrote JSON lines for $(ls "$tmp"/*.json | wc -l) benchmarks"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "FAIL: python3-matplotlib is missing (make deps installs it)"
  exit 1
fi
/usr/bin/python3 "$src/bench/plot.py" "$tmp" >"$tmp/plot.out" 2>&1 || { cat "$tmp/plot.out"; exit 1; }
cat "$tmp/plot.out"
grep -q "no plot for" "$tmp/plot.out" && { echo "FAIL: a benchmark kind has no plot function"; exit 1; }
for kind in vmem slab_pair slab_worst_case; do
  head -c 8 "$tmp/$kind.png" | od -An -c | grep -q 'P   N   G' || { echo "FAIL: $kind.png is not a PNG"; exit 1; }
done
echo "ok - bench/plot.py drew $(ls "$tmp"/*.png | wc -l) PNGs"
