"""The task table: what each ``train-task``/``experiment`` task is, in one place.

A :class:`TaskSpec` names the task's reader, its label scheme (per-token entity tags, one class
per sentence or sentence pair, or one score per pair), its metric, its frozen-feature model and
fine-tuning head, its model defaults and whether dev may be carved out of train. Commands and
experiments look tasks up here (:func:`get_task`, or :func:`as_task` for a name or a spec); adding
a task is one entry in :data:`TASK_SPECS` plus a reader.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

from contextvec.encoders.bert.finetune import BertForSequenceClassification, BertForTokenClassification
from contextvec.tasks.metrics import (
    accuracy,
    correlation_scores,
    entity_mentions,
    f1_scores,
    mcc_scores,
    ner_scores,
)
from contextvec.tasks.models import (
    BCNClassifier,
    Classifier,
    ModelSettings,
    NerTagger,
    PairModel,
    SentenceClassifier,
    TaskModelBase,
)
from contextvec.tasks.readers import (
    DEV_SPLIT_SEED,
    GLUE_FORMATS,
    STSB_RANGE,
    carve_dev,
    read_conll2003,
    read_glue,
    read_sst,
    read_trec,
)
from contextvec.tasks.schemes import tag_set
from contextvec.tasks.split import Split
from contextvec.text.tokenize import TokenizerName

Reader = Callable[[str | os.PathLike, int | None], Split]


@dataclass(frozen=True)
class TaskSpec:
    """One task. ``tagging``: labels are per-token IOB1 entity tags (scored as entities), else one
    label per item (a sentence, or a sentence pair with ``pair``): a class, or a float score with
    ``regression``; ``metric``: the score that selects the epoch on dev (one of :meth:`score`'s);
    ``model_defaults``: the frozen-feature model's :class:`~contextvec.tasks.models.ModelSettings`
    values the command line does not set."""

    name: str
    summary: str
    read: Reader
    tagging: bool
    metric: str
    model: type[TaskModelBase]
    fine_tune_head: type[BertForTokenClassification] | type[BertForSequenceClassification]
    model_defaults: Mapping[str, object]
    carves_dev: bool = False
    """No dev file needed: a seeded 10% of train is the dev set (TREC has no dev split; GLUE's
    labeled dev sets are held back)."""
    pair: bool = False
    """Each item is two sentences (``Split.second``)."""
    regression: bool = False
    """Labels are float scores (no label set), predicted by one output trained with MSE."""
    positive: str | None = None
    """The class whose F1 is reported (MRPC's paraphrases, ``"1"``); None: no F1."""
    label_range: tuple[float, float] | None = None
    """The range of a regression task's scores (the reader refuses a score outside it)."""
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
    """How the reader tokenizes the task's text, so ``predict`` tokenizes new text the same way."""
    documents: bool = False
    """The files mark documents (``Split.documents``): features may be computed with document
    context."""

    def model_settings(self, **given: object) -> ModelSettings:
        """The frozen-feature model's settings: those ``given`` (None: not given), this task's
        ``model_defaults`` for the rest; the BCN's hidden size is CoVe's unless given."""
        chosen = {name: value for name, value in given.items() if value is not None}
        if chosen.get("classifier") == "bcn":
            chosen.setdefault("hidden", BCN_HIDDEN)
        return ModelSettings(**{**self.model_defaults, **chosen})

    def model_class(self, settings: ModelSettings) -> type[TaskModelBase]:
        """The frozen-feature model of ``settings``: the task's, or the BCN (``classifier="bcn"``)."""
        if settings.classifier is Classifier.POOL:
            return self.model
        if self.tagging or self.pair:
            raise ValueError(f"classifier {settings.classifier.value!r} is for sentence classification, "
                             f"not {self.name}")
        return BCNClassifier

    def load(self, path: str | os.PathLike, max_sentences: int | None = None) -> Split:
        """Read a data file of this task (for GLUE tasks a labeled train file or an unlabeled
        test.tsv: labels all None)."""
        data = self.read(path, max_sentences)
        return Split(data.sentences, data.labels, data.source, second=data.second, ids=data.ids,
                     documents=data.documents)

    def load_splits(
        self,
        train: str | os.PathLike,
        dev: str | os.PathLike | None,
        test: str | os.PathLike | None = None,
        max_sentences: int | None = None,
    ) -> tuple[Split, Split, Split | None]:
        """Train, dev and test (or None). Without ``dev``, a task that ``carves_dev`` takes a
        seeded 10% of train as dev (seed ``DEV_SPLIT_SEED``); other tasks need a dev file. Each
        file must be labeled (every split is trained on or scored)."""
        if dev is None and not self.carves_dev:
            raise ValueError(f"{self.name} needs --dev (only "
                             f"{', '.join(n for n, s in TASK_SPECS.items() if s.carves_dev)} "
                             "carves a dev set out of train)")
        train_split = self.load(train, max_sentences)
        if dev is not None:
            dev_split = self.load(dev, max_sentences)
        else:
            train_split, dev_split = carve_dev(train_split, seed=DEV_SPLIT_SEED)
        test_split = None if test is None else self.load(test, max_sentences)
        for split in (train_split, dev_split, test_split):
            if split is not None and not split.labeled:
                raise ValueError(f"{split.source} has no labels (GLUE's test.tsv?): training and scoring "
                                 "need labeled files; predict an unlabeled file with contextvec predict")
        return train_split, dev_split, test_split

    def label_set(self, labels: Sequence, scheme: str = "bio") -> list[str]:
        """The labels of a training split: tags in ``scheme`` (``O`` first, then by type), classes,
        or none for a regression task."""
        if self.regression:
            return []
        return tag_set(labels, scheme) if self.tagging else sorted(set(labels))

    def seen_mentions(self, train: Split) -> set[str] | None:
        """The training split's entity mentions (NER's seen/unseen scores), None for classes."""
        return entity_mentions(train.sentences, train.labels) if self.tagging else None

    def score(self, split: Split, predicted: list, scheme: str = "bio", seen: set[str] | None = None) -> dict:
        """The split's scores of ``predicted`` (tags in ``scheme``, classes or float scores), as
        fractions: entity P/R/F1 (tagging), Pearson and Spearman (regression), accuracy with F1
        (a ``positive`` class) or Matthews correlation (metric ``mcc``), else accuracy."""
        if not split.labeled:
            raise ValueError(f"{split.source} has no labels to score predictions against")
        if self.tagging:
            return ner_scores(split.labels, predicted, scheme, split.sentences, seen)
        if self.regression:
            return correlation_scores(split.labels, predicted)
        if self.positive is not None:
            return f1_scores(split.labels, predicted, self.positive)
        if self.metric == "mcc":
            return mcc_scores(split.labels, predicted)
        return accuracy(split.labels, predicted)


def _read_sst(variant: str, path: str | os.PathLike, max_sentences: int | None) -> Split:
    return read_sst(path, variant, max_sentences)


def _read_trec(fine: bool, path: str | os.PathLike, max_sentences: int | None) -> Split:
    return read_trec(path, max_sentences, fine)


def _glue(name: str, summary: str, metric: str, **fields: object) -> TaskSpec:
    """A task of GLUE's TSVs (Wang et al. 2018) or of a user's own pairs in that shape: dev carved
    from train (GLUE's dev sets are held back), a sentence classifier or (``pair``) the pair model."""
    tokenizer = TokenizerName.WHITESPACE if GLUE_FORMATS[name].tokenized else TokenizerName.MOSES
    return TaskSpec(name, summary, partial(read_glue, name), tagging=False, metric=metric,
                    model=PairModel if fields.get("pair") else SentenceClassifier,
                    fine_tune_head=BertForSequenceClassification, model_defaults=_CLASSIFIER, carves_dev=True,
                    tokenizer=tokenizer, **fields)


BCN_HIDDEN = 300
"""The BCN's hidden size in CoVe (McCann et al. 2017, section 5)."""
# Model defaults: the NER tagger of Lample et al. / Peters et al. (small), and a simple classifier
# (no char CNN: sentence labels depend little on spelling).
_TAGGER = MappingProxyType({"word_dim": 50, "char_cnn": True, "lstm_layers": 2, "hidden": 100})
_CLASSIFIER = MappingProxyType({"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100})
_CLASSES = {"tagging": False, "metric": "accuracy", "model": SentenceClassifier,
            "fine_tune_head": BertForSequenceClassification, "model_defaults": _CLASSIFIER}

TASK_SPECS: Mapping[str, TaskSpec] = MappingProxyType({spec.name: spec for spec in (
    TaskSpec("ner", "CoNLL-2003 NER (IOB1 files, scored with seqeval on IOB2)", read_conll2003,
             tagging=True, metric="f1", model=NerTagger, fine_tune_head=BertForTokenClassification,
             model_defaults=_TAGGER, documents=True),
    TaskSpec("sst5", "SST trees, five classes of the root", partial(_read_sst, "sst5"), **_CLASSES),
    TaskSpec("sst2", "SST trees, negative/positive (neutral dropped)", partial(_read_sst, "sst2"),
             **_CLASSES),
    TaskSpec("trec", "TREC-6 questions (coarse classes)", read_trec, carves_dev=True, **_CLASSES),
    TaskSpec("trec50", "TREC-50 questions (fine classes, COARSE:fine)", partial(_read_trec, True),
             carves_dev=True, **_CLASSES),
    _glue("cola", "GLUE CoLA: acceptable or not (Matthews correlation)", "mcc"),
    _glue("sst2-glue", "GLUE SST-2: phrases, negative/positive", "accuracy"),
    _glue("mrpc", "GLUE MRPC: sentence pairs, paraphrase or not (F1 of paraphrases, accuracy)", "f1",
          pair=True, positive="1"),
    _glue("rte", "GLUE RTE: sentence pairs, entailment or not", "accuracy", pair=True),
    _glue("stsb", "GLUE STS-B: sentence pairs, similarity 0-5 (Spearman, Pearson)", "spearman", pair=True,
          regression=True, label_range=STSB_RANGE),
    _glue("wnli", "GLUE WNLI: sentence pairs, entailment or not (Winograd schemas)", "accuracy", pair=True),
    _glue("pairs", "your sentence pairs with any class labels (TSV: sentence1, sentence2, label)", "accuracy",
          pair=True),
    _glue("pair-scores", "your sentence pairs with a score (TSV: sentence1, sentence2, score; Spearman, "
          "Pearson)", "spearman", pair=True, regression=True),
)})
TASKS = tuple(TASK_SPECS)
TAGGING = tuple(name for name, spec in TASK_SPECS.items() if spec.tagging)


def get_task(name: str) -> TaskSpec:
    """The task called ``name``; a ``ValueError`` lists the known ones."""
    if name not in TASK_SPECS:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    return TASK_SPECS[name]


def as_task(task: str | TaskSpec) -> TaskSpec:
    """``task`` itself, or the task it names: a job looks its task up once, where its settings are
    made, and hands the spec down."""
    return task if isinstance(task, TaskSpec) else get_task(task)
