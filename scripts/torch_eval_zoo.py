#!/usr/bin/python3
"""Evaluates a ringtrain checkpoint of a zoo model (scripts/zoo_torch.py: lenet5, resnet18, mobilenet_v2, vit)
in PyTorch: builds the torchvision model, load_state_dict(strict=True) from the checkpoint (optim.* skipped),
runs it in eval mode on the test split of an IDX dataset (t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte,
raw or .gz; inputs pixel / 255) and prints the mean test loss (cross-entropy of the float32 logits taken in
float64, summed in float64, divided by the number of samples) and the accuracy:

    /usr/bin/python3 scripts/torch_eval_zoo.py --checkpoint model.safetensors --data data/digits \\
        [--model resnet18] [--predictions torch_preds.txt] [--expect-loss L --expect-accuracy A]

--model may be left out when the checkpoint's metadata has "model"; if both are given they must agree.
--predictions OUT writes PyTorch's predicted labels, one a line (what `ringtrain eval --predictions` writes).
--expect-loss / --expect-accuracy (ringtrain eval's numbers) make it the acceptance check: exit 1 unless the
loss is within --rtol (1e-4) relative and the accuracy is equal (to 0.01 percent).
A missing, unexpected or mis-shaped tensor, or one of the wrong dtype (num_batches_tracked must be I64, the
rest F32), is one line on stderr and exit status 1.
"""
import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo_torch  # noqa: E402


def fail(message):
    print(f"torch_eval_zoo: {message}", file=sys.stderr)
    sys.exit(1)


def check_tensors(path, model, tensors):
    """The strict-loading errors as one line (load_state_dict(strict=True) would raise a long message, and
    silently casts dtypes, so an F32 num_batches_tracked would pass it)."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in tensors]
    unexpected = [k for k in tensors if k not in expected]
    problems = []
    if missing:
        problems.append(f"missing tensor(s) {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''} "
                        f"({len(missing)} of {len(expected)})")
    if unexpected:
        problems.append(f"unexpected tensor(s) {', '.join(unexpected[:8])}{' ...' if len(unexpected) > 8 else ''}")
    for k, v in expected.items():
        if k in tensors:
            t = tensors[k]
            if tuple(t.shape) != tuple(v.shape):
                problems.append(f"tensor {k} has shape {list(t.shape)}, the model's is {list(v.shape)}")
            elif t.dtype != v.dtype:
                problems.append(f"tensor {k} is {t.dtype}, the model's is {v.dtype}")
    if problems:
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        fail(f"{path}: " + "; ".join(problems[:3]) + more)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=zoo_torch.MODELS, help="default: the checkpoint's metadata 'model'")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data", required=True, help="IDX dataset directory (its t10k-* files are the test split)")
    ap.add_argument("--predictions", help="write PyTorch's predicted labels here, one a line")
    ap.add_argument("--batch", type=int, default=500, help="evaluation batch size (default 500)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--expect-loss", type=float, help="ringtrain eval's mean test loss")
    ap.add_argument("--expect-accuracy", type=float, help="ringtrain eval's test accuracy (percent)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    try:
        tensors, metadata = zoo_torch.load_safetensors(args.checkpoint)
    except (OSError, zoo_torch.SafetensorsError) as e:
        fail(str(e))
    name = args.model or metadata.get("model")
    if name is None:
        fail(f"{args.checkpoint}: no \"model\" in the metadata; give --model")
    if name not in zoo_torch.MODELS:
        fail(f"{args.checkpoint}: model '{name}' is not in the zoo ({', '.join(zoo_torch.MODELS)})")
    if args.model and metadata.get("model") not in (None, args.model):
        fail(f"{args.checkpoint}: --model {args.model} but the checkpoint's metadata says '{metadata['model']}'")
    scaling = metadata.get("input_scaling", "x/255")
    if scaling != "x/255":
        fail(f"{args.checkpoint}: input_scaling '{scaling}' is not x/255; this script only knows x/255")

    torch.manual_seed(0)
    model = zoo_torch.make_model(name)
    check_tensors(args.checkpoint, model, tensors)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        fail(f"{args.checkpoint}: " + " ".join(str(e).split()))
    model.eval()

    try:
        x, labels = zoo_torch.load_split(args.data, "t10k")
    except ValueError as e:
        fail(str(e))
    total, predicted = 0.0, []
    with torch.no_grad():
        for i in range(0, len(x), args.batch):
            logits = model(x[i:i + args.batch])
            total += float(F.cross_entropy(logits.double(), labels[i:i + args.batch], reduction="sum"))
            predicted.append(logits.argmax(1))
    predicted = torch.cat(predicted)
    loss = total / len(x)
    correct = int((predicted == labels).sum())
    accuracy = 100.0 * correct / len(x)
    print(f"pytorch {name}: {len(x)} test samples, test loss {loss:.8f}, accuracy {accuracy:.2f}% ({correct}/{len(x)})")
    if args.predictions:
        Path(args.predictions).write_text("".join(f"{int(p)}\n" for p in predicted))

    status = 0
    if args.expect_loss is not None:
        rel = abs(loss - args.expect_loss) / max(abs(args.expect_loss), 1e-30)
        ok = rel <= args.rtol
        print(f"loss vs ringtrain {args.expect_loss:.8f}: relative difference {rel:.2e} "
              f"({'ok' if ok else 'FAIL'}, tolerance {args.rtol:g})")
        status |= 0 if ok else 1
    if args.expect_accuracy is not None:
        ok = abs(accuracy - args.expect_accuracy) < 0.005
        print(f"accuracy vs ringtrain {args.expect_accuracy:.2f}%: {'ok' if ok else 'FAIL'}")
        status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
