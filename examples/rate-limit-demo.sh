#!/usr/bin/env bash
# `shmsem run` as a shell rate limiter: 300 jobs from 4 parallel loops share
# one semaphore of 8 permits and 100 acquisitions a second (bursts of 20),
# and the script measures the rate they got.
#
#   examples/rate-limit-demo.sh            shmsem from PATH, else build/tools
#   SHMSEM=/path/to/shmsem NAME=/api2 JOBS=600 LOOPS=8 RATE=200 BURST=10 \
#     examples/rate-limit-demo.sh
#
# It creates NAME (default /api) with --exclusive, so it never borrows a
# semaphore of that name that already exists, and removes it on exit.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z ${SHMSEM:-} ]]; then
	if command -v shmsem >/dev/null; then
		SHMSEM=shmsem
	elif [[ -x $here/build/tools/shmsem ]]; then
		SHMSEM=$here/build/tools/shmsem
	else
		echo "rate-limit-demo: no shmsem on PATH or in build/tools; run 'make build' or set SHMSEM" >&2
		exit 1
	fi
fi
NAME=${NAME:-/api}
JOBS=${JOBS:-300}
LOOPS=${LOOPS:-4}
RATE=${RATE:-100} BURST=${BURST:-20}

# Show a command line as in a terminal, then run it (a pipeline too).
shown() {
	printf '$ %s\n' "$1"
	eval "$1"
}
# The shmsem command as it is shown: "shmsem", wherever it lives.
shmsem() { "$SHMSEM" "$@"; }
name=$(printf %q "$NAME")

rc=0
shown "shmsem create $name --permits 8 --rate $RATE/s --burst $BURST --exclusive" || rc=$?
if ((rc == 4)); then
	echo "rate-limit-demo: $NAME exists already; run with NAME=/another-name" >&2
	exit 1
fi
((rc == 0)) || exit "$rc"
trap '"$SHMSEM" rm "$NAME" 2>/dev/null || true' EXIT

shown "shmsem status $name | grep -E '^(capacity|rate) '"
echo
echo "# $JOBS jobs: $LOOPS shell loops, each running 'shmsem run $NAME -- true'"
echo "# $((JOBS / LOOPS)) times in a row"
per_loop=$((JOBS / LOOPS))
start=$EPOCHREALTIME
pids=()
for ((l = 0; l < LOOPS; l++)); do
	(
		for ((i = 0; i < per_loop; i++)); do
			"$SHMSEM" run "$NAME" -- true
		done
	) &
	pids+=($!)
done
# A look at the bucket while they run: tokens spent, the next one due.
sleep 1
shown "shmsem status $name | grep -E '^(held|rate) '"
for p in "${pids[@]}"; do wait "$p"; done
end=$EPOCHREALTIME

jobs_run=$((per_loop * LOOPS))
awk -v n="$jobs_run" -v t0="$start" -v t1="$end" -v rate="$RATE" -v burst="$BURST" 'BEGIN {
	t = t1 - t0
	printf "\n%d jobs in %.2f s: %.1f acquisitions/s\n", n, t, n / t
	floor = (n - burst) / rate
	printf "the limit allows at most %d + %d/s: %d jobs need at least %.2f s\n", burst, rate, n, floor
	if (t < floor * 0.99)
		printf "FASTER THAN THE LIMIT: something is wrong\n"
	else if (n / t < rate * 0.8)
		printf "(below the limit: this machine starts processes more slowly than that)\n"
}'
echo
shown "shmsem status $name | sed -n '/^Counters/,\$p'"
shown "shmsem rm $name"
trap - EXIT
