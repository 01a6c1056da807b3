"""``contextvec convert``: ELMo between bilm-tf files and contextvec's native format (CoVe to
native too); HF BERT directories are read as they are and have nothing to convert. The job is
:func:`contextvec.api.convert`."""

from __future__ import annotations

import argparse

from contextvec.api import STORED_DTYPES, Conversion, convert
from contextvec.cli.common import add_model_arguments, add_overwrite_argument, check_output, model_spec
from contextvec.encoders.family import FORMS
from contextvec.encoders.registry import CONVERSIONS

HELP = "convert a model between bilm-tf (options.json + weights.hdf5) and native safetensors"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("convert", help=HELP, description=f"{HELP}. {CONVERSIONS}.")
    p.add_argument("output_dir", help="directory to write (a new or empty one, or --overwrite)")
    p.add_argument("--to", choices=FORMS, required=True,
                   help="native: contextvec's config.json + model.safetensors (ELMo, CoVe); bilm-tf: "
                        "options.json + weights.hdf5 (ELMo)")
    p.add_argument("--dtype", choices=tuple(STORED_DTYPES), default="float32",
                   help="--to native: store the weights in this dtype; float16 halves the files and "
                        "loads into float32 parameters (default: float32)")
    add_model_arguments(p, precision=False)
    add_overwrite_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    conversion = Conversion(model_spec(args), args.to, args.dtype)  # refused before anything is written
    out = check_output(args.output_dir, inputs=(args.model, args.options_file, args.weight_file),
                       overwrite=args.overwrite, directory=True)
    print(f"wrote {convert(conversion, out)}")
