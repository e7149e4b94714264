#!/usr/bin/env bash
# A/B of redlite binaries built here (cheaper than scripts/device_perf.sh, which builds the
# baseline on the GPU machine): on the GPU machine, with the binaries in a git-ignored folder
# carried along (.ab/, 64 MiB in all: two or three binaries), the first being the baseline:
#   bash scripts/device_ab.sh .ab/base .ab/new [...]
# Writes a synthetic model (MODEL: mkmodel flags, default the full 80b-a3b), runs the self-tests
# named in FILTERS (default: gemv moe deltanet; FILTERS= runs none) of every other binary,
# compares each binary's 40-token decode logits with the first's (cmp: bit-identical or not),
# then `bench decode` (POS, default 4K,128K; KV cache type KV, default f32; 24 tokens) for ROUNDS
# rounds (default 3), the binaries alternating, and prints tok/s per round. KERNEL=1 adds `bench
# kernel` (decode attention alone, µs per layer at 4K-256K) to every round.
set -u
OUT=${OUT:-/tmp/rl-ab}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; POS=${POS:-4K,128K}; MODEL=${MODEL:---preset 80b-a3b}; KV=${KV:-f32}
# One model file per MODEL, kept for the next run in the same call (another KV, other binaries).
M=/tmp/rl-ab-model-$(echo "$MODEL" | md5sum | cut -c1-8).gguf
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [ ! -s "$M" ]; then
  # shellcheck disable=SC2086  # MODEL is a list of flags
  "$1" mkmodel $MODEL -o "$M.tmp" >"$OUT/mkmodel.log" 2>&1 && mv "$M.tmp" "$M" ||
    { tail "$OUT/mkmodel.log"; exit 1; }
fi
seq 1000 40 2560 | tr '\n' ' ' >"$OUT/tokens.txt"
i=0
for b in "$@"; do
  "$b" eval --backend cuda -m "$M" --tokens "$OUT/tokens.txt" --logits-out "$OUT/logits.$i" \
    --ctx 64 --decode -q --kv-type "$KV"
  if [ "$i" -gt 0 ]; then
    for f in ${FILTERS-gemv moe deltanet}; do
      "$b" selftest --filter $f 2>&1 | grep -E "selftest:|FAIL" | head -5 | sed "s|^|$b $f: |"
    done
    cmp -s "$OUT/logits.0" "$OUT/logits.$i" && echo "$b: logits identical to $1's" ||
      echo "$b: logits DIFFER from $1's"
  fi
  i=$((i + 1))
done
for r in $(seq "$ROUNDS"); do
  for b in "$@"; do
    "$b" bench decode -m "$M" --positions "$POS" --kv-types "$KV" --tokens 24 2>&1 |
      awk -v b="$b" -v r="$r" '/^[0-9]/ { print b, "round", r, $1, $3 }'
    if [ "${KERNEL:-0}" = 1 ]; then
      "$b" bench kernel --kv-types "$KV" 2>&1 |
        awk -v b="$b" -v r="$r" '/^[0-9]/ { print b, "round", r, "kernel", $1, $5, "us" }'
    fi
  done
done | tee "$OUT/ab.txt"
