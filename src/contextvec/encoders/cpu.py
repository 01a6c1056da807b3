"""What this CPU runs each precision on: its flags, oneDNN's ISA cap, and the kernel family chosen.

oneDNN (torch's CPU matmuls for ``precision="bf16"`` and ``"int8"``, and the packed fp32 GEMM)
dispatches at run time to the widest kernels the CPU has, below the cap that
``ONEDNN_MAX_CPU_ISA`` (or ``DNNL_MAX_CPU_ISA``) sets. :func:`inference_paths` says, per precision,
which family that is (AMX tiles, AVX-512 BF16/VNNI, AVX-VNNI, AVX-512, AVX2) and why, from
``/proc/cpuinfo`` and the cap; ``contextvec info`` prints it. The int8 activations' width (8 or 7
bits) is settled here too, and checked against the kernel itself once per process
(:func:`int8_sums_exact`): a kernel without int8 dot products saturates 8-bit sums. So is the
library of int8's kernels (:class:`Int8Library`): oneDNN's, except at AVX2 width without int8
dot products, where oneDNN's int8 kernels stream a matrix slower than its fp32 ones and an LSTM's
steps (a few rows each) run on fbgemm's, written for that case. Where oneDNN runs them, a product
of few rows (:data:`FEW_ROWS`; one where oneDNN has AMX tiles), such as an LSTM step at batch 1,
runs on fbgemm's kernel wherever that sums the activations' width exactly
(:func:`fbgemm_sums_exact`): the same codes and integer sums, a faster kernel for so few rows.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import torch

from contextvec.encoders import torch_private
from contextvec.encoders.torch_private import fbgemm_available, fbgemm_prepack

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags of native bf16 matmuls: any one of them is enough."""

INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
"""CPU flags of int8 dot products (VNNI or AMX)."""

ISA_ORDER = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
             "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16")
"""oneDNN's ISA caps (``ONEDNN_MAX_CPU_ISA``), narrowest first; a cap allows its own ISA and
every one before it (``ALL``, ``DEFAULT`` or an unset cap allow all)."""


class Kernel(StrEnum):
    """The family of CPU instructions a precision's matmuls run on."""

    AMX = "AMX tiles"
    AVX512_BF16 = "AVX-512 BF16"
    AVX512_VNNI = "AVX-512 VNNI"
    AVX_VNNI = "AVX-VNNI"
    AVX512 = "AVX-512"
    AVX2 = "AVX2"
    BASELINE = "SSE"
    """Below AVX2: oneDNN's oldest kernels."""
    NONE = "none"
    """The precision is refused on this CPU."""


class Int8Library(StrEnum):
    """The library whose kernels run an LSTM's int8 matmuls (see
    :func:`contextvec.encoders.precision.apply_precision`; every other int8 matmul runs on
    oneDNN's)."""

    ONEDNN = "oneDNN"
    """oneDNN's int8 GEMM: one activation scale per row, so a row's result does not depend on
    the other rows of its batch."""
    FBGEMM = "fbgemm"
    """fbgemm's dynamic int8 GEMM: one activation scale per product (its whole input), 7 bits."""


@dataclass(frozen=True)
class InferencePath:
    """How one precision runs on this CPU (see :func:`inference_paths`).

    Attributes:
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"``.
        available: whether ``contextvec.load(precision=...)`` accepts it here.
        kernel: the instruction family of its matmuls (:class:`Kernel`).
        engine: the library whose kernels run them.
        activation_bits: int8 only (else None): the width of the quantized activations.
        reason: why this path, in one line.
        kept_precision: int8 only (else None): the precision of the layers that int8 leaves
            alone (ELMo's token encoder, whose rounding the LSTMs amplify the most): ``"bf16"``
            where bf16 is available, else ``"fp32"``.
        int8_library: int8 only (else None): whose kernels run an LSTM's int8 matmuls (every
            other int8 matmul runs on oneDNN's).
        few_rows_library: int8 only (else None): whose kernel runs a product of at most
            ``few_rows`` rows (each LSTM step at batch 1, a sentence's input projections) of a
            matrix on oneDNN's: fbgemm's where its sums are exact at ``activation_bits`` (the
            same codes, integer sums and scales, so the same result, from a kernel faster for
            few rows), else oneDNN's.
        few_rows: int8 only (else None): the most rows a product may have to run on
            ``few_rows_library``.
    """

    precision: str
    available: bool
    kernel: Kernel
    engine: str
    activation_bits: int | None
    reason: str
    kept_precision: str | None = None
    int8_library: Int8Library | None = None
    few_rows_library: Int8Library | None = None
    few_rows: int | None = None


FEW_ROWS = 16
"""The most rows fbgemm's int8 kernel takes from oneDNN's (where it sums them exactly): up to
here it streams a matrix faster than oneDNN's VNNI and AVX-512 kernels, from the same codes
(``benchmarks/step_costs.py`` compares them by rows). Where oneDNN has AMX tiles (16 rows each),
only one row was measured faster on fbgemm."""


@functools.cache
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The flags of the first CPU in ``/proc/cpuinfo`` (empty where there is no such file)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
"""The environment variables of oneDNN's ISA cap, the first set one winning."""


def isa_cap() -> str:
    """oneDNN's ISA cap from the environment, upper case ("" where none is set)."""
    return next((value for name in ISA_CAP_VARIABLES if (value := os.environ.get(name))), "").upper()


def _allows(cap: str, isa: str) -> bool:
    """Whether oneDNN capped at ``cap`` may use ``isa`` (an unknown cap is taken as no cap)."""
    return cap not in ISA_ORDER or ISA_ORDER.index(isa) <= ISA_ORDER.index(cap)


def _extreme_weight() -> torch.Tensor:
    """int8 codes ``(32, 256)`` for the exactness checks: rows of +127, then rows of -127."""
    weight = torch.full((32, 256), 127, dtype=torch.int8)
    weight[16:] = -127
    return weight


@functools.cache
def int8_sums_exact() -> bool:
    """Whether oneDNN's int8 kernel sums 8-bit activations exactly on this CPU, checked once.

    The worst case of an 8-bit code: every activation at +127 (uint8 255 around zero point 128)
    times weights of +127 or -127, for one row and for 32 (oneDNN picks kernels by shape). A
    kernel without VNNI or AMX adds u8 x s8 pairs in saturating int16 and gets it wrong.
    """
    if not torch.backends.mkldnn.is_available() or not torch_private.supported():
        return False
    weight = _extreme_weight()
    outputs, columns = weight.shape
    packed = torch_private.qlinear_prepack(weight)
    for rows in (1, 32):
        codes = torch.full((rows, columns), 255, dtype=torch.uint8)
        out = torch_private.qlinear(codes, 1.0, 128, packed, torch.ones(outputs),
                                    torch.zeros(outputs, dtype=torch.long))
        if not torch.equal(out.double(), (codes.double() - 128) @ weight.double().T):
            return False
    return True


@functools.cache
def fbgemm_sums_exact(bits: int) -> bool:
    """Whether fbgemm's int8 kernel sums a few rows (one, and :data:`FEW_ROWS`) of ``bits``-bit
    activations exactly on this CPU, checked once: codes at the top of the range (uint8 255
    around zero point 128 at 8 bits) times weights of +127 and -127. Its kernels without VNNI add
    u8 x s8 pairs in saturating int16, as oneDNN's do (:func:`int8_sums_exact`), and the
    instructions it may use can be capped (``FBGEMM_ENABLE_INSTRUCTIONS``)."""
    if not fbgemm_available():
        return False
    half = 2 ** (bits - 1) - 1
    weight = _extreme_weight()
    outputs, columns = weight.shape
    packed = fbgemm_prepack(weight, torch.ones(outputs))
    for rows in (1, FEW_ROWS):
        codes = torch.full((rows, columns), float(half))
        out = torch_private.fbgemm_linear_with_scale()(codes, 1.0, half + 1, packed)
        if not torch.equal(out.double(), codes.double() @ weight.double().T):
            return False
    return True


def inference_paths(
    flags: frozenset[str] | None = None, cap: str | None = None, int8_exact: bool | None = None,
    fbgemm: bool | None = None,
) -> dict[str, InferencePath]:
    """The path of each precision (``"fp32"``, ``"bf16"``, ``"int8"``, in that order).

    ``flags``: a CPU's ``/proc/cpuinfo`` flags (None: this CPU's); ``cap``: oneDNN's ISA cap
    (None: the environment's); ``int8_exact``: whether the int8 kernel sums 8-bit activations
    exactly (None: :func:`int8_sums_exact` on this CPU); ``fbgemm``: whether fbgemm's int8
    kernels are there and sum few rows exactly (None: :func:`fbgemm_available` and
    :func:`fbgemm_sums_exact` on this CPU). int8 activations get 8 bits where the flags and
    the cap give VNNI or AMX and the kernel's sums are exact, else 7. An LSTM's int8 products
    run on fbgemm's kernels where oneDNN's would be AVX2 ones without int8 dot products, else on
    oneDNN's, with products of few rows on fbgemm's where it sums them exactly (:data:`FEW_ROWS`;
    one row where oneDNN has AMX tiles).
    """
    flags = cpu_flags() if flags is None else flags
    cap = isa_cap() if cap is None else cap.upper()
    capped = f"; oneDNN capped at {cap}" if cap in ISA_ORDER else ""
    avx512 = "avx512f" in flags and "avx512bw" in flags and _allows(cap, "AVX512_CORE")
    avx2 = "avx2" in flags and _allows(cap, "AVX2")
    amx_bf16 = "amx_bf16" in flags and _allows(cap, "AVX512_CORE_AMX")
    amx_int8 = "amx_int8" in flags and _allows(cap, "AVX512_CORE_AMX")
    wide = Kernel.AVX512 if avx512 else Kernel.AVX2 if avx2 else Kernel.BASELINE
    tiles = "; AMX tiles take no float32" if amx_bf16 or amx_int8 else ""
    fp32 = InferencePath("fp32", True, wide, "oneDNN packed sgemm, MKL sgemm", None,
                         f"float32 FMA on {wide} vectors{capped}{tiles}")

    if amx_bf16:
        bf16 = InferencePath("bf16", True, Kernel.AMX, "oneDNN bf16 GEMM", None,
                             f"amx_bf16: bf16 tiles, float32 accumulation{capped}")
    elif "avx512_bf16" in flags and _allows(cap, "AVX512_CORE_BF16"):
        bf16 = InferencePath("bf16", True, Kernel.AVX512_BF16, "oneDNN bf16 GEMM", None,
                             f"avx512_bf16: bf16 pair dot products, float32 accumulation{capped}")
    else:
        why = ("neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo" if not any(f in flags for f in BF16_FLAGS)
               else f"oneDNN capped at {cap}, below its bf16 kernels")
        bf16 = InferencePath("bf16", False, Kernel.NONE, "", None,
                             f"no native bf16 ({why}), where bf16 runs emulated, slower than fp32")

    if amx_int8:
        kernel, why = Kernel.AMX, "amx_int8: int8 tiles, int32 sums"
    elif "avx512_vnni" in flags and _allows(cap, "AVX512_CORE_VNNI"):
        kernel, why = Kernel.AVX512_VNNI, "avx512_vnni: u8 x s8 dot products into int32"
    elif "avx_vnni" in flags and _allows(cap, "AVX2_VNNI"):
        kernel, why = Kernel.AVX_VNNI, "avx_vnni: u8 x s8 dot products into int32 at AVX2 width"
    else:
        kernel, why = wide, "no int8 dot products: u8 x s8 pairs sum in saturating int16"
    vnni = kernel in (Kernel.AMX, Kernel.AVX512_VNNI, Kernel.AVX_VNNI)
    exact = vnni and (int8_sums_exact() if int8_exact is None else int8_exact)
    if vnni and not exact:
        why += ", yet the kernel's 8-bit sums were not exact here"
    kept = "bf16" if bf16.available else "fp32"
    bits = 8 if exact else 7
    library, engine = Int8Library.ONEDNN, "oneDNN int8 GEMM"
    if kernel is Kernel.AVX2 and (fbgemm_available() if fbgemm is None else fbgemm):
        # oneDNN's AVX2 int8 kernels stream a matrix slower than its fp32 ones, which is all an
        # LSTM step does; fbgemm's were written for this case (vpmaddubsw at 7 bits).
        library = Int8Library.FBGEMM
        why += ("; LSTMs on fbgemm, faster than oneDNN there for few rows (one activation scale"
                " per product)")
        engine += f" (LSTMs: {library})"
    few_library, few = Int8Library.ONEDNN, 0
    if fbgemm_sums_exact(bits) if fbgemm is None else fbgemm:
        # A product of a few rows reads its whole matrix for little arithmetic: fbgemm's kernel
        # streams it faster than oneDNN's, from the same codes.
        few_library, few = Int8Library.FBGEMM, 1 if kernel is Kernel.AMX else FEW_ROWS
        if library is Int8Library.ONEDNN:
            rows = "one row" if few == 1 else f"up to {few} rows"
            why += f"; products of {rows} on fbgemm, faster there from the same codes"
            engine += f" ({rows}: {few_library})"
    int8 = InferencePath("int8", True, kernel, f"{engine}; ELMo's token encoder in {kept}",
                         bits, f"{why}{capped}", kept, library, few_library, few)
    return {path.precision: path for path in (fp32, bf16, int8)}


def native_int8() -> bool:
    """Whether int8 activations get 8 bits here: int8 dot products (VNNI or AMX) within oneDNN's
    ISA cap (capped below VNNI, its kernels saturate 8-bit activations even on a CPU that has
    VNNI), and the kernel's sums checked exact."""
    return inference_paths()["int8"].activation_bits == 8


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (``avx512_bf16`` or ``amx_bf16``, within
    oneDNN's ISA cap)."""
    return inference_paths(int8_exact=False)["bf16"].available
