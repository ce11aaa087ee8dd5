#!/usr/bin/env python3
"""Writes small synthetic IDX datasets and corrupt IDX files for the CLI tests (standard library only).

usage: make_idx.py good DIR [--train N] [--test N]   # a learnable toy dataset: class k = a bright bar at row 2k+4
       make_idx.py corrupt DIR CASE                  # a good dataset with one file broken in the named way
"""
import gzip, os, random, struct, sys


def idx_bytes(dtype_code, dims, payload):
    return struct.pack(">BBBB", 0, 0, dtype_code, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


def toy(n, seed):
    rng = random.Random(seed)
    images, labels = bytearray(), bytearray()
    for i in range(n):
        label = i % 10
        img = bytearray(rng.randrange(0, 40) for _ in range(28 * 28))
        row = 2 * label + 4
        for c in range(4, 24):
            img[row * 28 + c] = 255
            img[(row + 1) * 28 + c] = 200
        images += img
        labels.append(label)
    return bytes(images), bytes(labels)


def write_good(d, n_train, n_test):
    os.makedirs(d, exist_ok=True)
    for prefix, n, seed in (("train", n_train, 1), ("t10k", n_test, 2)):
        images, labels = toy(n, seed)
        with open(os.path.join(d, prefix + "-images-idx3-ubyte"), "wb") as f:
            f.write(idx_bytes(8, [n, 28, 28], images))
        with open(os.path.join(d, prefix + "-labels-idx1-ubyte"), "wb") as f:
            f.write(idx_bytes(8, [n], labels))


def corrupt(d, case):
    write_good(d, 100, 50)
    images = os.path.join(d, "train-images-idx3-ubyte")
    labels = os.path.join(d, "train-labels-idx1-ubyte")
    data = open(images, "rb").read()
    if case == "truncated":
        open(images, "wb").write(data[:-100])
    elif case == "trailing":
        open(images, "wb").write(data + b"\0" * 7)
    elif case == "magic":
        open(images, "wb").write(b"\x12\x34" + data[2:])
    elif case == "dtype":
        open(images, "wb").write(data[:2] + b"\x0d" + data[3:])
    elif case == "empty":
        open(images, "wb").write(b"")
    elif case == "count":
        open(labels, "wb").write(idx_bytes(8, [99], bytes(99)))
    elif case == "label":
        open(labels, "wb").write(idx_bytes(8, [100], bytes([3] * 50 + [42] + [1] * 49)))
    elif case == "gzip":
        os.remove(images)
        open(images + ".gz", "wb").write(gzip.compress(data)[:-40])
    elif case == "dims":
        open(images, "wb").write(idx_bytes(8, [100, 784], data[16:]))
    elif case == "missing":
        os.remove(labels)
    else:
        sys.exit("unknown case " + case)


if __name__ == "__main__":
    if sys.argv[1] == "good":
        n_train = int(sys.argv[sys.argv.index("--train") + 1]) if "--train" in sys.argv else 600
        n_test = int(sys.argv[sys.argv.index("--test") + 1]) if "--test" in sys.argv else 200
        write_good(sys.argv[2], n_train, n_test)
    else:
        corrupt(sys.argv[2], sys.argv[3])
