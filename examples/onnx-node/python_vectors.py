"""Write a few sentences and contextvec's fp32 layers for them as JSON, for embed.mjs to compare.

    python examples/onnx-node/python_vectors.py EXPECTED.json [--model MODEL]
"""

from __future__ import annotations

import argparse
import json

import torch

import contextvec

SENTENCES = [
    ["The", "bank", "was", "robbed", "."],
    ["She", "sat", "on", "the", "river", "bank", "and", "read", "."],
    ["Überraschung", "!"],
    ["日本語", "の", "文", "と", "🙂"],
    ["a"],
    ["Pneumonoultramicroscopicsilicovolcanoconiosis-is-longer-than-forty-eight-bytes", "word"],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--model", help="what contextvec.load accepts (default: the bundled model)")
    args = parser.parse_args()
    encoder = contextvec.load(args.model)
    with torch.no_grad():
        output = encoder(SENTENCES)
    layers = [output.layers[:, b, : len(s)].tolist() for b, s in enumerate(SENTENCES)]
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump({"sentences": SENTENCES, "layers": layers}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
