# Sourced by device_perf.sh and device_mix.sh (on the GPU machine): a copy of the working tree in
# which the files in .perf_base/ replace their counterparts (NAME goes to src/cuda/NAME,
# NAME.test.txt to tests/cuda/NAME), built in the background by scripts/device.sh with its own
# work and package folders. Sets BASE (the copy) and BASE_PID (wait for it before benchmarks).
start_base_build() {
  [ -n "$(ls .perf_base 2>/dev/null)" ] || { echo "$0: .perf_base/ is empty or missing"; exit 2; }
  BASE=/tmp/rl-base
  rm -rf "$BASE" && mkdir -p "$BASE"
  tar --exclude=./build --exclude=./.perf_base --exclude=./.git -cf - . | tar -xf - -C "$BASE"
  local f
  for f in .perf_base/*; do
    case $f in
      *.test.txt) cp "$f" "$BASE/tests/cuda/$(basename "$f" .test.txt)" ;;
      *) cp "$f" "$BASE/src/cuda/" ;;
    esac
  done
  mkdir -p /tmp/rl-base-tmp  # its own unpacked packages: no race with the other build
  (cd "$BASE" && TMPDIR=/tmp/rl-base-tmp OUT=/tmp/rl-out-base WORK=/tmp/rl-work-base \
    bash scripts/device.sh env build >/tmp/base-build.log 2>&1) &
  BASE_PID=$!
}
