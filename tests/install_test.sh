#!/usr/bin/env bash
# The installed package, as an engine's build uses it (ctest `install`):
#   install_test.sh BUILD_DIR SOURCE_DIR [CMEEL_PREFIX]   (BUILD_DIR: the suite's; the package is built afresh)
# Configures and builds the library and tools from SOURCE_DIR in a scratch tree with a multiarch
# libdir (lib/x86_64-linux-gnu), installs them into a scratch prefix, then checks:
#  - the static archive and the shared library export hk_ symbols only (volk stays private), the
#    soname changes with the 0.x minor version;
#  - the installed hk-check starts from the prefix with no LD_LIBRARY_PATH (RUNPATH $ORIGIN/...);
#  - hkernel.pc finds the prefix from the multiarch libdir;
#  - tests/consumer builds through the CMake package (shared: prototypes, hkernel.h first; static:
#    beside the engine's own volk, hkernel.h before and after volk.h) and through pkg-config, and
#    runs; hkernel.h before volk.h without VK_NO_PROTOTYPES stops at volk's #error;
#  - a parent project that add_subdirectory()s the source gets no tools and no tests;
#  - tests/engine (an engine owning its device, two threads recording a decode step) builds from
#    the package alone, with CMake (static) and pkg-config (shared), and runs with synchronization
#    validation: any validation message fails it.
set -euo pipefail
build=$1 src=$(cd "$2" && pwd) cmeel=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libdir=lib/x86_64-linux-gnu
prefix=$tmp/prefix
fail() { echo "FAIL install: $*"; exit 1; }
step() { echo "-- $*"; }

step "configure and build (libdir $libdir)"
cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_LIBDIR=$libdir \
      -DHK_BUILD_TESTS=OFF -DHK_BUILD_TOOLS=ON ${cmeel:+-DHK_CMEEL_PREFIX=$cmeel} >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log"; fail "configure"; }
cmake --build "$tmp/build" -j2 >"$tmp/build.log" 2>&1 || { tail -50 "$tmp/build.log"; fail "build"; }
cmake --install "$tmp/build" --prefix "$prefix" >/dev/null
test -f "$prefix/$libdir/libhkernel.a" && test -f "$prefix/$libdir/pkgconfig/hkernel.pc" &&
    test -f "$prefix/$libdir/cmake/hkernel/hkernelConfig.cmake" || fail "files missing under $prefix/$libdir"

step "exported symbols"
leaked=$(nm -g --defined-only "$prefix/$libdir/libhkernel.a" | awk 'NF == 3 { print $3 }' | grep -v '^hk_' || true)
[ -z "$leaked" ] || fail "the static archive exports non-hk_ symbols: $(echo $leaked | head -c 300)"
n=$(nm -g --defined-only "$prefix/$libdir/libhkernel.a" | awk 'NF == 3' | grep -c ' hk_' || true)
[ "$n" -gt 50 ] || fail "the static archive exports only $n hk_ symbols"
so=$(readlink -f "$prefix/$libdir/libhkernel.so")
leaked=$(nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | grep -v -e '^hk_' -e '^_edata$' -e '^_end$' -e '^__bss_start$' -e '^_init$' -e '^_fini$' || true)
[ -z "$leaked" ] || fail "the shared library exports non-hk_ symbols: $(echo $leaked | head -c 300)"
version=$(sed -n 's/^#define HK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/include/hkernel.h" | paste -sd.)
major=${version%%.*} minor=$(echo "$version" | cut -d. -f2)
want_soname=libhkernel.so.$major
[ "$major" = 0 ] && want_soname=libhkernel.so.0.$minor
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "$want_soname" ] || fail "soname $soname, want $want_soname"
test -e "$prefix/$libdir/$soname" || fail "no $soname link"

step "installed hk-check runs from the prefix"
runpath=$(readelf -d "$prefix/bin/hk-check" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\].*/\2/p')
[ "$runpath" = "\$ORIGIN/../$libdir" ] || fail "hk-check RUNPATH is '$runpath'"
env -u LD_LIBRARY_PATH "$prefix/bin/hk-check" --help >"$tmp/help.txt" || fail "installed hk-check --help"
grep -q -- "--gguf" "$tmp/help.txt" || fail "hk-check --help does not mention --gguf"
env -u LD_LIBRARY_PATH "$prefix/bin/hk-bench" --help >/dev/null || fail "installed hk-bench --help"

step "pkg-config"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
pc_prefix=$(pkg-config --variable=prefix hkernel)
[ "$(readlink -f "$pc_prefix")" = "$(readlink -f "$prefix")" ] || fail "hkernel.pc prefix is $pc_prefix"
[ "$(readlink -f "$(pkg-config --variable=libdir hkernel)")" = "$(readlink -f "$prefix/$libdir")" ] ||
    fail "hkernel.pc libdir is $(pkg-config --variable=libdir hkernel)"
[ "$(pkg-config --modversion hkernel)" = "$version" ] || fail "hkernel.pc version"

step "consumer: CMake package"
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/consumer.log" 2>&1 ||
    { cat "$tmp/consumer.log"; fail "consumer configure"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "consumer build"; }
"$tmp/consumer/c" || fail "consumer (shared)"
"$tmp/consumer/cs" || fail "consumer (static, beside the engine's volk)"

step "consumer: pkg-config"
pcflags=$(pkg-config --cflags hkernel) pclibs=$(pkg-config --libs hkernel)
cc -Wall -Wextra -Werror "$src/tests/consumer/main.c" "$src/tests/consumer/prototypes.c" $pcflags $pclibs -lvulkan \
   -Wl,-rpath,"$(pkg-config --variable=libdir hkernel)" -o "$tmp/pc"
"$tmp/pc" || fail "pkg-config consumer"
volk_c=$(ls /usr/include/volk.c 2>/dev/null || true)
if [ -n "$volk_c" ]; then
    cc -Wall -Wextra -Werror -DVK_NO_PROTOTYPES -DCONSUMER_VOLK "$src/tests/consumer/main.c" \
       "$src/tests/consumer/volk_first.c" "$src/tests/consumer/volk_second.c" "$volk_c" $pcflags \
       "$prefix/$libdir/libhkernel.a" $(pkg-config --static --libs-only-other hkernel) -ldl -lm -o "$tmp/pcs"
    "$tmp/pcs" || fail "pkg-config consumer (static archive)"
    if cc -c "$src/tests/consumer/no_prototypes_missing.c" $pcflags -o "$tmp/np.o" 2>"$tmp/np.log"; then
        fail "hkernel.h before volk.h without VK_NO_PROTOTYPES compiled (hkernel.h promises volk's #error)"
    fi
    grep -q "VK_NO_PROTOTYPES" "$tmp/np.log" || { cat "$tmp/np.log"; fail "the include-order error does not say VK_NO_PROTOTYPES"; }
fi

step "a parent project with add_subdirectory"
cmake -S "$src/tests/consumer/parent" -B "$tmp/parent" -DHK_SOURCE_DIR="$src" ${cmeel:+-DHK_CMEEL_PREFIX=$cmeel} \
      >"$tmp/parent.log" 2>&1 || { cat "$tmp/parent.log"; fail "parent project"; }
ntests=$(cd "$tmp/parent" && ctest -N | sed -n 's/^Total Tests: //p')
[ "${ntests:-0}" = 0 ] || fail "the parent project inherited $ntests tests"

step "engine: CMake package (static), two threads, synchronization validation"
cmake -S "$src/tests/engine" -B "$tmp/engine" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/engine.log" 2>&1 ||
    { cat "$tmp/engine.log"; fail "engine configure"; }
cmake --build "$tmp/engine" >>"$tmp/engine.log" 2>&1 || { cat "$tmp/engine.log"; fail "engine build"; }
export VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
"$tmp/engine/engine" || fail "engine (static)"

step "engine: pkg-config (shared)"
if [ -n "$volk_c" ]; then
    cc -Wall -Wextra -Werror -std=c11 -DVK_NO_PROTOTYPES "$src/tests/engine/engine.c" "$volk_c" $pcflags $pclibs \
       -Wl,-rpath,"$(pkg-config --variable=libdir hkernel)" -pthread -ldl -lm -o "$tmp/engine-pc"
    "$tmp/engine-pc" | tail -3 || fail "engine (shared)"
fi
echo "install test passed"
