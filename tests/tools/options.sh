#!/bin/sh
# hk-bench and hk-check options (tests/CMakeLists.txt): --only and --shapes select rows; a name or
# dimensions that match nothing fail with a message instead of an empty, passing run; an output file
# that is a FIFO no process reads is a message, never a hang. hk-check tune reads every number of a
# shape whole: one past 2^32 - 1, a sign, an empty or zero count or text after the shape is refused
# (exit 2) before any device is opened or anything cached.
# Usage: options.sh HK_BENCH HK_CHECK
bench=$1
check=$2
fail=0
expect() { # expect RC TEXT COMMAND...: COMMAND exits RC and its output holds TEXT
    rc=$1 text=$2
    shift 2
    out=$("$@" 2>&1)
    got=$?
    if [ "$got" -ne "$rc" ] || ! printf '%s\n' "$out" | grep -q -- "$text"; then
        echo "FAIL $*: exit $got (want $rc), output lacks \"$text\":"
        printf '%s\n' "$out" | tail -n 5
        fail=1
    else
        echo "PASS $*: exit $got, \"$text\""
    fi
}
expect 0 "quantize_q8_1     16384 " "$bench" --quick --only quantize_q8_1 --shapes 16384x0x0
out=$("$bench" --quick --only quantize_q8_1 --shapes 16384x0x0 2>&1)
if printf '%s\n' "$out" | grep -q "quantize_q8_1     2048 "; then
    echo "FAIL hk-bench --shapes 16384x0x0 also timed the 2048 shape"
    fail=1
else
    echo "PASS hk-bench --shapes 16384x0x0 times that shape alone"
fi
# a matvec's shape by its two dimensions (rows x k), with and without its type
out=$("$bench" --quick --only matvec_int8 --shapes q4_k:2048x2048 2>&1)
if printf '%s\n' "$out" | grep -q "matvec_int8       q4_k 2048x2048 " &&
    ! printf '%s\n' "$out" | grep -q -e "q6_k 2048x2048 " -e "q4_k 512x6144 "; then
    echo "PASS hk-bench --shapes q4_k:2048x2048 times that matvec shape alone"
else
    echo "FAIL hk-bench --shapes q4_k:2048x2048:"
    printf '%s\n' "$out" | tail -n 5
    fail=1
fi
expect 0 "OK: 0 row(s) failed" "$check" --quick --only matvec_int8 --shapes 512x6144
expect 1 "no shape of the chosen kernels has these dimensions" "$bench" --quick --only quantize_q8_1 --shapes 1x2x3
expect 1 "no shape of the chosen kernels has these dimensions" "$check" --quick --only quantize_q8_1 --shapes 1x2x3
expect 0 "OK: 0 row(s) failed" "$check" --quick --only quantize_q8_1 --shapes 2048x0x0,16384x0x0
expect 2 "no kernel named \"nosuch\"" "$bench" --quick --only nosuch
# hk-bench --step: a model's decode step on synthetic weights; unknown shapes and bad layer counts
expect 0 "decode step: [0-9]* dispatches and [0-9]* barriers per token" "$bench" --quick --step tiny-llama
expect 1 "no synthetic shape 'nosuch'" "$bench" --quick --step nosuch
expect 2 "layers of 'tiny-moe' must be 1 to 4096" "$bench" --quick --step tiny-moe:0
expect 2 "--device \"99999999999\": a device index is 0 to 1000000" "$bench" --quick --device 99999999999

# refused KERNEL SHAPE TEXT [OPTIONS]: hk-check tune exits 2 with TEXT, having opened no device
# (no "device:" line) and written no tune cache. --budget 1 keeps a wrong acceptance short.
cache=$(mktemp -d)
refused() {
    kernel=$1 shape=$2 text=$3
    shift 3
    out=$(HK_TUNE_CACHE_DIR=$cache "$check" tune "$kernel" "$shape" --budget 1 --quiet "$@" 2>&1)
    got=$?
    if [ "$got" -ne 2 ] || ! printf '%s\n' "$out" | grep -qF -- "$text" || printf '%s\n' "$out" | grep -q "^device:" ||
        [ -e "$cache/tune.tsv" ]; then
        echo "FAIL hk-check tune $kernel $shape $*: exit $got (want 2 before any device), output lacks \"$text\":"
        printf '%s\n' "$out" | tail -n 5
        [ -e "$cache/tune.tsv" ] && echo "    and it wrote $cache/tune.tsv:" && cat "$cache/tune.tsv"
        rm -f "$cache/tune.tsv"
        fail=1
    else
        echo "PASS hk-check tune $kernel $shape $*: exit 2, \"$text\""
    fi
}
range="is not a number from 1 to 4294967295"
refused matvec_int8 q8_0:4294967328x32 "rows \"4294967328\" $range"
refused mmq q4_k:4294967297x32x256 "m \"4294967297\" $range"
refused sdpa_decode f16:h4294967297/kv1/d64/cap64 "heads \"4294967297\" $range"
refused matvec_int8 q8_0:-5x32 "rows \"-5\" $range"
refused matvec_int8 q8_0:+32x32 "rows \"+32\" $range"
refused matvec_int8 "q8_0: 32x32" "rows \" 32\" $range"
refused matvec_int8 q8_0:0x20x32 "rows \"0\" $range"
refused matvec_int8 q8_0:x32 "rows \"\" $range"
refused matvec_int8 q8_0:32x "k \"\" $range"
refused matvec_int8 q8_0:4294967296x32 "rows \"4294967296\" $range"
refused mmq q4_k:0x32x256 "m \"0\" $range"
refused matvec_int8_tokens q4_k:64x256x0 "tokens \"0\" $range"
refused matvec_int8 q8_0:32x32z "unexpected \"z\" after k"
refused flash_prefill f16:h1/kv1/d64/q16/cap64/causalX "unexpected \"/causalX\" after capacity"
refused sdpa_decode f16:h1/k1/d64/cap64 "expected \"/kv\" after heads"
refused mmq_id q4_k:e4/n32/k256/t2147483648/top2 "tokens x top_k = 4294967296 slots"
refused matvec_int8 q8_0:32x32 "--device \"4294967296\": a device index is 0 to 1000000" --device 4294967296
# 2^32 - 1 is a number: the shape is read, and hk_tune refuses it (exit 1) with nothing cached
out=$(HK_TUNE_CACHE_DIR=$cache "$check" tune matvec_int8 q8_0:4294967295x32 --budget 1 2>&1)
got=$?
if [ "$got" -eq 1 ] && printf '%s\n' "$out" | grep -q "hk_tune: rows=4294967295 exceeds the limit" &&
    [ ! -e "$cache/tune.tsv" ]; then
    echo "PASS hk-check tune matvec_int8 q8_0:4294967295x32: read whole, refused by hk_tune"
else
    echo "FAIL hk-check tune matvec_int8 q8_0:4294967295x32: exit $got (want 1 from hk_tune):"
    printf '%s\n' "$out" | tail -n 5
    fail=1
fi
rm -rf "$cache"
# --csv and --json naming a FIFO: one that no process reads is a message at once, not a wait (a
# hang fails at the timeout, exit 124); one that a process reads gets the rows
dir=$(mktemp -d /tmp/hk-options-XXXXXX)
mkfifo "$dir/fifo"
quick="--quick --only quantize_q8_1 --shapes 16384x0x0"
expect 0 "cannot write $dir/fifo: a FIFO that no process reads" timeout 120 "$bench" $quick --csv "$dir/fifo"
expect 0 "cannot write $dir/fifo: a FIFO that no process reads" timeout 120 "$bench" $quick --json "$dir/fifo"
expect 0 "cannot write $dir/fifo: a FIFO that no process reads" timeout 120 "$check" $quick --csv "$dir/fifo"
exec 3<>"$dir/fifo" # this shell reads it (and holds it open for writing, so nothing waits)
expect 0 "quantize_q8_1     16384 " timeout 120 "$bench" $quick --csv "$dir/fifo"
dd bs=65536 count=1 <&3 >"$dir/read.csv" 2>/dev/null # what the pipe holds: the rows, in one read
exec 3<&-
if grep -q "^device,kernel,shape" "$dir/read.csv" && grep -q ",quantize_q8_1,16384," "$dir/read.csv"; then
    echo "PASS hk-bench --csv into a FIFO that a process reads: the rows arrive"
else
    echo "FAIL hk-bench --csv into a FIFO that a process reads:"
    head -n 5 "$dir/read.csv"
    fail=1
fi
rm -rf "$dir"
exit $fail
