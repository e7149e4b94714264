#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: the release build's tests, the same tests
# under AddressSanitizer + UndefinedBehaviorSanitizer, and a short libFuzzer run of the readers.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/build.sh
echo "== tests (release build)"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

echo "== tests under ASan + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_SANITIZE=ON -DRL_CUDA=OFF >/dev/null
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 1800 -LE slow

echo "== fuzzing the GGUF reader (short run)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRL_FUZZ=ON -DRL_TESTS=OFF -DRL_CUDA=OFF >/dev/null
cmake --build build-fuzz --target gguf_fuzz
mkdir -p build-fuzz/corpus
build/test_gguf --gtest_filter='*WriteFuzzSeeds*' >/dev/null 2>&1 || true
build-fuzz/gguf_fuzz -max_total_time=60 -rss_limit_mb=2048 -max_len=65536 build-fuzz/corpus 2>&1 | tail -3
echo "test.sh: all suites passed"
