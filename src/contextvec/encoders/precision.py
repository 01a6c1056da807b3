"""Lower-precision inference: an encoder's weight matrices stored in bf16 or int8.

Weight-only: every matmul weight (``nn.Linear`` layers and the matrices of a
:class:`PacksWeights` module) is stored in the lower precision; activations, biases, states and
outputs stay float32. Batch 1 is memory-bound, so smaller weights are what speeds it up, and
float32 activations keep the error to the weights' rounding.

``"fp32"`` leaves the model as loaded; ``"bf16"`` multiplies in bf16 with float32 accumulation
(:mod:`~contextvec.encoders.kernels.bf16`; refused by :func:`check_precision` where the CPU only
emulates bf16); ``"int8"`` quantizes activations per call (:mod:`~contextvec.encoders.kernels.int8`).
Which kernel runs each matrix is chosen once, when :func:`apply_precision` prepares the model;
which instructions each precision runs on here, and why: :mod:`contextvec.encoders.cpu`.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import ClassVar, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.choices import checked_choice, spellings
from contextvec.encoders import torch_private
from contextvec.encoders.base import Encoder
from contextvec.encoders.cpu import Int8Library, inference_paths, native_bf16, native_int8
from contextvec.encoders.kernels.bf16 import Bf16Matmul, Bf16OneDNN
from contextvec.encoders.kernels.int8 import Int8Dynamic, Int8RowScaled, quantize
from contextvec.encoders.kernels.packed_float import PackedFloatWeights
from contextvec.encoders.kernels.protocol import StepProduct, WeightKernel
from contextvec.encoders.torch_private import onednn_bf16 as _onednn_bf16


class Precision(StrEnum):
    """The weight precision of inference (``contextvec.load(precision=...)``, ``--precision``)."""

    FP32 = "fp32"
    """Exact: the weights as trained."""
    BF16 = "bf16"
    """bfloat16 matmuls (CPUs with native bf16 only)."""
    INT8 = "int8"
    """int8 weights, dynamically quantised activations."""


PRECISIONS = spellings(Precision)
"""The precisions ``contextvec.load(precision=...)`` accepts (the spellings of :class:`Precision`)."""


def as_precision(value: Precision | str) -> Precision:
    """``value`` as a :class:`Precision`; a ``ValueError`` naming the choices for any other."""
    return checked_choice(Precision, value, "precision")


Pack = Callable[[torch.Tensor], "LowPrecisionWeight"]
"""What ``pack_weights`` receives: float weight (out, in) -> its packed form."""


class Int8Role(StrEnum):
    """How ``precision="int8"`` treats a module's matrices (:class:`PacksWeights`): on oneDNN with
    one activation scale per row (``PLAIN``), left in the int8 path's ``kept_precision``
    (``KEPT``), or on its ``int8_library`` (``RECURRENT``: a recurrence's steps multiply a few
    rows by each matrix, which some CPUs' int8 kernels do slower than fp32)."""

    PLAIN = "plain"
    KEPT = "kept"
    RECURRENT = "recurrent"


@runtime_checkable
class PacksWeights(Protocol):
    """A module that packs matrices of its own (not ``nn.Linear`` layers) for lower precision."""

    int8_role: ClassVar[Int8Role]

    def pack_weights(self, pack: Pack) -> None: ...  # float matrices -> pack(matrix); biases stay


def check_precision(precision: str, device: torch.device | str = "cpu") -> str:
    """``precision`` if it can run on ``device``, else a one-line ``ValueError`` saying why."""
    precision = as_precision(precision)
    device = torch.device(device)
    if precision != "fp32" and device.type == "cpu":
        torch_private.check_supported(f"precision {precision}")
    if precision == "bf16" and device.type == "cpu" and not native_bf16():
        reason = inference_paths(int8_exact=False)["bf16"].reason
        raise ValueError(f"precision bf16: this CPU has {reason}; use fp32 or int8")
    if precision == "int8" and device.type != "cpu":
        raise ValueError(f"precision int8 runs on the CPU only, not on {device}; use bf16 or fp32")
    return precision


class LowPrecisionWeight(nn.Module):
    """A weight matrix ``(out, in)`` in ``precision``: ``x (..., in)`` -> ``x @ W.T (..., out)``
    float32. Its kernel (:class:`WeightKernel`) is chosen once, here: bf16 on oneDNN where it runs
    bf16, else ``torch.mm``; int8 on ``int8_library``, few rows on the CPU's ``few_rows_library``
    (:func:`contextvec.encoders.cpu.inference_paths`). The state holds the rounded weights."""

    def __init__(self, weight: torch.Tensor, precision: str,
                 int8_library: Int8Library = Int8Library.ONEDNN) -> None:
        super().__init__()
        if precision not in ("bf16", "int8"):
            raise ValueError(f"LowPrecisionWeight holds bf16 or int8, not {precision!r}")
        self.precision = precision
        self.int8_library = None if precision == "bf16" else Int8Library(int8_library)
        weight = weight.detach().float()
        self.out_features, self.in_features = weight.shape
        if precision == "bf16":
            self.register_buffer("weight", weight.to(torch.bfloat16).contiguous())
        else:
            codes, scales = quantize(weight)
            self.register_buffer("weight", codes)
            self.register_buffer("scales", scales)
            self.register_buffer("zero_points", torch.zeros(self.out_features, dtype=torch.long))
            self.levels = 255 if native_int8() else 127
            path = inference_paths()["int8"]
            self._few_rows = (path.few_rows if self.int8_library is Int8Library.ONEDNN
                              and path.few_rows_library is Int8Library.FBGEMM else 0)
        self._kernel = self._choose_kernel()

    def _choose_kernel(self) -> WeightKernel:
        if self.precision == "bf16":
            on_onednn = self.weight.device.type == "cpu" and _onednn_bf16()
            return Bf16OneDNN(self.weight) if on_onednn else Bf16Matmul(self.weight)
        if self.int8_library is Int8Library.FBGEMM:
            return Int8Dynamic(self.weight, self.scales)
        return Int8RowScaled(self.weight, self.scales, self.zero_points, self.levels, self._few_rows)

    def _apply(self, fn: Callable, recurse: bool = True) -> LowPrecisionWeight:
        weight = self.weight
        super()._apply(fn, recurse)
        if self.weight is not weight:  # moved or converted: the kernel follows
            self._kernel = self._choose_kernel()
        return self

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None,
                gelu: str | None = None, float_output: bool = True,
                add: torch.Tensor | None = None) -> torch.Tensor:
        """``x (..., in) @ W.T`` plus ``bias (out,)`` and ``add (..., out)`` (an LSTM's input
        projections), then GELU if ``gelu`` names its form (``"none"``: exact, or ``"tanh"``; not
        with ``add``). ``float_output=False`` leaves oneDNN's bf16 result in bf16 (the same
        values) for a caller that only multiplies it by another bf16 matrix.

        Returns:
            ``(..., out)``, float32 unless ``float_output`` is False.
        """
        if add is not None and gelu is not None:
            raise ValueError("LowPrecisionWeight: add and gelu do not go together")
        if x.shape[:-1].numel() == 0:
            return x.new_zeros(*x.shape[:-1], self.out_features, dtype=torch.float32)
        return self._kernel(x, bias, gelu, float_output, add)

    def step(self) -> StepProduct:  # an LSTM step's product, settled once
        return self._kernel.step()

    def kernel(self) -> StepProduct:  # int8's step; a ValueError for bf16
        if self.precision != "int8":
            raise ValueError(f"LowPrecisionWeight.kernel runs int8, not {self.precision}")
        return self.step()

    def extra_repr(self) -> str:
        library = f" ({self.int8_library})" if self.int8_library else ""
        return f"{self.in_features} -> {self.out_features}, {self.precision}{library}"


class LowPrecisionLinear(nn.Module):
    """``nn.Linear`` with its weight in bf16 or int8 and its bias in float32."""

    def __init__(self, linear: nn.Linear, precision: str) -> None:
        super().__init__()
        self.weight_packed = LowPrecisionWeight(linear.weight, precision)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor, gelu: str | None = None, float_output: bool = True) -> torch.Tensor:
        """``x (..., in) @ W.T + bias``, then GELU if ``gelu`` names its form.

        Returns:
            ``(..., out)``, float32 unless ``float_output`` is False."""
        return self.weight_packed(x, self.bias, gelu, float_output)


def run_linear(
    packing: PackedFloatWeights, name: str, layer: nn.Module, x: torch.Tensor, gelu: str | None = None,
    float_output: bool = True,
) -> torch.Tensor:
    """``layer(x)`` then GELU if ``gelu``: an ``nn.Linear`` through ``packing``, a
    :class:`LowPrecisionLinear` with the GELU in its product, any other layer as it is."""
    if isinstance(layer, nn.Linear):
        return packing.linear(name, x, layer.weight, layer.bias, gelu)
    if isinstance(layer, LowPrecisionLinear):
        return layer(x, gelu, float_output)
    out = layer(x)
    return out if gelu is None else F.gelu(out, approximate=gelu)


def apply_precision(module: nn.Module, precision: str, *, check_cpu: bool = True) -> nn.Module:
    """Convert ``module``'s weights to ``precision`` in place and return it (eval mode).

    ``"fp32"`` returns the module untouched. Otherwise every ``nn.Linear`` becomes a
    :class:`LowPrecisionLinear`, and every :class:`PacksWeights` submodule packs its own matrices.
    Under ``"int8"`` a submodule of role :attr:`Int8Role.KEPT` (ELMo's token encoder) gets the
    int8 path's ``kept_precision`` instead, and one of role :attr:`Int8Role.RECURRENT` (an LSTM
    layer) the int8 path's ``int8_library`` for its matrices; every other int8 matrix runs on
    oneDNN. An :class:`Encoder` records it as ``precision``. For inference only; ``check_cpu=False``
    skips the CPU check (to measure bf16's accuracy on any CPU).
    """
    if precision == "fp32":
        return module
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    precision = check_precision(precision, device) if check_cpu else as_precision(precision)
    packers = [sub for sub in module.modules() if isinstance(sub, PacksWeights)]
    kept: set[int] = set()
    recurrent_library = Int8Library.ONEDNN
    if precision == "int8":
        int8 = inference_paths()["int8"]
        recurrent_library = int8.int8_library or recurrent_library
        # Rounding where its error is amplified the most (the token vectors every LSTM step
        # reads) costs more accuracy than int8 saves time there (it runs once per distinct token).
        for sub in packers:
            if sub.int8_role is Int8Role.KEPT and id(sub) not in kept:
                apply_precision(sub, int8.kept_precision, check_cpu=False)
                kept.update(id(inner) for inner in sub.modules())
    # pack_weights first: a module may pack its own nn.Linear layers together (BERT's query,
    # key and value as one matrix), which must still be float when it does.
    for sub in packers:
        if id(sub) not in kept:
            library = recurrent_library if sub.int8_role is Int8Role.RECURRENT else Int8Library.ONEDNN
            sub.pack_weights(lambda weight, library=library:
                             LowPrecisionWeight(weight, precision, library).to(device))
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and id(parent) not in kept:
                setattr(parent, name, LowPrecisionLinear(child, precision).to(device))
    if isinstance(module, Encoder):
        module.precision = precision
    return module.eval().requires_grad_(False)


def precision_of(module: nn.Module) -> Precision:
    """What :func:`apply_precision` gave ``module``: int8 if any matrix is, else bf16 if any is."""
    found = {sub.precision for sub in module.modules() if isinstance(sub, LowPrecisionWeight)}
    return next((Precision(p) for p in ("int8", "bf16") if p in found), Precision.FP32)
