#!/usr/bin/env bash
# Adversarial tests of the operators' commands (`status --prometheus`, the
# exporter): a segment another process scribbled on, clients that connect
# and stall. ops_adversarial_test.sh <CaseName>, one ctest case each (see
# CMakeLists.txt). SHMSEM names the binary.
source "$(dirname "$0")/lib.sh"
: "${SHMSEM:?SHMSEM must name the shmsem binary}"

# histograms_never_decrease <file>: every histogram's cumulative buckets in
# the Prometheus text <file> are non-decreasing and end at its _count.
histograms_never_decrease() {
	TMP=$TMP "$PY" - "$1" <<'PY' || fail "a histogram's buckets decrease: $(cat "$TMP/hist")"
import os, re, sys
series = {}
count = {}
for line in open(sys.argv[1]):
    m = re.match(r'^(\w+)_bucket\{pool="(.*)",le="([^"]+)"\} (\S+)$', line)
    if m:
        series.setdefault((m[1], m[2]), []).append((m[3], int(m[4])))
    m = re.match(r'^(\w+)_count\{pool="(.*)"\} (\S+)$', line)
    if m:
        count[(m[1], m[2])] = int(m[3])
bad = []
for k, buckets in series.items():
    values = [v for _, v in buckets]
    if any(b < a for a, b in zip(values, values[1:])) or values[-1] != count.get(k):
        bad.append("%s: %s count %s" % (k, buckets, count.get(k)))
open(os.environ["TMP"] + "/hist", "w").write("\n".join(bad))
sys.exit(1 if bad or not series else 0)
PY
}

# Every counter and histogram bucket of the core (layout.h: the Core's
# lines from `acquisitions` to its end, 256 bytes into the Core at 128,
# up to the lease table at Header::lease_off) set to 2^63, as a writer
# could: the library adds the lanes' counts to them without saturating, and
# the exporter summed the buckets into cumulative ones with wrapping adds,
# so `le` buckets decreased (an invalid histogram: histogram_quantile()
# reads garbage). They saturate instead.
PrometheusHistogramBucketsNeverDecreaseOnHugeCounts() {
	local n
	n=$(name hist)
	expect_rc 0 "$SHMSEM" create "$n" --permits 2
	expect_rc 0 "$SHMSEM" run "$n" -- true  # a hold and a wait of its own
	TMP=$TMP "$PY" - "/dev/shm/${n#/}" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(32)
    lease_off = struct.unpack("<Q", f.read(8))[0]
    start = 128 + 256
    assert lease_off > start + 8 * (336 + 15), lease_off
    f.seek(start)
    f.write(struct.pack("<Q", 1 << 63) * ((lease_off - start) // 8))
PY
	expect_rc 0 "$SHMSEM" status --prometheus "$n"
	expect_out "shmsem_up{pool=\"$n\"} 1"
	histograms_never_decrease "$TMP/out"
}

# `top` without a name shows every semaphore in /dev/shm. It used to stop
# with "semaphore invariant is broken" when any one of them was damaged
# (here `available` past the geometry, as another user could write it), so
# one bad segment of somebody else's left the operator with nothing.
TopWithoutNameShowsADamagedSemaphoreAndGoesOn() {
	local n
	n=$(name dmg)
	expect_rc 0 "$SHMSEM" create "$n" --permits 2
	"$PY" - "/dev/shm/${n#/}" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(128 + 40)  # core.available (layout.h: Core after the lock owner)
    f.write(struct.pack("<I", 0xffffffff))
PY
	expect_rc 0 "$SHMSEM" top -n 1
	expect_out "$n"
}

# A client that connects and sends nothing holds a server thread until
# civetweb's request timeout (30 s by default), and the exporter had two:
# a couple of idle connections (a port scanner, a stalled proxy) made every
# scrape time out. Four of them now cost a scrape nothing noticeable.
ExporterScrapesDespiteIdleConnections() {
	command -v "$PY" >/dev/null || skip "no python3"
	local n line port exporter
	n=$(name idle)
	expect_rc 0 "$SHMSEM" create "$n" --permits 1
	: >"$TMP/exporter.err"
	"$SHMSEM" exporter --listen 127.0.0.1:0 "$n" >/dev/null 2>"$TMP/exporter.err" &
	exporter=$!
	BG_PIDS+=("$exporter")
	for _ in $(seq 500); do
		line=$(grep -o 'serving http://127\.0\.0\.1:[0-9]*/metrics' "$TMP/exporter.err" || true)
		[[ -z $line ]] || break
		kill -0 "$exporter" 2>/dev/null || fail "the exporter exited: $(cat "$TMP/exporter.err")"
		sleep 0.02
	done
	[[ -n $line ]] || fail "the exporter did not say where it serves"
	port=${line#serving http://127.0.0.1:}
	port=${port%/metrics}
	"$PY" - "$port" "$n" <<'PY' || fail "no scrape within 8 s beside idle connections"
import socket, sys, time, urllib.request
port, name = int(sys.argv[1]), sys.argv[2]
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
time.sleep(0.3)
body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=8).read().decode()
assert 'shmsem_up{pool="%s"} 1' % name in body, body[:500]
for s in idle:
    s.close()
PY
	kill -TERM "$exporter"
	local rc=0
	wait "$exporter" || rc=$?
	[[ $rc == 0 ]] || fail "the exporter exited $rc on SIGTERM"
}

case=${1:?usage: ops_adversarial_test.sh <CaseName>}
declare -F "$case" >/dev/null || fail "no test case $case"
"$case"
echo "PASS: $case"
