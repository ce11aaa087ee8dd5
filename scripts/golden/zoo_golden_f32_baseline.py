#!/usr/bin/python3
"""How close PyTorch itself, in float32, comes to a zoo golden fixture (make_zoo_golden.py computes in float64):
the baseline for the tolerances of a C++ float32 test against the same file.

    /usr/bin/python3 scripts/golden/zoo_golden_f32_baseline.py build/zoo_golden/*.safetensors

For each file: loads the initial weights and buffers into the float32 model (training mode, dropout off, as the
fixture), repeats the forward/backward and the 3 Adam steps, and prints per group the norm-relative error
||torch32 - ref|| / ||ref|| of each tensor (median and worst, with its name): logits, grad.* (skipping the
metadata's grad_zero and exactly-zero references), after1.* buffers, the adam3 parameter deltas
(adam3.<p> - <p>, skipping grad_zero) and the adam3.* buffers, and the relative error of the 3 losses.
Buffers whose reference is ~0 in exact arithmetic (a running_mean after a conv of BN outputs) are measured
against the norm of the matching running_var instead (absolute error on the scale of the statistics).
"""
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import zoo_torch  # noqa: E402


def nrel(a, b, scale=None):
    d = float((a.double() - b.double()).norm())
    s = float(b.double().norm()) if scale is None else scale
    return d / s if s > 0 else (0.0 if d == 0 else float("inf"))


def summary(label, rows):
    if not rows:
        return
    rows = sorted(rows)
    print(f"  {label:12s} median {rows[len(rows) // 2][0]:.1e}   worst {rows[-1][0]:.1e} ({rows[-1][1]})")


def buffer_rows(model, t, prefix):
    rows = []
    for n, b in model.named_buffers():
        if b.dtype == torch.int64:
            continue
        ref = t[prefix + n]
        scale = None
        if n.endswith("running_mean"):
            var = t[prefix + n[:-len("running_mean")] + "running_var"]
            scale = max(float(ref.double().norm()), 1e-3 * float(var.double().norm()))
        rows.append((nrel(b, ref, scale), n))
    return rows


def main(paths):
    torch.set_num_threads(1)
    for path in paths:
        t, md = zoo_torch.load_safetensors(path)
        zero = set(filter(None, md.get("grad_zero", "").split(",")))
        torch.manual_seed(0)
        template = zoo_torch.make_model(md["model"])
        names = list(template.state_dict())

        def fresh():
            model = zoo_torch.make_model(md["model"])
            model.load_state_dict({k: t[k] for k in names}, strict=True)
            model.train()
            for m in model.modules():
                if isinstance(m, nn.Dropout):
                    m.eval()
            return model

        x, y = t["input"], t["labels"]
        model = fresh()
        logits = model(x)
        F.cross_entropy(logits, y).backward()
        grads = [(nrel(p.grad, t["grad." + n]), n) for n, p in model.named_parameters()
                 if n not in zero and float(t["grad." + n].abs().max()) > 0]
        after1 = buffer_rows(model, t, "after1.")
        model = fresh()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        losses = []
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        deltas = [(nrel(p.detach() - t[n], t["adam3." + n] - t[n]), n) for n, p in model.named_parameters() if n not in zero]
        ref_losses = t["adam3.loss"].tolist()
        print(f"{path} ({md['model']}, head_init {md.get('head_init', '?')}): float32 PyTorch vs the float64 reference")
        print(f"  {'logits':12s} {nrel(logits.detach(), t['logits']):.1e}")
        print(f"  {'losses':12s} " + "  ".join(f"{abs(a - b) / abs(b):.1e}" for a, b in zip(losses, ref_losses)))
        summary("grad", grads)
        summary("after1", after1)
        summary("adam3 delta", deltas)
        summary("adam3 buffer", buffer_rows(model, t, "adam3."))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
