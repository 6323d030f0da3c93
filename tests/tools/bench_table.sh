#!/bin/sh
# make demo's tables come from the data its PNGs plot: prd-bench deferred runs once (JSON),
# and bench/plot.py --table prints the medians of those rounds, the same figures
# (deferred_figures) that plot_deferred draws.  Guards the defect where demo ran the
# benchmark twice, once for the printed table and once for the PNG, so the two disagreed;
# and checks that the table's Fig. 8 churns are counted for the call_rcu baseline too (they
# counted only Prudence's own refills and flushes, so the baseline always showed 0).
# prd-test-labels: bench no-asan no-tsan
# usage: bench_table.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -c '\$B deferred' "$src/scripts/demo.sh" | grep -qx 1 ||
  { echo "FAIL: scripts/demo.sh runs the deferred benchmark more than once"; exit 1; }
"$build/bin/prd-bench" deferred --json --sizes 64,4096 --pairs 20000 --rounds 3 --threads 2 \
  --modes prudence,oblivious >"$tmp/d.json" 2>"$tmp/stderr" || { cat "$tmp/stderr"; exit 1; }
/usr/bin/python3 "$src/bench/plot.py" --table "$tmp/d.json" >"$tmp/table.txt"
cat "$tmp/table.txt"
# the medians, computed here from the JSON on their own, must be the table's figures
/usr/bin/python3 - "$tmp/d.json" "$tmp/table.txt" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"mode"' in l]
table = open(sys.argv[2]).read().split("\n")
def median(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
fail = 0
for size in (64, 4096):
    row = next(l for l in table if l.split()[:1] == [str(size)] and "." in l and "/" not in l
               and "oc_hit_pct" not in l)
    cells = row.split()[1:]
    for k, mode in enumerate(("prudence", "oblivious")):
        want = "%.2f" % (median([o["pairs_s"] for o in runs
                                 if o["mode"] == mode and o["size"] == size]) / 1e6)
        if cells[k] != want:
            print("FAIL: size %d %s: table %s, JSON median %s" % (size, mode, cells[k], want))
            fail = 1
    obl = [o for o in runs if o["mode"] == "oblivious" and o["size"] == size]
    if any("slab_refills" not in o or o["slab_refills"] == 0 for o in obl):
        print("FAIL: size %d: the call_rcu baseline's refills from the slab layer are not "
              "counted" % size)
        fail = 1
sys.exit(fail)
PY
echo "ok - the table is the medians of the JSON the plots read"
