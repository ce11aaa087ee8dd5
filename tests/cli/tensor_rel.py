#!/usr/bin/env python3
"""Per-tensor relative difference of the weights of two safetensors checkpoints (standard library only):
||a - b|| / ||a|| for each F32 weight (optimizer state left out), the worst printed as "VALUE NAME".

usage: tensor_rel.py A B [--list N]   # --list: also the N worst tensors, one a line, on stderr

Attention's packed in_proj_bias is compared as its q, k and v thirds ("...in_proj_bias[q]" and so on):
the key bias has an exactly zero gradient (softmax ignores a shift of every key), so its value is
rounding noise that Adam's normalised step turns into updates of up to +-lr, different in any two
implementations, and it has no effect on the output. Its third is left out of the worst (and listed
with --list), so the figure says how closely the rest, what the model computes with, agree."""
import math, sys

import compare_weights  # beside this script


def weights(path):
    """compare_weights.py's F32 weights, each in_proj_bias cut into its q, k and v thirds."""
    out = {}
    for name, a in compare_weights.weights(path).items():
        if name.endswith("in_proj_bias"):
            d = len(a) // 3
            for i, part in enumerate("qkv"):
                out[f"{name}[{part}]"] = a[i * d:(i + 1) * d]
        else:
            out[name] = a
    return out


a, b = weights(sys.argv[1]), weights(sys.argv[2])
assert a.keys() == b.keys(), "different tensors"
rel = {}
for k in a:
    norm = math.sqrt(sum(x * x for x in a[k]))
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a[k], b[k])))
    rel[k] = diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)
ranked = sorted(((v, k) for k, v in rel.items() if not k.endswith("in_proj_bias[k]")), reverse=True)
print(f"{ranked[0][0]:.3e} {ranked[0][1]}")
if "--list" in sys.argv:
    for v, k in sorted(((v, k) for k, v in rel.items()), reverse=True)[:int(sys.argv[sys.argv.index("--list") + 1])]:
        print(f"  {v:.3e} {k}", file=sys.stderr)
