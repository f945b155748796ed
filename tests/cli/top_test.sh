#!/bin/bash
# Tests of `shmsem top` (top_test.sh <CaseName>; ctest runs one case each).
# The terminal cases run top in a real pseudo-terminal, a detached tmux
# session on a socket of this test's own, and read the screen back with
# capture-pane, polling (bounded) until it shows what is expected. The
# tmux server, with everything in its panes, is killed on exit, pass or fail.
. "$(dirname "$0")/lib.sh"

SOCK="shmsem-top-test-$$"
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
trap 'tm kill-server >/dev/null 2>&1 || true; cleanup' EXIT

need_tmux() { command -v tmux >/dev/null || skip "tmux is not installed"; }

# Start `shmsem top ARGS...` in a WIDTHxHEIGHT pane: term <width> <height>
# <args...>. The pane's shell saves the terminal settings before and after
# (stty -g) and top's exit status, then stays a while (so the pane can still
# be read). Should this script be killed before its trap runs (a ctest
# timeout), the pane still ends by itself: top under timeout(1), then the
# short sleep, and the tmux server exits with its last pane.
term() {
	local w=$1 h=$2 a
	shift 2
	local cmd="timeout --foreground 100 '$SHMSEM' top"
	for a in "$@"; do cmd+=" '$a'"; done
	tm new-session -d -s top -x "$w" -y "$h" \
		"stty -g >'$TMP/stty-before'; $cmd; echo \$? >'$TMP/rc.tmp'; \
		 stty -g >'$TMP/stty-after'; mv '$TMP/rc.tmp' '$TMP/rc'; exec sleep 120" ||
		fail "cannot start tmux"
}

# wait_screen <what> <regex>...: poll the pane (30 s at most) until every
# extended regex matches a line of it; a regex starting with '!' must match
# none. The screen is left in $TMP/screen.
wait_screen() {
	local what=$1 re ok end=$((SECONDS + 30))
	shift
	while ((SECONDS < end)); do
		tm capture-pane -p -t top >"$TMP/screen" 2>/dev/null || true
		ok=1
		for re in "$@"; do
			if [[ $re == !* ]]; then
				! grep -Eq -- "${re#!}" "$TMP/screen" || { ok=0; break; }
			else
				grep -Eq -- "$re" "$TMP/screen" || { ok=0; break; }
			fi
		done
		((ok)) && return 0
		sleep 0.05
	done
	echo "--- screen:" >&2
	cat "$TMP/screen" >&2
	fail "timed out waiting for the screen to show $what"
}

# wait_exit: poll (30 s at most) until top has exited in the pane; its
# status is then in $TMP/rc.
wait_exit() {
	local end=$((SECONDS + 30))
	while ((SECONDS < end)); do
		[[ -e $TMP/rc ]] && return 0
		sleep 0.05
	done
	fail "top did not exit"
}

# The terminal is as top found it: same settings, cursor shown.
expect_terminal_restored() {
	cmp -s "$TMP/stty-before" "$TMP/stty-after" ||
		fail "terminal settings changed: $(cat "$TMP/stty-before") -> $(cat "$TMP/stty-after")"
	[[ $(tm display-message -p -t top '#{cursor_flag}') == 1 ]] ||
		fail "the cursor is still hidden"
}

# A semaphore of one permit with a holder ($holder) and one queued waiter
# ($waiter), both `shmsem run NAME -- sleep 600`.
holder_and_waiter() {
	"$SHMSEM" create "$1" --permits 1
	bg "$SHMSEM" run "$1" -- sleep 600
	holder=$BG
	wait_for 5 "d['held'] == 1" "$1"
	bg "$SHMSEM" run "$1" -- sleep 600
	waiter=$BG
	wait_for 5 "d['waiting'] == 1" "$1"
}

# (a) On a terminal top redraws in place: it shows the holder and the
# waiter, then, once the holder lets go, the waiter holding; q ends it with
# status 0 and the terminal as it was.
TopRedrawsInATerminalAndRestoresIt() {
	need_tmux
	local n holder waiter
	n=$(name live)
	holder_and_waiter "$n"
	# Wide enough that the ARGS column keeps "shmsem run /" after the
	# binary's full path, however deep the build tree (a 120-column pane
	# cut the holder's ARGS at "shmsem ru" under /check/work/main/build-asan).
	term 250 40 -d 0.2 "$n"
	wait_screen "holder $holder and waiter $waiter" \
		"^shmsem top .*1 semaphore, every 200ms" \
		"^$n  capacity 1  held 1  waiting 1  oldest wait " \
		"^ +[0-9]+ +1 +$holder +shmsem +held +[0-9.]+[a-zµ]+ +- +[^ ]*shmsem run /" \
		"^ +1 +1 +$waiter +shmsem +queued +[0-9.]+[a-zµ]+ +[^ ]*shmsem run /"
	cp "$TMP/screen" "$TMP/screen-1"
	kill -TERM "$holder"
	wait_screen "waiter $waiter holding after holder $holder released" \
		"^$n  capacity 1  held 1  waiting 0  acq/s [0-9.]+  timeouts/s 0" \
		"^ +[0-9]+ +1 +$waiter +shmsem +held " \
		"!^ +[0-9]+ +1 +$holder " \
		"!POS"
	tm send-keys -t top q
	wait_exit
	[[ $(cat "$TMP/rc") == 0 ]] || fail "top exited $(cat "$TMP/rc") after q, expected 0"
	expect_terminal_restored
	echo "--- first screen:"
	cat "$TMP/screen-1"
}

# SIGTERM (and the like) end top with the terminal restored, dying of the
# signal so that the shell sees it (128 + 15).
TopRestoresTheTerminalWhenKilled() {
	need_tmux
	local n pane top
	n=$(name killed)
	"$SHMSEM" create "$n" --permits 2
	term 100 20 -d 0.2 "$n"
	wait_screen "the semaphore" "^$n  capacity 2  held 0  waiting 0"
	# The pane's shell runs timeout(1), which runs top.
	pane=$(tm display-message -p -t top '#{pane_pid}')
	top=$(ps -o pid= --ppid "$pane" | tr -d ' ' | head -n 1)
	[[ -n $top ]] && top=$(ps -o pid= --ppid "$top" | tr -d ' ' | head -n 1)
	[[ -n $top ]] || fail "cannot find top's process"
	kill -TERM "$top"
	wait_exit
	[[ $(cat "$TMP/rc") == 143 ]] || fail "top exited $(cat "$TMP/rc") after SIGTERM, expected 143"
	expect_terminal_restored
}

# Lists that do not fit end in "... N more", lines are cut to the width,
# and a resize (SIGWINCH) redraws to the new size.
TopFitsTheWindowAndFollowsResizes() {
	need_tmux
	local n i holder waiter
	n=$(name fit)
	holder_and_waiter "$n"
	for i in 2 3 4 5 6 7 8; do
		bg "$SHMSEM" run "$n" -- sleep 600
		wait_for 5 "d['waiting'] == $i" "$n"
	done
	term 120 40 -d 0.2 "$n"
	wait_screen "all eight waiters" "^ +8 +1 +[0-9]+ +shmsem +queued " "!more waiters"
	tm resize-window -t top -x 50 -y 9
	wait_screen "the waiters cut to fit 9 lines" \
		"^  \.\.\. [0-9]+ more waiters$" "!^ +8 +1 "
	awk 'length($0) > 50 { exit 1 }' "$TMP/screen" || fail "a line is wider than 50 columns"
	(($(wc -l <"$TMP/screen") <= 9)) || fail "the screen is taller than 9 lines"
	tm send-keys -t top q
	wait_exit
	[[ $(cat "$TMP/rc") == 0 ]] || fail "top exited $(cat "$TMP/rc")"
	expect_terminal_restored
}

# (b) -b -n 2: exactly two snapshots, then exit 0; rates are '-' on the
# first (no interval yet) and numbers on the second. -n 1 does not wait.
TopBatchPrintsExactlyNSnapshots() {
	local n holder waiter
	n=$(name batch)
	holder_and_waiter "$n"
	expect_rc 0 "$SHMSEM" top -b -n 2 -d 0.1 "$n"
	expect_no_err
	[[ $(grep -c '^shmsem top ' "$TMP/out") == 2 ]] || fail "not two snapshots"
	[[ $(grep -c "^$n  capacity 1  held 1  waiting 1 " "$TMP/out") == 2 ]] ||
		fail "the semaphore is not in both snapshots"
	grep -q "acq/s -  timeouts/s -$" "$TMP/out" || fail "first snapshot has rates"
	grep -Eq "acq/s [0-9.]+  timeouts/s [0-9.]+$" "$TMP/out" || fail "second snapshot has no rates"
	[[ $(grep -Ec "^ +[0-9]+ +1 +$holder +shmsem +held " "$TMP/out") == 2 ]] || fail "holder rows"
	[[ $(grep -Ec "^ +1 +1 +$waiter +shmsem +queued " "$TMP/out") == 2 ]] || fail "waiter rows"
	expect_rc 0 timeout 10 "$SHMSEM" top -b -n 1 -d 3600 "$n"
	[[ $(grep -c '^shmsem top ' "$TMP/out") == 1 ]] || fail "not one snapshot"
}

# A lease held past its declared time (run --expect) is OVERDUE in the
# header and in its row; a holder killed with SIGKILL shows DEAD until
# reclaimed.
TopShowsOverdueAndDeadHolders() {
	local n late dead
	n=$(name overdue)
	"$SHMSEM" create "$n" --permits 3
	bg "$SHMSEM" run "$n" --expect 50ms -- sleep 600
	late=$BG
	bg "$SHMSEM" run "$n" -- sleep 600
	dead=$BG
	wait_for 10 "d['held'] == 2 and d['overdue'] == 1" "$n"
	kill -KILL "$dead"
	wait "$dead" 2>/dev/null || true
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	expect_out "$n  capacity 3  held 2  waiting 0  OVERDUE 1 lease (1 permit)  DEAD 1 lease (1 permit): run 'shmsem recover $n'  acq/s -"
	grep -Eq "^ +[0-9]+ +1 +$late +shmsem +held +[0-9.]+[a-zµ]+  50ms OVERDUE " "$TMP/out" ||
		fail "no OVERDUE row for $late"
	grep -Eq "^ +[0-9]+ +1 +$dead +- +DEAD " "$TMP/out" || fail "no DEAD row for $dead"
}

# (c) Off a terminal (a pipe) top prints plain text: no escape sequences,
# untrusted names escaped. Without NAME it shows every semaphore in
# /dev/shm and skips files that are not semaphores.
TopOffATerminalPrintsPlainText() {
	local n odd junk
	n=$(name plain)
	odd=$(name $'odd\e[31m')
	junk=/dev/shm/${PREFIX#/}-junk
	"$SHMSEM" create "$n" --permits 3
	"$SHMSEM" create "$odd" --permits 1
	echo "not a semaphore" >"$junk"
	"$SHMSEM" top -n 2 -d 0.05 "$n" "$odd" | cat >"$TMP/out" || fail "top failed"
	! grep -q $'\e' "$TMP/out" || fail "escape sequences in piped output"
	[[ $(grep -c '^shmsem top ' "$TMP/out") == 2 ]] || fail "not two snapshots"
	expect_out "$n  capacity 3  held 0  waiting 0"
	expect_out "$PREFIX-odd\\x1b[31m  capacity 1"
	"$SHMSEM" top -n 1 | cat >"$TMP/out" || fail "top without NAME failed"
	! grep -q $'\e' "$TMP/out" || fail "escape sequences in piped output"
	expect_out " semaphores in /dev/shm, every 2s"
	expect_out "$n  capacity 3"
	expect_out "$PREFIX-odd\\x1b[31m  capacity 1"
	! grep -q -- "-junk" "$TMP/out" || fail "a file that is no semaphore is shown"
}

# (d) Bad -d and -n are refused in plain words with the usage status, a
# missing semaphore with status 3.
TopRejectsBadDelaysAndCounts() {
	local n v
	n=$(name bad)
	"$SHMSEM" create "$n" --permits 1
	for v in 0 0.0 0.001 abc 1x "" 3601 99999999; do
		expect_rc 2 "$SHMSEM" top -b -n 1 -d "$v" "$n"
		expect_err "invalid delay '$v'"
	done
	expect_rc 2 "$SHMSEM" top -b -n 1 -d -1 "$n"
	for v in x 1.5 ""; do
		expect_rc 2 "$SHMSEM" top -b -n "$v" "$n"
		expect_err "--iterations: '$v' is not a number"
	done
	for v in 0 10000000000 -3; do
		expect_rc 2 "$SHMSEM" top -b -n "$v" "$n"
		expect_err "--iterations: $v is out of range"
	done
	expect_rc 2 "$SHMSEM" top -b -n 1 bad-name
	expect_err "invalid semaphore name 'bad-name'"
	expect_rc 3 "$SHMSEM" top -b -n 1 "$(name missing)"
	expect_err "shmsem: top $(name missing): "
	expect_rc 0 "$SHMSEM" top -b -n 1 -d 0.5 "$n"
	expect_out "every 500ms"
}

# Issue 25 item 9: on a semaphore with a rate, the header shows the tokens
# (and when the next comes, when none is left), and a head that has its
# permits and waits for a token says so, not "partial 1/1".
TopShowsTokensAndAHeadWaitingForAToken() {
	local n waiter
	n=$(name token)
	"$SHMSEM" create "$n" --permits 2 --rate 1/h --burst 2
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	expect_out "$n  capacity 2  held 0  waiting 0  tokens 2/2  acq/s -"
	expect_rc 0 "$SHMSEM" run "$n" -- true
	expect_rc 0 "$SHMSEM" run "$n" -- true  # the bucket is empty now
	bg "$SHMSEM" run "$n" -- true
	waiter=$BG
	wait_for 10 "d['waiting'] == 1 and d['reserved'] == 1" "$n"
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	grep -Eq "^$n  capacity 2  held 0  waiting 1  oldest wait [0-9.]+[a-zµ]+  tokens 0/2 \(next in (59m[0-9]{2}s|1h00m)\)  acq/s -" "$TMP/out" ||
		fail "the header does not show the tokens and the next one's time"
	grep -Eq "^ +1 +1 +$waiter +shmsem +token in (59m[0-9]{2}s|1h00m) +[0-9.]+[a-zµ]+  " "$TMP/out" ||
		fail "the head is not shown waiting for a token"
	! grep -q "partial" "$TMP/out" || fail "the head is shown as partial"
	# Without a rate: no tokens in the header.
	"$SHMSEM" create "$(name plain)" --permits 1
	expect_rc 0 "$SHMSEM" top -b -n 1 "$(name plain)"
	! grep -q "tokens" "$TMP/out" || fail "tokens shown for a semaphore without a rate"
}

# Issue 25 item 9: a holder whose process died is DEAD in its row, and the
# header says what frees its permits now.
TopHintsRecoverForADeadHolder() {
	local n dead
	n=$(name deadhint)
	"$SHMSEM" create "$n" --permits 4
	bg "$SHMSEM" run "$n" --weight 3 -- sleep 600
	dead=$BG
	wait_for 10 "d['held'] == 3" "$n"
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	! grep -q "shmsem recover" "$TMP/out" || fail "a hint without a dead holder"
	kill -KILL "$dead"
	wait "$dead" 2>/dev/null || true
	wait_for 10 "d['holders'][0]['liveness'] == 'dead'" "$n"
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	expect_out "$n  capacity 4  held 3  waiting 0  DEAD 1 lease (3 permits): run 'shmsem recover $n'  acq/s -"
	grep -Eq "^ +[0-9]+ +3 +$dead +- +DEAD " "$TMP/out" || fail "no DEAD row for $dead"
	"$SHMSEM" recover "$n" >/dev/null
	expect_rc 0 "$SHMSEM" top -b -n 1 "$n"
	! grep -q "shmsem recover" "$TMP/out" || fail "the hint outlived the reclaim"
}

# Issue 28: a bounded semaphore's header ends with its policy, and with
# "hand-off" while its head has waited the bound and permits go to the
# queue in order; FIFO, the default, adds nothing.
TopShowsABoundedPolicyAndItsHandOff() {
	local f b holder
	f=$(name fifo)
	b=$(name bounded)
	"$SHMSEM" create "$f" --permits 1
	"$SHMSEM" create "$b" --permits 1 --policy bounded:2ms
	expect_rc 0 "$SHMSEM" top -b -n 1 "$f" "$b"
	expect_out "$b  capacity 1  held 0  waiting 0  acq/s -  timeouts/s -  bounded:2ms"
	! grep -q "$f .*\(fifo\|bounded\)" "$TMP/out" || fail "a FIFO semaphore's header names its policy"
	bg "$SHMSEM" run "$b" -- sleep 600
	holder=$BG
	wait_for 10 "d['held'] == 1" "$b"
	bg "$SHMSEM" run "$b" -- true
	wait_for 10 "d['waiting'] == 1 and d['hand_off'] is True" "$b"
	expect_rc 0 "$SHMSEM" top -b -n 1 "$b"
	grep -Eq "^$b  capacity 1  held 1  waiting 1  oldest wait [0-9.]+[a-zµ]+  acq/s -  timeouts/s -  bounded:2ms hand-off\$" "$TMP/out" ||
		fail "the header does not show the bound and the hand-off"
	kill -TERM "$holder"
	wait_for 10 "d['held'] == 0 and d['waiting'] == 0 and d['hand_off'] is False" "$b"
	expect_rc 0 "$SHMSEM" top -b -n 1 "$b"
	! grep -q "hand-off" "$TMP/out" || fail "hand-off shown with nobody waiting"
}

case=${1:?usage: top_test.sh <CaseName>}
declare -F "$case" >/dev/null || fail "no test case $case"
"$case"
echo "PASS: $case"
