# Shared helpers for the shmsem CLI tests (sourced, bash).
#
# Every test gets semaphore names under /shmsem-cli-test-<pid>-*, a private
# temporary directory, and an EXIT trap that stops the background processes
# it started and removes both, pass or fail.
set -euo pipefail


SKIP=77  # ctest SKIP_RETURN_CODE

PREFIX="/shmsem-cli-test-$$"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/shmsem-cli-test.XXXXXX")
BG_PIDS=()

cleanup() {
	local p
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
# its exit status: expect_rc <code> <command...>
expect_rc() {
	local want=$1 rc=0
	shift
	"$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc == "$want" ]] || fail "'$*' exited $rc, expected $want"
}

# expect_out <fixed string>: stdout of the last expect_rc contains it.
expect_out() { grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"; }
expect_err() { grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
expect_no_err() { [[ ! -s $TMP/err ]] || fail "unexpected stderr"; }

# json <python expression over d>: evaluate it on the JSON in $TMP/out.
json() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$TMP/out" "$1"
}

# expect_json <python expression> <expected printed value>
expect_json() {
	local got
	got=$(json "$1") || fail "cannot evaluate $1 on the JSON output"
	[[ $got == "$2" ]] || fail "$1 is '$got', expected '$2'"
}

# Start a command in the background, remembered for cleanup; its PID is $BG.
bg() {
	"$@" >/dev/null 2>>"$TMP/bg-err" &
	BG=$!
	BG_PIDS+=("$BG")
}

# wait_for <seconds> <python expression over the status JSON of NAME> NAME
wait_for() {
	local secs=$1 expr=$2 sem=$3 i
	for ((i = 0; i < secs * 50; i++)); do
		if "$SHMSEM" status --json "$sem" >"$TMP/out" 2>"$TMP/err" &&
			[[ $(json "$expr") == True ]]; then
			return 0
		fi
		sleep 0.02
	done
	fail "timed out waiting for $expr on $sem"
}
