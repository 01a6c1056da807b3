"""``contextvec.embed_file``: one call from a text file to numpy arrays."""

from __future__ import annotations

import os

import numpy as np

from contextvec.api import load
from contextvec.encoders.base import Encoder
from contextvec.io.text_lines import check_scan, read_lines, scan_lines


def embed_file(
    path: str | os.PathLike,
    model: Encoder | str | os.PathLike | None = None,
    *,
    layers: str = "all",
    pool: str | None = None,
    batch_size: int = 64,
    max_tokens: int | None = 4096,
    empty_lines: str = "error",
    invalid_utf8: str = "error",
) -> list[np.ndarray]:
    """Vectors for every line of a text file (plain or ``.gz``, one whitespace-tokenized sentence
    per line), in line order: what ``model.embed`` gives for those sentences.

    ``model`` is an encoder, or what :func:`contextvec.load` takes (None: the bundled model).
    Lines are checked first, with the policies of ``contextvec embed`` (empty lines and invalid
    UTF-8 are errors naming the lines unless ``"keep"``/``"replace"``); a byte-order mark is
    dropped. For files too large for memory use ``contextvec embed`` (HDF5, resumable).
    """
    check_scan(scan_lines(path), empty_lines, invalid_utf8)
    encoder = model if isinstance(model, Encoder) else load(model)
    sentences = [text for _, text in read_lines(path)]
    return encoder.embed(sentences, batch_size, max_tokens, layers=layers, pool=pool)
