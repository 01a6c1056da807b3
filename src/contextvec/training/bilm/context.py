"""Perplexity under a context: every sentence alone, or every document read in order.

``sentence``: each sentence is scored from the zero state, ``<S> w1 .. wn </S>``, whatever its
neighbours. ``document``: the forward LM reads the document ``<S> s1 </S> <S> s2 </S> ..`` left
to right and the backward LM right to left, each carrying its LSTM states from sentence to
sentence (as ``Encoder.embed_document`` does); the states start from zero at each document. The
targets are those of :mod:`~contextvec.training.bilm.batcher`: a sentence of n words gives n + 1
predictions per direction (``<S>`` forward and ``</S>`` backward, which merely start the next
sentence, are not scored), so both contexts score the same tokens and their perplexities compare
directly.

Segments (a sentence under ``sentence``, a document under ``document``) are dealt to parallel
rows read ``unroll`` tokens at a time; a segment starts at a window's first step in a row whose
state is zeroed there, and the rest of its last window is padding that is not scored.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import torch

from contextvec.documents.settings import Context, as_context
from contextvec.io.document_formats import DocumentFormat, iter_documents_as
from contextvec.text.chars import BOS_TOKEN, EOS_TOKEN
from contextvec.text.tokenize import Tokenizer, TokenizerName
from contextvec.training.bilm.batcher import Window, window_of
from contextvec.training.bilm.lm import LanguageModel
from contextvec.training.bilm.model_files import Perplexity, score_windows
from contextvec.training.corpus import CorpusVocabulary

Document = list[list[str]]
"""A document's tokenized sentences, in order."""


def read_token_documents(
    paths: Iterable[str | os.PathLike], document_format: DocumentFormat | str = DocumentFormat.BLANK_LINES,
    tokenizer: TokenizerName | str = TokenizerName.WHITESPACE,
) -> Iterator[Document]:
    """The documents of every file in order (none spans two files), each its sentences as
    tokens; sentences without tokens are left out. One document is held at a time."""
    tokenize = Tokenizer(tokenizer)
    for path in paths:
        for lines in iter_documents_as(path, document_format):
            yield [tokens for line in lines for tokens in tokenize(line) if tokens]


def _segments(documents: Iterable[Document], context: Context) -> Iterator[Document]:
    for document in documents:
        sentences = [s for s in document if s]
        if context is Context.DOCUMENT:
            if sentences:
                yield sentences
        else:
            yield from ([s] for s in sentences)


class SegmentBatcher:
    """:class:`Window` s over segments, each starting at a window's first step in its row.

    Iterating yields ``(window, fresh)``: ``fresh`` lists the rows that start a new segment at
    this window, whose carried states must be zeroed before it is read.
    """

    def __init__(self, segments: Iterable[Document], vocab: CorpusVocabulary, rows: int, unroll: int,
                 bidirectional: bool = True) -> None:
        self._segments = iter(segments)
        self.vocab = vocab
        self.rows = rows
        self.unroll = unroll
        self.directions = 2 if bidirectional else 1
        self.forward: list[list[str]] = [[] for _ in range(rows)]
        self.backward: list[list[str]] = [[] for _ in range(rows)]

    def __iter__(self) -> Iterator[tuple[Window, list[int]]]:
        n = self.unroll
        while True:
            fresh = []
            for row in range(self.rows):
                if len(self.forward[row]) < 2:  # its segment is read to the end
                    segment = next(self._segments, None)
                    self.forward[row] = [] if segment is None else [
                        t for sentence in segment for t in (BOS_TOKEN, *sentence, EOS_TOKEN)]
                    self.backward[row] = self.forward[row][::-1]
                    if segment is not None:
                        fresh.append(row)
            if all(len(r) < 2 for r in self.forward):
                return
            window = window_of([self.forward, self.backward][: self.directions], n, self.vocab)
            for stream in (self.forward, self.backward):
                for buffer in stream:
                    del buffer[:n]
            yield window, fresh


@torch.no_grad()
def evaluate_context_perplexity(
    model: LanguageModel,
    documents: Iterable[Document],
    vocab: CorpusVocabulary,
    context: Context | str,
    rows: int = 32,
    unroll: int = 20,
    progress: bool = False,
) -> Perplexity:
    """Exact full-softmax perplexity, ``exp(mean NLL)`` with gold history, per direction, with
    each sentence read alone (``context="sentence"``) or after (forward) and before (backward)
    the rest of its document (``"document"``); see the module's docstring.

    Args:
        model: the LM with its softmax.
        documents: each document's tokenized sentences, in order (read once).
        vocab: the softmax's vocabulary (unknown words are its ``<UNK>``).
        context: ``"sentence"`` or ``"document"``.
        rows: segments read in parallel.
        unroll: steps per window; states are carried between a segment's windows.
        progress: show a progress bar of scored tokens.

    Raises:
        ValueError: no token to score.
    """
    context = as_context(context)
    batcher = SegmentBatcher(_segments(documents, context), vocab, rows, unroll, model.config.bidirectional)
    return score_windows(model, batcher, f"perplexity ({context} context)", progress)
