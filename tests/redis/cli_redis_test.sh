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

"$1"
