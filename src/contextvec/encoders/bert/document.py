"""A document's sentences with BERT's document context: the document read as one text in windows.

What :meth:`BertEncoder.embed_document <contextvec.encoders.bert.encoder.BertEncoder.embed_document>`
computes, exactly:

- **One text.** The words of all the sentences, in order, are cut into word pieces as one text
  by the encoder's tokenizer: pieces ``0 .. n - 1`` ([CLS] and [SEP] not counted).
- **Windows.** The pieces are read in the windows of ``window_spans(n, encoder.window)``: windows
  of ``window`` pieces starting every ``window // 2`` pieces (at least 1), the last one moved back
  to end at piece ``n``. Each window runs as a model call of its own, one row ``[CLS] window
  [SEP]`` with positions from 0. A document of at most ``window`` pieces is a single row of all
  of them: every sentence sees the whole document.
- **Which window.** Each piece takes its vectors from the window whose centre ``start + (window
  - 1) / 2`` is nearest to it, the earlier window on ties. Given these windows, that is the
  window BERT's reference SQuAD code picks (``_check_is_max_context`` in ``run_squad.py``): the
  highest ``min(left, right) + 0.01 * length``, ``left`` and ``right`` the pieces before and
  after it in the window, the earlier window on equal scores. All windows have ``window`` pieces
  (the single row of a short document is the only window), so ``left + right = window - 1`` and
  ``min(left, right) = (window - 1) / 2 - |piece - centre|``: the most context is the nearest
  centre, with the same ties. The nearest of all centres always belongs to a window holding the
  piece (consecutive centres are at most ``window // 2`` apart, the first and the last
  ``(window - 1) / 2`` from the document's ends). Only the windows' placement differs from
  ``run_squad.py``, whose last window is not moved back.
- **Words.** A word's vectors are pooled from its pieces' by the encoder's ``subword_pooling``,
  as ``forward`` does: ``"first"`` its first piece's, ``"mean"`` the mean of all its pieces'
  (two windows may supply them). An empty sentence gives ``(num_layers, 0, dim)``.

So sentence k's vectors are fixed by the ids of the pieces in the windows that supply its
pieces and by where those windows lie: by the number of pieces before the sentence and, for its
pieces among the document's last ``window``, by ``n``. A supplying window reaches at most
``window - 1`` pieces beyond the sentence, and every piece sees at least ``window // 4`` pieces on
each side (or all the document has on that side, if fewer). Pieces further away count by their
number only: an edit there that keeps the number of pieces leaves sentence k's bits as they
were, one that changes the number of pieces before it may move the windows under it. On one
machine and thread count, the same document gives the same bits in every call, whatever
``pass_tokens``, the documents before it or other callers' work, as every window runs alone as
the same products of the same shapes.

Memory: the piece ids of the whole document and each piece's word (int32 arrays) and, in
floats, one window's hidden states and the rows of the sentences reached and not yet complete,
in one buffer reused from window to window; a sentence is yielded as soon as the last window
supplying its pieces has run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import check_pass_tokens, evaluating
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.bert.windows import window_spans
from contextvec.text.tokenize import as_sentences

_SENTENCES_PER_CALL = 256
"""Sentences per tokenizer call when every word is cut alone."""


class WindowReader(Protocol):
    """What a document's pass reads of a ``BertEncoder`` (whose ``embed_document`` calls
    :func:`document_vectors`, so this module does not import it)."""

    model: BertModel
    tokenizer: WordPieceTokenizer
    window: int
    subword_pooling: str
    num_layers: int
    output_dim: int

    def pool_rows(self, ids: torch.Tensor, row_lengths: Sequence[int], take: torch.Tensor,
                  put: torch.Tensor, out: torch.Tensor) -> None: ...

    def modules(self) -> Iterator[nn.Module]: ...

    def eval(self) -> nn.Module: ...


def document_vectors(
    encoder: WindowReader, sentences: Sequence[Sequence[str]], pass_tokens: int
) -> Iterator[np.ndarray]:
    """Each sentence's float32 ``(num_layers, words, dim)`` array in document order, with the
    document's context as the module docstring says; arguments are checked before the first
    ``next``. ``pass_tokens`` (at least 1) is rounded up to one window, BERT's block."""
    check_pass_tokens(pass_tokens)
    return _sentences(encoder, as_sentences(sentences, "a document"))


def _sentences(encoder: WindowReader, document: list[list[str]]) -> Iterator[np.ndarray]:
    lengths = np.fromiter(map(len, document), dtype=np.int64, count=len(document))
    ends = np.cumsum(lengths)   # words up to each sentence's end
    n_words = int(ends[-1]) if len(ends) else 0
    empty = np.zeros((encoder.num_layers, 0, encoder.output_dim), dtype=np.float32)
    if n_words == 0:
        for _ in document:
            yield empty.copy()
        return
    ids, word_of_piece = _pieces(encoder.tokenizer, document)
    n_pieces = len(ids)
    weight = encoder.model.embeddings.word_embeddings.weight
    pending = _PendingWords(weight, encoder.num_layers, encoder.output_dim, min(n_words, encoder.window))
    done = 0
    for start, end, keep_start, keep_end in window_spans(n_pieces, encoder.window):
        with evaluating(encoder):
            take = np.arange(keep_start, keep_end)
            if encoder.subword_pooling == "first":
                take = take[_first_pieces(word_of_piece, keep_start, keep_end)]
            last = int(word_of_piece[keep_end - 1])
            if last >= pending.reached:   # up to the end of the sentence holding the last word read
                pending.reach(int(ends[np.searchsorted(ends, last, side="right")]))
            row = np.concatenate([[encoder.tokenizer.cls_id], ids[start:end], [encoder.tokenizer.sep_id]])
            row = row.astype(np.int64, copy=False)
            encoder.pool_rows(torch.from_numpy(row).to(weight.device), [len(row)],
                              torch.from_numpy(take - start + 1).to(weight.device),
                              pending.slots(word_of_piece[take]), pending.rows)
            # The words before the first piece no window has supplied yet are complete.
            complete = n_words if keep_end == n_pieces else int(word_of_piece[keep_end])
            finished = []
            while done < len(document) and ends[done] <= complete:
                first, stop = int(ends[done]) - len(document[done]), int(ends[done])
                counts = None
                if encoder.subword_pooling == "mean":
                    lo, hi = np.searchsorted(word_of_piece, [first, stop])
                    counts = np.bincount(word_of_piece[lo:hi] - first, minlength=stop - first)
                finished.append(pending.take(first, stop, counts))
                done += 1
        yield from finished


def _pieces(tokenizer: WordPieceTokenizer, document: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The document's word pieces as one text, ``(n_pieces,)`` int32 each: their ids and their
    words' indices in the document ([CLS] and [SEP] not included). A tokenizer that cuts every
    word alone gets the sentences a group at a time, so no list holds a Python object per piece
    of the whole document; any other cuts all the words in one call, as one text."""
    groups: Iterator[list[list[str]]] = (
        (document[k : k + _SENTENCES_PER_CALL] for k in range(0, len(document), _SENTENCES_PER_CALL))
        if tokenizer.remembers_words else iter([[[word for sentence in document for word in sentence]]]))
    ids, words = [], []
    before = 0
    for group in groups:
        encoded = tokenizer.encode_batch(group)
        ids.append(np.fromiter((i for pieces in encoded for i in pieces.ids[1:-1]), dtype=np.int32))
        index = np.fromiter((w for pieces in encoded for w in pieces.word_index[1:-1]), dtype=np.int32)
        pieces_per_sentence = [len(pieces.ids) - 2 for pieces in encoded]
        words_before = np.cumsum([0, *map(len, group[:-1])], dtype=np.int32) + before
        words.append(index + np.repeat(words_before, pieces_per_sentence))
        before += sum(map(len, group))
    return np.concatenate(ids), np.concatenate(words)


def _first_pieces(word_of_piece: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``(stop - start,)`` bool: True at the pieces ``start:stop`` that begin their word."""
    words = word_of_piece[max(start - 1, 0) : stop]
    if start == 0:
        return np.concatenate([[True], words[1:] != words[:-1]])
    return words[1:] != words[:-1]


class _PendingWords:
    """The output rows of the words reached and not yet yielded, ``(num_layers, capacity, dim)`` in
    ``forward``'s dtype: word ``w`` in slot ``w % capacity``. One buffer serves every window (it
    grows only for words in flight beyond its capacity, a sentence longer than it), so a long
    document allocates no new rows window after window. Slots are zero until written."""

    def __init__(self, like: torch.Tensor, num_layers: int, dim: int, capacity: int) -> None:
        self.rows = like.new_zeros(num_layers, capacity, dim)
        self.base = self.reached = 0   # words ``base .. reached`` are held

    def _slots(self, first: int, stop: int, capacity: int) -> torch.Tensor:
        return (torch.arange(first, stop) % capacity).to(self.rows.device)

    def slots(self, words: np.ndarray) -> torch.Tensor:
        """The slots of ``words`` (all held), for ``pool_rows``'s ``put``."""
        return torch.from_numpy(words.astype(np.int64) % self.rows.shape[1]).to(self.rows.device)

    def reach(self, stop: int) -> None:
        """Hold the words up to ``stop``, growing the buffer if they do not fit."""
        if stop - self.base > self.rows.shape[1]:
            grown = self.rows.new_zeros(self.rows.shape[0], max(2 * self.rows.shape[1], stop - self.base),
                                        self.rows.shape[2])
            held = self.rows.index_select(1, self._slots(self.base, self.reached, self.rows.shape[1]))
            grown.index_copy_(1, self._slots(self.base, self.reached, grown.shape[1]), held)
            self.rows = grown
        self.reached = stop

    def take(self, first: int, stop: int, counts: np.ndarray | None) -> np.ndarray:
        """Words ``first .. stop`` (the first ones held) as float32 ``(num_layers, words, dim)``,
        divided by ``counts`` (each word's pieces) for mean pooling; their slots are freed."""
        slots = self._slots(first, stop, self.rows.shape[1])
        words = self.rows.index_select(1, slots)
        if counts is not None:
            words = words / torch.from_numpy(counts).to(words.device, words.dtype)[None, :, None]
        self.rows.index_fill_(1, slots, 0)
        self.base = stop
        return words.to("cpu", torch.float32, copy=True).numpy()
