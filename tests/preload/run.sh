#!/bin/sh
# Real programs under LD_PRELOAD=libprudence-malloc.so (ctest label "preload").
#   run.sh WHAT LIB SOURCE_DIR BIN_DIR
# Each case runs a real program with the library preloaded and checks its output against
# the same program without it (or a known answer).  Bounded: each takes seconds.
set -eu
what=$1 lib=$2 src=$3 bin=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pre() { LD_PRELOAD="$lib" "$@"; }
case $what in
  python)
    out=$(pre python3 "$src/tests/preload/alloc_heavy.py")
    ref=$(python3 "$src/tests/preload/alloc_heavy.py")
    echo "$out"
    [ "$out" = "$ref" ]
    # the allocator in use is ours: a 17-byte block has the 32-byte class's usable size
    n=$(pre python3 -c 'import ctypes
l = ctypes.CDLL(None)
l.malloc.restype = ctypes.c_void_p
f = l.prd_malloc_usable_size
f.restype = ctypes.c_size_t
print(f(ctypes.c_void_p(l.malloc(17))))')
    [ "$n" = 32 ]
    ;;
  sort)
    awk 'BEGIN { srand(11); for (i = 0; i < 400000; i++) printf "%d %s\n", int(rand() * 1e9), substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26) }' > "$tmp/in"
    pre sort -S 64M "$tmp/in" > "$tmp/a"
    sort -S 64M "$tmp/in" > "$tmp/b"
    cmp "$tmp/a" "$tmp/b"
    pre sort -n --parallel=2 "$tmp/in" > "$tmp/c"
    sort -n --parallel=2 "$tmp/in" > "$tmp/d"
    cmp "$tmp/c" "$tmp/d"
    ;;
  git)
    cd "$tmp"
    export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
    export GIT_CONFIG_NOSYSTEM=1 HOME="$tmp"
    pre git init -q repo
    cd repo
    cp "$src"/src/*.c "$src"/src/*.h .
    pre git add .
    pre git commit -q -m first
    pre git checkout -q -b side
    sed -i 's/a/A/g' vmem.c
    pre git commit -q -am second
    pre git checkout -q -
    pre git merge -q side
    pre git gc -q
    pre git fsck --strict
    [ "$(pre git rev-list --count HEAD)" = 2 ]
    pre git log --stat > /dev/null
    pre git diff HEAD~1 --stat | grep -q vmem.c
    ;;
  gcc)
    pre gcc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -I"$src/include" -I"$src/src" \
      -c "$src/src/vmem.c" -o "$tmp/a.o"
    gcc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -I"$src/include" -I"$src/src" \
      -c "$src/src/vmem.c" -o "$tmp/b.o"
    cmp "$tmp/a.o" "$tmp/b.o"
    ;;
  cxx)
    PRD_EXPECT_PRELOAD=1 pre "$bin/preload_cxx_threads"
    "$bin/preload_cxx_new_handler"
    PRD_EXPECT_PRELOAD=1 pre "$bin/preload_cxx_new_handler"
    ;;
  fork-stdio)
    # fork while another thread runs fflush(NULL) and a third reads long lines (getline's
    # realloc under the stream's lock): the fork handlers' locks come after the C library's
    # stream-list lock, or the three deadlock; timeout(1) turns a deadlock into a failure
    timeout 20 "$bin/preload_fork_stdio"
    LD_PRELOAD="$lib" timeout 20 "$bin/preload_fork_stdio"
    ;;
  example)
    # examples/preload.c: the same answers under glibc and under Prudence; only the
    # preloaded run writes statistics, and they list its blocks in the malloc-N caches
    PRUDENCE_STATS_FILE="$tmp/plain.json" "$bin/preload" > "$tmp/plain"
    [ ! -e "$tmp/plain.json" ]
    PRUDENCE_STATS_FILE="$tmp/snap.json" PRUDENCE_STATS=1 pre "$bin/preload" \
      > "$tmp/pre" 2> "$tmp/table"
    cat "$tmp/pre"
    [ "$(grep -v usable_size "$tmp/plain")" = "$(grep -v usable_size "$tmp/pre")" ]
    /usr/bin/python3 "$bin/prdstat" "$tmp/snap.json" --no-arenas \
      --columns name,buf_size,mag_allocs --sort buf_size --asc > "$tmp/stat"
    cat "$tmp/stat"
    # usable size of 100 bytes = the smallest malloc-N class of at least 100 bytes
    usable=$(sed -n 's/.*malloc(100)) = //p' "$tmp/pre")
    class=$(awk '$1 ~ /^malloc-/ && $2 >= 100 { print $2; exit }' "$tmp/stat")
    echo "usable size $usable, class $class"
    [ -n "$class" ] && [ "$usable" = "$class" ]
    # at least the 4 x 5000 list nodes went through the class caches' fronts
    total=$(awk '$1 ~ /^malloc-/ { s += $3 } END { print s + 0 }' "$tmp/stat")
    echo "malloc-N allocations: $total"
    [ "$total" -ge 20000 ]
    # PRUDENCE_STATS=1: the table at exit, on stderr, with that class's row
    grep -q "^malloc-$class " "$tmp/table"
    ;;
  faults)
    # A failed mapping during malloc's start-up fails that one call (ENOMEM) and the next call
    # tries again; it used to disable malloc for good ("ls: memory exhausted").  Every Nth
    # mapping fails (src/os.c section 4), N from 2 up past the mappings of a start-up, so
    # each of them is the failing one once; ls must list what it lists without the preload.
    ref=$(ls -l "$src/src")
    for n in 2 3 4 5 6 7 8 9 10 11 12; do
      out=$(PRUDENCE_FAULT_MMAP=$n pre ls -l "$src/src") ||
        { echo "ls failed under PRUDENCE_FAULT_MMAP=$n"; exit 1; }
      [ "$out" = "$ref" ] || { echo "ls listed something else under PRUDENCE_FAULT_MMAP=$n"; exit 1; }
      echo "PRUDENCE_FAULT_MMAP=$n: ls ok"
    done
    ;;
  libc-names)
    # tests/preload/libc_names.c: glibc's __libc_* names are the preloaded allocator's too
    "$bin/preload_libc_names"
    pre "$bin/preload_libc_names"
    ;;
  threads)
    # tests/preload/threads.c: the allocator's threads take no signal, do not exist in a
    # single-threaded program, and keep no process alive; each run is bounded, so a process
    # kept alive fails here instead of blocking ctest
    # join: glibc frees a joined thread's TLS inside pthread_join (stack cache off)
    for mode in one-thread exit exit-threads exit-grandchildren fork-exit fork-exit-threads signalfd join; do
      tun=
      [ $mode = join ] && tun=glibc.pthread.stack_cache_size=0
      timeout -k 5 10 env GLIBC_TUNABLES=$tun "$bin/preload_threads" $mode
      echo "glibc $mode: ok"
      if ! timeout -k 5 10 env GLIBC_TUNABLES=$tun PRD_EXPECT_PRELOAD=1 LD_PRELOAD="$lib" "$bin/preload_threads" $mode; then
        echo "preloaded $mode: failed (exit status $?)" >&2
        exit 1
      fi
      echo "preloaded $mode: ok"
    done
    ;;
  *)
    echo "unknown case $what" >&2
    exit 2
    ;;
esac
echo "preload $what: ok"
