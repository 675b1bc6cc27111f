#!/bin/sh
# ctest's model test (tests/model/check.py): hk-run's logits against a numpy forward pass on tiny
# random models of each architecture, and its refusals of bad input.
#   run.sh PYTHON CHECK_PY OUT_DIR HK_RUN
# No Python, or no gguf or numpy in it: SKIP (exit 77) unless HK_REQUIRE_GGUF=1, as the gguf test.
# LD_PRELOAD, or HK_GGUF_PRELOAD where set (the ASan build's runtime and lavapipe), goes to hk-run
# only, never to Python.
python=$1 script=$2 out=$3 hkrun=$4
. "$(dirname "$0")/../gguf/need_gguf.sh"
need_gguf model "$python"
preload=${HK_GGUF_PRELOAD:-${LD_PRELOAD:-}}
exec env -u LD_PRELOAD HK_RUN_PRELOAD="$preload" "$python" "$script" --hk-run "$hkrun" --out "$out"
