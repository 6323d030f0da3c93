#!/bin/sh
# make demo: the project's main job on its default, as readable tables and PNGs under out/.
# Prudence (issue #6, seed 001 §5): a short micro benchmark (alloc + deferred-free pairs, a few
# sizes, every mode: prudence, oblivious = SLUB + call_rcu, malloc + call_rcu, malloc + liburcu
# call_rcu) and the endurance test (about 20 s: 5 s per mode, RSS every 10 ms), then the plots
# (Fig. 3, Fig. 6 and the metrics of Figs. 7-11) when Debian's matplotlib is there.
set -eu
cd "$(dirname "$0")/.."
mkdir -p out
B=./build/bin/prd-bench
echo "== micro benchmark (seed 001 §5.2, Fig. 6)"
$B deferred --sizes 64,512,4096 --pairs 1000000 --rounds 3 | tee out/deferred.txt
$B deferred --json --sizes 64,512,4096 --pairs 1000000 --rounds 1 > out/deferred.json
echo
echo "== endurance (seed 001 §3.5/§5.5, Fig. 3)"
$B endurance --json --seconds 5 > out/endurance.json
grep -v '"rss_kb"' out/endurance.json || true
/usr/bin/python3 - out/endurance.json <<'PY'
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if "mode" in o:
        print("  %-10s RSS growth %6.3f  peak %7.1f MiB  updates/s %10.0f" % (
            o["mode"], o["rss_growth"], o["peak_rss_kb"] / 1024, o["updates"] / o["seconds"]))
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 bench/plot.py out/deferred.json out/endurance.json -o out
else
  echo "(no python3-matplotlib: PNGs skipped)"
fi
