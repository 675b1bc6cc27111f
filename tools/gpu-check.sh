#!/usr/bin/env bash
# On the GPU machine: hk-check only (see tools/gpu-run.sh for the tests too).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
./build-gpu/hk-check --csv "$OUT/check.csv" "$@" 2>&1 | tee "$OUT/check.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv
