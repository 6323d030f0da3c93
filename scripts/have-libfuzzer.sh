#!/bin/sh
# Exits 0 when clang can link a libFuzzer program with ASan+UBSan (the op-sequence fuzzer's
# build, make fuzz), else 1.  Debian: clang and libclang-rt-dev (make deps installs both).
command -v clang >/dev/null 2>&1 || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
  > "$dir/t.c"
clang -fsanitize=fuzzer,address,undefined "$dir/t.c" -o "$dir/t" >/dev/null 2>&1
