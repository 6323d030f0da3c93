#!/bin/sh
# check-layers.sh [BUILD_DIR]: every call between the files of src/ runs down the floors below,
# except the edges declared here (and justified in docs/design.md §1).
#
# It reads the object files of a configured build (default build/, any flavour) with nm: a file
# calls another when it has an undefined function symbol (a prd name) that the other defines.
# Calls inside one file and inline functions of headers (they compile into their caller) are
# not edges, nor are calls through a function pointer that an upper layer registered (the
# hooks each lower file's theory statement names).  Data that floors read (the option values,
# the grace-period counter, the link anchors of fork.c and stats.c) is listed apart by -v, and
# is not a call.  Exit status 1 names each call that runs up or sideways; ctest runs it
# (tests/tools/layers.sh).
#
# FLOORS lists the files bottom up, one floor a line; files on one floor do not call each other.
set -eu

BUILD=${1:-build}
case "${2:-}" in -v) VERBOSE=1 ;; *) VERBOSE=0 ;; esac

FLOORS='
report
options
os
race thread pagemap
maint rcu
call_rcu vmem
debug
slab
magazine
latent
defer
cache
malloc
override stats
fork
'

# Declared edges that run up: caller callee (each justified in docs/design.md §1).
DECLARED='
vmem cache
'

OBJS=$(ls "$BUILD"/CMakeFiles/prudence_obj.dir/src/*.o \
          "$BUILD"/CMakeFiles/prudence_malloc_obj.dir/src/override.c.o 2>/dev/null || true)
if [ -z "$OBJS" ]; then
  echo "check-layers: no object files under $BUILD (configure and build it first)" >&2
  exit 2
fi

status=0
report=$(for o in $OBJS; do
  f=$(basename "$o" .c.o)
  nm "$o" | awk -v f="$f" '$NF !~ /^prd/ { next } $1 == "U" { print "U", f, $2 } NF == 3 { print $2, f, $3 }'
done | awk -v floors="$FLOORS" -v declared="$DECLARED" -v verbose="$VERBOSE" '
BEGIN {
  n = split(floors, lines, "\n"); fl = 0
  for (i = 1; i <= n; i++) {
    if (lines[i] ~ /^[ \t]*$/) continue
    fl++; m = split(lines[i], names, " ")
    for (j = 1; j <= m; j++) floor[names[j]] = fl
  }
  n = split(declared, lines, "\n")
  for (i = 1; i <= n; i++) if (split(lines[i], p, " ") == 2) ok[p[1] " " p[2]] = 1
}
$1 == "U" { use[$2 " " $3] = 1; next }
$1 == "T" || $1 == "W" { fn[$3] = $2; next }
$1 ~ /^[DBRV]$/ { dat[$3] = $2 }
END {
  bad = 0
  for (k in use) {
    split(k, p, " "); caller = p[1]; sym = p[2]
    if (sym in fn) callee = fn[sym]; else if (sym in dat) callee = dat[sym]; else continue
    if (callee == caller) continue
    if (!(caller in floor) || !(callee in floor)) {
      printf "check-layers: %s or %s is on no floor: add it to FLOORS\n", caller, callee
      bad = 1; continue
    }
    edge = caller " " callee
    if (sym in dat) { if (verbose) printf "data  %s -> %s: %s\n", caller, callee, sym; continue }
    if (floor[callee] < floor[caller]) { if (verbose) printf "down  %s -> %s: %s\n", caller, callee, sym; continue }
    if (edge in ok) { if (verbose) printf "declared  %s -> %s: %s\n", caller, callee, sym; continue }
    printf "%s  %s.c -> %s.c: %s\n", floor[callee] == floor[caller] ? "sideways" : "UP", caller, callee, sym
    bad = 1
  }
  exit bad
}') || status=$?
[ -n "$report" ] && printf '%s\n' "$report" | sort
exit $status
