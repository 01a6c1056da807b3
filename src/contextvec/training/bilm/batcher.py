"""Language-model windows: sentences dealt to parallel streams, cut into fixed-length windows.

As in bilm-tf, each of ``rows`` streams is a concatenation of sentences, ``<S> w1 .. wn </S>``,
read ``unroll`` tokens at a time with the LSTM state carried from one window to the next. The
backward stream holds the same sentences reversed (``</S> wn .. w1 <S>``), so both directions
advance in lockstep. Targets that only mark the start of the next sentence (``<S>`` forward,
``</S>`` backward) are not scored: each sentence of n words gives n + 1 predictions per
direction, the usual perplexity count.

With ``contiguous=True`` (the PTB convention of Zaremba et al. and Kim et al.) the corpus is
instead cut into ``rows`` contiguous parts, one per stream, so each sentence follows the one
before it in the corpus and the carried state holds real preceding context. The parts are cut
at the sentence boundaries nearest to equal token counts (one extra streamed pass), so all rows
run out together: rows cut by sentence count end up to thousands of tokens apart, and the last
steps of every epoch then train on a few rows only, which at a high SGD rate wrecks the model
(on PTB with kim-small, validation perplexity jumped at every epoch's end and took hundreds of
steps to recover).

The whole global batch is built identically in every process; data-parallel workers take their
slice of rows. The batcher's position (sentences consumed + the rows' pending tokens) goes into
checkpoints, so a resumed run reads exactly what an uninterrupted one would have.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Any

import torch

from contextvec.text.chars import BOS_TOKEN, EOS_TOKEN
from contextvec.training.corpus import CorpusVocabulary


@dataclass
class Window:
    """One training step's data for ``directions`` x ``rows`` x ``unroll`` positions.

    ``tokens[d][r][t]`` is the input token string (None past the end of the data);
    ``targets`` and ``mask`` are (directions, rows, unroll) tensors.
    """

    tokens: list[list[list[str | None]]]
    targets: torch.Tensor
    mask: torch.Tensor

    def rows(self, start: int, stop: int) -> Window:
        """The slice of rows a data-parallel worker computes."""
        return Window([d[start:stop] for d in self.tokens], self.targets[:, start:stop],
                      self.mask[:, start:stop])


def _balanced_bounds(sentences: Iterator[list[str]], rows: int) -> list[int]:
    """Sentence indices that cut the corpus into ``rows`` parts of nearly equal token counts."""
    ends = array("q", accumulate(len(s) + 2 for s in sentences))  # with <S> and </S>
    total, n = (ends[-1], len(ends)) if ends else (0, 0)
    return [0] + [min(bisect_left(ends, total * r / rows) + 1, n) for r in range(1, rows)] + [n]


class StreamBatcher:
    """Iterate :class:`Window` s over one pass of a corpus."""

    def __init__(
        self,
        sentences: Callable[[], Iterator[list[str]]],
        vocab: CorpusVocabulary,
        rows: int,
        unroll: int,
        bidirectional: bool = True,
        state: dict[str, Any] | None = None,
        contiguous: bool = False,
    ) -> None:
        self.vocab = vocab
        self.rows = rows
        self.unroll = unroll
        self.directions = 2 if bidirectional else 1
        state = state or {"row_consumed": [0] * rows, "forward": [[] for _ in range(rows)],
                          "backward": [[] for _ in range(rows)]}
        # Sentences each row has read; checkpoints older than contiguous streams hold only the
        # total ("consumed"), which is all that dealt rows need.
        self.row_consumed = list(state.get("row_consumed")
                                 or [state["consumed"]] + [0] * (rows - 1))
        self.forward = [list(r) for r in state["forward"]]
        self.backward = [list(r) for r in state["backward"]]
        self._sources: list[Iterator[list[str]]]
        if contiguous:
            bounds = _balanced_bounds(sentences(), rows)
            self._sources = [islice(sentences(), bounds[r] + self.row_consumed[r], bounds[r + 1])
                             for r in range(rows)]
        else:
            self._sources = [islice(sentences(), self.consumed, None)] * rows
        self._exhausted = [False] * rows

    @property
    def consumed(self) -> int:
        """Sentences read so far, over all rows."""
        return sum(self.row_consumed)

    def state(self) -> dict[str, Any]:
        """Position in the corpus, to resume exactly (stored in checkpoints)."""
        return {"consumed": self.consumed, "row_consumed": list(self.row_consumed),
                "forward": [list(r) for r in self.forward],
                "backward": [list(r) for r in self.backward]}

    def _fill(self, row: int) -> None:
        while len(self.forward[row]) < self.unroll + 1 and not self._exhausted[row]:
            sentence = next(self._sources[row], None)
            if sentence is None:
                self._exhausted[row] = True
                return
            self.row_consumed[row] += 1
            self.forward[row] += [BOS_TOKEN, *sentence, EOS_TOKEN]
            self.backward[row] += [EOS_TOKEN, *reversed(sentence), BOS_TOKEN]

    def __iter__(self) -> Iterator[Window]:
        return self

    def __next__(self) -> Window:
        for row in range(self.rows):
            self._fill(row)
        if all(len(r) < 2 for r in self.forward):
            raise StopIteration
        n = self.unroll
        window = window_of([self.forward, self.backward][: self.directions], n, self.vocab)
        for stream in (self.forward, self.backward):
            for buffer in stream:
                del buffer[:n]
        return window


def window_of(streams: list[list[list[str]]], unroll: int, vocab: CorpusVocabulary) -> Window:
    """The next ``unroll`` steps of every row of ``streams`` (the forward rows, then the backward
    ones for a biLM), without consuming them: tokens padded with None, and as targets each step's
    next token, masked out past a row's end and where the next token only starts the next
    sentence (``<S>`` forward, ``</S>`` backward)."""
    skip = [BOS_TOKEN, EOS_TOKEN]
    rows = len(streams[0])
    tokens = [[r[:unroll] + [None] * (unroll - len(r[:unroll])) for r in stream] for stream in streams]
    targets = torch.zeros(len(streams), rows, unroll, dtype=torch.long)
    mask = torch.zeros(len(streams), rows, unroll, dtype=torch.bool)
    for d, stream in enumerate(streams):
        for r, buffer in enumerate(stream):
            for t, word in enumerate(buffer[1 : unroll + 1]):
                if word != skip[d]:
                    targets[d, r, t] = vocab.id(word)
                    mask[d, r, t] = True
    return Window(tokens, targets, mask)
