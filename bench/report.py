#!/usr/bin/env python3
"""Render shmsem_bench JSON output as one Markdown table.

Usage: report.py RESULTS.json

One row per scenario x arguments x implementation: the scenario's metric,
its ratio to glibc sem_t, to the physical floor (2 atomic RMWs for the
uncontended pair, a raw futex wake for handoffs) and to the fair floor (the
ticket semaphore). Ratios are value/reference; "lower" or "higher" in the
metric column says which way is better. Ratios compare only rows of the same
scenario and identical arguments (e.g. "K:2/N:1/pin:1" with "K:2/N:1/pin:1",
never with "pin:0"). Reports only: nothing is judged here.
"""
import json
import re
import sys

NAMES = {
    "Shmsem": "shmsem",
    "ShmsemRing": "shmsem_uring",
    "GlibcSem": "sem_t",
    "SysV": "semop",
    "SysVUndo": "semop+UNDO",
    "RobustMutex": "robust_mutex",
    "Flock": "flock",
    "Ticket": "ticket",
    "RawFutex": "raw_futex",
    "RawFutexTimed": "raw_futex+timeout",
    "TwoRmw": "2x_atomic_rmw",
}

# scenario: (title, metric counter, better, physical floor impl, extra counters)
SCENARIOS = {
    "BM_Uncontended": ("(a) uncontended pair", "ns_per_pair", "lower", "TwoRmw", []),
    "BM_PingPong": ("(b) ping-pong handoff", "ns_per_handoff", "lower", "RawFutex", []),
    "BM_Handoff": ("(d) release-to-grant, sleeping head", "p50_ns", "lower", "RawFutex",
                   ["p99_ns"]),
    "BM_Contention": ("(c) K procs contending", "ops_per_s", "higher", None,
                      ["jain", "min_ops", "max_ops", "p50_wait_ns", "p99_wait_ns",
                       "max_wait_ns"]),
    "BM_PairVsPermits": ("(f) pair vs permits N", "ns_per_pair", "lower", None, []),
    "BM_QueueHandoff": ("(f) pair with Q queued", "ns_per_pair", "lower", None,
                        ["mean_queued"]),
    "BM_TryPair": ("(f2) try_acquire+release pair", "ns_per_pair", "lower", None, []),
    "BM_PairVsProcesses": ("(f3) pair vs attached processes", "ns_per_pair", "lower",
                           None, ["attached"]),
    "BM_ShmsemStat": ("(e) shmsem_stat, 4096 permits", "ns_per_stat", "lower", None, []),
}

NAME_RE = re.compile(r"^(BM_\w+)(?:<(\w+)>)?(.*)$")


def parse(name):
    m = NAME_RE.match(name)
    scen, impl, rest = m.group(1), m.group(2) or "Shmsem", m.group(3)
    args = [p for p in rest.split("/") if ":" in p
            and not p.startswith(("iterations:", "min_time:", "repeats:"))]
    return scen, impl, "/".join(args)


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.2f}G"
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.4f}"


def ratio(v, ref):
    if v is None or ref in (None, 0):
        return ""
    return f"{v / ref:.2f}x"


def main(path):
    with open(path) as f:
        data = json.load(f)
    # (scen, args) -> {impl: (metric value or error, counters)}; args is every
    # named argument ("K:2/N:1/pin:0"), so a ratio never mixes placements.
    rows = {}
    order = []
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        scen, impl, args = parse(b["name"])
        if scen not in SCENARIOS:
            continue
        key = (scen, args)
        if key not in rows:
            rows[key] = {}
            order.append(key)
        if b.get("error_occurred"):
            rows[key][impl] = ("ERROR: " + b.get("error_message", ""), {})
        else:
            counters = {k: v for k, v in b.items() if isinstance(v, (int, float))}
            rows[key][impl] = (counters.get(SCENARIOS[scen][1]), counters)

    ctx = data.get("context", {})
    print(f"host: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs "
          f"@ {ctx.get('mhz_per_cpu', '?')} MHz, kernel {ctx.get('kernel', '?')}, "
          f"{ctx.get('date', '')}")
    print()
    print("| scenario | args | impl | metric | value | /sem_t | /phys floor | /ticket | more |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for key in order:
        scen, args = key
        title, metric, better, floor_impl, extras = SCENARIOS[scen]
        impls = rows[key]

        def val(i):
            v = impls.get(i, (None, {}))[0]
            return v if isinstance(v, (int, float)) else None

        for impl, (v, counters) in impls.items():
            is_err = isinstance(v, str)
            more = ", ".join(f"{e}={fmt(counters[e])}" for e in extras if e in counters)
            print(f"| {title} | {args} | {NAMES.get(impl, impl)} | {metric} ({better}) | "
                  f"{fmt(v)} | "
                  f"{'' if is_err else ratio(v, val('GlibcSem'))} | "
                  f"{'' if is_err or not floor_impl else ratio(v, val(floor_impl))} | "
                  f"{'' if is_err else ratio(v, val('Ticket'))} | {more} |")
            summary[(scen, args, impl)] = (v if not is_err else None, counters)

    # The targets, with the measured ratio (reported, not judged).
    def get(scen, args, impl, counter=None):
        v, c = summary.get((scen, args, impl), (None, {}))
        return c.get(counter) if counter else v

    def r(a, b):
        return f"{a / b:.2f}x" if a is not None and b else "n/a"

    print()
    print("Issue targets (measured ratios):")
    print(f"- uncontended pair shmsem/sem_t (target <= 1.25x, aim 1.0x): "
          f"{r(get('BM_Uncontended', '', 'Shmsem'), get('BM_Uncontended', '', 'GlibcSem'))}")
    print(f"- try_acquire pair shmsem/sem_trywait (target <= 1.25x): "
          f"{r(get('BM_TryPair', '', 'Shmsem'), get('BM_TryPair', '', 'GlibcSem'))}")
    vals = [get("BM_PairVsProcesses", f"procs:{n}", "Shmsem") for n in (1, 10, 100, 1000)]
    print("- pair with 1, 10, 100, 1000 other processes attached (target: flat): "
          + ", ".join(f"{fmt(v)} ({r(v, vals[0])})" for v in vals))
    for sc in ("same_core:0", "same_core:1"):
        print(f"- handoff p50 shmsem/raw_futex, {sc} (target <= 1.1x): "
              f"{r(get('BM_Handoff', sc, 'Shmsem'), get('BM_Handoff', sc, 'RawFutex'))}")
    for sc in ("same_core:0", "same_core:1"):
        print(f"- grant-to-completion through io_uring / blocking waiter, {sc}: "
              f"{r(get('BM_Handoff', sc, 'ShmsemRing'), get('BM_Handoff', sc, 'Shmsem'))}")
    for pin in ("pin:0", "pin:1"):
        k2 = f"K:2/N:1/{pin}"
        print(f"- {k2} throughput shmsem/ticket (target >= 1.0x): "
              f"{r(get('BM_Contention', k2, 'Shmsem'), get('BM_Contention', k2, 'Ticket'))}; "
              f"shmsem/sem_t (aim >= 0.75x): "
              f"{r(get('BM_Contention', k2, 'Shmsem'), get('BM_Contention', k2, 'GlibcSem'))}")
        for kn in ("K:4/N:1", "K:8/N:1", "K:8/N:4"):
            kn = f"{kn}/{pin}"
            print(f"- {kn} throughput shmsem/ticket (target >= 1.5x): "
                  f"{r(get('BM_Contention', kn, 'Shmsem'), get('BM_Contention', kn, 'Ticket'))}, "
                  f"Jain {fmt(get('BM_Contention', kn, 'Shmsem', 'jain'))} (target >= 0.99)")
        k8 = f"K:8/N:1/{pin}"
        mw = get("BM_Contention", k8, "Shmsem", "max_wait_ns")
        print(f"- {k8} worst-case wait (target <= 4 ms): "
              f"{fmt(mw / 1e6) + ' ms' if mw is not None else 'n/a'}")
    for scen, argset in (("BM_PairVsPermits", ("N:1", "N:64", "N:4096")),
                         ("BM_QueueHandoff", ("threads:1", "threads:101", "threads:4001"))):
        vals = [get(scen, a, "Shmsem") for a in argset]
        # With no queue there is no handoff: compare queue lengths from ~100.
        base = vals[1] if scen == "BM_QueueHandoff" else vals[0]
        print(f"- {scen} shmsem ns_per_pair over {', '.join(argset)} "
              f"(target: independent): "
              + ", ".join(f"{fmt(v)} ({r(v, base)})" for v in vals))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS.json")
    main(sys.argv[1])
