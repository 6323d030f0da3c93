#!/bin/sh
# bench/compare-hardened.sh: what option hardened costs.  `prd-bench malloc` (the prudence
# column: seconds, lower is better) and `prd-bench cache` (pairs per second, higher is
# better) with PRUDENCE_OPTIONS=hardened=0 and =1, interleaved: round r runs off then on when
# r is odd, on then off when it is even, each in a fresh process.  Prints per row the median
# of each side and the median (and range) of the paired on/off ratios.
#
#   bench/compare-hardened.sh [--rounds N] [--build DIR]     default: 5 rounds, build/
set -eu
rounds=5 build=build
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
bench=$build/bin/prd-bench
[ -x "$bench" ] || { echo "compare-hardened: no $bench (make release)" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
r=1
while [ $r -le "$rounds" ]; do
  order="0 1"
  [ $((r % 2)) = 0 ] && order="1 0"
  for h in $order; do
    echo "round $r: hardened=$h" >&2
    PRUDENCE_OPTIONS=hardened=$h "$bench" malloc --rounds 1 2>&1 |
      awk -v r=$r -v h=$h '/^  (random|larson|prodcons|realloc|deferred|threads|bigloop) / {
        print "malloc", $1, r, h, $3 }' >> "$tmp"
    PRUDENCE_OPTIONS=hardened=$h "$bench" cache --rounds 1 2>&1 |
      awk -v r=$r -v h=$h '/^ +[12] +[0-9]+ +[0-9]+ +[0-9]+$/ {
        print "cache", "magazine-" $1 "t", r, h, $2; print "cache", "slab-" $1 "t", r, h, $3;
        print "cache", "malloc-" $1 "t", r, h, $4 }' >> "$tmp"
  done
  r=$((r + 1))
done
python3 - "$tmp" <<'PY'
import sys, statistics as st, collections
v = collections.defaultdict(dict)
order = []
for line in open(sys.argv[1]):
    b, k, r, h, x = line.split()
    if (b, k) not in order:
        order.append((b, k))
    v[(b, k, h)][int(r)] = float(x)
print("%-7s %-12s %12s %12s %8s %11s" % ("bench", "row", "off median", "on median", "on/off", "range"))
for b, k in order:
    off, on = v[(b, k, "0")], v[(b, k, "1")]
    rs = sorted(set(off) & set(on))
    pr = [on[r] / off[r] for r in rs]
    print("%-7s %-12s %12.4g %12.4g %8.3f %5.2f-%5.2f  (n=%d; %s)" % (
        b, k, st.median(off.values()), st.median(on.values()), st.median(pr), min(pr), max(pr),
        len(rs), "seconds" if b == "malloc" else "pairs/s"))
PY
