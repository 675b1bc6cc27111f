#!/bin/sh
# ctest's gguf test: writes the .gguf test data with gguf-py, then runs test_gguf on it.
#   run.sh PYTHON make_gguf.py OUT_DIR TEST_GGUF
# No Python, or no `gguf` package in it: SKIP (exit 77, ctest's SKIP_RETURN_CODE), unless
# HK_REQUIRE_GGUF=1 (CI), where that is a failure. HK_GGUF_PRELOAD, if set, becomes test_gguf's
# LD_PRELOAD (the ASan build preloads its runtime and lavapipe there, not into Python or sh).
python=$1 script=$2 out=$3 test=$4
missing=""
if [ -z "$python" ] || [ ! -x "$python" ]; then
    missing="no Python (HK_PYTHON='$python')"
elif ! why=$(env -u LD_PRELOAD "$python" -c "import gguf, numpy" 2>&1); then
    missing="$python cannot import gguf and numpy: $(printf '%s\n' "$why" | tail -n 1)"
fi
if [ -n "$missing" ]; then
    if [ "${HK_REQUIRE_GGUF:-0}" = 1 ]; then
        echo "FAIL gguf: $missing (HK_REQUIRE_GGUF=1; ./hk.sh deps installs gguf into build-tools/venv)"
        exit 1
    fi
    echo "SKIP gguf: $missing (pip install gguf, or set HK_PYTHON; HK_REQUIRE_GGUF=1 makes this a failure)"
    exit 77
fi
env -u LD_PRELOAD "$python" "$script" "$out" || exit 1
if [ -n "${HK_GGUF_PRELOAD:-}" ]; then
    LD_PRELOAD=$HK_GGUF_PRELOAD exec "$test" "$out/hk-gguf-test.gguf" "$out/hk-gguf-test-expected.gguf"
fi
exec "$test" "$out/hk-gguf-test.gguf" "$out/hk-gguf-test-expected.gguf"
