"""The one runner of every experiment: features once per (encoder, layers), the plan's unfinished
runs (in this process or ``jobs`` worker processes, :mod:`.workers`), each stored in
``results.json`` as it finishes, then the entry's tables and figures."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from contextvec.choices import checked_choice
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.experiments.entry import Experiment, RunContext
from contextvec.experiments.plans import RunKind, RunSpec
from contextvec.experiments.store import ResultStore, run_key, split_identity
from contextvec.experiments.summary import FinishedRun
from contextvec.experiments.workers import RunInputs, run_jobs, source
from contextvec.features import FeatureDtype
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.split import Split
from contextvec.tasks.train import attach_features


@dataclass(frozen=True)
class RunnerSettings:
    """How an experiment's runs are carried out: none of these changes a result.

    ``overwrite``: ignore the runs stored in ``output_dir`` (they are replaced), run everything;
    ``jobs``: runs trained at once, in worker processes of ``threads`` torch threads each."""

    output_dir: Path
    cache_dir: str | Path | None = None
    feature_dtype: FeatureDtype = FeatureDtype.FLOAT32
    jobs: int = 1
    threads: int = 1
    progress: bool = True
    overwrite: bool = False
    log: Callable[[str], None] = tqdm.write

    def __post_init__(self) -> None:
        object.__setattr__(self, "feature_dtype",
                           checked_choice(FeatureDtype, self.feature_dtype, "feature dtype"))


@dataclass
class ExperimentData:
    """What every run reads: the task's splits, the encoders by the names the plan's runs give
    (:attr:`RunSpec.encoder`), for models on fixed word vectors the vectors, and for fine-tune
    runs the model directories they train from (``model_dirs``, by the same names: the encoder
    loaded from a directory fingerprints the runs that fine-tune it)."""

    task: str
    train: Split
    dev: Split
    test: Split | None = None
    encoders: dict[str, Encoder] = field(default_factory=dict)
    vectors: WordVectors | None = None
    model_dirs: dict[str, Path] = field(default_factory=dict)


@dataclass
class ExperimentResult:
    """What :func:`run_experiment` did: runs trained now and reused, the files written, the
    tables (``markdown``: ``results.md``; ``lines``: the summary a command prints), seconds."""

    experiment: str
    metric: str
    trained: int
    reused: int
    files: list[Path]
    markdown: str
    lines: list[str]
    runtime_s: dict[str, float]


def _attach(inputs: RunInputs, specs: Sequence[RunSpec], data: ExperimentData,
            settings: RunnerSettings) -> float:
    """Features for every source the runs need and ``inputs.splits`` lacks; returns seconds."""
    seconds = 0.0
    for src in dict.fromkeys(source(spec) for spec in specs):
        if src in inputs.splits:
            continue
        copies = tuple(None if s is None else replace(s, features=None, second_features=None)
                       for s in (data.train, data.dev, data.test))
        if src is not None:
            name, layers = src
            seconds += attach_features(inputs.encoders[name], [s for s in copies if s is not None],
                                       layers=layers, cache_dir=settings.cache_dir,
                                       dtype=settings.feature_dtype, progress=settings.progress)
        inputs.splits[src] = copies
    return seconds


def run_experiment(experiment: Experiment, data: ExperimentData, settings: RunnerSettings,
                   header: dict) -> ExperimentResult:
    """Run the plan's unfinished runs (then the entry's follow-up runs), then write its tables.

    ``header``: fields of ``results.json`` beside the runs (the settings the runs were given).
    Finished runs are stored after each one, so a rerun continues where an interrupted one stopped.
    """
    started = time.perf_counter()
    plan = experiment.plan()
    missing = sorted({s.encoder for s in plan if s.contextual and s.encoder not in data.encoders})
    if missing:
        raise ValueError(f"runs with contextual vectors need encoders {missing}: not given")
    no_dir = sorted({s.encoder for s in plan
                     if s.kind is RunKind.FINE_TUNE and s.encoder not in data.model_dirs})
    if no_dir:
        raise ValueError(f"fine-tune runs need the model directories of {no_dir}: not given")
    output_dir = Path(settings.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    ids = {name: None if s is None else split_identity(s)
           for name, s in (("train", data.train), ("dev", data.dev), ("test", data.test))}
    model_ids = {name: model_identity(encoder) for name, encoder in data.encoders.items()}
    store = ResultStore(output_dir, experiment.name, header, fresh=settings.overwrite)
    inputs = RunInputs(data.task, {}, data.encoders, data.vectors, settings.threads, data.model_dirs)
    keys: list[dict] = []
    seconds = {"features": 0.0, "runs": 0.0}
    trained = 0

    def key(spec: RunSpec) -> dict:
        return run_key(spec, data.task, ids, model_ids.get(spec.encoder) if spec.contextual else None)

    def done(spec: RunSpec, report: dict, runtime: float) -> None:
        nonlocal trained
        record = experiment.record(RunContext(data.task, spec, key(spec), runtime, report))
        store.add(record)
        store.save(keys)  # after every run: an interruption loses at most the runs in flight
        seconds["runs"] += runtime
        trained += 1
        metric = report["metric"]
        settings.log(f"{record['run']}: dev {metric} {report['dev'][metric]:.4f}, {runtime:.1f} s")

    def run_batch(batch: list[RunSpec]) -> None:
        keys.extend(key(spec) for spec in batch)
        pending = [spec for spec in batch if store.find(key(spec)) is None]
        seconds["features"] += _attach(inputs, pending, data, settings)
        run_jobs(inputs, pending, settings.jobs, done, settings.progress, f"{experiment.name} {data.task}")

    run_batch(plan)
    if follow_up := experiment.follow_up(store, data.task):
        run_batch(follow_up)
    # Under the directory's lock: the outputs cover exactly the runs saved, and of several
    # commands adding to one directory at once, the last to finish writes the complete table.
    with store.locked():
        store.save(keys)
        runs = [FinishedRun(spec, store.find(key(spec))) for spec in plan]
        tables = experiment.write(output_dir, store, runs, header)
        runtime = {"features": round(seconds["features"], 3), "runs": round(seconds["runs"], 3),
                   "all_runs": round(sum(run.record["runtime_s"] for run in runs), 3),
                   "total": round(time.perf_counter() - started, 3)}
        if tables.extra is not None:
            store.save(keys, {**tables.extra, "runtime_s": runtime})
    return ExperimentResult(experiment.name, tables.metric, trained, len(keys) - trained, tables.files,
                            tables.markdown, tables.lines, runtime)
