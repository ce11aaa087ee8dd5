#!/usr/bin/python3
"""Checks an ONNX file written by `ringtrain export` and runs it with OpenCV's dnn module on a test split:

    /usr/bin/python3 scripts/onnx_check.py MODEL.onnx --data data/digits --predictions preds.txt \\
        [--limit N] [--batch-size 100] [--min-agreement 99.9] [--checkpoint model.safetensors]
        [--torch-checkpoint model.safetensors]

1. onnx.checker.check_model(full_check=True) (the schema and shape inference), and the interface ringtrain
   promises: input "input" float [batch, 1, 28, 28], output "logits" [batch, 10], "batch" a dynamic dimension.
2. OpenCV (cv2.dnn.readNetFromONNX) runs the graph on the first --limit samples of the t10k split of an IDX
   dataset (t10k-images-idx3-ubyte, raw or .gz; inputs pixel / 255 - the graph does not scale), --batch-size
   at a time (the last batch shorter: the batch really is dynamic).
3. OpenCV's predicted labels are compared with `ringtrain eval --predictions` (one label a line, split order);
   prints the agreement and exits 1 below --min-agreement percent. Also OpenCV's mean test loss (cross-entropy
   of its float32 logits, in float64), to set beside `ringtrain eval`'s "test loss": with --eval-loss L it
   exits 1 unless they agree to --loss-rtol (1e-4) relative - a check on the logits, not only their argmax.
4. With --checkpoint, every F32 tensor of the checkpoint but optim.* (weights, batch-norm statistics) is an
   initializer of the same name, shape and values (json + numpy: no PyTorch needed).
5. With --torch-checkpoint (needs PyTorch; scripts/zoo_torch.py), the same samples through the PyTorch model
   of the checkpoint, and the largest |logit difference| between OpenCV and PyTorch (whose evaluation
   matches ringtrain's: docs/MODELS.md).

Exit status: 0 checked and agreeing, 1 a check failed (one line on stderr says which), 2 onnx, cv2 or numpy
are missing (Debian: python3-onnx, python3-opencv).
"""
import argparse
import gzip
import json
import struct
import sys
from pathlib import Path

try:
    import cv2
    import numpy as np
    import onnx
    import onnx.numpy_helper
except ImportError as e:  # the caller (tests/cli/test_export.sh) tells a missing package from a failure
    print(f"onnx_check: {e.name} is not installed (Debian: python3-onnx, python3-opencv)", file=sys.stderr)
    sys.exit(2)


def fail(message):
    print(f"onnx_check: {message}", file=sys.stderr)
    sys.exit(1)


def read_idx(path):
    """An IDX file (raw or .gz) as a numpy array of uint8 (the only dtype ringtrain's datasets use)."""
    path = Path(path)
    if not path.exists() and Path(str(path) + ".gz").exists():
        path = Path(str(path) + ".gz")
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        fail(f"{path}: not a uint8 IDX file")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        fail(f"{path}: {body.size} values for dimensions {dims}")
    return body.reshape(dims)


def read_safetensors_f32(path):
    """{name: float32 array} of a safetensors file's F32 tensors, optim.* left out."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {name: np.frombuffer(data, dtype="<f4", count=int(np.prod(info["shape"], dtype=np.int64)),
                                offset=8 + n + info["data_offsets"][0]).reshape(info["shape"])
            for name, info in header.items() if info["dtype"] == "F32" and not name.startswith("optim.")}


def check_initializers(model, checkpoint):
    """The checkpoint's tensors are the graph's initializers under the same names, bit for bit."""
    initializers = {t.name: t for t in model.graph.initializer}
    tensors = read_safetensors_f32(checkpoint)
    for name, value in tensors.items():
        if name not in initializers:
            fail(f"the checkpoint's {name} is no initializer of the graph")
        init = onnx.numpy_helper.to_array(initializers[name])
        if init.shape != value.shape or not np.array_equal(init, value):
            fail(f"initializer {name} {list(init.shape)} differs from the checkpoint's {list(value.shape)}")
    print(f"initializers: the checkpoint's {len(tensors)} F32 tensors, same names and values")


def check_interface(model):
    """The exported graph's promised input and output: names, float, [batch, 1, 28, 28] -> [batch, 10]."""
    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
    graph = model.graph
    if [i.name for i in graph.input] != ["input"] or [o.name for o in graph.output] != ["logits"]:
        fail(f"inputs {[i.name for i in graph.input]} and outputs {[o.name for o in graph.output]}, "
             "not ['input'] and ['logits']")
    if dims(graph.input[0]) != ["batch", 1, 28, 28] or dims(graph.output[0]) != ["batch", 10]:
        fail(f"input {dims(graph.input[0])}, output {dims(graph.output[0])}: not [batch, 1, 28, 28] and [batch, 10]")
    if graph.input[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        fail("the input is not float")


def opencv_logits(path, images, batch_size):
    net = cv2.dnn.readNetFromONNX(str(path))
    out = []
    for start in range(0, len(images), batch_size):
        net.setInput(images[start:start + batch_size], "input")
        logits = net.forward()
        if logits.shape != (min(batch_size, len(images) - start), 10):
            fail(f"OpenCV's logits for samples {start}.. have shape {logits.shape}")
        out.append(logits.copy())
    return np.concatenate(out)


def torch_logits(checkpoint, model_name, images):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    import zoo_torch
    tensors, metadata = zoo_torch.load_safetensors(checkpoint)
    model = zoo_torch.make_model(metadata.get("model", model_name))
    model.load_state_dict(tensors, strict=True)
    model.eval()
    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(images[s:s + 500])).numpy() for s in range(0, len(images), 500)])


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("onnx_file")
    p.add_argument("--data", required=True, help="IDX dataset directory (its t10k split)")
    p.add_argument("--predictions", required=True, help="`ringtrain eval --predictions` output")
    p.add_argument("--limit", type=int, default=0, help="only the first N test samples (0: all)")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--min-agreement", type=float, default=99.9, help="percent")
    p.add_argument("--eval-loss", type=float, help="`ringtrain eval`'s test loss, to compare with OpenCV's")
    p.add_argument("--loss-rtol", type=float, default=1e-4)
    p.add_argument("--checkpoint", help="check that this checkpoint's tensors are the graph's initializers")
    p.add_argument("--torch-checkpoint", help="also compare the logits with PyTorch's for this checkpoint")
    args = p.parse_args(argv)

    model = onnx.load(args.onnx_file)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # checker.ValidationError, shape inference errors
        fail(f"{args.onnx_file}: onnx.checker: {str(e).strip().splitlines()[0]}")
    check_interface(model)
    props = {p.key: p.value for p in model.metadata_props}
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(f"{args.onnx_file}: onnx.checker full_check passed ({props.get('model', '?')}, opset {opset}, "
          f"{len(model.graph.node)} nodes)")
    if args.checkpoint:
        check_initializers(model, args.checkpoint)

    images = read_idx(Path(args.data) / "t10k-images-idx3-ubyte")
    labels = read_idx(Path(args.data) / "t10k-labels-idx1-ubyte")
    n = len(images) if args.limit <= 0 else min(args.limit, len(images))
    x = (images[:n].astype(np.float32) / 255.0).reshape(n, 1, 28, 28)
    try:
        lines = Path(args.predictions).read_text().split()
    except OSError as e:
        fail(f"{args.predictions}: {e.strerror}")
    if len(lines) < n:
        fail(f"{args.predictions}: {len(lines)} predictions for {n} samples")
    ringtrain = np.array([int(v) for v in lines[:n]])

    try:
        logits = opencv_logits(args.onnx_file, x, args.batch_size)
    except cv2.error as e:
        reason = [line for line in str(e).splitlines() if "error" in line] or [str(e).strip()]
        fail(f"OpenCV {cv2.__version__} cannot run {args.onnx_file}: {reason[-1].strip()}")
    predicted = logits.argmax(1)
    agreement = 100.0 * float((predicted == ringtrain).mean())
    print(f"OpenCV {cv2.__version__}: {n} samples, accuracy {100.0 * float((predicted == labels[:n]).mean()):.2f}%, "
          f"agreement with ringtrain eval {agreement:.2f}% ({int((predicted != ringtrain).sum())} differ)")
    z = logits.astype(np.float64)
    z -= z.max(1, keepdims=True)
    loss = float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(n), labels[:n]]))
    versus = f" (ringtrain eval {args.eval_loss:.9g}, relative difference {abs(loss - args.eval_loss) / abs(args.eval_loss):.2g})" \
        if args.eval_loss else ""
    print(f"OpenCV mean test loss {loss:.9g}{versus}")
    if args.torch_checkpoint:
        reference = torch_logits(args.torch_checkpoint, props.get("model", "lenet5"), x)
        print(f"PyTorch: max |logit difference| OpenCV - PyTorch {float(np.abs(logits - reference).max()):.3g} "
              f"(logits up to {float(np.abs(reference).max()):.3g}); label agreement "
              f"{100.0 * float((reference.argmax(1) == predicted).mean()):.2f}%")
    if args.eval_loss and abs(loss - args.eval_loss) > args.loss_rtol * abs(args.eval_loss):
        fail(f"OpenCV's test loss {loss:.9g} is not ringtrain's {args.eval_loss:.9g} to --loss-rtol {args.loss_rtol}")
    if agreement < args.min_agreement:
        fail(f"agreement {agreement:.2f}% is below --min-agreement {args.min_agreement}%")


if __name__ == "__main__":
    main(sys.argv[1:])
