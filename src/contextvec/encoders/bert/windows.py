"""Where a text of word pieces is cut into BERT's windows, and which window supplies each piece:
shared by a batch of sentences (``encoder.py``) and a document read as one text (``document.py``)."""

from __future__ import annotations

import torch


def window_spans(n_pieces: int, window: int) -> list[tuple[int, int, int, int]]:
    """How ``n_pieces`` pieces run in windows of at most ``window`` pieces.

    Returns ``(start, end, keep_start, keep_end)`` per window: the window runs pieces
    ``start:end`` and supplies the vectors of pieces ``keep_start:keep_end``, those for which
    its centre ``start + (window - 1) / 2`` is the nearest (ties: the earlier window). The
    kept ranges tile ``0:n_pieces`` in order. Windows start every ``max(window // 2, 1)``
    pieces; the last one is moved back to end at ``n_pieces``.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, not {window}")
    if n_pieces <= window:
        return [(0, n_pieces, 0, n_pieces)]
    stride = max(window // 2, 1)
    starts = [*range(0, n_pieces - window, stride), n_pieces - window]
    spans = []
    keep_start = 0
    for start, following in zip(starts, [*starts[1:], None], strict=True):
        # Up to the midpoint of this centre and the next one; a piece exactly there stays here.
        keep_end = n_pieces if following is None else (start + following + window - 1) // 2 + 1
        spans.append((start, start + window, keep_start, keep_end))
        keep_start = keep_end
    return spans


def first_pieces(word_of_piece: torch.Tensor) -> torch.Tensor:
    """``(n,)`` bool, True at each word's first piece, of pieces ``word_of_piece`` (n,) in order."""
    is_first = torch.ones(len(word_of_piece), dtype=torch.bool)
    is_first[1:] = word_of_piece[1:] != word_of_piece[:-1]
    return is_first
