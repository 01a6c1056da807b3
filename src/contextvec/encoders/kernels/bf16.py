"""bf16 weight matrices: matmuls in bf16 with float32 accumulation, on oneDNN or ``torch.mm``."""

from __future__ import annotations

import torch

from contextvec.encoders import torch_private
from contextvec.encoders.kernels.packed_float import on_padded_rows
from contextvec.encoders.kernels.protocol import StepProduct


class Bf16OneDNN:
    """oneDNN's packed layout of the bf16 weight (where oneDNN runs bf16): faster than ``mm`` for
    a few rows, the same products. The float32 bias (and ``add``) join the float32 sums and the
    GELU is applied to them inside the matmul; the result is rounded to bf16 once. Many rows run
    on :meth:`PackedFloatWeights.padded_rows` rows."""

    def __init__(self, weight: torch.Tensor) -> None:
        # Kept out of the module's state: an opaque tensor that cannot be hashed or saved.
        self._packed = torch_private.reorder_linear_weight(weight)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, gelu: str | None,
                 float_output: bool, add: torch.Tensor | None) -> torch.Tensor:
        x16, packed = x.to(torch.bfloat16), self._packed
        if add is not None:
            # An LSTM's gates: the state's product and the input projections summed in the
            # product's float32 accumulation, one rounding and one pass for both.
            # (oneDNN takes no float32 bias beside a bf16 addend: the bias joins it.)
            other = (add if bias is None else add.float() + bias).to(torch.bfloat16)
            out = on_padded_rows(lambda a, b: torch_private.linear_add(a, b, packed, None), x16, other)
        else:
            out = on_padded_rows(lambda a: torch_private.linear_pointwise(a, packed, bias, gelu), x16)
        return out.float() if float_output else out

    def step(self) -> StepProduct:
        return lambda x, add=None: self(x, None, None, True, add)


class Bf16Matmul:
    """``torch.mm`` of bf16 operands (emulated where the CPU has no bf16: bf16 accuracy measured
    on any CPU, ``check_cpu=False``): the product rounded to bf16 first, the bias added in float32
    after."""

    def __init__(self, weight: torch.Tensor) -> None:
        self._weight = weight

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, gelu: str | None,
                 float_output: bool, add: torch.Tensor | None) -> torch.Tensor:
        weight = self._weight
        out = torch.mm(x.to(torch.bfloat16).reshape(-1, weight.shape[1]), weight.T).float()
        out = (out if bias is None else out.add_(bias)).view(*x.shape[:-1], weight.shape[0])
        out = out if add is None else out.add_(add)
        return out if gelu is None else torch.ops.aten.gelu_(out, approximate=gelu)

    def step(self) -> StepProduct:
        return lambda x, add=None: self(x, None, None, True, add)
