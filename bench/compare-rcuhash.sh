#!/bin/sh
# compare-rcuhash.sh: the RCU hash table (prd-bench rcuhash) with Prudence's deferral against
# batch free under every external allocator: deletes that read-copy-update programs make.
#
#   bench/compare-rcuhash.sh [--rounds R] [--sizes a,b,...] [--seconds S] [--threads N]
#                            [--readers R] [--updates PCT] [--batch B] [--bench PATH] [--json]
#
# Each round runs, per size, in a rotating order so that no run always goes first:
#   prd-bench rcuhash --modes prudence       (no preload: prd_cache_free_deferred)
#   prd-bench rcuhash --modes batch          under glibc (no preload) and under LD_PRELOAD of
#                                            jemalloc, mimalloc, tcmalloc (skipped when
#                                            missing) and the build's libprudence-malloc
# (batch: a per-thread array of --batch retired entries, one synchronize of the built-in
# source per full array, then free them all.)  --threads, --readers, --updates, --batch and
# --seconds go to every run (prd-bench rcuhash says what they do).  The table gives, per
# size, the median over the rounds of the updating threads' operations/s for each, the best
# of glibc, jemalloc, mimalloc and tcmalloc + batch free, and prudence's ratios to it
# (operations/s, peak RSS).  Summary (last line; with --json the only output besides the
# per-run JSON lines on stderr):
#   {"bench":"rcuhash-compare","summary":true,"min_ratio_vs_best_batch":B,
#    "rss_ratio_vs_best_batch":M}
# B: min over sizes of prudence's operations/s over the best batch free's; M: max over sizes
# of prudence's peak RSS over that one's.
set -eu
. "$(dirname "$0")/common.sh"

ROUNDS=3
SIZES=64
BENCH=""
JSON=0
EXTRA=""   # passed to every run
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --seconds|--threads|--readers|--updates|--batch) EXTRA="$EXTRA $1 $2"; shift 2 ;;
    --bench) BENCH="$2"; shift 2 ;;
    --json) JSON=1; shift ;;
    *) echo "usage: $0 [--rounds R] [--sizes a,b,...] [--seconds S] [--threads N]" \
            "[--readers R] [--updates PCT] [--batch B] [--bench PATH] [--json]" >&2
       exit 2 ;;
  esac
done
find_bench "$BENCH"
# the allocators (common.sh): glibc, each peer installed, the build's libprudence-malloc
# ("prudence"), and first Prudence's deferral itself ("ours", no preload)
peers "$0" "$(dirname "$(dirname "$BENCH")")" jemalloc mimalloc tcmalloc
names="ours $names" libs="- $libs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# one_run: every size under allocator $n (LD_PRELOAD $pre), its JSON lines tagged with the
# allocator's name; ours is the prudence mode, the others batch free
one_run() {
  if [ "$n" = ours ]; then tag=prudence mode=prudence; else tag=$n mode=batch; fi
  [ "$n" = prudence ] && tag=prudence-malloc
  for z in $(echo "$SIZES" | tr ',' ' '); do
    # shellcheck disable=SC2086 # EXTRA: words on purpose
    env ${pre:+LD_PRELOAD="$pre"} "$BENCH" rcuhash --json --rounds 1 --modes "$mode" \
      --size "$z" $EXTRA 2>/dev/null | grep -v '"summary"' |
      sed "s/^{/{\"allocator\":\"$tag\",/" >> "$tmp/all.json"
  done
}
: > "$tmp/all.json"
each_run compare-rcuhash "$ROUNDS" "$JSON" one_run
[ "$JSON" = 1 ] && cat "$tmp/all.json" >&2
/usr/bin/python3 - "$tmp/all.json" "$JSON" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
quiet = sys.argv[2] == "1"
med = lambda v: sorted(v)[len(v) // 2] if v else 0
ops, rss = {}, {}
for o in rows:
    k = (o["size"], o["allocator"], o["mode"])
    ops.setdefault(k, []).append(o["ops_s"])
    rss.setdefault(k, []).append(o["peak_rss_kb"])
sizes = sorted({k[0] for k in ops})
cols = [c for c in ("glibc", "jemalloc", "mimalloc", "tcmalloc", "prudence-malloc")
        if any(k[1] == c for k in ops)]
peers = ("glibc", "jemalloc", "mimalloc", "tcmalloc")   # "best allocator + batch": these
if not quiet:
    print("updating threads' Mops/s, median of the rounds (peak RSS MB); best batch = best of "
          "%s + batch free, prudence's ratios to it (ops/s, peak RSS)" % ", ".join(peers))
    print("%6s %16s" % ("size", "prudence") + "".join(" %16s" % ("%s/batch" % c) for c in cols)
          + " %18s %7s %7s" % ("best batch", "/batch", "RSS/b"))
bworst = brss = None
for z in sizes:
    ours, ours_rss = med(ops.get((z, "prudence", "prudence"), [])), \
        med(rss.get((z, "prudence", "prudence"), []))
    bat = [(med(ops[(z, a, "batch")]), a) for a in peers if (z, a, "batch") in ops]
    bbest, bname = max(bat) if bat else (0, "-")
    bratio = ours / bbest if bbest else 0
    brr = ours_rss / med(rss[(z, bname, "batch")]) if bbest else 0
    if bbest:
        bworst = bratio if bworst is None else min(bworst, bratio)
        brss = brr if brss is None else max(brss, brr)
    if not quiet:
        cell = lambda v, m: "%9.2f (%4.1f)" % (v / 1e6, m / 1024)
        print("%6d %16s" % (z, cell(ours, ours_rss)) + "".join(
            " %16s" % cell(med(ops.get((z, c, "batch"), [])), med(rss.get((z, c, "batch"), [])))
            for c in cols) + " %18s %7.2f %7.2f" % ("%.2f %s" % (bbest / 1e6, bname), bratio, brr))
print(json.dumps({"bench": "rcuhash-compare", "summary": True,
                  "min_ratio_vs_best_batch": round(bworst or 0, 3),
                  "rss_ratio_vs_best_batch": round(brss or 0, 3)}))
PY
