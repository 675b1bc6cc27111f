#!/usr/bin/env bash
# Runs on the GPU machine (../shared/gpu/README.md): the test programs and hk-check from build-gpu/,
# logs and CSV into $OUT. Usage there: bash tools/gpu-run.sh [hk-check args...]
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cd build-gpu
for t in ref kernels errors runtime; do
    ./tests/test_$t >"$OUT/test_$t.log" 2>&1
    echo "test_$t rc=$? $(tail -n 1 "$OUT/test_$t.log")"
done
grep -h "caps plausible" "$OUT/test_runtime.log"
./hk-check --csv "$OUT/check.csv" "$@" 2>&1 | tee "$OUT/check.log"
