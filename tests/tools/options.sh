#!/bin/sh
# hk-bench and hk-check options (tests/CMakeLists.txt): --only and --shapes select rows; a name or
# dimensions that match nothing fail with a message instead of an empty, passing run.
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
exit $fail
