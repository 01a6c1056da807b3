"""Question answering as calls (``train-task squad``, ``predict`` on a saved QA model,
``answer``): each takes one settings object and returns one result.

Without a dev file, a seeded 15% of the training file's *articles* is dev
(:func:`~contextvec.tasks.qa.squad.carve_dev_by_article`): questions on one paragraph never
fall on both sides.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contextvec.encoders.precision import Precision
from contextvec.experiments.squad import SquadExperimentSettings
from contextvec.jobs.choice import EncoderChoice
from contextvec.jobs.train_task import TrainMode
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.fit import TaskReport
from contextvec.tasks.qa.decode import SpanAnswer
from contextvec.tasks.qa.frozen import SpanTrainSettings
from contextvec.tasks.qa.saved import QAModel, check_reading, load_qa_model
from contextvec.tasks.qa.squad import (
    DEV_ARTICLES_SEED,
    Question,
    SquadData,
    carve_dev_by_article,
    parse_squad,
    read_squad,
)
from contextvec.tasks.qa.windows import WindowSettings


@dataclass(frozen=True)
class QAFiles:
    """SQuAD-format files: ``train``, and ``dev`` (None: carved from train by article);
    ``max_questions``: read only the first N questions of each."""

    train: str
    dev: str | None = None
    max_questions: int | None = None

    def __post_init__(self) -> None:
        if self.max_questions is not None and self.max_questions < 1:
            raise ValueError(f"max_questions must be >= 1, not {self.max_questions}")

    def read(self) -> tuple[SquadData, SquadData]:
        """Train and dev (given, or carved from train by article)."""
        train = read_squad(self.train, self.max_questions)
        if self.dev is None:
            return carve_dev_by_article(train)
        return train, read_squad(self.dev, self.max_questions)


@dataclass(frozen=True)
class TrainQASettings:
    """One question-answering training: BERT fine-tuned (``mode`` ``fine-tune``, ``encoder``
    an HF BERT directory), or a span model over a frozen encoder's features (``contextual``)
    or over its own word embeddings alone (``no-contextual``)."""

    files: QAFiles
    mode: TrainMode = TrainMode.FINE_TUNE
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    training: FineTuneSettings | SpanTrainSettings = field(default_factory=FineTuneSettings)
    """:class:`~contextvec.tasks.finetune.FineTuneSettings` to fine-tune; the span model's
    settings (:class:`~contextvec.tasks.qa.frozen.SpanTrainSettings`) otherwise."""
    windows: WindowSettings | None = None
    """:class:`~contextvec.tasks.qa.windows.WindowSettings` (fine-tuning; None: the defaults)."""
    save_model: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.mode is TrainMode.FINE_TUNE:
            from contextvec.api import is_hf_bert_dir

            if not isinstance(self.training, FineTuneSettings):
                raise ValueError("fine-tuning trains with FineTuneSettings")
            if not self.encoder.model or not is_hf_bert_dir(Path(self.encoder.model)):
                raise ValueError(f"--fine-tune trains BERT: --model must be a Hugging Face BERT directory, "
                                 f"not {self.encoder.model!r}")


@dataclass
class TrainQAResult:
    """The report (``--output``'s JSON) and where the model was saved (or None)."""

    report: TaskReport
    saved_model: Path | None = None

    def lines(self) -> list[str]:
        r = self.report
        dev = r.dev
        lines = [f"squad with {r.extra['model'] or 'no contextual vectors'} ({r.extra['mode']}); "
                 f"train {_size(r.splits['train'])}, dev {_size(r.splits['dev'])}",
                 f"best epoch {r.best_epoch} of {len(r.curve)}: dev exact match {dev['exact_match']:.2f}, "
                 f"F1 {dev['f1']:.2f}",
                 f"runtime: training {r.runtime_s['train']:.1f} s, total {r.runtime_s['total']:.1f} s"]
        if self.saved_model:
            lines.append(f"saved the model to {self.saved_model} (answer with: contextvec answer "
                         f"{self.saved_model} --question ... --context FILE)")
        return lines


def _size(split: dict) -> str:
    return f"{split['questions']} questions ({split['articles']} articles)"


def run_train_qa(settings: TrainQASettings) -> TrainQAResult:
    """Read the files, train, score dev with the official metric, save the model if asked."""
    started = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    files = settings.files
    train, dev = files.read()
    reported = None
    if settings.mode is TrainMode.FINE_TUNE:
        from contextvec.tasks.qa.bert import fine_tune_qa
        from contextvec.tasks.qa.saved import save_bert_reader

        report, reader = fine_tune_qa(train, dev, settings.encoder.model, settings.training, settings.windows)
        reported = {"exact_match": report.dev["exact_match"], "f1": report.dev["f1"]}
        saved = (save_bert_reader(settings.save_model, reader, base_model=settings.encoder.model,
                                  reported=reported) if settings.save_model else None)
        model_name = settings.encoder.model
    else:
        from contextvec.tasks.qa.frozen import train_span_model
        from contextvec.tasks.qa.span_saved import save_span_model

        contextual = settings.mode is TrainMode.CONTEXTUAL
        encoder = settings.encoder.load() if contextual else None
        report, model = train_span_model(train, dev, encoder, settings.training)
        saved = (save_span_model(settings.save_model, model, encoder=encoder,
                                 encoder_ref=settings.encoder.reference() if contextual else None)
                 if settings.save_model else None)
        model_name = settings.encoder.name if contextual else None
    report.runtime_s["total"] = round(time.perf_counter() - started, 3)
    report.extra.update({"model": model_name, "mode": settings.mode.value,
                         "dev_carved_from_train": files.dev is None,
                         "dev_articles_seed": DEV_ARTICLES_SEED if files.dev is None else None,
                         "max_questions": files.max_questions,
                         "saved_model": None if saved is None else str(saved)})
    return TrainQAResult(report, None if saved is None else Path(saved))


class SavedQAReading:
    """How a job reads a saved QA model, for the settings that declare its fields (``model_dir``,
    ``device``, ``threads``, ``max_length``, ``precision``): checked once when made, used once."""

    model_dir: str
    device: str
    threads: int | None
    max_length: int | None
    precision: Precision

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", check_reading(self.max_length, self.precision))

    def load_model(self) -> QAModel:
        """The saved model, read as the settings say, with torch limited to ``threads`` threads
        in this process (if set)."""
        if self.threads:
            torch.set_num_threads(self.threads)
        return load_qa_model(self.model_dir, self.device, max_length=self.max_length,
                             precision=self.precision)


@dataclass(frozen=True)
class PredictQASettings(SavedQAReading):
    """A saved QA model run on a SQuAD-format ``input`` file; ``score``: the official exact
    match and F1 against the file's answers; ``max_length`` and ``precision``: how the model
    reads (:func:`~contextvec.tasks.qa.saved.load_qa_model`; None: the saved window length)."""

    model_dir: str
    input: str
    score: bool = False
    max_questions: int | None = None
    batch_size: int | None = None
    device: str = "cpu"
    threads: int | None = None
    max_length: int | None = None
    precision: Precision = Precision.FP32


@dataclass
class PredictQAResult:
    """The predictions (``{question_id: answer_text}``), seconds, and with ``score`` the scores."""

    predictions: dict[str, str]
    source: str
    seconds: float
    loading_s: float
    scores: dict | None = None
    reported: dict = field(default_factory=dict)

    def timing_line(self) -> str:
        n = len(self.predictions)
        rate = n / max(self.seconds, 1e-9)
        return (f"answered {n} questions in {self.seconds:.2f} s ({rate:.1f}/s; "
                f"loading {self.loading_s:.1f} s)")

    def score_line(self) -> str:
        s = self.scores or {}
        reported = (f"dev exact match {self.reported['exact_match']:.2f}, F1 {self.reported['f1']:.2f}"
                    if "f1" in self.reported else "no dev score")
        return (f"squad exact_match {s['exact_match']:.4f} f1 {s['f1']:.4f} on {s['questions']} questions of "
                f"{self.source} ({s['unanswered']} unanswered; training reported {reported})")


def run_predict_qa(settings: PredictQASettings) -> PredictQAResult:
    """Answer every question of the input file; score them when asked."""
    from contextvec.tasks.qa.metric import squad_scores
    from contextvec.tasks.qa.record import read_record

    started = time.perf_counter()
    record = read_record(settings.model_dir)
    model = settings.load_model()
    data = (_stdin_squad(settings.max_questions) if settings.input == "-"
            else read_squad(settings.input, settings.max_questions))
    loaded = time.perf_counter()
    if settings.score and not data.labeled:
        raise ValueError(f"{data.source}: --score needs every question's answers")
    predictions = model.predict(data, settings.batch_size)
    done = time.perf_counter()
    scores = squad_scores(data, predictions) if settings.score else None
    return PredictQAResult(predictions, data.source, done - loaded, loaded - started, scores, record.reported)


def _stdin_squad(max_questions: int | None) -> SquadData:
    try:
        value = json.load(sys.stdin)
    except json.JSONDecodeError as error:
        where = f"<stdin>, line {error.lineno}, column {error.colno}"
        raise ValueError(f"{where}: not JSON ({error.msg})") from None
    return parse_squad(value, "<stdin>").first(max_questions)


@dataclass(frozen=True)
class AnswerSettings(SavedQAReading):
    """One question on one context, asked of a saved QA model; ``n_best`` answers returned;
    ``max_length`` and ``precision`` as in :class:`PredictQASettings`."""

    model_dir: str
    question: str
    context: str
    n_best: int = 1
    device: str = "cpu"
    threads: int | None = None
    max_length: int | None = None
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.question.strip():
            raise ValueError("the question is empty")
        if not self.context.strip():
            raise ValueError("the context is empty")
        if self.n_best < 1:
            raise ValueError(f"n_best must be >= 1, not {self.n_best}")


def run_answer(settings: AnswerSettings) -> list[SpanAnswer]:
    """The saved model's ``n_best`` answers, best first, with character offsets into the context."""
    model = settings.load_model()
    asked = Question("q", settings.question, settings.context, ())
    return model.answer_questions([asked], settings.n_best)[0]



@dataclass(frozen=True)
class QAExperimentSettings:
    """``experiment squad``: the files, where the table goes, and the runs
    (:class:`~contextvec.experiments.squad.SquadExperimentSettings`)."""

    files: QAFiles
    output_dir: str
    runs: SquadExperimentSettings
    resume: bool = False
    threads: int | None = None


@dataclass
class QAExperimentResult:
    """The finished runs (in table order) and the files written."""

    runs: list[dict]
    files: list[Path]

    def lines(self) -> list[str]:
        from contextvec.experiments.squad import summary_rows

        lines = [f"{r['representation']}: {r['runs']} runs, dev exact match {r['exact_match']:.2f} "
                 f"± {r['exact_match_std']:.2f}, F1 {r['f1']:.2f} ± {r['f1_std']:.2f}"
                 for r in summary_rows(self.runs)]
        return [*lines, "wrote " + ", ".join(str(f) for f in self.files)]


def run_qa_experiment(settings: QAExperimentSettings) -> QAExperimentResult:
    """Read the files, run every unfinished (representation, seed), write the table."""
    from contextvec.experiments.squad import RESULTS_CSV, RESULTS_JSON, RESULTS_MD, run_squad_experiment

    if settings.threads:
        torch.set_num_threads(settings.threads)
    files = settings.files
    train, dev = files.read()
    runs = run_squad_experiment(train, dev, settings.output_dir, settings.runs, settings.resume)
    out = Path(settings.output_dir)
    return QAExperimentResult(runs, [out / RESULTS_JSON, out / RESULTS_MD, out / RESULTS_CSV])
