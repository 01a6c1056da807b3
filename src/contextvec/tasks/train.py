"""Training and evaluating the task models (``contextvec train-task``).

**Data.** :func:`load_split` reads a task's file (:mod:`contextvec.tasks.readers`). The training
set may be cut to a seeded random fraction (:func:`subsample`; ELMo's sample-efficiency study),
after the features are attached, so every fraction and seed shares one feature-cache entry.

**Contextual features.** :func:`attach_features` computes the frozen encoder's layers once per
split through the disk cache of :mod:`contextvec.tasks.features` and keeps them in memory in the
cache's dtype (only the fixed combination when ``layers`` is not ``mix``), so an epoch runs only the
task model.

**Training** (:func:`train_task`): seeds (``random``, numpy, torch), Adam, batches of sentences of
similar length (sorted by length with 10% multiplicative noise, then shuffled as batches),
gradient-norm clipping, the ELMo mix penalty ``lambda * ||w||^2`` added to the loss, evaluation on
dev after every epoch, early stopping after ``patience`` epochs without a better dev score, and
the best-on-dev weights restored at the end (ties keep the earlier epoch). The test split, when
given, is evaluated once, with the best weights; it never influences training.

**Metrics.** NER: entity precision/recall/F1 from seqeval on **IOB2** tags: gold and predicted
tags are converted from IOB1 (the CoNLL-2003 files) first. ``f1`` is seqeval's default mode,
which scores chunks as the CoNLL ``conlleval`` script does (the standard for CoNLL-2003);
``f1_strict`` is its strict IOB2 mode. With the default constrained CRF every prediction is a
well-formed sequence, so the two agree. ``by_mention`` splits the entities into those whose words
were annotated as an entity somewhere in the training split (``seen``) and the rest (``unseen``),
with P/R/F1 for each: pretrained representations help most on unseen mentions, and held-out sets
differ in how many they have (Augenstein et al. 2017). Classification: accuracy.
"""

from __future__ import annotations

import math
import os
import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from seqeval.metrics import classification_report, f1_score
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2
from torch import nn
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.combine import combine_layers
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.features import FeatureFile, cached_features, model_identity
from contextvec.tasks.models import (
    Batch,
    Indexer,
    ModelSettings,
    NerTagger,
    SentenceClassifier,
    TokenEmbedder,
    build_vocabularies,
    check_layers,
    contextual_embedder,
)
from contextvec.tasks.readers import (
    bioul_to_iob2,
    iob1_to_iob2,
    iob2_to_bioul,
    iob2_to_iob1,
    read_conll2003,
    read_sst,
    read_trec,
)
from contextvec.text.batching import length_batches

TASKS = ("ner", "sst5", "sst2", "trec")
TAGGING = ("ner",)
ENCODER_PREFIX = "contextual.encoder."
"""State-dict keys of the frozen encoder: never trained, so never copied as "best weights"."""


@dataclass
class Split:
    """One data split. ``labels``: per-token tags (tagging) or one label per sentence;
    ``features``: the encoder's layers per sentence, ``(num_layers, n_tokens, dim)``, or None."""

    sentences: list[list[str]]
    labels: list
    source: str
    features: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.sentences)

    def subset(self, ids: Sequence[int], source: str) -> Split:
        feats = None if self.features is None else [self.features[i] for i in ids]
        return Split([self.sentences[i] for i in ids], [self.labels[i] for i in ids], source, feats)


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings. ``l2``: ELMo's lambda on the mix weights (0.001 in the paper's
    main results; 1.0 pushes the weights towards an equal average)."""

    epochs: int = 30
    patience: int = 5
    lr: float = 1e-3
    batch_size: int = 32
    clip: float = 5.0
    l2: float = 0.001
    seed: int = 0
    train_fraction: float = 1.0
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.patience < 1 or self.batch_size < 1:
            raise ValueError(f"epochs, patience and batch_size must be >= 1: {self}")
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], not {self.train_fraction}")
        if self.lr <= 0 or self.clip <= 0 or self.l2 < 0:
            raise ValueError(f"lr and clip must be > 0 and l2 >= 0: {self}")


def load_split(task: str, path: str | os.PathLike, max_sentences: int | None = None) -> Split:
    """Read a task file: CoNLL-2003 for ``ner``, SST trees for ``sst5``/``sst2``, TREC labels."""
    if task == "ner":
        corpus = read_conll2003(path, max_sentences)
        return Split(corpus.sentences, corpus.tags, corpus.source)
    if task in ("sst5", "sst2"):
        data = read_sst(path, task, max_sentences)
    elif task == "trec":
        data = read_trec(path, max_sentences)
    else:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    return Split(data.sentences, data.labels, data.source)


def subsample(split: Split, fraction: float, seed: int) -> Split:
    """A seeded random ``fraction`` of the split (at least one sentence), in file order."""
    if fraction >= 1:
        return split
    n = max(1, round(len(split) * fraction))
    ids = sorted(random.Random(seed).sample(range(len(split)), n))
    return split.subset(ids, f"{split.source} ({fraction:g} sample, seed {seed})")


def attach_features(
    encoder: Encoder,
    splits: Sequence[Split],
    layers: str = "mix",
    cache_dir: str | os.PathLike | None = None,
    dtype: str = "float32",
    batch_size: int = 64,
    progress: bool = True,
) -> float:
    """Fill each split's ``features`` from the feature cache; returns the seconds it took.

    ``layers``: ``mix`` keeps all layers; a fixed combination (``last``, ``sum_last_4``,
    ``concat_last_4``) keeps only that, as one layer (the cache itself always holds all layers).
    """
    check_layers(layers, encoder.num_layers)
    started = time.perf_counter()
    model_id = model_identity(encoder)
    for split in splits:
        path = cached_features(encoder, split.sentences, cache_dir=cache_dir, dtype=dtype,
                               batch_size=batch_size, progress=progress, label=split.source,
                               model_id=model_id)
        with FeatureFile.open(path) as features:
            dataset = features.file["layers"]  # kept in the stored dtype: float16 halves the memory
            if layers == "mix":
                kept = dataset[()]
            elif layers == "last":
                kept = dataset[features.num_layers - 1:]
            else:  # summed in float32, stored back in the cache's dtype
                last4 = dataset[features.num_layers - 4:].astype(np.float32)
                kept = combine_layers(last4, layers)[None].astype(dataset.dtype)
            offsets = features.offsets
        split.features = [kept[:, offsets[i]:offsets[i + 1]] for i in range(len(split))]
    return time.perf_counter() - started


@dataclass
class TaskReport:
    """What ``train-task`` writes as JSON."""

    task: str
    metric: str
    best_epoch: int
    dev: dict
    test: dict | None
    curve: list[dict]
    mixes: list[dict]
    labels: list[str]
    splits: dict[str, dict]
    parameters: dict[str, int]
    model_settings: dict
    train_settings: dict
    runtime_s: dict[str, float]
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def training_batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length: sort by length x (1 +- 10% noise), cut, shuffle the batches."""
    keys = [n * (1 + rng.uniform(-0.1, 0.1)) for n in lengths]
    order = sorted(range(len(lengths)), key=keys.__getitem__)
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


class _Prepared:
    """A split with its sentences already indexed (word and char ids computed once)."""

    def __init__(self, split: Split, indexer: Indexer, labels: list | None) -> None:
        self.split = split
        self.labels = labels
        self.encoded = [indexer.encode(s) for s in split.sentences]
        self.indexer = indexer

    def batch(self, ids: Sequence[int], device: str, with_labels: bool) -> Batch:
        s = self.split
        return self.indexer.batch(
            [s.sentences[i] for i in ids],
            [self.labels[i] for i in ids] if with_labels and self.labels is not None else None,
            None if s.features is None else [s.features[i] for i in ids],
            [self.encoded[i] for i in ids],
        ).to(device)


def _predict(model: NerTagger | SentenceClassifier, data: _Prepared, batch_size: int, device: str) -> list:
    model.eval()
    out: list = [None] * len(data.split)
    with torch.no_grad():
        for ids in length_batches([len(s) for s in data.split.sentences], batch_size):
            for i, prediction in zip(ids, model.predict(data.batch(ids, device, False)), strict=True):
                out[i] = prediction
    return out


def entity_mentions(sentences: Sequence[Sequence[str]], tags_iob1: Sequence[Sequence[str]]) -> set[str]:
    """The word strings of every entity annotated in a split (any type)."""
    return {" ".join(words[start:end + 1]) for words, tags in zip(sentences, tags_iob1, strict=True)
            for _, start, end in get_entities(iob1_to_iob2(tags))}


def _seen_unseen(sentences: Sequence[Sequence[str]], gold: Sequence[Sequence[str]],
                 pred: Sequence[Sequence[str]], seen: set[str]) -> dict:
    counts = {group: {"gold": 0, "predicted": 0, "correct": 0} for group in ("seen", "unseen")}
    for words, g, p in zip(sentences, gold, pred, strict=True):
        gold_spans, pred_spans = set(get_entities(list(g))), set(get_entities(list(p)))
        for spans, key in ((gold_spans, "gold"), (pred_spans, "predicted"),
                           (gold_spans & pred_spans, "correct")):
            for _, start, end in spans:
                group = "seen" if " ".join(words[start:end + 1]) in seen else "unseen"
                counts[group][key] += 1
    for c in counts.values():
        c["precision"] = c["correct"] / c["predicted"] if c["predicted"] else 0.0
        c["recall"] = c["correct"] / c["gold"] if c["gold"] else 0.0
        total = c["precision"] + c["recall"]
        c["f1"] = 2 * c["precision"] * c["recall"] / total if total else 0.0
    return counts


def ner_scores(gold_iob1: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], scheme: str,
               sentences: Sequence[Sequence[str]] | None = None, seen: set[str] | None = None) -> dict:
    """Entity P/R/F1 (seqeval on IOB2; see the module docstring) and per-type F1.

    With the split's ``sentences`` and the ``seen`` mentions of the training split
    (:func:`entity_mentions`), also ``by_mention``: the scores of seen and unseen mentions.
    """
    gold = [iob1_to_iob2(t) for t in gold_iob1]
    pred = [list(t) if scheme == "bio" else to_scheme(t, "bio", scheme) for t in predicted]
    with warnings.catch_warnings():  # numpy's empty-mean warnings when no entity exists at all
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(gold, pred, output_dict=True, zero_division=0)
        strict = f1_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0)
    micro = report.get("micro avg", {"f1-score": 0.0, "precision": 0.0, "recall": 0.0})
    return {
        "f1": float(micro["f1-score"]),
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "f1_strict": float(strict),
        "per_type": {k: {"f1": float(v["f1-score"]), "support": int(v["support"])}
                     for k, v in report.items() if not k.endswith(" avg")},
        "sentences": len(gold),
        **({"by_mention": _seen_unseen(sentences, gold, pred, seen)}
           if sentences is not None and seen is not None else {}),
    }


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> dict:
    """Classification accuracy (and the counts behind it)."""
    correct = sum(g == p for g, p in zip(gold, predicted, strict=True))
    return {"accuracy": correct / len(gold), "correct": correct, "sentences": len(gold)}


def to_scheme(tags: Sequence[str], scheme: str, source: str = "iob1") -> list[str]:
    """Tags in ``source`` (``iob1``, whose reading also passes IOB2 through unchanged, or
    ``bioul``) -> tags in ``scheme`` (``bio``, ``iob1`` or ``bioul``)."""
    bio = bioul_to_iob2(tags) if source == "bioul" else iob1_to_iob2(tags)
    if scheme == "bioul":
        return iob2_to_bioul(bio)
    return bio if scheme == "bio" else iob2_to_iob1(bio)


def task_labels(task: str, labels: Sequence, scheme: str = "bio") -> list[str]:
    """The label set of a training split: tags in ``scheme`` (``O`` first, then by type) or classes."""
    if task in TAGGING:
        tags = {t for sentence in labels for t in to_scheme(sentence, scheme)}
        return sorted(tags, key=lambda t: (t != "O", t[2:], t))
    return sorted(set(labels))


def _trainable_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith(ENCODER_PREFIX)}


def build_model(
    task: str,
    train: Split,
    others: Sequence[Split],
    settings: ModelSettings,
    encoder: Encoder | None = None,
    vectors: WordVectors | None = None,
) -> tuple[NerTagger | SentenceClassifier, Indexer]:
    """The task model and its indexer, with vocabularies from ``train`` (see models.py)."""
    words, chars, pretrained = build_vocabularies(
        train.sentences, [s for split in others for s in split.sentences], vectors
    )
    labels = task_labels(task, train.labels, settings.tag_scheme)
    indexer = Indexer(words, chars, labels)
    tokens = TokenEmbedder(words, chars, settings, pretrained)
    contextual = None
    if settings.num_mixes:
        if encoder is None:
            raise ValueError(f"placement {settings.placement!r} needs an encoder")
        contextual = contextual_embedder(encoder, settings)
    cls = NerTagger if task in TAGGING else SentenceClassifier
    return cls(tokens, labels, settings, contextual), indexer


def train_task(
    task: str,
    train: Split,
    dev: Split,
    test: Split | None,
    model_settings: ModelSettings,
    settings: TrainSettings,
    encoder: Encoder | None = None,
    vectors: WordVectors | None = None,
) -> tuple[TaskReport, NerTagger | SentenceClassifier]:
    """Train a task model, keep its best-on-dev weights, score dev (and test); see the module doc.

    Splits with ``features`` feed the precomputed layers to the model; without, the model runs
    the encoder itself (slow: every epoch re-encodes the data).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    full_train_size = len(train)
    train = subsample(train, settings.train_fraction, settings.seed)
    tagging = task in TAGGING
    others = [dev] + ([test] if test is not None else [])
    model, indexer = build_model(task, train, others, model_settings, encoder, vectors)
    device = settings.device
    model.to(device)
    scheme = model_settings.tag_scheme
    train_labels = [to_scheme(t, scheme) for t in train.labels] if tagging else train.labels
    prepared_train = _Prepared(train, indexer, train_labels)
    prepared_dev = _Prepared(dev, indexer, None)
    metric = "f1" if tagging else "accuracy"
    seen = entity_mentions(train.sentences, train.labels) if tagging else None

    def evaluate(data: _Prepared) -> dict:
        predicted = _predict(model, data, max(settings.batch_size, 64), device)
        if tagging:
            return ner_scores(data.split.labels, predicted, scheme, data.split.sentences, seen)
        return accuracy(data.split.labels, predicted)

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=settings.lr)
    rng = random.Random(settings.seed)
    lengths = [len(s) for s in train.sentences]
    best_score, best_epoch, best_state = -math.inf, 0, _trainable_state(model)
    curve: list[dict] = []
    train_seconds = 0.0
    for epoch in range(1, settings.epochs + 1):
        started = time.perf_counter()
        model.train()
        total_loss, n_batches = 0.0, 0
        batches = training_batches(lengths, settings.batch_size, rng)
        bar = tqdm(batches, desc=f"epoch {epoch}", unit="batch", disable=not settings.progress, leave=False)
        for ids in bar:
            batch = prepared_train.batch(ids, device, True)
            loss = model.loss(batch) + model.mix_penalty(settings.l2)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(trainable, settings.clip)
            optimizer.step()
            total_loss += float(loss.detach())
            n_batches += 1
            bar.set_postfix(loss=f"{total_loss / n_batches:.3f}")
        epoch_train = time.perf_counter() - started
        train_seconds += epoch_train
        scores = evaluate(prepared_dev)
        score = scores[metric]
        curve.append({"epoch": epoch, "train_loss": round(total_loss / max(n_batches, 1), 5),
                      f"dev_{metric}": round(score, 5), "train_s": round(epoch_train, 3),
                      "eval_s": round(time.perf_counter() - started - epoch_train, 3)})
        if settings.progress:
            tqdm.write(f"epoch {epoch}: loss {total_loss / max(n_batches, 1):.4f}, dev {metric} {score:.4f}")
        if score > best_score:
            best_score, best_epoch, best_state = score, epoch, _trainable_state(model)
        elif epoch - best_epoch >= settings.patience:
            break
    missing, unexpected = model.load_state_dict(best_state, strict=False)
    if unexpected or any(not k.startswith(ENCODER_PREFIX) for k in missing):
        raise RuntimeError(f"restoring the best weights failed: missing {missing}, unexpected {unexpected}")
    started = time.perf_counter()
    dev_scores = evaluate(prepared_dev)
    test_scores = evaluate(_Prepared(test, indexer, None)) if test is not None else None
    eval_seconds = time.perf_counter() - started
    n_trainable = sum(p.numel() for p in trainable)
    n_mix = sum(p.numel() for p in model.contextual.mixes.parameters()) if model.contextual else 0
    report = TaskReport(
        task=task, metric=metric, best_epoch=best_epoch, dev=dev_scores, test=test_scores, curve=curve,
        mixes=model.mix_summary(), labels=list(indexer.labels),
        splits={
            name: {"source": s.source, "sentences": len(s), "tokens": s.num_tokens}
            for name, s in (("train", train), ("dev", dev), ("test", test)) if s is not None
        },
        parameters={"trainable": n_trainable, "mixes": n_mix, "word_vocabulary": len(indexer.words),
                    "char_vocabulary": len(indexer.chars)},
        model_settings=asdict(model_settings), train_settings=asdict(settings),
        runtime_s={"train": round(train_seconds, 3), "final_eval": round(eval_seconds, 3),
                   "train_tokens_per_s": round(sum(lengths) * len(curve) / max(train_seconds, 1e-9), 1),
                   "train_sentences_per_s": round(len(train) * len(curve) / max(train_seconds, 1e-9), 1)},
        extra={"train_sentences_before_fraction": full_train_size},
    )
    return report, model
