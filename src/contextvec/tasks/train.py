"""Training and evaluating the frozen-feature task models (``contextvec train-task``).

**Data.** :func:`load_split` reads a task's file through the task table
(:mod:`contextvec.tasks.spec`). The training set may be cut to a seeded random fraction
(:func:`~contextvec.tasks.split.subsample`; ELMo's sample-efficiency study), after the features
are attached, so every fraction and seed shares one feature-cache entry.

**Contextual features.** :func:`attach_features` computes the frozen encoder's layers once per
split (and once for the second sentences of a pair task) through the disk cache of
:mod:`contextvec.features` and keeps them in memory in the cache's dtype (only the fixed
combination when ``layers`` is not ``mix``), so an epoch runs only the task model.

**Context.** Under document context (``Context.DOCUMENT``), a split's features are computed
per document (``Split.documents``) with ``Encoder.embed_document``, so each sentence's vectors
depend on its document; the cache keys on the context and the document boundaries.

**Pairs and scores.** A pair task's split carries its second sentences; :class:`PreparedSplit`
then makes :class:`~contextvec.tasks.models.PairBatch` batches for the
:class:`~contextvec.tasks.models.PairModel`. A regression task (STS-B) has float labels, no label
set, and float predictions.

**Training** (:func:`train_task`): seeds (``random``, numpy, torch), Adam, the ELMo mix penalty
``lambda * ||w||^2`` added to the loss, and the fit loop of :mod:`contextvec.tasks.fit` (batches
of similar length, clipping, dev after every epoch, early stopping after ``patience`` epochs, the
best-on-dev weights restored). The test split, when given, is evaluated once, with the best
weights. Metrics: :mod:`contextvec.tasks.metrics`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from contextvec.documents.settings import Context, as_context
from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.combine import combine_layers
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureFile, FeatureSettings, cached_features
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.fit import (
    FitSettings,
    Objective,
    Optimisation,
    TaskReport,
    eval_batch_size,
    fit,
    runtime_summary,
    seed_everything,
    training_batches,
)
from contextvec.tasks.metrics import accuracy, entity_mentions, ner_scores
from contextvec.tasks.models import (
    Batch,
    Indexer,
    ModelSettings,
    PairBatch,
    TaskModelBase,
    TokenEmbedder,
    build_vocabularies,
    check_layers,
    contextual_embedder,
    ngram_vocabulary,
    pair_batch,
)
from contextvec.tasks.schemes import to_scheme
from contextvec.tasks.spec import TAGGING, TASKS, TaskSpec, as_task, get_task
from contextvec.tasks.split import Split, subsample
from contextvec.text.batching import length_batches

__all__ = ["ENCODER_PREFIX", "TAGGING", "TASKS", "PreparedSplit", "Split", "TaskReport", "TrainSettings",
           "accuracy", "attach_features", "build_task_model", "entity_mentions", "load_split", "ner_scores",
           "predict_split", "subsample", "task_labels", "task_layers", "to_scheme", "train_task",
           "training_batches"]

ENCODER_PREFIX = "contextual.encoder."
"""State-dict keys of the frozen encoder: never trained, so never copied as "best weights"."""


@dataclass(frozen=True)
class TrainSettings(FitSettings):
    """Optimisation settings of the frozen-feature models. ``patience``: early stopping; ``l2``:
    ELMo's lambda on the mix weights (0.001 in the paper's main results; 1.0 pushes the weights
    towards an equal average)."""

    patience: int = 5
    l2: float = 0.001

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.patience < 1 or self.l2 < 0:
            raise ValueError(f"patience must be >= 1 and l2 >= 0: {self}")


def load_split(task: str, path: str | os.PathLike, max_sentences: int | None = None) -> Split:
    """Read a task file: CoNLL-2003 for ``ner``, SST trees for ``sst5``/``sst2``, TREC labels."""
    return get_task(task).load(path, max_sentences)


def task_labels(task: str, labels: Sequence, scheme: str = "bio") -> list[str]:
    """The label set of a training split: tags in ``scheme`` (``O`` first, then by type) or classes."""
    return get_task(task).label_set(labels, scheme)


def attach_features(
    encoder: Encoder,
    splits: Sequence[Split],
    layers: str = "mix",
    cache_dir: str | os.PathLike | None = None,
    dtype: str = "float32",
    batch_size: int = 64,
    progress: bool = True,
    context: Context | str = Context.SENTENCE,
) -> float:
    """Fill each split's ``features`` (and a pair split's ``second_features``) from the feature
    cache; returns the seconds it took.

    ``context``: ``sentence`` (each sentence alone) or ``document`` (each sentence read in its
    document, ``Split.documents``: a split without documents, or a pair split, is a ``ValueError``).

    ``layers``: ``mix`` keeps all layers; a fixed combination (``last``, ``sum_last_4``,
    ``concat_last_4``) keeps only that, as one layer (the cache itself always holds all layers).
    The cache keys on the sentence list, so a pair split's second sentences are an entry of their own.
    """
    check_layers(layers, encoder.num_layers)
    context = as_context(context)
    if context is Context.DOCUMENT:
        for split in splits:
            if split.documents is None or split.second is not None:
                raise ValueError(f"{split.source}: no documents marked in the file, so no document context "
                                 "(use --context sentence)")
    started = time.perf_counter()
    model_id = model_identity(encoder)

    def cached(sentences: list[list[str]], label: str, documents: list[int] | None) -> list[np.ndarray]:
        path = cached_features(encoder, sentences, FeatureSettings(cache_dir, dtype, batch_size),
                               progress=progress, label=label, model_id=model_id, context=context,
                               documents=documents)
        with FeatureFile.open(path) as features:
            # Read only the layers the combination needs (BERT has 13), in the stored dtype.
            wanted = {"mix": 0, "last": features.num_layers - 1}.get(layers, features.num_layers - 4)
            kept = task_layers(features.stored_layers(wanted), layers)
            offsets = features.offsets
        return [kept[:, offsets[i]:offsets[i + 1]] for i in range(len(sentences))]

    for split in splits:
        split.features = cached(split.sentences, split.source, split.documents)
        if split.second is not None:
            split.second_features = cached(split.second, f"{split.source} (second sentences)", None)
    return time.perf_counter() - started


def task_layers(layers: np.ndarray, how: str) -> np.ndarray:
    """The ``(k, tokens, dim)`` layers the model sees of ``layers``, in their dtype: all
    (``mix``), the last, or a fixed combination (summed in float32, stored back in the dtype).
    ``layers`` may hold only the last 1 or 4 layers that a fixed combination needs."""
    if how == "mix":
        return layers
    if how == "last":
        return layers[-1:]
    return combine_layers(layers[-4:].astype(np.float32), how)[None].astype(layers.dtype)


class PreparedSplit:
    """A split with its sentences already indexed (word and char ids computed once); a pair
    split's batches are :class:`~contextvec.tasks.models.PairBatch`."""

    def __init__(self, split: Split, indexer: Indexer, labels: list | None) -> None:
        self.split = split
        self.labels = labels
        self.encoded = [indexer.encode(s) for s in split.sentences]
        self.second = None if split.second is None else [indexer.encode(s) for s in split.second]
        self.indexer = indexer

    def batch(self, ids: Sequence[int], device: str, with_labels: bool) -> Batch | PairBatch:
        s = self.split
        labels = [self.labels[i] for i in ids] if with_labels and self.labels is not None else None

        def pick(items: list | None) -> list | None:
            return None if items is None else [items[i] for i in ids]

        if self.second is not None:
            layers = None if s.features is None else (pick(s.features), pick(s.second_features))
            return pair_batch(self.indexer, pick(s.sentences), pick(s.second), labels, layers,
                              (pick(self.encoded), pick(self.second))).to(device)
        return self.indexer.batch(pick(s.sentences), labels, pick(s.features), pick(self.encoded)).to(device)


def predict_split(model: TaskModelBase, data: PreparedSplit, batch_size: int, device: str) -> list:
    """The model's prediction for each item of ``data``, in order (batches of similar length)."""
    model.eval()
    out: list = [None] * len(data.split)
    with torch.no_grad():
        for ids in length_batches(data.split.item_lengths, batch_size):
            for i, prediction in zip(ids, model.predict(data.batch(ids, device, False)), strict=True):
                out[i] = prediction
    return out


def build_task_model(
    task: str | TaskSpec,
    train: Split,
    others: Sequence[Split],
    settings: ModelSettings,
    encoder: Encoder | None = None,
    vectors: WordVectors | None = None,
) -> tuple[TaskModelBase, Indexer]:
    """The task model and its indexer, with vocabularies from ``train`` (see models.py); ``task``:
    its name or its :class:`~contextvec.tasks.spec.TaskSpec`."""
    spec = as_task(task)
    if train.pair != spec.pair:
        raise ValueError(f"{spec.name} is a {'pair' if spec.pair else 'single-sentence'} task, "
                         f"{train.source} has {'pairs' if train.pair else 'single sentences'}")
    words, chars, pretrained = build_vocabularies(
        train.all_sentences, [s for split in others for s in split.all_sentences], vectors
    )
    labels = spec.label_set(train.labels, settings.tag_scheme)
    ngrams = ngram_vocabulary(train.all_sentences) if settings.char_ngram_dim else None
    indexer = Indexer(words, chars, labels, ngrams)
    tokens = TokenEmbedder(words, chars, settings, pretrained, ngrams)
    contextual = None
    if settings.num_mixes:
        if encoder is None:
            raise ValueError(f"placement {settings.placement.value!r} needs an encoder")
        contextual = contextual_embedder(encoder, settings)
    return spec.model_class(settings)(tokens, labels, settings, contextual), indexer


def train_task(
    task: str | TaskSpec,
    train: Split,
    dev: Split,
    test: Split | None,
    model_settings: ModelSettings,
    settings: TrainSettings,
    encoder: Encoder | None = None,
    vectors: WordVectors | None = None,
) -> tuple[TaskReport, TaskModelBase]:
    """Train a task model, keep its best-on-dev weights, score dev (and test); see the module doc.
    The model keeps what saving it needs: ``indexer``, ``seen_mentions`` (the entity mentions of
    the training sentences it saw) and ``eval_batch_size``.

    Splits with ``features`` feed the precomputed layers to the model; without, the model runs
    the encoder itself (slow: every epoch re-encodes the data).
    """
    spec = as_task(task)
    seed_everything(settings.seed)
    full_train_size = len(train)
    train = subsample(train, settings.train_fraction, settings.seed)
    others = [dev] + ([test] if test is not None else [])
    model, indexer = build_task_model(spec, train, others, model_settings, encoder, vectors)
    model.indexer = indexer  # kept with the model: a saved model needs its vocabularies
    device = settings.device
    model.to(device)
    scheme = model_settings.tag_scheme
    train_labels = [to_scheme(t, scheme) for t in train.labels] if spec.tagging else train.labels
    prepared_train = PreparedSplit(train, indexer, train_labels)
    prepared_dev = PreparedSplit(dev, indexer, None)
    seen = spec.seen_mentions(train)
    # What a saved model needs besides its weights: kept with the model, as its indexer.
    model.seen_mentions, model.eval_batch_size = seen, eval_batch_size(settings)

    def evaluate(data: PreparedSplit) -> dict:
        predicted = predict_split(model, data, model.eval_batch_size, device)
        return spec.score(data.split, predicted, scheme, seen)

    def loss(ids: list[int]) -> torch.Tensor:
        return model.loss(prepared_train.batch(ids, device, True)) + model.mix_penalty(settings.l2)

    trainable = [p for p in model.parameters() if p.requires_grad]
    result = fit(
        model, lengths=train.item_lengths,
        objective=Objective(loss, lambda: evaluate(prepared_dev)[spec.metric], spec.metric),
        optimisation=Optimisation(torch.optim.Adam(trainable, lr=settings.lr), trainable), settings=settings,
        patience=settings.patience, frozen_prefix=ENCODER_PREFIX,
    )
    started = time.perf_counter()
    dev_scores = evaluate(prepared_dev)
    test_scores = evaluate(PreparedSplit(test, indexer, None)) if test is not None else None
    eval_seconds = time.perf_counter() - started
    n_mix = sum(p.numel() for p in model.contextual.mixes.parameters()) if model.contextual else 0
    report = TaskReport(
        task=spec.name, metric=spec.metric, best_epoch=result.best_epoch, dev=dev_scores, test=test_scores,
        curve=result.curve, mixes=model.mix_summary(), labels=list(indexer.labels),
        splits={
            name: {"source": s.source, "sentences": len(s), "tokens": s.num_tokens}
            for name, s in (("train", train), ("dev", dev), ("test", test)) if s is not None
        },
        parameters={"trainable": sum(p.numel() for p in trainable), "mixes": n_mix,
                    "word_vocabulary": len(indexer.words), "char_vocabulary": len(indexer.chars)},
        model_settings=asdict(model_settings), train_settings=asdict(settings),
        runtime_s=runtime_summary(train.num_tokens, len(train), result, eval_seconds),
        extra={"train_sentences_before_fraction": full_train_size},
    )
    return report, model
