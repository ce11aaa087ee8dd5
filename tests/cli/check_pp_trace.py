"""Checks a --pp-trace file (tests/mpi/pp_train.sh): a Chrome trace whose passes are the 1F1B schedule's.

    check_pp_trace.py TRACE STAGES MICRO_BATCHES STEPS

A pass is one or more stretches of computing between waits. Every stage has each micro-batch's forward
and backward in each of STEPS steps; a stage's passes do not overlap and come in 1F1B order (P - s
forwards, then a backward and a forward by turns, then the remaining backwards); stage s + 1 starts
forward m after stage s started it (it needs its activations) and stage s starts backward m after stage
s + 1 started it (it needs its gradient); waits lie on their own track. Exits 1 naming the first broken rule.
"""
import json
import sys

path, P, M, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
events = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
passes = [e for e in events if e["cat"] == "pass"]
waits = [e for e in events if e["cat"] == "wait"]


def fail(msg):
    print("pp trace:", msg)
    sys.exit(1)


def one_f_one_b(s):
    order, f, b = [], 0, 0
    while f < min(P - s, M):
        order.append(f"F{f}")
        f += 1
    while b < M:
        order.append(f"B{b}")
        b += 1
        if f < M:
            order.append(f"F{f}")
            f += 1
    return order


steps = sorted({e["args"]["step"] for e in passes})
if len(steps) != S:
    fail(f"{len(steps)} steps traced, expected {S}")
span = {}  # (stage, step, pass) -> [first begin, last end] of its stretches
for e in passes:
    key = (e["pid"], e["args"]["step"], e["name"])
    b, t = span.get(key, (float("inf"), float("-inf")))
    span[key] = (min(b, e["ts"]), max(t, e["ts"] + e["dur"]))
for s in range(P):
    for step in steps:
        mine = sorted((v, k[2]) for k, v in span.items() if k[0] == s and k[1] == step)
        if [name for _, name in mine] != one_f_one_b(s):
            fail(f"stage {s} step {step}: passes {[name for _, name in mine]}, 1F1B is {one_f_one_b(s)}")
        for (a, _), (b, _) in zip(mine, mine[1:]):
            if b[0] < a[1]:
                fail(f"stage {s} step {step}: passes overlap at {a} and {b}")
for step in steps:
    for m in range(M):
        for s in range(P - 1):
            if span[(s + 1, step, f"F{m}")][0] < span[(s, step, f"F{m}")][0]:
                fail(f"step {step}: stage {s + 1} began F{m} before stage {s}")
            if span[(s, step, f"B{m}")][0] < span[(s + 1, step, f"B{m}")][0]:
                fail(f"step {step}: stage {s} began B{m} before stage {s + 1}")
if any(w["tid"] != 1 for w in waits) or any(p["tid"] != 0 for p in passes):
    fail("passes and waits share a track")
print(f"pp trace: {len(passes)} stretches of passes, {len(waits)} waits over {S} steps of {P} stages")
