#!/bin/sh
# ctest's gguf_check test: hk-check --gguf on GGUF files written by gguf-py (tests/gguf/make_gguf.py):
#   check.sh PYTHON make_gguf.py OUT_DIR HK_CHECK
# the model (v3, and the same as v2): every tensor a kernel takes within its gate (F16 matrices
# through hk_matvec, the one holding inf and NaN rows too), the others listed as skipped with their
# type, shapes as rows x k; one tensor timed, in row slices, and an F16 one timed; a truncated
# file, a corrupted tensor count, a wrong magic, a missing file, and a FIFO, a directory, a device,
# links to them and a huge sparse file: exit 2 with a clear message, no crash, no hang.
# No Python or no gguf: SKIP (77) unless HK_REQUIRE_GGUF=1, as the gguf test.
python=$1 script=$2 out=$3 hkcheck=$4
. "$(dirname "$0")/need_gguf.sh"
need_gguf gguf_check "$python"
env -u LD_PRELOAD "$python" "$script" "$out" >/dev/null || exit 1
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
pass() { echo "PASS $*"; }

# expect NAME EXIT_CODE PATTERN... -- ARGS: runs hk-check ARGS, wants that exit code and every
# pattern (grep -E) somewhere in its output
expect() {
    name=$1 want=$2
    shift 2
    patterns=""
    while [ "$1" != "--" ]; do
        patterns="$patterns
$1"
        shift
    done
    shift
    "$hkcheck" "$@" >"$out/last.txt" 2>&1
    rc=$?
    ok=1
    [ "$rc" = "$want" ] || ok=0
    echo "$patterns" | while IFS= read -r p; do
        [ -z "$p" ] && continue
        grep -Eq -- "$p" "$out/last.txt" || { echo "    missing: $p"; exit 1; }
    done || ok=0
    if [ "$ok" = 1 ]; then
        pass "$name (exit $rc)"
    else
        fail "$name: exit $rc, want $want"
        sed 's/^/    /' "$out/last.txt" | tail -40
    fi
}

m=$out/hk-gguf-test.gguf
expect "model: every tensor a kernel takes, within its gate" 0 \
    "GGUF v3, 35 tensors" \
    "^q4_k\.2048 +q4_k +6x2048 +[0-9.e+-]+ ok +[0-9.e+-]+ ok" \
    "^blk\.0\.ffn_down_exps\.weight +q6_k +8x16x768 +[0-9.e+-]+ ok +[0-9.e+-]+ ok" \
    "^q8_0\.edge_big +q8_0 .* ok .* ok" \
    "^f32\.router +f32 +16x2048 +[0-9.e+-]+ ok" \
    "^q5_k\.2048 +q5_k +6x2048 +[0-9.e+-]+ ok +[0-9.e+-]+ ok" \
    "^q5_k\.edge_big +q5_k .* ok .* ok" \
    "^blk\.1\.ffn_gate_exps\.weight +q5_k +8x8x2048 +[0-9.e+-]+ ok +[0-9.e+-]+ ok" \
    "^iq4_nl\.unsupported +iq4_nl +3x64 +skipped: no kernel takes this type" \
    "^f16\.all +f16 +32x2048 +[0-9.e+-]+ ok +- *$" \
    "^f16\.2048 +f16 +6x2048 +[0-9.e+-]+ ok +- *$" \
    "^blk\.0\.attn_norm\.weight +f32 +256 +skipped: a vector" \
    "^OK: 28 tensor\(s\) checked, 0 failed, 7 skipped" \
    -- --gguf "$m" --no-time
if grep -q "FAIL" "$out/last.txt"; then fail "model: a FAIL row"; fi
if grep -Eq "^[^ ]+ +f16 .*skipped" "$out/last.txt"; then fail "model: an F16 matrix skipped"; fi
# shapes print rows x k (as hk-check tune and --shapes take them), never in GGUF's order (k first)
if grep -Eq " (2048x6|768x16x8|2048x16) " "$out/last.txt"; then
    fail "model: a shape printed in GGUF's order (k first)"
else
    pass "model: shapes print rows x k"
fi
expect "model as GGUF v2" 0 "GGUF v2, 35 tensors" "^OK: 28 tensor\(s\) checked, 0 failed" \
    -- --gguf "$out/hk-gguf-test-v2.gguf" --no-time
expect "timed, in row slices" 0 \
    "^q4_k\.2048 +q4_k +6x2048 +[0-9.e+-]+ ok [0-9.]+ [0-9.]+ [0-9]+% +[0-9.e+-]+ ok [0-9.]+ [0-9.]+ [0-9]+% +\(3 row slices\)" \
    "^OK: 1 tensor\(s\) checked" \
    -- --gguf "$m" --match q4_k.2048 --slice-bytes 3000
expect "an F16 matrix timed, hk_matvec only" 0 \
    "^f16\.2048 +f16 +6x2048 +[0-9.e+-]+ ok [0-9.]+ [0-9.]+ [0-9]+% +- *$" \
    "^OK: 1 tensor\(s\) checked" \
    -- --gguf "$m" --match f16.2048
expect "truncated file" 2 "hk-gguf-truncated.gguf: not a valid GGUF file: .*runs past the file's end" \
    -- --gguf "$out/hk-gguf-truncated.gguf"
expect "corrupted tensor count" 2 "hk-gguf-bad-count.gguf: not a valid GGUF file: .*tensor infos cannot fit" \
    -- --gguf "$out/hk-gguf-bad-count.gguf"
expect "wrong magic" 2 "not a valid GGUF file: .*not a GGUF file \(magic 47 47 55 47\)" \
    -- --gguf "$out/hk-gguf-bad-magic.gguf"
expect "missing file" 2 "hk-gguf-none.gguf: cannot open" -- --gguf "$out/hk-gguf-none.gguf"
# refused NAME PATH PATTERN: hk-check --gguf PATH exits 2 with PATTERN in its output, never
# waiting on what is at PATH (a hang fails at the timeout)
refused() {
    timeout 60 "$hkcheck" --gguf "$2" --no-time >"$out/last.txt" 2>&1
    rc=$?
    if [ "$rc" = 2 ] && grep -Eq -- "$3" "$out/last.txt"; then
        pass "$1 (exit 2)"
    elif [ "$rc" = 124 ]; then
        fail "$1: hung (no answer within 60 s)"
    else
        fail "$1: exit $rc, want 2 and \"$3\""
        sed 's/^/    /' "$out/last.txt" | tail -10
    fi
}
odd=$out/odd
rm -rf "$odd"
mkdir -p "$odd/dir"
mkfifo "$odd/fifo"
ln -s fifo "$odd/link-fifo"
ln -s /dev/zero "$odd/link-zero"
ln -s dir "$odd/link-dir"
refused "a FIFO" "$odd/fifo" "fifo: not a regular file"
refused "a link to a FIFO" "$odd/link-fifo" "link-fifo: not a regular file"
refused "a directory" "$odd/dir" "dir: not a regular file"
refused "a link to a directory" "$odd/link-dir" "link-dir: not a regular file"
refused "a device (/dev/zero)" /dev/zero "/dev/zero: not a regular file"
refused "a link to /dev/zero" "$odd/link-zero" "link-zero: not a regular file"
# a huge file (sparse): mapped, never read through; its zeros are no GGUF header
if truncate -s 64G "$odd/huge.gguf" 2>/dev/null; then
    refused "a huge file" "$odd/huge.gguf" "huge.gguf: not a valid GGUF file: .*not a GGUF file \(magic 00 00 00 00\)"
else
    echo "(no 64 GiB sparse file here: the huge-file case not run)"
fi
rm -rf "$odd"
expect "--gguf without a file" 2 "usage: hk-check --gguf" -- --gguf
expect "--gguf --help" 0 "--slice-bytes" "Shapes print rows x k" -- --gguf "$m" --help
echo "gguf_check: $failures failure(s)"
[ "$failures" = 0 ]
