#!/usr/bin/env python3
"""Markdown tables of a shmsem_redis_bench JSON (bench/RESULTS.md, "Redis
backend"). Usage: bench/redis_table.py RUN.json"""
import json
import sys

TABLES = [
    ("Uncontended: acquire + release against two PINGs (aim <= 1.3x)",
     "Uncontended",
     [("2 PINGs us", "ping2_us"), ("shmsem us", "shmsem_us"),
      ("Lua us", "lua_us"), ("shmsem / 2 PINGs", "shmsem_x_2ping"),
      ("Lua / 2 PINGs", "lua_x_2ping"), ("shmsem / Lua", "shmsem_x_lua")]),
    ("Hand-off: release in one process to the waiter's return in another"
     " (aim <= 2x one round trip); medians of 300",
     "HandOff",
     [("PING us", "ping_us"), ("shmsem us", "shmsem_med_us"),
      ("shmsem p99", "shmsem_p99_us"), ("its release call us",
                                        "release_med_us"),
      ("Lua us", "lua_med_us"), ("Lua p99", "lua_p99_us"),
      ("shmsem / RTT", "shmsem_x_rtt"), ("Lua / RTT", "lua_x_rtt"),
      ("shmsem / Lua", "shmsem_x_lua")]),
    ("K = 8 processes on one permit (2 x 1 s windows each)",
     "Contended",
     [("shmsem /s", "shmsem_per_s"), ("Jain", "shmsem_jain"),
      ("p50 us", "shmsem_p50_us"), ("p99 us", "shmsem_p99_us"),
      ("Lua /s", "lua_per_s"), ("Lua Jain", "lua_jain"),
      ("Lua p50 us", "lua_p50_us"), ("Lua p99 us", "lua_p99_us"),
      ("shmsem / Lua", "shmsem_x_lua")]),
    ("10,000 queued waiters",
     "Queue10k",
     [("enqueue us/waiter", "enqueue_us"), ("stat, empty ms", "stat0_ms"),
      ("stat ms", "stat_ms"), ("inspect ms", "inspect_ms"),
      ("status ms", "status_ms"), ("status --json ms", "status_json_ms"),
      ("keep-alive round ms", "renew_round_ms"),
      ("its CPU share", "renew_cpu_share"),
      ("Lua 1 ms poll round ms", "lua_poll_round_ms"),
      ("its CPU share", "lua_poll_cpu_share"),
      ("Lua status (GET) us", "lua_status_us")]),
    ("Server cost per call (INFO commandstats; schedstat CPU per pair)",
     "ServerCost",
     [("acquire us", "acquire_server_us"), ("its redis.calls",
                                            "acquire_calls"),
      ("release us", "release_server_us"), ("its redis.calls",
                                            "release_calls"),
      ("Lua EVALSHA us", "lua_evalsha_server_us"),
      ("CPU 2 PINGs us", "cpu_ping2_us"), ("CPU shmsem pair us",
                                           "cpu_shmsem_us"),
      ("CPU Lua pair us", "cpu_lua_us")]),
]


def fmt(v):
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.3g" % v


def main():
    runs = json.load(open(sys.argv[1]))["benchmarks"]
    for title, scen, cols in TABLES:
        rows = [b for b in runs if b["name"].split("/")[1] == scen]
        if not rows:
            continue
        print("**%s**\n" % title)
        print("| fsync/transport | " + " | ".join(c[0] for c in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for b in rows:
            parts = b["name"].split("/")
            at = [p for p in parts if p in ("everysec", "always")][0]
            tr = [p for p in parts if p in ("unix", "tcp")][0]
            vals = [fmt(b.get(c[1], float("nan"))) for c in cols]
            print("| %s %s | %s |" % (at, tr, " | ".join(vals)))
        print()


main()
