#!/bin/sh
# ctest's gguf test: writes the .gguf test data with gguf-py, then runs test_gguf on it.
#   run.sh PYTHON make_gguf.py OUT_DIR TEST_GGUF
# No Python, or no `gguf` package in it: SKIP (exit 77, ctest's SKIP_RETURN_CODE), unless
# HK_REQUIRE_GGUF=1 (CI), where that is a failure. HK_GGUF_PRELOAD, if set, becomes test_gguf's
# LD_PRELOAD (the ASan build preloads its runtime and lavapipe there, not into Python or sh).
python=$1 script=$2 out=$3 test=$4
. "$(dirname "$0")/need_gguf.sh"
need_gguf gguf "$python"
env -u LD_PRELOAD "$python" "$script" "$out" || exit 1
if [ -n "${HK_GGUF_PRELOAD:-}" ]; then
    LD_PRELOAD=$HK_GGUF_PRELOAD exec "$test" "$out/hk-gguf-test.gguf" "$out/hk-gguf-test-expected.gguf"
fi
exec "$test" "$out/hk-gguf-test.gguf" "$out/hk-gguf-test-expected.gguf"
