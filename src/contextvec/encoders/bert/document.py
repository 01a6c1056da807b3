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

Memory: the piece ids of the whole document (integers) and, in floats, one window's hidden
states and the rows of the sentences reached and not yet complete; a sentence is yielded as
soon as the last window supplying its pieces has run.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import check_pass_tokens, evaluating
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.bert.windows import first_pieces, window_spans
from contextvec.text.tokenize import as_sentences


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
    ends = list(itertools.accumulate(len(s) for s in document))   # words up to each sentence's end
    n_words = ends[-1] if ends else 0
    empty = np.zeros((encoder.num_layers, 0, encoder.output_dim), dtype=np.float32)
    if n_words == 0:
        for _ in document:
            yield empty.copy()
        return
    pieces = encoder.tokenizer.encode_words([word for sentence in document for word in sentence])
    ids, word_of_piece = pieces.ids[1:-1], torch.tensor(pieces.word_index[1:-1], dtype=torch.long)
    is_first = first_pieces(word_of_piece)
    pieces_per_word = torch.bincount(word_of_piece, minlength=n_words)
    weight = encoder.model.embeddings.word_embeddings.weight
    # The words of sentences ``done ..`` (whole sentences, allocated when first reached) from
    # word ``base`` on, in ``forward``'s dtype: the output rows not yet yielded.
    pending = weight.new_zeros(encoder.num_layers, 0, encoder.output_dim)
    done = base = 0
    for start, end, keep_start, keep_end in window_spans(len(ids), encoder.window):
        with evaluating(encoder):
            take = torch.arange(keep_start, keep_end)
            if encoder.subword_pooling == "first":
                take = take[is_first[keep_start:keep_end]]
            reached = base + pending.shape[1]
            last = int(word_of_piece[keep_end - 1])
            if last >= reached:   # up to the end of the sentence holding the last word read
                more = ends[bisect.bisect_right(ends, last)] - reached
                grown = pending.new_zeros(encoder.num_layers, more, encoder.output_dim)
                pending = torch.cat([pending, grown], 1)
            row = torch.tensor([encoder.tokenizer.cls_id, *ids[start:end], encoder.tokenizer.sep_id])
            encoder.pool_rows(row.to(weight.device), [len(row)], (take - start + 1).to(weight.device),
                              (word_of_piece[take] - base).to(weight.device), pending)
            # The words before the first piece no window has supplied yet are complete.
            complete = n_words if keep_end == len(ids) else int(word_of_piece[keep_end])
            finished = []
            while done < len(document) and ends[done] <= complete:
                first = ends[done] - len(document[done])
                words = pending[:, first - base:ends[done] - base]
                if encoder.subword_pooling == "mean":
                    counts = pieces_per_word[first:ends[done]].to(words.device, words.dtype)
                    words = words / counts[None, :, None]
                finished.append(words.to("cpu", torch.float32, copy=True).numpy())
                done += 1
            if finished:
                new_base = ends[done - 1]
                pending, base = pending[:, new_base - base:], new_base
        yield from finished
