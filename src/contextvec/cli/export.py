"""``contextvec export``: a model as ONNX with dynamic batch and length (docs/onnx.md)."""

from __future__ import annotations

import argparse
import math

from contextvec.cli.common import add_overwrite_argument, check_output

HELP = "export an ELMo, CoVe or BERT to ONNX (dynamic batch and length) with what a runtime needs beside it"


def _mix_weights(text: str) -> list[float] | None:
    if text == "average":
        return None
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'average' or comma-separated numbers, got {text!r}") \
            from None


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help=HELP, description=f"{HELP}; see docs/onnx.md.")
    p.add_argument("model", help="a bundled model's name (elmo-en-small) or a model directory")
    p.add_argument("output", help="the .onnx file to write; the manifest goes beside it as .json "
                                  "(CoVe's word list as .words.json, BERT's tokenizer as .tokenizer.json and "
                                  ".vocab.txt)")
    p.add_argument("--scalar-mix", type=_mix_weights, metavar="WEIGHTS", default=argparse.SUPPRESS,
                   help="also output 'mixed': 'average' or one raw weight per layer, comma-separated "
                        "(softmax-normalised, as ScalarMix's parameters)")
    p.add_argument("--gamma", type=_finite, default=1.0, help="the scalar mix's gamma")
    add_overwrite_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from contextvec.embedder import ScalarMix
    from contextvec.export import export_onnx, manifest_path, tokenizer_paths, vocabulary_path, weights_path

    out = check_output(args.output, inputs=(args.model,), overwrite=args.overwrite)
    besides = (manifest_path(out), weights_path(out), vocabulary_path(out), *tokenizer_paths(out))
    for beside in besides:
        check_output(beside, inputs=(args.model,), overwrite=args.overwrite)
    import contextvec

    encoder = contextvec.load(args.model)
    mix = None
    if hasattr(args, "scalar_mix"):
        weights = args.scalar_mix
        mix = ScalarMix(encoder.num_layers, initial_weights=weights, initial_gamma=args.gamma)
    export_onnx(encoder, out, scalar_mix=mix)
    print("wrote " + ", ".join(str(p) for p in (out, *besides) if p.exists()))
