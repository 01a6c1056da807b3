"""Lower-precision inference: an encoder's weight matrices stored in bf16 or int8.

Weight-only precision: every matmul *weight* (``nn.Linear`` layers, and whatever a module
hands over through a ``pack_weights(pack)`` method: ELMo's LSTM matrices and char-CNN filters,
BERT's query, key and value as one matrix) is stored in the lower precision; activations,
biases, embeddings, layer norms, LSTM states and every output stay float32 (a bf16 product
that only feeds another bf16 product may hand over its bf16 result: ``float_output``). Batch 1 is
memory-bound (each token reads every weight once), so weights half or a quarter the size are
what speeds it up, and float32 activations keep the error to the weights' rounding.

- ``"fp32"``: the model as loaded (the default; nothing is converted). Without gradients on the
  CPU, the large matmuls of ELMo (LSTMs, highway, token projection) and BERT multiply by oneDNN's
  packed copies of their float32 weights (:class:`PackedFloatWeights`): float32 products summed
  in another order (equal up to float32 rounding; docs/precision.md), faster for the few-row
  matmuls of a recurrence.
- ``"bf16"``: weights in bfloat16, matmuls in bf16 with float32 accumulation (oneDNN), the
  float32 bias (and BERT's GELU) applied to the float32 sums and the result rounded once. Only on
  a CPU with native bf16 (``avx512_bf16`` or ``amx_bf16`` in ``/proc/cpuinfo``): without them
  torch emulates bf16 and runs slower than fp32, so :func:`check_precision` refuses it.
- ``"int8"``: weights in int8 with one float32 scale per output row (symmetric), activations
  quantized per call to uint8 (dynamic). Where the CPU has int8 dot products or AVX-512, by
  oneDNN's int8 GEMM (``torch.ops.onednn.qlinear_pointwise``, the kernel behind torch's x86
  PT2E quantization) with one symmetric scale per row, so that a row's result does not depend
  on its batch. At AVX2 width without int8 dot products, an LSTM's products (its steps: a few
  rows streaming each matrix, which oneDNN's int8 kernels there do slower than fp32) run on
  fbgemm's dynamic int8 linear (``torch.ops.quantized.linear_dynamic``), which quantizes its
  whole input with one scale: there an ELMo sentence's vectors depend on the other rows of its
  batch, within int8's error. Everything else (BERT, whose hidden states' magnitudes differ
  too much between tokens for one scale) stays on oneDNN. Without VNNI (``avx512_vnni``,
  ``avx_vnni``, ``amx_int8``) the activations get 7 bits, not 8 (+-63, not +-127): AVX2's
  u8 x s8 pair sums saturate int16 at full range (fbgemm's ``reduce_range`` for the same
  reason). (torch's weight-only ``_weight_int8pack_mm`` runs slower than fp32 on AVX2 CPUs.)
  A product of few rows on oneDNN's path (each LSTM step at batch 1, a sentence's input
  projections) runs on fbgemm's kernel where that sums the codes exactly
  (``torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32``, handed the codes
  themselves): the same integer sums and scales, so the same result, from a kernel that streams
  a matrix faster for few rows.

Which instructions each precision runs on here, and why: :mod:`contextvec.encoders.cpu`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import StrEnum

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.choices import checked_choice, spellings
from contextvec.encoders.cpu import (  # noqa: F401  (the CPU checks, importable from here too)
    BF16_FLAGS,
    INT8_FLAGS,
    InferencePath,
    Int8Library,
    cpu_flags,
    fbgemm_prepack,
    inference_paths,
    native_bf16,
    native_int8,
)


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


@functools.cache
def _onednn_bf16() -> bool:
    """Whether oneDNN itself runs bf16 matmuls on this CPU (its own check, not the flags)."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def check_precision(precision: str, device: torch.device | str = "cpu") -> str:
    """``precision`` if it can run on ``device``, else a one-line ``ValueError`` saying why."""
    precision = as_precision(precision)
    device = torch.device(device)
    if precision == "bf16" and device.type == "cpu" and not native_bf16():
        reason = inference_paths(int8_exact=False)["bf16"].reason
        raise ValueError(f"precision bf16: this CPU has {reason}; use fp32 or int8")
    if precision == "int8" and device.type != "cpu":
        raise ValueError(f"precision int8 runs on the CPU only, not on {device}; use bf16 or fp32")
    return precision


class LowPrecisionWeight(nn.Module):
    """A weight matrix ``(out, in)`` stored in ``precision``; calling it on ``x (..., in)`` gives
    ``x @ W.T`` ``(..., out)`` in float32. ``int8_library``: whose int8 kernels run it (oneDNN's,
    with one activation scale per row, unless a recurrence asks for its CPU's path:
    :func:`apply_precision`); on oneDNN's, products of few rows run on the CPU's
    ``few_rows_library`` (:func:`contextvec.encoders.cpu.inference_paths`), with the same result.
    Products on oneDNN (bf16's and int8's) of many rows run on
    :meth:`PackedFloatWeights.padded_rows` rows, as float32's do, and give each row what a
    smaller product gives it: oneDNN then sees a bounded number of row counts."""

    def __init__(self, weight: torch.Tensor, precision: str,
                 int8_library: Int8Library = Int8Library.ONEDNN) -> None:
        super().__init__()
        if precision not in ("bf16", "int8"):
            raise ValueError(f"LowPrecisionWeight holds bf16 or int8, not {precision!r}")
        self.precision = precision
        self.int8_library = None
        weight = weight.detach().float()
        self.out_features, self.in_features = weight.shape
        if precision == "bf16":
            self.register_buffer("weight", weight.to(torch.bfloat16).contiguous())
            # oneDNN's packed layout of the same bf16 values, where oneDNN runs bf16: faster than
            # ``mm`` for a few rows, the same products. Kept out of the state, as int8's below.
            # Elsewhere (bf16 accuracy checked on any CPU with check_cpu=False) ``mm`` emulates it.
            self._packed = (torch.ops.mkldnn._reorder_linear_weight(self.weight, None)
                            if self.weight.device.type == "cpu" and _onednn_bf16() else None)
            return
        # Symmetric per-row scales; an all-zero row keeps scale 1 (its codes are all 0).
        scales = weight.abs().amax(dim=1) / 127.0
        scales = torch.where(scales > 0, scales, torch.ones_like(scales))
        codes = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
        # The codes are the state (fingerprints, state_dict); the kernel reads its library's
        # packed copy, an opaque object that cannot be hashed or saved, kept out of the state.
        self.register_buffer("weight", codes.contiguous())
        self.int8_library = Int8Library(int8_library)
        self._packed = (fbgemm_prepack(codes, scales) if self.int8_library is Int8Library.FBGEMM
                        else torch.ops.onednn.qlinear_prepack(codes, None))
        self.register_buffer("scales", scales.contiguous())
        self.register_buffer("zero_points", torch.zeros(self.out_features, dtype=torch.long))
        self.levels = 255 if native_int8() else 127
        # int8's half range as a tensor, made once: torch would make one of the Python number
        # on every product.
        self._half_levels = torch.tensor(float(self.levels // 2))
        # fbgemm's packed copy for products of few rows, made on first use: many matrices never
        # see so few rows (BERT's, mostly), and the copy costs their size again.
        path = inference_paths()["int8"]
        self._few_rows = (path.few_rows if self.int8_library is Int8Library.ONEDNN
                          and path.few_rows_library is Int8Library.FBGEMM else 0)
        self._few_rows_packed: torch.ScriptObject | None = None

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None,
                gelu: str | None = None, float_output: bool = True,
                add: torch.Tensor | None = None) -> torch.Tensor:
        """``x @ W.T``, plus ``bias``, plus ``add``, then GELU if ``gelu`` names its form.

        bf16 through oneDNN adds the float32 bias (and ``add``) and applies the GELU inside the
        matmul, on its float32 sums, and rounds the result to bf16 once; elsewhere the bf16
        product is rounded first and the bias added in float32 after.

        Args:
            x: ``(..., in)`` float.
            bias: ``(out,)`` float32, added in the same pass as the scales.
            gelu: ``"none"`` (exact GELU) or ``"tanh"``; no GELU if None. Not with ``add``.
            float_output: False leaves oneDNN's bf16 result in bf16 (the same values), for a
                caller that only multiplies it by another bf16 matrix.
            add: ``(..., out)``, added to the product (an LSTM's input projections).

        Returns:
            ``(..., out)``, float32 (bf16 with ``float_output=False`` on oneDNN's bf16 path).

        Raises:
            ValueError: both ``add`` and ``gelu``.
        """
        if add is not None and gelu is not None:
            raise ValueError("LowPrecisionWeight: add and gelu do not go together")
        if x.shape[:-1].numel() == 0:
            return x.new_zeros(*x.shape[:-1], self.out_features, dtype=torch.float32)
        # oneDNN's kernels take ``x`` with its leading dimensions as they are: an LSTM step's
        # product is a few microseconds of work, and each reshape a call of its own.
        if self.precision == "int8":
            base = bias if add is None else add if bias is None else add + bias
            out = self.kernel()(x if x.dtype == torch.float32 else x.float(), base)
            return out if gelu is None else torch.ops.aten.gelu_(out, approximate=gelu)
        x16 = x.to(torch.bfloat16)
        if self._packed is not None and x.device.type == "cpu":
            packed = self._packed
            if add is not None:
                # An LSTM's gates: the state's product and the input projections summed in
                # the product's float32 accumulation, one rounding and one pass for both.
                # (oneDNN takes no float32 bias beside a bf16 addend: the bias joins it.)
                other = (add if bias is None else add.float() + bias).to(torch.bfloat16)
                out = _on_padded_rows(
                    lambda a, b: torch.ops.mkldnn._linear_pointwise.binary(a, b, packed, None, "add"),
                    x16, other)
            else:
                attr, algorithm = ("none", "") if gelu is None else ("gelu", gelu)
                out = _on_padded_rows(
                    lambda a: torch.ops.mkldnn._linear_pointwise(a, packed, bias, attr, [], algorithm), x16)
            return out.float() if float_output else out
        out = torch.mm(x16.reshape(-1, self.in_features), self.weight.T).float()
        out = (out if bias is None else out.add_(bias)).view(*x.shape[:-1], self.out_features)
        out = out if add is None else out.add_(add)
        return out if gelu is None else torch.ops.aten.gelu_(out, approximate=gelu)

    def kernel(self) -> Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]:
        """``product(x, add=None)``: ``x @ W.T + add`` in float32 for float32 ``x (..., in)`` with
        at least one row and ``add (..., out)`` or None; int8 only. What does not change between
        calls is settled once: an LSTM step calls it twice, and at batch 1 its Python costs as
        much as its small tensor operations."""
        if self.precision != "int8":
            raise ValueError(f"LowPrecisionWeight.kernel runs int8, not {self.precision}")
        packed = self._packed
        if self.int8_library is Int8Library.FBGEMM:
            linear_dynamic = _without_torch_function(torch.ops.quantized.linear_dynamic.default)

            def dynamic(x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
                # fbgemm quantizes the whole input with one scale, at 7 bits (``reduce_range``):
                # its AVX2 kernels sum u8 x s8 pairs in saturating int16.
                out = linear_dynamic(x, packed, True)
                return out if add is None else out.add_(add)
            return dynamic
        # One symmetric scale per row (token), so a row's output does not depend on the other
        # rows of the batch: codes centre on a common zero point and the kernel's int32 sums are
        # exact, then each output row is scaled by its own input scale.
        half = self.levels // 2
        zero, few, half_levels = half + 1, self._few_rows, self._half_levels
        weight_scales, weight_zeros = self.scales, self.zero_points
        onednn = torch.ops.onednn.qlinear_pointwise.default
        fbgemm = _without_torch_function(
            torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32.default)

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
                out = _on_padded_rows(lambda c: onednn(c, 1.0, zero, packed, weight_scales, weight_zeros,
                                                      None, 1.0, 0, torch.float32, "none", [], ""),
                                     codes, fill=zero)
            # The row scales and ``add`` in one pass.
            return out.mul_(scales) if add is None else torch.addcmul(add, out, scales, out=out)

        return product

    def _few_rows_copy(self) -> torch.ScriptObject:
        """fbgemm's packed copy of the codes, made on the first product of few rows."""
        if self._few_rows_packed is None:
            self._few_rows_packed = fbgemm_prepack(self.weight, self.scales)
        return self._few_rows_packed

    def extra_repr(self) -> str:
        library = f" ({self.int8_library})" if self.int8_library else ""
        return f"{self.in_features} -> {self.out_features}, {self.precision}{library}"


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


def _on_padded_rows(product: Callable[..., torch.Tensor], x: torch.Tensor, *others: torch.Tensor,
                    fill: float = 0) -> torch.Tensor:
    """``product(x, *others)`` for a row-by-row ``product`` (a oneDNN matmul) of ``x (..., in)``
    and ``others (..., n)`` of the same rows, run on :meth:`PackedFloatWeights.padded_rows` rows
    (rows of ``fill`` after the real ones), its result ``(..., out)`` cut back to ``x``'s rows."""
    lead = x.shape[:-1]
    rows = lead.numel()
    padded = PackedFloatWeights.padded_rows(rows)
    if padded == rows:
        return product(x, *others)

    def pad(t: torch.Tensor) -> torch.Tensor:
        return F.pad(t.reshape(rows, t.shape[-1]), (0, 0, 0, padded - rows), value=fill)

    out = product(pad(x), *map(pad, others))
    return out[:rows].view(*lead, out.shape[-1])


class PackedFloatWeights:
    """oneDNN's packed copies of float32 weight matrices, for inference on the CPU.

    ``linear(name, x, weight, bias)`` is ``F.linear(x, weight, bias)`` (then GELU with ``gelu``
    ``"none"`` (exact) or ``"tanh"``). Without gradients, on the CPU and in float32, it
    multiplies by a copy of ``weight`` that oneDNN laid out for its GEMM kernels
    (``mkldnn._reorder_linear_weight``), with the GELU fused into the matmul: for the few rows of
    an LSTM step (1 to 32) on a large matrix that is faster than MKL's ``mm`` on the plain
    matrix; :meth:`usable` says where it pays. Below that,
    :meth:`transposed` keeps the ``(in, out)`` copy of a stack of matrices that ``bmm`` reads
    fastest.

    The copy is made on first use and remade when ``weight`` changes: another tensor (or a view
    of another tensor), or the same one updated in place (its version counter, as an optimizer
    step or ``load_state_dict`` bumps it), so training and loading need no hook. It is held
    outside the module's state (not saved, not fingerprinted) and costs the weights' size again
    in memory. Threads may share one instance: a race only packs a matrix twice.
    """

    min_size = 1 << 20
    """A matrix of at least this many entries (4 MB) is packed whatever the rows: streaming it
    is the cost, and oneDNN streams it faster."""
    min_rows = 256
    """A smaller matrix is packed from this many rows on. Below both, ``F.linear`` is faster:
    oneDNN's per-call overhead outweighs its kernel (the bundled model's LSTM steps are slower
    packed)."""
    row_bucket = 64
    """Products of more rows are padded (see :meth:`padded_rows`)."""

    def __init__(self) -> None:
        self._packed: dict[str, tuple[torch.Tensor, tuple, torch.Tensor]] = {}

    @classmethod
    def usable(cls, weight: torch.Tensor, rows: int) -> bool:
        """Whether ``linear`` takes the packed path for ``weight`` times ``rows`` rows now."""
        return (not torch.is_grad_enabled() and weight.device.type == "cpu"
                and weight.dtype == torch.float32
                and (weight.numel() >= cls.min_size or rows >= cls.min_rows)
                and torch.backends.mkldnn.is_available())

    @classmethod
    def padded_rows(cls, rows: int) -> int:
        """The row count a product of ``rows`` rows runs with (on oneDNN, in every precision).
        oneDNN keeps memory for every row count it has seen (a long-running server's memory
        grew with every new count, most in bf16, where making each count's kernel also churns
        the heap), so past ``row_bucket`` rows the count is rounded up to a multiple of an
        eighth of the largest power of two below it: eight counts per doubling, and never more
        than an eighth of the rows padding."""
        if rows <= cls.row_bucket:
            return rows
        step = 1 << (rows.bit_length() - 4)
        return -(-rows // step) * step

    def linear(
        self, name: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
        gelu: str | None = None,
    ) -> torch.Tensor:
        """``x (rows, in) @ weight (out, in).T + bias``, then GELU if ``gelu`` names its form;
        ``name`` identifies the matrix within this instance."""
        if not self.usable(weight, x.shape[0]):
            out = F.linear(x, weight, bias)
            return out if gelu is None else F.gelu(out, approximate=gelu)
        return self.packed_linear(name, x, weight, bias, gelu)

    def packed_linear(
        self, name: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
        gelu: str | None = None, add: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:meth:`linear` on the packed copy, for a caller that already knows it is
        :meth:`usable` (an LSTM decides once per call, not once per step); ``add (rows, out)``
        is added to the result inside the product (an LSTM's input projections; not with
        ``gelu``)."""
        packed = self._copy(name, weight,
                            lambda w: torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), None))
        if add is not None:
            if gelu is not None:
                raise ValueError("packed_linear: add and gelu do not go together")
            return _on_padded_rows(
                lambda a, b: torch.ops.mkldnn._linear_pointwise.binary(a, b, packed, bias, "add"), x, add)
        attr, algorithm = ("none", "") if gelu is None else ("gelu", gelu)
        return _on_padded_rows(
            lambda a: torch.ops.mkldnn._linear_pointwise(a, packed, bias, attr, [], algorithm), x)

    def transposed(self, name: str, weights: torch.Tensor) -> torch.Tensor:
        """``weights (batch, out, in)`` as ``(batch, in, out)`` for ``bmm``: with gradients the
        transposed view; in inference a contiguous copy (kept until ``weights`` changes, like
        packed copies; CPU only), which ``bmm`` streams faster for a few rows (the bundled
        model's LSTM steps)."""
        if torch.is_grad_enabled() or weights.device.type != "cpu":
            return weights.transpose(1, 2)
        return self._copy(name, weights, lambda w: w.transpose(1, 2).contiguous())

    def _copy(self, name: str, weight: torch.Tensor,
              make: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``make(weight)``, made on first use and remade when ``weight`` changes."""
        # The entry holds the weight it was made from, so its memory cannot be freed and handed
        # to another tensor while the entry lives: the same address is the same matrix. (A view's
        # base would not do: views of inference tensors have none, and the copy would be remade
        # at every call.)
        key = (weight.data_ptr(), 0 if weight.is_inference() else weight._version, tuple(weight.shape),
               weight.stride())
        entry = self._packed.get(name)
        if entry is None or entry[1] != key:
            entry = (weight.detach(), key, make(weight.detach()))
            self._packed[name] = entry
        return entry[2]

    def __len__(self) -> int:
        """How many copies it holds now (one per matrix name used since it was made)."""
        return len(self._packed)

    def __getstate__(self) -> dict:
        # Copies and pickles start empty: oneDNN's opaque tensors can be neither (remade on use).
        return {"_packed": {}}


def run_linear(
    packing: PackedFloatWeights, name: str, layer: nn.Module, x: torch.Tensor, gelu: str | None = None,
    float_output: bool = True,
) -> torch.Tensor:
    """``layer(x)`` (then GELU if ``gelu``): a float ``nn.Linear`` through ``packing``, a
    :class:`LowPrecisionLinear` (after :func:`apply_precision`) with the GELU in its product,
    any other layer (``nn.Identity`` where a model has no projection) called as it is;
    ``float_output=False`` lets a bf16 layer return its bf16 result (see ``LowPrecisionWeight``)."""
    if isinstance(layer, nn.Linear):
        return packing.linear(name, x, layer.weight, layer.bias, gelu)
    if isinstance(layer, LowPrecisionLinear):
        return layer(x, gelu, float_output)
    out = layer(x)
    return out if gelu is None else F.gelu(out, approximate=gelu)


class LowPrecisionLinear(nn.Module):
    """``nn.Linear`` with its weight in bf16 or int8 and its bias in float32."""

    def __init__(self, linear: nn.Linear, precision: str) -> None:
        super().__init__()
        self.weight_packed = LowPrecisionWeight(linear.weight, precision)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor, gelu: str | None = None, float_output: bool = True) -> torch.Tensor:
        """``x @ W.T + bias``, then GELU if ``gelu`` names its form.

        Args:
            x: ``(..., in)`` float.
            gelu: ``"none"`` (exact GELU) or ``"tanh"``; no GELU if None.
            float_output: False lets a bf16 layer return its bf16 result (see
                :class:`LowPrecisionWeight`).

        Returns:
            ``(..., out)``, float32 unless ``float_output`` is False.
        """
        return self.weight_packed(x, self.bias, gelu, float_output)


def apply_precision(module: nn.Module, precision: str, *, check_cpu: bool = True) -> nn.Module:
    """Convert ``module``'s weights to ``precision`` in place and return it (eval mode).

    ``"fp32"`` returns the module untouched. Otherwise every ``nn.Linear`` becomes a
    :class:`LowPrecisionLinear`, and every submodule with a ``pack_weights(pack)`` method packs
    its own matrices with ``pack``. Under ``"int8"``, a submodule whose class sets
    ``int8_sensitive = True`` (ELMo's token encoder) gets the int8 path's ``kept_precision``
    instead (bf16 where the CPU has it, else fp32), and one whose class sets
    ``int8_recurrent = True`` (an LSTM layer) the int8 path's ``int8_library`` for its matrices;
    every other int8 matrix runs on oneDNN, with one activation scale per row. The result is for
    inference only (no gradients, no saving). ``check_cpu=False`` skips the CPU check (to
    measure bf16's accuracy on any CPU).
    """
    if precision == "fp32":
        return module
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    precision = check_precision(precision, device) if check_cpu else as_precision(precision)
    kept: set[int] = set()
    recurrent_library = Int8Library.ONEDNN
    if precision == "int8":
        int8 = inference_paths()["int8"]
        recurrent_library = int8.int8_library or recurrent_library
        # Rounding where its error is amplified the most (the token vectors every LSTM step
        # reads) costs more accuracy than int8 saves time there (it runs once per distinct token).
        for sub in list(module.modules()):
            if getattr(sub, "int8_sensitive", False) and id(sub) not in kept:
                apply_precision(sub, int8.kept_precision, check_cpu=False)
                kept.update(id(inner) for inner in sub.modules())
    # pack_weights first: a module may pack its own nn.Linear layers together (BERT's query,
    # key and value as one matrix), which must still be float when it does.
    for sub in list(module.modules()):
        pack_weights = getattr(sub, "pack_weights", None)
        if callable(pack_weights) and id(sub) not in kept:
            library = recurrent_library if getattr(sub, "int8_recurrent", False) else Int8Library.ONEDNN
            pack_weights(lambda weight, library=library:
                         LowPrecisionWeight(weight, precision, library).to(device))
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and id(parent) not in kept:
                setattr(parent, name, LowPrecisionLinear(child, precision).to(device))
    module.precision = precision
    return module.eval().requires_grad_(False)
