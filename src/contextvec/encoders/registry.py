"""The model families ``contextvec.load`` knows, in the order it tries them.

Each family's loader module says how to recognise and load its directories
(:class:`~contextvec.encoders.family.Family`); adding a family is one entry in
:data:`FAMILIES`.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder, SentenceVectors
from contextvec.encoders.bert.encoder import BertEncoder
from contextvec.encoders.bert.loader import HF_BERT
from contextvec.encoders.bert.sentence import BertSentenceEncoder
from contextvec.encoders.bilm.loader import BILM_TF, NATIVE_ELMO
from contextvec.encoders.bilm.tf_loader import TF_ELMO
from contextvec.encoders.cove.loader import COVE
from contextvec.encoders.family import Family, Form, Writer
from contextvec.encoders.manylangs.loader import MANYLANGS, MANYLANGS_NATIVE
from contextvec.io.native import NativeFormatError, is_native_dir, read_meta
from contextvec.io.sentence_transformers import SentencePooling

# bilm-tf files win over a native model in the same directory, as they always have.
FAMILIES: tuple[Family, ...] = (BILM_TF, TF_ELMO, HF_BERT, COVE, NATIVE_ELMO, MANYLANGS, MANYLANGS_NATIVE)
EXPECTED = ("options.json + weights.hdf5, a bilm-tf checkpoint (options.json + checkpoint + model.ckpt-N.*), "
            "a TF-Hub ELMo module, config.json + model.safetensors, an HF BERT directory, or an "
            "ELMoForManyLangs directory (config.json + token_embedder.pkl + encoder.pkl)")
"""What the families' directories hold, for the error on a directory none of them recognises."""
CONVERSIONS = ("ELMo (bilm-tf files or checkpoint, TF-Hub module, or native) converts to native or "
               "bilm-tf, CoVe and ELMoForManyLangs to native; HF BERT directories load as they are, with "
               "nothing to convert")
"""What converts to which form (the families' ``converts_to``), in words."""
# What ``train-task --save-model`` writes into a saved task model (contextvec.tasks.saved, a room
# above this one): such a directory is no encoder, and is often given where an encoder is wanted.
SAVED_TASK_FILE = "task.json"


def family_of(path: Path) -> Family | None:
    """The first family that recognises ``path``, or None.

    A contextvec directory of a model_type no family knows, or with an unreadable
    ``config.json``, is a :class:`~contextvec.io.native.NativeFormatError`, not a missing model.
    """
    for family in FAMILIES:
        if family.recognise(path):
            return family
    if is_native_dir(path):
        model_type, _ = read_meta(path)
        raise NativeFormatError(f"{path}: unknown model_type {model_type!r}")
    return None


def not_a_model(path: Path) -> str:
    """The one-line error for a directory no family recognises; a saved task model gets what to
    run instead."""
    if (path / SAVED_TASK_FILE).is_file():
        return (f"{path} is a task model saved by train-task --save-model, not an encoder: run it with "
                f"`contextvec predict {path} INPUT` (Python: contextvec.tasks.load_task_model); its "
                f"{SAVED_TASK_FILE} names the encoder it was trained on")
    return f"{path}: not a model directory (expected {EXPECTED})"


def refuse_other_kinds(path: Path, wanted: tuple[Family, ...], needs: str, name: str | None = None) -> None:
    """A ``ValueError`` in one line where ``path`` is a model of a family outside ``wanted``:
    "this command needs {needs}; {name or path} is a BERT model"."""
    for family in FAMILIES:
        if family not in wanted and family.recognise(path):
            raise ValueError(f"this command needs {needs}; {name or path} is {family.kind}")


def refuse_conversion(path: Path, form: Form, name: str) -> None:
    """A one-line ``ValueError`` where the model at ``path`` (named ``name``) is of a family
    without a ``form`` form: why, where its family says, else its kind and what converts."""
    family = family_of(path) if path.is_dir() else None  # not a model: loading it says so
    if family is None or form in family.converts_to:
        return
    if family.no_form is not None:
        raise ValueError(f"{name}: {family.no_form(path, form)}")
    raise ValueError(f"{name} is {family.kind}, which has no {form} form: {CONVERSIONS}")


def refuse_shadowed(directory: Path, form: Form) -> None:
    """A one-line ``FileExistsError`` where a model written to ``directory`` in ``form`` would not
    be the one ``contextvec.load`` reads there: a native model beside bilm-tf files, which
    :data:`FAMILIES` tries first."""
    if form == Form.NATIVE and BILM_TF.recognise(directory):
        raise FileExistsError(f"{directory} holds bilm-tf files, which contextvec.load reads before a native "
                              "model: remove options.json and weights.hdf5, or write elsewhere")


def load_files(
    options_file: str | os.PathLike, weight_file: str | os.PathLike, device: torch.device
) -> Encoder:
    """The encoder (eval mode, on ``device``) of a model given as two loose files rather than a
    directory: the one family that takes them (``Family.load_files``) loads them."""
    (load,) = (family.load_files for family in FAMILIES if family.load_files is not None)
    return load(options_file, weight_file, device)


def family_saving(encoder: Encoder) -> Family | None:
    """The family that writes encoders of ``encoder``'s class, or None."""
    for family in FAMILIES:
        if family.saves is not None and isinstance(encoder, family.saves):
            return family
    return None


def writer(encoder: Encoder, form: Form) -> Writer | None:
    """What writes ``encoder`` in ``form``: its class's family's writer of that form, or None."""
    family = family_saving(encoder)
    return None if family is None else family.writes.get(form)


def sentence_vectors(encoder: Encoder, pooling: SentencePooling | None = None) -> SentenceVectors | None:
    """``encoder``'s own sentence vectors, pooled as ``pooling`` (a sentence-transformers
    checkpoint's declared pooling; None: the mean of the pieces) says: a BERT's; None for a
    model without them (ELMo, CoVe: a sentence vector then pools the word vectors)."""
    return BertSentenceEncoder(encoder, pooling) if isinstance(encoder, BertEncoder) else None
