# bench/common.sh: what the bench/compare-*.sh scripts share (sourced by each).
#
# The allocators they compare with, through LD_PRELOAD: Debian's libjemalloc2,
# libmimalloc2.0 and libtcmalloc-minimal4 (make deps installs them).  JE, MI, TC: the library
# path, or empty when it is not installed (the scripts skip that allocator and say so).
bench_libdir=/usr/lib/x86_64-linux-gnu
find_lib() {   # the first of the file names that exists in bench_libdir, or ""
  for f in "$@"; do
    if [ -e "$bench_libdir/$f" ]; then echo "$bench_libdir/$f"; return; fi
  done
  echo ""
}
JE=$(find_lib libjemalloc.so.2 libjemalloc.so)
MI=$(find_lib libmimalloc.so.2 libmimalloc.so)
TC=$(find_lib libtcmalloc_minimal.so.4 libtcmalloc.so.4 libtcmalloc.so)

# The allocators a script compares, in the order it runs them: glibc, each named peer that is
# installed (a missing one is skipped and named on stderr), then BUILD's libprudence-malloc.
# Sets bench (BUILD's prd-bench), ours, names and libs ("-" for glibc), one word each; exits
# when BUILD is not built.
#   peers SCRIPT BUILD PEER...     PEER: jemalloc, mimalloc or tcmalloc
peers() {
  peers_script=$1
  bench=$2/bin/prd-bench
  ours=$(cd "$2/lib" 2>/dev/null && pwd)/libprudence-malloc.so
  [ -x "$bench" ] && [ -f "$ours" ] || { echo "build first (make): $bench, $ours" >&2; exit 2; }
  peers_ours=$ours
  shift 2
  names="glibc" libs="-"
  for n in "$@"; do
    case $n in jemalloc) f=$JE ;; mimalloc) f=$MI ;; tcmalloc) f=$TC ;; *) f= ;; esac
    if [ -n "$f" ]; then names="$names $n" libs="$libs $f"
    else echo "$peers_script: $n not installed in $bench_libdir: skipped" >&2; fi
  done
  names="$names prudence" libs="$libs $peers_ours"
}

# The allocator at place I of round R, for the lists peers() made (nalloc: their length):
# the order rotates by the round, so none always runs first.  Sets n (its name) and pre (its
# LD_PRELOAD value, empty for glibc).
#   pick I R
pick() {
  pick_k=$(( ($1 + $2) % nalloc + 1 ))
  n=$(echo $names | cut -d' ' -f$pick_k)
  pre=$(echo $libs | cut -d' ' -f$pick_k)
  if [ "$pre" = - ]; then pre=; fi
}

# The benchmark program: BENCH set to $1 when given (--bench PATH), else to this checkout's
# build/bin/prd-bench (make); exits when it is not there.
find_bench() {
  BENCH=${1:-$(cd "$(dirname "$0")/.." && pwd)/build/bin/prd-bench}
  if [ ! -x "$BENCH" ]; then
    echo "$(basename "$0"): $BENCH not found (run make first)" >&2
    exit 1
  fi
}

# The progress line: "[name] what (i/n) elapsed" on stderr, overwriting one line, the format bench_progress
# (bench/main.c) prints for prd-bench; only when stderr is a terminal and the script is not in
# --json mode, so that output captured in files and pipes stays clean.
#   progress_init NAME JSON    JSON: 1 in --json mode (quiet)
#   progress WHAT I N          step I of N (from 1) is starting
#   progress_done              clears the line
progress_init() {
  progress_name=$1 progress_on=0 progress_t0=$(date +%s)
  if [ -t 2 ] && [ "$2" = 0 ]; then progress_on=1; fi
}
progress() {
  [ "$progress_on" = 1 ] || return 0
  printf '\r[%s] %s (%d/%d) %ds   ' "$progress_name" "$1" "$2" "$3" \
    $(( $(date +%s) - progress_t0 )) >&2
}
progress_done() {
  [ "$progress_on" = 1 ] || return 0
  printf '\r%78s\r' '' >&2
}

# Runs FN once per allocator per round, in pick's rotated order (so that no allocator always
# runs first or last), with $n and $pre set for it and the progress line shown; ARGS go to
# every call.  Sets nalloc.
#   each_run NAME ROUNDS JSON FN [ARGS...]
each_run() {
  er_name=$1 er_rounds=$2 er_json=$3 er_fn=$4
  shift 4
  nalloc=$(echo $names | wc -w)
  progress_init "$er_name" "$er_json"
  er_steps=$((er_rounds * nalloc)) er_step=0 er_r=0
  while [ $er_r -lt "$er_rounds" ]; do
    er_i=0
    while [ $er_i -lt "$nalloc" ]; do
      pick $er_i $er_r
      er_step=$((er_step + 1))
      progress "round $((er_r + 1)): $n" $er_step $er_steps
      "$er_fn" "$@"
      er_i=$((er_i + 1))
    done
    er_r=$((er_r + 1))
  done
  progress_done
}

# The median of arr[1..n] (sorted in place), for the scripts' awk programs: awk "$AWK_MEDIAN ..."
AWK_MEDIAN='
function median(arr, n,   i, j, t) {
  for (i = 2; i <= n; i++) for (j = i; j > 1 && arr[j-1] > arr[j]; j--) { t = arr[j]; arr[j] = arr[j-1]; arr[j-1] = t }
  return n % 2 ? arr[(n+1)/2] : (arr[n/2] + arr[n/2+1]) / 2
}'
