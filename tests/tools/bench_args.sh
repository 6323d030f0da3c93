#!/bin/sh
# prd-bench's numeric arguments are parsed strictly: a value that is missing, not a number,
# partly a number or out of range is a usage error that names the argument and the value,
# exit status 2, before any work (atoi took "abc" for 0, and then the default); a good value
# is used.
# prd-test-labels: bench
# usage: bench_args.sh SOURCE_DIR BUILD_DIR
set -u
bench=$2/bin/prd-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# refused ARGS MESSAGE: prd-bench ARGS ends with status 2, MESSAGE on stderr, nothing on stdout
refused() {
  timeout -k 5 30 $bench $1 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc = 2 ] && grep -qF -- "$2" "$tmp/err" && [ ! -s "$tmp/out" ]; then
    echo "ok - $1: $2"
  else
    echo "FAIL: prd-bench $1: status $rc (want 2), stderr:"; cat "$tmp/err"
    echo "stdout:"; head -3 "$tmp/out"; echo "(want '$2' on stderr, nothing on stdout)"
    fails=$((fails + 1))
  fi
}

refused "vmem --rounds abc" "prd-bench vmem: --rounds 'abc' is not a whole number from 1 to 64"
refused "vmem --rounds -5" "prd-bench vmem: --rounds '-5' is not a whole number from 1 to 64"
refused "vmem --rounds 0" "--rounds '0' is not"
refused "vmem --rounds 65" "--rounds '65' is not"
refused "vmem --rounds 3x" "--rounds '3x' is not"
refused "vmem --rounds" "prd-bench vmem: --rounds needs a value"
refused "slab --smoke --rounds" "prd-bench slab: --rounds needs a value"
refused "cache --threads abc" "prd-bench cache: --threads 'abc' is not a whole number from 1 to"
refused "cache --size 0" "prd-bench cache: --size '0' is not"
refused "cache --iters" "prd-bench cache: --iters needs a value"
refused "decay --mib -1" "prd-bench decay: --mib '-1' is not"
refused "decay --wait-ms x" "prd-bench decay: --wait-ms 'x' is not"
refused "kv --keys 5" "prd-bench kv: --keys '5' is not a whole number of at least 10"
refused "malloc --scale abc" "prd-bench malloc: --scale 'abc' is not a number above 0"
refused "malloc --scale nan" "prd-bench malloc: --scale 'nan' is not"
refused "deferred --pairs 1e6" "prd-bench deferred: --pairs '1e6' is not"
refused "deferred --readers -1" "prd-bench deferred: --readers '-1' is not"
refused "deferred --sizes 64,-8" "prd-bench deferred: --sizes '64,-8' is not a list of sizes"
refused "deferred --threads" "prd-bench deferred: --threads needs a value"
refused "endurance --seconds 0" "prd-bench endurance: --seconds '0' is not a number above 0"
refused "endurance --threads" "prd-bench endurance: --threads needs a value"
refused "rcuhash --updates 0" "prd-bench rcuhash: --updates '0' is not a whole number from 1 to 100"
refused "threads --runs abc" "prd-bench threads: --runs 'abc' is not"
refused "threads --seconds inf" "prd-bench threads: --seconds 'inf' is not"
refused "threads --threads 1,x" "prd-bench threads: --threads '1,x' is not a list of thread counts"
refused "threads --threads" "prd-bench threads: --threads needs a value"
# an option that takes a word or a list, given none: the same usage error (it said "unknown
# argument" of the option itself)
refused "threads --workloads" "prd-bench threads: --workloads needs a value"
refused "threads --allocators" "prd-bench threads: --allocators needs a value"
refused "threads --prudence-lib" "prd-bench threads: --prudence-lib needs a value"
refused "cache --mode" "prd-bench cache: --mode needs a value"
refused "kv --phase" "prd-bench kv: --phase needs a value"
refused "malloc --workload" "prd-bench malloc: --workload needs a value"
refused "all --out" "prd-bench all: --out needs a value"
# a blank, a sign, hexadecimal or an exponent before or inside the digits: strtol and strtod
# alone took them
refused "vmem --rounds +2" "prd-bench vmem: --rounds '+2' is not"
refused "deferred --sizes +8" "prd-bench deferred: --sizes '+8' is not a list of sizes"
refused "threads --threads 1,+2" "prd-bench threads: --threads '1,+2' is not"
refused "threads --threads 1," "prd-bench threads: --threads '1,' is not"
refused "endurance --seconds 0x1p-3" "prd-bench endurance: --seconds '0x1p-3' is not"
refused "endurance --seconds 1e-1" "prd-bench endurance: --seconds '1e-1' is not"

for arg in "--rounds= 2" "--sizes=8, 16" "--seconds= 0.1"; do   # a blank inside one argument
  opt=${arg%%=*}; val=${arg#*=}
  case $opt in --rounds) b=vmem ;; --sizes) b=deferred ;; *) b=rcuhash ;; esac
  timeout -k 5 30 $bench $b $opt "$val" >"$tmp/out" 2>"$tmp/err"
  if [ $? = 2 ] && grep -qF -- "$opt '$val' is not" "$tmp/err"; then echo "ok - $b $opt '$val'"
  else echo "FAIL: $b $opt '$val':"; cat "$tmp/err"; fails=$((fails + 1)); fi
done

# a good value is the one used
timeout -k 5 60 $bench vmem --smoke --rounds 2 >"$tmp/out" 2>"$tmp/err"
if grep -qF "(median of 2 rounds)" "$tmp/out"; then echo "ok - vmem --rounds 2: 2 rounds"
else echo "FAIL: vmem --smoke --rounds 2:"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1)); fi

[ $fails = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "ok - every bad numeric argument refused, naming it"
