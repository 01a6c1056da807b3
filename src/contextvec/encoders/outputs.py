"""What a user asks of an encoder's layers: a selection of layers and an optional pooling.

[`Layers`][contextvec.encoders.outputs.Layers] and
[`Pooling`][contextvec.encoders.outputs.Pooling] are the one vocabulary for these choices:
``Encoder.embed``, ``contextvec.Engine``, ``contextvec embed`` (``--all``/``--top``/``--average``,
``--pool``) and the HTTP API (``"layers"``, ``"pool"``) all take their values, and a plain
string of the same spelling is accepted wherever one of them is. The functions work on one
sentence's numpy array ``(num_layers, tokens, dim)`` as ``Encoder.embed`` returns it, so the
CLI, the Python API and the server give the same numbers.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from contextvec.choices import checked_choice, spellings


class Layers(StrEnum):
    """Which layers of a sentence's ``(num_layers, tokens, dim)`` array a caller gets."""

    ALL = "all"
    """Every layer: ``(num_layers, tokens, dim)``."""
    TOP = "top"
    """The last layer: ``(tokens, dim)``."""
    AVERAGE = "average"
    """The mean of the layers (in float32): ``(tokens, dim)``."""


class Pooling(StrEnum):
    """One vector per sentence from its token vectors (over the token axis)."""

    MEAN = "mean"
    MAX = "max"
    FIRST = "first"
    """The first token's vector."""


LAYER_MODES = spellings(Layers)
"""The spellings of :class:`Layers`: ``all``, ``top``, ``average``."""

POOL_MODES = spellings(Pooling)
"""The spellings of :class:`Pooling`: ``mean``, ``max``, ``first``."""


def as_layers(value: Layers | str) -> Layers:
    """``value`` as a :class:`Layers`; a ``ValueError`` naming the choices for any other."""
    return checked_choice(Layers, value, "layers")


def as_pooling(value: Pooling | str | None) -> Pooling | None:
    """``value`` as a :class:`Pooling` (None stays None: token vectors); a ``ValueError``
    naming the choices for any other."""
    return None if value is None else checked_choice(Pooling, value, "pool", none_too=True)


def select_layers(layers: np.ndarray, mode: Layers | str) -> np.ndarray:
    """``layers`` (num_layers, tokens, dim) -> the array ``contextvec embed --<mode>`` writes."""
    mode = as_layers(mode)
    if mode is Layers.ALL:
        return layers
    if mode is Layers.TOP:
        return np.ascontiguousarray(layers[-1])
    return layers.mean(axis=0, dtype=np.float32)


def pool_tokens(vectors: np.ndarray, mode: Pooling | str) -> np.ndarray:
    """Pool over the token axis (second to last): (..., tokens, dim) -> (..., dim).

    A sentence without tokens pools to zeros (there is nothing to average; documented in the
    bad-input table), never to NaN.
    """
    mode = as_pooling(mode)
    if mode is None:
        raise ValueError(f"pool must be one of {', '.join(POOL_MODES)}, not None")
    if vectors.shape[-2] == 0:
        return np.zeros(vectors.shape[:-2] + vectors.shape[-1:], dtype=np.float32)
    if mode is Pooling.MEAN:
        return vectors.mean(axis=-2, dtype=np.float32)
    if mode is Pooling.MAX:
        return np.ascontiguousarray(vectors.max(axis=-2))
    return np.ascontiguousarray(vectors[..., 0, :])


def view_layers(layers: np.ndarray, mode: Layers | str, pool: Pooling | str | None) -> np.ndarray:
    """:func:`select_layers`, then :func:`pool_tokens` unless ``pool`` is None: one sentence's
    ``(num_layers, tokens, dim)`` -> what ``Encoder.embed(layers=mode, pool=pool)`` returns."""
    out = select_layers(layers, mode)
    return out if pool is None else pool_tokens(out, pool)
