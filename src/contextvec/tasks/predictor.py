"""Prediction with a saved task model (:class:`TaskModel`, what
:func:`~contextvec.tasks.saved.load_task_model` returns): one label per sentence or sentence
pair, one float per pair for a regression task (STS-B), or one tag per token (NER).

**Exactly the training run's scores.** Prediction computes the encoder's layers the way the
feature cache did (chunks of ``FEATURE_CHUNK`` sentences, the same encoder batches, stored in
the same dtype, the same layer combination; a pair task's second sentences as an entry of their
own, as :func:`~contextvec.tasks.train.attach_features` caches them), then runs the task model
on batches of similar length of the same size as training's evaluation; a fine-tuned BERT reads
its pieces as fine-tuning did. A reloaded model therefore scores the same split exactly as
training reported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.features import FeatureSettings
from contextvec.tasks.finetune import PieceSplit
from contextvec.tasks.models import Indexer
from contextvec.tasks.record import TaskRecord
from contextvec.tasks.schemes import to_scheme
from contextvec.tasks.spec import TaskSpec
from contextvec.tasks.split import Split
from contextvec.tasks.train import PreparedSplit, predict_split, task_layers

FEATURE_CHUNK: int = FeatureSettings().chunk_sentences
"""Sentences per feature chunk: the feature cache's ``chunk_sentences`` (same encoder batches)."""
MAX_TOKENS: int | None = FeatureSettings().max_tokens
"""Padded tokens per encoder batch: the feature cache's ``max_tokens``."""

Item = Sequence[str] | tuple[Sequence[str], Sequence[str]]
"""What :meth:`TaskModel.predict_stream` takes: a token list, or for a pair task two."""


def _tokens(sentences: Iterable[Sequence[str]], what: str) -> list[list[str]]:
    out = [list(s) for s in sentences]
    for i, sentence in enumerate(out):
        if not sentence or not all(isinstance(t, str) and t for t in sentence):
            raise ValueError(f"{what} {i + 1}: expected a non-empty list of non-empty tokens")
    return out


class TaskModel(ABC):
    """A loaded task model ([`load_task_model`][contextvec.tasks.saved.load_task_model]):
    [`predict`][contextvec.tasks.predictor.TaskModel.predict] gives one label per sentence or
    sentence pair, one float per pair for a regression task, or one tag per token for a tagging
    task (NER). Each kind of saved model predicts in its own subclass:
    :class:`FeatureTaskModel` (frozen features), :class:`FineTunedTaskModel` (a fine-tuned BERT).

    Attributes:
        labels: the task's labels (or tags), in the order of the model's outputs; none for a
            regression task.
        scheme: the tag scheme predictions are given in (``"bio"`` = IOB2, ``"iob1"``,
            ``"bioul"``) for a tagging task.
        encoder: the frozen encoder the model reads (None for a fine-tuned BERT or a model
            without contextual vectors).
        seen_mentions: the training split's entity mentions, for NER's seen/unseen scores
            (None for a classification task).
        record: the saved model's ``task.json``.
    """

    encoder: Encoder | None = None

    def __init__(self, spec: TaskSpec, record: TaskRecord, model: nn.Module, device: str) -> None:
        self.spec, self.record, self.model, self.device = spec, record, model, device
        self.labels: list[str] = list(record.labels)
        self.scheme: str = record.model_settings.tag_scheme.value
        seen = record.seen_mentions
        self.seen_mentions: set[str] | None = None if seen is None else set(seen)

    @property
    def config(self) -> dict:
        """``task.json``'s fields as the file holds them (:attr:`record` is the typed form)."""
        return self.record.to_json()

    @property
    def tagging(self) -> bool:
        """True for a task that labels every token (NER), False for one label per sentence."""
        return self.spec.tagging

    @property
    def pair(self) -> bool:
        """True for a task whose items are sentence pairs (MRPC, RTE, STS-B, WNLI)."""
        return self.spec.pair

    @property
    def regression(self) -> bool:
        """True for a task that predicts a float per item (STS-B)."""
        return self.spec.regression

    def predict(self, sentences: Iterable[Sequence[str]], batch_size: int | None = None,
                embed_batch_size: int | None = None, *,
                second: Iterable[Sequence[str]] | None = None) -> list:
        """Predictions for a list of sentences (or sentence pairs), computed as training's
        evaluation computed them (so a reloaded model scores a split exactly as training reported).

        Args:
            sentences: token lists (a pair task: the first sentence of each pair); none may be
                empty, no token may be empty.
            batch_size: items per task-model batch (None: the evaluation batch size recorded at
                training).
            embed_batch_size: sentences per encoder batch (None: the one recorded at training).
            second: a pair task's second sentences, one per item of ``sentences`` (None for a
                single-sentence task).

        Returns:
            One label (a ``str``) per item, a ``float`` per pair for a regression task, or for a
            tagging task one list of tags per sentence (one tag per token, in
            [`scheme`][contextvec.tasks.predictor.TaskModel]).

        Raises:
            ValueError: an empty sentence or token; ``second`` missing for a pair task, given
                for a single-sentence one, or of another length.
        """
        sentences = _tokens(sentences, "sentence")
        seconds = None if second is None else _tokens(second, "second sentence")
        if (seconds is None) == self.pair:
            raise ValueError(f"{self.spec.name} predicts " + (
                "sentence pairs: give the second sentences" if self.pair else
                "single sentences, not pairs"))
        if seconds is not None and len(seconds) != len(sentences):
            raise ValueError(f"{len(sentences)} sentences but {len(seconds)} second sentences")
        if not sentences:
            return []
        batch_size = batch_size or self.record.eval_batch_size
        split = Split(sentences, [None] * len(sentences), "<predict>", second=seconds)
        with torch.no_grad():
            return self._predict(split, batch_size, embed_batch_size)

    @abstractmethod
    def _predict(self, split: Split, batch_size: int, embed_batch_size: int | None) -> list:
        """The predictions of the checked, non-empty ``split`` (the kind's own way)."""

    def predict_stream(self, items: Iterable[Item], chunk: int = FEATURE_CHUNK,
                       batch_size: int | None = None,
                       embed_batch_size: int | None = None) -> Iterator[tuple[Item, object]]:
        """Predictions for a stream of items, ``chunk`` at a time (bounded memory).

        Args:
            items: token lists, or for a pair task ``(first, second)`` token lists (any iterable).
            chunk: items predicted together.
            batch_size: as in [`predict`][contextvec.tasks.predictor.TaskModel.predict].
            embed_batch_size: as in [`predict`][contextvec.tasks.predictor.TaskModel.predict].

        Yields:
            ``(item, prediction)`` for each item, in order.

        Raises:
            ValueError: ``chunk`` below 1, or an empty sentence or token.
        """
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, not {chunk}")

        def run(pending: list) -> Iterator[tuple[Item, object]]:
            if self.pair:
                predicted = self.predict([a for a, _ in pending], batch_size, embed_batch_size,
                                         second=[b for _, b in pending])
            else:
                predicted = self.predict(pending, batch_size, embed_batch_size)
            return zip(pending, predicted, strict=True)

        pending: list = []
        for item in items:
            pending.append(item)
            if len(pending) == chunk:
                yield from run(pending)
                pending = []
        if pending:
            yield from run(pending)

    def score(self, split: Split, predicted: list) -> dict:
        """The task's scores of ``predicted`` against a labelled split.

        Args:
            split: the labelled items (a task reader's ``Split``).
            predicted: [`predict`][contextvec.tasks.predictor.TaskModel.predict]'s output for
                ``split.sentences`` (and ``split.second``).

        Returns:
            The task's metrics by name (accuracy; NER precision/recall/F1; GLUE's F1, Matthews,
            Pearson and Spearman correlation), as training reported them.
        """
        return self.spec.score(split, predicted, "bio", self.seen_mentions)


class FeatureTaskModel(TaskModel):
    """A frozen-feature task model: the encoder's layers computed as the feature cache computed
    them in training (none for a model without contextual vectors), then the task model."""

    def __init__(self, spec: TaskSpec, record: TaskRecord, model: nn.Module, device: str,
                 indexer: Indexer, encoder: Encoder | None = None) -> None:
        super().__init__(spec, record, model, device)
        self.indexer, self.encoder = indexer, encoder

    def _features(self, sentences: Sequence[list[str]], embed_batch_size: int) -> list[np.ndarray]:
        """The encoder's layers as the feature cache stores them and ``attach_features`` keeps them."""
        assert self.encoder is not None and self.record.features is not None
        dtype = self.record.features.dtype
        how = self.record.model_settings.layers.value
        out: list[np.ndarray] = []
        for start in range(0, len(sentences), FEATURE_CHUNK):
            chunk = sentences[start:start + FEATURE_CHUNK]
            arrays: list[np.ndarray] = [np.empty(0)] * len(chunk)
            self.encoder.clear_caches()  # as the feature cache starts each chunk
            for row, array in self.encoder.embed_batches(chunk, embed_batch_size, MAX_TOKENS):
                arrays[row] = task_layers(array.astype(dtype, copy=False), how)
            out += arrays
        return out

    def _predict(self, split: Split, batch_size: int, embed_batch_size: int | None) -> list:
        if self.encoder is not None:
            assert self.record.features is not None  # a frozen-feature model's record has them
            embed = embed_batch_size or self.record.features.embed_batch_size
            split.features = self._features(split.sentences, embed)
            if split.second is not None:  # their own cache entry in training: their own chunks here
                split.second_features = self._features(split.second, embed)
        predicted = predict_split(self.model, PreparedSplit(split, self.indexer, None), batch_size,
                                  self.device)
        if self.tagging and self.scheme != "bio":
            return [to_scheme(tags, "bio", self.scheme) for tags in predicted]
        return predicted


class FineTunedTaskModel(TaskModel):
    """A fine-tuned BERT: reads its word pieces as fine-tuning did."""

    def __init__(self, spec: TaskSpec, record: TaskRecord, model: nn.Module, device: str,
                 tokenizer: WordPieceTokenizer) -> None:
        super().__init__(spec, record, model, device)
        self.tokenizer = tokenizer

    def _predict(self, split: Split, batch_size: int, embed_batch_size: int | None) -> list:
        max_pieces = self.model.config.max_position_embeddings
        return PieceSplit(split, self.tokenizer, self.spec, max_pieces).predict(self.model, batch_size,
                                                                                self.device)
