# Sourced by run.sh and check.sh: need_gguf TEST PYTHON returns when PYTHON imports gguf and numpy;
# otherwise the test is skipped (exit 77, ctest's SKIP_RETURN_CODE), or fails where
# HK_REQUIRE_GGUF=1 (CI).
need_gguf() {
    missing=""
    if [ -z "$2" ] || [ ! -x "$2" ]; then
        missing="no Python (HK_PYTHON='$2')"
    elif ! why=$(env -u LD_PRELOAD "$2" -c "import gguf, numpy" 2>&1); then
        missing="$2 cannot import gguf and numpy: $(printf '%s\n' "$why" | tail -n 1)"
    fi
    [ -z "$missing" ] && return 0
    if [ "${HK_REQUIRE_GGUF:-0}" = 1 ]; then
        echo "FAIL $1: $missing (HK_REQUIRE_GGUF=1; ./hk.sh deps installs gguf into build-tools/venv)"
        exit 1
    fi
    echo "SKIP $1: $missing (pip install gguf, or set HK_PYTHON; HK_REQUIRE_GGUF=1 makes this a failure)"
    exit 77
}
