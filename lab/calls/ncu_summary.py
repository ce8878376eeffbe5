#!/usr/bin/env python3
"""Prints an ncu --csv run (metric gpu__time_duration.sum) as the kernel sequence: short name, grid,
block, microseconds; consecutive launches of one kernel and grid folded with a count."""
import csv
import re
import sys


def short(name):
    name = re.sub(r"\(.*$", "", name)
    name = re.sub(r"<.*$", "", name)
    return name.split("::")[-1]


rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = r.get("Metric Unit", "")
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit)
    if scale is None:  # unknown unit: ncu's default for gpu__time_duration is nanoseconds
        scale = 1e-3
    us = float(r["Metric Value"].replace(",", "")) * scale
    rows.append((short(r["Kernel Name"]), r["Grid Size"], r["Block Size"], us))
folded = []
for k in rows:
    if folded and folded[-1][0][:3] == k[:3]:
        folded[-1][1] += 1
        folded[-1][2] += k[3]
    else:
        folded.append([k, 1, k[3]])
for (name, grid, block, _), n, total in folded:
    print(f"{n:4d} x {name:40s} grid {grid:>16s} block {block:>12s} {total / n:9.1f} us")
