#!/usr/bin/env bash
# Every installed header compiles alone, first in its file, in every
# language mode a user may pick: the C headers as C99 and C11 and as C++17
# and C++20, <shmsem/shmsem.hpp> as C++17 and C++20; with gcc and clang,
# -Wall -Wextra -pedantic -Werror. (uring.h once included <errno.h> before
# <liburing.h> and failed as C11: liburing sets its feature macros itself,
# which only works before the first system header.)
#
# Usage: headers_test.sh <source include dir> <generated include dir>
set -u
SRC_INC=${1:?source include dir}
GEN_INC=${2:?generated include dir}
CCS=(${HEADERS_TEST_CC:-gcc clang-14})
CXXS=(${HEADERS_TEST_CXX:-g++ clang++-14})
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
n=0

# compile <compiler> <std> <language: c|c++> <header>
compile() {
	local src=$TMP/t.$3
	[[ $3 == c++ ]] && src=$TMP/t.cc
	# The header first; one declaration after it, so a header that declares
	# nothing in some mode (version.h) is not an empty translation unit.
	printf '#include <shmsem/%s>\nint shmsem_headers_test;\n' "$4" >"$src"
	if ! "$1" -std="$2" -Wall -Wextra -pedantic -Werror -fsyntax-only \
		-I"$SRC_INC" -I"$GEN_INC" "$src" 2>"$TMP/err"; then
		echo "FAIL: $1 -std=$2 <shmsem/$4>:" >&2
		head -5 "$TMP/err" >&2
		bad=1
	fi
	n=$((n + 1))
}

for cc in "${CCS[@]}" "${CXXS[@]}"; do
	command -v "$cc" >/dev/null || { echo "FAIL: $cc is not installed" >&2; exit 1; }
done
for h in shmsem.h inspect.h uring.h version.h; do
	for cc in "${CCS[@]}"; do
		for std in c99 c11; do compile "$cc" "$std" c "$h"; done
	done
	for cxx in "${CXXS[@]}"; do
		for std in c++17 c++20; do compile "$cxx" "$std" c++ "$h"; done
	done
done
for cxx in "${CXXS[@]}"; do
	for std in c++17 c++20; do compile "$cxx" "$std" c++ shmsem.hpp; done
done
((bad == 0)) || exit 1
echo "PASS: $n compilations"
