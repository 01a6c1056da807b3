"""What a user asks of an encoder's layers: a selection of layers and an optional pooling.

These work on one sentence's numpy array ``(num_layers, tokens, dim)`` as ``Encoder.embed``
returns it, so the CLI, the Python API and the server give the same numbers.
"""

from __future__ import annotations

import numpy as np

LAYER_MODES = ("all", "top", "average")
"""``all``: (layers, tokens, dim); ``top``: the last layer (tokens, dim); ``average``: the mean."""

POOL_MODES = ("mean", "max", "first")
"""One vector per sentence from its token vectors (over the token axis)."""


def select_layers(layers: np.ndarray, mode: str) -> np.ndarray:
    """``layers`` (num_layers, tokens, dim) -> the array ``contextvec embed --<mode>`` writes."""
    if mode == "all":
        return layers
    if mode == "top":
        return np.ascontiguousarray(layers[-1])
    if mode == "average":
        return layers.mean(axis=0, dtype=np.float32)
    raise ValueError(f"layers must be one of {', '.join(LAYER_MODES)}, not {mode!r}")


def pool_tokens(vectors: np.ndarray, mode: str) -> np.ndarray:
    """Pool over the token axis (second to last): (..., tokens, dim) -> (..., dim).

    A sentence without tokens pools to zeros (there is nothing to average; documented in the
    bad-input table), never to NaN.
    """
    if mode not in POOL_MODES:
        raise ValueError(f"pool must be one of {', '.join(POOL_MODES)}, not {mode!r}")
    if vectors.shape[-2] == 0:
        return np.zeros(vectors.shape[:-2] + vectors.shape[-1:], dtype=np.float32)
    if mode == "mean":
        return vectors.mean(axis=-2, dtype=np.float32)
    if mode == "max":
        return np.ascontiguousarray(vectors.max(axis=-2))
    return np.ascontiguousarray(vectors[..., 0, :])
