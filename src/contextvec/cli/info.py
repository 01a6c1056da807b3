"""``contextvec info``: what a model directory holds (format, family, vocabulary, layers,
dimensions, fingerprint), and how each precision runs it on this CPU."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from contextvec.encoders.cpu import InferencePath

HELP = ("say what a model directory holds (format, family, vocabulary, layers, dimensions, fingerprint) "
        "and how each precision runs it on this CPU")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("info", help=HELP, description=f"{HELP}.")
    p.add_argument("model", nargs="?",
                   help="a model directory (any format contextvec loads) or a bundled model's name "
                        "(default: the bundled model)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from contextvec.api import model_info

    info = model_info(args.model)
    if args.json:
        fields = {**vars(info), "path": str(info.path), "facts": dict(info.facts),
                  "inference": [asdict(path) for path in info.inference]}
        print(json.dumps(fields, ensure_ascii=False))
        return
    rows = [("path", str(info.path)), ("format", info.format), ("family", info.family),
            ("layers", str(info.num_layers)), ("dimensions", str(info.output_dim)),
            ("parameters", f"{info.parameters:,}"), *info.facts,
            ("inference", "each precision on this CPU"), *map(path_row, info.inference),
            ("fingerprint", info.fingerprint)]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name + ':':<{width + 1}} {value}")


def path_row(path: InferencePath) -> tuple[str, str]:
    """One precision's path as a row: ``("  int8", "AVX-512 VNNI, 8-bit activations, via ... (why)")``."""
    if not path.available:
        return f"  {path.precision}", f"refused: {path.reason}"
    bits = f", {path.activation_bits}-bit activations" if path.activation_bits else ""
    return f"  {path.precision}", f"{path.kernel}{bits}, via {path.engine} ({path.reason})"
