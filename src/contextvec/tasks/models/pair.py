"""The sentence-pair model of the frozen-feature path (GLUE's baseline, Wang et al. 2018).

Both sentences of a pair go through the same layers:

1. the token representation ``[x; ELMo_task]`` of each sentence, as in the other task models
   (:class:`~contextvec.tasks.models.bilstm.TaskModelBase`: word embeddings, optional char CNN
   and n-grams, the contextual mixes; ``input+output`` adds the second mix beside the biLSTM's
   output);
2. one shared biLSTM over each sentence: ``H_a``, ``H_b``;
3. attention between the sentences (ESIM-style, Chen et al. 2017): every token of ``a`` attends
   over the encodings of ``b`` with dot-product scores and a softmax over ``b``'s real tokens,
   ``C_a = softmax(H_a H_b^T) H_b``, and the other way round; each token becomes ``[h; c]``;
4. max pooling over each sentence's tokens: ``u``, ``v``;
5. ``[u; v; |u - v|; u * v]`` -> an MLP (one ReLU hidden layer) -> class scores (cross-entropy)
   or, for a regression task (no labels: STS-B), one score (mean squared error).

The layers are shared and the attention runs both ways, so swapping the two sentences swaps
``u`` and ``v`` and nothing else. Batches are :class:`PairBatch`: one
:class:`~contextvec.tasks.models.vocab.Batch` per side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contextvec.tasks.models.bilstm import BiLSTMModel
from contextvec.tasks.models.vocab import Batch, Encoded, Indexer


@dataclass
class PairBatch:
    """A batch of sentence pairs: ``first`` and ``second`` hold the two sides (each with its own
    padding, mask and precomputed layers); ``targets``: ``(batch,)`` class ids (long) or scores
    (float), or None."""

    first: Batch
    second: Batch
    targets: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> PairBatch:
        return PairBatch(self.first.to(device), self.second.to(device),
                         None if self.targets is None else self.targets.to(device))


def pair_batch(
    indexer: Indexer,
    first: Sequence[Sequence[str]],
    second: Sequence[Sequence[str]],
    labels: Sequence[str] | Sequence[float] | None = None,
    layers: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
    encoded: tuple[Sequence[Encoded], Sequence[Encoded]] | None = None,
) -> PairBatch:
    """Sentence pairs -> :class:`PairBatch`. ``labels``: class strings (ids from ``indexer``), float
    scores (an indexer without labels: regression), or None; ``layers``: the ``(num_layers,
    n_tokens, dim)`` arrays of the first and of the second sentences; ``encoded``: each side's
    :meth:`Indexer.encode` if already computed."""
    sides = [indexer.batch(sentences, None, None if layers is None else layers[side],
                           None if encoded is None else encoded[side])
             for side, sentences in enumerate((first, second))]
    targets = None
    if labels is not None and indexer.labels:
        targets = torch.tensor([indexer.label_id(str(label)) for label in labels], dtype=torch.long)
    elif labels is not None:
        targets = torch.tensor([float(label) for label in labels], dtype=torch.float32)
    return PairBatch(sides[0], sides[1], targets)


def _attend(h: torch.Tensor, mask: torch.Tensor, other: torch.Tensor,
            other_mask: torch.Tensor) -> torch.Tensor:
    """Each token of ``h`` ``(batch, t, d)`` attends over ``other`` ``(batch, s, d)`` (its padding
    masked by ``other_mask`` ``(batch, s)``); returns ``(batch, t, 2 * d)``: ``[h; attended]``,
    zeros at ``h``'s padding (``mask`` ``(batch, t)``)."""
    scores = torch.bmm(h, other.transpose(1, 2)).masked_fill(~other_mask.unsqueeze(1), float("-inf"))
    attended = torch.bmm(torch.softmax(scores, dim=-1), other)
    return torch.cat([h, attended], dim=-1) * mask.unsqueeze(-1)


def _max_pool(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(batch, t, d)`` -> ``(batch, d)``: the max over each sequence's real tokens."""
    return h.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(dim=1).values


class PairModel(BiLSTMModel):
    """Shared biLSTM, attention between the sentences, ``[u; v; |u-v|; u*v]``, MLP (see the module
    docstring). ``labels`` empty: a regression model with one output. :meth:`encode` is one
    side's tokens -> ``(batch, time, output_dim)``: the biLSTM's states (+ the output mix)."""

    def _add_head(self) -> None:
        settings = self.settings
        self.regression = not self.labels
        pooled = 2 * self.output_dim  # [h; attended]
        self.mlp = nn.Sequential(
            nn.Linear(4 * pooled, settings.mlp_hidden), nn.ReLU(), nn.Dropout(settings.dropout),
            nn.Linear(settings.mlp_hidden, 1 if self.regression else len(self.labels)),
        )

    def pooled(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u, v)``, each ``(batch, 2 * output_dim)``: the first and the second sentence after
        the attention between them and max pooling."""
        a, b = self.encode(batch.first), self.encode(batch.second)
        mask_a, mask_b = batch.first.mask, batch.second.mask
        return (_max_pool(_attend(a, mask_a, b, mask_b), mask_a),
                _max_pool(_attend(b, mask_b, a, mask_a), mask_b))

    def outputs(self, batch: PairBatch) -> torch.Tensor:
        """``(batch, classes)`` class scores, or ``(batch,)`` predicted scores (regression)."""
        u, v = self.pooled(batch)
        out = self.mlp(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))
        return out.squeeze(-1) if self.regression else out

    def loss(self, batch: PairBatch) -> torch.Tensor:
        """Mean cross-entropy per pair, or mean squared error of the scores (regression)."""
        assert batch.targets is not None
        out = self.outputs(batch)
        return F.mse_loss(out, batch.targets) if self.regression else F.cross_entropy(out, batch.targets)

    def predict(self, batch: PairBatch) -> list[str] | list[float]:
        """The class of each pair, or its score (regression: Python floats)."""
        out = self.outputs(batch)
        if self.regression:
            return [float(score) for score in out.tolist()]
        return [self.labels[i] for i in out.argmax(-1).tolist()]
