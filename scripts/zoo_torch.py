"""The ringtrain model zoo in PyTorch: ONE definition shared by the project's scripts and tests
(scripts/torch_eval_zoo.py, scripts/golden/make_zoo_golden.py, bench/torch_zoo.py). Run with Debian's
/usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14).

    make_model(name)                        lenet5 | resnet18 | mobilenet_v2 | vit (10 classes, 1 x 28 x 28 input)
    load_safetensors(path)                  -> ({name: tensor}, metadata); skips optim.* (and __metadata__)
    save_safetensors(path, tensors, meta)   writes the format by hand (no safetensors package on Debian)
    read_idx(path)                          a uint8 IDX file (raw or gzip) as a numpy array
    load_split(dir, "train" | "t10k")       (x float32 [N,1,28,28] = pixels / 255, labels int64 [N])

The models are torchvision 0.14's with the first layer replaced for one input channel:

    resnet18      torchvision.models.resnet18(num_classes=10); conv1 = Conv2d(1, 64, 7, 2, 3, bias=False)
    mobilenet_v2  torchvision.models.mobilenet_v2(num_classes=10); features[0][0] = Conv2d(1, 32, 3, 2, 1, bias=False)
    vit           torchvision.models.VisionTransformer(image_size=28, patch_size=7, num_layers=6, num_heads=4,
                  hidden_dim=128, mlp_dim=512, num_classes=10); conv_proj = Conv2d(1, 128, 7, 7)

Exactly those lines: the replaced stem is a fresh nn.Conv2d made after the architecture's constructor ran its
own initialisation, so it keeps nn.Conv2d's default initialisation (kaiming_uniform_(a=sqrt(5)) weights,
U(+-1/sqrt(fan_in)) bias), as in any PyTorch user's script that does the replacement; ringtrain's builders
initialise their stems the same way (docs/MODELS.md). The state_dict names, shapes and dtypes (buffers included,
int64 num_batches_tracked) are torchvision's: they are the tensor names of ringtrain's checkpoints.
"""
import gzip
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lenet5_torch import LeNet5  # noqa: E402

MODELS = ("lenet5", "resnet18", "mobilenet_v2", "vit")


def make_model(name):
    """The zoo model `name` in float32, freshly initialised from torch's global RNG (training mode)."""
    if name == "lenet5":
        return LeNet5()
    import torchvision  # only the zoo models need it (lenet5 works without torchvision)

    if name == "resnet18":
        model = torchvision.models.resnet18(num_classes=10)
        model.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
        return model
    if name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(num_classes=10)
        model.features[0][0] = nn.Conv2d(1, 32, 3, 2, 1, bias=False)
        return model
    if name == "vit":
        model = torchvision.models.VisionTransformer(image_size=28, patch_size=7, num_layers=6, num_heads=4,
                                                     hidden_dim=128, mlp_dim=512, num_classes=10)
        model.conv_proj = nn.Conv2d(1, 128, 7, 7)
        return model
    raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")


# ---------------------------------------------------------------------------------------------- safetensors
_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}
_TORCH_TO_ST = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


class SafetensorsError(Exception):
    pass


def load_safetensors(path, keep_optim=False):
    """Returns ({name: tensor}, metadata) of a safetensors file: F32 and I64 tensors (and F64, which the
    golden fixtures use), without the optimizer state `optim.*` unless keep_optim. Raises SafetensorsError
    with "<file>: <what is wrong>" for a malformed file or another dtype."""
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise SafetensorsError(f"{path}: {len(data)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise SafetensorsError(f"{path}: header length {n} runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    body = len(data) - 8 - n
    tensors = {}
    for name, info in header.items():
        if name.startswith("optim.") and not keep_optim:
            continue
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise SafetensorsError(f"{path}: tensor '{name}' has dtype {info.get('dtype')} (F32, F64 or I64 expected)")
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= body or end - begin != count * dtype.itemsize:
            raise SafetensorsError(f"{path}: tensor '{name}' has offsets [{begin}, {end}) for shape {shape} "
                                   f"{info['dtype']} in a {body}-byte data buffer")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=8 + n + begin).reshape(shape)
        tensors[name] = torch.from_numpy(array.astype(dtype.newbyteorder("="), copy=True))
    return tensors, metadata


def save_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (float32 -> F32, float64 -> F64, int64 -> I64) as a safetensors file in the given
    order, tensors back to back, the JSON header padded with spaces so the data starts 8-byte aligned;
    metadata is a string-to-string dict. The same inputs give the same bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _TORCH_TO_ST:
            raise ValueError(f"tensor '{name}': dtype {t.dtype} (float32, float64 or int64 expected)")
        code = _TORCH_TO_ST[t.dtype]
        blob = t.numpy().astype(_DTYPES[code], copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    tmp.replace(path)


# ---------------------------------------------------------------------------------------------- IDX data
def read_idx(path):
    """A uint8 IDX file (the MNIST format), raw or gzip-compressed (by the 1f 8b magic), as a numpy array.
    `path` may also name the file without its .gz. Raises ValueError "<file>: <what is wrong>"."""
    path = Path(path)
    if not path.exists() and Path(str(path) + ".gz").exists():
        path = Path(str(path) + ".gz")
    if not path.exists():
        raise ValueError(f"{path}: not found (raw or .gz)")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or not 1 <= raw[3] <= 4:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: truncated header")
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data, dims {dims} need {int(np.prod(dims))}")
    return body.reshape(dims)


def load_split(directory, split):
    """(x, labels) of split "train" or "t10k" of an IDX dataset directory: x float32 [N, 1, 28, 28] =
    float32(pixel) / float32(255) (ringtrain's scaling, nothing else), labels int64 [N]."""
    images = read_idx(Path(directory) / f"{split}-images-idx3-ubyte")
    labels = read_idx(Path(directory) / f"{split}-labels-idx1-ubyte")
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != (images.shape[0],):
        raise ValueError(f"{directory}: {split} images {images.shape} and labels {labels.shape} "
                         "do not pair up as N x 28 x 28 / N")
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255)).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def main(argv):
    """`python3 scripts/zoo_torch.py MODEL`: the state_dict layout (what a checkpoint holds), one tensor a line:
    name, shape, dtype (F32 or I64), and whether it is a parameter or a buffer."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("model", choices=MODELS)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    model = make_model(args.model)
    params = {n for n, _ in model.named_parameters()}
    total = 0
    for name, t in model.state_dict().items():
        kind = "param" if name in params else "buffer"
        total += t.numel() if kind == "param" else 0
        print(f"{name} {list(t.shape)} {_TORCH_TO_ST[t.dtype]} {kind}")
    print(f"# {args.model}: {len(model.state_dict())} tensors, {len(params)} parameters, {total} weights")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
