"""ELMo's scalar mix: a learned, softmax-weighted sum of an encoder's layers."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ScalarMix(nn.Module):
    """``gamma * sum_k softmax(w)_k * h_k`` over the layers ``h_k`` of an encoder.

    With ``layer_norm`` each layer is first normalised by the mean and variance of its
    non-padded values over the whole batch (ELMo's and allennlp's definition; padded positions
    are excluded, so padding does not shift the statistics).
    [`l2_penalty`][contextvec.embedder.scalar_mix.ScalarMix.l2_penalty] gives the
    ``lambda * ||w||^2`` regulariser of the paper (lambda 1 pushes towards an equal average,
    0.001 lets the weights vary).

    Args:
        num_layers: the encoder's ``num_layers``: how many layers each call mixes.
        layer_norm: normalise each layer before mixing (needs the mask in ``forward``).
        initial_weights: ``num_layers`` pre-softmax weights ``w``; default all zeros (an equal
            average).
        initial_gamma: the initial scale ``gamma``.
        trainable: whether ``w`` and ``gamma`` learn.

    Attributes:
        weights: the pre-softmax layer weights ``w``, a ``(num_layers,)`` float32 parameter.
        gamma: the scale, a ``(1,)`` float32 parameter.

    Raises:
        ValueError: ``initial_weights`` of another length than ``num_layers``.
    """

    def __init__(
        self,
        num_layers: int,
        layer_norm: bool = False,
        initial_weights: Sequence[float] | None = None,
        initial_gamma: float = 1.0,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        weights = torch.zeros(num_layers) if initial_weights is None else torch.tensor(
            [float(w) for w in initial_weights]
        )
        if weights.shape != (num_layers,):
            raise ValueError(f"{len(weights)} initial weights given for {num_layers} layers")
        self.layer_norm = layer_norm
        self.weights = nn.Parameter(weights, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor([float(initial_gamma)]), requires_grad=trainable)

    def normalized_weights(self) -> torch.Tensor:
        """The softmax-normalised layer weights ``s`` (without gamma): ``(num_layers,)`` float32,
        summing to 1."""
        return torch.softmax(self.weights, dim=0)

    def l2_penalty(self, coefficient: float) -> torch.Tensor:
        """``coefficient * sum(w ** 2)`` on the raw weights, to add to a task loss.

        Args:
            coefficient: the paper's lambda.

        Returns:
            A scalar tensor (shape ``()``) that carries the gradient to ``w``.
        """
        return coefficient * (self.weights**2).sum()

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Mix an encoder's layers into one vector per token.

        Args:
            layers: ``(num_layers, batch, time, dim)`` float, as in
                [`EncoderOutput.layers`][contextvec.encoders.base.EncoderOutput.layers].
            mask: ``(batch, time)`` bool, True at real tokens; required with ``layer_norm``
                (the statistics cover real tokens only).

        Returns:
            ``(batch, time, dim)`` in the dtype of ``layers``; with ``layer_norm``, zero at
            padded positions.

        Raises:
            ValueError: ``layers`` with another number of layers than ``num_layers``, or no
                ``mask`` with ``layer_norm``.
        """
        if layers.shape[0] != self.weights.shape[0]:
            raise ValueError(f"expected {self.weights.shape[0]} layers, got {layers.shape[0]}")
        if self.layer_norm:
            if mask is None:
                raise ValueError("ScalarMix with layer_norm needs the mask of real tokens")
            layers = _masked_layer_norm(layers, mask)
        weights = self.normalized_weights().to(layers.dtype)
        return self.gamma.to(layers.dtype) * torch.tensordot(weights, layers, dims=1)


def _masked_layer_norm(layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(layers.dtype).unsqueeze(-1)  # (batch, time, 1)
    count = (m.sum() * layers.shape[-1]).clamp(min=1)
    mean = (layers * m).sum(dim=(1, 2, 3), keepdim=True) / count
    var = (((layers - mean) * m) ** 2).sum(dim=(1, 2, 3), keepdim=True) / count
    return (layers - mean) / torch.sqrt(var + 1e-12) * m
