"""The one fit loop of every task model: frozen-feature models (:mod:`contextvec.tasks.train`) and
fine-tuned BERT (:mod:`contextvec.tasks.finetune`) supply only their loss, optimizer and dev score.

:func:`fit` runs epochs of batches of similar length (:func:`training_batches`: sorted by length
with 10% multiplicative noise, then shuffled as batches), gradient-norm clipping, an optional
learning-rate schedule stepped per batch, a dev score after every epoch, optional early stopping
after ``patience`` epochs without a better dev score, and restores the best-on-dev weights at the
end (ties keep the earlier epoch). The test split never influences it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm import tqdm


@dataclass(frozen=True)
class FitSettings:
    """What every fit shares: at most ``epochs`` epochs of ``batch_size`` sentences, learning rate
    ``lr``, gradient-norm ``clip``, the ``seed`` of every random choice, and the seeded
    ``train_fraction`` of the training sentences used."""

    epochs: int = 30
    lr: float = 1e-3
    batch_size: int = 32
    clip: float = 5.0
    """Optimisation: epochs (at most), peak learning rate, sentences per batch, gradient-norm clip."""
    seed: int = 0
    train_fraction: float = 1.0
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1: {self}")
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], not {self.train_fraction}")
        if self.lr <= 0 or self.clip <= 0:
            raise ValueError(f"lr and clip must be > 0: {self}")


def eval_batch_size(settings: FitSettings) -> int:
    """Sentences per batch when scoring: no gradients are kept, so at least 64."""
    return max(settings.batch_size, 64)


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


@dataclass
class FitResult:
    """The epoch whose weights were kept, the per-epoch curve and the training seconds."""

    best_epoch: int
    curve: list[dict]
    train_seconds: float


def seed_everything(seed: int) -> None:
    """Seed ``random``, numpy and torch (before the model is built: its initialisation draws)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def training_batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length: sort by length x (1 +- 10% noise), cut, shuffle the batches."""
    keys = [n * (1 + rng.uniform(-0.1, 0.1)) for n in lengths]
    order = sorted(range(len(lengths)), key=keys.__getitem__)
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def _snapshot(model: nn.Module, frozen_prefix: str | None) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()
            if frozen_prefix is None or not k.startswith(frozen_prefix)}


def _restore(model: nn.Module, state: dict[str, torch.Tensor], frozen_prefix: str | None) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any(frozen_prefix is None or not k.startswith(frozen_prefix) for k in missing):
        raise RuntimeError(f"restoring the best weights failed: missing {missing}, unexpected {unexpected}")


@dataclass(frozen=True)
class Objective:
    """What a fit minimises and selects by: ``loss(ids)``, the loss of the batch of those training
    items; ``dev_score()``, the dev ``metric`` (higher is better)."""

    loss: Callable[[list[int]], torch.Tensor]
    dev_score: Callable[[], float]
    metric: str


@dataclass(frozen=True)
class Optimisation:
    """How a fit steps: the optimizer, the ``parameters`` whose gradient norm is clipped, and an
    optional learning-rate ``scheduler`` stepped after every batch."""

    optimizer: torch.optim.Optimizer
    parameters: Iterable[nn.Parameter]
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None


def fit(
    model: nn.Module,
    *,
    lengths: Sequence[int],
    objective: Objective,
    optimisation: Optimisation,
    settings: FitSettings,
    patience: int | None = None,
    frozen_prefix: str | None = None,
) -> FitResult:
    """Train ``model`` (see the module docstring); it ends in eval mode with the best weights.

    ``lengths``: the size of each training item (tokens or pieces) for batching;
    ``frozen_prefix``: state-dict keys never trained, so never copied as "best weights";
    ``patience`` None runs every epoch.
    """
    loss, dev_score, metric = objective.loss, objective.dev_score, objective.metric
    optimizer, scheduler = optimisation.optimizer, optimisation.scheduler
    parameters = list(optimisation.parameters)
    rng = random.Random(settings.seed)
    best_score, best_epoch, best_state = -math.inf, 0, _snapshot(model, frozen_prefix)
    curve: list[dict] = []
    train_seconds = 0.0
    for epoch in range(1, settings.epochs + 1):
        started = time.perf_counter()
        model.train()
        total_loss, n_batches = 0.0, 0
        batches = training_batches(lengths, settings.batch_size, rng)
        bar = tqdm(batches, desc=f"epoch {epoch}", unit="batch", disable=not settings.progress, leave=False)
        for ids in bar:
            value = loss(ids)
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            nn.utils.clip_grad_norm_(parameters, settings.clip)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            total_loss += float(value.detach())
            n_batches += 1
            bar.set_postfix(loss=f"{total_loss / n_batches:.3f}")
        epoch_train = time.perf_counter() - started
        train_seconds += epoch_train
        score = dev_score()
        curve.append({"epoch": epoch, "train_loss": round(total_loss / max(n_batches, 1), 5),
                      f"dev_{metric}": round(score, 5), "train_s": round(epoch_train, 3),
                      "eval_s": round(time.perf_counter() - started - epoch_train, 3)})
        if settings.progress:
            tqdm.write(f"epoch {epoch}: loss {total_loss / max(n_batches, 1):.4f}, dev {metric} {score:.4f}")
        if score > best_score:
            best_score, best_epoch, best_state = score, epoch, _snapshot(model, frozen_prefix)
        elif patience is not None and epoch - best_epoch >= patience:
            break
    _restore(model, best_state, frozen_prefix)
    model.eval()
    return FitResult(best_epoch, curve, train_seconds)


def runtime_summary(tokens: int, sentences: int, result: FitResult, eval_seconds: float) -> dict[str, float]:
    """The report's ``runtime_s``: training and final-evaluation seconds, training throughput."""
    seconds, epochs = max(result.train_seconds, 1e-9), len(result.curve)
    return {"train": round(result.train_seconds, 3), "final_eval": round(eval_seconds, 3),
            "train_tokens_per_s": round(tokens * epochs / seconds, 1),
            "train_sentences_per_s": round(sentences * epochs / seconds, 1)}
