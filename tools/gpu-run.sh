#!/usr/bin/env bash
# Runs on the GPU machine (../shared/gpu/README.md): the test programs, hk-check and hk-bench from
# build-gpu/, logs, CSV and JSON into $OUT. Usage there: bash tools/gpu-run.sh [tests] [check] [bench]
# (default: all three).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
steps=${*:-tests check bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cd build-gpu
if [[ $steps == *tests* ]]; then
    for t in ref kernels errors runtime; do
        ./tests/test_$t >"$OUT/test_$t.log" 2>&1
        echo "test_$t rc=$? $(tail -n 1 "$OUT/test_$t.log")"
    done
    grep -h "FAIL" "$OUT"/test_*.log | head -20
    grep -h "caps plausible" "$OUT/test_runtime.log"
fi
[[ $steps == *check* ]] && ./hk-check --csv "$OUT/check.csv" 2>&1 | tee "$OUT/check.log"
[[ $steps == *bench* ]] && ./hk-bench --csv "$OUT/bench.csv" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
