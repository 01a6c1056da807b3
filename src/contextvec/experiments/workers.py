"""Training an experiment's runs: in this process, or at once in worker processes that each get
the inputs once and end with their parent."""

from __future__ import annotations

import copy
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.experiments.baselines import majority_class
from contextvec.experiments.plans import RunKind, RunSpec
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.finetune import fine_tune
from contextvec.tasks.split import Split
from contextvec.tasks.train import train_task

Source = tuple[str, str] | None
"""Where a run's features come from: (encoder name, layers), or None (no encoder)."""


@dataclass
class RunInputs:
    """What every run reads (shipped once to each worker process): the splits per source;
    ``model_dirs``: the model directories fine-tune runs train from, by encoder name."""

    task: str
    splits: dict[Source, tuple[Split, Split, Split | None]]
    encoders: dict[str, Encoder]
    vectors: WordVectors | None
    threads: int
    model_dirs: dict[str, Path] = field(default_factory=dict)


_WORKER: RunInputs | None = None


def source(spec: RunSpec) -> Source:
    """Frozen contextual runs read features; fine-tune and majority runs read the words only."""
    return (spec.encoder, spec.model_settings.layers) if spec.contextual and spec.model_settings else None


def _train(inputs: RunInputs, spec: RunSpec) -> tuple[dict, float]:
    started = time.perf_counter()
    train, dev, test = inputs.splits[source(spec)]
    if spec.kind is RunKind.FINE_TUNE:
        report, _ = fine_tune(inputs.task, train, dev, test, inputs.model_dirs[spec.encoder],
                              spec.train_settings)
    elif spec.kind is RunKind.MAJORITY:
        report = majority_class(inputs.task, train, dev, test)
    else:
        encoder = inputs.encoders[spec.encoder] if spec.contextual else None
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


def _init_worker(inputs: RunInputs, parent: int) -> None:
    global _WORKER
    exit_with_parent(parent)
    torch.set_num_threads(inputs.threads)
    _WORKER = inputs


def _train_in_worker(spec: RunSpec) -> tuple[RunSpec, dict, float]:
    assert _WORKER is not None, "worker not initialised"
    return (spec, *_train(_WORKER, spec))


def encoders_on_cpu(encoders: dict[str, Encoder]) -> dict[str, Encoder]:
    """The encoders as worker processes get them: each on the CPU, a copy where it was not (the
    caller's stays where it is), the same object where it was. A worker moves each task model,
    the frozen encoder inside it, to the run's device itself; a CUDA tensor would be pickled as
    a CUDA IPC handle into the parent's memory, which ties every worker to the parent and which
    a sandboxed GPU may refuse."""
    return {name: e if all(t.device.type == "cpu" for t in e.state_dict().values())
            else copy.deepcopy(e).cpu() for name, e in encoders.items()}


def run_jobs(inputs: RunInputs, specs: Sequence[RunSpec], workers: int,
             done: Callable[[RunSpec, dict, float], None], progress: bool = False, desc: str = "") -> None:
    """Train ``specs``, calling ``done(spec, report, seconds)`` as each finishes (in this process)."""
    if workers <= 1 or len(specs) <= 1:
        bar = tqdm(total=len(specs), desc=desc, unit="run", disable=not progress)
        for spec in specs:
            bar.set_postfix_str(spec.name)
            done(spec, *_train(inputs, spec))
            bar.update()
        bar.close()
        return
    # spawn, not fork: a forked child of a process that already ran torch's thread pool can hang
    # (and CUDA cannot be used in a forked child at all).
    context = multiprocessing.get_context("spawn")
    # Pool's exit terminates the workers: on Ctrl-C or an error no queued run starts, and the
    # finished ones are in results.json already.
    shipped = replace(inputs, encoders=encoders_on_cpu(inputs.encoders))
    with context.Pool(min(workers, len(specs)), _init_worker, (shipped, os.getpid())) as pool:
        for spec, report, runtime in pool.imap_unordered(_train_in_worker, specs):
            done(spec, report, runtime)


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
