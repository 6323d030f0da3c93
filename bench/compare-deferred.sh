#!/bin/sh
# compare-deferred.sh: Prudence against every external allocator with call_rcu(free) and
# with batch free (seed 001 §5.2 Fig. 6).
#
#   bench/compare-deferred.sh [--rounds R] [--pairs N] [--sizes a,b,...] [--readers R]
#                             [--source builtin|urcu-memb|urcu-qsbr] [--batch B]
#                             [--threads N] [--our-modes M,...] [--peer-modes M,...]
#                             [--bench PATH] [--json]
#
# Each round runs, in a rotating order so that no run always goes first:
#   prd-bench deferred --modes prudence,oblivious           (no preload)
#   prd-bench deferred --modes malloc,urcu,batch            under glibc (no preload) and under
#                                                           LD_PRELOAD of jemalloc, mimalloc,
#                                                           tcmalloc (skipped when missing)
#   prd-bench deferred --modes batch                        under LD_PRELOAD of the build's
#                                                           libprudence-malloc (when built)
# ("malloc" = malloc + prd_call_rcu callback that frees; "urcu" = malloc + liburcu's own
# call_rcu(free); "batch" = malloc + one synchronize per --batch retired pointers, then free
# them all.)  --our-modes and --peer-modes replace the first two lists (e.g. prudence and
# batch alone, for the comparison with batch free).  --readers, --source, --batch and --threads go to every run (prd-bench deferred
# says what they do).  Every run is itself one round of every size, each mode in its own
# child process.  The table gives, per size, the median pairs/s of each (allocator, mode)
# over the rounds, the ratio prudence / best external call_rcu, the best external allocator +
# batch and the ratios to it (pairs/s, peak RSS); "prudence-malloc/batch" is batch under
# Prudence's malloc.  Summary (last line; with --json the only output besides the per-run
# JSON lines on stderr):
#   {"bench":"deferred-compare","summary":true,"readers":R,"min_ratio_vs_best_external":E,
#    "min_ratio_vs_best_batch":B,"rss_ratio_vs_best_batch":M,"rss_ratio_vs_best_batch_4096":F,
#    "prd_malloc_min_ratio_vs_best_batch":P,"prd_malloc_rss_ratio_vs_best_batch":Q}
# B: min over sizes of prudence's pairs/s over the best of glibc, jemalloc, mimalloc and
# tcmalloc + batch at that size; M: max over sizes of prudence's peak RSS over that one's; F:
# M at 4096 B (0 when 4096 is not among the sizes); P and Q: B and M for the prd-malloc mode
# (prd_free_deferred; 0 unless --our-modes names it).  E: prudence over the best external
# call_rcu(free), the modes of our run left out.
# On a terminal, stderr shows progress (bench/common.sh), except with --json.
set -eu
. "$(dirname "$0")/common.sh"

ROUNDS=3
PAIRS=1000000
SIZES=8,16,32,64,128,256,512,1024,2048,4096
BENCH=""
JSON=0
READERS=0
EXTRA=""   # --readers/--source/--batch/--threads, passed to every run
OURS=prudence,oblivious
PEERS=malloc,urcu,batch
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --readers) READERS="$2"; EXTRA="$EXTRA $1 $2"; shift 2 ;;
    --source|--batch|--threads) EXTRA="$EXTRA $1 $2"; shift 2 ;;
    --our-modes) OURS="$2"; shift 2 ;;
    --peer-modes) PEERS="$2"; shift 2 ;;
    --bench) BENCH="$2"; shift 2 ;;
    --json) JSON=1; shift ;;
    *) echo "usage: $0 [--rounds R] [--pairs N] [--sizes a,b,...] [--readers R]" \
            "[--source S] [--batch B] [--threads N] [--our-modes M,...] [--peer-modes M,...]" \
            "[--bench PATH] [--json]" >&2
       exit 2 ;;
  esac
done
find_bench "$BENCH"
# Prudence's malloc, for batch under it: the build's library beside BENCH (bin/../lib)
PRM=$(cd "$(dirname "$BENCH")/../lib" 2>/dev/null && pwd)/libprudence-malloc.so
[ -f "$PRM" ] || PRM=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# run NAME PRELOAD MODES: one run, its JSON lines tagged with the allocator's name
run() {
  name=$1 pre=$2 modes=$3
  # shellcheck disable=SC2086 # EXTRA: words on purpose
  if [ -n "$pre" ]; then
    LD_PRELOAD="$pre" "$BENCH" deferred --json --rounds 1 --pairs "$PAIRS" --sizes "$SIZES" \
      --modes "$modes" $EXTRA 2>/dev/null | sed "s/^{/{\"allocator\":\"$name\",/" \
      >> "$tmp/all.json"
  else
    "$BENCH" deferred --json --rounds 1 --pairs "$PAIRS" --sizes "$SIZES" --modes "$modes" \
      $EXTRA 2>/dev/null | sed "s/^{/{\"allocator\":\"$name\",/" >> "$tmp/all.json"
  fi
}
: > "$tmp/all.json"
progress_init compare-deferred $JSON
present=2
for f in "$JE" "$MI" "$TC" "$PRM"; do [ -z "$f" ] || present=$((present + 1)); done
steps=$((ROUNDS * present)) step=0
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  set -- ours glibc jemalloc mimalloc tcmalloc prudence-malloc
  k=0
  while [ "$k" -lt $((r % 6)) ]; do   # rotate the order every round
    first=$1; shift; set -- "$@" "$first"; k=$((k + 1))
  done
  for a in "$@"; do
    case "$a" in
      jemalloc) [ -n "$JE" ] || continue ;;
      mimalloc) [ -n "$MI" ] || continue ;;
      tcmalloc) [ -n "$TC" ] || continue ;;
      prudence-malloc) [ -n "$PRM" ] || continue ;;
    esac
    step=$((step + 1))
    progress "round $((r + 1)): $a" $step $steps
    case "$a" in
      ours) run prudence "" "$OURS" ;;
      glibc) run glibc "" "$PEERS" ;;
      jemalloc) run jemalloc "$JE" "$PEERS" ;;
      mimalloc) run mimalloc "$MI" "$PEERS" ;;
      tcmalloc) run tcmalloc "$TC" "$PEERS" ;;
      prudence-malloc) run prudence-malloc "$PRM" batch ;;
    esac
  done
  r=$((r + 1))
done
progress_done
[ "$JSON" = 1 ] && grep -v '"summary"' "$tmp/all.json" >&2
/usr/bin/python3 - "$tmp/all.json" "$JSON" "$READERS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"summary"' not in l]
quiet = sys.argv[2] == "1"
med = lambda v: sorted(v)[len(v) // 2] if v else 0
keys, rss = {}, {}
for o in rows:
    name = "prudence" if o["mode"] in ("prudence", "oblivious") else o["allocator"]
    keys.setdefault((o["size"], name, o["mode"]), []).append(o["pairs_s"])
    rss.setdefault((o["size"], name, o["mode"]), []).append(o["peak_rss_kb"])
sizes = sorted({k[0] for k in keys})
cols = sorted({(k[1], k[2]) for k in keys if k[2] != "prudence"})
peers = ("glibc", "jemalloc", "mimalloc", "tcmalloc")   # "best allocator + batch": these
if not quiet:
    print("Mpairs/s, median of the rounds; ratio = prudence / best external (call_rcu(free)); "
          "best batch = best of %s + batch free, its ratios prudence / it (pairs/s, peak RSS)"
          % ", ".join(peers))
    print("%6s %10s" % ("size", "prudence") + "".join(" %22s" % ("%s/%s" % c) for c in cols)
          + " %8s %16s %8s %8s" % ("ratio", "best batch", "/batch", "RSS/b"))
worst = None
bworst = brss = brss4096 = pworst = prss = None
for z in sizes:
    ours = med(keys.get((z, "prudence", "prudence"), []))
    ours_rss = med(rss.get((z, "prudence", "prudence"), []))
    ext = [med(keys[(z, a, m)]) for (a, m) in cols
           if (z, a, m) in keys and a != "prudence" and m != "batch"]
    best = max(ext) if ext else 0
    ratio = ours / best if best else 0
    worst = ratio if worst is None else min(worst, ratio)
    bat = [(med(keys[(z, a, "batch")]), a) for a in peers if (z, a, "batch") in keys]
    bbest, bname = max(bat) if bat else (0, "-")
    bratio = ours / bbest if bbest else 0
    brr = ours_rss / med(rss[(z, bname, "batch")]) if bbest else 0
    pm = med(keys.get((z, "prudence", "prd-malloc"), []))
    if bbest and pm:
        pm_rr = med(rss[(z, "prudence", "prd-malloc")]) / med(rss[(z, bname, "batch")])
        pworst = pm / bbest if pworst is None else min(pworst, pm / bbest)
        prss = pm_rr if prss is None else max(prss, pm_rr)
    if bbest:
        bworst = bratio if bworst is None else min(bworst, bratio)
        brss = brr if brss is None else max(brss, brr)
        if z == 4096:
            brss4096 = brr
    if not quiet:
        print("%6d %10.2f" % (z, ours / 1e6) + "".join(
            " %22.2f" % (med(keys.get((z,) + c, [])) / 1e6) for c in cols) + " %8.2f %16s %8.2f %8.2f"
            % (ratio, "%.2f %s" % (bbest / 1e6, bname), bratio, brr))
if not quiet:
    print("peak RSS MB, median of the rounds:")
    print("%6s %10s" % ("size", "prudence") + "".join(" %22s" % ("%s/%s" % c) for c in cols))
    for z in sizes:
        print("%6d %10.1f" % (z, med(rss.get((z, "prudence", "prudence"), [])) / 1024) + "".join(
            " %22.1f" % (med(rss.get((z,) + c, [])) / 1024) for c in cols))
print(json.dumps({"bench": "deferred-compare", "summary": True, "readers": int(sys.argv[3]),
                  "min_ratio_vs_best_external": round(worst or 0, 3),
                  "min_ratio_vs_best_batch": round(bworst or 0, 3),
                  "rss_ratio_vs_best_batch": round(brss or 0, 3),
                  "rss_ratio_vs_best_batch_4096": round(brss4096 or 0, 3),
                  "prd_malloc_min_ratio_vs_best_batch": round(pworst or 0, 3),
                  "prd_malloc_rss_ratio_vs_best_batch": round(prss or 0, 3)}))
PY
