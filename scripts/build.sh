#!/usr/bin/env bash
# Installs the dependencies (scripts/setup.sh) and builds Red Lite into build/.
# Extra arguments go to CMake's configure step, e.g. -DRL_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build
