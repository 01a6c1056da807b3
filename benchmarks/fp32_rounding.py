"""How far are contextvec and allennlp each from the exact ELMo layers?

    python benchmarks/fp32_rounding.py [../shared/data/reference/elmo-small]

For a reference fixture (bilm-tf weights + allennlp 2.10.1's own raw layers, see
../shared/data/reference/README.md) it runs contextvec's encoder in float32 and in float64 (the
"exact" values; float64 rounding is ~1e-16) over the same file-order batches of 32 and prints, per
biLM layer, the largest absolute difference between each pair of {contextvec fp32, allennlp fp32,
exact}. When both float32 implementations are about equally far from the exact values, their
difference from each other is float32 rounding, not a different computation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import contextvec

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference" / "elmo-small"


def raw_layers(encoder, sentences: list[list[str]]) -> list[np.ndarray]:
    """(layers, tokens, dim) float64 arrays per sentence, file-order batches of 32."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(sentences), 32):
            batch = sentences[start:start + 32]
            layers = encoder(batch)[0]
            out.extend(layers[:, row, :len(tokens)].double().numpy() for row, tokens in enumerate(batch))
    return out


def main() -> None:
    fixture = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    torch.set_num_threads(2)
    expected = np.load(fixture / "expected.npz")
    sentences = [line.split() for line in (fixture / "sentences.txt").read_text("utf-8").splitlines()]
    allennlp = [expected[f"activations_{i:03d}"].astype(np.float64) for i in range(len(sentences))]
    fp32 = raw_layers(contextvec.load(fixture), sentences)
    exact = raw_layers(contextvec.load(fixture).to(torch.float64), sentences)
    n_layers = fp32[0].shape[0]
    pairs = {"contextvec fp32 vs allennlp": (fp32, allennlp),
             "contextvec fp32 vs exact (fp64)": (fp32, exact),
             "allennlp fp32 vs exact (fp64)": (allennlp, exact)}
    print(f"{fixture.name}: {len(sentences)} sentences; largest absolute difference per raw layer")
    print(f"| pair | {' | '.join(f'layer {k}' for k in range(n_layers))} |")
    print(f"| --- | {' | '.join('---:' for _ in range(n_layers))} |")
    for name, (a, b) in pairs.items():
        worst = np.max([np.abs(x - y).reshape(n_layers, -1).max(axis=1) for x, y in zip(a, b, strict=True)],
                       axis=0)
        print(f"| {name} | {' | '.join(f'{w:.1e}' for w in worst)} |")


if __name__ == "__main__":
    main()
