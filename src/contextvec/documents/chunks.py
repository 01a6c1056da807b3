"""Late chunking: which tokens a character span or a fixed-size chunk covers, and their vectors
pooled as the document's sentences stream out of the encoder (memory per chunk, not per token)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextvec.encoders.outputs import Pooling, as_pooling


def span_token_ranges(spans: Sequence[Sequence[int]], starts: np.ndarray, ends: np.ndarray,
                      text_length: int) -> np.ndarray:
    """Each character span's tokens, as ``[first, stop)`` token indices in document order.

    A token belongs to a span if their characters overlap; a zero-width token (one the
    tokenizer made up, with no characters of its own) belongs to the span holding its position.

    Args:
        spans: ``(start, end)`` character offsets into the document's text, end exclusive.
        starts, ends: ``(tokens,)`` every token's character offsets, in document order.
        text_length: the text's length in characters (a span must lie inside it).

    Returns:
        ``(len(spans), 2)`` int64.

    Raises:
        ValueError: a span that is not two integers with ``0 <= start < end <= text_length``,
            or one that covers no token, named by its index.
    """
    # A zero-width token at p counts as covering [p, p + 1): the same test then places it.
    reach = np.maximum(ends, starts + 1)
    out = np.empty((len(spans), 2), dtype=np.int64)
    for index, span in enumerate(spans):
        if (len(span) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                      for v in span)):
            raise ValueError(f"spans[{index}]: expected two integers (start, end), got {list(span)!r}")
        start, end = int(span[0]), int(span[1])
        if not 0 <= start < end <= text_length:
            raise ValueError(f"spans[{index}]: ({start}, {end}) is not inside the text of "
                             f"{text_length} characters with start < end")
        first = int(np.searchsorted(reach, start, side="right"))
        stop = int(np.searchsorted(starts, end, side="left"))
        if first >= stop:
            raise ValueError(f"spans[{index}]: ({start}, {end}) covers no token")
        out[index] = first, stop
    return out


def chunk_token_ranges(n_tokens: int, chunk_tokens: int) -> np.ndarray:
    """``[first, stop)`` of consecutive chunks of ``chunk_tokens`` tokens (the last one shorter),
    ``(chunks, 2)`` int64; none for a document without tokens."""
    firsts = np.arange(0, n_tokens, chunk_tokens, dtype=np.int64)
    return np.stack([firsts, np.minimum(firsts + chunk_tokens, n_tokens)], axis=1).reshape(-1, 2)


class ChunkPooler:
    """Pools token ranges of a document whose token vectors arrive sentence by sentence.

    ``ranges`` ``(chunks, 2)``: each chunk's ``[first, stop)`` in document token order (chunks
    may overlap). :meth:`add` takes the document's sentences in order, each its selected layers
    ``(..., tokens, dim)`` (the array ``select_layers`` gives); :meth:`result`
    gives ``(chunks, ..., dim)`` float32, pooled as ``Encoder.embed``'s ``pool`` would pool the
    chunk's tokens had they been one sentence (means summed in float64, then rounded once).
    """

    def __init__(self, ranges: np.ndarray, mode: Pooling | str) -> None:
        self.ranges = ranges
        self.mode = as_pooling(mode)
        self._acc: np.ndarray | None = None
        self._seen = np.zeros(len(ranges), dtype=bool)
        self._first = 0  # the document position of the next sentence's first token

    def add(self, vectors: np.ndarray) -> None:
        first = self._first
        stop = self._first = first + vectors.shape[-2]
        if stop == first:
            return
        lo = np.maximum(self.ranges[:, 0], first)
        hi = np.minimum(self.ranges[:, 1], stop)
        if self._acc is None:
            dtype = np.float64 if self.mode is Pooling.MEAN else np.float32
            self._acc = np.zeros((len(self.ranges), *vectors.shape[:-2], vectors.shape[-1]), dtype=dtype)
        for chunk in np.flatnonzero(lo < hi):
            part = vectors[..., lo[chunk] - first : hi[chunk] - first, :]
            if self.mode is Pooling.MEAN:
                self._acc[chunk] += part.sum(axis=-2, dtype=np.float64)
            elif self.mode is Pooling.MAX:
                best = part.max(axis=-2)
                self._acc[chunk] = best if not self._seen[chunk] else np.maximum(self._acc[chunk], best)
            elif not self._seen[chunk]:
                self._acc[chunk] = part[..., 0, :]
            self._seen[chunk] = True

    def result(self, shape: tuple[int, ...]) -> np.ndarray:
        """The pooled chunks; ``shape`` is one chunk's vector shape, for a document without one."""
        if self._acc is None:
            return np.zeros((len(self.ranges), *shape), dtype=np.float32)
        if self.mode is Pooling.MEAN:
            counts = (self.ranges[:, 1] - self.ranges[:, 0]).reshape(-1, *[1] * (self._acc.ndim - 1))
            return (self._acc / counts).astype(np.float32)
        return self._acc.astype(np.float32, copy=False)
