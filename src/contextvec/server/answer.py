"""``POST /v1/answer``: a saved question-answering model's spans of a context, through the engine.

A question runs on the engine's worker thread like every forward pass, as one item of a job whose
runner is the model's ``answer_questions``: concurrent requests asking for the same ``n_best``
share a call (the model batches their windows by length; padding is masked, so an answer does
not depend on its partners). What a question counts against ``--max-batch-tokens`` is its words
and its context's, the unit of the other endpoints' budget.

Only the model protocol of :mod:`contextvec.tasks.qa.saved` is used: any saved kind (a
fine-tuned BERT, a span model over frozen features) is served alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import orjson

from contextvec.server import schemas
from contextvec.server.errors import APIError
from contextvec.server.service import Call, Service
from contextvec.server.vectors import has_lone_surrogate
from contextvec.tasks.qa.decode import SpanAnswer
from contextvec.tasks.qa.saved import QAModel
from contextvec.tasks.qa.squad import Question

WARMUP_QUESTION = "What jumps over the lazy dog ?"
WARMUP_CONTEXT = "The quick brown fox jumps over the lazy dog . " * 8


@dataclass(frozen=True)
class ServedTask:
    """A question-answering model a server answers with, and its id in responses."""

    name: str
    model: QAModel


@dataclass(frozen=True)
class Asked:
    """One request's question as an engine item; its length is what it counts against the
    batching budget: the words of the question and of its context."""

    question: Question
    words: int

    def __len__(self) -> int:
        return self.words


def warm_up(model: QAModel) -> None:
    """Answer a few questions so the first request is not slow (allocator, kernels, caches)."""
    for _ in range(2):
        model.answer(WARMUP_QUESTION, WARMUP_CONTEXT)


class Answerer:
    """What ``/v1/answer`` does: check the texts, queue the question, build the JSON."""

    def __init__(self, task: ServedTask, service: Service) -> None:
        self.task, self.service = task, service

    async def answer(self, body: schemas.AnswerRequest, call: Call) -> bytes:
        """``POST /v1/answer``: the model's ``n_best`` spans of the context, best first."""
        limit = self.service.settings.max_context_chars
        for name in ("question", "context"):
            text = getattr(body, name)
            if not text.strip():
                raise APIError(400, f"{name}: empty or blank text", name)
            if has_lone_surrogate(text):
                raise APIError(422, f"{name}: contains a lone surrogate (not valid Unicode)", name)
        if len(body.context) > limit:
            raise APIError(422, f"context: {len(body.context)} characters, over the limit of {limit} "
                                "(--max-context-chars)", "context")
        asked = Asked(Question("request", body.question, body.context, ()),
                      len(body.question.split()) + len(body.context.split()))
        run = partial(_answer_all, self.task.model, body.n_best)
        answers: list[SpanAnswer] = (await self.service.vectors(
            call, [asked], run, ("answer", body.n_best), "context"))[0]
        # The model's empty answer (no span anywhere) is no span: the list is then empty.
        spans = [a.to_dict() for a in answers if math.isfinite(a.score)]
        return orjson.dumps({"model": self.task.name, "answers": spans})


def _answer_all(model: QAModel, n_best: int, items: Sequence[Asked]) -> list[list[SpanAnswer]]:
    """A batch's questions answered in one call (on the worker thread)."""
    return model.answer_questions([item.question for item in items], n_best)
