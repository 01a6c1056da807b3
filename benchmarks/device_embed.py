"""ELMo on a torch device (a CUDA GPU) against the CPU: agreement and tokens/s per precision.

    python benchmarks/device_embed.py                              # bundled model, cuda
    python benchmarks/device_embed.py --models bundled,original --batch-sizes 32,256

For each model and precision: the device's vectors against the CPU's fp32 vectors of the same
weights (per layer: the minimum cosine and the largest absolute difference, beside the largest
absolute value), then ``Encoder.embed`` tokens/s on the device per batch size (median of
``--passes`` passes after a warm-up, the token cache emptied before each, the device
synchronized before the clock is read), and the CPU's fp32 tokens/s at the first batch size with
``--threads`` threads. Models: ``bundled`` (``elmo-en-small``) and ``original`` (random weights,
seed 0, of the published 2x4096_512_2048cnn_2xhighway dimensions). Sentences: the reference
``elmo-small/sentences.txt``, cycled to ``--n-sentences``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from checkpoints import original_elmo

import contextvec
from contextvec.api import check_device
from contextvec.encoders.precision import apply_precision

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference"


def load(name: str, device: str, precision: str) -> contextvec.Encoder:
    if name == "bundled":
        return contextvec.load(device=device, precision=precision)
    return apply_precision(original_elmo().to(device), precision)


def agreement(reference: list[np.ndarray], other: list[np.ndarray]) -> str:
    """Per layer: min cosine / max |difference| over every token; the largest |value| after."""
    x, y = np.concatenate(reference, axis=1), np.concatenate(other, axis=1)
    cosine = (x * y).sum(-1) / np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1), 1e-12)
    diff = np.abs(x - y).max(axis=(1, 2))
    layers = ", ".join(f"{c.min():.6f} / {d:.1e}" for c, d in zip(cosine, diff, strict=True))
    return f"min cosine / max |diff| per layer: {layers} (max |value| {np.abs(x).max():.1f})"


def tokens_per_second(encoder: contextvec.Encoder, sentences: list[list[str]], batch_size: int,
                      passes: int, device: torch.device) -> float:
    def run() -> None:
        encoder.clear_caches()
        encoder.embed(sentences, batch_size=batch_size, max_tokens=None)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    run()  # warm-up
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sum(map(len, sentences)) / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="bundled")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batch-sizes", default="32,256")
    parser.add_argument("--n-sentences", type=int, default=2048)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for the CPU's figure")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        device = check_device(args.device)
    except ValueError as error:  # a CPU-only torch, an unknown device: one line, not a traceback
        raise SystemExit(f"device_embed.py: {error}") from None
    lines = (REFERENCE / "elmo-small" / "sentences.txt").read_text("utf-8").splitlines()
    sentences = [line.split() for line in lines * (args.n_sentences // len(lines) + 1)][: args.n_sentences]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device {device} ({name}); torch {torch.__version__}; {len(sentences)} sentences, "
          f"{sum(map(len, sentences))} tokens; median of {args.passes} passes")
    for model in args.models.split(","):
        cpu = load(model, "cpu", "fp32")
        reference = cpu.embed(sentences[: len(lines)])
        rate = tokens_per_second(cpu, sentences, batch_sizes[0], args.passes, torch.device("cpu"))
        print(f"{model:<9} cpu fp32, {args.threads} threads, batch {batch_sizes[0]}: {rate:,.0f} tokens/s")
        for precision in args.precisions.split(","):
            encoder = load(model, str(device), precision)
            print(f"{model:<9} {device.type} {precision}: "
                  f"{agreement(reference, encoder.embed(sentences[: len(lines)]))}")
            for batch_size in batch_sizes:
                rate = tokens_per_second(encoder, sentences, batch_size, args.passes, device)
                print(f"{model:<9} {device.type} {precision} batch {batch_size}: {rate:,.0f} tokens/s",
                      flush=True)


if __name__ == "__main__":
    main()
