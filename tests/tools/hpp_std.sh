#!/bin/sh
# hpp_std.sh SOURCE_DIR BUILD_DIR: include/prudence.hpp needs C++17.  Under -std=c++11 and
# -std=c++14 its #error is the one error, naming the standard it needs (not a list of
# errors from inside the header); under -std=c++17 and -std=c++20 it compiles without a
# warning.  With this build's C++ compiler.
# prd-test-labels: unit
set -u
src=$1
build=$2
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cxx=${cxx:-c++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '#include <prudence.hpp>' > "$tmp/use.cpp"
fails=0

for std in c++11 c++14; do
  if "$cxx" -std=$std -fsyntax-only -I"$src/include" "$tmp/use.cpp" >"$tmp/err" 2>&1; then
    echo "FAIL: -std=$std compiled"; fails=$((fails + 1))
  elif [ "$(grep -c 'error:' "$tmp/err")" = 1 ] &&
       grep -q 'prudence.hpp needs C++17 or later' "$tmp/err"; then
    echo "ok - -std=$std: the one error says C++17"
  else
    echo "FAIL: -std=$std, want one error naming C++17:"; cat "$tmp/err"; fails=$((fails + 1))
  fi
done
for std in c++17 c++20; do
  if "$cxx" -std=$std -fsyntax-only -Wall -Wextra -Werror -I"$src/include" "$tmp/use.cpp" \
       >"$tmp/err" 2>&1; then
    echo "ok - -std=$std compiles"
  else
    echo "FAIL: -std=$std:"; cat "$tmp/err"; fails=$((fails + 1))
  fi
done
[ $fails = 0 ] || { echo "$fails checks failed"; exit 1; }
