# The interface that the README, CI and every issue use.  CMake does the work.
#   make        Release build into build/ (build/lib, build/bin)
#   make test   installs missing Debian packages (as root), then Debug + ctest, the Debug
#               suite again under LD_PRELOAD of libprudence-malloc, ASan+UBSan, TSan, and a
#               clang build; non-zero exit on any failure
#   make demo   the project's main job on its default, as a readable table
#   make bench  the full benchmark set, JSON and PNGs (bench/plot.py) under out/
#   make torture SECONDS=600   both tortures for as long as asked, each: rcu_torture
#               (TORTURE_ARGS="--source urcu-qsbr --retire synchronize" picks what it tortures)
#               and alloc_torture (ALLOC_TORTURE_ARGS="--race-delay 64" widens its races; the
#               delays need a Debug build: docs/testing.md)
#   make fuzz SECONDS=600      the op-sequence fuzzer (libFuzzer, ASan+UBSan, build-fuzz/) from
#               the seed corpus tests/fuzz/corpus; new inputs go to build-fuzz/corpus, crashes
#               to build-fuzz/crashes/ (FUZZ_ARGS adds libFuzzer flags, e.g. -jobs=2)
#   make fuzz-replay FILE=path runs one input (or a directory of them) again, same build
#   make install PREFIX=/usr/local   headers, libraries, prudence.pc, CMake package config

NPROC   ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE   ?= cmake
CTEST   ?= ctest
CC      ?= cc
SECONDS ?= 300
TORTURE_ARGS ?=
ALLOC_TORTURE_ARGS ?=
FUZZ_ARGS ?=
# libFuzzer: bounded memory and input size, a hang is a failure, statistics at the end
FUZZ_FLAGS = -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=4096 -timeout=60 \
             -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/
PREFIX  ?= /usr/local
# ctest parallelism: tests are multi-threaded themselves, two at a time is plenty
CTEST_J ?= 2

.PHONY: all release debug asan tsan clang test test-debug test-asan test-tsan test-clang \
        test-preload test-fuzz demo bench torture fuzz fuzz-build fuzz-replay deps install clean

all: release

deps:
	@./scripts/install-deps.sh

define configure
	@$(CMAKE) -S . -B $(1) -DCMAKE_BUILD_TYPE=$(2) $(3) >/dev/null
	@$(CMAKE) --build $(1) -j$(NPROC)
endef

release:
	$(call configure,build,Release,)

debug:
	$(call configure,build-debug,Debug,)

asan:
	$(call configure,build-asan,Debug,-DPRD_SANITIZE=address$(,)undefined)

tsan:
	$(call configure,build-tsan,Debug,-DPRD_SANITIZE=thread)

clang:
	@if command -v clang >/dev/null 2>&1; then \
	  $(CMAKE) -S . -B build-clang -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null && \
	  $(CMAKE) --build build-clang -j$(NPROC); \
	else echo "clang not installed: skipping the clang build"; fi

, := ,

test-debug: debug
	@echo "== Debug build (gcc): every test"
	$(CTEST) --test-dir build-debug --output-on-failure -j$(CTEST_J)

test-asan: asan
	@echo "== ASan+UBSan build"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(CTEST) --test-dir build-asan --output-on-failure -j$(CTEST_J) -LE 'no-asan|bench'

test-tsan: tsan
	@echo "== TSan build"
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(CTEST) --test-dir build-tsan --output-on-failure -j$(CTEST_J) -LE 'no-tsan|bench'

# Self-hosting: the Debug suite again with every program's malloc (ctest's too) replaced by
# libprudence-malloc.so; the preload label (real programs) already ran in test-debug.  Label
# no-preload: a test whose environment variables the preloaded copy of the library would act
# on as well (say why beside the label).
test-preload: debug
	@echo "== Debug suite under LD_PRELOAD=libprudence-malloc.so"
	LD_PRELOAD=$(CURDIR)/build-debug/lib/libprudence-malloc.so \
	  $(CTEST) --test-dir build-debug --output-on-failure -j$(CTEST_J) -LE 'preload|bench|install|no-preload'

# The fuzzer for about a minute (make test).  Needs clang and libFuzzer's runtime
# (libclang-rt-dev); skipped with a message where they are missing.  The corpus replay in
# ctest (fuzz_corpus) runs in every build regardless.
test-fuzz:
	@if ./scripts/have-libfuzzer.sh; then \
	  echo "== libFuzzer op-sequence fuzzer, 60 s"; \
	  $(MAKE) --no-print-directory -s fuzz SECONDS=60; \
	else echo "== test-fuzz: skipped: clang or libFuzzer's runtime (libclang-rt-dev) is missing"; fi

test-clang: clang
	@if [ -d build-clang ]; then echo "== Debug build (clang): unit tests"; \
	  $(CTEST) --test-dir build-clang --output-on-failure -j$(CTEST_J) -L 'unit|example'; fi

test: deps
	@$(MAKE) --no-print-directory -s test-debug
	@$(MAKE) --no-print-directory -s test-preload
	@$(MAKE) --no-print-directory -s test-asan
	@$(MAKE) --no-print-directory -s test-tsan
	@$(MAKE) --no-print-directory -s test-clang
	@$(MAKE) --no-print-directory -s test-fuzz
	@echo "== make test: all passed"

demo: deps release
	@./scripts/demo.sh

bench: release
	@mkdir -p out
	./build/bin/prd-bench all --json --out out
	@if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then /usr/bin/python3 bench/plot.py out; \
	else echo "bench: python3-matplotlib not installed: no PNGs (make deps installs it)"; fi

torture: release
	./build/bin/rcu_torture --seconds $(SECONDS) $(TORTURE_ARGS)
	./build/bin/alloc_torture --seconds $(SECONDS) $(ALLOC_TORTURE_ARGS)

fuzz-build:
	@./scripts/have-libfuzzer.sh || { echo "fuzz: clang with libFuzzer is needed (make deps)"; exit 1; }
	@$(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DPRD_FUZZ=ON >/dev/null
	@$(CMAKE) --build build-fuzz -j$(NPROC) --target fuzz_ops fuzz_ops_replay

# A failure prints the input's file under build-fuzz/crashes/ and the step that failed;
# make fuzz-replay FILE=that-file runs it again.
fuzz: fuzz-build
	@mkdir -p build-fuzz/corpus build-fuzz/crashes
	./build-fuzz/bin/fuzz_ops build-fuzz/corpus tests/fuzz/corpus -max_total_time=$(SECONDS) \
	  $(FUZZ_FLAGS) $(FUZZ_ARGS)

fuzz-replay: fuzz-build
	@test -n "$(FILE)" || { echo "usage: make fuzz-replay FILE=path"; exit 2; }
	./build-fuzz/bin/fuzz_ops_replay $(FILE)

install: release
	$(CMAKE) --install build --prefix $(PREFIX)

clean:
	rm -rf build build-debug build-asan build-tsan build-clang build-fuzz out
