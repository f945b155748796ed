# Shared helpers for the shmsem CLI tests (sourced, bash).
#
# Every test gets semaphore names under /shmsem-cli-test-<pid>-<random>-*, a private
# temporary directory, and an EXIT trap that stops the background processes
# it started and removes both, pass or fail.
set -euo pipefail


SKIP=77  # ctest SKIP_RETURN_CODE

# (The pid and a random number: pids come round within a run.)
PREFIX="/shmsem-cli-test-$$-$SRANDOM"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/shmsem-cli-test.XXXXXX")
BG_PIDS=()

cleanup() {
	local p
	py_stop
	for p in "${BG_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${BG_PIDS[@]}"; do
		# Give each a moment to forward SIGTERM to its command, then insist.
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -f /dev/shm/"${PREFIX#/}"-* 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	if [[ -s $TMP/out ]]; then echo "--- stdout:" >&2; cat "$TMP/out" >&2; fi
	if [[ -s $TMP/err ]]; then echo "--- stderr:" >&2; cat "$TMP/err" >&2; fi
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit $SKIP
}

# A fresh semaphore name for this test: name <suffix>
name() { echo "$PREFIX-$1"; }

# Run a command, keeping stdout in $TMP/out and stderr in $TMP/err, and check
# its exit status: expect_rc <code> <command...>. (It does not inherit the
# helper's descriptors: a case compares the command's with shmsem run's.)
expect_rc() {
	local want=$1 rc=0
	shift
	"$@" {PY_W}>&- {PY_R}<&- >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc == "$want" ]] || fail "'$*' exited $rc, expected $want"
}

# expect_out <fixed string>: stdout of the last expect_rc contains it.
expect_out() { grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"; }
expect_err() { grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
expect_no_err() { [[ ! -s $TMP/err ]] || fail "unexpected stderr"; }

# One python3 per test case evaluates every JSON check and every poll of
# wait_for (and prometheus_test.sh's metrics): a python3 started per check
# cost 50 ms, and 450 ms behind a pyenv shim, which made the 20 ms polls of
# wait_for half-second ones and the CLI cases take minutes. The helper reads
# requests of four NUL-terminated fields from a FIFO (kind json, prom or py
# (nothing loaded), file, argument, Python expression), loads the file
# afresh for each (it is rewritten between requests) and answers "0<printed value>" or
# "1<traceback>", NUL-terminated. Debian's python3 first: it starts fastest
# and has python3-prometheus-client.
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
PY_PID=
PY_HELPER='
import json, os, select, sys, traceback

def load_json(path, arg):
    with open(path) as f:
        return {"d": json.load(f)}

# v(sample, **labels), has(sample, **labels): the value of a sample of the
# Prometheus text in path, labelled pool=arg unless given.
def load_prom(path, pool):
    from prometheus_client.parser import text_string_to_metric_families
    samples = {}
    with open(path) as f:
        for family in text_string_to_metric_families(f.read()):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    def key(name, labels):
        labels.setdefault("pool", pool)
        return (name, tuple(sorted(labels.items())))
    def v(name, **labels):
        return samples[key(name, labels)]
    def has(name, **labels):
        return key(name, labels) in samples
    return {"v": v, "has": has}

def answer(kind, path, arg, expr):
    try:
        names = {"json": load_json, "prom": load_prom,
                 "py": lambda path, arg: {}}[kind](path, arg)
        return "0" + str(eval(expr, names)).rstrip("\n")
    except Exception:
        return "1" + traceback.format_exc()

parent = os.getppid()
buf, fields = b"", []
while True:
    # A test killed before its trap ran (a ctest timeout) leaves no helper.
    if not select.select([0], [], [], 1.0)[0]:
        if os.getppid() != parent:
            break
        continue
    chunk = os.read(0, 65536)
    if not chunk:
        break
    buf += chunk
    while b"\0" in buf:
        field, buf = buf.split(b"\0", 1)
        fields.append(field.decode("utf-8", "surrogateescape"))
        if len(fields) == 4:
            out = answer(*fields).encode("utf-8", "backslashreplace") + b"\0"
            fields = []
            sys.stdout.buffer.write(out)
            sys.stdout.buffer.flush()
'

# Start the helper ($PY), with PY_W and PY_R the descriptors to talk to it.
py_start() {
	mkfifo "$TMP/py.in" "$TMP/py.out"
	"$PY" -c "$PY_HELPER" <"$TMP/py.in" >"$TMP/py.out" &
	PY_PID=$!
	# (In this order: the helper opens py.in, then py.out.)
	exec {PY_W}>"$TMP/py.in" {PY_R}<"$TMP/py.out"
	rm -f "$TMP/py.in" "$TMP/py.out"
}

py_stop() {
	[[ -n $PY_PID ]] || return 0
	exec {PY_W}>&- {PY_R}<&-
	kill "$PY_PID" 2>/dev/null || true
	wait "$PY_PID" 2>/dev/null || true
	PY_PID=
}

# py_eval <json|prom> <file> <argument> <expression>: the printed value in
# PY_OUT, or the traceback and a non-zero status.
py_eval() {
	printf '%s\0' "$@" >&"$PY_W" || fail "the python3 helper (PID $PY_PID) is gone"
	IFS= read -r -d '' PY_OUT <&"$PY_R" || fail "the python3 helper (PID $PY_PID) is gone"
	[[ ${PY_OUT:0:1} == 0 ]] || { PY_OUT=${PY_OUT:1}; return 1; }
	PY_OUT=${PY_OUT:1}
}

# json <python expression over d>: evaluate it on the JSON in $TMP/out.
json() {
	py_eval json "$TMP/out" "" "$1" || { echo "$PY_OUT" >&2; return 1; }
	echo "$PY_OUT"
}

# expect_json <python expression> <expected printed value>
expect_json() {
	py_eval json "$TMP/out" "" "$1" || fail "cannot evaluate $1 on the JSON output: $PY_OUT"
	[[ $PY_OUT == "$2" ]] || fail "$1 is '$PY_OUT', expected '$2'"
}

py_start

# Start a command in the background, remembered for cleanup; its PID is $BG.
bg() {
	"$@" {PY_W}>&- {PY_R}<&- >/dev/null 2>>"$TMP/bg-err" &
	BG=$!
	BG_PIDS+=("$BG")
}

# wait_for <seconds> <python expression over the status JSON of NAME> NAME
wait_for() {
	local secs=$1 expr=$2 sem=$3 i
	for ((i = 0; i < secs * 50; i++)); do
		if "$SHMSEM" status --json "$sem" >"$TMP/out" 2>"$TMP/err" &&
			py_eval json "$TMP/out" "" "$expr" && [[ $PY_OUT == True ]]; then
			return 0
		fi
		sleep 0.02
	done
	fail "timed out waiting for $expr on $sem"
}
