"""``contextvec.embed_file``: one call from a text file to numpy arrays."""

from __future__ import annotations

import os

import numpy as np

from contextvec.api import load
from contextvec.encoders.base import Encoder
from contextvec.encoders.outputs import Layers, Pooling
from contextvec.io.text_lines import EmptyLines, InvalidUtf8, check_scan, read_lines, scan_lines
from contextvec.io.vector_storage import VectorDtype, VectorStorage


def embed_file(
    path: str | os.PathLike,
    model: Encoder | str | os.PathLike | None = None,
    *,
    layers: Layers | str = Layers.ALL,
    pool: Pooling | str | None = None,
    batch_size: int = 64,
    max_tokens: int | None = 4096,
    empty_lines: EmptyLines | str = EmptyLines.ERROR,
    invalid_utf8: InvalidUtf8 | str = InvalidUtf8.ERROR,
    dtype: VectorDtype | str = VectorDtype.FLOAT32,
) -> list[np.ndarray]:
    """Vectors for every line of a text file, in line order: what ``model.embed`` gives for them.

    The file is plain or ``.gz`` text, one whitespace-tokenized sentence per line; a byte-order
    mark is dropped. Lines are checked first, with the policies of ``contextvec embed``. The
    whole result is held in memory: for larger files use ``contextvec embed`` (HDF5, resumable).

    Args:
        path: the text file.
        model: an encoder, or what [`contextvec.load`][contextvec.api.load] takes (None: the
            bundled model).
        layers: ``"all"``, ``"top"`` or ``"average"``, as in
            [`Encoder.embed`][contextvec.encoders.base.Encoder.embed].
        pool: None (one vector per token), ``"mean"``, ``"max"`` or ``"first"`` (one per line).
        batch_size: sentences per forward pass.
        max_tokens: padded tokens per forward pass (None: no limit).
        empty_lines: ``"error"`` (refuse the file, naming the lines) or ``"keep"`` (an empty
            line gives an array with 0 tokens).
        invalid_utf8: ``"error"`` (refuse the file, naming the lines) or ``"replace"`` (U+FFFD).
        dtype: ``"float32"``, ``"float16"`` or ``"bfloat16"``: the values ``contextvec embed
            --dtype`` stores and [`read_vectors`][contextvec.io.hdf5_vectors.read_vectors] reads
            back (float16 arrays; bfloat16 as float32 arrays holding the rounded values).

    Returns:
        One array per line (float32, or float16 with ``dtype="float16"``),
        ``(num_layers, tokens, dim)`` with ``layers="all"``, ``(tokens, dim)`` with
        ``"top"``/``"average"``; with ``pool``, the tokens axis is pooled away
        (``(num_layers, dim)`` or ``(dim,)``).

    Raises:
        ValueError: an empty line or invalid UTF-8 under the ``"error"`` policy, or an unknown
            ``layers``, ``pool``, policy or dtype.
        FileNotFoundError: no file at ``path``.
    """
    storage = VectorStorage(dtype)
    check_scan(scan_lines(path), empty_lines, invalid_utf8)
    encoder = model if isinstance(model, Encoder) else load(model)
    sentences = [text for _, text in read_lines(path)]
    arrays = encoder.embed(sentences, batch_size, max_tokens, layers=layers, pool=pool)
    return arrays if storage.dtype is VectorDtype.FLOAT32 else [storage.values(a) for a in arrays]
