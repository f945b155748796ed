#!/bin/sh
# bench/plot.py draws non-empty PNGs from a small sample of shmsem_bench JSON
# (testdata/contention_sample.json: three contenders, K = 2, 4, 8, N=1, both
# placements, one failed run, one other scenario). Checks files, not timings.
# Exit 77 (skipped) without gnuplot.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "SKIP: gnuplot not installed (Debian gnuplot-nox)"
	exit 77
fi
out=$(mktemp -d /tmp/shmsem-plot-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
python3 "$here/plot.py" "$here/testdata/contention_sample.json" "$out"
for stem in throughput max_wait; do
	png=$out/contention_${stem}_N1.png
	if [ ! -s "$png" ] || [ "$(head -c 4 "$png" | tail -c 3)" != PNG ]; then
		echo "FAIL: $png missing, empty or not a PNG" >&2
		exit 1
	fi
	for pin in 0 1; do
		dat=$out/contention_${stem}_N1_pin${pin}.dat
		if ! grep -q '^K shmsem sem_t flock$' "$dat"; then
			echo "FAIL: $dat lacks the header 'K shmsem sem_t flock'" >&2
			exit 1
		fi
		if [ "$(grep -c '^[248] ' "$dat")" -ne 3 ]; then
			echo "FAIL: $dat lacks a row for each of K = 2, 4, 8" >&2
			exit 1
		fi
	done
done
echo "ok: contention_throughput_N1.png contention_max_wait_N1.png"
