"""What every kernel of a bf16 or int8 weight matrix offers (:class:`WeightKernel`)."""

from __future__ import annotations

from typing import Protocol

import torch


class StepProduct(Protocol):
    """``product(x, add=None)``: ``x (..., in) @ W.T + add`` in float32, for float32 ``x`` with at
    least one row and ``add (..., out)`` or None: what an LSTM step calls, with everything that
    does not change between calls settled once."""

    def __call__(self, x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor: ...


class WeightKernel(Protocol):
    """One kernel's products with one weight matrix ``W (out, in)`` stored in bf16 or int8."""

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, gelu: str | None,
                 float_output: bool, add: torch.Tensor | None) -> torch.Tensor:
        """``x (..., in) @ W.T`` plus ``bias (out,)``, plus ``add (..., out)``, then GELU of the
        form ``gelu`` names; ``x`` has at least one row and ``add`` and ``gelu`` do not come
        together. Float32 out, unless ``float_output`` is False and the kernel's result is bf16."""
        ...

    def step(self) -> StepProduct:
        """The product of an LSTM step (see :class:`StepProduct`)."""
        ...
