"""From start and end logits to answers: n-best spans per window, the best across windows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from contextvec.tasks.qa.windows import Window


@dataclass(frozen=True)
class SpanAnswer:
    """An answer: ``text`` is ``context[start:end]`` (character offsets into the context as
    given); ``score`` the sum of its start and end logits."""

    text: str
    start: int
    end: int
    score: float

    def to_dict(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end, "score": self.score}


def window_spans(
    start_logits: torch.Tensor, end_logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor,
    max_answer_length: int, n_best: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``n_best`` spans of each row by ``start_logits[i] + end_logits[j]``, with ``i`` where
    ``starts`` and ``j`` where ``ends`` allow, ``i <= j < i + max_answer_length``.

    Args: logits and masks (rows, pieces). Returns ``(start, end, score)``, (rows, k) each, best
    first, ``k = min(n_best, pieces * pieces)``; a score of ``-inf`` marks no span.
    """
    length = start_logits.shape[1]
    positions = torch.arange(length, device=start_logits.device)
    offset = positions[None, :] - positions[:, None]  # end - start
    valid = ((offset >= 0) & (offset < max_answer_length))[None] & starts[:, :, None] & ends[:, None, :]
    scores = (start_logits[:, :, None] + end_logits[:, None, :]).float().masked_fill(~valid, float("-inf"))
    best, flat = scores.flatten(1).topk(min(n_best, length * length), dim=1)
    return flat // length, flat % length, best


def best_answers(
    windows: Sequence[Window], spans: Sequence[tuple[list[int], list[int], list[float]]],
    contexts: Sequence[str], n_best: int = 1,
) -> list[list[SpanAnswer]]:
    """Each question's ``n_best`` answers across its windows, best first (ties: the earlier
    window's). ``spans[k]``: window ``k``'s :func:`window_spans` row as lists; ``contexts[q]``:
    question ``q``'s context. A question with no valid span in any window gets the empty answer."""
    found: list[list[tuple[float, int, int, int]]] = [[] for _ in contexts]
    for order, (window, (starts, ends, scores)) in enumerate(zip(windows, spans, strict=True)):
        for i, j, score in zip(starts, ends, scores, strict=True):
            if score == float("-inf"):
                break
            first, last = window.offsets[i - window.context_at], window.offsets[j - window.context_at]
            found[window.question].append((-score, order, first[0], last[1]))
    answers = []
    for context, options in zip(contexts, found, strict=True):
        chosen, seen = [], set()
        for negative, _, start, end in sorted(options):
            if (start, end) in seen:
                continue  # one span seen from two windows: keep its better score
            seen.add((start, end))
            chosen.append(SpanAnswer(context[start:end], start, end, -negative))
            if len(chosen) == n_best:
                break
        answers.append(chosen or [SpanAnswer("", 0, 0, float("-inf"))])
    return answers
