# bench/progress.sh: the progress line of the bench/compare-*.sh scripts (sourced by each).
# "[name] what (i/n) elapsed" on stderr, overwriting one line, the format bench_progress
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
