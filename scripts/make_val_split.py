#!/usr/bin/env python3
"""Writes a validation dataset made only of a dataset's TRAINING split (standard library only), for choosing
training recipes without looking at the test split (docs/RECIPE.md).

    python3 scripts/make_val_split.py data/digits /tmp/digits-val            # fold A
    python3 scripts/make_val_split.py data/digits /tmp/digits-val-b --fold first

Per class, in file order, 80% of the training samples become the new train split (train-images-idx3-ubyte,
train-labels-idx1-ubyte) and the other 20% its t10k split: --fold last (default) holds out the last 20% of
each class, --fold first the first 20%. Both keep the original order within each split. Reads raw IDX files.
"""
import argparse
import os
import struct


def read_idx(path):
    raw = open(path, "rb").read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return dims, raw[4 + 4 * ndim:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--fold", choices=["last", "first"], default="last")
    ap.add_argument("--train-fraction", type=float, default=0.8)
    a = ap.parse_args()
    (n, rows, cols), images = read_idx(os.path.join(a.source, "train-images-idx3-ubyte"))
    (n_labels,), labels = read_idx(os.path.join(a.source, "train-labels-idx1-ubyte"))
    assert n == n_labels, "images and labels differ in count"
    px = rows * cols
    by_class = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    train, val = [], []
    for idx in by_class.values():
        k = int(len(idx) * a.train_fraction)
        if a.fold == "last":
            train += idx[:k]
            val += idx[k:]
        else:
            val += idx[:len(idx) - k]
            train += idx[len(idx) - k:]
    os.makedirs(a.out, exist_ok=True)
    for prefix, ids in (("train", sorted(train)), ("t10k", sorted(val))):
        with open(os.path.join(a.out, prefix + "-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, len(ids), rows, cols))
            f.write(b"".join(images[i * px:(i + 1) * px] for i in ids))
        with open(os.path.join(a.out, prefix + "-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">BBBBI", 0, 0, 8, 1, len(ids)))
            f.write(bytes(labels[i] for i in ids))
    print(f"{a.out}: {len(train)} train / {len(val)} validation (fold {a.fold})")


if __name__ == "__main__":
    main()
