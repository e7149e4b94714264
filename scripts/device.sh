#!/usr/bin/env bash
# The one script run on the GPU machine: build, kernel self-test, parity, benchmarks. Full logs
# go to $OUT/logs.tgz, a short table is printed last (and kept in $OUT/summary.txt).
#
#   bash scripts/device.sh [STAGE...]      (default: all stages below, in order)
#
# Stages: env build selftest unit parity synth kernel decode80 nopdl80 parity80 profile insts
#   srccount
#   decode80/parity80 use the full-size synthetic 80b-a3b model, generated in the background
#   right after the build (about 21.5 GB); DECODE_LAYERS=N makes a smaller one (N layers).
# Needs (carried with the call, both git-ignored): .deps (Debian packages, see
# ../shared/device/README.md) and .devdata/shared (the goldens the parity stage reads). In a new
# checkout, here (add /.deps/ and /.devdata/ to .git/info/exclude first):
#   bash ../shared/device/fetch-debs.sh .deps nlohmann-json3-dev libcli11-dev libpcre2-dev \
#     libcpp-httplib-dev libcpp-httplib0.11 libgtest-dev libgmock-dev
#   cp ../shared/device/unpack-debs.sh .deps/
#   mkdir -p .devdata/shared && cp -r ../shared/testdata .devdata/shared/ &&
#     rm -rf .devdata/shared/testdata/tokenizer   # 18 MB; the carry limit is 64 MiB
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rl-out}
WORK=${WORK:-/tmp/rl-work}
LOGS=$WORK/logs  # every log; packed into $OUT/logs.tgz at the end (few files come back)
mkdir -p "$OUT" "$WORK" "$LOGS"
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(env build selftest unit parity synth kernel decode80 parity80)
DECODE_LAYERS=${DECODE_LAYERS:-}
DECODE_POSITIONS=${DECODE_POSITIONS:-4K,32K,64K,128K,256K}
SUMMARY=$OUT/summary.txt
KEEP=(selftest bench-kernel bench-decode)  # logs also copied to $OUT as they are
: >"$SUMMARY"
BIN=build/redlite
TINY=.devdata/shared/testdata/tiny
say() { echo "$*" | tee -a "$SUMMARY"; }
want() { local s; for s in "${STAGES[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
# run NAME TIMEOUT CMD...: logs to $LOGS/NAME.log, notes the status and time in the summary.
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name: $*" >>"$LOGS/$name.log"
  timeout "$limit" "$@" >>"$LOGS/$name.log" 2>&1
  local rc=$?
  say "$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")"
  return $rc
}

if want env; then
  {
    date -u; uname -a; grep PRETTY /etc/os-release; nproc; free -g | head -2; df -h /tmp | tail -1
    g++ --version | head -1; nvcc --version | tail -2; cmake --version | head -1
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,clocks.max.sm,power.limit --format=csv
  } >"$LOGS/env.log" 2>&1
  say "$(grep -m1 -i h200 "$LOGS/env.log" || echo 'no H200 line in nvidia-smi')"
fi

if want build; then
  eval "$(bash .deps/unpack-debs.sh .deps)"
  export LD_LIBRARY_PATH=$DEPS_PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$DEPS_PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS_PREFIX/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$DEPS_PREFIX
  PKGCONF=$(command -v pkg-config || echo "$DEPS_PREFIX/usr/bin/pkgconf")
  # cpp-httplib.pc lists brotli, openssl and zlib as private requirements (static linking
  # only); stand in for the ones this machine has no .pc for.
  mkdir -p "$WORK/pc"
  for pc in libbrotlicommon libbrotlidec libbrotlienc openssl zlib; do
    PKG_CONFIG_PATH=$PKG_CONFIG_PATH "$PKGCONF" --exists $pc 2>/dev/null ||
      printf 'Name: %s\nDescription: stand-in\nVersion: 99\n' $pc >"$WORK/pc/$pc.pc"
  done
  export PKG_CONFIG_PATH=$PKG_CONFIG_PATH:$WORK/pc
  echo "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >"$WORK/env.sh"
  run configure 300 cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DRL_CUDA=ON -DRL_SHARED_DIR="$PWD/.devdata/shared" \
    -DPKG_CONFIG_EXECUTABLE="$PKGCONF" $DEPS_CMAKE_FLAGS
  run build 420 cmake --build build -j16 --target redlite test_cuda || {
    tail -40 "$LOGS/build.log"; cat "$SUMMARY"; exit 1; }
fi
[ -f "$WORK/env.sh" ] && source "$WORK/env.sh"

# The big synthetic model, written while the GPU tests run.
M80=$WORK/m80.gguf
if want decode80 || want parity80 || want insts || want srccount; then
  if [ ! -f "$M80" ]; then
    extra=(); [ -n "$DECODE_LAYERS" ] && extra=(--layers "$DECODE_LAYERS")
    ( t0=$SECONDS; $BIN mkmodel --preset 80b-a3b "${extra[@]}" -o "$M80.part" >"$LOGS/mkmodel80.log" 2>&1 \
        && mv "$M80.part" "$M80"; echo "mkmodel80 took $((SECONDS - t0))s" >>"$LOGS/mkmodel80.log" ) &
    GEN_PID=$!
  fi
fi

if want selftest; then
  run selftest 420 $BIN selftest
  grep -E "FAIL|selftest:" "$LOGS/selftest.log" | head -20 | tee -a "$SUMMARY"
  # The float decoders of the formats that default to the tensor cores.
  for t in q4_K q5_K iq2_xxs iq3_xxs q2_K q3_K q6_K q8_0 iq4_xs q4_0 iq4_nl iq2_xs; do
    run "selftest-float-$t" 300 env RL_CUDA_TC=0 $BIN selftest --filter "$t"
    grep -E "FAIL|selftest:" "$LOGS/selftest-float-$t.log" | head -10 | sed "s/^/RL_CUDA_TC=0 /" |
      tee -a "$SUMMARY"
  done
fi

if want unit; then
  run unit_test_cuda 300 build/test_cuda
  grep -E "PASSED|FAILED|SKIPPED \]" "$LOGS/unit_test_cuda.log" | head -8 | tee -a "$SUMMARY"
fi

# eval_pair NAME MODEL TOKENS: logits of both backends into $WORK/NAME.{cpu,cuda}.f32
eval_pair() {
  local name=$1 model=$2 tokens=$3; shift 3
  run "eval-$name-cuda" 300 $BIN eval --backend cuda -m "$model" --tokens "$tokens" \
    --logits-out "$WORK/$name.cuda.f32" "$@"
  run "eval-$name-cpu" 400 $BIN eval --backend cpu -m "$model" --tokens "$tokens" \
    --logits-out "$WORK/$name.cpu.f32" "$@"
}
compare() { python3 scripts/compare_logits.py "$@" | tee -a "$SUMMARY"; }

if want parity; then
  for m in tiny-f32 tiny-quant; do
    for s in seq96 seq700; do
      [ -f "$TINY/$m.$s.tokens.txt" ] || continue
      eval_pair "$m.$s" "$TINY/$m.gguf" "$TINY/$m.$s.tokens.txt" --ctx 1024
      tol=(--max-abs 1e-3 --rms 1e-4 --argmax 1.0)
      [ $m = tiny-quant ] && tol=(--max-abs 2e-3 --argmax 1.0)
      compare "$WORK/$m.$s.cuda.f32" "$TINY/$m.$s.ref64.logits.f32" --vocab 512 "${tol[@]}" \
        --label "cuda vs ref64 $m $s"
      compare "$WORK/$m.$s.cuda.f32" "$WORK/$m.$s.cpu.f32" --vocab 512 --max-abs 1e-3 --argmax 1.0 \
        --label "cuda vs cpu $m $s"
    done
    # Greedy continuation: feed seq96 + the first 31 reference tokens; argmax of rows 95.. must
    # reproduce the reference's 32 greedy tokens.
    cat "$TINY/$m.seq96.tokens.txt" <(head -c 100000 "$TINY/$m.seq96.ref64.gen32.txt" | tr -s ' \n' '\n' | head -31) \
      | tr -s ' \n' ' ' >"$WORK/$m.gen.tokens.txt"
    run "eval-$m-gen-cuda" 120 $BIN eval --backend cuda -m "$TINY/$m.gguf" \
      --tokens "$WORK/$m.gen.tokens.txt" --logits-out "$WORK/$m.gen.cuda.f32" --ctx 256
    compare "$WORK/$m.gen.cuda.f32" "$WORK/$m.gen.cuda.f32" --vocab 512 \
      --greedy "$TINY/$m.seq96.ref64.gen32.txt" --offset 95 --label "cuda greedy gen32 $m"
    # End to end through `redlite run` (tokenizer, sampler, decode loop): greedy text must match.
    for b in cuda cpu; do
      $BIN run -m "$TINY/$m.gguf" --backend $b -p "The quick brown fox" -n 24 --temp 0 \
        >"$WORK/$m.run.$b.txt" 2>>"$LOGS/run-$m.log"
    done
    if cmp -s "$WORK/$m.run.cuda.txt" "$WORK/$m.run.cpu.txt" && [ -s "$WORK/$m.run.cuda.txt" ]; then
      say "redlite run greedy 24 tokens $m: cuda text identical to cpu  ok"
    else
      say "redlite run greedy 24 tokens $m: cuda and cpu texts DIFFER  FAIL"
    fi
    for kv in bf16 f16; do
      run "eval-$m-seq96-cuda-$kv" 120 $BIN eval --backend cuda -m "$TINY/$m.gguf" \
        --tokens "$TINY/$m.seq96.tokens.txt" --logits-out "$WORK/$m.seq96.cuda.$kv.f32" --ctx 256 --kv-type $kv
      compare "$WORK/$m.seq96.cuda.$kv.f32" "$TINY/$m.seq96.ref64.logits.f32" --vocab 512 \
        --max-abs 0.05 --argmax 0.98 --label "cuda kv $kv vs ref64 $m seq96"
    done
  done
fi

if want synth; then
  # Real head shapes (16/2 x 256 attention, 16/32 x 128 DeltaNet, d 2048), 4 layers, 32 experts
  # top-10, ANCHORS type mix; 4096+ positions through both backends.
  SM=$WORK/synth.gguf
  N=${SYNTH_TOKENS:-4200}
  run mkmodel-synth 300 $BIN mkmodel --preset 80b-a3b --layers 4 --experts-count 32 --vocab 8192 \
    --context 8192 -o "$SM"
  python3 -c "import random; r=random.Random(5); print(' '.join(str(r.randrange(8192)) for _ in range($N)))" \
    >"$WORK/synth.tokens.txt"
  eval_pair synth "$SM" "$WORK/synth.tokens.txt" --ctx $((N + 8))
  compare "$WORK/synth.cuda.f32" "$WORK/synth.cpu.f32" --vocab 8192 --max-abs 1e-3 \
    --argmax 0.999 --label "cuda vs cpu synth d2048 4L $N pos"
  run eval-synth-cuda-bf16 300 $BIN eval --backend cuda -m "$SM" --tokens "$WORK/synth.tokens.txt" \
    --logits-out "$WORK/synth.cuda.bf16.f32" --ctx $((N + 8)) --kv-type bf16
  compare "$WORK/synth.cuda.bf16.f32" "$WORK/synth.cpu.f32" --vocab 8192 --max-abs 0.05 \
    --argmax 0.995 --label "cuda kv bf16 vs cpu f32 synth"
  # The same shapes with every projection and expert in one format of its own decoder (experts
  # type:projections type), and IQ2_XS experts beside Q4_K projections (their shared expert merges).
  head -c 4000 "$WORK/synth.tokens.txt" | awk '{NF--; print}' >"$WORK/synth-short.tokens.txt"
  for mix in iq4_xs:iq4_xs q4_0:q4_0 iq4_nl:iq4_nl iq2_xs:iq2_xs iq2_xs:q4_k; do
    e=${mix%:*} d=${mix#*:} t=${mix/:/-}
    run "mkmodel-synth-$t" 300 $BIN mkmodel --preset 80b-a3b --layers 4 --experts-count 32 \
      --vocab 8192 --context 8192 --experts "$e" --dense "$d" -o "$WORK/synth-$t.gguf"
    eval_pair "synth-$t" "$WORK/synth-$t.gguf" "$WORK/synth-short.tokens.txt" --ctx 1024
    compare "$WORK/synth-$t.cuda.f32" "$WORK/synth-$t.cpu.f32" --vocab 8192 --max-abs 2e-3 \
      --argmax 0.995 --worst 3 --label "cuda vs cpu synth $e experts, $d projections d2048 4L"
    # The CPU engine against itself (token by token against chunked prefill): how far float
    # rounding alone moves this model's logits, and at which rows.
    run "eval-synth-$t-cpu-decode" 400 $BIN eval --backend cpu -m "$WORK/synth-$t.gguf" \
      --tokens "$WORK/synth-short.tokens.txt" --logits-out "$WORK/synth-$t.cpu-decode.f32" \
      --ctx 1024 --decode
    compare "$WORK/synth-$t.cpu-decode.f32" "$WORK/synth-$t.cpu.f32" --vocab 8192 --worst 3 \
      --label "cpu decode vs cpu prefill synth $e experts, $d projections"
  done
  # The legacy fused ssm_in layout (q|k|v|z grouped per key head in one tensor), which the CUDA
  # upload reads in another order than attn_qkv + attn_gate.
  run mkmodel-synth-fused-ssm-in 300 $BIN mkmodel --preset 80b-a3b --layers 4 --experts-count 32 \
    --vocab 8192 --context 8192 --fused-ssm-in -o "$WORK/synth-fused-ssm-in.gguf"
  eval_pair synth-fused-ssm-in "$WORK/synth-fused-ssm-in.gguf" "$WORK/synth-short.tokens.txt" \
    --ctx 1024
  compare "$WORK/synth-fused-ssm-in.cuda.f32" "$WORK/synth-fused-ssm-in.cpu.f32" --vocab 8192 \
    --max-abs 1e-3 --argmax 0.999 --label "cuda vs cpu synth fused ssm_in d2048 4L"
  # The tiny preset asked for K-quant and IQ2_XXS weights: its rows of 32 values fall back to
  # Q4_0, IQ4_NL and Q8_0 (the float decoders' shapes), 700 positions.
  run mkmodel-tiny-fallback 120 $BIN mkmodel --preset tiny --experts iq2_xxs --dense q4_K \
    --output q6_K -o "$WORK/tiny-fallback.gguf"
  eval_pair tiny-fallback "$WORK/tiny-fallback.gguf" "$TINY/tiny-f32.seq700.tokens.txt" --ctx 1024
  compare "$WORK/tiny-fallback.cuda.f32" "$WORK/tiny-fallback.cpu.f32" --vocab 512 \
    --max-abs 1e-3 --argmax 1.0 --label "cuda vs cpu tiny q4_0/iq4_nl/q8_0 700 pos"
fi

if want kernel; then
  run bench-kernel 300 $BIN bench kernel
  grep -E "^[0-9]|copy|least squares" "$LOGS/bench-kernel.log" | tee -a "$SUMMARY"
fi

if want decode80 || want parity80 || want insts || want srccount; then
  [ -n "${GEN_PID:-}" ] && wait "$GEN_PID"
  tail -3 "$LOGS/mkmodel80.log" | tee -a "$SUMMARY"
fi

if want nopdl80 && [ -f "$M80" ]; then
  # The same steps without programmatic dependent launch, and with the L2 weight prefetch, to
  # measure what each brings.
  run bench-decode-nopdl 240 env RL_CUDA_PDL=0 $BIN bench decode -m "$M80" --positions 4K \
    --kv-types f32 --tokens 32
  grep -E "^[0-9]" "$LOGS/bench-decode-nopdl.log" | sed 's/^/no PDL: /' | tee -a "$SUMMARY"
  run bench-decode-noprefetch 240 env RL_CUDA_PREFETCH=0 $BIN bench decode -m "$M80" \
    --positions 4K --kv-types f32 --tokens 32
  grep -E "^[0-9]" "$LOGS/bench-decode-noprefetch.log" | sed 's/^/no L2 prefetch: /' | tee -a "$SUMMARY"
fi

if want decode80 && [ -f "$M80" ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu \
    --format=csv -lms 250 >"$LOGS/clocks-decode.log" 2>&1 &
  SMI_PID=$!
  run bench-decode 480 $BIN bench decode -m "$M80" --positions "$DECODE_POSITIONS" \
    --kv-types f32,bf16 --tokens 32 --breakdown
  kill $SMI_PID 2>/dev/null
  grep -E "^[0-9]|bandwidth|weights read|on the GPU" "$LOGS/bench-decode.log" | tee -a "$SUMMARY"
  awk -F', ' 'NR > 1 && $2+0 > 0 {print $2+0}' "$LOGS/clocks-decode.log" | sort -n | uniq -c |
    sort -rn | head -4 | sed 's/^/SM clock MHz (samples, value): /' | tee -a "$SUMMARY"
fi

if want parity80 && [ -f "$M80" ]; then
  python3 -c "import random; r=random.Random(9); print(' '.join(str(r.randrange(151936)) for _ in range(8)))" \
    >"$WORK/m80.tokens.txt"
  eval_pair m80 "$M80" "$WORK/m80.tokens.txt" --ctx 64
  compare "$WORK/m80.cuda.f32" "$WORK/m80.cpu.f32" --vocab 151936 --max-abs 1e-3 \
    --argmax 1.0 --label "cuda vs cpu 80b-a3b 8 tokens"
fi

if want insts && [ -f "$M80" ]; then
  # Instructions, shared-memory wavefronts and DRAM bytes of every kernel of a 4K decode step of
  # the 80B (Nsight Compute, kernels launched one by one, clocks left alone): a window of three
  # whole steps (STEP_KERNELS launches each: the 80B's 302 since the shared expert joined the
  # experts' launches; ncu_insts.py warns when a kernel's count is not a multiple of the steps)
  # after the first warm-up steps.
  STEP_KERNELS=${STEP_KERNELS:-302}
  run bench-decode-graph 240 $BIN bench decode -m "$M80" --positions 4K --kv-types f32 --tokens 32
  step_us=$(awk '/on the GPU/ { sub(/.*included\): /, ""); print $1 * 1000; exit }' \
    "$LOGS/bench-decode-graph.log")
  grep -E "^4096|on the GPU" "$LOGS/bench-decode-graph.log" | tee -a "$SUMMARY"
  run ncu-insts 480 ncu --clock-control none --launch-skip $((8 * STEP_KERNELS)) \
    --launch-count $((3 * STEP_KERNELS)) --csv --page raw --metrics \
    smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_read.sum,gpu__time_duration.sum \
    $BIN bench decode -m "$M80" --positions 4K --kv-types f32 --tokens 2 --no-graph
  python3 scripts/ncu_insts.py "$LOGS/ncu-insts.log" 3 "${SMS:-132}" "${SM_MHZ:-1980}" "$step_us" \
    >"$OUT/insts.txt" 2>&1
  tee -a "$SUMMARY" <"$OUT/insts.txt"
fi

if want srccount && [ -f "$M80" ]; then
  # Executed instructions per SASS instruction (with its CUDA source line) of one DeltaNet
  # layer's tensor-core launches at 4K: the in-projection, output projection, experts' gate/up
  # and down of layer 4 in the third step (193 such launches per step of the 80B), summed by
  # scripts/ncu_lines.py into $OUT/lines.txt. Needs a build with -lineinfo (its own directory).
  run configure-lineinfo 300 cmake -S . -B build-li -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DRL_CUDA=ON -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DPKG_CONFIG_EXECUTABLE="$PKGCONF" \
    ${DEPS_CMAKE_FLAGS:-}
  run build-lineinfo 420 cmake --build build-li -j16 --target redlite
  for src in cuda,sass sass; do  # older ncu: SASS only
    run ncu-source 480 ncu --clock-control none -k 'regex:gemv_tc|gate_up_tc|down_tc' \
      --launch-skip $((2 * 193 + 16)) --launch-count 4 --section SourceCounters --page source \
      --print-source $src --csv build-li/redlite bench decode -m "$M80" --positions 4K \
      --kv-types f32 --tokens 2 --no-graph && break
  done
  gzip -c "$LOGS/ncu-source.log" >"$OUT/ncu-source.log.gz"
  python3 scripts/ncu_lines.py "$LOGS/ncu-source.log" src/cuda/tc_gemv.cuh >"$OUT/lines.txt" 2>&1
  grep -v '^ ' "$OUT/lines.txt" | tee -a "$SUMMARY"
fi

if want profile; then
  # Nsight Compute on one decode step of a 4-layer model with the real shapes (kernels launched
  # one by one), clocks left alone; with the stall reasons if this ncu knows the metrics.
  SMALL=$WORK/small.gguf
  [ -f "$SMALL" ] || run mkmodel-small 120 $BIN mkmodel --preset 80b-a3b --layers 4 -o "$SMALL"
  NCU=(ncu --clock-control none -k 'regex:gemv|gate_up|down_|deltanet|attn_|route'
    --launch-skip 120 --launch-count 48 --section SpeedOfLight --section Occupancy
    --section SchedulerStats --section WarpStateStats --section LaunchStats --csv --page details)
  STALLS=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' long_scoreboard \
    short_scoreboard wait barrier mio_throttle lg_throttle math_pipe_throttle no_instruction \
    not_selected selected membar dispatch_stall drain imc_miss branch_resolving sleeping \
    tex_throttle misc)
  STEP=($BIN bench decode -m "$SMALL" --positions 4K --tokens 4 --no-graph)
  run ncu 300 "${NCU[@]}" --metrics "${STALLS%,}" "${STEP[@]}" ||
    run ncu-plain 300 "${NCU[@]}" "${STEP[@]}"
  log=$LOGS/ncu.log; grep -q '"ID"' "$log" || log=$LOGS/ncu-plain.log
  python3 scripts/ncu_summary.py "$log" >"$OUT/ncu-summary.txt" 2>&1
  head -60 "$OUT/ncu-summary.txt"
fi

for k in "${KEEP[@]}"; do [ -f "$LOGS/$k.log" ] && cp "$LOGS/$k.log" "$OUT/"; done
tar -czf "$OUT/logs.tgz" -C "$WORK" logs
echo
echo "================ summary ================"
cat "$SUMMARY"
