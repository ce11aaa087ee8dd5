#!/usr/bin/env python3
"""Data-parallel scaling on paper: an alpha-beta model of the gradient all-reduce, fed with figures measured
on this machine (bench/scaling_model.sh writes them as JSON), checked against measured 2-4 rank step times,
then extrapolated to 2-1024 ranks. Standard library only.

Model (weak scaling: every rank keeps its per-rank batch B):
  step(W) = compute(W) * s(W) + exposed(W)
  compute   the one-rank step time at batch B (measured): alone for W = 1, with every core of the machine
            busy for W > 1 (one single-rank training a core at once: the ranks of a full machine share its
            caches and memory bandwidth, which a rank alone does not);
  s(W)      ceil(W / cores) on this machine, 1 on paper (a core per rank). Ranks beyond the cores share
            them, and a rank that is done waits for the others by polling, holding its core: a step then
            takes as many rounds of compute as the busiest core has ranks, not the W / cores of perfect
            time-sharing (3 ranks on 2 cores measured 1.9-2.0x the 2-rank step, not 1.5x);
  exposed   the all-reduce time the step waits for: overlap off, the sum over buckets of cost(bucket);
            overlap on, max(cost(last bucket), sum - f * compute * s(W)), f = 2/3 the share of the step that
            is backward (backward ~ 2x forward's FLOPs), during which the earlier buckets' all-reduces run.
            Over shared memory ("shm") nothing is hidden, overlap or not: there the all-reduce is work of the
            rank's own core (the copies through the shared segment and the sums), which overlap only
            interleaves with backward (measured: on and off within a few per cent for every zoo model); and
            beyond the cores it is shared like the compute (times s(W)). Over a network link (a NIC moving
            the bytes) overlap hides what backward covers.
  cost(n bytes, W) per algorithm, from the per-hop latency alpha and inverse bandwidth beta of the link
  (fitted to the 2-rank ring, whose 2 steps of n/2 bytes cost 2 alpha + n beta):
    ring  2 (W-1) alpha + 2 (W-1)/W n beta
    rd    log2(P) (alpha + n beta)                  (P = largest power of two <= W; W > P adds 2 (alpha + n beta))
    hd    2 log2(P) alpha + 2 (P-1)/P n beta        (the same fold for W > P)
    hier  ring inside a host of k ranks on the host link + ring between the W/k hosts on the network link
          over n/k bytes + the all-gather inside: 2 (k-1) alpha_h + 2 (k-1)/k n beta_h + ring(n/k, W/k)
    auto  the cheapest of these per bucket (what --allreduce auto's model does with measured lines)

usage: scaling_model.py FIGURES.json   (prints markdown tables)
"""
import json
import math
import sys

F_BACKWARD = 2.0 / 3.0


def fit_link(points):
    """Per-hop alpha and beta of a link from 2-rank ring times [(bytes, seconds)]: the 2-rank ring is two
    steps of n/2 bytes, t = 2 alpha + n beta; least squares on the relative error (a small message's
    microseconds count as much as a large one's milliseconds), both clamped to >= 0."""
    # Minimise sum ((a + b n - t) / t)^2: linear least squares in (a, b) with rows (1/t, n/t) -> 1.
    s11 = sum(1 / t / t for n, t in points)
    s12 = sum(n / t / t for n, t in points)
    s22 = sum(n * n / t / t for n, t in points)
    r1 = sum(1 / t for n, t in points)
    r2 = sum(n / t for n, t in points)
    det = s11 * s22 - s12 * s12
    a = (r1 * s22 - r2 * s12) / det
    b = (s11 * r2 - s12 * r1) / det
    return {"alpha_s": max(a, 0.0) / 2, "beta_s_per_byte": max(b, 0.0)}


def ring(n, W, a, b):
    return 0.0 if W == 1 else 2 * (W - 1) * a + 2 * (W - 1) / W * n * b


def power_of_two_below(W):
    return 1 << (W.bit_length() - 1)


def rd(n, W, a, b):
    if W == 1:
        return 0.0
    P = power_of_two_below(W)
    return math.log2(P) * (a + n * b) + (2 * (a + n * b) if W > P else 0.0)


def hd(n, W, a, b):
    if W == 1:
        return 0.0
    P = power_of_two_below(W)
    return 2 * math.log2(P) * a + 2 * (P - 1) / P * n * b + (2 * (a + n * b) if W > P else 0.0)


def hier(n, W, host, net, k):
    if W <= k:
        return ring(n, W, host["alpha_s"], host["beta_s_per_byte"])
    inside = 2 * (k - 1) * host["alpha_s"] + 2 * (k - 1) / k * n * host["beta_s_per_byte"]
    return inside + ring(n / k, W // k, net["alpha_s"], net["beta_s_per_byte"])


def bucket_cost(algorithm, n, W, link, host, ranks_per_host):
    a, b = link["alpha_s"], link["beta_s_per_byte"]
    if algorithm == "ring":
        return ring(n, W, a, b)
    if algorithm == "rd":
        return rd(n, W, a, b)
    if algorithm == "hd":
        return hd(n, W, a, b)
    if algorithm == "hier":
        return hier(n, W, host, link, ranks_per_host)
    if algorithm == "auto":
        return min(bucket_cost(x, n, W, link, host, ranks_per_host) for x in ("ring", "rd", "hd"))
    raise ValueError(algorithm)


def compute_time(model, W):
    """compute(W): the one-rank step alone for W = 1, with every core busy otherwise (figures without the
    loaded time, from before it was measured, fall back to the time alone)."""
    return model["step_1rank_s"] if W == 1 else model.get("step_loaded_s", model["step_1rank_s"])


def step_time(model, W, algorithm, link, overlap, slowdown, host=None, ranks_per_host=1):
    compute = compute_time(model, W) * slowdown
    costs = [bucket_cost(algorithm, n, W, link, host or link, ranks_per_host) for n in model["bucket_bytes"]]
    total = sum(costs)
    if link.get("cpu_bound"):  # the rank's own core moves and sums the bytes: nothing to hide it behind
        exposed = total * slowdown
    else:  # buckets in the order backward fills them; the last one is ready only when backward ends
        exposed = max(costs[-1], total - F_BACKWARD * compute) if overlap else total
    return compute + exposed, exposed


def main():
    fig = json.load(open(sys.argv[1]))
    cores = fig["cores"]
    links = fig["links"]
    if "shm" in links:
        links["shm"]["cpu_bound"] = True
    print(f"Figures from {fig['cpu']}, {cores} cores; links (per hop, fitted to the 2-rank ring):")
    print()
    print("| link | alpha (us) | beta (ns/byte) | bandwidth (GB/s) |")
    print("|---|---:|---:|---:|")
    for name, l in links.items():
        print(f"| {name} | {1e6 * l['alpha_s']:.2f} | {1e9 * l['beta_s_per_byte']:.4f} | {1e-9 / l['beta_s_per_byte']:.2f} |")
    print()
    print("Models (one rank, measured):")
    print()
    print("| model | batch / rank | one-rank step alone (ms) | with every core busy (ms) | gradient bytes | buckets |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in fig["models"].items():
        print(f"| {name} | {m['batch']} | {1e3 * m['step_1rank_s']:.2f} | {1e3 * compute_time(m, 2):.2f} | "
              f"{sum(m['bucket_bytes']):.0f} | {len(m['bucket_bytes'])} |")

    print()
    print("Predicted against measured on this machine (ranks beyond the cores share them):")
    print()
    print("| model | ranks | link | all-reduce | overlap | measured step (ms) | predicted (ms) | error |")
    print("|---|---:|---|---|---|---:|---:|---:|")
    worst = 0.0
    for r in fig["measured"]:
        m = fig["models"][r["model"]]
        W = r["world"]
        pred, _ = step_time(m, W, r["algorithm"], links[r["link"]], r["overlap"], math.ceil(W / cores))
        err = pred / r["step_s"] - 1
        worst = max(worst, abs(err))
        print(f"| {r['model']} | {W} | {r['link']} | {r['algorithm']} | {'on' if r['overlap'] else 'off'} | "
              f"{1e3 * r['step_s']:.2f} | {1e3 * pred:.2f} | {100 * err:+.1f}% |")
    print()
    print(f"Largest error: {100 * worst:.1f}% (acceptance: within 20%)")

    print()
    print("On paper: a core per rank (computing as fast as a rank of this full machine), overlap on, per-rank")
    print("batch as above; step time (ms) and scaling efficiency")
    print("(one-rank step / W-rank step) for each link and algorithm; hier: 8 ranks a host on the 'shm' link,")
    print("hosts joined by the named link.")
    worlds = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    for name, m in fig["models"].items():
        for lname, link in links.items():
            print()
            print(f"{name}, {lname}:")
            print()
            print("| ranks | " + " | ".join(f"{a} ms (eff.)" for a in ("ring", "rd", "hd", "hier", "auto")) + " |")
            print("|---:|" + "---:|" * 5)
            for W in worlds:
                cells = []
                for a in ("ring", "rd", "hd", "hier", "auto"):
                    t, _ = step_time(m, W, a, link, True, 1.0, host=links.get("shm", link), ranks_per_host=8)
                    cells.append(f"{1e3 * t:.2f} ({m['step_1rank_s'] / t:.2f})")
                print(f"| {W} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
