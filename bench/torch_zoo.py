#!/usr/bin/python3
"""PyTorch baseline for ringtrain's model zoo (scripts/zoo_torch.py: lenet5, resnet18, mobilenet_v2, vit) with
ringtrain's plain recipe (`ringtrain train --label-smoothing 0 --ema 0 --augment-shift 0`): Adam (lr 1e-3,
betas 0.9/0.999, eps 1e-8, no weight decay), plain mean cross-entropy, batch 64, the training split shuffled
each epoch (torch.randperm from a generator seeded with --seed; the weights from torch.manual_seed(--seed)),
inputs pixel / 255 and nothing else (no augmentation, no EMA, no label smoothing), the model's own dropout
(mobilenet_v2's classifier Dropout(0.2)) active in training; after the last epoch, eval mode on the test split.

    /usr/bin/python3 bench/torch_zoo.py --model resnet18 --data data/digits --epochs 5 --seed 0
    /usr/bin/python3 bench/torch_zoo.py --model vit --data data/digits --speed-steps 60

--speed-steps K: no training run; times K training steps at --batch-size on the first batches of the training
split after a few warm-up steps, in --chunks timed chunks, and reports the median chunk's samples/s.
Prints ONE JSON line on stdout (progress goes to stderr): model, seed, threads, batch_size, accuracy (percent;
null in speed mode), test_loss, samples_per_s, and how it was measured.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import zoo_torch  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def evaluate(model, x, y, batch=500):
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            total += float(F.cross_entropy(logits.double(), y[i:i + batch], reduction="sum"))
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    model.train()
    return total / len(x), 100.0 * correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=zoo_torch.MODELS)
    ap.add_argument("--data", default="data/digits", help="IDX dataset directory (train-*/t10k-* files, raw or .gz)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--speed-steps", type=int, default=0, help="time this many training steps instead of training")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before --speed-steps (default 5)")
    ap.add_argument("--chunks", type=int, default=5, help="timed chunks of --speed-steps (default 5)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)
    model = zoo_torch.make_model(args.model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    try:
        x_train, y_train = zoo_torch.load_split(args.data, "train")
    except ValueError as e:
        sys.exit(f"torch_zoo: {e}")
    B = args.batch_size
    result = {"model": args.model, "seed": args.seed, "threads": torch.get_num_threads(), "batch_size": B,
              "lr": args.lr, "torch": torch.__version__, "cpu": cpu_name(), "nproc": os.cpu_count(),
              "nice": os.nice(0), "loadavg_start": os.getloadavg()[0]}

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if args.speed_steps:
        nb = max(1, min(8, len(x_train) // B))
        batches = [(x_train[i * B:(i + 1) * B], y_train[i * B:(i + 1) * B]) for i in range(nb)]
        for i in range(args.warmup):
            step(*batches[i % nb])
        chunks = max(1, min(args.chunks, args.speed_steps))
        per_chunk = args.speed_steps // chunks
        rates, cpu_rates, k = [], [], 0
        for _ in range(chunks):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(per_chunk):
                loss = step(*batches[k % nb])
                k += 1
            rates.append(per_chunk * B / (time.perf_counter() - t0))
            cpu_rates.append(per_chunk * B / (time.process_time() - c0))
            print(f"torch_zoo {args.model}: chunk of {per_chunk} steps: {rates[-1]:.1f} samples/s", file=sys.stderr)
        result.update(mode="speed", accuracy=None, test_loss=None, samples_per_s=round(statistics.median(rates), 2),
                      samples_per_s_min=round(min(rates), 2), samples_per_s_max=round(max(rates), 2),
                      samples_per_cpu_s=round(statistics.median(cpu_rates), 2), warmup_steps=args.warmup,
                      timed_steps=per_chunk * chunks, chunks=chunks, last_loss=round(float(loss), 6))
    else:
        x_test, y_test = zoo_torch.load_split(args.data, "t10k")
        gen = torch.Generator().manual_seed(args.seed)
        n = len(x_train)
        steps_per_epoch = math.ceil(n / B)
        t_train = 0.0
        for epoch in range(args.epochs):
            order = torch.randperm(n, generator=gen)
            t0 = time.perf_counter()
            total = 0.0
            for s in range(steps_per_epoch):
                idx = order[s * B:(s + 1) * B]
                total += float(step(x_train[idx], y_train[idx])) * len(idx)
            t_train += time.perf_counter() - t0
            print(f"torch_zoo {args.model} seed {args.seed}: epoch {epoch + 1}/{args.epochs} train loss "
                  f"{total / n:.4f} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        test_loss, accuracy = evaluate(model, x_test, y_test)
        result.update(mode="train", epochs=args.epochs, data=args.data, train_samples=n, test_samples=len(x_test),
                      accuracy=round(accuracy, 2), test_loss=round(test_loss, 6),
                      samples_per_s=round(args.epochs * n / t_train, 2), train_seconds=round(t_train, 1))
    result["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
