#!/bin/sh
# Run every benchmark once, print one table (bench/report.py) and draw the
# contention plots (bench/plot.py: throughput and worst wait against K, every
# contender, unpinned and pinned) into $SHMSEM_BENCH_PLOTS (default: bench/plots,
# the committed ones; see RESULTS.md). Needs gnuplot (Debian gnuplot-nox).
# Usage: bench/run.sh BUILD_DIR     (e.g. `make bench` runs bench/run.sh build)
# Takes about three and a half minutes on 2 CPUs. Extra arguments go to the benchmark
# binary (e.g. --benchmark_filter=Contention; the plots need BM_Contention).
set -eu

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [benchmark args...]" >&2
	exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench/shmsem_bench
if [ ! -x "$bin" ]; then
	echo "$0: $bin not found; configure with -DSHMSEM_BENCH=ON and build it" >&2
	exit 1
fi
plots=${SHMSEM_BENCH_PLOTS:-$here/plots}
# Fail before the run, not after it.
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "$0: gnuplot not found; it draws the plots: install the Debian package gnuplot-nox (scripts/install-deps does)" >&2
	exit 1
fi

json=$(mktemp /tmp/shmsem-bench-XXXXXX.json)
log=${json%.json}.log
# Scenarios with their own Iterations/MinTime ignore the global min time.
if ! "$bin" --benchmark_min_time=0.2 \
	--benchmark_out="$json" --benchmark_out_format=json "$@" >"$log" 2>&1; then
	echo "$0: benchmark run failed; log: $log" >&2
	tail -20 "$log" >&2
	exit 1
fi
python3 "$here/report.py" "$json"
echo
if grep -q '"name": "BM_Contention<' "$json"; then
	python3 "$here/plot.py" "$json" "$plots"
else
	echo "plots: none drawn (no BM_Contention in this run)"
fi
# Problems a benchmark reported on stderr (not timings), e.g. a failed call.
if grep -q '^bench:' "$log"; then
	echo
	echo "Reported by the benchmarks:"
	grep '^bench:' "$log"
fi
# One-shot measurements with their own statistics (not Google Benchmark).
echo
echo "Crash reclamation and status at scale:"
# The library reads SHMSEM_DEATH_WATCH once per process: one run with the
# variable removed (the default), one forcing the timed-polling fallback.
reclaim() {
	label=$1
	shift
	echo
	echo "death watch: $label"
	env "$@" "$build/bench/shmsem_reclaim_bench" --runs 50 --waiters 1000 --seconds 3
}
reclaim "default (events where available)" -u SHMSEM_DEATH_WATCH
reclaim "poll (forced fallback)" SHMSEM_DEATH_WATCH=poll
echo
echo "death watch: kill -> grant (fresh, reused; 0/50/200 ms) and idle wake-ups:"
"$build/bench/shmsem_watch_bench" --runs 15 --seconds 5
echo
echo "acquires pending on one io_uring:"
for n in 10000 100000; do
	"$build/bench/shmsem_ring_bench" $n
done
if [ -x "$build/tools/shmsem" ]; then
	echo
	"$build/bench/shmsem_status_bench" "$build/tools/shmsem" 5
fi
# The Redis backend against two PINGs, one round trip and a minimal Lua
# semaphore (RESULTS.md, "Redis backend"): it starts its own redis-servers;
# skipped, saying why, without redis-server or the binary (no hiredis).
echo
redis_json=${json%.json}-redis.json
if [ ! -x "$build/bench/shmsem_redis_bench" ]; then
	echo "Redis backend: skipped ($build/bench/shmsem_redis_bench not built)"
elif ! command -v redis-server >/dev/null 2>&1; then
	echo "Redis backend: skipped (no redis-server: scripts/install-deps installs it)"
else
	echo "Redis backend (appendfsync everysec and always; unix socket and TCP):"
	"$build/bench/shmsem_redis_bench" --cli "$build/tools/shmsem" \
		--benchmark_counters_tabular=true \
		--benchmark_out="$redis_json" --benchmark_out_format=json
	echo "raw (Redis): $redis_json"
fi
echo
echo "raw: $json  log: $log"
