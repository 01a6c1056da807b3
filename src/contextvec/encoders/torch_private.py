"""Every use of torch's private or undocumented APIs, behind one check of the torch version.

The CPU kernels of inference (oneDNN's packed float32 and bf16 GEMMs, its int8 GEMM, fbgemm's
int8 linears) are reached through operators and helpers torch does not promise to keep. They
are called here only; :func:`supported` says whether this torch is one they were tested on.
Elsewhere the float32 products run on ``F.linear`` (the same sums up to float32 rounding) and
bf16 and int8 are refused in one line (:func:`check_supported`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable

import torch

TESTED_TORCH = ((2, 13),)
"""The ``(major, minor)`` releases of torch CI runs these kernels on."""


def torch_release(version: str | None = None) -> tuple[int, int]:
    """``(major, minor)`` of ``version`` (this torch's if None), e.g. ``"2.13.0+cpu"`` -> (2, 13)."""
    major, minor = (version or torch.__version__).split("+")[0].split(".")[:2]
    return int(major), int(minor)


@functools.cache
def supported() -> bool:
    """Whether this torch is one of :data:`TESTED_TORCH`."""
    return torch_release() in TESTED_TORCH


def check_supported(what: str) -> None:
    """A one-line ``ValueError`` where ``what`` needs these kernels and this torch is untested."""
    if not supported():
        tested = ", ".join(f"{a}.{b}" for a, b in TESTED_TORCH)
        raise ValueError(f"{what} runs on torch {tested} only, not on torch {torch.__version__}; use fp32")


def tensor_version(tensor: torch.Tensor) -> int:
    """``tensor``'s version counter (bumped by every in-place update); 0 for an inference tensor,
    which has none."""
    return 0 if tensor.is_inference() else tensor._version


def weights_key(tensors: Iterable[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """The key of a cache computed from ``tensors`` (a module's ``parameters()``): each one's
    storage address and version counter, so it changes when a weight is replaced (loading) or
    updated in place (training); an inference tensor, which cannot be updated, has version 0."""
    return tuple((t.data_ptr(), tensor_version(t)) for t in tensors)


@functools.cache
def onednn_bf16() -> bool:
    """Whether oneDNN itself runs bf16 matmuls on this CPU (its own check, not the flags)."""
    return (supported() and torch.backends.mkldnn.is_available()
            and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def reorder_linear_weight(weight: torch.Tensor) -> torch.Tensor:
    """oneDNN's packed layout of ``weight (out, in)`` (float32 or bf16), for :func:`linear_pointwise`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight, None)


def linear_pointwise(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None,
                     gelu: str | None = None) -> torch.Tensor:
    """``x @ W.T + bias`` on oneDNN's ``packed`` W, then GELU of form ``gelu`` if given, fused."""
    attr, algorithm = ("none", "") if gelu is None else ("gelu", gelu)
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, attr, [], algorithm)


def linear_add(x: torch.Tensor, other: torch.Tensor, packed: torch.Tensor,
               bias: torch.Tensor | None) -> torch.Tensor:
    """``x @ W.T + bias + other`` on oneDNN's ``packed`` W, ``other`` added as the sums are written."""
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, packed, bias, "add")


def qlinear_prepack(codes: torch.Tensor) -> torch.Tensor:
    """oneDNN's packed int8 ``codes (out, in)``."""
    return torch.ops.onednn.qlinear_prepack(codes, None)


def qlinear(codes: torch.Tensor, scale: float, zero: int, packed: torch.Tensor,
            weight_scales: torch.Tensor, weight_zeros: torch.Tensor) -> torch.Tensor:
    """oneDNN's int8 GEMM: uint8 ``codes`` around ``zero`` times ``packed``, float32 out."""
    return torch.ops.onednn.qlinear_pointwise(codes, scale, zero, packed, weight_scales, weight_zeros,
                                              None, 1.0, 0, torch.float32, "none", [], "")


def qlinear_op() -> Callable[..., torch.Tensor]:
    """:func:`qlinear`'s operator overload itself, for a caller that settles its calls once."""
    return torch.ops.onednn.qlinear_pointwise.default


@functools.cache
def fbgemm_available() -> bool:
    """Whether this torch has fbgemm's int8 linears (x86 builds do): the dynamic one, and the one
    given its input's scale."""
    return (supported() and "fbgemm" in torch.backends.quantized.supported_engines
            and hasattr(torch.ops.quantized, "linear_dynamic")
            and hasattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32"))


def fbgemm_prepack(codes: torch.Tensor, scales: torch.Tensor) -> torch.ScriptObject:
    """fbgemm's packed copy of the int8 ``codes (out, in)`` with their row ``scales (out,)``."""
    # fbgemm takes its weights as a quantized tensor, a type torch deprecates as a user-facing
    # quantization API: here it is only the kernel's input format, made once per matrix, so its
    # warning would tell the user nothing they could act on.
    # linear_prepack packs for torch's global quantized engine, which a caller may have set to
    # another: this path is fbgemm's.
    engine = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "fbgemm"
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")
            weight = torch._make_per_channel_quantized_tensor(
                codes, scales.double(), torch.zeros(len(scales), dtype=torch.long), 0)
            return torch.ops.quantized.linear_prepack(weight, None)
    finally:
        torch.backends.quantized.engine = engine


def fbgemm_linear_with_scale() -> Callable[..., torch.Tensor]:
    """fbgemm's int8 linear given its input's scale and zero point: ``(x, scale, zero, packed)``."""
    return _without_torch_function(torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32.default)


def fbgemm_linear_dynamic() -> Callable[..., torch.Tensor]:
    """fbgemm's dynamic int8 linear: ``(x, packed, reduce_range)``, one scale for all of ``x``."""
    return _without_torch_function(torch.ops.quantized.linear_dynamic.default)


def _without_torch_function(op: torch._ops.OpOverload) -> Callable[..., torch.Tensor]:
    """``op``, an operator overload that takes fbgemm's packed weights (a ``ScriptObject``),
    called straight into the dispatcher with ``__torch_function__`` overrides off. From Python,
    torch looks for the override on every argument, and on a ``ScriptObject`` that lookup throws
    and catches a C++ exception on every call; the overload's own ``__call__`` also walks the
    arguments for the fake script objects only tracing makes (contextvec runs int8 eagerly:
    export takes fp32 alone). Each costs more than a one-row product of a small matrix. The
    arguments here are plain tensors: there is nothing to override."""
    disabled, raw = torch._C.DisableTorchFunctionSubclass, op._op

    def call(*args: object) -> torch.Tensor:
        with disabled():
            return raw(*args)

    return call
