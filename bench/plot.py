#!/usr/bin/env python3
"""Plot scenario (c), K processes contending, from shmsem_bench JSON output.

Usage: plot.py RESULTS.json OUTDIR

Writes, for the permits N with more than one K in the run (N=1: every
contender), two PNG files of two panels each, unpinned (pin:0) left and
pinned (pin:1) right, on the same axes so the panels compare directly:

  OUTDIR/contention_throughput_N<N>.png  ops_per_s against K
  OUTDIR/contention_max_wait_N<N>.png    max_wait_ns (the worst single wait
                                         of any process) against K

and next to each the gnuplot data it was drawn from (*.dat: one row per K,
one column per contender, "?" where the run has no value). One line per
contender, in report.py's names. With --benchmark_repetitions the median of
the repetitions is drawn. Draws with gnuplot (Debian package gnuplot-nox)
through bench/contention.gp; fails, naming the package, without it.
Reports only: nothing is judged here.
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import sys

from report import NAMES, parse

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO = "BM_Contention"
PINS = (("0", "unpinned (pin:0, scheduler places)"),
        ("1", "pinned (pin:1, child i on CPU i mod m)"))
# metric counter, file stem, axis label, scale to the plotted unit, format
METRICS = (
    ("ops_per_s", "throughput", "acquire+release pairs per second, all K together",
     1.0, "%.0s%c"),
    ("max_wait_ns", "max_wait", "worst single wait (acquire call to return)",
     1e-9, "%.0s%cs"),
)


def die(msg):
    sys.exit(f"plot.py: {msg}")


def load(path):
    """(impl, N, pin, K) -> {counter: [values over repetitions]}."""
    with open(path) as f:
        data = json.load(f)
    cells = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        scen, impl, args = parse(b["name"])
        if scen != SCENARIO:
            continue
        a = dict(p.split(":", 1) for p in args.split("/"))
        key = (impl, int(a["N"]), a["pin"], int(a["K"]))
        for metric, *_ in METRICS:
            if isinstance(b.get(metric), (int, float)):
                cells.setdefault(key, {}).setdefault(metric, []).append(b[metric])
    return data.get("context", {}), cells


def decade_range(values):
    lo, hi = min(values), max(values)
    d_lo = 10.0 ** math.floor(math.log10(lo))
    d_hi = 10.0 ** math.ceil(math.log10(hi))
    return d_lo, d_hi if d_hi > d_lo else d_lo * 10


def main(json_path, outdir):
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        die("gnuplot not found on PATH; install the Debian package gnuplot-nox "
            "(scripts/install-deps does)")
    ctx, cells = load(json_path)
    if not cells:
        die(f"no {SCENARIO} results in {json_path} "
            "(was it filtered out, or did every run fail?)")
    os.makedirs(outdir, exist_ok=True)
    # Contenders in report.py's order, then any it does not name.
    impls = sorted({k[0] for k in cells},
                   key=lambda i: (list(NAMES).index(i) if i in NAMES else len(NAMES), i))
    host = (f"{ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
            f"kernel {ctx.get('kernel', '?')}, {ctx.get('date', '?')}")
    written = []
    for n in sorted({k[1] for k in cells}):
        ks = sorted({k[3] for k in cells if k[1] == n})
        if len(ks) < 2:
            continue  # a single K is a point, not a curve: see report.py's table
        cols = [i for i in impls if any(k[0] == i and k[1] == n for k in cells)]
        for metric, stem, label, scale, fmt in METRICS:
            plotted = []
            dats = []
            for pin, _ in PINS:
                dat = os.path.join(outdir, f"contention_{stem}_N{n}_pin{pin}.dat")
                with open(dat, "w") as f:
                    f.write(f"# {SCENARIO} N={n} pin={pin} {metric} x {scale:g}; "
                            f"{host}\n")
                    f.write("K " + " ".join(NAMES.get(i, i) for i in cols) + "\n")
                    for k in ks:
                        row = [str(k)]
                        for i in cols:
                            v = cells.get((i, n, pin, k), {}).get(metric)
                            if v:
                                y = statistics.median(v) * scale
                                row.append(f"{y:.6g}")
                                if y > 0:
                                    plotted.append(y)
                            else:
                                row.append("?")
                        f.write(" ".join(row) + "\n")
                dats.append(dat)
            if not plotted:
                die(f"no {metric} values for N={n}")
            ymin, ymax = decade_range(plotted)
            png = os.path.join(outdir, f"contention_{stem}_N{n}.png")
            title = (f"(c) K processes contending for N={n} permit{'s' if n > 1 else ''}, "
                     f"~100 ns critical section, 0.5 s per point: {label}")
            defs = {
                "out": png, "dat0": dats[0], "dat1": dats[1],
                "title0": PINS[0][1], "title1": PINS[1][1],
                "suptitle": title, "note": f"{host}; log-log axes",
                "yfmt": fmt, "ktics": ", ".join(str(k) for k in ks),
            }
            # gnuplot's single-quoted strings: '' is a quote, nothing else is special.
            expr = "; ".join(f"{k}='{str(v).replace(chr(39), chr(39) * 2)}'"
                             for k, v in defs.items())
            expr += (f"; ncols={len(cols) + 1}; ymin={ymin!r}; ymax={ymax!r}"
                     f"; kmin={ks[0]}; kmax={ks[-1]}")
            r = subprocess.run([gnuplot, "-e", expr, os.path.join(HERE, "contention.gp")],
                               capture_output=True, text=True)
            if r.returncode != 0 or not os.path.isfile(png) or os.path.getsize(png) == 0:
                die(f"gnuplot failed on {png} (exit {r.returncode}):\n{r.stderr}")
            written.append(png)
    if not written:
        die(f"no N in {json_path} has {SCENARIO} results at two or more K")
    for p in written:
        print(f"plot: {p}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULTS.json OUTDIR")
    main(sys.argv[1], sys.argv[2])
