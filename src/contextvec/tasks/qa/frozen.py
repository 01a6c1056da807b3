"""Extractive question answering over a frozen encoder's features: training, answering, saving.

**Data.** Contexts and questions are moses tokens with their characters in the original strings
(:mod:`~contextvec.tasks.qa.tokens`); each distinct context is one "sentence" of the feature
cache (:mod:`contextvec.features`, through :func:`~contextvec.tasks.train.attach_features`) and
each question another, so the encoder runs once per context however many questions it has.

**Training** (:func:`train_span_model`): the span model of :mod:`~contextvec.tasks.qa.span_model`
through the one fit loop (:func:`~contextvec.tasks.fit.fit`: Adam, ELMo's mix penalty, batches of
questions whose contexts have similar lengths, early stopping), the epoch kept by the official F1
on dev (:func:`~contextvec.tasks.qa.metric.squad_scores`). The no-contextual baseline is the same
model with ``placement`` ``none`` and no encoder.

**Answers** (:class:`SpanReader`): the best spans of at most ``max_answer_length`` tokens
(:func:`~contextvec.tasks.qa.decode.window_spans` over the start and end log-probabilities, so a
score is ``log p_start + log p_end``); an answer's text is the context's own characters from its
first token's start to its last token's end. Outside training the encoder's layers are computed
the way the feature cache computes them (chunks of ``FEATURE_CHUNK`` sentences, the same encoder
batches, the cache's dtype), so a reloaded model scores dev exactly as training reported.

**Saved models**: :mod:`~contextvec.tasks.qa.span_saved`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from contextvec.encoders.base import Encoder
from contextvec.features import FeatureSettings
from contextvec.tasks import fit as fitting
from contextvec.tasks.fit import TaskReport
from contextvec.tasks.models import (
    Indexer,
    ModelSettings,
    TokenEmbedder,
    Vocabulary,
    build_vocabularies,
    contextual_embedder,
    ngram_vocabulary,
)
from contextvec.tasks.models.vocab import Encoded
from contextvec.tasks.predictor import FEATURE_CHUNK, MAX_TOKENS
from contextvec.tasks.qa.decode import SpanAnswer, window_spans
from contextvec.tasks.qa.metric import squad_scores
from contextvec.tasks.qa.span_model import SpanBatch, SpanModel, SpanSettings
from contextvec.tasks.qa.squad import Question, SquadData
from contextvec.tasks.qa.tokens import SquadTokens, tokenize_squad
from contextvec.tasks.split import Split
from contextvec.tasks.train import ENCODER_PREFIX, TrainSettings, attach_features, task_layers
from contextvec.text.batching import length_batches
from contextvec.text.tokenize import Tokenizer

TOKENIZER = "moses"
"""The tokenizer of contexts and questions (recorded in ``span_model.json``)."""


@dataclass(frozen=True)
class SpanTrainSettings:
    """One span-model training: the token representation, shared biLSTM and mixes (``model``;
    ``placement`` ``none`` for the no-contextual baseline), the span model's own layers
    (``span``), the optimisation (``fit``) and how the frozen features are computed and cached
    (``features``)."""

    model: ModelSettings = field(default_factory=ModelSettings)
    span: SpanSettings = field(default_factory=SpanSettings)
    fit: TrainSettings = field(default_factory=TrainSettings)
    features: FeatureSettings = field(default_factory=FeatureSettings)


@dataclass
class _Prepared:
    """Questions ready for the model: their tokens, word/char ids and (with an encoder) layers."""

    tokens: SquadTokens
    contexts: list[Encoded]
    questions: list[Encoded]
    context_layers: list[np.ndarray] | None
    question_layers: list[np.ndarray] | None

    @property
    def context_lengths(self) -> list[int]:
        return [len(self.tokens.contexts[c]) for c in self.tokens.context_of]

    def batch(self, indexer: Indexer, ids: Sequence[int], device: str, targets: bool) -> SpanBatch:
        t = self.tokens
        where = [t.context_of[i] for i in ids]

        def pick(items: list | None, at: list[int]) -> list | None:
            return None if items is None else [items[k] for k in at]

        context = indexer.batch([t.contexts[c].tokens for c in where], None,
                                pick(self.context_layers, where), pick(self.contexts, where))
        question = indexer.batch([t.questions[i].tokens for i in ids], None,
                                 pick(self.question_layers, list(ids)), pick(self.questions, list(ids)))
        starts = ends = None
        if targets:
            assert t.answers is not None
            starts = torch.tensor([t.answers[i][0] for i in ids])
            ends = torch.tensor([t.answers[i][1] for i in ids])
        return SpanBatch(context, question, starts, ends).to(device)


class SpanReader:
    """A trained span model with what answering needs: its vocabularies (``indexer``), the
    frozen ``encoder`` (None for the no-contextual baseline), the span and feature settings.
    Answers questions on contexts (:meth:`answer_questions`, :meth:`predict`, :meth:`answer`)."""

    def __init__(self, model: SpanModel, indexer: Indexer, encoder: Encoder | None,
                 features: FeatureSettings, batch_size: int = 64, device: str = "cpu") -> None:
        self.model = model.eval()
        self.indexer = indexer
        self.encoder = encoder
        self.features = features
        self.batch_size = batch_size
        self.device = device
        self.tokenizer = Tokenizer(TOKENIZER)
        self.reported: dict = {}

    @property
    def span(self) -> SpanSettings:
        return self.model.span

    def _layers(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The encoder's layers as the feature cache computes and ``attach_features`` keeps them."""
        assert self.encoder is not None
        dtype, how = self.features.dtype.value, self.model.settings.layers.value
        out: list[np.ndarray] = []
        for start in range(0, len(sentences), FEATURE_CHUNK):
            chunk = [list(s) for s in sentences[start:start + FEATURE_CHUNK]]
            arrays: list[np.ndarray] = [np.empty(0)] * len(chunk)
            self.encoder.clear_caches()  # as the feature cache starts each chunk
            for row, array in self.encoder.embed_batches(chunk, self.features.batch_size, MAX_TOKENS):
                arrays[row] = task_layers(array.astype(dtype, copy=False), how)
            out += arrays
        return out

    def prepare(self, tokens: SquadTokens, layers: tuple[list[np.ndarray], list[np.ndarray]] | None = None
                ) -> _Prepared:
        """Index tokenized questions; ``layers``: the contexts' and questions' layers if already
        computed (else computed here when the model reads contextual vectors)."""
        if layers is None and self.encoder is not None:
            layers = (self._layers([c.tokens for c in tokens.contexts]),
                      self._layers([q.tokens for q in tokens.questions]))
        encode = self.indexer.encode
        return _Prepared(tokens, [encode(c.tokens) for c in tokens.contexts],
                         [encode(q.tokens) for q in tokens.questions],
                         *(layers if layers is not None else (None, None)))

    @torch.no_grad()
    def answer_prepared(self, prepared: _Prepared, n_best: int = 1,
                        batch_size: int | None = None) -> list[list[SpanAnswer]]:
        """Each prepared question's ``n_best`` answers, best first (questions whose contexts
        have similar lengths are batched together; padding is masked, so an answer does not
        depend on the other questions asked with it)."""
        self.model.eval()
        t = prepared.tokens
        out: list[list[SpanAnswer]] = [[] for _ in t.questions]
        for ids in length_batches(prepared.context_lengths, batch_size or self.batch_size):
            batch = prepared.batch(self.indexer, ids, self.device, False)
            start, end = self.model.logits(batch)
            mask = batch.context.mask
            firsts, lasts, scores = window_spans(start.log_softmax(-1), end.log_softmax(-1), mask, mask,
                                                 self.span.max_answer_length, n_best)
            for row, i in enumerate(ids):
                context = t.contexts[t.context_of[i]]
                for first, last, score in zip(firsts[row].tolist(), lasts[row].tolist(), scores[row].tolist(),
                                              strict=True):
                    if score == float("-inf"):
                        break
                    begin, finish = context.characters(first, last)
                    out[i].append(SpanAnswer(context.text[begin:finish], begin, finish, score))
        return out

    def answer_questions(self, questions: Sequence[Question], n_best: int = 1,
                         batch_size: int | None = None) -> list[list[SpanAnswer]]:
        """Each question's ``n_best`` answers, best first: the context's characters, their offsets
        into it and ``log p_start + log p_end``."""
        if not questions:
            return []
        asked = tuple(replace(q, answers=()) for q in questions)  # answering reads no answer
        tokens = tokenize_squad(SquadData(asked, (0,) * len(asked), "<questions>"), self.tokenizer)
        return self.answer_prepared(self.prepare(tokens), n_best, batch_size)

    def predict(self, data: SquadData | Sequence[Question], batch_size: int | None = None) -> dict[str, str]:
        """``{question_id: answer_text}``, the official predictions file's content."""
        questions = data.questions if isinstance(data, SquadData) else tuple(data)
        answers = self.answer_questions(questions, 1, batch_size)
        return {q.id: a[0].text for q, a in zip(questions, answers, strict=True)}

    def answer(self, question: str, context: str, n_best: int = 1) -> list[SpanAnswer]:
        """The ``n_best`` answers to one question on one context."""
        return self.answer_questions([Question("q", question, context, ())], n_best)[0]


def _sample(size: int, fraction: float, seed: int) -> list[int]:
    """A seeded ``fraction`` of ``range(size)`` (at least one), in order."""
    if fraction >= 1:
        return list(range(size))
    return sorted(random.Random(seed).sample(range(size), max(1, round(fraction * size))))


def _cached_layers(encoder: Encoder, tokens: SquadTokens, settings: SpanTrainSettings,
                   source: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The contexts' and questions' layers through the feature cache (one entry each)."""
    splits = [Split([list(c.tokens) for c in tokens.contexts], [None] * len(tokens.contexts),
                    f"{source} (contexts)"),
              Split([list(q.tokens) for q in tokens.questions], [None] * len(tokens.questions),
                    f"{source} (questions)")]
    f = settings.features
    attach_features(encoder, splits, settings.model.layers.value, f.cache_dir, f.dtype.value, f.batch_size,
                    settings.fit.progress)
    return splits[0].features, splits[1].features


def build_span_model(words: Vocabulary, chars: Vocabulary, ngrams: Vocabulary | None, settings: ModelSettings,
           span: SpanSettings, encoder: Encoder | None, pretrained: np.ndarray | None = None) -> SpanModel:
    tokens = TokenEmbedder(words, chars, settings, pretrained, ngrams)
    contextual = contextual_embedder(encoder, settings) if settings.num_mixes else None
    return SpanModel(tokens, [], settings, contextual, span=span)


def check_encoder(settings: ModelSettings, encoder: Encoder | None) -> None:
    if (encoder is None) != (settings.num_mixes == 0):
        raise ValueError(f"placement {settings.placement.value!r} needs "
                         f"{'an encoder' if settings.num_mixes else 'no encoder'}")


def train_span_model(train: SquadData, dev: SquadData, encoder: Encoder | None,
                     settings: SpanTrainSettings) -> tuple[TaskReport, SpanReader]:
    """Train the span model on ``train``'s questions (their first answers), keep the epoch best
    on ``dev`` by the official F1, and report dev's exact match and F1 (percentages).

    Args:
        train: labelled questions to train on.
        dev: labelled questions that choose the epoch.
        encoder: the frozen encoder (None for the no-contextual baseline, ``placement`` ``none``).
        settings: see :class:`SpanTrainSettings`.

    Returns:
        The report (``extra``: ``inexact_answers``, the training answers that do not begin and
        end at token boundaries) and the trained :class:`SpanReader` (``reported``: dev's scores).

    Raises:
        ValueError: a question without answers, a context or question without tokens, or an
            encoder given where ``placement`` is ``none`` (or none given where it is not).
    """
    for split in (train, dev):
        if not split.labeled:
            raise ValueError(f"{split.source}: a question without answers cannot be trained or scored on")
    model_settings, fit_settings = settings.model, settings.fit
    check_encoder(model_settings, encoder)
    started = time.perf_counter()
    fitting.seed_everything(fit_settings.seed)
    tokenizer = Tokenizer(TOKENIZER)
    train_tokens, dev_tokens = tokenize_squad(train, tokenizer), tokenize_squad(dev, tokenizer)
    # A fraction of the questions trains, after the features of all are cached: every fraction
    # and seed shares one cache entry.
    keep = _sample(len(train), fit_settings.train_fraction, fit_settings.seed)
    kept_contexts = sorted({train_tokens.context_of[i] for i in keep})
    sentences = ([train_tokens.contexts[c].tokens for c in kept_contexts]
                 + [train_tokens.questions[i].tokens for i in keep])
    words, chars, _ = build_vocabularies(sentences)
    ngrams = ngram_vocabulary(sentences) if model_settings.char_ngram_dim else None
    model = build_span_model(words, chars, ngrams, model_settings, settings.span, encoder)
    device = fit_settings.device
    model.to(device)
    reader = SpanReader(model, Indexer(words, chars, [], ngrams), encoder, settings.features,
                        fitting.eval_batch_size(fit_settings), device)
    layers = None if encoder is None else (
        _cached_layers(encoder, train_tokens, settings, train.source),
        _cached_layers(encoder, dev_tokens, settings, dev.source))
    features_s = time.perf_counter() - started
    prepared_train = reader.prepare(train_tokens, None if layers is None else layers[0])
    prepared_dev = reader.prepare(dev_tokens, None if layers is None else layers[1])

    def dev_scores() -> dict:
        answers = reader.answer_prepared(prepared_dev)
        return squad_scores(dev, {q.id: a[0].text for q, a in zip(dev.questions, answers, strict=True)})

    def loss(ids: list[int]) -> torch.Tensor:
        batch = prepared_train.batch(reader.indexer, [keep[i] for i in ids], device, True)
        return model.loss(batch) + model.mix_penalty(fit_settings.l2)

    trainable = [p for p in model.parameters() if p.requires_grad]
    result = fitting.fit(
        model, lengths=[prepared_train.context_lengths[i] for i in keep],
        objective=fitting.Objective(loss, lambda: dev_scores()["f1"] / 100, "f1"),
        optimisation=fitting.Optimisation(torch.optim.Adam(trainable, lr=fit_settings.lr), trainable),
        settings=fit_settings, patience=fit_settings.patience, frozen_prefix=ENCODER_PREFIX,
    )
    evaluated = time.perf_counter()
    scores = dev_scores()
    eval_seconds = time.perf_counter() - evaluated
    reader.reported = {"exact_match": scores["exact_match"], "f1": scores["f1"]}
    lengths = prepared_train.context_lengths
    tokens = sum(lengths[i] + len(train_tokens.questions[i]) for i in keep)
    n_mix = sum(p.numel() for p in model.contextual.mixes.parameters()) if model.contextual else 0
    runtime = fitting.runtime_summary(tokens, len(keep), result, eval_seconds)
    report = TaskReport(
        task="squad", metric="f1", best_epoch=result.best_epoch, dev=scores, test=None, curve=result.curve,
        mixes=model.mix_summary(), labels=[],
        splits={"train": {"source": train.source, "questions": len(keep),
                          "articles": len({train.articles[i] for i in keep}), "contexts": len(kept_contexts)},
                "dev": {"source": dev.source, "questions": len(dev), "articles": dev.num_articles,
                        "contexts": len(dev_tokens.contexts)}},
        parameters={"trainable": sum(p.numel() for p in trainable), "mixes": n_mix,
                    "word_vocabulary": len(words), "char_vocabulary": len(chars)},
        model_settings={"mode": "features", **asdict(model_settings), "span": asdict(settings.span),
                        "tokenizer": TOKENIZER},
        train_settings=asdict(fit_settings),
        runtime_s={**runtime, "features": round(features_s, 3)},
        extra={"inexact_answers": sum(not train_tokens.exact[i] for i in keep),
               "train_questions_before_fraction": len(train)},
    )
    return report, reader
