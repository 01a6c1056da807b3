"""The module a task model embeds: a frozen encoder and k trainable scalar mixes of its layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from contextvec.embedder.scalar_mix import ScalarMix
from contextvec.encoders.base import Encoder
from contextvec.text.tokenize import Sentence, as_sentences


class EmbedderOutput(NamedTuple):
    """``mixes``: k tensors (batch, time, dim); ``mask``: (batch, time) bool."""

    mixes: list[torch.Tensor]
    mask: torch.Tensor


class ContextualEmbedder(nn.Module):
    """``k`` scalar mixes over a frozen :class:`Encoder`, with dropout on each mix.

    Use one mix per place the task model consumes contextual vectors (ELMo section 3.3: the
    input of the task RNN and, optionally, its output). The encoder's weights get no gradient
    and it stays in eval mode (no dropout inside it) whatever ``train()`` is called with; only
    the mixes learn. Add :meth:`l2_penalty` to the task loss for the paper's lambda.
    """

    def __init__(
        self,
        encoder: Encoder,
        num_mixes: int = 1,
        layer_norm: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.encoder = encoder.requires_grad_(False).eval()
        self.mixes = nn.ModuleList(
            ScalarMix(encoder.num_layers, layer_norm=layer_norm) for _ in range(num_mixes)
        )
        self.dropout = nn.Dropout(dropout)
        self.output_dim = encoder.output_dim

    def train(self, mode: bool = True) -> ContextualEmbedder:
        super().train(mode)
        self.encoder.eval()
        return self

    def forward(self, sentences: Sequence[Sentence]) -> EmbedderOutput:
        """Sentences are strings (split on whitespace) or token lists; a bare string is a
        ``TypeError``, as in :meth:`Encoder.embed` (pass ``[text]`` for one sentence)."""
        tokens = as_sentences(sentences)
        with torch.no_grad():
            layers, mask = self.encoder(tokens)
        return EmbedderOutput([self.dropout(mix(layers, mask)) for mix in self.mixes], mask)

    def l2_penalty(self, coefficient: float) -> torch.Tensor:
        """Sum of every mix's ``coefficient * ||w||^2``."""
        return sum((m.l2_penalty(coefficient) for m in self.mixes), torch.zeros(()))
