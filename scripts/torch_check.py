#!/usr/bin/python3
"""Loads a ringtrain checkpoint into a plain PyTorch LeNet-5 with load_state_dict(strict=True), runs it on the
test split of an IDX dataset directory (t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, raw or .gz), and
prints its accuracy. With --predictions FILE (what `ringtrain eval --predictions FILE` writes: one predicted
label a line) it prints how often PyTorch and ringtrain agree and exits non-zero below --min-agreement (99.9%).

    /usr/bin/python3 scripts/torch_check.py model.safetensors data/digits --predictions preds.txt

Needs Debian's python3-torch and python3-numpy (hence /usr/bin/python3); safetensors is read with json + numpy.
"""
import argparse
import gzip
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lenet5_torch import LeNet5  # noqa: E402  (the model, shared with the golden and bench scripts)


def load_safetensors(path):
    """Returns ({name: tensor}, metadata) of a safetensors file."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    dtypes = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "U8": "u1", "I32": "<i4", "I64": "<i8"}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtypes[info["dtype"]], count=(end - begin) // np.dtype(dtypes[info["dtype"]]).itemsize,
                              offset=8 + n + begin)
        tensors[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return tensors, metadata


def read_idx(path):
    """An IDX file (raw or .gz) as a numpy array (the MNIST format: magic 0 0 type ndim, big-endian dims)."""
    for candidate in (Path(path), Path(str(path) + ".gz")):
        if candidate.exists():
            raw = candidate.read_bytes()
            if candidate.suffix == ".gz":
                raw = gzip.decompress(raw)
            break
    else:
        sys.exit(f"{path}: not found (raw or .gz)")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        sys.exit(f"{path}: {body.size} bytes of data, dims {dims} need {int(np.prod(dims))}")
    return body.reshape(dims)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("data_dir", help="directory with t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (raw or .gz)")
    ap.add_argument("--predictions", help="ringtrain's predicted labels, one a line")
    ap.add_argument("--min-agreement", type=float, default=99.9, help="percent (default 99.9)")
    args = ap.parse_args()

    # The few lines a PyTorch user needs (the README quotes them):
    tensors, metadata = load_safetensors(args.checkpoint)
    model = LeNet5()
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optim.")}, strict=True)
    model.eval()

    scaling = metadata.get("input_scaling", "x/255")
    if scaling != "x/255":
        sys.exit(f"{args.checkpoint}: input_scaling '{scaling}' is not x/255; this script only knows x/255")
    images = read_idx(Path(args.data_dir) / "t10k-images-idx3-ubyte")
    labels = read_idx(Path(args.data_dir) / "t10k-labels-idx1-ubyte")
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != (images.shape[0],):
        sys.exit(f"{args.data_dir}: images {images.shape} and labels {labels.shape} do not pair up as N x 28 x 28 / N")
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255)).unsqueeze(1)  # x/255, as ringtrain
    with torch.no_grad():
        predicted = torch.cat([model(x[i:i + 1000]).argmax(1) for i in range(0, len(x), 1000)]).numpy()
    accuracy = 100.0 * float((predicted == labels).mean())
    print(f"pytorch: {len(labels)} test samples, accuracy {accuracy:.2f}%")

    if args.predictions:
        theirs = np.array([int(line) for line in Path(args.predictions).read_text().split()], dtype=np.int64)
        if theirs.shape != predicted.shape:
            sys.exit(f"{args.predictions}: {theirs.size} predictions for {predicted.size} test samples")
        agree = 100.0 * float((theirs == predicted).mean())
        print(f"agreement with ringtrain: {agree:.2f}% ({int((theirs != predicted).sum())} of {len(theirs)} differ)")
        if agree < args.min_agreement:
            print(f"FAIL: agreement {agree:.2f}% is below {args.min_agreement}%", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
