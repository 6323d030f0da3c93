#!/bin/sh
# Installs the Debian packages the project uses, when run as root and one is missing.
# Needed to build: cmake, a C compiler, pkg-config.  Used when present: liburcu-dev
# (libprudence-urcu, the urcu grace-period sources and baselines), libjemalloc-dev,
# libmimalloc-dev, libgoogle-perftools-dev (malloc baselines), python3-matplotlib (plots),
# valgrind (memcheck test), clang (the clang build) and libclang-rt-dev (the runtime of the
# default clang's sanitizers and libFuzzer, libclang-rt-14-dev on Debian 12: make fuzz).
# Not root, or no apt-get: says what is missing and goes on.
set -u
PKGS="cmake gcc g++ make pkg-config liburcu-dev libjemalloc-dev libmimalloc-dev \
libgoogle-perftools-dev python3-matplotlib valgrind clang libclang-rt-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 || {
    echo "install-deps: apt-get install failed; trying one at a time"
    for p in $missing; do apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 || echo "install-deps: could not install $p"; done
  }
else
  echo "install-deps: missing:$missing (not root or no apt-get; optional parts are skipped)"
fi
exit 0
