#!/bin/sh
# Run the segment fuzzer (tests/fuzz/segment_fuzz.cc) for a bounded time.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [WORKERS] [CORPUS]
#
# BUILD_DIR is a SHMSEM_FUZZ=ON build (`make fuzz` makes build-fuzz). Seeds
# are generated afresh into BUILD_DIR/fuzz/seeds. CORPUS (default
# BUILD_DIR/fuzz/corpus) keeps what the fuzzer found across runs; `fresh`
# starts from the seeds alone (BUILD_DIR/fuzz/corpus-fresh, emptied first).
# WORKERS fuzzer processes (default: the number of cores) share the corpus,
# each for SECONDS. Any finding (a sanitizer report, a crash, an input that
# runs longer than FUZZ_TIMEOUT seconds (default 30: generous, for a loaded
# machine; a hang is forever), a leak, more than 2 GiB of memory) ends that
# worker, leaves its input in BUILD_DIR/fuzz/artifacts and makes this script
# fail. The inputs of past findings (tests/fuzz/regressions/) are run first
# with the seeds. Prints the executions (all workers) and the coverage.
#
# Every input ends with the writer stopped, shmsem_recover and
# shmsem_check, which must return 0 (a failure is a finding: "ERROR: shmsem
# fuzz: shmsem_check after shmsem_recover ..."). The environment passes on
# to the fuzzer: SHMSEM_FUZZ_FINAL=repaired|off weakens that check,
# SHMSEM_FUZZ_KNOWN="msg|msg" lets known check messages pass (printed once),
# SHMSEM_FUZZ_TRACE=1 prints each op's time and the hook points' counts
# (for replaying one input: segment_fuzz.cc).
set -eu
usage="usage: run.sh BUILD_DIR SECONDS [WORKERS] [CORPUS|fresh]"
BUILD=$(cd "${1:?$usage}" && pwd)
SECS=${2:?$usage}
WORKERS=${3:-$(nproc)}
OUT=$BUILD/fuzz
CORPUS=${4:-$OUT/corpus}
REGRESSIONS=$(cd "$(dirname "$0")" && pwd)/regressions
TIMEOUT=${FUZZ_TIMEOUT:-30}
FUZZER=$BUILD/tests/fuzz/shmsem_segment_fuzz
SEEDER=$BUILD/tests/fuzz/shmsem_fuzz_seeds
mkdir -p "$OUT/seeds" "$OUT/artifacts"
if [ "$CORPUS" = fresh ]; then
	CORPUS=$OUT/corpus-fresh
	rm -rf "$CORPUS"
fi
mkdir -p "$CORPUS"
rm -f "$OUT"/seeds/* "$OUT"/fuzz-*.log "$OUT"/fuzz.log
"$SEEDER" "$OUT/seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
[ -x /usr/lib/llvm-14/bin/llvm-symbolizer ] &&
	export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-14/bin/llvm-symbolizer}
echo "fuzz: $SECS s x $WORKERS workers over $CORPUS; logs in $OUT/fuzz-*.log"
status=0
# -jobs=-workers=N: N processes, each until SECONDS or its first finding,
# each logging to fuzz-<n>.log in the current directory.
(cd "$OUT" && "$FUZZER" -jobs="$WORKERS" -workers="$WORKERS" \
	-max_total_time="$SECS" -timeout="$TIMEOUT" -rss_limit_mb=2048 -max_len=16384 \
	-print_final_stats=1 -artifact_prefix="$OUT/artifacts/" \
	"$CORPUS" "$OUT/seeds" "$REGRESSIONS" >"$OUT/fuzz-main.log" 2>&1) || status=$?
execs=0
for log in "$OUT"/fuzz-[0-9]*.log; do
	[ -f "$log" ] || continue
	n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	execs=$((execs + ${n:-0}))
	last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
	echo "fuzz: $(basename "$log"): ${last:-no progress line}"
done
echo "fuzz: $execs executions in all; corpus $(ls "$CORPUS" | wc -l) inputs ($(du -sh "$CORPUS" | cut -f1))"
if grep -q 'libFuzzer: run interrupted' "$OUT"/fuzz-*.log; then
	echo "fuzz: INTERRUPTED from outside (SIGINT/SIGTERM) before the time was up" >&2
	exit 1
fi
if [ "$status" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$OUT"/fuzz-*.log; then
	echo "fuzz: FAILED (exit $status); the report:" >&2
	grep -h -E -A40 'ERROR: |runtime error:' "$OUT"/fuzz-*.log | head -n 80 >&2 || true
	echo "fuzz: inputs in $OUT/artifacts:" >&2
	ls -l "$OUT/artifacts" >&2
	echo "fuzz: replay one with: $FUZZER <input>" >&2
	exit 1
fi
echo "fuzz: no findings"
