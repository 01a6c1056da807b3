"""The training skeleton every trainer shares: placement under ``torchrun``, clean stop,
periodic checkpoints with exact resume, the ``training.json`` record, progress.

A trainer (biLM, BERT, translation) subclasses :class:`TrainingLoop` and supplies only what
differs: its batches and loss (the ``step`` callable given to :meth:`TrainingLoop.run_steps`),
its evaluation, what its checkpoint adds (:meth:`~TrainingLoop.checkpoint_extra`,
:meth:`~TrainingLoop.restore_extra`), what its record adds
(:meth:`~TrainingLoop.record_extra`) and how it saves its model
(:meth:`~TrainingLoop.save_model`).

Exact resume: a checkpoint holds the model, the optimizer, every process's RNG states, the
step and token counts, the statistics of the epoch in progress and the data position (given by
the trainer), so a resumed run ends with the parameters of an uninterrupted one. SIGINT/SIGTERM
(in any process) stop the run after the step in progress, with a checkpoint written.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from contextvec.io.atomic import atomic_path
from contextvec.training.distributed import Placement, join_process_group

CHECKPOINT = "checkpoint.pt"
MODEL_DIR = "model"
TRAINING_RECORD = "training.json"  # how a saved model was trained: steps, tokens, time, config


class StopRequest:
    """While active, SIGINT/SIGTERM only set ``requested``; a second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def clear_outputs(directory: str | Path, names: tuple[str, ...]) -> None:
    """Remove what an earlier run wrote in ``directory`` (``--overwrite``); nothing else."""
    for name in names:
        path = Path(directory) / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


class TrainingLoop:
    """The shared skeleton (module docstring). Subclasses set ``config`` (a dataclass with
    ``to_dict``/``from_dict``, ``max_steps`` and ``checkpoint_every``), ``model`` and
    ``optimizer``, and may list in ``free_fields`` the config fields a resumed run may change.

    ``on_step(trainer)`` is called after every step (progress hooks, tests).
    """

    free_fields: tuple[str, ...] = ("max_steps", "checkpoint_every")
    outputs: tuple[str, ...] = (CHECKPOINT, MODEL_DIR)
    """What a run writes in its output directory (removed by ``overwrite``)."""

    config: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def __init__(self, output_dir: str | Path, log: Callable[[str], None], progress: bool,
                 device: str | torch.device | None = None,
                 on_step: Callable[[Any], None] | None = None) -> None:
        self.output = Path(output_dir)
        place = (join_process_group() if device is None
                 else Placement(False, 0, 1, torch.device(device)))
        self.distributed, self.rank, self.world = place.distributed, place.rank, place.world
        self.device = place.device
        self.log = log if self.rank == 0 else (lambda message: None)
        self.progress = progress and self.rank == 0
        self.on_step = on_step
        self.step = 0
        self.epoch = 0  # epochs completed (trainers that count epochs)
        self.tokens_seen = 0
        self.train_seconds = 0.0
        self.epoch_stats: dict[str, float] = {}  # the epoch in progress (checkpointed)
        # Settings changed when resuming (step, {name: [before, after]}), so the record of a model
        # says which steps ran with which setting.
        self.changes: list[dict[str, Any]] = []
        self.lr = 0.0

    # ------------------------------------------------------------------ what trainers supply
    def checkpoint_extra(self) -> dict[str, Any]:
        """The trainer's own checkpoint entries (its data position, schedule, best score...)."""
        return {}

    def restore_extra(self, checkpoint: dict[str, Any]) -> None:
        """Restore :meth:`checkpoint_extra`'s entries."""

    def record_extra(self) -> dict[str, Any]:
        """The trainer's own ``training.json`` entries."""
        return {}

    def save_model(self) -> Path:
        raise NotImplementedError

    def end_epoch(self, stats: dict[str, float]) -> None:
        """After each epoch of :meth:`run_epochs` (``stats``: its :attr:`epoch_stats`):
        validation, schedules, the best model."""

    def save_on_stop(self) -> None:
        """What a stopped run saves besides the checkpoint (default: the model)."""
        self.save_model()

    # ------------------------------------------------------------------ shared pieces
    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` under DDP when there are several processes."""
        return DistributedDataParallel(model) if self.distributed else model

    def rows_per_process(self, rows: int, name: str) -> int:
        """This process's share of a global batch of ``rows`` (the same in every process)."""
        if rows % self.world:
            raise ValueError(f"{name} ({rows}) must be divisible by the {self.world} workers")
        return rows // self.world

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def progress_bar(self, **kwargs: Any) -> tqdm:
        # In a log file (not a terminal) a progress line a minute is enough.
        return tqdm(disable=not self.progress, mininterval=0.1 if sys.stderr.isatty() else 60.0,
                    **kwargs)

    def record(self) -> dict[str, Any]:
        """What ``training.json`` says about the model being saved."""
        record = {
            "steps": self.step, "tokens_seen": self.tokens_seen,
            "train_seconds": round(self.train_seconds, 1), "processes": self.world,
            "threads": torch.get_num_threads(), **self.record_extra(),
            "config": self.config.to_dict(),
        }
        if self.changes:
            record["changes"] = self.changes  # settings changed on resuming, and from which step
        return record

    def write_record(self, directory: Path) -> None:
        with atomic_path(directory / TRAINING_RECORD) as tmp:
            Path(tmp).write_text(json.dumps(self.record(), indent=2) + "\n", encoding="utf-8")

    def _rng_states(self) -> list[dict[str, torch.Tensor]]:
        """Every process's RNG states (gathered: dropout differs between processes)."""
        mine = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            mine["cuda"] = torch.cuda.get_rng_state(self.device)
        if not self.distributed:
            return [mine]
        states: list[Any] = [None] * self.world
        dist.all_gather_object(states, mine)
        return states

    def save_checkpoint(self) -> None:
        """Write ``checkpoint.pt`` atomically (every process calls it: RNG states are gathered)."""
        rng = self._rng_states()
        if self.rank != 0:
            return
        state = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "rng": rng, "step": self.step, "tokens_seen": self.tokens_seen,
            "train_seconds": self.train_seconds, "epoch_stats": dict(self.epoch_stats),
            "changes": self.changes, "config": self.config.to_dict(), "world": self.world,
            **self.checkpoint_extra(),
        }
        self.output.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.output / CHECKPOINT) as tmp:
            torch.save(state, tmp)

    def load_checkpoint(self) -> bool:
        """Continue from ``checkpoint.pt`` if there is one; only ``free_fields`` may differ from
        the config it was written with (those changes are recorded)."""
        path = self.output / CHECKPOINT
        if not path.is_file():
            return False
        ckpt = torch.load(path, map_location=self.device, weights_only=True)
        # from_dict fills fields added to the config since the checkpoint was written.
        saved = type(self.config).from_dict(ckpt["config"]).to_dict()
        now = self.config.to_dict()
        differ = sorted(k for k in now if saved.get(k) != now[k])
        fixed = [k for k in differ if k not in self.free_fields]
        if fixed:
            raise ValueError(f"{path} was written with another training config ({', '.join(fixed)} "
                             "differ); resume with the same settings or use another output "
                             "directory")
        self.changes = list(ckpt.get("changes", []))
        if differ:
            self.changes.append({"step": ckpt["step"], "changed": {k: [saved[k], now[k]]
                                                                    for k in differ}})
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        rng = ckpt["rng"][self.rank] if len(ckpt["rng"]) == self.world else ckpt["rng"][0]
        if len(ckpt["rng"]) != self.world:
            self.log(f"the checkpoint was written by {len(ckpt['rng'])} processes: dropout draws "
                     "will differ from an uninterrupted run")
        torch.set_rng_state(rng["cpu"].cpu())
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"].cpu(), self.device)
        self.step, self.tokens_seen = ckpt["step"], ckpt["tokens_seen"]
        self.train_seconds = ckpt["train_seconds"]
        self.epoch_stats = dict(ckpt["epoch_stats"])
        self.restore_extra(ckpt)
        self.log(f"resumed from {path} at step {self.step}")
        return True

    def start(self, resume: bool) -> None:
        """Load the checkpoint (``resume``), or refuse to start over one."""
        if resume:
            if not self.load_checkpoint():
                self.log(f"no checkpoint in {self.output}: starting from scratch")
        elif (self.output / CHECKPOINT).exists():
            raise FileExistsError(f"{self.output / CHECKPOINT} exists: pass --resume to continue "
                                  "that run, or choose another output directory")

    def _stop_requested(self, stop: StopRequest) -> bool:
        """A SIGINT/SIGTERM in any process (one small collective under DDP)."""
        if not self.distributed:
            return stop.requested
        flag = torch.tensor([float(stop.requested)], device=self.device)
        dist.all_reduce(flag)
        return bool(flag.item())

    def run_steps(self, step: Callable[[], dict[str, float] | None], stop: StopRequest,
                  bar: tqdm, postfix: Callable[[dict[str, float]], dict[str, str]]) -> bool:
        """Training steps until ``step`` returns None (the data ran out: False) or ``max_steps``
        (True). ``step`` returns its statistics, summed into :attr:`epoch_stats`: ``tokens``
        (added to ``tokens_seen`` and the tokens/s figure) and ``progress`` (the bar's advance)
        at least. Checkpoints every ``checkpoint_every`` steps; a stop request saves a
        checkpoint (:meth:`save_on_stop` too) and raises ``KeyboardInterrupt``."""
        c = self.config
        while True:
            start = time.perf_counter()
            stats = step()
            if stats is None:
                return False
            seconds = time.perf_counter() - start
            self.train_seconds += seconds
            self.step += 1
            self.tokens_seen += int(stats["tokens"])
            for key, value in {**stats, "seconds": seconds, "steps": 1}.items():
                self.epoch_stats[key] = self.epoch_stats.get(key, 0) + value
            bar.update(stats["progress"])
            if self.step % 10 == 0:
                s = self.epoch_stats
                bar.set_postfix(tok_s=f"{s['tokens'] / max(s['seconds'], 1e-9):.0f}", step=self.step,
                                **postfix(s), refresh=False)
            if self.on_step is not None:
                self.on_step(self)
            if self._stop_requested(stop):
                bar.close()
                self.save_checkpoint()
                if self.rank == 0:
                    self.save_on_stop()
                self.log(f"stopped at step {self.step}: checkpoint saved in {self.output}; "
                         "continue with --resume")
                raise KeyboardInterrupt
            if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                self.save_checkpoint()
            if c.max_steps is not None and self.step >= c.max_steps:
                self.save_checkpoint()
                return True


    def run_epochs(self, epoch_steps: Callable[[StopRequest], bool]) -> bool:
        """Epochs up to ``config.epochs``: ``epoch_steps(stop)`` runs the (rest of the) epoch's
        steps with :meth:`run_steps`, then :meth:`end_epoch` and a checkpoint. True when
        ``max_steps`` ended the run."""
        with StopRequest() as stop:
            while self.epoch < self.config.epochs:
                if epoch_steps(stop):
                    return True
                self.epoch += 1
                stats, self.epoch_stats = self.epoch_stats, {}
                self.end_epoch(stats)
                self.save_checkpoint()
        return False


def mean_loss(stats: dict[str, float], key: str = "loss_sum", count: str = "steps") -> float:
    """A mean over the epoch's statistics (0 before the first step)."""
    return stats.get(key, 0.0) / max(stats.get(count, 0), 1)


def perplexity_of(loss: float) -> float:
    return math.exp(min(loss, 50.0))
