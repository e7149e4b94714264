#!/usr/bin/env bash
# Decode speed of other type mixes than the ANCHORS one, and an A/B of a change on them, on the
# GPU machine: the full check of the working tree (scripts/device.sh), then 12-layer synthetic
# 80B models (redlite mkmodel --preset 80b-a3b --layers 12) with the experts and dense types of
# MIXES, each benchmarked with the new build and a baseline build, alternating (as
# scripts/device_perf.sh; the baseline is scripts/base_build.sh's: the files in .perf_base/
# replace their counterparts in src/cuda, NAME.test.txt replaces tests/cuda/NAME).
# The mix "80b" is the full ANCHORS model that the decode80 stage writes.
#   MIXES="iq2_xxs:q5_K q5_K:q5_K" bash scripts/device_mix.sh   (carry .deps, .devdata and, if
#   git ignores it, .perf_base)
# CHECK_STAGES and PERF_STAGES choose scripts/device.sh's stages before and after the baseline
# build is waited for (defaults: the full check; kernel decode80 parity80).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/base_build.sh
OUT=${OUT:-/tmp/rl-out}
MIXES=${MIXES:-iq2_xxs:q5_K q5_K:q5_K}
start_base_build
OUT=$OUT/check bash scripts/device.sh ${CHECK_STAGES:-env build selftest unit parity synth} \
  >/dev/null 2>&1
grep -E "selftest:|PASSED|FAIL|ok$|rc=[1-9]" "$OUT/check/summary.txt" | grep -v "rc=0"
wait $BASE_PID  # no build running during the benchmarks
tail -2 /tmp/base-build.log
OUT=$OUT/perf bash scripts/device.sh ${PERF_STAGES:-kernel decode80 parity80} >/dev/null 2>&1
grep -vE "^ *$|rc=0" "$OUT/perf/summary.txt" | tail -45
source /tmp/rl-work/env.sh
for mix in $MIXES; do
  experts=${mix%%:*} dense=${mix##*:}
  f=/tmp/m-$experts-$dense.gguf
  if [ "$mix" = 80b ]; then
    f=/tmp/rl-work/m80.gguf
  else
    timeout 60 build/redlite mkmodel --preset 80b-a3b --layers 12 --experts "$experts" \
      --dense "$dense" -o "$f" >/dev/null 2>&1 || echo "mkmodel $mix failed"
  fi
  for i in 1 2; do
    for b in new base; do
      bin=build/redlite; [ $b = base ] && bin=$BASE/build/redlite
      timeout 90 $bin bench decode -m "$f" --positions 4K,128K --kv-types f32 --tokens 32 2>&1 |
        grep -E "^[0-9]" | sed "s/^/$experts|$dense $b run $i: /"
    done
  done
  timeout 90 build/redlite bench decode -m "$f" --positions 4K --kv-types f32 --tokens 16 \
    --breakdown 2>&1 | grep -E "experts|projection|router|shared|head" | grep -v "^ *kernel"
  [ "$mix" = 80b ] || rm -f "$f"
done 2>&1 | tee "$OUT/mix.txt"
