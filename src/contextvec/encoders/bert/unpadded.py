"""Unpadded rows: rows of word pieces laid end to end, so that no matrix product runs on padding.

BERT's linear layers, LayerNorms and GELU treat every piece alone; only attention needs the
rows. :class:`RowLayout` says where each piece of unpadded rows sits in the padded ``(rows, longest)``
grid that attention runs on, and carries that grid's key mask. In length-sorted batches of
sentences, rows of word pieces still differ in length (about a third of a padded grid of
all-MiniLM-L6-v2 inputs was padding), and all of that was matrix-product work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch


class RowLayout(NamedTuple):
    """How ``rows`` rows of pieces (the longest ``longest``) are laid out as ``(n, hidden)``.

    ``index``: ``(n,)`` each piece's place in the flattened ``(rows * longest)`` grid, or None
    when the pieces already are that grid (no padding, or a padded batch run as is).
    ``mask``: bool ``(rows, 1, 1, longest)``, True at keys that may be attended to, or None when
    every key may be. ``kept``: without gradients, what every layer needs again (the grids of
    :meth:`to_grid`, whose padding stays zero as only the pieces' places are written, and the
    :meth:`score_bias`), or None to keep nothing.
    """

    rows: int
    longest: int
    index: torch.Tensor | None
    mask: torch.Tensor | None
    kept: dict[object, torch.Tensor] | None = None

    @classmethod
    def dense(cls, rows: int, longest: int, mask: torch.Tensor | None) -> RowLayout:
        """A padded batch run as is (``mask``: None or bool (rows, 1, 1, longest))."""
        return cls(rows, longest, None, mask, {})

    @classmethod
    def unpadded(cls, lengths: Sequence[int], device: torch.device | str = "cpu") -> RowLayout:
        """Rows of ``lengths`` pieces laid end to end, in order."""
        longest = max(lengths)
        sizes = torch.tensor(lengths, dtype=torch.long)
        if bool((sizes == longest).all()):
            return cls(len(lengths), longest, None, None)
        grid = torch.arange(longest).view(1, -1) < sizes.view(-1, 1)
        index = grid.view(-1).nonzero().view(-1)
        return cls(len(lengths), longest, index.to(device), grid[:, None, None, :].to(device), {})

    def to_grid(self, pieces: torch.Tensor) -> torch.Tensor:
        """``(n, width)`` pieces -> ``(rows, longest, width)``, zeros at padding.

        Without gradients the grid is reused by the next call of the same width and dtype (the
        next layer's), which must come after the last use of this one: no zero fill and no fresh
        buffer per layer."""
        if self.index is None:
            return pieces.view(self.rows, self.longest, -1)
        width = pieces.shape[-1]
        key = ("grid", width, pieces.dtype, pieces.device)
        grid = self._kept(key, lambda: pieces.new_zeros(self.rows * self.longest, width))
        grid.index_copy_(0, self.index, pieces)
        return grid.view(self.rows, self.longest, -1)

    def score_bias(self) -> torch.Tensor | None:
        """The key mask as a float32 bias to add to attention scores: ``(rows, 1, 1, longest)``,
        0 at keys that may be attended to and -inf elsewhere (None when every key may be);
        adding it is several times faster than ``masked_fill`` with the mask."""
        if self.mask is None:
            return None
        mask = self.mask
        return self._kept(("bias", mask.device), lambda: torch.zeros(mask.shape, device=mask.device)
                          .masked_fill_(~mask, float("-inf")))

    def _kept(self, key: tuple, make: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``kept[key]``, made by ``make()`` on first use; always fresh with gradients."""
        if self.kept is None or torch.is_grad_enabled():
            return make()
        if key not in self.kept:
            self.kept[key] = make()
        return self.kept[key]

    def from_grid(self, grid: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """``(rows, longest, width)`` -> ``(n, width)``: the pieces back in unpadded order (only
        the pieces ``keep``, indices into the n, if given)."""
        flat = grid.reshape(self.rows * self.longest, -1)
        index = self.index if keep is None or self.index is None else self.index[keep]
        index = keep if index is None else index
        return flat if index is None else flat.index_select(0, index)


def unpadded_positions(lengths: Sequence[int]) -> torch.Tensor:
    """``0 .. length - 1`` for each row, concatenated: the position ids of unpadded rows."""
    sizes = torch.tensor(lengths, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes
    return torch.arange(int(sizes.sum())) - torch.repeat_interleave(starts, sizes)
