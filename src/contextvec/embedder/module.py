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
    """What [`ContextualEmbedder.forward`][contextvec.embedder.module.ContextualEmbedder.forward]
    returns."""

    mixes: list[torch.Tensor]
    """``num_mixes`` tensors ``(batch, time, dim)`` float32, one per scalar mix."""
    mask: torch.Tensor
    """``(batch, time)`` bool, True at real tokens."""


class ContextualEmbedder(nn.Module):
    """``num_mixes`` scalar mixes over a frozen [`Encoder`][contextvec.encoders.base.Encoder],
    with dropout on each mix.

    Use one mix per place the task model consumes contextual vectors (ELMo section 3.3: the
    input of the task RNN and, optionally, its output). The encoder's weights get no gradient
    and it stays in eval mode (no dropout inside it) whatever ``train()`` is called with; only
    the mixes learn. Add [`l2_penalty`][contextvec.embedder.module.ContextualEmbedder.l2_penalty]
    to the task loss for the paper's lambda.

    Args:
        encoder: any encoder (its weights are frozen in place: ``requires_grad_(False)``).
        num_mixes: how many independent scalar mixes.
        layer_norm: each mix normalises the layers first (see
            [`ScalarMix`][contextvec.embedder.scalar_mix.ScalarMix]).
        dropout: dropout probability on each mix's output.

    Attributes:
        encoder: the frozen encoder.
        mixes: the ``num_mixes`` [`ScalarMix`][contextvec.embedder.scalar_mix.ScalarMix]
            modules.
        output_dim: the width ``dim`` of each mix's vectors (the encoder's).
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
        """Set the mixes' and dropout's mode; the encoder stays in eval mode.

        Args:
            mode: True for training, False for evaluation.

        Returns:
            This module.
        """
        super().train(mode)
        self.encoder.eval()
        return self

    def forward(self, sentences: Sequence[Sentence]) -> EmbedderOutput:
        """The mixed vectors of one batch; gradients reach the mixes only.

        Args:
            sentences: ``batch`` sentences, strings (split on whitespace) or token lists; a
                bare string is a ``TypeError``, as in `Encoder.embed` (pass ``[text]``).

        Returns:
            The ``mixes``, ``num_mixes`` tensors ``(batch, time, dim)`` float32 (``time`` the
            longest sentence's tokens), and the ``mask``, ``(batch, time)`` bool.
        """
        tokens = as_sentences(sentences)
        with torch.no_grad():
            layers, mask = self.encoder(tokens)
        return EmbedderOutput([self.dropout(mix(layers, mask)) for mix in self.mixes], mask)

    def l2_penalty(self, coefficient: float) -> torch.Tensor:
        """Sum of every mix's ``coefficient * ||w||^2``, to add to a task loss.

        Args:
            coefficient: the paper's lambda.

        Returns:
            A scalar tensor (shape ``()``).
        """
        return sum((m.l2_penalty(coefficient) for m in self.mixes), torch.zeros(()))
