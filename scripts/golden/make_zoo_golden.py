#!/usr/bin/python3
"""Golden fixtures for the C++ zoo tests: PyTorch's answers for one model of scripts/zoo_torch.py on one fixed
batch, as a safetensors file. Generated during the test run (CTest test zoo_golden_fixtures), not committed:

    /usr/bin/python3 scripts/golden/make_zoo_golden.py --model resnet18 --out build/zoo_golden/resnet18.safetensors

Exit status 77 (CTest's SKIP_RETURN_CODE) when torch or torchvision cannot be imported.
Deterministic: the same --model and --head-init give the same bytes (one thread, float64, no timestamps; the
metadata's command says --out FILE, so the bytes do not depend on the output path either).

What it computes:
  - torch.manual_seed(0); model = zoo_torch.make_model(M) (float32 weights: what the C++ gets); then a float64
    copy of it (model.double()) computes everything, so the references are exact to ~1e-15 and a test's
    tolerance measures only the C++'s own float32 rounding.
  - Training mode (BatchNorm uses batch statistics and updates its running buffers), except that every
    nn.Dropout module is put in eval mode, i.e. the identity (metadata "dropout": "off"). mobilenet_v2's
    classifier Dropout(0.2) is the one that matters; the ViT's have p = 0 (its attention dropout is 0 too).
  - The batch: torch.manual_seed(S); x = torch.rand(8, 1, 28, 28) (float32, uniform in [0, 1)), labels 0..7.
    S = 1, or with --kink-margin R the first S >= 1 whose float64 forward keeps every ReLU / ReLU6 input on a
    map of at most 2 x 2 at least R x that tensor's largest magnitude away from a kink (0; 6 for ReLU6). On
    such maps an element is one of at most 32 values of its channel's batch-norm statistics and carries a
    large share of the gradient: an input within float32 noise of its kink (resnet18's seed 1 has one at
    5e-7 relative in layer4) lets any float32 code take the other side, and that one flipped mask moved
    resnet18's gradients by 2-20% (seen when the fast batch norm's summation order changed).
    The metadata's batch_seed says which S was used.
  - One forward + backward of the mean cross-entropy: logits, loss, the gradient of every parameter, and
    every buffer after that forward (running_mean, running_var with the unbiased batch variance, momentum
    0.1, num_batches_tracked = 1).
  - From the initial weights and buffers again: 3 steps of torch.optim.Adam(lr=1e-3) (betas 0.9, 0.999, eps
    1e-8, no weight decay) on the same batch, forward/backward/step each time (the buffers advance on each of
    the 3 forwards): the loss before each step, the parameters and the buffers after the third step.

Tensors (dtype F32 unless stated; shapes are the state_dict's):
  input                 [8, 1, 28, 28]  the batch (exactly the float32 values used)
  labels                [8] I64         0..7
  <state_dict name>     every parameter and buffer BEFORE the step (num_batches_tracked I64 [] = 0)
  logits                [8, 10]
  loss                  [1] F64         mean cross-entropy of the training forward
  grad.<param>          every parameter's gradient (parameters in named_parameters() order)
  after1.<buffer>       every buffer after the one training forward (num_batches_tracked I64, = 1)
  adam3.loss            [3] F64         the loss before each of the 3 Adam steps (adam3.loss[0] == loss)
  adam3.<param>         every parameter after 3 Adam steps
  adam3.<buffer>        every buffer after those 3 training forwards (num_batches_tracked I64, = 3)
Only the two losses are F64: they are scalars, and a loss test wants more than float32's 7 digits of the
reference. Weights, gradients, logits and buffers are float32 (rounding adds at most 6e-8 relative, far below
any float32 C++ tolerance; the Adam deltas adam3.<p> - <p>, ~3e-3, keep ~1e-5 of their own precision), which keeps
resnet18's file at 134 MB (3 x 11.2M parameters), mobilenet_v2's at 27 MB and the ViT's at 14 MB.
torchvision initialises the ViT's head (heads.head) to ZERO: its logits are all 0, the loss is ln 10, and every
gradient but grad.heads.head.* is exactly 0 (only the 3 Adam steps reach the encoder). So a ViT forward/backward
test also wants `--head-init linear`, which re-initialises the last nn.Linear of the model with nn.Linear's own
default (kaiming uniform, a = sqrt(5)) right after make_model, from the same seeded RNG; the file's initial
heads.head.* tensors are then those values (CTest writes it as vit_linear_head.safetensors).

Exactly-zero gradients: the metadata's "grad_zero" (comma-separated) names the parameters whose gradient is 0 in
exact arithmetic but not in floating point (0 < float64 max |grad| <= 1e-9 x the largest of all gradients):
mobilenet_v2's 17 projection BatchNorm biases (features.N.conv.M.bias: their output reaches a training-mode
BatchNorm only through convolutions, whose batch mean cancels any shift; resnet18 and the ViT have none).
float32 leaves ~1e-7 noise there and Adam turns noise into a full lr step (the reference moves them by
~1e-11), so a C++ test skips them in relative grad.* checks and in adam3.* checks. (The ViT's zero head gives
gradients that are exactly 0.0, in float32 too; those are not listed and need no care.)

Conditioning: float32 cannot follow some of these to 1e-5. scripts/golden/zoo_golden_f32_baseline.py prints
how far PyTorch's own float32 lands from each file (norm-relative, per tensor): grads ~1e-5 for resnet18 and
~1e-6 for the ViT, but ~7e-3 for mobilenet_v2 (blocks 14-16 run at 1 x 1 pixels, where the depthwise conv and
training-mode BatchNorm cancel, and every gradient upstream inherits the error); the adam3.* deltas of resnet18
and mobilenet_v2 are 5e-2 and 5e-1 off (Adam's first steps are lr x sign(g) for every element, tiny ones too,
and the 3 steps amplify), so there adam3.* is at best a loose smoke test; the ViT's follow to ~1e-4 (worst
tensor 3e-2).

Metadata: format "ringtrain-zoo-golden", format_version "1", model, N "8", dropout "off", mode "train",
optimizer "adam lr=1e-3 betas=0.9,0.999 eps=1e-8 steps=3", head_init, grad_zero, precision, torch, torchvision, command,
and "f32_error.<tensor>" for logits, grad.*, after1.* (F32 buffers), adam3.<param> and adam3.loss (the largest
relative error of the 3 losses): how far PyTorch's own float32
(the same float32 weights and batch) lands from the float64 answer, max |f32 - f64| / max |f64|.
"""
import argparse
import sys
from pathlib import Path

SKIP = 77


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="resnet18 | mobilenet_v2 | vit | lenet5")
    ap.add_argument("--out", required=True, help="output .safetensors file (its directory is created)")
    ap.add_argument("--head-init", choices=("torchvision", "linear"), default="torchvision",
                    help="torchvision: the model as make_model builds it (default); linear: the classifier's last "
                         "Linear re-initialised as a plain nn.Linear (see the docstring: the ViT's zero head)")
    ap.add_argument("--kink-margin", type=float, default=0.0,
                    help="pick the batch seed whose ReLU/ReLU6 inputs on maps of at most 2x2 keep this relative "
                         "distance from their kinks (default 0: seed 1)")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        if args.model != "lenet5":
            import torchvision
    except ImportError as e:
        print(f"make_zoo_golden: skipped: {e} (needs Debian's python3-torch and python3-torchvision)", file=sys.stderr)
        return SKIP
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import zoo_torch

    if args.model not in zoo_torch.MODELS:
        print(f"make_zoo_golden: unknown model '{args.model}' (known: {', '.join(zoo_torch.MODELS)})", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    torch.manual_seed(0)
    model32 = zoo_torch.make_model(args.model)
    if args.head_init == "linear":
        last = [m for m in model32.modules() if isinstance(m, nn.Linear)][-1]  # the classifier head
        last.reset_parameters()
    initial = {k: v.detach().clone() for k, v in model32.state_dict().items()}  # float32 (+ int64 counters)
    param_names = [n for n, _ in model32.named_parameters()]
    buffer_names = [n for n, _ in model32.named_buffers()]

    def kink_free_seed(margin):
        """The first batch seed in 1..100 whose float64 forward keeps every ReLU / ReLU6 input on a map of at
        most 2x2 at least margin x its tensor's largest magnitude away from its kink (None if none does)."""
        model = zoo_torch.make_model(args.model).double()
        model.load_state_dict(initial, strict=True)
        model.train()
        worst = [float("inf")]

        def pre_hook(module, inp):  # torchvision's ReLUs are in place: look before they run
            v = inp[0].detach()
            if v.dim() != 4 or v.shape[2] * v.shape[3] > 4:
                return
            d = v.abs()
            if isinstance(module, nn.ReLU6):
                d = torch.minimum(d, (v - 6).abs())
            worst[0] = min(worst[0], float(d.min()) / max(float(v.abs().max()), 1e-30))

        for m in model.modules():
            if isinstance(m, (nn.ReLU, nn.ReLU6)):
                m.register_forward_pre_hook(pre_hook)
        for seed in range(1, 101):
            torch.manual_seed(seed)
            worst[0] = float("inf")
            with torch.no_grad():
                model(torch.rand(8, 1, 28, 28).double())
            if worst[0] >= margin:
                return seed
        return None

    batch_seed = kink_free_seed(args.kink_margin) if args.kink_margin > 0 else 1
    if batch_seed is None:
        print(f"make_zoo_golden: no batch seed in 1..100 keeps --kink-margin {args.kink_margin}", file=sys.stderr)
        return 2
    torch.manual_seed(batch_seed)
    x32 = torch.rand(8, 1, 28, 28)
    labels = torch.arange(8, dtype=torch.int64)
    x = x32.double()

    def fresh(dtype=torch.float64):
        """The model from the initial state, in training mode with every dropout off, in dtype."""
        model = zoo_torch.make_model(args.model).to(dtype)
        model.load_state_dict(initial, strict=True)  # float32 -> float64 exactly; counters stay int64
        model.train()
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.eval()
        return model

    def adam3(model, inputs):
        """3 Adam steps on the batch; the loss before each."""
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        step_losses = []
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            step_loss = F.cross_entropy(model(inputs), labels)
            step_loss.backward()
            opt.step()
            step_losses.append(step_loss.item())
        return step_losses

    def buffers(model):
        return {n: b.detach().clone() for n, b in model.named_buffers()}

    out = {"input": x32, "labels": labels}
    for k, v in initial.items():
        out[k] = v

    model = fresh()
    model.zero_grad(set_to_none=False)
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out["logits"] = logits.detach().float()
    out["loss"] = loss.detach().reshape(1)  # F64
    grads = dict(model.named_parameters())
    for n in param_names:
        out[f"grad.{n}"] = grads[n].grad.detach().float()
    # Parameters whose exact gradient is 0 (float64 leaves ~1e-16 of rounding): e.g. the bias of a BatchNorm whose
    # output reaches another training-mode BatchNorm only through convolutions (the batch mean removes any
    # shift). float32 leaves ~1e-7 there, so relative checks of grad.* and any check of adam3.* (Adam turns
    # the noise into a full lr-sized step) must skip these; their names go into the metadata.
    scale = max(float(grads[n].grad.abs().max()) for n in param_names)
    zero = [n for n in param_names if 0 < float(grads[n].grad.abs().max()) <= 1e-9 * scale]
    after1 = buffers(model)
    for n in buffer_names:
        out[f"after1.{n}"] = after1[n] if after1[n].dtype == torch.int64 else after1[n].float()

    model = fresh()
    losses = adam3(model, x)
    out["adam3.loss"] = torch.tensor(losses, dtype=torch.float64)
    params = dict(model.named_parameters())
    for n in param_names:
        out[f"adam3.{n}"] = params[n].detach().float()
    after3 = buffers(model)
    for n in buffer_names:
        out[f"adam3.{n}"] = after3[n] if after3[n].dtype == torch.int64 else after3[n].float()

    # PyTorch's own float32 on the same batch, from the same float32 weights: per tensor, how far it lands
    # from the float64 answer (max |f32 - f64| / max |f64|, the C++ test's measure), as metadata
    # "f32_error.<tensor>". A float32 implementation cannot be held closer than the problem's conditioning
    # allows; the C++ test holds ringtrain to a small multiple of this (and to its own derived bound).
    def scaled_error(a, ref):
        ref = ref.double()
        return float((a.double() - ref).abs().max() / max(float(ref.abs().max()), 1e-30))

    f32_error = {}
    m32 = fresh(torch.float32)
    l32 = m32(x32)
    F.cross_entropy(l32, labels).backward()
    f32_error["logits"] = scaled_error(l32.detach(), out["logits"])
    for n, p32 in m32.named_parameters():
        f32_error[f"grad.{n}"] = scaled_error(p32.grad, out[f"grad.{n}"])
    for n, b32 in m32.named_buffers():
        if b32.dtype != torch.int64:
            f32_error[f"after1.{n}"] = scaled_error(b32, out[f"after1.{n}"])
    m32 = fresh(torch.float32)
    losses32 = adam3(m32, x32)
    f32_error["adam3.loss"] = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
    for n, p32 in m32.named_parameters():
        f32_error[f"adam3.{n}"] = scaled_error(p32.detach(), out[f"adam3.{n}"])

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "format": "ringtrain-zoo-golden",
        "format_version": "1",
        "model": args.model,
        "N": "8",
        "mode": "train",
        "dropout": "off",
        "optimizer": "adam lr=1e-3 betas=0.9,0.999 eps=1e-8 steps=3",
        "precision": "computed in float64; loss and adam3.loss F64, the rest F32 (num_batches_tracked I64)",
        "head_init": args.head_init,
        "batch_seed": str(batch_seed),
        "grad_zero": ",".join(zero),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__ if args.model != "lenet5" else "",
        **{f"f32_error.{k}": f"{v:.3e}" for k, v in f32_error.items()},
        "command": f"/usr/bin/python3 scripts/golden/make_zoo_golden.py --model {args.model} "
                   + (f"--head-init {args.head_init} " if args.head_init != "torchvision" else "")
                   + (f"--kink-margin {args.kink_margin:g} " if args.kink_margin > 0 else "") + "--out FILE",
    }
    zoo_torch.save_safetensors(out_path, out, metadata)
    print(f"wrote {out_path} ({out_path.stat().st_size} bytes, {len(out)} tensors, loss {loss.item():.6f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
