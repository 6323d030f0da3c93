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
# Each benchmark runs once, as JSON; the tables are printed from that JSON by bench/plot.py
# --table, from the same figures (medians of the rounds) that its PNGs plot.
echo "== micro benchmark (seed 001 §5.2, Fig. 6)"
$B deferred --json --sizes 64,512,4096 --pairs 1000000 --rounds 3 > out/deferred.json
/usr/bin/python3 bench/plot.py --table out/deferred.json | tee out/deferred.txt
echo
echo "== endurance (seed 001 §3.5/§5.5, Fig. 3)"
$B endurance --json --seconds 5 > out/endurance.json
/usr/bin/python3 bench/plot.py --table out/endurance.json | tee out/endurance.txt
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 bench/plot.py out/deferred.json out/endurance.json -o out
else
  echo "(no python3-matplotlib: PNGs skipped)"
fi
