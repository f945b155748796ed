#!/bin/bash
# The shmsem command on redis:// names, against a redis-server this script
# starts on a unix socket and a free loopback port in a temporary directory
# (and stops). One case per run: cli_redis_test.sh <Case>; $SHMSEM is the
# command, $REDIS_SERVER the server. Exit 0 pass, 1 fail, 77 skip.
set -u
SHMSEM=${SHMSEM:?}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
command -v "$REDIS_SERVER" >/dev/null || { echo "no redis-server"; exit 77; }

dir=$(mktemp -d /tmp/shmsem-cli-redis-XXXXXX)
srv=""
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

start_server() {
  "$REDIS_SERVER" --port 0 --unixsocket "$dir/s.sock" --unixsocketperm 700 \
    --dir "$dir" --appendonly yes --appendfsync always --save '' \
    --logfile "$dir/log" &
  srv=$!
  for _ in $(seq 1 200); do
    [ -S "$dir/s.sock" ] && return 0
    sleep 0.05
  done
  fail "redis-server did not start"
}

name() { echo "redis+unix://$dir/s.sock?pool=$1"; }

# Every command that takes a name works on a remote one.
CommandsWorkOnRedisNames() {
  start_server
  local n; n=$(name cli)
  "$SHMSEM" create "$n" --permits 2 --lease-ttl 2s || fail "create"
  "$SHMSEM" create "$n" --permits 3 >/dev/null 2>&1
  [ $? -eq 4 ] || fail "create with other settings must exit 4"
  "$SHMSEM" status "$n" | grep -q "available  2" || fail "status text"
  "$SHMSEM" status "$n" | grep -q "^file" && fail "status shows a file"
  "$SHMSEM" status "$n" --json | grep -q '"capacity": 2' || fail "status json"
  out=$("$SHMSEM" run "$n" -- sh -c 'echo ran; exit 7')
  [ $? -eq 7 ] && [ "$out" = ran ] || fail "run status or output"
  "$SHMSEM" set "$n" --permits 1 || fail "set"
  "$SHMSEM" status "$n" --json | grep -q '"capacity": 1' || fail "set took"
  "$SHMSEM" recover "$n" >/dev/null || fail "recover"
  "$SHMSEM" shutdown "$n" >/dev/null || fail "shutdown"
  "$SHMSEM" run "$n" -- true 2>/dev/null && fail "run after shutdown"
  "$SHMSEM" rm "$n" || fail "rm"
  "$SHMSEM" status "$n" >/dev/null 2>&1
  [ $? -eq 3 ] || fail "status of a removed pool must exit 3"
  "$SHMSEM" create /shmsem-cli-redis-local --lease-ttl 1s --permits 1 \
    >/dev/null 2>&1
  [ $? -eq 2 ] || fail "--lease-ttl on a local name must be a usage error"
  echo PASS
}

# A `shmsem run` stopped past its lease's TTL finds the lease lost when it
# continues, and kills its command's whole process group.
RunKillsItsCommandWhenTheLeaseIsLost() {
  start_server
  local n; n=$(name lost)
  "$SHMSEM" create "$n" --permits 1 --lease-ttl 300ms || fail "create"
  "$SHMSEM" run "$n" -- sh -c 'sleep 60 & sleep 60' 2>"$dir/err" &
  local run=$!
  for _ in $(seq 1 100); do
    "$SHMSEM" status "$n" --json | grep -q '"held": 1' && break
    sleep 0.05
  done
  local group; group=$(pgrep -P "$run" sh)
  [ -n "$group" ] || fail "command not started"
  kill -STOP "$run"
  # Past the TTL someone else gets the permit (the server reaps it).
  "$SHMSEM" run "$n" --timeout 10s -- true || fail "permit not taken back"
  kill -CONT "$run"
  wait "$run"
  local rc=$?
  [ $rc -eq 137 ] || fail "run exited $rc, not 137 (killed)"
  grep -q "lease lost" "$dir/err" || fail "no word of the lost lease"
  for _ in $(seq 1 100); do
    pgrep -g "$group" >/dev/null || break
    sleep 0.05
  done
  pgrep -g "$group" >/dev/null && fail "the command's group survived"
  echo PASS
}

# `shmsem list SERVER` lists the server's pools (not the removed ones),
# as text and JSON; a pool's name or a server that does not answer is not
# a place to list.
ListShowsAServersPools() {
  start_server
  local at="redis+unix://$dir/s.sock" out
  out=$("$SHMSEM" list "$at") || fail "list of an empty server"
  [ "$out" = "no semaphores in $at" ] || fail "empty server: $out"
  "$SHMSEM" create "$(name alpha)" --permits 2 || fail "create alpha"
  "$SHMSEM" create "$(name beta)" --permits 3 || fail "create beta"
  "$SHMSEM" create "$(name gone)" --permits 1 || fail "create gone"
  "$SHMSEM" rm "$(name gone)" || fail "rm gone"
  out=$("$SHMSEM" list "$at") || fail "list"
  echo "$out" | grep -F "$(name alpha) " | grep -Eq " 2 +2 +0 +0 +open +-$" \
    || fail "alpha's row: $out"
  echo "$out" | grep -Fq "$(name beta) " || fail "beta missing: $out"
  echo "$out" | grep -Fq "pool=gone" && fail "a removed pool is listed"
  [ "$(echo "$out" | grep -c "pool=")" -eq 2 ] || fail "two pools: $out"
  out=$("$SHMSEM" list --json "$at") || fail "list --json"
  echo "$out" | grep -Fq "\"name\": \"$(name beta)\"" || fail "json name"
  echo "$out" | grep -q '"capacity": 3' || fail "json capacity"
  echo "$out" | grep -q '"uid": null' || fail "json uid of a remote pool"
  "$SHMSEM" list "$(name alpha)" >/dev/null 2>&1
  [ $? -eq 2 ] || fail "a pool's name is not a place: usage error"
  "$SHMSEM" list "redis+unix://$dir/none.sock" >/dev/null 2>"$dir/err"
  [ $? -eq 1 ] || fail "an unreachable server must exit 1"
  grep -q "cannot read" "$dir/err" || fail "no word of the server"
  echo PASS
}

# `top` and `exporter` given a server show every pool on it.
TopAndExporterShowAServersPools() {
  start_server
  local at="redis+unix://$dir/s.sock" out line port exp
  "$SHMSEM" create "$(name one)" --permits 2 || fail "create one"
  "$SHMSEM" create "$(name two)" --permits 1 || fail "create two"
  out=$("$SHMSEM" top -b -n 1 "$at") || fail "top"
  echo "$out" | grep -Fq "2 semaphores in $at," || fail "top's title: $out"
  echo "$out" | grep -Fq "$(name one)" || fail "top lacks one"
  echo "$out" | grep -Fq "$(name two)" || fail "top lacks two"
  "$SHMSEM" top -b -n 1 "redis+unix://$dir/none.sock" >/dev/null 2>&1 \
    && fail "top of an unreachable server must fail"
  "$SHMSEM" exporter --listen 127.0.0.1:0 "$at" >/dev/null 2>"$dir/exp" &
  exp=$!
  for _ in $(seq 1 250); do
    line=$(grep -o 'serving http://127\.0\.0\.1:[0-9]*/metrics' "$dir/exp")
    [ -n "$line" ] && break
    kill -0 "$exp" 2>/dev/null || fail "exporter exited: $(cat "$dir/exp")"
    sleep 0.02
  done
  [ -n "$line" ] || fail "the exporter did not say where it serves"
  grep -Fq "every semaphore in $at" "$dir/exp" || fail "exporter's message"
  port=${line#serving http://127.0.0.1:}
  port=${port%/metrics}
  out=$(curl -sf "http://127.0.0.1:$port/metrics")
  kill -TERM "$exp"
  wait "$exp" || fail "the exporter exited non-zero on SIGTERM"
  echo "$out" | grep -Fq "shmsem_up{pool=\"$(name one)\"} 1" \
    || fail "exporter lacks one"
  echo "$out" | grep -Fq "shmsem_up{pool=\"$(name two)\"} 1" \
    || fail "exporter lacks two"
  echo PASS
}

# What the newcomer tripped on: the lease TTL named among the settings an
# existing pool was created with, a server or a bad pool name said in plain
# words, and no percentiles or histograms the server does not keep.
RemoteNamesAndSettingsSaidPlainly() {
  start_server
  local n at="redis+unix://$dir/s.sock" out
  n=$(name plain)
  "$SHMSEM" create "$n" --permits 2 --lease-ttl 2s || fail "create"
  "$SHMSEM" create "$n" --permits 2 --lease-ttl 2s || fail "same settings"
  "$SHMSEM" create "$n" --permits 2 2>"$dir/err"
  [ $? -eq 4 ] || fail "another TTL must exit 4"
  grep -Fq -- "already exists with --permits 2 --max-waiters 1024 --lease-ttl 2s" \
    "$dir/err" || fail "the TTL is not named: $(cat "$dir/err")"
  # A name with '?' is quoted where a command line is suggested.
  grep -Fq -- "'shmsem rm \"$n\"'" "$dir/err" \
    || fail "the rm suggestion is not quoted: $(cat "$dir/err")"
  "$SHMSEM" status "$(name nothere)" 2>"$dir/err"
  grep -Fq -- "'shmsem create \"$(name nothere)\" --permits N'" "$dir/err" \
    || fail "the create suggestion is not quoted: $(cat "$dir/err")"
  "$SHMSEM" status "$n" | grep -Eq "^lease ttl +2s$" || fail "no lease ttl line"
  "$SHMSEM" status "$n" --json | grep -q '"lease_ttl_ns": 2000000000' \
    || fail "no lease_ttl_ns"
  "$SHMSEM" status "$at" 2>"$dir/err"
  [ $? -eq 2 ] || fail "a server given as a pool must be a usage error"
  grep -Fq "is a server, not a semaphore: name one of its pools with ?pool=POOL; 'shmsem list $at' lists them" \
    "$dir/err" || fail "server message: $(cat "$dir/err")"
  "$SHMSEM" status "redis://127.0.0.1:1/" 2>"$dir/err"
  [ $? -eq 2 ] || fail "a tcp server given as a pool must be a usage error"
  grep -Fq "with /POOL" "$dir/err" || fail "tcp server: $(cat "$dir/err")"
  "$SHMSEM" create "redis://127.0.0.1:1/a:b" --permits 1 2>"$dir/err"
  [ $? -eq 2 ] || fail "a bad pool name must be a usage error"
  grep -Fq "invalid pool name 'a:b'" "$dir/err" \
    || fail "pool name message: $(cat "$dir/err")"
  grep -q "refused the settings" "$dir/err" && fail "blames the settings"
  "$SHMSEM" run "$n" -- true || fail "run"
  out=$("$SHMSEM" status "$n") || fail "status"
  echo "$out" | grep -Eq "^  wait time +not kept for a remote semaphore" \
    || fail "wait time line: $out"
  echo "$out" | grep -Eq "^  hold time +not kept for a remote semaphore" \
    || fail "hold time line: $out"
  out=$("$SHMSEM" status --json "$n") || fail "status --json"
  echo "$out" | grep -q '"wait_ns": null' || fail "json wait_ns: $out"
  echo "$out" | grep -q '"hold_ns": null' || fail "json hold_ns: $out"
  out=$("$SHMSEM" status --prometheus "$n") || fail "prometheus"
  echo "$out" | grep -Fq "shmsem_up{pool=\"$n\"} 1" || fail "no shmsem_up"
  echo "$out" | grep -Eq "shmsem_(wait|hold)_seconds" \
    && fail "histograms exported for a remote pool: $out"
  echo PASS
}

"$1"
