"""Fixed combinations of BERT's layers, as in the BERT paper's feature-based NER study.

``layers`` is what :meth:`~contextvec.encoders.base.Encoder.embed` returns for a sentence
(``(num_layers, words, dim)`` numpy array) or any array/tensor with layers on axis 0:

- ``"last"``: the last layer, ``(words, dim)``;
- ``"sum_last_4"``: the sum of the last four layers, ``(words, dim)``;
- ``"concat_last_4"``: the last four layers side by side, in layer order (fourth-to-last
  first, last layer at the end), ``(words, 4 * dim)``.

For a learned weighting of all layers use :class:`~contextvec.embedder.ScalarMix` instead.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

import numpy as np
import torch

from contextvec.choices import checked_choice


class LayerCombination(StrEnum):
    """A fixed combination of an encoder's layers (:func:`combine_layers`)."""

    LAST = "last"
    SUM_LAST_4 = "sum_last_4"
    CONCAT_LAST_4 = "concat_last_4"

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def combine_layers(layers: Array, how: LayerCombination | str = LayerCombination.LAST) -> Array:
    """One :class:`LayerCombination` (or its spelling) applied to ``layers`` (layers on axis 0)."""
    how = checked_choice(LayerCombination, how, "how")
    if how is LayerCombination.LAST:
        return layers[-1]
    if layers.shape[0] < 4:
        raise ValueError(f"{how} needs at least 4 layers, got {layers.shape[0]}")
    last4 = layers[-4:]
    if how is LayerCombination.SUM_LAST_4:
        return last4.sum(0)
    if isinstance(layers, torch.Tensor):
        return torch.cat(list(last4), dim=-1)
    return np.concatenate(list(last4), axis=-1)
