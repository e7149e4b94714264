#!/usr/bin/env bash
# A/B of a kernel change on the GPU machine: the full check of the working tree (scripts/device.sh:
# build, self-test, unit tests, parity, the 80B decode benchmark and parity), then the same
# decode benchmark with a baseline build in which the files in .perf_base/ (the originals of the
# changed src/cuda files) replace their counterparts, alternating new and baseline runs.
#   mkdir .perf_base && git show HEAD:src/cuda/gemv.cu >.perf_base/gemv.cu   (etc., here)
#   bash scripts/device_perf.sh        (carry .deps and .devdata as for device.sh,
#                                       and .perf_base where git ignores it)
# AB_VAR=NAME AB_VALUES="0 1" also runs the new build once per value of that environment variable
# (a switch under test), so one call compares the baseline with each variant.
# .perf_base/ is untracked, so it travels with the working tree; delete it afterwards.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/base_build.sh
OUT=${OUT:-/tmp/rl-out}
mkdir -p "$OUT"
start_base_build
OUT=$OUT/check bash scripts/device.sh env build selftest unit parity synth
for x in ${AB_VAR:+${AB_VALUES:-0 1}}; do  # the self-test under each setting of the switch
  env "$AB_VAR=$x" build/redlite selftest 2>&1 | grep -E "FAIL|selftest:" | head -20 |
    sed "s/^/$AB_VAR=$x /" | tee -a "$OUT/selftest-variants.txt"
done
wait $BASE_PID  # no build running during the benchmarks
tail -3 /tmp/base-build.log
DECODE_POSITIONS=4K,128K OUT=$OUT/decode bash scripts/device.sh decode80 parity80
source /tmp/rl-work/env.sh
M80=/tmp/rl-work/m80.gguf
echo "================ A/B (bench decode, f32 KV, 32 tokens) ================"
VARIANTS=new
[ -n "${AB_VAR:-}" ] && VARIANTS=$(for x in ${AB_VALUES:-0 1}; do printf 'new:%s=%s ' "$AB_VAR" "$x"; done)
for i in 1 2; do
  for v in $VARIANTS base; do
    bin=build/redlite; [ $v = base ] && bin=$BASE/build/redlite
    setting=; [[ $v == new:* ]] && setting=${v#new:}
    env $setting $bin bench decode -m "$M80" --positions 4K,128K --kv-types f32 --tokens 32 2>&1 |
      grep -E "^[0-9]" | sed "s/^/$v run $i: /"
  done
done | tee "$OUT/ab.txt"
$BASE/build/redlite bench decode -m "$M80" --positions 4K --kv-types f32 --tokens 32 --breakdown \
  >"$OUT/base-breakdown.txt" 2>&1
build/redlite bench decode -m "$M80" --positions 4K --kv-types f32 --tokens 32 --breakdown \
  >"$OUT/new-breakdown.txt" 2>&1
