"""int8 weight matrices: symmetric codes with one float32 scale per output row, activations
quantized per call (dynamic), on oneDNN's int8 GEMM or fbgemm's."""

from __future__ import annotations

import torch

from contextvec.encoders import torch_private
from contextvec.encoders.kernels.packed_float import on_padded_rows
from contextvec.encoders.kernels.protocol import StepProduct


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight (out, in)`` float32 -> int8 codes ``(out, in)`` and float32 row scales ``(out,)``,
    symmetric; an all-zero row keeps scale 1 (its codes are all 0)."""
    scales = weight.abs().amax(dim=1) / 127.0
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return codes.contiguous(), scales.contiguous()


class _Int8:
    """What both int8 kernels share: a product built once by :meth:`step`, then bias, ``add``
    and GELU around it."""

    def __init__(self) -> None:
        self._product: StepProduct | None = None

    def step(self) -> StepProduct:
        raise NotImplementedError

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None, gelu: str | None,
                 float_output: bool, add: torch.Tensor | None) -> torch.Tensor:
        if self._product is None:
            self._product = self.step()
        base = bias if add is None else add if bias is None else add + bias
        out = self._product(x if x.dtype == torch.float32 else x.float(), base)
        return out if gelu is None else torch.ops.aten.gelu_(out, approximate=gelu)


class Int8RowScaled(_Int8):
    """oneDNN's int8 GEMM with one symmetric activation scale per row (token), so that a row's
    output does not depend on the other rows of its batch: codes centre on a common zero point,
    the kernel's int32 sums are exact, then each output row is scaled by its own input scale.
    Products of at most ``few_rows`` rows run on fbgemm's kernel given the codes themselves (the
    same integer sums and scales, so the same result, from a kernel that streams a matrix faster
    for few rows); many rows on :meth:`PackedFloatWeights.padded_rows` rows.

    ``levels``: 255 where the activations get 8 bits, 127 for 7 (kernels without int8 dot
    products sum u8 x s8 pairs in saturating int16)."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor,
                 levels: int, few_rows: int) -> None:
        super().__init__()
        self._codes, self._scales, self._zeros = codes, scales, zero_points
        self._packed = torch_private.qlinear_prepack(codes)
        self._half = levels // 2
        # The half range as a tensor, made once: torch would make one of the Python number on
        # every product.
        self._half_levels = torch.tensor(float(self._half))
        self._few_rows = few_rows
        # fbgemm's packed copy for products of few rows, made on first use: many matrices never
        # see so few rows (BERT's, mostly), and the copy costs their size again.
        self._few_rows_packed: torch.ScriptObject | None = None

    def _few_rows_copy(self) -> torch.ScriptObject:
        if self._few_rows_packed is None:
            self._few_rows_packed = torch_private.fbgemm_prepack(self._codes, self._scales)
        return self._few_rows_packed

    def step(self) -> StepProduct:
        zero, few, half_levels = self._half + 1, self._few_rows, self._half_levels
        packed, weight_scales, weight_zeros = self._packed, self._scales, self._zeros
        onednn = torch_private.qlinear_op()
        fbgemm = torch_private.fbgemm_linear_with_scale()

        def product(x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
            # (An all-zero row gets a tiny scale: its codes are all the zero point.) The
            # temporaries are reused in place: each fresh activation-sized buffer costs page faults.
            work = x.abs()
            scales = work.amax(dim=-1, keepdim=True).clamp_(min=1e-30).div_(half_levels)
            codes = torch.div(x, scales, out=work).round_()
            if scales.numel() <= few:
                # fbgemm quantizes its float input itself (round(x / 1.0) + zero point): handed
                # the codes, it sums exactly what oneDNN would, scaled by the same row scales.
                out = fbgemm(codes, 1.0, zero, self._few_rows_copy())
            else:
                # Through int8, then shifted by the zero point in uint8 (wrapping: -63 + 64 = 1):
                # torch converts float to int8 several times faster than float to uint8.
                codes = codes.to(torch.int8).view(torch.uint8).add_(zero)
                # Padding rows of the zero point: codes of zeros, which add nothing to any row.
                out = on_padded_rows(lambda c: onednn(c, 1.0, zero, packed, weight_scales, weight_zeros,
                                                     None, 1.0, 0, torch.float32, "none", [], ""),
                                     codes, fill=zero)
            # The row scales and ``add`` in one pass.
            return out.mul_(scales) if add is None else torch.addcmul(add, out, scales, out=out)

        return product


class Int8Dynamic(_Int8):
    """fbgemm's dynamic int8 linear: the whole input quantized with one scale, at 7 bits
    (``reduce_range``: its AVX2 kernels sum u8 x s8 pairs in saturating int16). An LSTM's
    products at AVX2 width without int8 dot products, where oneDNN's int8 kernels stream a matrix
    slower than fp32; a row's result then depends on the other rows of its product."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self._packed = torch_private.fbgemm_prepack(codes, scales)

    def step(self) -> StepProduct:
        packed, linear_dynamic = self._packed, torch_private.fbgemm_linear_dynamic()

        def dynamic(x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
            out = linear_dynamic(x, packed, True)
            return out if add is None else out.add_(add)

        return dynamic
