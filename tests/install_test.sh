#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a consumer against it, through the CMake
# package (shared and static targets) and through pkg-config.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/c"
"$tmp/consumer/cs"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc "$src/tests/consumer/main.c" $(pkg-config --cflags --libs hkernel) -o "$tmp/pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc"
echo "install test passed"
