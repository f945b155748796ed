#!/usr/bin/env python3
"""Compact tables from shmsem_policy_bench --dat FILE (bench/RESULTS.md,
"Policies: bounded vs strict vs sem_t"): per loop shape, one row per cell
with every contender's median throughput, the ratios, the worst and p99
waits, and the issue's three aims for the bounded policy:
  thr   bounded >= 0.8x sem_t (median of the per-repetition ratios)
  worst bounded's worst wait < 5 ms
  p99   bounded's p99 <= max_bypass_ns (1 ms) + one hand-off, one hand-off
        taken as strict FIFO's mean time per acquisition in the same cell
        (1 / its throughput)
Usage: policy_table.py FILE.dat
"""
import sys

BOUND_US = 1000.0


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            v = line.split()
            key = (v[3], int(v[0]), int(v[1]), int(v[2]))
            rows.setdefault(key, {})[v[4]] = {
                "med": float(v[5]), "lo": float(v[6]), "hi": float(v[7]),
                "p99": float(v[8]), "max": float(v[9]), "jain": float(v[10]),
                "rsem": float(v[11]), "rfloor": float(v[12]),
                "sleeps": float(v[13]), "cpu": float(v[14]),
                "sys": float(v[15]), "p999": float(v[16])}
    return rows


def ms(us):
    return "%.2f" % (us / 1000.0) if us >= 100 else "%.3f" % (us / 1000.0)


def us(x):
    return "%.1f" % x


def main():
    rows = load(sys.argv[1])
    for shape in sorted({k[0] for k in rows}):
        print("\nLoop %s (M ops/s: median of the windows; worst waits in ms, p99 in us):\n"
              % shape)
        print("| K | N | pin | sem_t | ticket | FIFO | bounded "
              "| bounded/sem_t | FIFO/sem_t | FIFO/floor | bounded/floor "
              "| worst sem_t / ticket / FIFO / bounded "
              "| p99 (us) sem_t / ticket / FIFO / bounded | bounded p99.9 (us) "
              "| CPU us/op sem_t / FIFO / bounded (bounded's kernel share) "
              "| aims thr, worst, p99 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for key in sorted(k for k in rows if k[0] == shape):
            r = rows[key]
            if not all(c in r for c in ("sem_t", "ticket", "fifo", "bounded")):
                continue
            b, fi = r["bounded"], r["fifo"]
            handoff_us = 1.0 / fi["med"] if fi["med"] > 0 else float("inf")
            aims = [b["rsem"] >= 0.8, b["max"] < 5000.0,
                    b["p99"] <= BOUND_US + handoff_us]
            print("| %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.2fx | %.2fx "
                  "| %.2fx | %.2fx | %s / %s / %s / %s | %s / %s / %s / %s "
                  "| %s | %.2f / %.2f / %.2f (%d%%) | %s |" % (
                      key[1], key[2], key[3], r["sem_t"]["med"],
                      r["ticket"]["med"], fi["med"], b["med"], b["rsem"],
                      fi["rsem"], fi["rfloor"], b["rfloor"],
                      ms(r["sem_t"]["max"]), ms(r["ticket"]["max"]),
                      ms(fi["max"]), ms(b["max"]), us(r["sem_t"]["p99"]),
                      us(r["ticket"]["p99"]), us(fi["p99"]), us(b["p99"]),
                      us(b["p999"]), r["sem_t"]["cpu"], fi["cpu"], b["cpu"],
                      round(100 * b["sys"]),
                      " ".join("met" if a else "MISSED" for a in aims)))


if __name__ == "__main__":
    main()
