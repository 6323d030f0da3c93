#!/bin/sh
# Installs the build into a temporary prefix, then builds and runs a consumer program and
# every example against the installed copy: once through pkg-config, once through CMake's
# find_package(prudence).  examples/preload.c is also linked with libprudence-malloc
# (pkg-config prudence-malloc, CMake prudence::malloc).  Examples marked
# "prd-test-needs: urcu" are built only with liburcu, and linked with prudence-urcu; with
# liburcu, tests/install/consumer_urcu.c checks that the adapter stays linked.
# usage: run.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name prudence.pc | head -n 1)
[ -n "$pc" ] || { echo "install: prudence.pc not installed"; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
[ -f "$tmp/prefix/include/prudence.h" ] || { echo "install: prudence.h not installed"; exit 1; }

# The header's release is the package's, and every versioned library file's name starts with
# its SONAME (ldconfig and packagers make the SONAME's link from the file name)
hv=$(awk '/^#define PRD_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END{print v}' \
     "$tmp/prefix/include/prudence.h")
pv=$(PKG_CONFIG_PATH="$pcdir" pkg-config --modversion prudence)
[ "$hv" = "$pv" ] || { echo "install: prudence.h says $hv, prudence.pc says $pv"; exit 1; }
echo "ok - prudence.h and prudence.pc both say $pv"
for f in "$libdir"/libprudence*.so.*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  so=$(readelf -d "$f" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
  case $(basename "$f") in
    "$so".*) echo "ok - $(basename "$f") has the SONAME $so" ;;
    *) echo "install: $(basename "$f") has the SONAME '$so', which its name does not start with"; exit 1 ;;
  esac
done

have_urcu=0
pkg-config --exists liburcu-memb liburcu-qsbr 2>/dev/null && have_urcu=1

programs="$src/tests/install/consumer.c"
for f in "$src"/examples/*.c; do
  [ -f "$f" ] || continue
  if grep -q "prd-test-needs: urcu" "$f" && [ $have_urcu = 0 ]; then continue; fi
  programs="$programs $f"
done

echo "== pkg-config"
export PKG_CONFIG_PATH="$pcdir"
for f in $programs; do
  name=$(basename "$f" .c)
  extra=""
  grep -q "prd-test-needs: urcu" "$f" && extra="$(pkg-config --libs prudence-urcu)"
  # shellcheck disable=SC2046,SC2086
  cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags prudence) "$f" -o "$tmp/$name" \
     $(pkg-config --libs prudence) $extra -pthread -lm
  LD_LIBRARY_PATH="$libdir" "$tmp/$name" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; echo "FAIL: $name (pkg-config)"; exit 1; }
  echo "ok - $name built with pkg-config and ran"
done

# The liburcu adapter linked the documented way keeps rcu=urcu-memb honoured under
# --as-needed (the default of Debian's and Ubuntu's toolchains, given explicitly so the test
# means the same everywhere), though the program refers to none of its symbols; linked with a
# bare -lprudence-urcu the linker drops it, and then the option must end the process with a
# message, not fall back to the built-in RCU (tests/install/consumer_urcu.c).
run_urcu() {   # NAME BINARY: the option honoured
  PRUDENCE_OPTIONS=rcu=urcu-memb LD_LIBRARY_PATH="$libdir" "$2" >"$tmp/$1.out" 2>&1 ||
    { cat "$tmp/$1.out"; echo "FAIL: $1: rcu=urcu-memb not honoured"; exit 1; }
  grep -q "source=urcu-memb waited_for_reader=1" "$tmp/$1.out" || { cat "$tmp/$1.out"; exit 1; }
  echo "ok - $1: linked with --as-needed, rcu=urcu-memb honoured"
}
if [ $have_urcu = 1 ]; then
  pkg-config --exists prudence-urcu || { echo "install: prudence-urcu.pc not installed"; exit 1; }
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror -Wl,--as-needed $(pkg-config --cflags prudence-urcu) \
     "$src/tests/install/consumer_urcu.c" -o "$tmp/consumer_urcu" $(pkg-config --libs prudence-urcu) -pthread
  run_urcu consumer_urcu "$tmp/consumer_urcu"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror -Wl,--as-needed $(pkg-config --cflags prudence liburcu-memb) \
     "$src/tests/install/consumer_urcu.c" -o "$tmp/consumer_urcu_bare" -lprudence-urcu \
     $(pkg-config --libs prudence liburcu-memb) -pthread
  if PRUDENCE_OPTIONS=rcu=urcu-memb LD_LIBRARY_PATH="$libdir" "$tmp/consumer_urcu_bare" \
       >"$tmp/consumer_urcu_bare.out" 2>&1; then
    cat "$tmp/consumer_urcu_bare.out"
    echo "FAIL: consumer_urcu_bare: rcu=urcu-memb without the adapter did not fail"; exit 1
  fi
  grep -q "option rcu=urcu-memb names no grace-period source of this program" \
    "$tmp/consumer_urcu_bare.out" || { cat "$tmp/consumer_urcu_bare.out"; echo "FAIL: no message"; exit 1; }
  echo "ok - consumer_urcu_bare: the adapter dropped by --as-needed, rcu=urcu-memb fails loudly"
fi

# examples/preload.c linked with libprudence-malloc instead of preloading it: the
# statistics snapshot it writes lists the malloc-N caches that served it
check_linked() {   # NAME BINARY
  PRUDENCE_STATS_FILE="$tmp/$1.json" LD_LIBRARY_PATH="$libdir" "$2" >"$tmp/$1.out" 2>&1 ||
    { cat "$tmp/$1.out"; echo "FAIL: $1"; exit 1; }
  grep -q '"name":"malloc-' "$tmp/$1.json" ||
    { echo "FAIL: $1 ran without Prudence's malloc (no malloc-N cache in its snapshot)"; exit 1; }
  echo "ok - $1: examples/preload.c linked with the malloc replacement ran on it"
}
have_malloc=0
pkg-config --exists prudence-malloc && have_malloc=1
if [ $have_malloc = 1 ]; then
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "$src/examples/preload.c" -o "$tmp/preload_linked" \
     $(pkg-config --libs prudence-malloc) -pthread
  check_linked preload_linked "$tmp/preload_linked"
fi

if command -v c++ >/dev/null 2>&1; then
  # shellcheck disable=SC2046
  c++ -std=c++17 -Wall -Wextra -Wshadow -Werror $(pkg-config --cflags prudence) \
      "$src/tests/install/consumer_cpp.cpp" -o "$tmp/consumer_cpp" $(pkg-config --libs prudence) -pthread
  LD_LIBRARY_PATH="$libdir" "$tmp/consumer_cpp" >/dev/null || { echo "FAIL: consumer_cpp"; exit 1; }
  echo "ok - consumer_cpp (prudence.hpp, -Wshadow) built with pkg-config and ran"
fi

echo "== prdstat"
[ -x "$tmp/prefix/bin/prdstat" ] || { echo "install: bin/prdstat not installed"; exit 1; }
if [ -x "$tmp/objcache" ]; then
  PRUDENCE_STATS_FILE="$tmp/objcache.json" LD_LIBRARY_PATH="$libdir" "$tmp/objcache" >/dev/null
  "$tmp/prefix/bin/prdstat" "$tmp/objcache.json" --no-arenas >"$tmp/prdstat.out" 2>&1 || { cat "$tmp/prdstat.out"; echo "FAIL: prdstat"; exit 1; }
  grep -q "^caches:" "$tmp/prdstat.out" || { cat "$tmp/prdstat.out"; echo "FAIL: prdstat output"; exit 1; }
  echo "ok - the installed prdstat read a snapshot of examples/objcache"
fi

echo "== find_package(prudence)"
cmake -S "$src/tests/install" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DPRD_PROGRAMS="$(echo $programs | tr ' ' ';')" \
      -DPRD_MALLOC_PROGRAM="$src/examples/preload.c" \
      -DPRD_URCU_PROGRAM="$([ $have_urcu = 1 ] && echo "$src/tests/install/consumer_urcu.c")" >/dev/null
cmake --build "$tmp/cm" >/dev/null
for f in $programs; do
  name=$(basename "$f" .c)
  LD_LIBRARY_PATH="$libdir" "$tmp/cm/$name" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; echo "FAIL: $name (cmake)"; exit 1; }
  echo "ok - $name built with find_package and ran"
done
if [ $have_malloc = 1 ]; then
  [ -x "$tmp/cm/preload_linked" ] || { echo "FAIL: prudence::malloc is not in the package"; exit 1; }
  check_linked preload_linked_cmake "$tmp/cm/preload_linked"
fi
if [ $have_urcu = 1 ]; then
  [ -x "$tmp/cm/consumer_urcu" ] || { echo "FAIL: prudence::urcu is not in the package"; exit 1; }
  run_urcu consumer_urcu_cmake "$tmp/cm/consumer_urcu"
fi
