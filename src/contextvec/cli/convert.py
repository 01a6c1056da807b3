"""``contextvec convert``: between bilm-tf files and contextvec's native format."""

from __future__ import annotations

import argparse
from pathlib import Path

import contextvec
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.encoders.bilm import ElmoEncoder
from contextvec.io.bilm_tf import save_bilm_tf

HELP = "convert a model between bilm-tf (options.json + weights.hdf5) and native safetensors"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("convert", help=HELP, description=HELP)
    p.add_argument("output_dir", help="directory to write")
    p.add_argument("--to", choices=("native", "bilm-tf"), required=True)
    add_model_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    encoder = load_model(args)
    out = Path(args.output_dir)
    if args.to == "native":
        contextvec.save(encoder, out)
    else:
        if not isinstance(encoder, ElmoEncoder):
            raise ValueError("only ELMo models have a bilm-tf form")
        out.mkdir(parents=True, exist_ok=True)
        save_bilm_tf(encoder.bilm, out / "options.json", out / "weights.hdf5")
    print(f"wrote {out}")
