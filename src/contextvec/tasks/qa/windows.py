"""Questions and contexts as BERT rows: ``[CLS] question [SEP] context window [SEP]``.

A context longer than a row holds is cut into windows of pieces that overlap: a window starts
``stride`` pieces after the one before it, and holds ``max_length - len(question) - 3``
context pieces (BERT's reference ``run_squad.py``: ``doc_stride`` is the step between window
starts). The question is cut to its first ``max_query`` pieces. A piece seen by several windows
*belongs* to the one where it has the most context, ``min(pieces left, pieces right) + 0.01 *
window length`` (the reference code's ``_check_is_max_context``, first window on ties): an
answer may only start at a piece in the window it belongs to, so overlaps never answer twice.

Pieces keep their character offsets into the original context (the tokenizer's), so a span of
pieces maps back to the exact characters of the context. For training, a window holding the
whole first reference answer targets its first and last piece; a window that does not targets
the ``[CLS]`` piece at position 0 (as the reference implementation trains SQuAD v1.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from contextvec.encoders.bert.rows import pad_rows
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks.qa.squad import Question


@dataclass(frozen=True)
class WindowSettings:
    """How questions and contexts become rows (the BERT paper's and HF's SQuAD defaults)."""

    max_length: int = 384
    """Pieces per row, special pieces included (at most the model's positions)."""
    stride: int = 128
    """Pieces from one window's start to the next's."""
    max_query: int = 64
    """The most pieces of a question kept."""
    max_answer_length: int = 30
    """The longest answer decoded, in pieces."""
    n_best: int = 20
    """Spans kept per window while decoding (the best one across windows is the answer)."""

    def __post_init__(self) -> None:
        for name in ("max_length", "stride", "max_query", "max_answer_length", "n_best"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.max_length - self.max_query - 3 < 1:
            raise ValueError(f"max_length {self.max_length} leaves no room for context after a question "
                             f"of max_query {self.max_query} pieces and 3 special pieces")


@dataclass(frozen=True)
class Window:
    """One row: ``ids`` and ``token_types`` (pieces,); the context pieces are ``ids[context_at:
    context_at + len(offsets)]``, each with its ``(start, end)`` characters in the context and
    whether this window is where it ``belongs`` (see the module docstring). ``question``: the
    index of its question; ``target``: the (start, end) piece positions trained on."""

    question: int
    ids: tuple[int, ...]
    context_at: int
    offsets: tuple[tuple[int, int], ...]
    belongs: tuple[bool, ...]
    target: tuple[int, int] = (0, 0)

    @property
    def token_types(self) -> list[int]:
        return [0] * self.context_at + [1] * (len(self.ids) - self.context_at)


def _piece_span(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The first and last piece overlapping characters ``[start, end)``; None if none does."""
    first = next((i for i, (_, e) in enumerate(offsets) if e > start), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def make_windows(
    questions: Sequence[Question], tokenizer: WordPieceTokenizer, settings: WindowSettings,
    train: bool = False,
) -> list[Window]:
    """Every question's windows, in question order (each question has at least one). With
    ``train``, each window gets its target from the question's first answer."""
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    encoder = tokenizer.tokenizer
    contexts = list(dict.fromkeys(q.context for q in questions))
    encoded = dict(zip(contexts, encoder.encode_batch(contexts, add_special_tokens=False), strict=True))
    queries = encoder.encode_batch([q.question for q in questions], add_special_tokens=False)
    windows: list[Window] = []
    for index, (question, query) in enumerate(zip(questions, queries, strict=True)):
        context = encoded[question.context]
        ids, offsets = context.ids, context.offsets
        if not ids:
            raise ValueError(f"question {question.id!r}: its context has no word pieces")
        query_ids = query.ids[: settings.max_query] or [tokenizer.unk_id]
        room = settings.max_length - len(query_ids) - 3
        spans = []  # (first piece, count) of each window
        start = 0
        while True:
            count = min(len(ids) - start, room)
            spans.append((start, count))
            if start + count >= len(ids):
                break
            start += min(count, settings.stride)
        answer = None
        if train and question.answers:
            answer = _piece_span(offsets, question.answers[0].start, question.answers[0].end)
        context_at = len(query_ids) + 2
        for first, count in spans:
            belongs = tuple(_best_window(spans, first + i) == (first, count) for i in range(count))
            target = (0, 0)
            if answer is not None and first <= answer[0] and answer[1] < first + count:
                target = (answer[0] - first + context_at, answer[1] - first + context_at)
            windows.append(Window(index, (cls_id, *query_ids, sep_id, *ids[first:first + count], sep_id),
                                  context_at, tuple(offsets[first:first + count]), belongs, target))
    return windows


def _best_window(spans: Sequence[tuple[int, int]], piece: int) -> tuple[int, int]:
    best, best_score = spans[0], -1.0
    for first, count in spans:
        if first <= piece < first + count:
            score = min(piece - first, first + count - 1 - piece) + 0.01 * count
            if score > best_score:
                best, best_score = (first, count), score
    return best


@dataclass(frozen=True)
class WindowBatch:
    """Padded rows of windows: ``input_ids``, ``attention_mask``, ``token_type_ids`` (rows,
    pieces); ``starts``/``ends`` (rows, pieces) bool: where an answer may start (context pieces
    the window owns) and end (context pieces)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor

    def to(self, device: torch.device | str) -> WindowBatch:
        return WindowBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.token_type_ids,
                                                     self.starts, self.ends)))


def batch_windows(windows: Sequence[Window], pad_id: int = 0) -> WindowBatch:
    ids, mask = pad_rows([list(w.ids) for w in windows], pad_id)
    types, _ = pad_rows([w.token_types for w in windows], 0)
    starts = torch.zeros_like(mask, dtype=torch.bool)
    ends = torch.zeros_like(mask, dtype=torch.bool)
    for row, w in enumerate(windows):
        ends[row, w.context_at:w.context_at + len(w.offsets)] = True
        starts[row, w.context_at:w.context_at + len(w.offsets)] = torch.tensor(w.belongs)
    return WindowBatch(ids, mask, types, starts, ends)
