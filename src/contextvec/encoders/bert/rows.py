"""Words -> rows of BERT pieces: :func:`word_rows` (every word, long sentences in sliding windows as
:class:`~contextvec.encoders.bert.encoder.BertEncoder` runs them) and :func:`truncated_rows` (one row
per sentence, cut at the position limit: for sentence classification)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypeVar

import torch

from contextvec.encoders.bert.encoder import window_spans
from contextvec.encoders.bert.tokenizer import WordPieces

Rows = TypeVar("Rows", bound=tuple)


def moved_to(rows: Rows, device: torch.device | str) -> Rows:
    """``rows``, a named tuple of tensors, with each tensor on ``device`` (the ``to`` of
    :class:`WordPieceRows` and :class:`~contextvec.encoders.bert.finetune.PairRows`)."""
    return type(rows)(*(t.to(device) for t in rows))


class WordPieceRows(NamedTuple):
    """Sentences of words as model input (:func:`word_rows`): ``input_ids``/``attention_mask``
    (rows, pieces); ``first_row``/``first_pos`` (words,): where each word's first piece is, all
    words of all sentences in order; ``word_mask`` (sentences, max words): True at real words."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    first_row: torch.Tensor
    first_pos: torch.Tensor
    word_mask: torch.Tensor

    to = moved_to


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Piece-id rows -> ``(input_ids, attention_mask)``, padded to the longest row."""
    longest = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
    return ids, mask


def truncated_rows(
    sentences: Sequence[WordPieces], max_pieces: int, pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per sentence, [CLS] + its first ``max_pieces - 2`` pieces + [SEP]: what the
    sentence classifier reads (a longer sentence loses its end, as in BERT's own code)."""
    if max_pieces < 3:
        raise ValueError(f"max_pieces must leave room for [CLS], a piece and [SEP], not {max_pieces}")
    return pad_rows(
        [p.ids if len(p.ids) <= max_pieces else [*p.ids[: max_pieces - 1], p.ids[-1]] for p in sentences],
        pad_id,
    )


def word_rows(sentences: Sequence[WordPieces], window: int, pad_id: int = 0) -> WordPieceRows:
    """Rows for word-level scoring (:meth:`BertForTokenClassification.word_logits`).

    ``sentences`` are :meth:`~contextvec.encoders.bert.WordPieceTokenizer.encode_batch` results.
    A sentence of more than ``window`` pieces (at most ``max_position_embeddings - 2``) runs in
    overlapping windows as :class:`~contextvec.encoders.bert.BertEncoder` runs it
    (:func:`~contextvec.encoders.bert.window_spans`): each word is read at its first piece, in
    the window in which that piece is most central. No word is dropped.
    """
    rows: list[list[int]] = []
    first_row: list[int] = []
    first_pos: list[int] = []
    counts = []
    for pieces in sentences:
        cls_id, sep_id = pieces.ids[0], pieces.ids[-1]
        content, words = pieces.ids[1:-1], pieces.word_index[1:-1]
        if not content:
            raise ValueError("word_rows needs sentences of at least one word")
        firsts = [j for j, w in enumerate(words) if j == 0 or words[j - 1] != w]
        counts.append(len(firsts))
        for start, end, keep_start, keep_end in window_spans(len(content), window):
            kept = [j for j in firsts if keep_start <= j < keep_end]
            if kept:  # a window that keeps only continuation pieces supplies no word
                first_row.extend([len(rows)] * len(kept))
                first_pos.extend(j - start + 1 for j in kept)  # +1: [CLS]
                rows.append([cls_id, *content[start:end], sep_id])
    ids, mask = pad_rows(rows, pad_id)
    word_mask = torch.arange(max(counts, default=0))[None] < torch.tensor(counts, dtype=torch.long)[:, None]
    return WordPieceRows(
        ids,
        mask,
        torch.tensor(first_row, dtype=torch.long),
        torch.tensor(first_pos, dtype=torch.long),
        word_mask,
    )
