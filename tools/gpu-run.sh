#!/usr/bin/env bash
# Runs on the GPU machine (../shared/gpu/README.md): every test program, hk-check and hk-bench from
# build-gpu/; logs, CSV and JSON go into one archive, $OUT/gpu-run.tgz (with the step sass, the
# driver's shader cache into $OUT/glcache.tgz, for tools/nv-sass.py). Usage there:
# bash tools/gpu-run.sh [tests] [check] [bench] [tune] [tuned-bench] [few] [stage] [norm]
# [decode-plans] [forms] [qkv] [attention] [sass] (default: the first three). attention: the
# attention rows (decode at Hkv 8 and 4, prefill) each class in a process of its own, then the
# prefill under both launch orders (HK_FLASH_ORDER). qkv: hk_matvec_int8_qkv's rows
# (tests, then hk-bench beside the multi and hk_rope) and hk-run --bench with and without --form
# rope-apart (needs gguf-py, as model). norm: the RMSNorm's two forms
# (HK_RMSNORM_STAGED), alone and in the 8-layer steps. decode-plans: flash-decoding under a set of
# HK_SDPA_* plans. forms: hk-run --bench of the 8-layer shapes with and without --form norm-tail
# (needs gguf-py, as model). stage: hk_mmq and hk_mmq_id under a set of tiles (HK_MMQ_TILE,
# _ID_TILE, _PREFETCH), with registers. few: hk_mmq's few-token kernel at 8 and 16 tokens of 4096
# and 14336 under a set of its HK_MMQ_FEW_* settings, with registers (a build with CMake
# HK_MMQ_PROBES=ON; others ignore them).
# Extra hk-check/hk-bench arguments: HK_CHECK_ARGS, HK_BENCH_ARGS. tune: the autotuner on the
# prefill shapes listed below and the MoE decode matvecs (HK_TUNE_BUDGET schedules measured per
# shape, default 12) into a cache of this run (tune-cache/ in the archive); tuned-bench: hk-bench's
# prefill and MoE matvec rows taking those winners (run it with tune). step: hk-bench --step (a
# model's decode step on synthetic weights, no file). model: the model test (tests/model/check.py,
# tiny models, every arm of this device) and hk-run --bench on synthetic GGUF files of the 8-layer
# shapes (tools/make-synthetic-model.py); model-full: the same at full depth (32 and 48 layers).
# Both need gguf-py and PyYAML, which that machine lacks: copy them here first, into the carried
# build tree (pure Python): cp -r build-tools/venv/lib/python3.11/site-packages/{gguf,yaml} build-gpu/py/
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
ARCHIVE=${OUT:-/tmp}/gpu-run.tgz
OUT=$(mktemp -d)
steps=${*:-tests check bench}
# sass: what NVIDIA's driver compiles during the other steps goes into a second archive beside the
# first, glcache.tgz (several MB per test program), for tools/nv-sass.py
GLCACHE=$(mktemp -d)
if [[ " $steps " == *" sass "* ]]; then
    export __GL_SHADER_DISK_CACHE_PATH=$GLCACHE __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cd build-gpu
if [[ $steps == *tests* ]]; then
    # as ctest: no test takes autotuner winners (tune's go to their own directory)
    export HK_TUNE_CACHE_DIR=/nonexistent/hkernel-no-tune-cache
    for t in tests/test_*; do
        name=$(basename "$t")
        [ "$name" = test_gguf ] && continue # needs Python with gguf-py, which that machine lacks
        timeout 300 "./$t" >"$OUT/$name.log" 2>&1
        echo "$name rc=$? $(tail -n 1 "$OUT/$name.log")"
    done
    grep -h "^FAIL" "$OUT"/test_*.log | head -40
    grep -h "caps plausible" "$OUT/test_runtime.log"
    unset HK_TUNE_CACHE_DIR
fi
[[ $steps == *check* ]] && ./hk-check --csv "$OUT/check.csv" $HK_CHECK_ARGS 2>&1 | tee "$OUT/check.log"
[[ " $steps " == *" bench "* ]] && ./hk-bench --csv "$OUT/bench.csv" --json "$OUT/bench.json" $HK_BENCH_ARGS 2>&1 | tee "$OUT/bench.log"
if [[ " $steps " == *" tune "* ]]; then
    export HK_TUNE_CACHE_DIR=$OUT/tune-cache
    while read -r kernel shape; do
        log="$OUT/tune-$kernel-${shape//[:\/]/_}.log"
        start=$SECONDS
        ./hk-check tune "$kernel" "$shape" --budget "${HK_TUNE_BUDGET:-12}" >"$log" 2>&1
        echo "$kernel $shape rc=$? $((SECONDS - start)) s"
        grep -E "schedules in the space|^(default|winner|rejected:) " "$log"
    done <<'SHAPES'
gemm_f16 q4_k:512x4096x4096
gemm_f16 q4_k:512x14336x4096
gemm_f16 q4_k:512x4096x14336
gemm_f16 q6_k:512x4096x4096
gemm_f16 q8_0:512x4096x4096
mmq q4_k:512x4096x4096
mmq q4_k:512x14336x4096
mmq q8_0:512x4096x4096
mmq q6_k:512x4096x4096
mmq q4_k:2048x4096x4096
mmq_id q4_k:e128/n768/k2048/t512/top8
mmq_id q6_k:e128/n2048/k768/t512/top8/per-slot
flash_prefill f16:h32/kv8/d128/q512/cap512/causal
flash_prefill f16:h32/kv8/d128/q512/cap4096/causal
flash_prefill f16:h32/kv8/d128/q2048/cap2048/causal
moe_matvec_int8 q4_k:e128/n768/k2048/s8
moe_matvec_int8 q6_k:e128/n2048/k768/s8/per-slot
SHAPES
    cat "$HK_TUNE_CACHE_DIR/tune.tsv"
    unset HK_TUNE_CACHE_DIR
fi
if [[ " $steps " == *" step "* ]]; then
    ./hk-bench --step --csv "$OUT/step.csv" 2>&1 | tee "$OUT/step.log"
fi
# bench_model SHAPE LAYERS [HK-RUN OPTIONS...]: a synthetic GGUF of that shape, hk-run --bench on
# it (with each further argument), the file removed
bench_model() {
    PYTHONPATH=$PWD/py python3 ../tools/make-synthetic-model.py --shape "$1" --layers "$2" --out /tmp/hk-model.gguf &&
        ./hk-run /tmp/hk-model.gguf --bench --profile "${@:3}" 2>&1 | tee -a "$OUT/model.log"
    rm -f /tmp/hk-model.gguf
}
if [[ " $steps " == *" model "* ]]; then
    PYTHONPATH=$PWD/py python3 ../tests/model/check.py --hk-run ./hk-run --out "$OUT/model-test" 2>&1 |
        tee "$OUT/model-test.log" | grep -E "^(FAIL|PASS .*activations)"
    rm -f "$OUT"/model-test/*.gguf
    bench_model llama3-8b 8
    bench_model qwen3-30b-a3b 8
fi
if [[ " $steps " == *" forms "* ]]; then
    # the norm tail at model level: hk-run --bench of the 8-layer shapes with and without it
    for shape in llama3-8b qwen3-30b-a3b; do
        bench_model $shape 8
        bench_model $shape 8 --form norm-tail
    done
fi
if [[ " $steps " == *" qkv "* ]]; then
    # the RoPE epilogue: its rows on this device, then in the step against hk_rope
    ./tests/test_kernels --only matvec_int8_qkv,rope >"$OUT/qkv-tests.log" 2>&1
    echo "test_kernels qkv,rope rc=$? $(tail -n 1 "$OUT/qkv-tests.log")"
    grep "^FAIL" "$OUT/qkv-tests.log" | head -10
    ./hk-bench --only matvec_int8_qkv,rope,matvec_int8_multi 2>&1 | tee "$OUT/qkv-bench.log"
    for run in 1 2; do
        bench_model llama3-8b 8
        bench_model llama3-8b 8 --form rope-apart
    done
fi
if [[ " $steps " == *" model-full "* ]]; then
    bench_model llama3-8b 32
    bench_model qwen3-30b-a3b 48
fi
if [[ " $steps " == *" tuned-bench "* ]]; then
    HK_TUNE_CACHE_DIR=$OUT/tune-cache ./hk-bench --only gemm_f16,mmq,mmq_id,sdpa,moe_matvec_int8 $HK_BENCH_ARGS 2>&1 |
        tee "$OUT/tuned-bench.log"
fi
# sweep LOG [KERNELS]: hk-bench under the settings of each line read ("kernels shapes VAR=value
# ..."), with the registers of the pipelines whose names start with one of KERNELS (an extended
# regex, default mmq); every line's pipelines compiled afresh (their own pipeline cache)
sweep() {
    local names=${2:-mmq}
    while read -r only shapes settings; do
        echo "== $only $shapes $settings"
        env $settings HK_PIPELINE_STATS=1 HK_PIPELINE_CACHE_DIR="$(mktemp -d)" \
            ./hk-bench --only "$only" --shapes "$shapes" 2>&1 |
            grep -E "^($names)|pipeline ($names)" | sed -e 's/Binary Size.*//' | cut -c1-150
    done | tee "$OUT/$1"
}
if [[ " $steps " == *" few "* ]]; then
    grep -q "HK_MMQ_PROBES:BOOL=ON" CMakeCache.txt || echo "few: this build has no probes; every row is the default"
    # register sets, row tiles, warps (every weight type the kernel takes; the settings apply to
    # all of them)
    sweep few.log <<'FEW'
mmq 8x4096x4096,8x14336x4096,16x4096x4096,8x4096x14336 HK_MMQ_FEW_ROW_TILES=1
mmq 8x4096x4096,8x14336x4096,16x4096x4096,8x4096x14336 HK_MMQ_FEW_ROW_TILES=2
mmq 8x4096x4096,8x14336x4096,16x4096x4096 HK_MMQ_FEW_ROW_TILES=1 HK_MMQ_FEW_SETS=1
mmq 8x4096x4096,8x14336x4096,16x4096x4096 HK_MMQ_FEW_ROW_TILES=2 HK_MMQ_FEW_SETS=1
mmq 8x4096x4096,8x14336x4096 HK_MMQ_FEW_ROW_TILES=1 HK_MMQ_FEW_WARPS=1
mmq 8x4096x4096,8x14336x4096 HK_MMQ_FEW_ROW_TILES=1 HK_MMQ_FEW_WARPS=2
mmq 8x4096x4096,8x14336x4096 HK_MMQ_FEW_ROW_TILES=1 HK_MMQ_FEW_WARPS=4
FEW
fi
if [[ " $steps " == *" stage "* ]]; then
    # hk_mmq and hk_mmq_id under tiles and stagings (the first line the defaults)
    sweep stage.log <<'STAGE'
mmq,mmq_id 512x4096x4096,512x14336x4096,128x768x2048,128x2048x768 HK_MMQ_PREFETCH=0
mmq 512x4096x4096,512x14336x4096 HK_MMQ_TILE=2,4,4,2,2
mmq 512x4096x4096,512x14336x4096 HK_MMQ_PREFETCH=1
mmq 512x4096x4096,512x14336x4096 HK_MMQ_ROLLED=1
mmq 512x4096x4096 HK_MMQ_TILE=4,4,2,2,2
mmq_id 128x768x2048,128x2048x768 HK_MMQ_ID_TILE=1,8,2,1,2
mmq_id 128x768x2048,128x2048x768 HK_MMQ_ID_TILE=2,4,1,2,2
mmq_id 128x768x2048,128x2048x768 HK_MMQ_ID_TILE=1,4,2,2,2 HK_MMQ_PREFETCH=1
STAGE
fi
if [[ " $steps " == *" norm "* ]]; then
    # the RMSNorm's two forms (HK_RMSNORM_STAGED), alone and in the 8-layer steps, whose
    # "norm-tail" form is the projections' tail staged the same way
    for staged in 0 1 0 1; do
        echo "== HK_RMSNORM_STAGED=$staged"
        HK_RMSNORM_STAGED=$staged ./hk-bench --only rmsnorm,rmsnorm_q8_1,matvec_int8_add_norm 2>&1 |
            grep -E "^(rms|matvec)"
    done | tee "$OUT/norm.log"
    for staged in 0 1; do
        HK_RMSNORM_STAGED=$staged ./hk-bench --step llama3-8b:8,qwen3-30b-a3b:8 2>&1 |
            sed -e "s/^/staged=$staged: /" | tee -a "$OUT/norm-step.log"
    done
fi
if [[ " $steps " == *" decode-plans "* ]]; then
    # flash-decoding's plans at H32/Hkv8 and Hkv4 (the first line the built-in ones); a hook that
    # names the workgroups turns off the long-cache rule, so the long rows of those lines differ
    sweep decode-plans.log "sdpa" <<'PLANS'
sdpa 1x32x8,1x32x4 X=built-in
sdpa 1x32x8 HK_SDPA_GROUPS=128
sdpa 1x32x8 HK_SDPA_GROUPS=64
sdpa 1x32x8 HK_SDPA_ROWS=1 HK_SDPA_GROUPS=512 HK_SDPA_KB=4 HK_SDPA_SINGLE_PASS=0
sdpa 1x32x8 HK_SDPA_ROWS=1 HK_SDPA_GROUPS=512 HK_SDPA_KB=4
sdpa 1x32x8 HK_SDPA_ROWS=1 HK_SDPA_GROUPS=256
sdpa 1x32x8 HK_SDPA_ROWS=2 HK_SDPA_GROUPS=256
sdpa 1x32x8 HK_SDPA_ROWS=2 HK_SDPA_GROUPS=128
sdpa 1x32x8 HK_SDPA_KB=4 HK_SDPA_GROUPS=256
sdpa 1x32x8 HK_SDPA_KB=4 HK_SDPA_GROUPS=128
sdpa 1x32x8 HK_SDPA_SINGLE_PASS=0
PLANS
fi
if [[ " $steps " == *" attention "* ]]; then
    for shapes in 1x32x8 1x32x4 512x32x8,2048x32x8; do
        ./hk-bench --only sdpa --shapes "$shapes" 2>&1 | grep -E "^sdpa|copy"
    done | tee "$OUT/attention.log"
    for order in heaviest zigzag; do
        HK_FLASH_ORDER=$order ./hk-bench --only sdpa --shapes 512x32x8,2048x32x8 2>&1 | grep "^sdpa" |
            sed -e "s/^/$order: /"
    done | tee -a "$OUT/attention.log"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
tar czf "$ARCHIVE" -C "$OUT" .
if [[ " $steps " == *" sass "* ]]; then
    tar czf "${ARCHIVE%/*}/glcache.tgz" -C "$GLCACHE" .
fi
