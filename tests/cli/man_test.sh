#!/usr/bin/env bash
# Man page checks: man_test.sh <Case> <libshmsem.so> <generated man dir>
source "$(dirname "$0")/lib.sh"

LIB=${2:?libshmsem.so}
MANDIR=${3:?generated man directory}

EverySymbolHasAPage() {
	local sym missing=()
	command -v nm >/dev/null || skip "nm (binutils) is not installed"
	mapfile -t syms < <(nm -D --defined-only "$LIB" | awk '$3 ~ /^shmsem_/ {sub(/@.*/, "", $3); print $3}' | sort -u)
	((${#syms[@]} > 0)) || fail "no shmsem_* symbols in $LIB"
	for sym in "${syms[@]}"; do
		[[ -f $MANDIR/man3/$sym.3 ]] || missing+=("$sym")
	done
	((${#missing[@]} == 0)) || fail "exported without a man3 page: ${missing[*]}"
	[[ -f $MANDIR/man1/shmsem.1 ]] || fail "no shmsem(1)"
	[[ -f $MANDIR/man7/shmsem.7 ]] || fail "no shmsem(7)"
	echo "${#syms[@]} symbols, all documented"
}

PagesRenderWithoutWarnings() {
	local page out bad=0 n=0
	command -v groff >/dev/null || skip "groff is not installed"
	cd "$MANDIR"  # so ".so man3/x.3" links resolve as they do once installed
	for page in man1/*.1 man3/*.3 man7/*.7; do
		out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
		if [[ -n $out ]]; then
			echo "$page: $out" >&2
			bad=1
		fi
		# Every page (or the page a link names) has the sections we promise.
		if ! grep -q '^\.so ' "$page"; then
			local s
			for s in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
				grep -q "^\.SH \"\?$s\"\?\$" "$page" || { echo "$page: no $s section" >&2; bad=1; }
			done
		fi
		if command -v man >/dev/null; then
			out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
			if [[ -n $out ]]; then
				echo "$page (man): $out" >&2
				bad=1
			fi
		fi
		n=$((n + 1))
	done
	((bad == 0)) || fail "man pages render with warnings"
	((n > 3)) || fail "only $n pages found in $MANDIR"
	grep -q '@PROJECT_VERSION@' man*/* && fail "version placeholder left in a generated page"
	echo "$n pages render cleanly"
}

# `man -l` resolves a ".so man3/x.3" page against the current directory, so
# a page that only named another failed anywhere but at the manual's root.
# The generated pages (what is installed) are whole pages: each opens with
# `man -l` from any directory.
EveryPageOpensWithManDashLFromAnywhere() {
	local page out bad=0
	command -v man >/dev/null || skip "man (man-db) is not installed"
	cd /
	for page in "$MANDIR"/man1/*.1 "$MANDIR"/man3/*.3 "$MANDIR"/man7/*.7; do
		grep -q '^\.so ' "$page" && { echo "$page: a .so link" >&2; bad=1; }
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>&1 >/dev/null)
		[[ -z $out ]] || { echo "$page: $out" >&2; bad=1; }
	done
	((bad == 0)) || fail "pages that man -l cannot open from /"
}

case=${1:?usage: man_test.sh <Case> <lib> <mandir>}
declare -F "$case" >/dev/null || fail "no test case $case"
"$case"
echo "PASS: $case"
