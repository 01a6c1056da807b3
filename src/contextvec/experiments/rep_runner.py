"""Running CoVe's Table 2 for one task: features once per (encoder, layers), the unfinished runs
(in this process or ``jobs`` worker processes), then the table and plot over every task stored.

One output directory collects all tasks: each command adds its task's runs to ``results.json``
(resumable as every experiment's, :mod:`.store`), and the table covers every stored run made with
the same shared settings (``table_id``: encoders, word vectors, hyper-parameters, train size).
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import torch
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.experiments.plans import RunSpec
from contextvec.experiments.rep_table import write_outputs
from contextvec.experiments.representations import (
    EXPERIMENT,
    POOL_PREFIX,
    Representation,
    pool_plan,
    representations_plan,
)
from contextvec.experiments.store import ResultStore, run_key, split_identity
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.split import Split
from contextvec.tasks.train import TrainSettings, attach_features, train_task

Job = tuple[Representation, RunSpec]
SourceKey = tuple[str, str] | None
"""Where a run's features come from: (encoder name, layers), or None (no encoder)."""


@dataclass
class RepResult:
    """What :func:`run_representations` did: runs trained now, reused, files written, seconds."""

    trained: int
    reused: int
    files: list[Path]
    table: str
    runtime_s: dict[str, float]


@dataclass
class _Inputs:
    """What every run reads (shipped once to each worker process)."""

    task: str
    splits: dict[SourceKey, tuple[Split, Split, Split | None]]
    encoders: dict[str, Encoder]
    vectors: WordVectors
    threads: int


_WORKER: _Inputs | None = None


def _source(rep: Representation) -> SourceKey:
    return None if rep.encoder is None else (rep.encoder, rep.layers)


def _train(inputs: _Inputs, rep: Representation, spec: RunSpec) -> tuple[dict, float]:
    started = time.perf_counter()
    train, dev, test = inputs.splits[_source(rep)]
    encoder = inputs.encoders[rep.encoder] if rep.encoder else None
    report, _ = train_task(inputs.task, train, dev, test, spec.model_settings, spec.train_settings,
                           encoder, inputs.vectors)
    return report.to_dict(), round(time.perf_counter() - started, 3)


def exit_with_parent(parent: int, interval: float = 1.0) -> None:
    """End this worker process within ``interval`` seconds of process ``parent`` ending: a parent
    killed by SIGTERM or SIGKILL never runs the pool's clean-up, and its workers would go on
    training runs nobody will store, holding a CPU until they finish.

    Args:
        parent: the process id of the parent, as the parent's ``os.getpid()`` passed to the
            worker (a pool initializer's argument).
        interval: seconds between two looks at the parent.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _init_worker(inputs: _Inputs, parent: int) -> None:
    global _WORKER
    exit_with_parent(parent)
    torch.set_num_threads(inputs.threads)
    _WORKER = inputs


def _train_in_worker(job: Job) -> tuple[Job, dict, float]:
    assert _WORKER is not None, "worker not initialised"
    return (job, *_train(_WORKER, *job))


def _attach(inputs: _Inputs, jobs: Sequence[Job], raw: tuple[Split, Split, Split | None],
            cache_dir: str | Path | None, dtype: str, progress: bool) -> float:
    """Features for every source the jobs need and ``inputs.splits`` lacks; returns seconds."""
    seconds = 0.0
    for source in dict.fromkeys(_source(rep) for rep, _ in jobs):
        if source in inputs.splits:
            continue
        copies = tuple(None if s is None else Split(s.sentences, s.labels, s.source) for s in raw)
        if source is not None:
            name, layers = source
            seconds += attach_features(inputs.encoders[name], [s for s in copies if s is not None],
                                       layers=layers, cache_dir=cache_dir, dtype=dtype, progress=progress)
        inputs.splits[source] = copies
    return seconds


def encoders_on_cpu(encoders: dict[str, Encoder]) -> dict[str, Encoder]:
    """The encoders as worker processes get them: each on the CPU, a copy where it was not (the
    caller's stays where it is), the same object where it was. A worker moves each task model,
    the frozen encoder inside it, to the run's device itself; a CUDA tensor would be pickled as
    a CUDA IPC handle into the parent's memory, which ties every worker to the parent and which
    a sandboxed GPU may refuse."""
    return {name: e if all(t.device.type == "cpu" for t in e.state_dict().values())
            else copy.deepcopy(e).cpu() for name, e in encoders.items()}


def _run_jobs(inputs: _Inputs, jobs: Sequence[Job], workers: int,
              done: Callable[[Job, dict, float], None]) -> None:
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            done(job, *_train(inputs, *job))
        return
    # spawn, not fork: a forked child of a process that already ran torch's thread pool can hang
    # (and CUDA cannot be used in a forked child at all).
    context = multiprocessing.get_context("spawn")
    # Pool's exit terminates the workers: on Ctrl-C or an error no queued run starts, and the
    # finished ones are in results.json already.
    shipped = replace(inputs, encoders=encoders_on_cpu(inputs.encoders))
    with context.Pool(min(workers, len(jobs)), _init_worker, (shipped, os.getpid())) as pool:
        for job, report, runtime in pool.imap_unordered(_train_in_worker, jobs):
            done(job, report, runtime)


def shared_gpu_hint(device: str, jobs: int) -> str | None:
    """A one-line hint when ``jobs`` worker processes will share one CUDA GPU without CUDA MPS
    (its control pipe in ``$CUDA_MPS_PIPE_DIRECTORY``, default ``/tmp/nvidia-mps``): without
    it the processes' kernels take turns instead of running together."""
    if jobs <= 1 or torch.device(device).type != "cuda":
        return None
    if (Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")) / "control").exists():
        return None
    return (f"--jobs {jobs} share one GPU without CUDA MPS, so their kernels take turns: start "
            "`nvidia-cuda-mps-control -d` before the command to run them together (docs/experiments.md)")


def best_representation(records: Sequence[dict], task: str) -> str | None:
    """The BCN representation of ``task`` with the best mean dev score among ``records``."""
    scores: dict[str, list[float]] = {}
    for r in records:
        if r["task"] == task and not r["config"].startswith(POOL_PREFIX):
            scores.setdefault(r["config"], []).append(r["dev"])
    return max(scores, key=lambda name: statistics.fmean(scores[name])) if scores else None


def run_representations(
    task: str,
    names: Sequence[str],
    seeds: Sequence[int],
    model: ModelSettings,
    train_settings: TrainSettings,
    splits: tuple[Split, Split, Split | None],
    output_dir: str | Path,
    encoders: dict[str, Encoder],
    vectors: WordVectors,
    table_id: str,
    header: dict,
    char_dim: int = 100,
    pool_baseline: bool = False,
    cache_dir: str | Path | None = None,
    feature_dtype: str = "float32",
    jobs: int = 1,
    threads: int = 1,
    progress: bool = True,
    log: Callable[[str], None] = tqdm.write,
    overwrite: bool = False,
) -> RepResult:
    """Train the unfinished BCN runs of ``names`` x ``seeds`` (then, with ``pool_baseline``, the
    pooling classifier on the best representation) and write the table over every stored run.

    ``encoders``: by name (``cove``: a :class:`~contextvec.encoders.cove.CoveContext`, ``elmo``,
    ``bert``), those the representations need; ``table_id``: the shared settings' hash (runs of
    other ``table_id`` stay in ``results.json`` but not in the table).
    """
    started = time.perf_counter()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    data = {name: None if s is None else split_identity(s)
            for name, s in zip(("train", "dev", "test"), splits, strict=True)}
    model_ids = {name: model_identity(encoder) for name, encoder in encoders.items()}
    store = ResultStore(output_dir, EXPERIMENT, header, fresh=overwrite)
    inputs = _Inputs(task, {}, encoders, vectors, threads)
    plan: list[Job] = representations_plan(names, model, train_settings, seeds, char_dim)
    missing = sorted({rep.encoder for rep, _ in plan if rep.encoder and rep.encoder not in encoders})
    if missing:
        raise ValueError(f"representations need encoders {missing}: not loaded")
    keys: list[dict] = []
    seconds = {"features": 0.0, "runs": 0.0}
    trained = 0

    def key(job: Job) -> dict:
        rep, spec = job
        return run_key(spec, task, data, model_ids[rep.encoder] if rep.encoder else None)

    def done(job: Job, report: dict, runtime: float) -> None:
        nonlocal trained
        rep, spec = job
        store.add({"run": f"{task}, {spec.name}", "config": spec.config, "task": task,
                   "representation": rep.name, "classifier": spec.model_settings.classifier,
                   "seed": spec.train_settings.seed, "dev": report["dev"][report["metric"]],
                   "table": table_id, "key": key(job), "runtime_s": runtime, "report": report,
                   "finished": datetime.now(UTC).isoformat()})
        store.save(keys)  # after every run: an interruption loses at most the runs in flight
        seconds["runs"] += runtime
        trained += 1
        metric = report["metric"]
        log(f"{task}, {spec.name}: dev {metric} {report['dev'][metric]:.4f}, {runtime:.1f} s")

    def run_batch(batch: list[Job]) -> None:
        keys.extend(key(job) for job in batch)
        pending = [job for job in batch if store.find(key(job)) is None]
        seconds["features"] += _attach(inputs, pending, splits, cache_dir, feature_dtype, progress)
        _run_jobs(inputs, pending, jobs, done)

    run_batch(plan)
    if pool_baseline:
        best = best_representation(table_records(store, table_id), task)
        if best is not None:
            run_batch(pool_plan(best, model, train_settings, seeds, char_dim))
    # Under the directory's lock: the outputs cover exactly the runs saved, and of several
    # commands adding to one directory at once, the last to finish writes the complete table.
    with store.locked():
        store.save(keys)
        records = table_records(store, table_id)
        files, table = write_outputs(output_dir, records, header)
    seconds["total"] = time.perf_counter() - started
    return RepResult(trained, len(keys) - trained, files, table,
                     {k: round(v, 3) for k, v in seconds.items()})


def table_records(store: ResultStore, table_id: str) -> list[dict]:
    """The stored runs of the table ``table_id``, as the table and
    [`best_representation`][contextvec.experiments.rep_runner.best_representation] read
    them; of two runs of one (task, config, seed) (e.g. on other data), the one finished last."""
    latest: dict[tuple, dict] = {}
    for record in sorted(store.records, key=lambda r: r.get("finished", "")):
        if record.get("table") == table_id:
            latest[(record["task"], record["config"], record["seed"])] = record
    return list(latest.values())
