#!/usr/bin/env bash
# Installs what Red Lite needs to build and test, from Debian 12's packages. Safe to re-run:
# it installs only what is missing.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git python3 curl
          libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libpcre2-dev
          clang libclang-rt-14-dev nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Node and npm may come from outside Debian's packages; accept any working pair.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
