#!/usr/bin/env bash
# Runs on the GPU machine (../shared/gpu/README.md): every test program, hk-check and hk-bench from
# build-gpu/; logs, CSV and JSON go into one archive, $OUT/gpu-run.tgz. Usage there:
# bash tools/gpu-run.sh [tests] [check] [bench] (default: all three). Extra hk-check/hk-bench
# arguments: HK_CHECK_ARGS, HK_BENCH_ARGS.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
ARCHIVE=${OUT:-/tmp}/gpu-run.tgz
OUT=$(mktemp -d)
steps=${*:-tests check bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cd build-gpu
if [[ $steps == *tests* ]]; then
    for t in tests/test_*; do
        name=$(basename "$t")
        [ "$name" = test_gguf ] && continue # needs Python with gguf-py, which that machine lacks
        timeout 300 "./$t" >"$OUT/$name.log" 2>&1
        echo "$name rc=$? $(tail -n 1 "$OUT/$name.log")"
    done
    grep -h "^FAIL" "$OUT"/test_*.log | head -40
    grep -h "caps plausible" "$OUT/test_runtime.log"
fi
[[ $steps == *check* ]] && ./hk-check --csv "$OUT/check.csv" $HK_CHECK_ARGS 2>&1 | tee "$OUT/check.log"
[[ $steps == *bench* ]] && ./hk-bench --csv "$OUT/bench.csv" --json "$OUT/bench.json" $HK_BENCH_ARGS 2>&1 | tee "$OUT/bench.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
tar czf "$ARCHIVE" -C "$OUT" .
