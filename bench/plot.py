#!/usr/bin/env python3
"""Draws `gdaki bench --csv` output as a PNG: bandwidth (MB/s) and latency (usec) against
message size, one line per test, log-log axes.

Usage: bench/plot.py RESULTS.csv OUT.png [--title TEXT]
Needs python3-matplotlib (scripts/install-deps.sh installs it).
"""
import argparse
import csv
import sys
from collections import defaultdict

try:
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on build machines
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("bench/plot.py: needs matplotlib (apt-get install python3-matplotlib)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="gdaki bench")
    a = ap.parse_args()

    bw = defaultdict(list)
    lat = defaultdict(list)
    with open(a.csv, newline="") as f:
        for r in csv.DictReader(f):
            size = int(r["bytes"])
            if r["bw_avg_mbps"]:
                bw[r["test"]].append((size, float(r["bw_avg_mbps"])))
            if r["t_typical_us"]:
                lat[r["test"]].append((size, float(r["t_typical_us"]), float(r["t_99_us"])))
    if not bw and not lat:
        sys.exit(f"bench/plot.py: no rows in {a.csv}")

    panels = [p for p in (bw, lat) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    col = 0
    if bw:
        ax = axes[0][col]
        for test, pts in sorted(bw.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=test)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel("bandwidth [MB/s, 2^20]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        col += 1
    if lat:
        ax = axes[0][col]
        for test, pts in sorted(lat.items()):
            pts.sort()
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=f"{test} median")
            ax.plot([p[0] for p in pts], [p[2] for p in pts], ls="--", color=line.get_color(), alpha=0.6,
                    label=f"{test} 99%")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel("latency [usec]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.png, dpi=80)
    print(f"bench/plot.py: wrote {a.png}")


if __name__ == "__main__":
    main()
