#!/usr/bin/python3
"""PyTorch's side of bench/compare_torch.sh: LeNet-5 exactly as ringtrain's (DESIGN.md), Adam (lr 1e-3),
softmax cross-entropy, one thread, on the first 8 batches of an IDX dataset (--data DIR, pixels / 255) or
synthetic MNIST-shaped batches (uint8-range pixels scaled to [0,1), random labels). Prints samples/s (median of --repeats timed runs of --steps steps, after warm-up) and which
BLAS library torch actually loaded.

Run with Debian's interpreter, which has python3-torch: /usr/bin/python3 bench/torch_lenet.py --batch 256
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from lenet5_torch import LeNet5  # noqa: E402


def loaded_blas():
    """The BLAS/LAPACK shared objects mapped into this process (after torch has used them)."""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in path or "lapack" in path:
                libs.add(os.path.realpath(path))
    return sorted(libs) or ["(none mapped)"]


def read_idx(path):
    """A uint8 IDX file (raw or .gz) as a torch tensor of its dims."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        raw = f.read()
    assert raw[0] == 0 and raw[1] == 0 and raw[2] == 8, f"{path}: not a uint8 IDX file"
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def idx_in(directory, name):
    path = os.path.join(directory, name)
    return read_idx(path + ".gz" if os.path.exists(path + ".gz") else path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=0, help="steps per timed run (default: ~50k samples)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", help="directory with train-images-idx3-ubyte(.gz) and labels (default: noise)")
    args = ap.parse_args()
    steps = args.steps or max(20, 50000 // args.batch)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = LeNet5()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    nbatches = 8
    n = nbatches * args.batch
    if args.data:  # the same first 8 batches as bench_train_step --data
        xs = idx_in(args.data, "train-images-idx3-ubyte")[:n].float().div_(255.0).reshape(nbatches, args.batch, 1, 28, 28)
        ys = idx_in(args.data, "train-labels-idx1-ubyte")[:n].long().reshape(nbatches, args.batch)
    else:
        xs = torch.randint(0, 256, (nbatches, args.batch, 1, 28, 28), dtype=torch.uint8).float().div_(255.0)
        ys = torch.randint(0, 10, (nbatches, args.batch))

    cursor = 0
    loss = None

    def step():
        nonlocal cursor, loss
        x, y = xs[cursor], ys[cursor]
        cursor = (cursor + 1) % nbatches
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(max(3, steps // 10)):
        step()
    rates, cpu_rates = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        rates.append(steps * args.batch / (time.perf_counter() - t0))
        cpu_rates.append(steps * args.batch / (time.process_time() - c0))
    med = statistics.median(rates)
    print(f"torch {torch.__version__} lenet5 threads={torch.get_num_threads()} batch={args.batch} steps={steps} "
          f"repeats={args.repeats} data={args.data or 'noise'}: {med:.0f} samples/s (median; min {min(rates):.0f}, max {max(rates):.0f}), "
          f"loss {loss.item():.4f}")
    print(f"  per CPU-second: {statistics.median(cpu_rates):.0f} samples/s (median)")
    print(f"  BLAS loaded: {', '.join(loaded_blas())}")


if __name__ == "__main__":
    main()
