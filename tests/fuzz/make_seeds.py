#!/usr/bin/env python3
"""Writes small valid seed inputs for the fuzz targets (standard library only): usage make_seeds.py DIR."""
import gzip, json, os, struct, sys

out = sys.argv[1]
os.makedirs(out + "/idx", exist_ok=True)
os.makedirs(out + "/safetensors", exist_ok=True)


def idx(dims, payload):
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


seeds = {"images": idx([2, 3, 3], bytes(range(18))), "labels": idx([4], bytes([1, 2, 3, 9])), "one": idx([1], b"\x07")}
for name, data in seeds.items():
    open(f"{out}/idx/{name}", "wb").write(data)
    open(f"{out}/idx/{name}.gz", "wb").write(gzip.compress(data))


def safetensors(tensors, metadata):
    header, blob = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


open(f"{out}/safetensors/small", "wb").write(safetensors(
    {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "b": ("U8", [3], b"\x01\x02\x03")}, {"format": "ringtrain"}))
open(f"{out}/safetensors/empty", "wb").write(safetensors({}, None))
