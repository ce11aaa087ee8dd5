#!/usr/bin/python3
"""Writes tests/fixtures/lenet5_golden.bin: PyTorch's answers for LeNet-5 that tests/test_golden.cpp holds the
C++ to (llm.c's test_gpt2 idea). Run with Debian's interpreter, which has python3-torch:

    /usr/bin/python3 scripts/golden/make_golden.py [OUTPUT]

What it computes, for fixed weights (PyTorch's default initialisation, seed 1234) and fixed uint8 images:
  - two batches, N=8 and N=5 (5 is not a multiple of any vector width): logits, mean cross-entropy loss and
    every parameter gradient;
  - starting from the same weights, 3 steps on the N=8 batch of Adam (lr 1e-3), Adam with weight_decay 0.1,
    and SGD with momentum 0.9 (lr 0.05): the loss before each step and the weights after the third.

Precision: the weights and inputs are float32 values (what the C++ holds), but every computation here runs in
float64, so the references are exact to ~1e-15 and the test's tolerance measures only the C++'s own float32
rounding, not the difference between two float32 summation orders. Results are stored as float32 (adds at most
6e-8 relative), losses as float64.

Inputs: pixels are uint8 and the network sees float32(pixel) / float32(255), exactly as ringtrain scales data.

File format (little-endian), version 1:
  8 bytes   magic "RTGOLDEN"
  u32       version
  u32 L, L bytes   UTF-8 notes (how to regenerate, what is inside)
  u32       number of sections, then each section:
            u32 name length, name, u8 dtype (0 = f32, 1 = f64, 2 = u8), u64 element count, the elements
Section names: layout (u8 text "name d0,d1,..\\n" per parameter in state_dict order), weights,
  b8.pixels, b8.labels, b8.logits, b8.loss, b8.grads (and the same for b5),
  adam.hparams [lr, beta1, beta2, eps, weight_decay], adam.losses, adam.weights (and adam_wd.*),
  sgd.hparams [lr, momentum, weight_decay], sgd.losses, sgd.weights;
  the optimizers alone: opt.params0 [512], opt.grads [3,512], and for adam, adam_wd (hparams as above),
  sgd, sgd_nesterov_wd (hparams [lr, momentum, weight_decay, nesterov]): opt.<name>.weights [3,512] after
  each step.
Flat parameter vectors (weights, grads, *.weights) concatenate the parameters in state_dict order, no padding.
"""
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lenet5_torch import LeNet5  # noqa: E402

VERSION = 1
SEED = 1234


def make_batch(gen, n):
    """uint8 images with about half the pixels zero (like digits), and labels 0-9."""
    pixels = torch.randint(0, 256, (n, 1, 28, 28), generator=gen, dtype=torch.int64)
    background = torch.rand((n, 1, 28, 28), generator=gen) < 0.5
    pixels[background] = 0
    labels = torch.randint(0, 10, (n,), generator=gen, dtype=torch.int64)
    x = torch.from_numpy(pixels.numpy().astype(np.float32) / np.float32(255)).double()
    return pixels.to(torch.uint8), labels, x


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def forward_backward(model, x, labels):
    model.zero_grad(set_to_none=False)
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    return logits.detach(), loss.item(), flat(p.grad for p in model.parameters())


def run_optimizer(initial_state, make_opt, x, labels, steps=3):
    model = LeNet5().double()
    model.load_state_dict(initial_state)
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, flat(model.parameters())


def main():
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "tests/fixtures/lenet5_golden.bin"
    torch.manual_seed(SEED)
    model32 = LeNet5()  # PyTorch's default init in float32: these are the weights the C++ gets
    state = {k: v.double() for k, v in model32.state_dict().items()}
    model = LeNet5().double()
    model.load_state_dict(state)

    gen = torch.Generator().manual_seed(SEED + 1)
    sections = []  # (name, dtype code, numpy array)

    def add(name, array, code):
        dtype = {0: np.float32, 1: np.float64, 2: np.uint8}[code]
        sections.append((name, code, np.ascontiguousarray(np.asarray(array), dtype=dtype).reshape(-1)))

    layout = "".join(f"{k} {','.join(str(d) for d in v.shape)}\n" for k, v in model.state_dict().items())
    add("layout", np.frombuffer(layout.encode(), dtype=np.uint8), 2)
    add("weights", flat(model32.parameters()).numpy(), 0)

    batches = {}
    for n in (8, 5):
        pixels, labels, x = make_batch(gen, n)
        batches[n] = (x, labels)
        logits, loss, grads = forward_backward(model, x, labels)
        add(f"b{n}.pixels", pixels.numpy(), 2)
        add(f"b{n}.labels", labels.numpy(), 2)
        add(f"b{n}.logits", logits.numpy(), 0)
        add(f"b{n}.loss", [loss], 1)
        add(f"b{n}.grads", grads.numpy(), 0)

    x, labels = batches[8]
    for name, lr, wd in (("adam", 1e-3, 0.0), ("adam_wd", 1e-3, 0.1)):
        losses, weights = run_optimizer(
            state, lambda p: torch.optim.Adam(p, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd), x, labels)
        add(f"{name}.hparams", [lr, 0.9, 0.999, 1e-8, wd], 1)
        add(f"{name}.losses", losses, 1)
        add(f"{name}.weights", weights.numpy(), 0)
    losses, weights = run_optimizer(state, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), x, labels)
    add("sgd.hparams", [0.05, 0.9, 0.0], 1)
    add("sgd.losses", losses, 1)
    add("sgd.weights", weights.numpy(), 0)

    # The optimizers alone, on a synthetic parameter vector with given gradients (magnitudes from 1e-10 to 1e-1,
    # exact zeros included): here the C++ gets PyTorch's exact inputs, so its weights must match strictly even
    # where Adam's update g / (sqrt(v) + eps) is ill-conditioned (|g| near eps).
    ogen = torch.Generator().manual_seed(SEED + 2)
    n = 512
    params0 = (torch.rand(n, generator=ogen) * 0.2 - 0.1).float()
    magnitude = 10.0 ** (torch.rand(3, n, generator=ogen) * 9 - 10)
    grads = (torch.randn(3, n, generator=ogen) * magnitude).float()
    grads[:, :16] = 0.0
    grads[torch.rand(3, n, generator=ogen) < 0.05] = 0.0
    add("opt.params0", params0.numpy(), 0)
    add("opt.grads", grads.numpy(), 0)
    configs = {
        "adam": ([1e-3, 0.9, 0.999, 1e-8, 0.0], lambda p: torch.optim.Adam(p, lr=1e-3)),
        "adam_wd": ([1e-2, 0.8, 0.99, 1e-8, 0.1],
                    lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.1)),
        "sgd": ([0.05, 0.9, 0.0, 0.0], lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
        "sgd_nesterov_wd": ([0.05, 0.9, 0.01, 1.0],
                            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True)),
    }
    for name, (hparams, make_opt) in configs.items():
        w = params0.double().clone().requires_grad_(True)
        opt = make_opt([w])
        after = []
        for step in range(3):
            w.grad = grads[step].double().clone()
            opt.step()
            after.append(w.detach().clone())
        add(f"opt.{name}.hparams", hparams, 1)
        add(f"opt.{name}.weights", torch.stack(after).numpy(), 0)

    notes = ("ringtrain LeNet-5 golden fixture, made by PyTorch %s in float64. Regenerate with: "
             "/usr/bin/python3 scripts/golden/make_golden.py (format in its docstring)." % torch.__version__)
    with open(out_path, "wb") as f:
        f.write(b"RTGOLDEN")
        f.write(struct.pack("<I", VERSION))
        f.write(struct.pack("<I", len(notes.encode())) + notes.encode())
        f.write(struct.pack("<I", len(sections)))
        for name, code, array in sections:
            f.write(struct.pack("<I", len(name)) + name.encode())
            f.write(struct.pack("<BQ", code, array.size))
            f.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    print(f"wrote {out_path} ({out_path.stat().st_size} bytes, {len(sections)} sections)")


if __name__ == "__main__":
    main()
