#!/bin/sh
# compare-deferred.sh: Prudence against every external allocator with call_rcu(free)
# (issue #6, seed 001 §5.2 Fig. 6).
#
#   bench/compare-deferred.sh [--rounds R] [--pairs N] [--sizes a,b,...] [--bench PATH] [--json]
#
# Each round runs, in a rotating order so that no run always goes first:
#   prd-bench deferred --modes prudence,oblivious           (no preload)
#   prd-bench deferred --modes malloc,urcu                  under glibc (no preload) and under
#                                                           LD_PRELOAD of jemalloc, mimalloc,
#                                                           tcmalloc (skipped when missing)
# ("malloc" = malloc + prd_call_rcu callback that frees; "urcu" = malloc + liburcu's own
# call_rcu(free).)  Every run is itself one round of every size, each mode in its own child
# process.  The table gives, per size, the median pairs/s of each (allocator, mode) over the
# rounds and the ratio prudence / best external.  Summary (last line; with --json the only
# output besides the per-run JSON lines on stderr):
#   {"bench":"deferred-compare","summary":true,"min_ratio_vs_best_external":E}
# On a terminal, stderr shows progress (bench/common.sh), except with --json.
set -eu
. "$(dirname "$0")/common.sh"

ROUNDS=3
PAIRS=1000000
SIZES=8,16,32,64,128,256,512,1024,2048,4096
BENCH=""
JSON=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --bench) BENCH="$2"; shift 2 ;;
    --json) JSON=1; shift ;;
    *) echo "usage: $0 [--rounds R] [--pairs N] [--sizes a,b,...] [--bench PATH] [--json]" >&2
       exit 2 ;;
  esac
done
find_bench "$BENCH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# run NAME PRELOAD MODES: one run, its JSON lines tagged with the allocator's name
run() {
  name=$1 pre=$2 modes=$3
  if [ -n "$pre" ]; then
    LD_PRELOAD="$pre" "$BENCH" deferred --json --rounds 1 --pairs "$PAIRS" --sizes "$SIZES" \
      --modes "$modes" 2>/dev/null | sed "s/^{/{\"allocator\":\"$name\",/" >> "$tmp/all.json"
  else
    "$BENCH" deferred --json --rounds 1 --pairs "$PAIRS" --sizes "$SIZES" --modes "$modes" \
      2>/dev/null | sed "s/^{/{\"allocator\":\"$name\",/" >> "$tmp/all.json"
  fi
}
: > "$tmp/all.json"
progress_init compare-deferred $JSON
present=2
for f in "$JE" "$MI" "$TC"; do [ -z "$f" ] || present=$((present + 1)); done
steps=$((ROUNDS * present)) step=0
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  set -- ours glibc jemalloc mimalloc tcmalloc
  k=0
  while [ "$k" -lt $((r % 5)) ]; do   # rotate the order every round
    first=$1; shift; set -- "$@" "$first"; k=$((k + 1))
  done
  for a in "$@"; do
    case "$a" in
      jemalloc) [ -n "$JE" ] || continue ;;
      mimalloc) [ -n "$MI" ] || continue ;;
      tcmalloc) [ -n "$TC" ] || continue ;;
    esac
    step=$((step + 1))
    progress "round $((r + 1)): $a" $step $steps
    case "$a" in
      ours) run prudence "" prudence,oblivious ;;
      glibc) run glibc "" malloc,urcu ;;
      jemalloc) [ -n "$JE" ] && run jemalloc "$JE" malloc,urcu ;;
      mimalloc) [ -n "$MI" ] && run mimalloc "$MI" malloc,urcu ;;
      tcmalloc) [ -n "$TC" ] && run tcmalloc "$TC" malloc,urcu ;;
    esac
  done
  r=$((r + 1))
done
progress_done
[ "$JSON" = 1 ] && grep -v '"summary"' "$tmp/all.json" >&2
/usr/bin/python3 - "$tmp/all.json" "$JSON" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"summary"' not in l]
quiet = sys.argv[2] == "1"
med = lambda v: sorted(v)[len(v) // 2] if v else 0
keys = {}
for o in rows:
    name = "prudence" if o["mode"] in ("prudence", "oblivious") else o["allocator"]
    keys.setdefault((o["size"], name, o["mode"]), []).append(o["pairs_s"])
sizes = sorted({k[0] for k in keys})
cols = sorted({(k[1], k[2]) for k in keys if k[2] != "prudence"})
if not quiet:
    print("Mpairs/s, median of the rounds; ratio = prudence / best external (call_rcu(free))")
    print("%6s %10s" % ("size", "prudence") + "".join(" %18s" % ("%s/%s" % c) for c in cols)
          + " %8s" % "ratio")
worst = None
for z in sizes:
    ours = med(keys.get((z, "prudence", "prudence"), []))
    ext = [med(keys[(z, a, m)]) for (a, m) in cols if (z, a, m) in keys and m != "oblivious"]
    best = max(ext) if ext else 0
    ratio = ours / best if best else 0
    worst = ratio if worst is None else min(worst, ratio)
    if not quiet:
        print("%6d %10.2f" % (z, ours / 1e6) + "".join(
            " %18.2f" % (med(keys.get((z,) + c, [])) / 1e6) for c in cols) + " %8.2f" % ratio)
print(json.dumps({"bench": "deferred-compare", "summary": True,
                  "min_ratio_vs_best_external": round(worst or 0, 3)}))
PY
