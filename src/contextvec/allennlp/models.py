"""allennlp's ``options_file``/``weight_file`` arguments -> a contextvec ELMo encoder.

allennlp downloaded its default models from URLs; contextvec never downloads. The two arguments
take bilm-tf files (as in allennlp), or ``options_file`` alone names a contextvec model (a
bundled model's name or a model directory); both ``None`` give the bundled default model.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

import contextvec
from contextvec.api import DEFAULT_MODEL, resolve_model
from contextvec.encoders.bilm import ElmoEncoder
from contextvec.encoders.bilm.loader import BILM_TF, NATIVE_ELMO
from contextvec.encoders.registry import family_of

PathLike = str | os.PathLike
_URL_PREFIXES = ("http://", "https://", "s3://", "gs://")


def _refuse_url(name: str, value: PathLike | None) -> None:
    if isinstance(value, str) and value.startswith(_URL_PREFIXES):
        raise ValueError(
            f"{name}={value!r} is a download URL; contextvec never downloads: fetch the file once "
            f"and pass its path, or pass a contextvec model name or directory (options_file=None "
            f"gives the bundled {DEFAULT_MODEL})"
        )


def load_elmo_encoder(
    options_file: PathLike | None = None,
    weight_file: PathLike | None = None,
    device: str | torch.device = "cpu",
) -> ElmoEncoder:
    """The ELMo encoder that allennlp's ``(options_file, weight_file)`` pair denotes.

    * both given: bilm-tf ``options.json`` and ``weights.hdf5`` (allennlp's use);
    * ``options_file`` alone: a contextvec model name or directory (bilm-tf files or native);
    * neither: the bundled default model.

    Args:
        options_file: see above; a URL is refused (contextvec never downloads).
        weight_file: see above.
        device: where to load the model.

    Returns:
        An ELMo encoder in eval mode (an [`Encoder`][contextvec.encoders.base.Encoder]).

    Raises:
        ValueError: a URL, ``weight_file`` without ``options_file``, or a directory given with
            ``weight_file``.
        ModelNotFoundError: files or a name that is no model (a ``FileNotFoundError``).
        TypeError: a model that is not an ELMo biLM.
    """
    _refuse_url("options_file", options_file)
    _refuse_url("weight_file", weight_file)
    if weight_file is not None and options_file is None:
        raise ValueError("weight_file given without options_file (the bilm-tf options.json)")
    if weight_file is not None:
        if Path(options_file).is_dir():
            raise ValueError(
                f"options_file={str(options_file)!r} is a model directory: pass it with weight_file=None"
            )
        encoder = contextvec.load(options_file=options_file, weight_file=weight_file, device=device)
    else:
        _refuse_other_kinds(options_file)
        encoder = contextvec.load(options_file, device=device)
    if not isinstance(encoder, ElmoEncoder):  # what _refuse_other_kinds did not recognise
        raise TypeError(f"{str(options_file)!r} is not an ELMo biLM; {_WANTED}")
    return encoder


_WANTED = (f"give {DEFAULT_MODEL}, a contextvec ELMo directory, or bilm-tf files (options.json with "
           "weights.hdf5)")


def _refuse_other_kinds(model: PathLike | None) -> None:
    """A BERT or CoVe model (directory or bundled name) in one line, before it is loaded."""
    if model is None:
        return
    path = resolve_model(model)
    family = family_of(path) if path.is_dir() else None
    if family is not None and family not in (BILM_TF, NATIVE_ELMO):
        raise TypeError(f"{str(model)!r} is {family.kind}, not an ELMo biLM; {_WANTED}")
