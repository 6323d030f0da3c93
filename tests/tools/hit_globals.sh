#!/bin/sh
# hit_globals.sh SOURCE_DIR BUILD_DIR: the globals that every hit path reads (magazine.h
# prd__mag_ro: the free mark's secret, the plain, annotation and membarrier modes) lie in
# cache lines that no other object of the library shares.  Guards against them sharing a line
# with globals that are written while programs run (the thread registry's lists and counts at
# every thread start and exit, the pre-flush request flag), which moved that line away from
# every core that runs a hit path each time.  Read from the symbol table of the built
# libraries (nm -n -S): objects whose bytes meet a line of the hit-path globals, other than
# those globals themselves, fail the test.
# prd-test-labels: unit
build=$2
command -v nm >/dev/null 2>&1 || { echo "nm not installed: skipped"; exit 77; }
libs=
for l in "$build/lib/libprudence.so" "$build/lib/libprudence-malloc.so"; do
  [ -f "$l" ] && libs="$libs $l"
done
[ -n "$libs" ] || { echo "no shared library in $build/lib: skipped"; exit 77; }
status=0
for lib in $libs; do
  nm -n -S "$lib" | awk -v lib="$lib" '
    # the hit-path globals: the line-sized object, or (a build before it) the four variables
    function hot(n) {
      return n == "prd__mag_ro" || n == "prd__mark_secret" || n == "prd__mag_plain" ||
             n == "prd__mag_annot" || n == "prd__mag_membarrier"
    }
    # hexadecimal to a number (POSIX awk has no strtonum); exact below 2^53
    function hex(h,   v, i) {
      v = 0
      for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
      return v
    }
    NF == 4 && $3 ~ /^[bBdDrR]$/ {
      a = hex($1); s = hex($2); if (s == 0) s = 1
      n++; addr[n] = a; size[n] = s; name[n] = $4
      if (hot($4)) { for (l = int(a / 64); l <= int((a + s - 1) / 64); l++) line[l] = 1; found = 1 }
    }
    END {
      if (!found) { printf "%s: no hit-path globals found\n", lib; exit 1 }
      bad = 0
      for (i = 1; i <= n; i++) {
        if (hot(name[i])) continue
        for (l = int(addr[i] / 64); l <= int((addr[i] + size[i] - 1) / 64); l++)
          if (l in line) {
            printf "%s: %s (%d bytes at 0x%x) shares a cache line with the hit-path globals\n",
                   lib, name[i], size[i], addr[i]
            bad = 1; break
          }
      }
      if (!bad) printf "%s: the hit-path globals have their lines to themselves\n", lib
      exit bad
    }' || status=1
done
exit $status
