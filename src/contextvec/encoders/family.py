"""What a model family tells :mod:`contextvec.encoders.registry`: how to recognise and load
(and perhaps write) one kind of model directory."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder


class Form(StrEnum):
    """The files :func:`contextvec.api.convert` writes a model as (``contextvec convert --to``)."""

    NATIVE = "native"
    """contextvec's own: ``config.json`` + ``model.safetensors`` (+ the family's vocabulary)."""
    BILM_TF = "bilm-tf"
    """bilm-tf/allennlp's ``options.json`` + ``weights.hdf5`` (ELMo)."""


FORMS = tuple(form.value for form in Form)
"""The spellings of :class:`Form`, as the command line offers them."""

Writer = Callable[[Encoder, Path], Path]
"""Writes an encoder into a directory (created if missing) in one :class:`Form`; returns the
directory."""
FilesLoader = Callable[[str | os.PathLike, str | os.PathLike, torch.device], Encoder]
"""Loads a model given as two loose files, ``(options, weights, device)``: the encoder in eval
mode on ``device``; the paths are kept as given, so that errors name them as the user did."""


@dataclass(frozen=True)
class Family:
    """One kind of model directory.

    ``recognise(path)`` looks at file names and ``config.json`` only, and never raises;
    ``load(path, device)`` gives the encoder in eval mode on ``device``, or a one-line error
    naming what is wrong with the files; ``kind`` names the model in users' words ("a BERT
    model"), for the messages of commands that need another kind. A family whose models
    contextvec also writes names their encoder class (``saves``) and a :data:`Writer` per form
    it writes them in (``writes``; :func:`contextvec.api.save` writes the native one).
    ``load_files``, for the family whose models are also given as two loose files (bilm-tf's
    ``options.json`` and ``weights.hdf5``), loads them
    (``contextvec.load(options_file=, weight_file=)``).
    ``format`` names the files in users' words, and ``facts(encoder)`` gives what else there is
    to know of a loaded model (vocabulary sizes, ...), for ``contextvec info``. ``converts_to``
    holds the forms :func:`contextvec.api.convert` writes the models of this family's
    directories in (checked before anything loads), and ``no_form(path, form)`` says in one line
    why the model at ``path`` has no other ``form``, for a family with more to say than its
    kind. ``low_precision``: its models run in bf16 and int8 as well as fp32
    (``contextvec.load(precision=...)``).
    """

    name: str
    recognise: Callable[[Path], bool]
    load: Callable[[Path, torch.device], Encoder]
    kind: str
    saves: type[Encoder] | None = None
    writes: Mapping[Form, Writer] = field(default_factory=dict)
    load_files: FilesLoader | None = None
    format: str = ""
    facts: Callable[[Encoder], dict[str, str]] | None = None
    converts_to: tuple[Form, ...] = ()
    no_form: Callable[[Path, Form], str] | None = None
    low_precision: bool = False
