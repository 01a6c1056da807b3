"""``contextvec convert``: ELMo between bilm-tf files and contextvec's native format (CoVe to
native too); HF BERT directories are read as they are and have nothing to convert."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextvec.cli.common import add_model_arguments, add_overwrite_argument, check_output, model_spec

HELP = "convert a model between bilm-tf (options.json + weights.hdf5) and native safetensors"
SUPPORTED = ("ELMo (bilm-tf files or checkpoint, TF-Hub module, or native) converts to native or "
             "bilm-tf, CoVe and ELMoForManyLangs to native; HF BERT directories load as they are, with "
             "nothing to convert")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("convert", help=HELP, description=f"{HELP}. {SUPPORTED}.")
    p.add_argument("output_dir", help="directory to write (a new or empty one, or --overwrite)")
    p.add_argument("--to", choices=("native", "bilm-tf"), required=True,
                   help="native: contextvec's config.json + model.safetensors (ELMo, CoVe); bilm-tf: "
                        "options.json + weights.hdf5 (ELMo)")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="--to native: store the weights in this dtype; float16 halves the files and "
                        "loads into float32 parameters (default: float32)")
    add_model_arguments(p, precision=False)
    add_overwrite_argument(p)
    p.set_defaults(run=run)


def _refuse_unconvertible(model: str | None, to: str) -> None:
    """A one-line ``ValueError`` naming the kind of model ``--model`` is, in words, where it has
    no ``to`` form; before anything is loaded or written."""
    from contextvec.api import bundled_models
    from contextvec.encoders.bilm.loader import BILM_TF, NATIVE_ELMO
    from contextvec.encoders.bilm.tf_loader import TF_ELMO
    from contextvec.encoders.cove.loader import COVE
    from contextvec.encoders.manylangs.loader import MANYLANGS, MANYLANGS_NATIVE, no_bilm_tf_form
    from contextvec.encoders.registry import family_of

    if model is None:  # --options-file/--weight-file, or the bundled default: an ELMo
        return
    path = Path(model) if Path(model).exists() else bundled_models().get(model, Path(model))
    family = family_of(path) if path.is_dir() else None  # not a model: contextvec.load says so
    elmo = (BILM_TF, TF_ELMO, NATIVE_ELMO)
    converts = (*elmo, COVE, MANYLANGS, MANYLANGS_NATIVE) if to == "native" else elmo
    if family in (MANYLANGS, MANYLANGS_NATIVE) and to == "bilm-tf":
        raise ValueError(f"{model}: {no_bilm_tf_form(path, family)}")
    if family is not None and family not in converts:
        raise ValueError(f"{model} is {family.kind}, which has no {to} form: {SUPPORTED}")


def run(args: argparse.Namespace) -> None:
    import torch

    import contextvec
    from contextvec.encoders.bilm.loader import is_bilm_tf_dir, save_bilm_tf
    from contextvec.io.native import cast_weights

    _refuse_unconvertible(args.model, args.to)
    out = check_output(args.output_dir, inputs=(args.model, args.options_file, args.weight_file),
                       overwrite=args.overwrite, directory=True)
    if args.to == "native" and is_bilm_tf_dir(out):
        raise FileExistsError(f"{out} holds bilm-tf files, which contextvec.load reads before a native "
                              "model: remove options.json and weights.hdf5, or write elsewhere")
    if args.dtype != "float32" and args.to != "native":
        raise ValueError("--dtype applies to --to native (bilm-tf files are float32)")
    encoder = model_spec(args).load()
    if args.to == "native":
        contextvec.save(encoder, out)
        if args.dtype == "float16":
            cast_weights(out, torch.float16)
    else:
        out.mkdir(exist_ok=True)
        save_bilm_tf(encoder.bilm, out / "options.json", out / "weights.hdf5")
    print(f"wrote {out}")
