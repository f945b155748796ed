#!/usr/bin/env bash
# Tests of the Prometheus metrics: `shmsem status --prometheus` and `shmsem
# exporter`. prometheus_test.sh <CaseName>, one ctest case each (see
# CMakeLists.txt). SHMSEM names the binary. The output is checked by the
# Prometheus project's own linter (promtool) and parsed by the Python
# client's parser, and its values are compared with `shmsem status --json`.
source "$(dirname "$0")/lib.sh"
: "${SHMSEM:?SHMSEM must name the shmsem binary}"

# A python3 that has prometheus_client (Debian's python3-prometheus-client
# is in the system python, which a pyenv or venv python3 may hide): the
# helper's (lib.sh), else the first python3 on the PATH, which then
# evaluates every check.
PROM_PYTHON=
if py_eval py "" "" "__import__('prometheus_client') and 1"; then
	PROM_PYTHON=$PY
elif [[ $PY != python3 ]] && command -v python3 >/dev/null &&
	python3 -c 'import prometheus_client' 2>/dev/null; then
	PROM_PYTHON=python3
	py_stop
	PY=python3
	py_start
fi

need_tools() {
	command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
	[[ -n $PROM_PYTHON ]] || skip "no python3 with prometheus_client (python3-prometheus-client)"
}

# lint <file>: the Prometheus linter accepts it, problems and all.
lint() {
	promtool check metrics <"$1" >"$TMP/lint" 2>&1 ||
		fail "promtool check metrics rejects $1: $(cat "$TMP/lint")"
}

# prom <file> <pool> <python expression>: evaluate it with v(sample, **labels)
# (the value of one sample, labelled pool=<pool> unless given) and
# has(sample, **labels), over the samples prometheus_client parses from
# <file>, and print the result. A parse error fails.
prom() {
	py_eval prom "$1" "$2" "$3" || { echo "$PY_OUT" >&2; return 1; }
	echo "$PY_OUT"
}

# expect_prom <file> <pool> <expression> <expected printed value>
expect_prom() {
	py_eval prom "$1" "$2" "$3" || fail "cannot evaluate $3 on $1: $PY_OUT"
	[[ $PY_OUT == "$4" ]] || fail "$3 is '$PY_OUT' in $1, expected '$4'"
}

# The figures both forms show, as one comparable line: from the status
# JSON in $TMP/out, and from the metrics in <file>.
json_figures() {
	json "(d['capacity'], d['available'], d['held'], d['reserved'], d['waiting'], d['max_waiters'], [d['counters'][k] for k in ('acquisitions', 'timeouts', 'cancellations', 'queue_full', 'shutdown_failures', 'reclaimed_holders', 'reclaimed_waiters', 'repairs')])"
}
prom_figures() {
	prom "$1" "$2" "(int(v('shmsem_permits')), int(v('shmsem_available_permits')), int(v('shmsem_held_permits')), int(v('shmsem_reserved_permits')), int(v('shmsem_waiters')), int(v('shmsem_max_waiters')), [int(v('shmsem_' + k + '_total')) for k in ('acquisitions', 'timeouts', 'cancellations', 'queue_full', 'shutdown_failures', 'reclaimed_holders', 'reclaimed_waiters', 'repairs')])"
}

# expect_same_as_json <metrics file> <name>: status --json of <name> now
# shows the same figures (call it only when nothing changes).
expect_same_as_json() {
	local want got
	expect_rc 0 "$SHMSEM" status --json "$2"
	want=$(json_figures) || fail "cannot read the status JSON"
	got=$(prom_figures "$1" "$2") || fail "cannot read the figures from $1"
	[[ $got == "$want" ]] || fail "metrics show $got, status --json $want"
}

# Unix time now, in seconds with a fraction.
unix_now() { date +%s.%N; }

# start_exporter <args...>: start `shmsem exporter --listen 127.0.0.1:0`
# (any free port) with these arguments, remembered for cleanup; sets
# EXPORTER (its PID) and PORT (read from the line it prints when serving).
start_exporter() {
	: >"$TMP/exporter.err"
	"$SHMSEM" exporter --listen 127.0.0.1:0 "$@" >/dev/null 2>"$TMP/exporter.err" &
	EXPORTER=$!
	BG_PIDS+=("$EXPORTER")
	local i line
	for ((i = 0; i < 500; i++)); do
		line=$(grep -o 'serving http://127\.0\.0\.1:[0-9]*/metrics' "$TMP/exporter.err" || true)
		if [[ -n $line ]]; then
			PORT=${line#serving http://127.0.0.1:}
			PORT=${PORT%/metrics}
			[[ $PORT != 0 ]] || fail "the exporter reports port 0"
			return 0
		fi
		kill -0 "$EXPORTER" 2>/dev/null ||
			fail "the exporter exited: $(cat "$TMP/exporter.err")"
		sleep 0.02
	done
	fail "the exporter did not say where it serves: $(cat "$TMP/exporter.err")"
}

# stop_exporter <signal>: it exits 0, and is reaped.
stop_exporter() {
	local rc=0
	kill "-$1" "$EXPORTER"
	wait "$EXPORTER" || rc=$?
	[[ $rc == 0 ]] || fail "the exporter exited $rc on SIG$1: $(cat "$TMP/exporter.err")"
}

# scrape <file>: GET /metrics from the exporter into <file> with a real HTTP
# client (curl, else Python's urllib); fails on any HTTP error.
scrape() {
	if command -v curl >/dev/null; then
		curl -fsS --max-time 20 -o "$1" "http://127.0.0.1:$PORT/metrics" ||
			fail "curl could not scrape port $PORT"
	else
		"$PROM_PYTHON" -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=20) as r:
    open(sys.argv[2], "wb").write(r.read())' "http://127.0.0.1:$PORT/metrics" "$1" ||
			fail "urllib could not scrape port $PORT"
	fi
}

# (a) One holder and one waiter: the text passes promtool, parses, and shows
# what status --json shows; the histograms count what happened.
StatusPrometheusMatchesJsonForHolderAndWaiter() {
	need_tools
	local n out=$TMP/metrics before after
	n=$(name holder-waiter)
	"$SHMSEM" create "$n" --permits 1
	"$SHMSEM" run "$n" -- true
	"$SHMSEM" run "$n" -- true
	before=$(unix_now)
	bg "$SHMSEM" run "$n" -- sleep 600
	wait_for 5 "d['held'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- true
	wait_for 5 "d['waiting'] == 1" "$n"
	expect_rc 0 "$SHMSEM" status --prometheus "$n"
	expect_no_err
	cp "$TMP/out" "$out"
	after=$(unix_now)
	lint "$out"
	expect_same_as_json "$out" "$n"
	expect_prom "$out" "$n" "v('shmsem_up'), v('shmsem_held_permits'), v('shmsem_waiters')" "(1.0, 1.0, 1.0)"
	# Three acquires, each counted once by the wait histogram (those that
	# did not wait as 0 s); two released leases by the hold histogram.
	expect_prom "$out" "$n" "v('shmsem_acquisitions_total'), v('shmsem_wait_seconds_count'), v('shmsem_wait_seconds_bucket', le='+Inf')" "(3.0, 3.0, 3.0)"
	expect_prom "$out" "$n" "v('shmsem_hold_seconds_count'), v('shmsem_hold_seconds_bucket', le='+Inf')" "(2.0, 2.0)"
	expect_prom "$out" "$n" "v('shmsem_wait_seconds_bucket', le='1e-06') >= 2" "True"
	# The oldest waiter and lease as Unix times within the test's window
	# (the lease on the coarse clock: a few ms either side).
	expect_prom "$out" "$n" "$before - 0.05 <= v('shmsem_oldest_lease_timestamp_seconds') <= $after + 0.05" "True"
	expect_prom "$out" "$n" "$before - 0.05 <= v('shmsem_oldest_waiter_timestamp_seconds') <= $after + 0.05" "True"
	expect_prom "$out" "$n" "v('shmsem_oldest_lease_timestamp_seconds') <= v('shmsem_oldest_waiter_timestamp_seconds') + 0.05" "True"
}

# (b) The exporter reads the segments at each scrape: scraped while
# processes acquire and release, and compared with status --json whenever
# nothing moves. Stopped by SIGTERM and by SIGINT with status 0.
ExporterServesMetricsReadAtScrapeTime() {
	need_tools
	local n out=$TMP/scrape i churn
	n=$(name exporter)
	"$SHMSEM" create "$n" --permits 1
	start_exporter "$n"
	scrape "$out"
	lint "$out"
	expect_same_as_json "$out" "$n"
	expect_prom "$out" "$n" "v('shmsem_up'), v('shmsem_held_permits'), v('shmsem_acquisitions_total')" "(1.0, 0.0, 0.0)"

	bg "$SHMSEM" run "$n" -- sleep 600
	local holder=$BG
	wait_for 5 "d['held'] == 1" "$n"
	bg "$SHMSEM" run "$n" -- true
	wait_for 5 "d['waiting'] == 1" "$n"
	scrape "$out"
	lint "$out"
	expect_same_as_json "$out" "$n"
	expect_prom "$out" "$n" "v('shmsem_held_permits'), v('shmsem_waiters'), has('shmsem_oldest_waiter_timestamp_seconds')" "(1.0, 1.0, True)"
	cp "$out" "$TMP/holder-and-waiter.prom"

	# The holder ends (run forwards SIGTERM to its command and releases);
	# its permit goes to the waiter, which runs `true` and releases too.
	kill -TERM "$holder"
	wait_for 10 "d['held'] == 0 and d['waiting'] == 0 and d['counters']['acquisitions'] == 2" "$n"
	scrape "$out"
	expect_same_as_json "$out" "$n"
	expect_prom "$out" "$n" "v('shmsem_wait_seconds_count'), v('shmsem_hold_seconds_count'), has('shmsem_oldest_waiter_timestamp_seconds'), has('shmsem_oldest_lease_timestamp_seconds')" "(2.0, 2.0, False, False)"

	# Scrape while 20 runs come and go; every scrape parses, and the
	# counter only grows.
	(for _ in $(seq 20); do "$SHMSEM" run "$n" -- true || exit 1; done) &
	churn=$!
	BG_PIDS+=("$churn")
	local last=0 now
	for ((i = 0; i < 2000; i++)); do
		scrape "$out"
		now=$(prom "$out" "$n" "int(v('shmsem_acquisitions_total'))") ||
			fail "a scrape during the runs does not parse"
		((now >= last)) || fail "acquisitions went from $last down to $now"
		last=$now
		kill -0 "$churn" 2>/dev/null || break
	done
	wait "$churn" || fail "a run during the scrapes failed"
	scrape "$out"
	lint "$out"
	expect_same_as_json "$out" "$n"
	expect_prom "$out" "$n" "v('shmsem_acquisitions_total'), v('shmsem_wait_seconds_count'), v('shmsem_hold_seconds_count')" "(22.0, 22.0, 22.0)"

	stop_exporter TERM
	start_exporter "$n"
	scrape "$out"
	stop_exporter INT
}

# (c) A --listen that cannot work is refused in plain words: malformed
# (status 2), or well formed but not usable here (status 1).
ExporterRejectsBadListenInPlainWords() {
	local bad
	for bad in nonsense 127.0.0.1 127.0.0.1: :9100 127.0.0.1:99999 127.0.0.1:9x \
		example.com:9100 '[::1' 300.1.1.1:9100; do
		expect_rc 2 "$SHMSEM" exporter --listen "$bad"
		expect_err "shmsem: exporter: invalid --listen '$bad': expected ADDRESS:PORT"
	done
	expect_rc 2 "$SHMSEM" exporter
	expect_err "--listen is required"
	expect_rc 2 "$SHMSEM" exporter --listen 127.0.0.1:0 /a/b
	expect_err "invalid semaphore name '/a/b'"
	# 192.0.2.1 (TEST-NET-1) is no address of this host.
	expect_rc 1 "$SHMSEM" exporter --listen 192.0.2.1:9100
	expect_err "cannot listen on 192.0.2.1:9100: no interface of this host has that address"
	# A port another exporter serves on.
	start_exporter
	expect_rc 1 "$SHMSEM" exporter --listen "127.0.0.1:$PORT"
	expect_err "cannot listen on 127.0.0.1:$PORT: the port is already in use"
	stop_exporter TERM
	expect_rc 0 "$SHMSEM" exporter --help
	expect_out "Usage: shmsem exporter --listen ADDRESS:PORT [NAME|SERVER ...]"
	expect_out "SIGINT or SIGTERM"
}

# (d) Every outcome counter is there on a fresh semaphore, at zero, as are
# the empty histograms; the oldest-waiter and -lease times are absent.
FreshSemaphoreExportsEveryCounterAtZero() {
	need_tools
	local n out=$TMP/metrics c
	n=$(name fresh)
	"$SHMSEM" create "$n" --permits 2
	expect_rc 0 "$SHMSEM" status --prometheus "$n"
	cp "$TMP/out" "$out"
	lint "$out"
	for c in acquisitions timeouts cancellations queue_full shutdown_failures \
		reclaimed_holders reclaimed_waiters repairs; do
		grep -qx "# TYPE shmsem_${c}_total counter" "$out" || fail "no counter shmsem_${c}_total"
		expect_prom "$out" "$n" "v('shmsem_${c}_total')" "0.0"
	done
	expect_prom "$out" "$n" "v('shmsem_up'), v('shmsem_permits'), v('shmsem_available_permits'), v('shmsem_overdue_leases'), v('shmsem_closed')" "(1.0, 2.0, 2.0, 0.0, 0.0)"
	expect_prom "$out" "$n" "v('shmsem_wait_seconds_count'), v('shmsem_wait_seconds_sum'), v('shmsem_hold_seconds_count')" "(0.0, 0.0, 0.0)"
	expect_prom "$out" "$n" "has('shmsem_oldest_waiter_timestamp_seconds'), has('shmsem_oldest_lease_timestamp_seconds'), has('shmsem_rate_tokens')" "(False, False, False)"
	expect_same_as_json "$out" "$n"
}

# A semaphore that cannot be read is shmsem_up 0 and does not hide the
# others; without names every semaphore in /dev/shm is shown and files that
# are not semaphores are not.
UnreadableSemaphoreIsDownWithoutHidingOthers() {
	need_tools
	local n junk out=$TMP/metrics
	n=$(name readable)
	junk=$(name junk)
	"$SHMSEM" create "$n" --permits 1 --rate 10/s
	head -c 4096 /dev/urandom >"/dev/shm${junk}"
	expect_rc 0 "$SHMSEM" status --prometheus "$(name missing)" "$n" "$junk" "$n"
	cp "$TMP/out" "$out"
	expect_err "shmsem: status $(name missing): no such semaphore"
	lint "$out"
	expect_prom "$out" "$n" "v('shmsem_up'), v('shmsem_up', pool='$(name missing)'), v('shmsem_up', pool='$junk')" "(1.0, 0.0, 0.0)"
	expect_prom "$out" "$n" "has('shmsem_held_permits', pool='$junk'), v('shmsem_rate_tokens')" "(False, 1.0)"
	[[ $(grep -c "^shmsem_up{pool=\"$n\"}" "$out") == 1 ]] || fail "a name given twice is shown twice"

	expect_rc 0 "$SHMSEM" status --prometheus
	cp "$TMP/out" "$out"
	lint "$out"
	expect_prom "$out" "$n" "v('shmsem_up'), has('shmsem_up', pool='$junk')" "(1.0, False)"

	# --prometheus alone takes several names, or none.
	expect_rc 2 "$SHMSEM" status "$n" "$n"
	expect_err "The following argument was not expected: $n (several NAMEs only with --prometheus)"
	expect_rc 2 "$SHMSEM" status
	expect_err "NAME is required"
	expect_rc 2 "$SHMSEM" status --prometheus --json "$n"
	expect_rc 2 "$SHMSEM" status --prometheus /a/b
	expect_err "invalid semaphore name '/a/b'"
}

# Issue 25 item 9: leases held by processes that died, and their permits,
# are gauges (0 while there are none), in status --prometheus and from the
# exporter, until something reclaims them.
DeadHoldersAreCountedInGauges() {
	need_tools
	local n out=$TMP/metrics dead alive
	n=$(name dead)
	"$SHMSEM" create "$n" --permits 4
	bg "$SHMSEM" run "$n" --weight 3 -- sleep 600
	dead=$BG
	bg "$SHMSEM" run "$n" -- sleep 600
	alive=$BG
	wait_for 10 "d['held'] == 4" "$n"
	expect_rc 0 "$SHMSEM" status --prometheus "$n"
	cp "$TMP/out" "$out"
	lint "$out"
	expect_prom "$out" "$n" "v('shmsem_dead_leases'), v('shmsem_dead_permits')" "(0.0, 0.0)"
	kill -KILL "$dead"
	wait "$dead" 2>/dev/null || true
	wait_for 10 "[h['liveness'] for h in d['holders'] if h['weight'] == 3] == ['dead']" "$n"
	expect_rc 0 "$SHMSEM" status --prometheus "$n"
	cp "$TMP/out" "$out"
	lint "$out"
	grep -qx "# TYPE shmsem_dead_leases gauge" "$out" || fail "shmsem_dead_leases is not a gauge"
	grep -qx "# TYPE shmsem_dead_permits gauge" "$out" || fail "shmsem_dead_permits is not a gauge"
	expect_prom "$out" "$n" "v('shmsem_dead_leases'), v('shmsem_dead_permits'), v('shmsem_held_permits')" "(1.0, 3.0, 4.0)"
	start_exporter "$n"
	scrape "$out"
	lint "$out"
	expect_prom "$out" "$n" "v('shmsem_dead_leases'), v('shmsem_dead_permits')" "(1.0, 3.0)"
	"$SHMSEM" recover "$n" >/dev/null
	scrape "$out"
	expect_prom "$out" "$n" "v('shmsem_dead_leases'), v('shmsem_dead_permits'), v('shmsem_held_permits')" "(0.0, 0.0, 1.0)"
	stop_exporter TERM
	kill -0 "$alive" || fail "the live holder was ended"
}

# Issue 28: shmsem_policy_bounded for every semaphore; the bound and the
# hand-off (as status --json shows them) for bounded ones only, in status
# --prometheus and from the exporter.
BoundedPolicyIsExportedAsGauges() {
	need_tools
	local f b g out=$TMP/metrics holder
	f=$(name fifo)
	b=$(name bounded)
	"$SHMSEM" create "$f" --permits 1
	"$SHMSEM" create "$b" --permits 1 --policy bounded:2ms
	expect_rc 0 "$SHMSEM" status --prometheus "$f" "$b"
	cp "$TMP/out" "$out"
	lint "$out"
	for g in shmsem_policy_bounded shmsem_max_bypass_seconds shmsem_hand_off; do
		grep -qx "# TYPE $g gauge" "$out" || fail "$g is not a gauge"
	done
	expect_prom "$out" "$f" "v('shmsem_policy_bounded'), has('shmsem_max_bypass_seconds'), has('shmsem_hand_off')" "(0.0, False, False)"
	expect_prom "$out" "$b" "v('shmsem_policy_bounded'), v('shmsem_max_bypass_seconds'), v('shmsem_hand_off')" "(1.0, 0.002, 0.0)"
	bg "$SHMSEM" run "$b" -- sleep 600
	holder=$BG
	wait_for 10 "d['held'] == 1" "$b"
	bg "$SHMSEM" run "$b" -- true
	wait_for 10 "d['waiting'] == 1 and d['hand_off'] is True" "$b"
	start_exporter "$f" "$b"
	scrape "$out"
	lint "$out"
	expect_prom "$out" "$b" "v('shmsem_hand_off'), v('shmsem_waiters')" "(1.0, 1.0)"
	expect_same_as_json "$out" "$b"
	kill -TERM "$holder"
	wait_for 10 "d['held'] == 0 and d['waiting'] == 0 and d['hand_off'] is False" "$b"
	scrape "$out"
	expect_prom "$out" "$b" "v('shmsem_hand_off'), v('shmsem_policy_bounded')" "(0.0, 1.0)"
	stop_exporter TERM
}

case=${1:?usage: prometheus_test.sh <CaseName>}
declare -F "$case" >/dev/null || fail "no test case $case"
"$case"
echo "PASS: $case"
