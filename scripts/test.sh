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
corpus=build-fuzz/corpus/gguf
mkdir -p "$corpus" build-fuzz/artifacts
# Seeds: small valid files written by the gguf tests (every value type, many tensor types,
# alignments, v2, real tokenizer metadata). Files found in earlier runs stay in the corpus.
RL_FUZZ_SEED_DIR="$corpus" build/test_gguf --gtest_filter='FuzzSeeds.WriteFuzzSeeds' >/dev/null
if ! build-fuzz/gguf_fuzz -max_total_time=60 -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
    -artifact_prefix=build-fuzz/artifacts/ "$corpus" >build-fuzz/gguf_fuzz.log 2>&1; then
  tail -60 build-fuzz/gguf_fuzz.log
  echo "test.sh: gguf_fuzz found a failing input (saved in build-fuzz/artifacts/)" >&2
  exit 1
fi
tail -1 build-fuzz/gguf_fuzz.log
echo "test.sh: all suites passed"
