#!/usr/bin/env bash
# Model-check the SPIN models in verify/ (shmsem.pml, the protocol; lock.pml,
# the segment lock; fastpath.pml, the lock-free path; weighted.pml, weighted
# leases and the capacity; bounded.pml, the bounded policy; redis.pml, the
# Redis backend): every
# configuration below is generated (spin -a),
# compiled (PAN_CC) and searched exhaustively (pan), and one summary line is
# printed per run. Exits non-zero if any run reports an error (assertion,
# invalid end state = a waiter stuck forever, acceptance cycle, or an
# incomplete search), or if a run expected to find a known error (XFAIL)
# finds none. What the models check: verify/MODEL.md.
#
#   verify/run.sh [--quick] [--jobs N] [--cache DIR] [--only NAME]... [-D...]...
#
#   --quick      only the smaller configurations of each model (the list
#                `quick` below: every model, with crashes, liveness and each
#                known error; about a third of the full run's time). `make
#                test` runs these; `make verify` runs all.
#   --jobs N     searches to run at once (default: 2, or 1 on one CPU; each
#                takes up to ~3 GB)
#   --cache DIR  keep each compiled verifier in DIR and reuse it when
#                spin generates the same pan.* and the compiler and its flags
#                are the same (the compile is over half of a quick run's
#                CPU); `make verify` and `make verify-quick` use
#                build/verify-cache. Entries unused for 30 days are removed.
#   --only NAME  run only that configuration (repeatable; a glob: 'lock*')
#   -DNAME[=V]   an extra spin -D option for every configuration
#
# PAN_CC is the C compiler of the verifiers: by default clang-14 (Debian's
# clang-14, which `make deps` installs for the fuzzer) when there is one,
# else gcc. At -O0 clang compiles a pan.c in half gcc's time, and the two
# verifiers search alike (the same states, the same CPU time).
#
# Temporary files live in a mktemp directory, removed on success; a failing
# run keeps its directory (trail included) and prints how to replay it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

# name | model | spin -D options | kind | expect
#   kind:   safety (assertions + invalid end states) or ltl (the model's
#           claim under weak fairness)
#   expect: pass, or xfail:TEXT: the run must find an error whose message
#           contains TEXT (a known defect of the code, pinned until it is
#           fixed; MODEL.md says which)
configs=(
	"n1-crash2|shmsem.pml|-DN=1 -DMAXCRASH=2 -DSHUTDOWN -DDOUBLE_RELEASE|safety|pass"
	"n2-crash2|shmsem.pml|-DN=2 -DMAXCRASH=2 -DSHUTDOWN -DDOUBLE_RELEASE|safety|pass"
	"n2-ops2|shmsem.pml|-DN=2 -DOPS1=2 -DMAXCRASH=1 -DDOUBLE_RELEASE|safety|pass"
	"n1-w2|shmsem.pml|-DN=1 -DW=2 -DMAXCRASH=1 -DSHUTDOWN|safety|pass"
	"n1-live|shmsem.pml|-DN=1 -DMAXCRASH=1 -DSHUTDOWN -DLTL_TERMINATES|ltl|pass"
	"n2-live|shmsem.pml|-DN=2 -DMAXCRASH=2 -DLTL_TERMINATES|ltl|pass"
	# processes 2 and 3 always wait with a deadline (TIMED=12), so that
	# waiters leave without the lock as often as possible (MODEL.md, LEAVE)
	"n1-leave|shmsem.pml|-DN=1 -DTIMED=12 -DMAXCRASH=2 -DSHUTDOWN -DDOUBLE_RELEASE|safety|pass"
	"n1-leave-live|shmsem.pml|-DN=1 -DTIMED=12 -DMAXCRASH=1 -DSHUTDOWN -DLTL_TERMINATES|ltl|pass"
	"lock-t3-live|lock.pml|-DNT=3 -DMAXCRASH=2 -DMAXLOST=1 -DLTL_LIVE|ltl|pass"
	"lock-t2-crash2|lock.pml|-DNT=2 -DCYCLES=3 -DMAXCRASH=2 -DMAXLOST=1 -DCORRUPT|safety|pass"
	"lock-t3-crash2|lock.pml|-DNT=3 -DMAXCRASH=2 -DCORRUPT|safety|pass"
	"lock-t2-live|lock.pml|-DNT=2 -DCYCLES=3 -DMAXCRASH=2 -DMAXLOST=2 -DLTL_LIVE|ltl|pass"
	"lock-t3-ops2|lock.pml|-DNT=3 -DCYCLES1=2 -DMAXCRASH=0|safety|pass"
	"lock-t2-recycle|lock.pml|-DNT=2 -DCYCLES=2 -DRECYCLE=1 -DMAXCRASH=0 -DMAXLOST=1|safety|pass"
	"lock-t1-recycle-live|lock.pml|-DNT=1 -DRECYCLE=1 -DMAXCRASH=1 -DMAXLOST=1 -DLTL_LIVE|ltl|pass"
	"lock-t2-recycle-kill|lock.pml|-DNT=2 -DRECYCLE=1 -DMAXCRASH=1|safety|pass"
	"lock-t2-recycle-slowwrap|lock.pml|-DNT=2 -DRECYCLE=1 -DMAXCRASH=1 -DSLOWWRAP|safety|pass"
	"lock-t3-recycle|lock.pml|-DNT=3 -DRECYCLE=1 -DMAXCRASH=0|safety|xfail:(gholder!=0)"
	"lock-t3-recycle-slowwrap|lock.pml|-DNT=3 -DRECYCLE=1 -DMAXCRASH=1 -DSLOWWRAP|safety|pass"
	# the lock-free path (fastpath.pml; MODEL.md, "The fast-path model")
	"fast-n2-p3|fastpath.pml|-DNP=3 -DN=2 -DOPS1=2 -DMAXCRASH=1|safety|pass"
	"fast-n2-p3-crash2|fastpath.pml|-DNP=3 -DN=2 -DOPS1=2 -DMAXCRASH=2|safety|pass"
	"fast-n1-p3-crash2|fastpath.pml|-DNP=3 -DN=1 -DOPS1=2 -DMAXCRASH=2|safety|pass"
	"fast-n1-p2-crash2|fastpath.pml|-DNP=2 -DN=1 -DOPS=2 -DMAXCRASH=2|safety|pass"
	"fast-n2-hold2|fastpath.pml|-DNP=2 -DN=2 -DOPS=2 -DHOLD2 -DMAXCRASH=2|safety|pass"
	# F1 (MODEL.md, fixed): a released token was accepted again after a
	# sweeper died
	"fast-n1-double|fastpath.pml|-DNP=2 -DN=1 -DOPS=2 -DMAXCRASH=1 -DDOUBLE_RELEASE|safety|pass"
	"fast-n1-race|fastpath.pml|-DNP=2 -DN=1 -DOPS=2 -DMAXCRASH=1 -DRACE|safety|pass"
	# F1 as the code had it (MODEL.md): the model must still find it
	"fast-n1-race-f1|fastpath.pml|-DNP=2 -DN=1 -DOPS=2 -DMAXCRASH=1 -DRACE -DBUG_F1|safety|xfail:(rwins<=1)"
	"fast-n1-p2-live|fastpath.pml|-DNP=2 -DN=1 -DOPS=2 -DMAXCRASH=1 -DLTL_TERMINATES|ltl|pass"
	"fast-n2-p3-live|fastpath.pml|-DNP=3 -DN=2 -DOPS1=2 -DMAXCRASH=1 -DLTL_TERMINATES|ltl|pass"
	# weighted leases and the capacity (weighted.pml; MODEL.md, "The
	# weighted model"): P1 asks for 2, P2 for 2 (deadline, cancel handle),
	# P3 for 1; R sets the capacity of 3 records to RESIZE, then back to 3
	"w-shrink2|weighted.pml|-DRESIZE=2 -DGROW -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	# below a weight of 2: those waiters need a deadline (R may die before
	# it grows the capacity back, and then they wait for ever, as documented)
	"w-shrink1|weighted.pml|-DRESIZE=1 -DGROW -DTIMED=6 -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	"w-crash2|weighted.pml|-DMAXCRASH=2 -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	"w-p2-shrink1-crash2|weighted.pml|-DNP=2 -DRESIZE=1 -DGROW -DMAXCRASH=2 -DTIMED=6 -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	# a head of weight 3 gathers 2, and a shrink takes one back: the rest
	# goes back to its reservation
	"w-p2-w3-crash2|weighted.pml|-DNP=2 -DWT1=3 -DWT2=1 -DRESIZE=2 -DGROW -DTIMED=2 -DMAXCRASH=2 -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	# drained to 0 and grown back; R does not die (CRASHMASK), so that P2
	# (weight 1, no deadline) is never left waiting for a grow that never comes
	"w-p2-drain|weighted.pml|-DNP=2 -DWT2=1 -DRESIZE=0 -DGROW -DMAXCRASH=2 -DCRASHMASK=6 -DTIMED=2 -DCANCEL -DDOUBLE_RELEASE|safety|pass"
	# the bounded policy (bounded.pml; MODEL.md, "The bounded model"): three
	# processes, N permits, process 1 runs OPS1 cycles (its second one can
	# be lock-free); NOBOUND: no bound ever passes (barging only)
	"b-n1|bounded.pml|-DN=1|safety|pass"
	"b-n2-ops2|bounded.pml|-DN=2 -DOPS1=2|safety|pass"
	"b-n2-nobound-ops2|bounded.pml|-DN=2 -DNOBOUND -DOPS1=2|safety|pass"
	"b-n1-ops2|bounded.pml|-DN=1 -DOPS1=2|safety|pass"
	# the Redis backend (redis.pml; MODEL.md, "The Redis model"): three
	# clients, N permits, client c asks for WTc; kills, lost replies (a
	# popped grant among them), leases and tickets that expire by the clock
	"r-n1-crash|redis.pml|-DN=1 -DMAXKILL=1 -DMAXLOST=1 -DDOUBLE_RELEASE -DRENEW|safety|pass"
	"r-n1-pause|redis.pml|-DN=1 -DMAXPAUSE=1 -DMAXLAPSE=1 -DTIMED=2 -DDOUBLE_RELEASE -DRENEW|safety|pass"
	"r-n2-w2|redis.pml|-DN=2 -DWT1=2 -DTIMED=4 -DCANCELS=8 -DMAXKILL=1 -DMAXLOST=1|safety|pass"
	"r-n2-w2-shutdown|redis.pml|-DN=2 -DWT1=2 -DTIMED=4 -DCANCELS=8 -DMAXKILL=1 -DMAXLOST=1 -DSHUTDOWN|safety|pass"
	"r-n1-shutdown|redis.pml|-DN=1 -DMAXKILL=1 -DMAXLOST=1 -DDOUBLE_RELEASE -DRENEW -DSHUTDOWN|safety|pass"
	"r-n2-resize|redis.pml|-DN=2 -DWT1=2 -DRESIZE=1 -DTIMED=4 -DMAXKILL=1 -DMAXLOST=1|safety|pass"
	"r-n2-pause|redis.pml|-DN=2 -DWT2=2 -DMAXPAUSE=1 -DMAXLAPSE=1 -DTIMED=2 -DCANCELS=8 -DDOUBLE_RELEASE|safety|pass"
	"r-n1-ops2-crash2|redis.pml|-DN=1 -DOPS1=2 -DMAXKILL=2 -DMAXLOST=2 -DDOUBLE_RELEASE|safety|pass"
	# a lost grant resolved (the R1 fix), a dead holder's lease reaped
	"r-n1-lost-live|redis.pml|-DN=1 -DMAXLOST=1 -DLTL_TERMINATES|ltl|pass"
	"r-n1-kill-live|redis.pml|-DN=1 -DMAXKILL=1 -DLTL_TERMINATES|ltl|pass"
	"r-n1-live|redis.pml|-DN=1 -DMAXKILL=1 -DMAXLOST=1 -DLTL_TERMINATES|ltl|pass"
	# R1 (MODEL.md, fixed): a waiter without deadline whose popped grant
	# was lost heard "done" from wait_renew for ever; as the code had it,
	# the model must still find it
	"r-n1-r1|redis.pml|-DN=1 -DMAXLOST=1 -DBUG_R1 -DLTL_TERMINATES|ltl|xfail:acceptance cycle"
	"r-n1-timed-live|redis.pml|-DN=1 -DMAXKILL=1 -DMAXLOST=1 -DTIMED=4 -DCANCELS=8 -DSHUTDOWN -DLTL_TERMINATES|ltl|pass"
	"r-n1-pause-live|redis.pml|-DN=1 -DMAXKILL=1 -DMAXLOST=1 -DMAXLAPSE=1 -DMAXPAUSE=1 -DLTL_TERMINATES|ltl|pass"
	"r-n2-resize-live|redis.pml|-DN=2 -DWT1=2 -DRESIZE=1 -DTIMED=4 -DMAXKILL=1 -DMAXLOST=1 -DLTL_TERMINATES|ltl|pass"
)

# The quick tier: each model with crashes, its liveness claim, F1 fixed
# and still found when put back, every known error, and n2-ops2, the only
# configuration that finds MUT_DEAD_GRANT_ONLY (MODEL.md, mutations; the
# N=1 ones pass it); the configurations left out search more processes or
# operations of the same transitions (each 45 s to 3 min on this project's
# 2-CPU machines).
quick=(
	n1-w2 n1-leave n1-leave-live n2-ops2
	'lock-*'
	fast-n2-p3 fast-n1-p2-crash2 fast-n2-hold2 fast-n1-double fast-n1-race
	fast-n1-race-f1 fast-n1-p2-live
	w-crash2 w-p2-shrink1-crash2 w-p2-w3-crash2 w-p2-drain
	b-n1 b-n2-ops2 b-n2-nobound-ops2
	r-n1-crash r-n1-pause r-n2-w2 r-n1-lost-live r-n1-kill-live r-n1-r1
)

extra=""
cache=""
jobs=$(( $(nproc 2>/dev/null || echo 1) > 1 ? 2 : 1 ))
only=()
while [ $# -gt 0 ]; do
	case "$1" in
	-D*) extra="$extra $1" ;;
	--jobs) jobs="$2"; shift ;;
	--only) only+=("$2"); shift ;;
	--cache) cache="$2"; shift ;;
	--quick) only+=("${quick[@]}") ;;
	-h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done

if [ -z "${PAN_CC:-}" ]; then
	PAN_CC=gcc
	command -v clang-14 >/dev/null && PAN_CC=clang-14
fi
for tool in spin "$PAN_CC"; do
	if ! command -v "$tool" >/dev/null; then
		echo "run.sh: '$tool' not found; run 'make deps' (Debian packages spin, gcc, clang-14)" >&2
		exit 2
	fi
done

# What a cached verifier depends on besides spin's output and the flags.
compiler="$(command -v "$PAN_CC") $("$PAN_CC" --version | head -n 1) $("$PAN_CC" -dumpmachine)"
if [ -n "$cache" ]; then
	mkdir -p "$cache"
	find "$cache" -maxdepth 1 -type f -mtime +30 -delete 2>/dev/null || true
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/shmsem-verify.XXXXXX")
keep=0
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

# Compile $1/pan.c with flags $2 into $1/pan, or take the verifier compiled
# from the same pan.* (spin -a's whole output: the model after the
# preprocessor and the -D options) with the same flags and compiler out of
# the cache. Its key is a hash of all of them; a new entry is written under a
# temporary name and renamed, so that concurrent runs never see half a file.
compile_pan() {
	local dir="$1" cflags="$2" key
	if [ -z "$cache" ]; then
		# shellcheck disable=SC2086
		(cd "$dir" && "$PAN_CC" $cflags -o pan pan.c >cc.out 2>&1)
		return
	fi
	key=$( (cd "$dir" && cat pan.[bchmpt] && printf '%s\n' "$cflags" "$compiler") |
		sha256sum | cut -c1-40)
	if cp "$cache/pan-$key" "$dir/pan" 2>/dev/null; then
		touch "$cache/pan-$key"
		echo "reused $cache/pan-$key" >"$dir/cc.out"
		: >"$dir/reused"
		return 0
	fi
	# shellcheck disable=SC2086
	(cd "$dir" && "$PAN_CC" $cflags -o pan pan.c >cc.out 2>&1) || return 1
	cp "$dir/pan" "$cache/.pan-$key.$BASHPID" &&
		mv "$cache/.pan-$key.$BASHPID" "$cache/pan-$key" || true
}

# One configuration: generate, compile, search; leaves $dir/summary.
verify_one() {
	local name="$1" model="$2" defs="$3$extra" kind="$4" expect="$5"
	local dir="$work/$name"
	mkdir -p "$dir"
	cp "$here/$model" "$dir/$model"
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
	if ! (cd "$dir" && spin $defs -a "$model" >spin.out 2>&1); then
		status="spin -a failed (see $dir/spin.out)"
	elif ! compile_pan "$dir" "$cflags"; then
		status="$PAN_CC failed (see $dir/cc.out)"
	elif ! (cd "$dir" && ./pan $panflags >pan.out 2>&1); then
		status="pan exited with an error"
	fi
	t1=$(date +%s.%N)
	local out="$dir/pan.out" states="-" trans="-" errors="-" secs="-" verdict found=0
	if [ -f "$out" ]; then
		states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
		trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$out" | head -1)
		errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
		secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$out" | head -1)
		if [ "$status" = ok ]; then
			if [ -z "$errors" ]; then
				status="no result in pan output"
			elif [ "$errors" != 0 ]; then
				found=1
				status=$(grep -m1 -E '^pan:[0-9]+: ' "$out" | sed 's/^pan:[0-9]*: //' || true)
				[ -n "$status" ] || status="$errors error(s)"
			elif grep -qE 'out of memory|max search depth too small|Search not completed' "$out"; then
				status="search incomplete: $(grep -m1 -E 'out of memory|max search depth too small|Search not completed' "$out")"
			fi
		fi
	fi
	if [ "${expect%%:*}" = xfail ]; then
		# The known error must still be found; anything else is a failure.
		if [ "$found" = 1 ] && [[ $status == *"${expect#xfail:}"* ]]; then
			verdict=XFAIL
		elif [ "$found" = 1 ]; then
			verdict=FAIL
			status="$status (expected an error with '${expect#xfail:}')"
		elif [ "$status" = ok ]; then
			verdict=XPASS
			status="expected an error (MODEL.md) and found none: fixed? make it 'pass'"
		else
			verdict=FAIL
		fi
	elif [ "$status" = ok ]; then
		verdict=PASS
	else
		verdict=FAIL
	fi
	printf '%-5s %-24s %-6s states %-10s transitions %-11s errors %-3s search %6ss  total %5ss  %s %s\n' \
		"$verdict" "$name" "$kind" "${states:--}" "${trans:--}" "${errors:--}" \
		"${secs:--}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
		"$model" "$defs" >"$dir/summary"
	if [ "$verdict" = XFAIL ]; then
		echo "      -> known: $status" >>"$dir/summary"
		echo PASS >"$dir/verdict"
	elif [ "$verdict" != PASS ]; then
		echo "      -> $status" >>"$dir/summary"
		[ "$verdict" = XPASS ] ||
			echo "      -> replay: cd $dir && spin -t -p -g $defs $model | less" >>"$dir/summary"
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
		# shellcheck disable=SC2053
		for o in "${only[@]}"; do [[ $name == $o ]] && match=1; done
		[ "$match" = 1 ] || continue
	fi
	selected+=("$c")
done
if [ ${#selected[@]} -eq 0 ]; then
	echo "run.sh: no such configuration: ${only[*]}" >&2
	exit 2
fi

models=$(for c in "${selected[@]}"; do IFS='|' read -r _ m _ <<<"$c"; echo "$m"; done | sort -u | tr '\n' ' ')
echo "shmsem: SPIN $(spin -V | sed -n 's/^Spin Version \([^ ]*\).*/\1/p'), models ${models% }${extra:+ (${extra# })}, $jobs at a time, verifiers by $PAN_CC${cache:+, cache $cache}" >&2
start=$(date +%s)
running=0
for c in "${selected[@]}"; do
	IFS='|' read -r name model defs kind expect <<<"$c"
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	verify_one "$name" "$model" "$defs" "$kind" "$expect" &
	running=$((running + 1))
done
wait || true

failed=0
reused=0
for c in "${selected[@]}"; do
	name=${c%%|*}
	cat "$work/$name/summary"
	[ "$(cat "$work/$name/verdict" 2>/dev/null)" = PASS ] || failed=$((failed + 1))
	[ ! -e "$work/$name/reused" ] || reused=$((reused + 1))
done
echo "total $(( $(date +%s) - start ))s: ${#selected[@]} run(s), $failed failed${cache:+; $reused verifier(s) reused from $cache}"
if [ "$failed" -gt 0 ]; then
	keep=1
	echo "kept: $work" >&2
	exit 1
fi
