#!/usr/bin/env python3
"""Whether two safetensors checkpoints hold the same tensors bit for bit (weights, buffers and the
optimizer state "optim.*"; the metadata may differ). Standard library only.

usage: same_tensors.py A B   exit 0: same names and bytes, and A holds optimizer state; 1 otherwise
                             (the first differing names on stdout)"""
import json, struct, sys


def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] for k, v in header.items()}


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
if bad or not any(k.startswith("optim.") for k in a):
    print("  differ:", bad[:5] if bad else "no optimizer state in " + sys.argv[1])
    sys.exit(1)
