#!/usr/bin/env bash
# Install into a temporary prefix, then build and run both examples against
# the installed copy only: install_test.sh <build dir> <source dir>
source "$(dirname "$0")/lib.sh"

BUILD=${1:?build dir}
SRC=${2:?source dir}
P=$TMP/prefix

command -v pkg-config >/dev/null || skip "pkg-config is not installed"
command -v cc >/dev/null || skip "no C compiler"

expect_rc 0 cmake --install "$BUILD" --prefix "$P"
for f in bin/shmsem include/shmsem/shmsem.h include/shmsem/version.h \
	share/man/man1/shmsem.1 share/man/man7/shmsem.7 share/man/man3/shmsem_acquire.3; do
	[[ -e $P/$f ]] || fail "not installed: $f"
done
LIBDIR=$(dirname "$(find "$P" -name libshmsem.so -print -quit)")
[[ -d $LIBDIR ]] || fail "libshmsem.so not installed"
[[ -e $LIBDIR/libshmsem.a && -e $LIBDIR/pkgconfig/shmsem.pc && -e $LIBDIR/cmake/shmsem/shmsemConfig.cmake ]] ||
	fail "static library, shmsem.pc or shmsemConfig.cmake missing under $LIBDIR"

# The installed command and its version.
expect_rc 0 "$P/bin/shmsem" --version
version=$(cat "$TMP/out")
expect_rc 0 env PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --modversion shmsem
[[ $(cat "$TMP/out") == "$version" ]] || fail "shmsem.pc says $(cat "$TMP/out"), the command $version"
expect_rc 0 env PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags shmsem
expect_out "-I$P/include"
grep -q "$version" "$P/include/shmsem/version.h" || fail "version.h does not carry $version"
# Links in man3 resolve once installed.
if command -v man >/dev/null; then
	expect_rc 0 env MANWIDTH=80 man -M "$P/share/man" 3 shmsem_acquire_until
	expect_out "shmsem_acquire_until"
fi

# The C example: plain Makefile + pkg-config, against the installed copy.
cp -r "$SRC/examples/worker-pool-c" "$TMP/"
expect_rc 0 env PKG_CONFIG_PATH="$LIBDIR/pkgconfig" make -C "$TMP/worker-pool-c"
grep -q -- "-I$P/include" "$TMP/out" || fail "worker-pool was not built against $P"
expect_rc 0 env LD_LIBRARY_PATH="$LIBDIR" "$TMP/worker-pool-c/worker-pool" -p 2 -j 5 -t 20 "$(name worker-pool)"
expect_out "5 jobs done, 0 stopped, 0 failed"
# (Captured first: `ldd | grep -q` fails under pipefail when grep exits early.)
loaded=$(env LD_LIBRARY_PATH="$LIBDIR" ldd "$TMP/worker-pool-c/worker-pool")
[[ $loaded == *"$LIBDIR/libshmsem.so.2"* ]] ||
	fail "worker-pool does not load the installed libshmsem: $loaded"

# The C++ example: find_package(shmsem CONFIG) with CMAKE_PREFIX_PATH.
expect_rc 0 cmake -S "$SRC/examples/cpp-cmake" -B "$TMP/cpp-build" -DCMAKE_PREFIX_PATH="$P"
expect_rc 0 cmake --build "$TMP/cpp-build"
expect_rc 0 "$TMP/cpp-build/lease-guard" "$(name lease-guard)" 3
expect_out "shmsem $version: holding resource"
expect_out "(1 of 3 permits held)"
expect_out "released: 3 of 3 permits available"
grep -q "shmsem_DIR:PATH=$LIBDIR/cmake/shmsem" "$TMP/cpp-build/CMakeCache.txt" ||
	fail "cpp-cmake found another shmsem: $(grep shmsem_DIR "$TMP/cpp-build/CMakeCache.txt")"
echo "PASS: installed into $P; both examples built and ran"
