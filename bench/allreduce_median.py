#!/usr/bin/env python3
"""Merge several bench/allreduce.sh outputs (same ranks and sizes) into one table: per size and column the
median over the runs of each run's median time, then the fastest, auto's ratios again from those medians.
On a shared machine one run's medians still move with the neighbours' load; the median over runs
taken at different times moves less.

    bench/allreduce_median.py run1.txt run2.txt run3.txt
"""
import statistics
import sys


def tables(path):
    rows, header = {}, None
    for line in open(path):
        if line.startswith("| size |"):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
        elif line.startswith("| ") and header and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = dict(zip(header, cells))
    return header, rows


def main(paths):
    runs = [tables(p) for p in paths]
    header = runs[0][0]
    algos = [h[: -len(" (us)")] for h in header if h.endswith(" (us)") and h != "auto (us)"]
    print(f"# median over {len(paths)} runs: {', '.join(paths)}")
    print("| size | " + " | ".join(f"{a} (us)" for a in algos) + " | auto (us) | auto's picks | fastest | auto / fastest | auto / best of ring, hd, mpi |")
    print("|---:|" + "---:|" * (len(algos) + 1) + "---|---|---:|---:|")
    for size in runs[0][1]:
        rows = [r[1][size] for r in runs if size in r[1]]
        med = {a: statistics.median(float(r[f"{a} (us)"]) for r in rows) for a in algos + ["auto"]}
        picks = sorted({r["auto's pick"] for r in rows})
        fastest = min(algos, key=lambda a: med[a])
        best3 = min(med[a] for a in ("ring", "hd", "mpi"))
        cells = " | ".join(f"{med[a]:.1f}" for a in algos)
        print(f"| {size} | {cells} | {med['auto']:.1f} | {'/'.join(picks)} | {fastest} | "
              f"{med['auto'] / med[fastest]:.2f} | {med['auto'] / best3:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
