#!/usr/bin/env python3
"""Largest relative difference between the weights of two safetensors checkpoints (standard library
only): max over tensors of max|a-b| / max|a|. usage: compare_weights.py A B -> prints the number."""
import array, json, struct, sys


def weights(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or name.startswith("optim.") or t["dtype"] != "F32":
            continue
        a = array.array("f")
        a.frombytes(raw[8 + n + t["data_offsets"][0]: 8 + n + t["data_offsets"][1]])
        out[name] = a
    return out


if __name__ == "__main__":  # tensor_rel.py imports weights()
    a, b = weights(sys.argv[1]), weights(sys.argv[2])
    assert a.keys() == b.keys(), "different tensors"
    worst = 0.0
    for k in a:
        scale = max(abs(x) for x in a[k]) or 1.0
        worst = max(worst, max(abs(x - y) for x, y in zip(a[k], b[k])) / scale)
    print(f"{worst:.3e}")
