#!/usr/bin/env bash
# Model-check verify/shmsem.pml with SPIN: every configuration below is
# generated (spin -a), compiled (gcc) and searched exhaustively (pan), and one
# summary line is printed per run. Exits non-zero if any run reports an error
# (assertion, invalid end state = a waiter stuck forever, acceptance cycle,
# or an incomplete search). What the model checks: verify/MODEL.md.
#
#   verify/run.sh [--jobs N] [--only NAME]... [-D...]...
#
#   --jobs N     searches to run at once (default: 2, or 1 on one CPU; each
#                takes up to ~1.5 GB)
#   --only NAME  run only that configuration (repeatable)
#   -DNAME[=V]   an extra spin -D option for every configuration
#
# Temporary files live in a mktemp directory, removed on success; a failing
# run keeps its directory (trail included) and prints how to replay it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model="$here/shmsem.pml"

# name | spin -D options | kind (safety: assertions + invalid end states;
#                                 ltl: the `terminates` claim, weak fairness)
configs=(
	"n1-crash2|-DN=1 -DMAXCRASH=2 -DSHUTDOWN -DDOUBLE_RELEASE|safety"
	"n2-crash2|-DN=2 -DMAXCRASH=2 -DSHUTDOWN -DDOUBLE_RELEASE|safety"
	"n2-ops2|-DN=2 -DOPS1=2 -DMAXCRASH=1 -DDOUBLE_RELEASE|safety"
	"n1-w2|-DN=1 -DW=2 -DMAXCRASH=1 -DSHUTDOWN|safety"
	"n1-live|-DN=1 -DMAXCRASH=1 -DSHUTDOWN -DLTL_TERMINATES|ltl"
	"n2-live|-DN=2 -DMAXCRASH=2 -DLTL_TERMINATES|ltl"
)

extra=""
jobs=$(( $(nproc 2>/dev/null || echo 1) > 1 ? 2 : 1 ))
only=()
while [ $# -gt 0 ]; do
	case "$1" in
	-D*) extra="$extra $1" ;;
	--jobs) jobs="$2"; shift ;;
	--only) only+=("$2"); shift ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done

for tool in spin gcc; do
	if ! command -v "$tool" >/dev/null; then
		echo "run.sh: '$tool' not found; run 'make deps' (Debian packages spin, gcc)" >&2
		exit 2
	fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/shmsem-verify.XXXXXX")
keep=0
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

# One configuration: generate, compile, search; leaves $dir/summary.
verify_one() {
	local name="$1" defs="$2$extra" kind="$3"
	local dir="$work/$name"
	mkdir -p "$dir"
	cp "$model" "$dir/shmsem.pml"
	local cflags="-O0 -w" panflags="-w25"
	# -O0: the generated pan.c is large; -O2 compiles for ~1 min per
	# configuration to search ~25% faster.
	if [ "$kind" = safety ]; then
		cflags="$cflags -DSAFETY"
	else
		panflags="$panflags -a -f"
	fi
	local t0 t1 status=ok
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	if ! (cd "$dir" && spin $defs -a shmsem.pml >spin.out 2>&1); then
		status="spin -a failed (see $dir/spin.out)"
	elif ! (cd "$dir" && gcc $cflags -o pan pan.c >cc.out 2>&1); then
		status="gcc failed (see $dir/cc.out)"
	elif ! (cd "$dir" && ./pan $panflags >pan.out 2>&1); then
		status="pan exited with an error"
	fi
	t1=$(date +%s.%N)
	local out="$dir/pan.out" states="-" trans="-" errors="-" secs="-" verdict
	if [ -f "$out" ]; then
		states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
		trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$out" | head -1)
		errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
		secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$out" | head -1)
		if [ "$status" = ok ]; then
			if [ -z "$errors" ]; then
				status="no result in pan output"
			elif [ "$errors" != 0 ]; then
				status=$(grep -m1 -E '^pan:[0-9]+: ' "$out" | sed 's/^pan:[0-9]*: //' || true)
				[ -n "$status" ] || status="$errors error(s)"
			elif grep -qE 'out of memory|max search depth too small|Search not completed' "$out"; then
				status="search incomplete: $(grep -m1 -E 'out of memory|max search depth too small|Search not completed' "$out")"
			fi
		fi
	fi
	if [ "$status" = ok ]; then verdict=PASS; else verdict=FAIL; fi
	printf '%-4s %-22s %-6s states %-10s transitions %-11s errors %-3s search %6ss  total %5ss  %s\n' \
		"$verdict" "$name" "$kind" "${states:--}" "${trans:--}" "${errors:--}" \
		"${secs:--}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
		"$defs" >"$dir/summary"
	if [ "$verdict" = FAIL ]; then
		{
			echo "     -> $status"
			echo "     -> replay: cd $dir && spin -t -p -g $defs shmsem.pml | less"
		} >>"$dir/summary"
		echo FAIL >"$dir/verdict"
	else
		echo PASS >"$dir/verdict"
	fi
}

selected=()
for c in "${configs[@]}"; do
	name=${c%%|*}
	if [ ${#only[@]} -gt 0 ]; then
		match=0
		for o in "${only[@]}"; do [ "$o" = "$name" ] && match=1; done
		[ "$match" = 1 ] || continue
	fi
	selected+=("$c")
done
if [ ${#selected[@]} -eq 0 ]; then
	echo "run.sh: no such configuration: ${only[*]}" >&2
	exit 2
fi

echo "shmsem: SPIN $(spin -V | sed -n 's/^Spin Version \([^ ]*\).*/\1/p'), model $model${extra:+ (${extra# })}, $jobs at a time" >&2
start=$(date +%s)
running=0
for c in "${selected[@]}"; do
	IFS='|' read -r name defs kind <<<"$c"
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	verify_one "$name" "$defs" "$kind" &
	running=$((running + 1))
done
wait || true

failed=0
for c in "${selected[@]}"; do
	name=${c%%|*}
	cat "$work/$name/summary"
	[ "$(cat "$work/$name/verdict" 2>/dev/null)" = PASS ] || failed=$((failed + 1))
done
echo "total $(( $(date +%s) - start ))s: ${#selected[@]} run(s), $failed failed"
if [ "$failed" -gt 0 ]; then
	keep=1
	echo "kept: $work" >&2
	exit 1
fi
