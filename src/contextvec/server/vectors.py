"""A request's layer selection and pooling applied to one sentence's layers, and its encoding.

"all"/"top"/"average" and pooling are :mod:`contextvec.encoders.outputs`' ``Layers`` and
``Pooling``, applied by the same functions as ``Encoder.embed`` and ``contextvec embed``, so the
numbers are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pybase64

from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling, pool_tokens, select_layers


class FieldError(ValueError):
    """Bad input that pydantic cannot see (it depends on the model): a 422 naming ``field``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class LayerView:
    """What to return of the layers: a mode, layer indices or a fixed scalar mix, then a pool."""

    mode: Layers | None = Layers.ALL
    indices: tuple[int, ...] | None = None
    mix: np.ndarray | None = None          # gamma * softmax(weights), float32 (num_layers,)
    pool: Pooling | None = None

    def apply(self, layers: np.ndarray) -> np.ndarray:
        """``layers`` (num_layers, tokens, dim) -> the requested float32 array."""
        if self.indices is not None:
            out = np.ascontiguousarray(layers[list(self.indices)])
        elif self.mix is not None:
            out = np.tensordot(self.mix, layers, axes=1).astype(np.float32, copy=False)
        else:
            out = select_layers(layers, self.mode)
        return out if self.pool is None else pool_tokens(out, self.pool)


def scalar_mix_weights(weights: list[float], gamma: float) -> np.ndarray:
    """``gamma * softmax(weights)`` as :class:`contextvec.ScalarMix` computes it (float32)."""
    w = np.asarray(weights, dtype=np.float32)
    e = np.exp(w - w.max())
    return (np.float32(gamma) * (e / e.sum())).astype(np.float32)


def layer_view(layers: object, pool: Pooling | str | None, num_layers: int,
               field: str = "layers") -> LayerView:
    """Check a request's ``layers`` against the model and build its view.

    ``layers`` is a mode string, a list of indices (negative ones count from the top) or an
    object with ``weights`` (one per layer) and ``gamma``.
    """
    pool = as_pooling(pool)
    if isinstance(layers, str):
        return LayerView(mode=as_layers(layers), pool=pool)
    if isinstance(layers, list):
        bad = [i for i in layers if not -num_layers <= i < num_layers]
        if bad:
            raise FieldError(field, f"layer index {bad[0]} out of range: the model has {num_layers} "
                                    f"layers (0..{num_layers - 1}, or -{num_layers}..-1)")
        return LayerView(mode=None, indices=tuple(i % num_layers for i in layers), pool=pool)
    weights, gamma = layers.weights, layers.gamma
    if len(weights) != num_layers:
        raise FieldError(f"{field}.weights", f"expected {num_layers} weights (one per layer), "
                                             f"got {len(weights)}")
    return LayerView(mode=None, mix=scalar_mix_weights(weights, gamma), pool=pool)


def encode(array: np.ndarray, encoding: str) -> list | orjson.Fragment:
    """Nested lists of floats, or base64 of the little-endian float32 bytes in C order.

    pybase64 (SIMD) encodes many times faster than the standard library, a visible share of a
    lone request's time, and the text goes into the response as a ready JSON string (an
    ``orjson.Fragment``): no ``str`` is made of it and orjson does not scan it (base64 has nothing
    to escape).
    """
    if encoding == "base64":
        data = pybase64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes())
        return orjson.Fragment(b'"' + data + b'"')
    return array.tolist()


def unit_length(vector: np.ndarray) -> np.ndarray | None:
    """``vector`` scaled to length 1; None for one without a finite, non-zero length."""
    norm = float(np.linalg.norm(vector))
    if not (norm > 0 and np.isfinite(norm)):
        return None
    return vector / np.float32(norm)


def has_lone_surrogate(text: str) -> bool:
    """True for text that is not valid Unicode (a lone UTF-16 surrogate from a JSON escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
