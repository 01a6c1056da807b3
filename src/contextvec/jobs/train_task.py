"""Training a task model as one call (``contextvec train-task``'s job, and its Python API):
:func:`run_train_task` takes one :class:`TrainTaskSettings` and returns a
:class:`TrainTaskResult` with the report, the saved model's directory and the summary lines."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import torch

from contextvec.api import is_hf_bert_dir
from contextvec.choices import checked_choice
from contextvec.documents.settings import Context, as_context
from contextvec.features import FeatureSettings
from contextvec.io.word_vectors import WordVectorFormat
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.tasks.finetune import FineTuneSettings, fine_tune
from contextvec.tasks.fit import TaskReport
from contextvec.tasks.models import Classifier, ModelSettings, Placement, wanted_words
from contextvec.tasks.readers import DEV_SPLIT_SEED
from contextvec.tasks.saved import save_fine_tuned, save_task_model
from contextvec.tasks.spec import TASK_SPECS, TaskSpec, as_task
from contextvec.tasks.split import Split
from contextvec.tasks.train import TrainSettings, attach_features, train_task


class TrainMode(StrEnum):
    """What is trained: a task model on a frozen encoder's layers (``contextual``), the task model
    alone (``no-contextual``), or the whole BERT with a task head (``fine-tune``)."""

    CONTEXTUAL = "contextual"
    NO_CONTEXTUAL = "no-contextual"
    FINE_TUNE = "fine-tune"


@dataclass(frozen=True)
class TrainTaskSettings:
    """Everything one task-model training reads. ``task``: a task's name or its
    :class:`~contextvec.tasks.spec.TaskSpec` (the spec once made: looked up once, here);
    ``model``: the task model's settings (not with ``fine-tune``); ``training``:
    :class:`TrainSettings`, or :class:`FineTuneSettings` with ``fine-tune``; ``word_vectors``:
    initial word embeddings (a GloVe/word2vec file); ``save_model``: a directory for the trained
    model (``contextvec predict``); ``context``: what the frozen features of a sentence see, the
    sentence alone or its whole document (a task whose files mark documents, frozen features)."""

    task: TaskSpec | str
    files: TaskFiles
    mode: TrainMode = TrainMode.CONTEXTUAL
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    model: ModelSettings | None = None
    training: TrainSettings | FineTuneSettings = field(default_factory=TrainSettings)
    features: FeatureSettings = field(default_factory=FeatureSettings)
    word_vectors: str | None = None
    word_vectors_format: WordVectorFormat = WordVectorFormat.AUTO
    save_model: str | None = None
    threads: int | None = None
    context: Context = Context.SENTENCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "task", as_task(self.task))  # unknown: one line naming the known ones
        object.__setattr__(self, "mode", checked_choice(TrainMode, self.mode, "mode"))
        object.__setattr__(self, "context", as_context(self.context))
        if self.context is Context.DOCUMENT:
            if self.mode is not TrainMode.CONTEXTUAL:
                raise ValueError(f"--context document is for frozen features, not --{self.mode.value}: "
                                 "drop one of them")
            if not self.task.documents:
                raise ValueError(f"--context document needs a task whose files mark documents "
                                 f"({', '.join(n for n, s in TASK_SPECS.items() if s.documents)}), not "
                                 f"{self.task.name}")
        object.__setattr__(self, "word_vectors_format", checked_choice(
            WordVectorFormat, self.word_vectors_format, "word-vector format"))
        fine = self.mode is TrainMode.FINE_TUNE
        if fine != isinstance(self.training, FineTuneSettings):
            raise ValueError("fine-tune trains with FineTuneSettings, a task model with TrainSettings")
        if fine:
            if not self.encoder.model:
                raise ValueError("--fine-tune needs --model BERT_DIR (a Hugging Face BERT directory)")
            if not is_hf_bert_dir(Path(self.encoder.model)):
                raise ValueError(f"--fine-tune trains BERT, and {self.encoder.model} is not a Hugging Face "
                                 "BERT directory (config.json of model_type \"bert\" + weights); ELMo and "
                                 "CoVe models give frozen features: drop --fine-tune")
            return
        if self.model is None:
            raise ValueError("a task model needs its ModelSettings")
        if (self.model.placement is Placement.NONE) != (self.mode is TrainMode.NO_CONTEXTUAL):
            raise ValueError(f"placement {self.model.placement.value!r} does not fit mode "
                             f"{self.mode.value!r}")
        if self.model.classifier is Classifier.BCN and self.model.placement is Placement.INPUT_OUTPUT:
            raise ValueError("--classifier bcn reads contextual vectors at its input only: drop --placement")


OTHER_SCORES = ("accuracy", "f1", "mcc", "pearson", "spearman")
"""The scores a summary shows besides the task's metric (GLUE reports several per task)."""


@dataclass
class TrainTaskResult:
    """What :func:`run_train_task` did: the report (``--output``'s JSON) and where the model was
    saved (or None)."""

    report: TaskReport
    saved_model: Path | None = None

    def lines(self) -> list[str]:
        """The summary ``train-task`` prints."""
        report, metric = self.report, self.report.metric
        what = report.extra["model"] or "no contextual vectors"
        how = "fine-tuned" if report.extra["fine_tune"] else report.model_settings["placement"]
        sizes = ", ".join(f"{k} {v['sentences']} sent" for k, v in report.splits.items())
        lines = [f"{report.task} with {what} ({how}); {sizes}",
                 f"best epoch {report.best_epoch} of {len(report.curve)}: dev {metric} "
                 f"{report.dev[metric]:.4f}"
                 + (f", test {metric} {report.test[metric]:.4f}" if report.test else "")]
        for name, scores in (("dev", report.dev), ("test", report.test)):
            others = [f"{key} {scores[key]:.4f}" for key in OTHER_SCORES
                      if scores and key in scores and key != metric]
            if others:
                lines.append(f"{name} also: {', '.join(others)}")
        for name, scores in (("dev", report.dev), ("test", report.test)):
            if scores and "by_mention" in scores:
                seen, unseen = scores["by_mention"]["seen"], scores["by_mention"]["unseen"]
                lines.append(f"{name} f1 by mention: seen in train {seen['f1']:.4f} "
                             f"({seen['gold']} entities), unseen {unseen['f1']:.4f} ({unseen['gold']})")
        for i, mix in enumerate(report.mixes):
            lines.append(f"mix {i}: weights {' '.join(f'{w:.3f}' for w in mix['weights'])}, "
                         f"gamma {mix['gamma']:.3f}")
        rt = report.runtime_s
        features = f"features {rt['features']:.1f} s, " if "features" in rt else ""
        lines.append(f"runtime: {features}training {rt['train']:.1f} s ({rt['train_tokens_per_s']:.0f} "
                     f"tokens/s, {rt['train_sentences_per_s']:.1f} sentences/s), total {rt['total']:.1f} s")
        if self.saved_model:
            lines.append(f"saved the model to {self.saved_model} (run it with: contextvec predict "
                         f"{self.saved_model} INPUT)")
        return lines


def _reported(report: TaskReport) -> dict:
    """The scores a saved model keeps: the metric on dev (and test) as training reported it."""
    return {"metric": report.metric, "dev": report.dev[report.metric],
            "test": None if report.test is None else report.test[report.metric]}


def _task_model(settings: TrainTaskSettings, train: Split, dev: Split, test: Split | None) -> TaskReport:
    from contextvec.io.word_vectors import load_word_vectors

    splits = [s for s in (train, dev, test) if s is not None]
    vectors = None
    if settings.word_vectors:
        vectors = load_word_vectors(settings.word_vectors, settings.word_vectors_format,
                                    keep=wanted_words(s for split in splits for s in split.all_sentences))
    encoder, feature_seconds, f = None, 0.0, settings.features
    contextual = settings.mode is TrainMode.CONTEXTUAL
    if contextual:
        encoder = settings.encoder.load()
        feature_seconds = attach_features(encoder, splits, layers=settings.model.layers,
                                          cache_dir=f.cache_dir, dtype=f.dtype, batch_size=f.batch_size,
                                          progress=settings.training.progress, context=settings.context)
    report, model = train_task(settings.task, train, dev, test, settings.model, settings.training, encoder,
                               vectors)
    report.runtime_s["features"] = round(feature_seconds, 3)
    saved = None
    if settings.save_model:
        saved = str(save_task_model(
            settings.save_model, settings.task.name, model, reported=_reported(report), encoder=encoder,
            encoder_ref=settings.encoder.reference() if contextual else None,
            features={"dtype": f.dtype, "embed_batch_size": f.batch_size, "context": settings.context.value},
        ))
    report.extra.update({
        "model": settings.encoder.name if contextual else None, "contextual": contextual,
        "fine_tune": False, "context": settings.context.value if contextual else None,
        "word_vectors": settings.word_vectors,
        "word_vectors_loaded": None if vectors is None else len(vectors.words), "saved_model": saved,
    })
    return report


def _fine_tune(settings: TrainTaskSettings, train: Split, dev: Split, test: Split | None) -> TaskReport:
    model_dir = settings.encoder.model
    report, model = fine_tune(settings.task, train, dev, test, model_dir, settings.training)
    saved = None
    if settings.save_model:
        saved = str(save_fine_tuned(
            settings.save_model, settings.task.name, model, base_model=model_dir, reported=_reported(report),
        ))
    report.extra.update({"model": model_dir, "contextual": True, "fine_tune": True, "saved_model": saved})
    return report


def run_train_task(settings: TrainTaskSettings) -> TrainTaskResult:
    """Read the task's files, train (a task model, or fine-tune BERT), score dev (and test), save
    the model if asked; returns the report and where the model went."""
    started = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    train, dev, test = settings.files.read(settings.task)
    run = _fine_tune if settings.mode is TrainMode.FINE_TUNE else _task_model
    report = run(settings, train, dev, test)
    report.runtime_s["total"] = round(time.perf_counter() - started, 3)
    carved = settings.files.dev is None and settings.task.carves_dev
    report.extra.update({"dev_carved_from_train": carved,
                         "dev_split_seed": DEV_SPLIT_SEED if carved else None,
                         "max_sentences": settings.files.max_sentences})
    saved = report.extra["saved_model"]
    return TrainTaskResult(report, None if saved is None else Path(saved))
