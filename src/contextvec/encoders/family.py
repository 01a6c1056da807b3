"""What a model family tells :mod:`contextvec.encoders.registry`: how to recognise and load
(and perhaps save) one kind of model directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder


@dataclass(frozen=True)
class Family:
    """One kind of model directory.

    ``recognise(path)`` looks at file names and ``config.json`` only, and never raises;
    ``load(path, device)`` gives the encoder in eval mode on ``device``, or a one-line error
    naming what is wrong with the files; ``kind`` names the model in users' words ("a BERT
    model"), for the messages of commands that need another kind; ``save(encoder, directory)``,
    for a family contextvec also writes, saves encoders of class ``saves`` and returns the
    directory. ``format`` names the files in users' words, and ``facts(encoder)`` gives what
    else there is to know of a loaded model (vocabulary sizes, ...), for ``contextvec info``.
    """

    name: str
    recognise: Callable[[Path], bool]
    load: Callable[[Path, torch.device], Encoder]
    kind: str
    saves: type[Encoder] | None = None
    save: Callable[[Encoder, Path], Path] | None = None
    format: str = ""
    facts: Callable[[Encoder], dict[str, str]] | None = None
