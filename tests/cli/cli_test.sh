#!/usr/bin/env bash
# Tests of the shmsem command: cli_test.sh <CaseName>, one ctest case each
# (see CMakeLists.txt). SHMSEM names the binary.
source "$(dirname "$0")/lib.sh"
: "${SHMSEM:?SHMSEM must name the shmsem binary}"

HelpAndVersion() {
	local sub
	expect_rc 0 "$SHMSEM" --help
	expect_out "Usage: shmsem"
	for sub in create set status list run recover shutdown rm; do
		expect_rc 0 "$SHMSEM" "$sub" --help
		expect_out "Usage: shmsem $sub"
	done
	expect_rc 0 "$SHMSEM" --version
	[[ $(cat "$TMP/out") =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$(cat "$TMP/out")'"
	expect_rc 2 "$SHMSEM"
	expect_err "no subcommand given"
	expect_rc 2 "$SHMSEM" frobnicate
	expect_err "unknown subcommand 'frobnicate'"
	expect_rc 2 "$SHMSEM" status --bogus /x
}

InvalidNamesAreRejectedInPlainWords() {
	expect_rc 2 "$SHMSEM" create /a/b --permits 1
	expect_err "invalid semaphore name '/a/b': must be '/' followed by 1-255 characters without '/'"
	expect_rc 2 "$SHMSEM" status pool
	expect_err "did you mean '/pool'?"
	expect_rc 2 "$SHMSEM" rm /..
	expect_err "'.' and '..' are not allowed"
	expect_rc 2 "$SHMSEM" status "/$(printf 'x%.0s' $(seq 256))"
	expect_err "must be '/' followed by 1-255 characters"
	expect_rc 2 "$SHMSEM" status /
	# run reports its own failures as 125, never as a command's status.
	expect_rc 125 "$SHMSEM" run /a/b -- true
	expect_err "invalid semaphore name '/a/b'"
}

MissingSemaphoreExits3() {
	local n
	n=$(name missing)
	for sub in status recover shutdown rm; do
		expect_rc 3 "$SHMSEM" "$sub" "$n"
		expect_err "shmsem: $sub $n: no such semaphore"
	done
	# Only where creating it is what one may want: not to remove it, or
	# to close or recover what is not there.
	expect_rc 3 "$SHMSEM" status "$n"
	expect_err "shmsem create $n --permits N"
	for sub in recover shutdown rm; do
		expect_rc 3 "$SHMSEM" "$sub" "$n"
		! grep -q "shmsem create" "$TMP/err" || fail "$sub of a missing semaphore advises creating it"
	done
	expect_rc 125 "$SHMSEM" run "$n" -- true
	expect_err "no such semaphore"
	expect_rc 0 "$SHMSEM" rm --force "$n"
}

CreateIsIdempotentUnlessExclusive() {
	local n
	n=$(name create)
	expect_rc 0 "$SHMSEM" create "$n" --permits 3 --max-waiters 16 --mode 0640
	expect_no_err
	[[ $(stat -c %a "/dev/shm${n}") == 640 ]] || fail "mode is $(stat -c %a "/dev/shm${n}")"
	expect_rc 0 "$SHMSEM" create "$n" --permits 3 --max-waiters 16
	expect_rc 4 "$SHMSEM" create "$n" --permits 3 --max-waiters 16 --exclusive
	expect_err "semaphore already exists"
	expect_rc 4 "$SHMSEM" create "$n" --permits 5
	expect_err "already exists with --permits 3 --max-waiters 16"
	expect_rc 2 "$SHMSEM" create "$(name zero)" --permits 0
	expect_rc 2 "$SHMSEM" create "$(name nomode)" --permits 1 --mode 0999
	expect_err "invalid mode '0999'"
	expect_rc 2 "$SHMSEM" create "$(name noperm)"
	expect_err "--permits is required"
	expect_rc 0 "$SHMSEM" rm "$n"
	[[ ! -e /dev/shm${n} ]] || fail "rm left /dev/shm${n}"
	expect_rc 3 "$SHMSEM" rm "$n"
}

StatusTextShowsStateHoldersAndCounters() {
	local n
	n=$(name text)
	"$SHMSEM" create "$n" --permits 2 --mode 0660
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "semaphore  $n"
	expect_out "state      open"
	expect_out "capacity   2 permits, up to 1024 waiters"
	expect_out "available  1"
	expect_out "held       1"
	expect_out "waiting    0"
	expect_out "mode 0660"
	expect_out "Holders: 1"
	expect_out "LEASE  STATE  WEIGHT  PID"
	! grep -q "^rate" "$TMP/out" || fail "a rate line for a semaphore without a rate"
	grep -Eq "^  [0-9]+:[0-9]+ +held +1 +$BG +shmsem +alive +[0-9.]+(ns|µs|ms|s) +.*run $n -- sleep 600\$" "$TMP/out" ||
		fail "no holder row for PID $BG"
	expect_out "Waiters (queue order): 0"
	expect_out "acquisitions       1"
	expect_out "wait time          p50 <= "
}

StatusJsonHasStableFields() {
	local n
	n=$(name json)
	"$SHMSEM" create "$n" --permits 2 --max-waiters 8
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "list(d.keys())" "['version', 'name', 'state', 'capacity', 'max_permits', 'created_permits', 'retiring', 'max_waiters', 'available', 'held', 'reserved', 'waiting', 'rate', 'policy', 'max_bypass_ns', 'hand_off', 'file', 'lease_ttl_ns', 'created', 'holders', 'waiters', 'queue_rebuilt', 'counters', 'wait_ns', 'hold_ns', 'overdue', 'overdue_permits', 'damaged']"
	expect_json "d['version'], d['name'], d['state']" "(1, '$n', 'open')"
	expect_json "d['capacity'], d['max_waiters'], d['available'], d['held'], d['reserved'], d['waiting']" "(2, 8, 1, 1, 0, 0)"
	expect_json "d['max_permits'], d['created_permits'], d['retiring'], d['rate']" "(2, 2, 0, None)"
	expect_json "d['file']['mode'], d['file']['path'], d['file']['uid']" "('0600', '/dev/shm$n', $(id -u))"
	expect_json "list(d['holders'][0].keys())" "['lease', 'index', 'gen', 'state', 'weight', 'pid', 'comm', 'cmdline', 'alive', 'liveness', 'held_ns', 'declared_ns', 'overdue']"
	expect_json "d['holders'][0]['declared_ns'], d['holders'][0]['overdue']" "(None, False)"
	expect_json "d['holders'][0]['pid'], d['holders'][0]['comm'], d['holders'][0]['alive'], d['holders'][0]['state'], d['holders'][0]['weight']" "($BG, 'shmsem', True, 'held', 1)"
	expect_json "d['holders'][0]['lease'] == '%d:%d' % (d['holders'][0]['index'], d['holders'][0]['gen'])" "True"
	expect_json "d['holders'][0]['cmdline'].endswith('run $n -- sleep 600')" "True"
	expect_json "0 <= d['holders'][0]['held_ns'] < 60 * 10**9" "True"
	expect_json "sorted(d['counters'])" "['acquisitions', 'cancellations', 'queue_full', 'reclaimed_holders', 'reclaimed_waiters', 'repairs', 'shutdown_failures', 'timeouts']"
	expect_json "d['counters']['acquisitions']" "1"
	expect_json "sorted(d['wait_ns'])" "['p50', 'p90', 'p99']"
	expect_json "d['hold_ns'], d['overdue'], d['overdue_permits'], d['damaged']" "({'p50': 0, 'p90': 0, 'p99': 0}, 0, 0, False)"
	expect_json "d['waiters'], d['queue_rebuilt']" "([], False)"
	expect_json "d['created'].endswith('Z')" "True"
}

# Regression: command lines and names are bytes, not always UTF-8. A holder
# with such an argument made `status --json` abort (nlohmann::json's dump()
# threw), and such a name did the same to `list --json`. Now the invalid
# bytes print as U+FFFD.
JsonSurvivesBytesThatAreNotUtf8() {
	local n bad
	n=$(name utf8)
	bad=$(name $'utf8-\xff')
	"$SHMSEM" create "$n" --permits 1
	"$SHMSEM" create "$bad" --permits 1
	bg "$SHMSEM" run "$n" -- sh -c 'sleep 30' $'\xfe-arg'
	wait_for 5 "d['held'] == 1" "$n"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['holders'][0]['cmdline'].endswith(\"sleep 30 \ufffd-arg\")" "True"
	expect_rc 0 "$SHMSEM" list --json
	expect_json "'$PREFIX-utf8-\ufffd' in [s['name'] for s in d['semaphores']]" "True"
}

StatusShowsWaitersInQueueOrder() {
	local n holder a b
	n=$(name queue)
	"$SHMSEM" create "$n" --permits 1
	bg "$SHMSEM" run "$n" -- sleep 600
	holder=$BG
	wait_for 5 "d['held'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- sleep 600
	a=$BG
	wait_for 5 "d['waiting'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- sleep 600
	b=$BG
	wait_for 5 "d['waiting'] == 2" "$n"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "[w['pid'] for w in d['waiters']]" "[$a, $b]"
	expect_json "[w['position'] for w in d['waiters']]" "[1, 2]"
	expect_json "d['waiters'][0]['ticket'] < d['waiters'][1]['ticket']" "True"
	expect_json "all(w['alive'] and w['comm'] == 'shmsem' for w in d['waiters'])" "True"
	expect_json "list(d['waiters'][0].keys())" "['position', 'ticket', 'slot', 'weight', 'reserved', 'pid', 'comm', 'cmdline', 'alive', 'liveness', 'waiting_ns']"
	expect_json "[(w['weight'], w['reserved']) for w in d['waiters']]" "[(1, 0), (1, 0)]"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "Waiters (queue order): 2"
	expect_out "POS  TICKET  WEIGHT  RESERVED  PID"
	grep -Eq "^  1 +[0-9]+ +1 +0 +$a +shmsem +alive " "$TMP/out" || fail "waiter 1 is not PID $a"
	grep -Eq "^  2 +[0-9]+ +1 +0 +$b +shmsem +alive " "$TMP/out" || fail "waiter 2 is not PID $b"
	# FIFO: when the holder's command ends, the first waiter gets the permit.
	kill -TERM "$holder"
	wait_for 5 "[h['pid'] for h in d['holders']] == [$a] and d['waiting'] == 1" "$n"
}

StatusWorksWithReadPermissionOnly() {
	local n bin
	[[ $(id -u) == 0 ]] || skip "needs root to create a segment as one user and read it as another"
	command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
	n=$(name readonly)
	"$SHMSEM" create "$n" --permits 2 --mode 0644
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	# The build tree may not be reachable for nobody: run a copy.
	mkdir "$TMP/bin" && cp "$SHMSEM" "$TMP/bin/shmsem" && chmod 755 "$TMP" "$TMP/bin"
	bin=$TMP/bin/shmsem
	local as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	"${as_nobody[@]}" "$bin" --version >/dev/null 2>&1 ||
		skip "cannot run a program as uid 65534 here"
	local before
	before=$(stat -c %Y.%s "/dev/shm$n" && sha256sum <"/dev/shm$n")
	expect_rc 0 "${as_nobody[@]}" "$bin" status "$n"
	expect_out "held       1"
	grep -Eq "^  [0-9]+:[0-9]+ +held +1 +$BG +shmsem +alive " "$TMP/out" || fail "holder not shown to nobody"
	expect_rc 0 "${as_nobody[@]}" "$bin" status --json "$n"
	expect_json "d['held'], d['holders'][0]['pid']" "(1, $BG)"
	expect_rc 0 "${as_nobody[@]}" "$bin" list --json
	expect_json "'$n' in [s['name'] for s in d['semaphores']]" "True"
	[[ $(stat -c %Y.%s "/dev/shm$n" && sha256sum <"/dev/shm$n") == "$before" ]] ||
		fail "status as nobody changed the segment"
	# Changing it needs write permission, and says so.
	expect_rc 1 "${as_nobody[@]}" "$bin" recover "$n"
	expect_err "shmsem: recover $n: permission denied"
	expect_rc 1 "${as_nobody[@]}" "$bin" set "$n" --permits 1
	expect_err "shmsem: set $n: permission denied"
	"$SHMSEM" create "$(name private)" --permits 1 --mode 0600
	expect_rc 1 "${as_nobody[@]}" "$bin" status "$(name private)"
	expect_err "permission denied"
}

ListShowsOnlySemaphores() {
	local a b
	a=$(name list-a)
	b=$(name list-b)
	"$SHMSEM" create "$a" --permits 2
	"$SHMSEM" create "$b" --permits 5
	head -c 4096 /dev/urandom >"/dev/shm${PREFIX}-junk"
	printf 'SHMSEM' >"/dev/shm${PREFIX}-short"
	: >"/dev/shm/.shmsem-tmp-cli-test-$$"
	expect_rc 0 "$SHMSEM" list
	rm -f "/dev/shm/.shmsem-tmp-cli-test-$$"
	expect_out "NAME"
	grep -Eq "^$a +2 +2 +0 +0 +open +$(id -un)\$" "$TMP/out" || fail "no row for $a"
	grep -Eq "^$b +5 +5 +0 +0 +open +$(id -un)\$" "$TMP/out" || fail "no row for $b"
	! grep -q -- "$PREFIX-junk\|$PREFIX-short\|shmsem-tmp-cli-test-$$" "$TMP/out" || fail "listed a file that is not a semaphore"
	expect_rc 0 "$SHMSEM" list --json
	expect_json "[s for s in d['semaphores'] if s['name'] == '$b']" \
		"[{'name': '$b', 'state': 'open', 'capacity': 5, 'available': 5, 'held': 0, 'reserved': 0, 'waiting': 0, 'uid': $(id -u)}]"
	expect_json "[s['name'] for s in d['semaphores'] if s['name'].startswith('$PREFIX')]" "['$a', '$b']"
}

ListAllShowsLeftoversAndRecoverRemovesOnlyDeadOnes() {
	# Leftovers as an older version's killed create left them: one whose
	# creator PID cannot exist (above pid_max), one whose creator is this
	# shell (alive), one whose name carries no PID.
	local pidmax dead alive nopid
	pidmax=$(cat /proc/sys/kernel/pid_max)
	dead=".shmsem-tmp-$((pidmax + 1))-0-cli-test-$$"
	alive=".shmsem-tmp-$$-0-cli-test-$$"
	nopid=".shmsem-tmp-cli-test-$$"
	# (Expanded now: the locals are gone when the trap runs.)
	trap "rm -f /dev/shm/$dead /dev/shm/$alive /dev/shm/$nopid; cleanup" EXIT
	head -c 4096 /dev/zero >"/dev/shm/$dead"
	: >"/dev/shm/$alive"
	: >"/dev/shm/$nopid"
	expect_rc 0 "$SHMSEM" list
	! grep -q -- "cli-test-$$" "$TMP/out" || fail "list without --all shows leftovers"
	expect_rc 0 "$SHMSEM" list --all
	expect_out "Leftover temporary files of killed creates: "
	grep -Eq "^  $dead +4096 +$((pidmax + 1)) +dead\$" "$TMP/out" || fail "no dead row for $dead"
	grep -Eq "^  $alive +0 +$$ +alive\$" "$TMP/out" || fail "no alive row for $alive"
	grep -Eq "^  $nopid +0 +- +unknown\$" "$TMP/out" || fail "no unknown row for $nopid"
	expect_out "shmsem recover --leftovers"
	expect_rc 0 "$SHMSEM" list --all --json
	expect_json "[(l['path'], l['pid'], l['creator'], l['size']) for l in d['leftovers'] if l['file'] == '$dead']" \
		"[('/dev/shm/$dead', $((pidmax + 1)), 'dead', 4096)]"
	expect_json "[(l['pid'], l['creator']) for l in d['leftovers'] if l['file'] in ('$alive', '$nopid')]" \
		"[($$, 'alive'), (None, 'unknown')]"
	expect_rc 0 "$SHMSEM" list --json
	expect_json "'leftovers' in d" "False"
	# Only the one whose creator provably does not exist goes.
	expect_rc 0 "$SHMSEM" recover --leftovers
	expect_out "removed /dev/shm/$dead (its creator, PID $((pidmax + 1)), is gone)"
	expect_out "kept /dev/shm/$alive: a process with its creator's PID $$ exists"
	expect_out "kept /dev/shm/$nopid: its name carries no creator PID"
	[[ ! -e /dev/shm/$dead ]] || fail "recover --leftovers left $dead"
	[[ -e /dev/shm/$alive && -e /dev/shm/$nopid ]] || fail "recover --leftovers removed a file whose creator may be alive"
	expect_rc 2 "$SHMSEM" recover
	expect_err "NAME is required (or --leftovers)"
}

RunPropagatesExitStatus() {
	local n
	n=$(name status)
	"$SHMSEM" create "$n" --permits 1
	expect_rc 0 "$SHMSEM" run "$n" -- true
	expect_rc 7 "$SHMSEM" run "$n" -- sh -c 'exit 7'
	expect_rc 143 "$SHMSEM" run "$n" -- sh -c 'kill -TERM $$'
	expect_rc 137 "$SHMSEM" run "$n" -- sh -c 'kill -KILL $$'
	# Options of the command are its own; options of run may follow NAME.
	expect_rc 0 "$SHMSEM" run "$n" echo -n --timeout x
	[[ $(cat "$TMP/out") == "--timeout x" ]] || fail "command got '$(cat "$TMP/out")'"
	expect_rc 0 "$SHMSEM" run --timeout 1s "$n" -- echo hello
	expect_out hello
	expect_rc 0 "$SHMSEM" run "$n" --timeout 1s -- echo hello
	expect_rc 127 "$SHMSEM" run "$n" -- /nonexistent/command
	expect_err "shmsem: run $n: cannot run '/nonexistent/command': command not found"
	expect_rc 127 "$SHMSEM" run "$n" -- shmsem-cli-test-no-such-command
	printf '#!/bin/sh\n' >"$TMP/not-executable"
	chmod 644 "$TMP/not-executable"
	expect_rc 126 "$SHMSEM" run "$n" -- "$TMP/not-executable"
	expect_err "permission denied"
	expect_rc 125 "$SHMSEM" run "$n" --bogus -- true
	expect_err "unknown option '--bogus'"
	expect_rc 125 "$SHMSEM" run "$n" --
	expect_err "no COMMAND given"
	# Every permit came back.
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['available'], d['held']" "(1, 0)"
}

RunTimesOutWith124WithoutRunningCommand() {
	local n
	n=$(name timeout)
	"$SHMSEM" create "$n" --permits 1
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	local t0=$SECONDS
	expect_rc 124 "$SHMSEM" run --timeout 300ms "$n" -- touch "$TMP/ran"
	expect_err "shmsem: run $n: no permit within 300ms; 'touch' was not run"
	[[ ! -e $TMP/ran ]] || fail "the command ran after a timeout"
	((SECONDS - t0 < 5)) || fail "timeout took too long"
	expect_rc 124 "$SHMSEM" run -t 0 "$n" -- touch "$TMP/ran"
	expect_err "no permit free right now"
	expect_rc 124 "$SHMSEM" run "$n" --timeout=0.2 -- touch "$TMP/ran"
	[[ ! -e $TMP/ran ]] || fail "the command ran after a timeout"
	expect_rc 0 "$SHMSEM" status --json "$n"
	# (Whether the "-t 0" try counts as a timeout is the library's business.)
	expect_json "d['counters']['timeouts'] >= 2, d['waiting'], d['held']" "(True, 0, 1)"
}

DurationsAcceptUnits() {
	local n d
	n=$(name durations)
	"$SHMSEM" create "$n" --permits 1
	for d in 500ms 5s 2m 1h 1d 1.5s 0.25 3 0; do
		expect_rc 0 "$SHMSEM" run --timeout "$d" "$n" -- true
	done
	for d in 5x ms -1s 1.2.3 "" s5; do
		expect_rc 125 "$SHMSEM" run --timeout "$d" "$n" -- true
		expect_err "invalid duration '$d'"
	done
}

RunForwardsSignalsToCommand() {
	local n sig
	n=$(name forward)
	"$SHMSEM" create "$n" --permits 1
	for sig in TERM HUP INT QUIT; do
		# The command traps the signal and exits 42; its sleep is killed too.
		# (bash starts background jobs with SIGINT and SIGQUIT ignored, which
		# shmsem run respects: undo that.)
		bg env --default-signal=INT,QUIT "$SHMSEM" run "$n" -- sh -c "trap 'kill \$c; exit 42' $sig; sleep 600 & c=\$!; echo > $TMP/started; wait \$c"
		for _ in $(seq 250); do [[ -e $TMP/started ]] && break; sleep 0.02; done
		[[ -e $TMP/started ]] || fail "command did not start"
		rm -f "$TMP/started"
		kill -"$sig" "$BG"
		local rc=0
		wait "$BG" || rc=$?
		[[ $rc == 42 ]] || fail "SIG$sig: shmsem run exited $rc, expected the command's 42"
	done
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['available']" "1"
}

RunGivesCommandInheritedSignalState() {
	local n
	n=$(name sigmask)
	"$SHMSEM" create "$n" --permits 1
	# The command sees the signal mask and ignored set shmsem run started
	# with, not the ones shmsem run uses while it waits.
	# Only the classic signals 1-31 are compared: realtime signals 32 and 33
	# belong to the C library, and their state once differed between a
	# process substitution and the command under load in CI.
	classic() {
		local key val
		while read -r key val; do printf '%s %x\n' "$key" $((16#$val & 0x7fffffff)); done
	}
	expect_rc 0 "$SHMSEM" run "$n" -- grep -E '^Sig(Blk|Ign):' /proc/self/status
	diff <(grep -E '^Sig(Blk|Ign):' /proc/self/status | classic) <(classic <"$TMP/out") >/dev/null ||
		fail "signal state differs: $(cat "$TMP/out")"
	expect_rc 0 bash -c "trap '' HUP; exec \"\$0\" run \"\$1\" -- grep -E '^SigIgn:' /proc/self/status" "$SHMSEM" "$n"
	local ign
	ign=$(awk '{print $2}' "$TMP/out")
	(((16#$ign & 1) == 1)) || fail "inherited SIG_IGN for SIGHUP was lost: SigIgn $ign"
	# No descriptors of shmsem run (segment, pipes) leak into the command.
	expect_rc 0 ls /proc/self/fd
	mv "$TMP/out" "$TMP/fds-direct"
	expect_rc 0 "$SHMSEM" run "$n" -- ls /proc/self/fd
	diff "$TMP/fds-direct" "$TMP/out" >/dev/null ||
		fail "command has other descriptors: $(tr '\n' ' ' <"$TMP/out") vs $(tr '\n' ' ' <"$TMP/fds-direct")"
}

RunInterruptedWhileQueuedLeavesQueue() {
	local n waiter rc=0
	n=$(name interrupt)
	"$SHMSEM" create "$n" --permits 1
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- touch "$TMP/ran"
	waiter=$BG
	wait_for 5 "d['waiting'] == 1" "$n"
	kill -TERM "$waiter"
	wait "$waiter" || rc=$?
	[[ $rc == 143 ]] || fail "interrupted waiter exited $rc, expected 143"
	[[ ! -e $TMP/ran ]] || fail "the command ran"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['waiting'], d['held'], d['counters']['cancellations']" "(0, 1, 1)"
}

KilledHolderShownDeadThenRecovered() {
	local n holder child
	n=$(name crash)
	"$SHMSEM" create "$n" --permits 2
	bg "$SHMSEM" run "$n" -- sleep 600
	holder=$BG
	wait_for 5 "d['held'] == 1" "$n"
	for _ in $(seq 250); do child=$(pgrep -P "$holder" || true); [[ -n $child ]] && break; sleep 0.02; done
	[[ -n $child ]] || fail "no command under shmsem run"
	kill -KILL "$holder"
	wait "$holder" 2>/dev/null || true
	# Nobody is queued, so nothing reclaims it by itself: it shows as dead.
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['held'], d['holders'][0]['pid'], d['holders'][0]['alive'], d['holders'][0]['comm']" "(1, $holder, False, None)"
	expect_rc 0 "$SHMSEM" status "$n"
	grep -Eq "^  [0-9]+:[0-9]+ +held +1 +$holder +- +dead " "$TMP/out" || fail "holder $holder not shown dead"
	# The command did not go on running without its permit (PR_SET_PDEATHSIG).
	for _ in $(seq 250); do kill -0 "$child" 2>/dev/null || break; sleep 0.02; done
	! kill -0 "$child" 2>/dev/null || fail "command $child outlived its shmsem run"
	expect_rc 0 "$SHMSEM" recover "$n"
	expect_out "$n: reclaimed 1 lease or waiter slot of dead processes"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['held'], d['available'], d['holders'], d['counters']['reclaimed_holders']" "(0, 2, [], 1)"
	expect_rc 0 "$SHMSEM" recover "$n"
	expect_out "reclaimed 0 leases and waiter slots"
}

ShutdownFailsWaitersAndLaterRuns() {
	local n waiter rc=0
	n=$(name shutdown)
	"$SHMSEM" create "$n" --permits 1
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- touch "$TMP/ran"
	waiter=$BG
	wait_for 5 "d['waiting'] == 1" "$n"
	expect_rc 0 "$SHMSEM" shutdown "$n"
	expect_out "$n: closed; 1 waiter failed"
	wait "$waiter" || rc=$?
	[[ $rc == 125 ]] || fail "shut-down waiter exited $rc, expected 125"
	[[ ! -e $TMP/ran ]] || fail "the command ran"
	expect_rc 125 "$SHMSEM" run "$n" -- true
	expect_err "semaphore is closed"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['state'], d['held'], d['counters']['shutdown_failures']" "('closed', 1, 1)"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "state      closed"
	expect_rc 0 "$SHMSEM" shutdown "$n"
	expect_out "closed; 0 waiters failed"
}

RunDiesOfTheCommandsSignal() {
	local n sig code
	n=$(name diesof)
	"$SHMSEM" create "$n" --permits 1
	# A negative returncode is Python's "killed by signal -n": shmsem run
	# itself died of it (an exit status of 128+n would read as a number).
	for sig in TERM INT QUIT KILL; do
		# (In $TMP: sh may dump core for QUIT.)
		code=$(cd "$TMP" && "$PY" -c 'import subprocess, sys; print(subprocess.run(sys.argv[1:]).returncode)' \
			"$SHMSEM" run "$n" -- sh -c "kill -$sig \$\$")
		[[ $code == "-$(kill -l "$sig")" ]] || fail "command killed by SIG$sig: shmsem run ended with $code"
	done
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['available'], d['held']" "(1, 0)"
}

TextOutputEscapesControlBytes() {
	local n bad
	n="$(name esc)"$'\e[2J'
	bad="$(name utf)"$'\xff'
	"$SHMSEM" create "$n" --permits 2
	"$SHMSEM" create "$bad" --permits 1
	# (exec: a sleep forked by sh would outlive the test as an orphan)
	bg "$SHMSEM" run "$n" -- sh -c 'exec sleep 600' $'\e]0;pwned\a'
	wait_for 5 "d['held'] == 1" "$n"
	expect_rc 0 "$SHMSEM" list
	expect_out "$(name esc)\\x1b[2J"
	expect_out "$(name utf)\\xff"
	! grep -q $'[\e\a]' "$TMP/out" || fail "list printed a raw control byte"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "semaphore  $(name esc)\\x1b[2J"
	expect_out 'sleep 600 \x1b]0;pwned\x07'
	! grep -q $'[\e\a]' "$TMP/out" || fail "status printed a raw control byte"
	# JSON stays valid JSON whatever the bytes (invalid UTF-8 becomes U+FFFD).
	expect_rc 0 "$SHMSEM" list --json
	expect_json "'$(name utf)\ufffd' in [s['name'] for s in d['semaphores']]" "True"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['holders'][0]['cmdline'].endswith('\x1b]0;pwned\x07')" "True"
	# Error messages too, the command line parser's included, and the
	# bidirectional controls that reorder what follows them.
	expect_rc 3 "$SHMSEM" status "$(name none)"$'\e[2J'
	expect_err "$(name none)\\x1b[2J: no such semaphore"
	! grep -q $'\e' "$TMP/err" || fail "an error message printed a raw escape"
	expect_rc 2 "$SHMSEM" status /x $'\e]0;pwned\a'
	expect_err 'not expected: \x1b]0;pwned\x07'
	! grep -q $'[\e\a]' "$TMP/err" || fail "a usage error printed a raw control byte"
	expect_rc 3 "$SHMSEM" status "$(name rtl)"$'\u202e'
	expect_err "$(name rtl)\\xe2\\x80\\xae: no such semaphore"
}

RmRefusesFilesThatAreNotSemaphores() {
	local n
	n=$(name real)
	"$SHMSEM" create "$n" --permits 1
	head -c 4096 /dev/urandom >"/dev/shm${PREFIX}-junk"
	ln -s /etc/passwd "/dev/shm${PREFIX}-link"
	expect_rc 1 "$SHMSEM" rm "$PREFIX-junk" "$PREFIX-link" "$n"
	expect_err "shmsem: rm $PREFIX-junk: not a shmsem semaphore; not removed (use --force to remove it anyway)"
	expect_err "shmsem: rm $PREFIX-link: not a shmsem semaphore"
	[[ -e /dev/shm${PREFIX}-junk && -L /dev/shm${PREFIX}-link ]] || fail "rm removed a file that is not a semaphore"
	[[ ! -e /dev/shm$n ]] || fail "rm did not remove the semaphore named after them"
	expect_rc 0 "$SHMSEM" rm --force "$PREFIX-junk" "$PREFIX-link"
	[[ ! -e /dev/shm${PREFIX}-junk && ! -L /dev/shm${PREFIX}-link ]] || fail "rm --force left them"
	[[ -e /etc/passwd ]] || fail "rm --force followed the link"
}

InspectionRefusesLinksFifosAndDamagedFiles() {
	local n rc
	n=$(name target)
	"$SHMSEM" create "$n" --permits 1
	ln -s "/dev/shm$n" "/dev/shm${PREFIX}-link"
	mkfifo "/dev/shm${PREFIX}-fifo"
	cp "/dev/shm$n" "/dev/shm${PREFIX}-short"
	truncate -s 1000 "/dev/shm${PREFIX}-short"
	for f in link fifo short; do
		rc=0
		timeout 20 "$SHMSEM" status "$PREFIX-$f" >"$TMP/out" 2>"$TMP/err" || rc=$?
		[[ $rc == 1 ]] || fail "status of the $f exited $rc, expected 1"
		expect_err "shmsem: status $PREFIX-$f: not a shmsem segment"
	done
	expect_rc 0 "$SHMSEM" list
	! grep -q -- "$PREFIX-link\|$PREFIX-fifo\|$PREFIX-short" "$TMP/out" || fail "list showed a link, FIFO or damaged file"
	# The file facts come from the descriptor that was read.
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['file']['uid']" "$(id -u)"
}

CreateTakesRateBurstAndMaxPermits() {
	local n only r
	n=$(name rate)
	expect_rc 0 "$SHMSEM" create "$n" --permits 4 --max-permits 8 --rate 100/s --burst 20
	expect_no_err
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "capacity   4 permits, max 8, up to 1024 waiters"
	expect_out "rate       100/s, burst 20, tokens 20, next token now"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['max_permits'], d['created_permits'], d['retiring'], d['available']" "(4, 8, 4, 0, 4)"
	expect_json "d['rate']" "{'limit': '100/s', 'count': 100, 'period_ns': 1000000000, 'burst': 20, 'tokens': 20, 'next_token_in_ns': 0}"
	# The same settings again: it is used as it is. Other ones: exit 4,
	# naming the settings it was created with.
	expect_rc 0 "$SHMSEM" create "$n" --permits 4 --max-permits 8 --rate 100/s --burst 20
	expect_rc 4 "$SHMSEM" create "$n" --permits 4
	expect_err "already exists with --permits 4 --max-permits 8 --rate 100/s --burst 20 --max-waiters 1024;"
	expect_rc 4 "$SHMSEM" create "$n" --permits 4 --max-permits 8 --rate 100/s
	# A rate alone: no concurrency limit below the default 1024 leases;
	# leaving --permits out and --permits 0 are the same.
	only=$(name rateonly)
	expect_rc 0 "$SHMSEM" create "$only" --rate 5/min
	expect_rc 0 "$SHMSEM" create "$only" --permits 0 --rate 5/min
	expect_rc 0 "$SHMSEM" status "$only"
	expect_out "capacity   1024 permits (rate only: no other concurrency limit), up to 1024 waiters"
	expect_out "rate       5/min, burst 1, tokens 1, next token now"
	expect_rc 0 "$SHMSEM" status --json "$only"
	expect_json "d['capacity'], d['max_permits'], d['created_permits'], d['rate']['period_ns'], d['rate']['count']" "(1024, 1024, 0, 60000000000, 5)"
	# Units, a period of several units, and plain numbers (per second).
	local i=0 u
	for r in 250/ms:250/ms 1/h:1/h 3/10s:3/10s 20:20/s 60/min:60/min 90/60s:90/min 7/1500ms:7/1500ms; do
		i=$((i + 1))
		u=$(name "units-$i")
		expect_rc 0 "$SHMSEM" create "$u" --rate "${r%%:*}"
		expect_rc 0 "$SHMSEM" status --json "$u"
		expect_json "d['rate']['limit']" "${r#*:}"
	done
}

# Bad rates are usage errors (exit 2) that quote what was given.
BadRatesAreRejectedInPlainWords() {
	local n r
	n=$(name badrate)
	for r in 5/x 0/s abc 10/ -5/s 1.5/s 100/sec 100/2x 1/0s /s "" 4294967296/s 100/s/s; do
		expect_rc 2 "$SHMSEM" create "$n" --rate "$r"
		expect_err "rate '$r'"
		[[ ! -e /dev/shm$n ]] || fail "--rate '$r' created $n"
	done
	expect_rc 2 "$SHMSEM" create "$n" --rate 5/m
	expect_err "invalid rate '5/m': write 'min' for minutes or 'ms' for milliseconds"
	expect_rc 2 "$SHMSEM" create "$n" --rate 2000000000/ms
	expect_err "is too fast: at most one acquisition per nanosecond"
	expect_rc 2 "$SHMSEM" create "$n" --rate 1/25h
	expect_err "is too slow: at least one acquisition a day"
	expect_rc 2 "$SHMSEM" create "$n" --permits 2 --burst 5
	expect_err "--burst requires --rate"
	expect_rc 2 "$SHMSEM" create "$n" --rate 1/s --burst 0
	expect_rc 2 "$SHMSEM" create "$n" --permits 0
	expect_err "--permits 0 needs --rate"
	expect_rc 2 "$SHMSEM" create "$n" --permits 4 --max-permits 2
	expect_err "--max-permits 2 is below --permits 4"
	expect_err "Run 'shmsem create --help'"
	[[ ! -e /dev/shm$n ]] || fail "a bad command line created $n"
}

# Issue 28: --policy fifo|bounded[:DURATION], the duration read as every
# other; status shows it and the bound as given, and `bounded` alone is the
# default bound, 1 ms.
CreateTakesAPolicy() {
	local i=0 p u given policy ns
	expect_rc 0 "$SHMSEM" create --help
	expect_out "--policy fifo|bounded[:DURATION]"
	expect_out "(shmsem(7), Policies)"
	# given|policy|max_bypass_ns
	for p in 'fifo|fifo|None' 'bounded|bounded|1000000' 'bounded:2ms|bounded|2000000' \
		'bounded:0.5s|bounded|500000000' 'bounded:1.5ms|bounded|1500000' \
		'bounded:3|bounded|3000000000' 'bounded:2m|bounded|120000000000' \
		'bounded:1d|bounded|86400000000000' 'bounded:24h|bounded|86400000000000'; do
		i=$((i + 1))
		u=$(name "policy-$i")
		IFS='|' read -r given policy ns <<<"$p"
		expect_rc 0 "$SHMSEM" create "$u" --permits 2 --policy "$given"
		expect_no_err
		expect_rc 0 "$SHMSEM" status --json "$u"
		expect_json "d['policy'], d['max_bypass_ns']" "('$policy', $ns)"
		# The same policy again is the same semaphore.
		expect_rc 0 "$SHMSEM" create "$u" --permits 2 --policy "$given"
	done
	# Left out, the policy is FIFO.
	expect_rc 0 "$SHMSEM" create "$(name policy-default)" --permits 1
	expect_rc 0 "$SHMSEM" status --json "$(name policy-default)"
	expect_json "d['policy'], d['max_bypass_ns'], d['hand_off']" "('fifo', None, None)"
}

# Bad policies are usage errors (exit 2) that name --policy, quote what was
# given and say why; nothing is created.
BadPoliciesAreRejectedInPlainWords() {
	local n p
	n=$(name badpolicy)
	for p in lifo FIFO Bounded "" bounded:x bounded:2x bounded:-1ms bounded:1us fifo:1ms bounded:0 \
		bounded:0ms bounded: bounded:2d bounded:25h bounded:86401 :bounded; do
		expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy "$p"
		expect_err "shmsem: create $n: invalid --policy '$p': "
		expect_err "Run 'shmsem create --help'"
		[[ ! -e /dev/shm$n ]] || fail "--policy '$p' created $n"
	done
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy lifo
	expect_err "give fifo, bounded or bounded:DURATION (for example bounded:2ms)"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy bounded:2x
	expect_err "'2x' is not a duration: give a number with an optional unit ms, s, m, h or d"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy fifo:1ms
	expect_err "fifo takes no duration"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy bounded:0
	expect_err "the bound must be more than 0 ('bounded' alone is 1ms)"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy bounded:
	expect_err "give a duration after 'bounded:'"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy bounded:25h
	expect_err "the bound may be at most 1d (24h)"
	expect_rc 2 "$SHMSEM" create "$n" --permits 1 --policy
	# A semaphore on a server keeps FIFO order (shmsem_create(3):
	# -EOPNOTSUPP, refused before any connection is made).
	"$SHMSEM" create redis://127.0.0.1:1/pool --permits 1 --policy bounded >"$TMP/out" 2>"$TMP/err" || true
	if ! grep -q "no backend for this kind of name" "$TMP/err"; then  # built with Redis
		expect_rc 2 "$SHMSEM" create redis://127.0.0.1:1/pool --permits 1 --policy bounded:2ms
		expect_err "--policy bounded:2ms is for local semaphores; a semaphore on a server (redis://...) grants in FIFO order only"
	fi
}

# A create with another policy or bound than the semaphore's is EEXIST
# (exit 4) as for any other setting, and says which policy it has;
# `bounded` and `bounded:1ms` are the same policy.
CreateWithAnotherPolicyIsEexist() {
	local f b
	f=$(name eexist-fifo)
	b=$(name eexist-bounded)
	expect_rc 0 "$SHMSEM" create "$f" --permits 2
	expect_rc 0 "$SHMSEM" create "$f" --permits 2 --policy fifo
	expect_rc 4 "$SHMSEM" create "$f" --permits 2 --policy bounded
	expect_err "semaphore already exists with --permits 2 --max-waiters 1024 --policy fifo;"
	expect_rc 0 "$SHMSEM" create "$b" --permits 2 --policy bounded
	expect_rc 0 "$SHMSEM" create "$b" --permits 2 --policy bounded:1ms
	expect_rc 4 "$SHMSEM" create "$b" --permits 2
	expect_err "semaphore already exists with --permits 2 --max-waiters 1024 --policy bounded:1ms;"
	expect_rc 4 "$SHMSEM" create "$b" --permits 2 --policy fifo
	expect_rc 4 "$SHMSEM" create "$b" --permits 2 --policy bounded:2ms
	expect_err "--policy bounded:1ms;"
	expect_rc 4 "$SHMSEM" create "$b" --permits 2 --policy bounded --exclusive
	expect_err "semaphore already exists"
	# Still the semaphore it was.
	expect_rc 0 "$SHMSEM" status --json "$b"
	expect_json "d['policy'], d['max_bypass_ns']" "('bounded', 1000000)"
}

# Status (text and JSON) shows the policy, and for a bounded one whether
# permits go to the queue in order now: on once the head has waited the
# bound (its wake-up at the bound's end turns it on), off again once the
# queue is empty.
StatusShowsThePolicyAndTheHandOff() {
	local f b holder waiter
	f=$(name status-fifo)
	b=$(name status-bounded)
	"$SHMSEM" create "$f" --permits 1
	expect_rc 0 "$SHMSEM" status "$f"
	expect_out "policy     fifo (permits go to the queue in order)"
	"$SHMSEM" create "$b" --permits 1 --policy bounded:5ms
	expect_rc 0 "$SHMSEM" status "$b"
	expect_out "policy     bounded:5ms, newcomers may pass (nobody waits, or the head has waited less than 5ms)"
	expect_rc 0 "$SHMSEM" status --json "$b"
	expect_json "d['policy'], d['max_bypass_ns'], d['hand_off']" "('bounded', 5000000, False)"
	start_holder pol "$b"
	holder=$BG
	wait_for 10 "d['held'] == 1" "$b"
	bg "$SHMSEM" run "$b" -- true
	waiter=$BG
	wait_for 10 "d['waiting'] == 1 and d['hand_off'] is True" "$b"
	expect_rc 0 "$SHMSEM" status "$b"
	expect_out "policy     bounded:5ms, handing off in order (the head has waited 5ms or more)"
	release_holder pol "$holder"
	wait "$waiter" || fail "the waiter failed"
	wait_for 10 "d['held'] == 0 and d['waiting'] == 0 and d['hand_off'] is False" "$b"
	expect_json "d['counters']['acquisitions']" "2"
}

# A holder we release when we choose: its command signals that it runs,
# then waits for a line on a FIFO. start_holder <suffix> <run options...>
start_holder() {
	local tag=$1
	shift
	mkfifo "$TMP/go-$tag"
	bg "$SHMSEM" run "$@" -- sh -c "read x < $TMP/go-$tag"
}
release_holder() {
	local rc=0
	echo go >"$TMP/go-$1"
	wait "$2" || rc=$?
	[[ $rc == 0 ]] || fail "holder $2 exited $rc"
}

SetPermitsGrowsAndShrinksWithoutRevokingLeases() {
	local n holder
	n=$(name set)
	"$SHMSEM" create "$n" --permits 4 --max-permits 6
	start_holder three --weight 3 "$n"
	holder=$BG
	wait_for 10 "d['held'] == 3" "$n"
	# Shrink below what is held: the free permit goes at once, the held
	# ones stay held and retire as they come back.
	expect_rc 0 "$SHMSEM" set "$n" --permits 1
	expect_out "$n: capacity 1 (was 4); 2 permits still held above it retire as they are released"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "capacity   1 permit (shrinking: 2 still held above it), max 6, up to 1024 waiters"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['max_permits'], d['retiring'], d['available'], d['held']" "(1, 6, 2, 0, 3)"
	expect_json "[(h['pid'], h['weight']) for h in d['holders']]" "[($holder, 3)]"
	expect_rc 124 "$SHMSEM" run --timeout 0 "$n" -- true
	expect_rc 2 "$SHMSEM" set "$n" --permits 7
	expect_err "shmsem: set $n: cannot set the capacity to 7: it may be at most 6"
	release_holder three "$holder"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['retiring'], d['available'], d['held']" "(1, 0, 1, 0)"
	# More than the capacity waits (here: gives up at once) ...
	expect_rc 124 "$SHMSEM" run --weight 2 --timeout 0 "$n" -- true
	expect_err "no 2 permits free right now (the capacity is 1 now)"
	# ... until it grows.
	expect_rc 0 "$SHMSEM" set "$n" --permits 6
	expect_out "$n: capacity 6 (was 1)"
	expect_rc 0 "$SHMSEM" run --weight 6 --timeout 5s "$n" -- true
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['retiring'], d['available'], d['held']" "(6, 0, 6, 0)"
	# 0 drains it.
	expect_rc 0 "$SHMSEM" set "$n" --permits 0
	expect_out "acquires wait until it grows again"
	expect_rc 124 "$SHMSEM" run --timeout 0 "$n" -- true
	expect_rc 3 "$SHMSEM" set "$(name missing)" --permits 1
	expect_err "no such semaphore"
	expect_rc 2 "$SHMSEM" set "$n"
	expect_err "--permits is required"
}

# A lease of two permits is one holder row of weight 2; a waiter for two
# shows how many are reserved for it while it gathers them at the head.
RunWeightShowsOneHolderWithItsWeight() {
	local n holder waiter rc=0
	n=$(name weight)
	"$SHMSEM" create "$n" --permits 3
	start_holder two "$n" --weight 2
	holder=$BG
	wait_for 10 "d['held'] == 2" "$n"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "[(h['pid'], h['weight'], h['state']) for h in d['holders']]" "[($holder, 2, 'held')]"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "Holders: 1 (2 permits)"
	grep -Eq "^  [0-9]+:[0-9]+ +held +2 +$holder +shmsem +alive " "$TMP/out" || fail "no holder row of weight 2"
	# The waiter gets the one free permit reserved, and waits for one more.
	bg "$SHMSEM" run -w 2 "$n" -- touch "$TMP/ran"
	waiter=$BG
	wait_for 10 "d['waiting'] == 1 and d['reserved'] == 1" "$n"
	expect_json "[(w['pid'], w['weight'], w['reserved']) for w in d['waiters']]" "[($waiter, 2, 1)]"
	expect_rc 0 "$SHMSEM" status "$n"
	grep -Eq "^  1 +[0-9]+ +2 +1 +$waiter +shmsem +alive " "$TMP/out" || fail "no waiter row of weight 2 with 1 reserved"
	# FIFO with head-of-line blocking: a request for one waits behind it.
	expect_rc 124 "$SHMSEM" run --timeout 0 "$n" -- true
	release_holder two "$holder"
	wait "$waiter" || rc=$?
	[[ $rc == 0 && -e $TMP/ran ]] || fail "the weighted waiter exited $rc"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['available'], d['held'], d['reserved'], d['holders']" "(3, 0, 0, [])"
	# Never grantable, or not a number: shmsem run fails (125).
	expect_rc 125 "$SHMSEM" run --weight 4 "$n" -- true
	expect_err "--weight 4 is above the semaphore's maximum of 3 permits"
	local w
	for w in x 2x ""; do
		expect_rc 125 "$SHMSEM" run "$n" --weight "$w" -- true
		expect_err "--weight: '$w' is not a number"
	done
	for w in 0 -1; do
		expect_rc 125 "$SHMSEM" run "$n" --weight "$w" -- true
		expect_err "--weight: $w is out of range"
	done
	expect_rc 0 "$SHMSEM" run "$n" --weight=3 -- true
}

# run --expect declares the hold (shmsem_declare_hold); once it is held
# longer, status marks it OVERDUE and counts it. A state check well after
# the declared time has passed, not a race: the holders sleep for minutes.
RunExpectMarksOverdueHolders() {
	local n late ontime plain
	n=$(name expect)
	"$SHMSEM" create "$n" --permits 4
	bg "$SHMSEM" run "$n" --expect 1ms -- sleep 600
	late=$BG
	bg "$SHMSEM" run --expect=1h --weight 2 "$n" -- sleep 600
	ontime=$BG
	bg "$SHMSEM" run "$n" -- sleep 600
	plain=$BG
	wait_for 10 "d['held'] == 4" "$n"
	wait_for 10 "d['overdue'] == 1" "$n"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['overdue'], d['overdue_permits']" "(1, 1)"
	expect_json "{h['pid']: (h['weight'], h['declared_ns'], h['overdue']) for h in d['holders']} == {$late: (1, 1000000, True), $ontime: (2, 3600000000000, False), $plain: (1, None, False)}" "True"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "overdue    1 lease (1 permit) held longer than declared"
	expect_out "HELD FOR  DECLARED"
	grep -Eq "^  [0-9]+:[0-9]+ +held +1 +$late +shmsem +alive +[0-9.]+(ns|µs|ms|s) +1ms OVERDUE +.*run $n --expect 1ms -- sleep 600\$" "$TMP/out" ||
		fail "holder $late not shown OVERDUE"
	grep -Eq "^  [0-9]+:[0-9]+ +held +2 +$ontime +shmsem +alive +[0-9.]+(ns|µs|ms|s) +1h00m +[^O]" "$TMP/out" ||
		fail "holder $ontime not shown with its declared 1h"
	grep -Eq "^  [0-9]+:[0-9]+ +held +1 +$plain +shmsem +alive +[0-9.]+(ns|µs|ms|s) +- +" "$TMP/out" ||
		fail "holder $plain without --expect not shown with '-'"
	# Reporting only: the overdue holder keeps its permit.
	kill -0 "$late" || fail "the overdue holder was ended"
	# Bad values are refused in plain words (125), and the command not run.
	local v
	for v in 0 0ms; do
		expect_rc 125 "$SHMSEM" run "$n" --expect "$v" -- touch "$TMP/ran"
		expect_err "invalid --expect '$v': give how long COMMAND should hold its permit, more than 0 and at most 12d17h"
	done
	expect_rc 125 "$SHMSEM" run --expect 400h "$n" -- touch "$TMP/ran"
	expect_err "invalid --expect '400h'"
	expect_rc 125 "$SHMSEM" run "$n" --expect soon -- touch "$TMP/ran"
	expect_err "--expect: invalid duration 'soon'"
	expect_rc 125 "$SHMSEM" run "$n" --expect
	expect_err "option --expect needs a duration"
	[[ ! -e $TMP/ran ]] || fail "a command ran after a bad --expect"
	expect_rc 0 "$SHMSEM" run --help
	expect_out "--expect DURATION"
}

# 20/s with a burst of 1: ten runs in a row take at least 9 intervals of
# 50 ms. (Only a lower bound: a loaded machine is slower, never faster.)
RunIsRateLimited() {
	local n t0 t1
	n=$(name ratelimit)
	"$SHMSEM" create "$n" --rate 20/s --burst 1
	t0=$(date +%s%N)
	for _ in $(seq 10); do
		"$SHMSEM" run "$n" -- true || fail "a rate-limited run failed"
	done
	t1=$(date +%s%N)
	(((t1 - t0) >= 440000000)) || fail "10 runs at 20/s took $(((t1 - t0) / 1000000)) ms, under 450 ms"
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['counters']['acquisitions'], d['held'], d['rate']['burst']" "(10, 0, 1)"
}

# Issue 25 item 2: every number on the command line is decimal. A script
# that zero-pads means decimal ("010" is ten); what C's strtoul(..., 0)
# would take as octal or hex ("0x10") is refused. Words: "not a number"
# for what is no number, "out of range" only for a number outside the
# range, naming the option.
NumbersAreDecimalInEveryOption() {
	local n v
	n=$(name decimal)
	expect_rc 0 "$SHMSEM" create "$n" --permits 010 --max-permits 020 --max-waiters 010 --rate 010/s --burst 010
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['max_permits'], d['max_waiters'], d['rate']['count'], d['rate']['burst']" "(10, 20, 10, 10, 10)"
	expect_rc 0 "$SHMSEM" set "$n" --permits 012
	expect_out "$n: capacity 12 (was 10)"
	# run --weight, before NAME (CLI11 reads it) and after (run reads it):
	# the command sees the 10 permits held.
	expect_rc 0 "$SHMSEM" run --weight 010 "$n" -- "$SHMSEM" status --json "$n"
	expect_json "d['held']" "10"
	expect_rc 0 "$SHMSEM" run "$n" --weight 010 -- "$SHMSEM" status --json "$n"
	expect_json "d['held']" "10"
	expect_rc 0 "$SHMSEM" top -b -n 02 -d 0.01 "$n"
	[[ $(grep -c '^shmsem top ' "$TMP/out") == 2 ]] || fail "top -n 02 did not print two snapshots"
	# Not numbers, in every numeric option of every subcommand.
	for v in 0x10 1e3 2abc "" " 5" +5 1.5 0o10; do
		expect_rc 2 "$SHMSEM" create "$(name never)" --permits "$v"
		expect_err "shmsem: create: --permits: '$v' is not a number: give a whole number in decimal digits, 0 to 1048576"
		expect_rc 2 "$SHMSEM" create "$(name never)" --permits 1 --max-permits "$v"
		expect_err "--max-permits: '$v' is not a number"
		expect_rc 2 "$SHMSEM" create "$(name never)" --permits 1 --max-waiters "$v"
		expect_err "--max-waiters: '$v' is not a number"
		expect_rc 2 "$SHMSEM" create "$(name never)" --rate 1/s --burst "$v"
		expect_err "--burst: '$v' is not a number"
		expect_rc 2 "$SHMSEM" set "$n" --permits "$v"
		expect_err "shmsem: set: --permits: '$v' is not a number"
		expect_rc 125 "$SHMSEM" run "$n" --weight "$v" -- true
		expect_err "shmsem: run $n: --weight: '$v' is not a number: give a whole number in decimal digits, 1 to 1048576"
		expect_rc 125 "$SHMSEM" run --weight "$v" "$n" -- true
		expect_err "--weight: '$v' is not a number"
		expect_rc 2 "$SHMSEM" top -b -n "$v" "$n"
		expect_err "shmsem: top: --iterations: '$v' is not a number"
		expect_rc 2 "$SHMSEM" exporter --listen "127.0.0.1:$v"
		expect_err "invalid --listen"
	done
	[[ ! -e /dev/shm$(name never) ]] || fail "a refused number created a semaphore"
	# Numbers outside the range, however many digits.
	for v in 2000000 99999999999999999999999 -1; do
		expect_rc 2 "$SHMSEM" create "$(name never)" --permits "$v"
		expect_err "shmsem: create: --permits: $v is out of range: give 0 to 1048576"
		expect_rc 2 "$SHMSEM" set "$n" --permits "$v"
		expect_err "--permits: $v is out of range"
		expect_rc 125 "$SHMSEM" run "$n" --weight "$v" -- true
		expect_err "--weight: $v is out of range: give 1 to 1048576"
		expect_rc 2 "$SHMSEM" exporter --listen "127.0.0.1:$v"
		expect_err "port $v is out of range: give 0 to 65535"
	done
	expect_rc 2 "$SHMSEM" create "$(name never)" --permits 1 --max-waiters 0
	expect_err "--max-waiters: 0 is out of range: give 1 to 1048576"
	expect_rc 2 "$SHMSEM" top -b -n 1000000001 "$n"
	expect_err "--iterations: 1000000001 is out of range: give 1 to 1000000000"
	expect_rc 125 "$SHMSEM" run "$n" --weight 0 -- true
	expect_err "--weight: 0 is out of range"
	# The capacity is still what the last good command set.
	expect_rc 0 "$SHMSEM" status --json "$n"
	expect_json "d['capacity'], d['held']" "(12, 0)"
}

# Issue 25 item 6: the library's one -EINVAL message ("invalid argument
# (name, configuration or lease)") is never what the command says: it
# names the argument and why.
InvalidArgumentsSayWhichAndWhy() {
	local n
	n=$(name einval)
	"$SHMSEM" create "$n" --permits 2 --max-permits 4
	expect_rc 125 "$SHMSEM" run "$n" --weight 9 -- touch "$TMP/ran"
	expect_err "shmsem: run $n: --weight 9 is above the semaphore's maximum of 4 permits (its --max-permits): it could never be granted; 'touch' was not run"
	[[ ! -e $TMP/ran ]] || fail "the command ran"
	expect_rc 2 "$SHMSEM" set "$n" --permits 5
	expect_err "cannot set the capacity to 5: it may be at most 4"
	# A burst whose refill would take longer than shmsem_create(3) allows
	# (2^62 ns): the library's -EINVAL, said in the command's words.
	expect_rc 2 "$SHMSEM" create "$(name burst)" --rate 1/2h --burst 1048576
	expect_err "--burst 1048576 is too large for --rate 1/2h: refilling it takes about 239 years, and a rate limit may take at most about 146 (2^62 ns); give a smaller --burst or a faster --rate"
	[[ ! -e /dev/shm$(name burst) ]] || fail "a refused burst created a semaphore"
	expect_rc 0 "$SHMSEM" create "$(name burst)" --rate 1/h --burst 1048576
	local cmd
	for cmd in "run $n --weight 9 -- true" "set $n --permits 5" "create $(name burst2) --rate 1/2h --burst 1048576"; do
		# shellcheck disable=SC2086 # word splitting wanted
		"$SHMSEM" $cmd >"$TMP/out" 2>"$TMP/err" || true
		! grep -q "invalid argument" "$TMP/err" || fail "'shmsem $cmd' gave the generic message: $(cat "$TMP/err")"
	done
}

# Issue 25 item 9: a rate-limited head that has all its permits reserved
# waits for a token, not for permits; status says so, and when it is due,
# instead of leaving a RESERVED that reads as stuck.
StatusShowsARateLimitedHeadWaitingForAToken() {
	local n waiter
	n=$(name token)
	"$SHMSEM" create "$n" --permits 2 --rate 1/h
	expect_rc 0 "$SHMSEM" run "$n" -- true  # takes the only token
	bg "$SHMSEM" run "$n" --weight 2 -- true
	waiter=$BG
	wait_for 10 "d['waiting'] == 1 and d['reserved'] == 2" "$n"
	expect_rc 0 "$SHMSEM" status "$n"
	grep -Eq "^  1 +[0-9]+ +2 +2 +$waiter +shmsem +alive " "$TMP/out" || fail "no waiter row of weight 2 with 2 reserved"
	grep -Eq "^  The head of the queue has its 2 permits reserved and is waiting for a token, due in (59m[0-9]{2}s|1h00m)\$" "$TMP/out" ||
		fail "status does not say the head waits for a token"
	# One that still gathers permits is not said to wait for a token.
	"$SHMSEM" create "$(name gather)" --permits 2 --rate 1000/s
	start_holder one "$(name gather)"
	wait_for 10 "d['held'] == 1" "$(name gather)"
	bg "$SHMSEM" run "$(name gather)" --weight 2 -- true
	wait_for 10 "d['waiting'] == 1 and d['reserved'] == 1" "$(name gather)"
	expect_rc 0 "$SHMSEM" status "$(name gather)"
	! grep -q "waiting for a token" "$TMP/out" || fail "a head gathering permits is said to wait for a token"
}

# Issue 25 item 9: a holder whose process died keeps its permits until
# something reclaims them; status says what does, now.
StatusHintsRecoverForADeadHolder() {
	local n holder
	n=$(name deadhint)
	"$SHMSEM" create "$n" --permits 3
	expect_rc 0 "$SHMSEM" status "$n"
	! grep -q "shmsem recover" "$TMP/out" || fail "a hint without a dead holder"
	bg "$SHMSEM" run "$n" --weight 2 -- sleep 600
	holder=$BG
	wait_for 10 "d['held'] == 2" "$n"
	kill -KILL "$holder"
	wait "$holder" 2>/dev/null || true
	wait_for 10 "d['holders'][0]['liveness'] == 'dead'" "$n"
	expect_rc 0 "$SHMSEM" status "$n"
	expect_out "  1 lease (2 permits) is held by a process that died: run 'shmsem recover $n' to free it now"
	expect_rc 0 "$SHMSEM" recover "$n"
	expect_rc 0 "$SHMSEM" status "$n"
	! grep -q "shmsem recover" "$TMP/out" || fail "the hint outlived the reclaim"
}

# Issue 25 item 11: removing a name that is not there is no reason to
# create it: rm says only that there is no such semaphore.
RmOfAMissingSemaphoreJustSaysSo() {
	local n
	n=$(name nope)
	expect_rc 3 "$SHMSEM" rm "$n"
	[[ $(cat "$TMP/err") == "shmsem: rm $n: no such semaphore" ]] || fail "rm said '$(cat "$TMP/err")'"
	expect_rc 0 "$SHMSEM" rm --force "$n"
	expect_no_err
}

# Issue 25 item 11: `make demo` calls the wait histogram what it is
# (log-linear) and prints its quantiles in a unit that shows them, not
# "p50 <= 0.000 ms".
DemoPrintsLogLinearBucketsAndReadableWaitTimes() {
	[[ -n ${SHMSEM_DEMO:-} && -x ${SHMSEM_DEMO:-} ]] || skip "the demo (examples/shmsem-demo) is not built"
	expect_rc 0 "$SHMSEM_DEMO"
	! grep -qi "log2" "$TMP/out" || fail "the demo still says log2"
	! grep -Eq "[^0-9]0\.0+ ms" "$TMP/out" || fail "the demo prints a wait as 0.000 ms"
	grep -Eq "^wait of the granted acquires: p50 (0 \(did not wait\)|<= [0-9.]+ (ns|µs|ms|s)), p99 <= [0-9.]+ (ns|µs|ms|s) \(upper bounds of log-linear buckets, within 12\.5%\)\$" "$TMP/out" ||
		fail "no wait line in readable units"
	expect_out "invariant check: ok"
	grep -Eq "^ +time  worker outcome\$" "$TMP/out" || fail "no aligned table header"
}

# Issue 25 item 11: docs/CLI.md names the SONAME and the file of the library
# that is built, and every header that is installed.
DocsStateTheBuiltSonameAndEveryInstalledHeader() {
	[[ -n ${SHMSEM_LIB:-} && -n ${SHMSEM_SOURCE_DIR:-} ]] || skip "SHMSEM_LIB and SHMSEM_SOURCE_DIR are not set"
	command -v objdump >/dev/null || skip "objdump (binutils) is not installed"
	local doc=$SHMSEM_SOURCE_DIR/docs/CLI.md soname file h
	soname=$(objdump -p "$SHMSEM_LIB" | awk '$1 == "SONAME" { print $2 }')
	file=$(basename "$(readlink -f "$SHMSEM_LIB")")
	[[ -n $soname ]] || fail "no SONAME in $SHMSEM_LIB"
	grep -qF "SONAME \`$soname\`" "$doc" || fail "docs/CLI.md does not give the SONAME $soname"
	grep -qF "\`$file\`" "$doc" || fail "docs/CLI.md does not name the file $file"
	! grep -Eo "libshmsem\.so(\.[0-9]+)+" "$doc" | grep -vxF -e "$soname" -e "$file" | grep -q . ||
		fail "docs/CLI.md names another library file: $(grep -Eo "libshmsem\.so(\.[0-9]+)+" "$doc" | sort -u | tr '\n' ' ')"
	for h in "$SHMSEM_SOURCE_DIR"/libshmsem/include/shmsem/*; do
		h=$(basename "$h" .in)
		grep -qF "\`shmsem/$h\`" "$doc" || fail "docs/CLI.md does not list the installed header shmsem/$h"
	done
}

case=${1:?usage: cli_test.sh <CaseName>}
declare -F "$case" >/dev/null || fail "no test case $case"
"$case"
echo "PASS: $case"
