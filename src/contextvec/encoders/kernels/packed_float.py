"""oneDNN's packed copies of float32 weight matrices: the float32 products of inference on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from contextvec.encoders import torch_private


def on_padded_rows(product: Callable[..., torch.Tensor], x: torch.Tensor, *others: torch.Tensor,
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
                and torch.backends.mkldnn.is_available() and torch_private.supported())

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
        packed = self._copy(name, weight, lambda w: torch_private.reorder_linear_weight(w.contiguous()))
        if add is not None:
            if gelu is not None:
                raise ValueError("packed_linear: add and gelu do not go together")
            return on_padded_rows(lambda a, b: torch_private.linear_add(a, b, packed, bias), x, add)
        return on_padded_rows(lambda a: torch_private.linear_pointwise(a, packed, bias, gelu), x)

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
        key = (*torch_private.weights_key([weight])[0], tuple(weight.shape), weight.stride())
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
