"""The biLM training loop: checkpoints with exact resume, data parallelism, perplexity.

Run it in one process, or under ``torchrun --nproc_per_node N`` for data-parallel training
(DDP; gloo on CPU, nccl on GPU): every process builds the same global batch and computes its
slice of rows, the loss is normalised by the global token count, so N processes compute the
same update as one process on the whole batch.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel
from tqdm import tqdm

from contextvec.encoders.bilm import MODEL_TYPE
from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.io.atomic import atomic_path
from contextvec.io.native import load_native, save_native
from contextvec.training.batcher import StreamBatcher
from contextvec.training.config import TrainConfig
from contextvec.training.corpus import Vocabulary, expand_paths, read_sentences
from contextvec.training.distributed import join_process_group
from contextvec.training.lm import LanguageModel, LSTMState

CHECKPOINT = "checkpoint.pt"
VOCAB_FILE = "vocab.txt"
TRAINING_RECORD = "training.json"  # how a saved model was trained: steps, tokens, time, config
# Settings a run may change when resumed: its length, the lr schedule, and full vs sampled softmax
# and bf16 autocast (training-time approximations: same parameters, same data stream).
RESUMABLE_CHANGES = ("epochs", "max_steps", "checkpoint_every", "halve_from_epoch",
                     "average_from_epoch", "negatives", "bf16")


@dataclass
class Perplexity:
    forward: float
    backward: float | None
    tokens: int

    @property
    def average(self) -> float:
        """Mean of the two directions' perplexities (bilm-tf's figure); forward-only: forward."""
        return self.forward if self.backward is None else (self.forward + self.backward) / 2


def save_model(model: LanguageModel, vocab: Vocabulary, directory: str | os.PathLike) -> Path:
    """A contextvec model directory with the softmax and vocabulary (for perplexity/fine-tuning)."""
    directory = Path(directory)
    state = {f"softmax.{k}": v for k, v in model.softmax.state_dict().items()}
    state.update(model.bilm.state_dict())
    save_native(directory, MODEL_TYPE, model.config.to_dict(), state)
    with atomic_path(directory / VOCAB_FILE) as tmp:
        vocab.save(tmp)
    return directory


def _model_directory(directory: str | os.PathLike) -> Path:
    from contextvec.api import bundled_models  # api imports the encoders, not the trainer

    directory = Path(directory)
    return directory if directory.exists() else bundled_models().get(str(directory), directory)


def load_model(directory: str | os.PathLike) -> tuple[LanguageModel, Vocabulary]:
    """A trained model directory (or a bundled model's name) -> (LM with softmax, vocabulary)."""
    directory = _model_directory(directory)
    if not (directory / VOCAB_FILE).is_file():
        raise FileNotFoundError(f"{directory}: no {VOCAB_FILE}; only trained contextvec models "
                                "keep the softmax and vocabulary needed here")
    _, config, state = load_native(directory)
    vocab = Vocabulary.load(directory / VOCAB_FILE)
    model = LanguageModel(BiLMConfig.from_dict(config), len(vocab))
    softmax = {k.removeprefix("softmax."): v for k, v in state.items() if k.startswith("softmax.")}
    if not softmax:
        raise ValueError(f"{directory}: the model has no softmax weights")
    model.softmax.load_state_dict(softmax)
    model.bilm.load_state_dict({k: v for k, v in state.items() if not k.startswith("softmax.")})
    return model, vocab


def _detach(state: LSTMState) -> LSTMState:
    return [(h.detach(), c.detach()) for h, c in state]


@torch.no_grad()
def evaluate(
    model: LanguageModel,
    sentences: Callable[[], Iterator[list[str]]],
    vocab: Vocabulary,
    rows: int = 32,
    unroll: int = 20,
    progress: bool = False,
    contiguous: bool = False,
) -> Perplexity:
    """Exact full-softmax perplexity, ``exp(mean NLL)`` with gold history, per direction.

    ``contiguous`` reads the file as ``rows`` contiguous streams (the PTB convention), so every
    sentence is scored after its real predecessors; otherwise sentences are dealt to the rows.
    """
    was_training = model.training
    model.eval()
    bidirectional = model.config.bidirectional
    batcher = StreamBatcher(sentences, vocab, rows, unroll, bidirectional, contiguous=contiguous)
    nll = torch.zeros(2 if bidirectional else 1, dtype=torch.float64)
    count = torch.zeros_like(nll)
    state = None
    for window in tqdm(batcher, desc="perplexity", unit="win", disable=not progress):
        sums, counts, state = model(window, state)
        nll += sums.double().cpu()
        count += counts.double().cpu()
    model.train(was_training)
    ppl = torch.exp(nll / count.clamp(min=1)).tolist()
    return Perplexity(ppl[0], ppl[1] if bidirectional else None, int(count[0]))


def _optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adagrad":  # bilm-tf: Adagrad with initial accumulator 1.0
        return torch.optim.Adagrad(model.parameters(), lr=config.lr, initial_accumulator_value=1.0)
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    return torch.optim.SGD(model.parameters(), lr=config.lr)


def _init_weights(model: LanguageModel, seed: int) -> None:
    """bilm-tf's initialisation. The small, zero-centred char-CNN start matters: with
    PyTorch's default (random biases, larger conv weights) the max-pooled features share a large
    common offset, tanh saturates, and the token vectors of all words collapse into one
    (measured on PTB: mean pairwise cosine 1.000 after 1,600 steps, stuck at unigram perplexity)."""
    torch.manual_seed(seed)
    cnn = model.bilm.token_encoder
    with torch.no_grad():
        nn.init.uniform_(cnn.char_embedding.weight, -1.0, 1.0)
        cnn.char_embedding.weight[0].zero_()
        for conv in cnn.convolutions:
            width, dim = conv.kernel_size[0], conv.in_channels
            if model.config.activation == "tanh":
                nn.init.uniform_(conv.weight, -0.05, 0.05)
            else:
                nn.init.normal_(conv.weight, 0.0, (1.0 / (width * dim)) ** 0.5)
            nn.init.zeros_(conv.bias)
        n_filters = model.config.n_filters
        for transform, gate in zip(cnn.highway.transform, cnn.highway.gate, strict=True):
            for linear in (transform, gate):
                nn.init.normal_(linear.weight, 0.0, (1.0 / n_filters) ** 0.5)
            nn.init.zeros_(transform.bias)
            nn.init.constant_(gate.bias, -2.0)  # carry the input at first
        if isinstance(cnn.projection, nn.Linear):
            nn.init.normal_(cnn.projection.weight, 0.0, (1.0 / n_filters) ** 0.5)
            nn.init.zeros_(cnn.projection.bias)
        for layer in model.bilm.layers:
            layer.reset_parameters()
        nn.init.normal_(model.softmax.weight, 0.0, model.config.projection_dim**-0.5)
        nn.init.zeros_(model.softmax.bias)


class Trainer:
    """Train a :class:`LanguageModel` on a corpus; see :func:`train` for the entry point."""

    def __init__(
        self,
        config: TrainConfig,
        train_files: list[str],
        output_dir: str | os.PathLike,
        valid_files: list[str] | None = None,
        init: str | os.PathLike | None = None,
        log: Callable[[str], None] = print,
        progress: bool = True,
    ) -> None:
        self.config = config
        self.output = Path(output_dir)
        self.train_paths = expand_paths(train_files)
        self.valid_paths = expand_paths(valid_files) if valid_files else None
        place = join_process_group()
        self.distributed, self.rank, self.world = place.distributed, place.rank, place.world
        self.device = place.device
        if config.rows % self.world:
            raise ValueError(f"rows ({config.rows}) must be divisible by the {self.world} workers")
        self.log = log if self.rank == 0 else (lambda message: None)
        self.progress = progress and self.rank == 0

        # What a fine-tuned model started from: its name and its own training record.
        self.init_record: dict[str, Any] | None = None
        # Settings changed when resuming (step, {name: [before, after]}), so the record of a model
        # says which steps ran with, e.g., the full softmax and which with the sampled one.
        self.changes: list[dict[str, Any]] = []
        if init is not None:
            self.model, self.vocab = load_model(init)
            previous = _model_directory(init) / TRAINING_RECORD
            self.init_record = {"model": str(init), **(
                json.loads(previous.read_text(encoding="utf-8")) if previous.is_file() else {})}
            self.model.dropout.p = config.dropout
            self.model.dropout.locked = config.locked_dropout
            self.model.token_dropout = config.token_dropout
            self.model.set_weight_drop(config.weight_drop)
        else:
            vocab_path = self.output / VOCAB_FILE
            if vocab_path.is_file():
                self.vocab = Vocabulary.load(vocab_path)
            else:
                self.vocab = Vocabulary.build(
                    self._train_sentences(),
                    config.min_count,
                    config.max_vocab,
                )
                if self.rank == 0:
                    self.output.mkdir(parents=True, exist_ok=True)
                    self.vocab.save(vocab_path)
            self.model = LanguageModel(config.model, len(self.vocab), config.dropout,
                                       config.token_dropout, config.locked_dropout,
                                       config.weight_drop)
            _init_weights(self.model, config.seed)
        self.model.to(self.device)
        self.log(f"vocabulary {len(self.vocab):,} types; "
                 f"{sum(p.numel() for p in self.model.parameters()):,} parameters")
        self.net: torch.nn.Module = (
            DistributedDataParallel(self.model) if self.distributed else self.model
        )
        self.optimizer = _optimizer(self.model, config)
        self.step = 0
        self.tokens_seen = 0  # scored forward targets, summed over steps
        self.train_seconds = 0.0
        self.epoch = 0
        self.data_state: dict[str, Any] | None = None
        self.lstm_state: LSTMState | None = None
        self.best_valid = math.inf
        self.best_iterate_valid = math.inf  # what the lr-halving rule compares with
        self.last_valid: Perplexity | None = None
        self.lr = config.lr
        self.averaged: AveragedModel | None = None  # the running mean of the weights, once on
        self.average_lr: float | None = None  # the one lr of the steps in that mean
        torch.manual_seed(config.seed + self.rank)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self, batcher: StreamBatcher | None) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "train_seconds": self.train_seconds,
            "epoch": self.epoch,
            "data": batcher.state() if batcher is not None else None,
            "lstm_state": [list(s) for s in self.lstm_state] if self.lstm_state else None,
            "best_valid": self.best_valid,
            "best_iterate_valid": self.best_iterate_valid,
            "lr": self.lr,
            "averaged": self.averaged.state_dict() if self.averaged is not None else None,
            "average_lr": self.average_lr,
            "init_record": self.init_record,
            "changes": self.changes,
            "config": self.config.to_dict(),
        }

    def save_checkpoint(self, batcher: StreamBatcher | None) -> None:
        if self.rank != 0:
            return
        self.output.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.output / CHECKPOINT) as tmp:
            torch.save(self.checkpoint_state(batcher), tmp)

    def load_checkpoint(self) -> bool:
        path = self.output / CHECKPOINT
        if not path.is_file():
            return False
        ckpt = torch.load(path, map_location=self.device, weights_only=True)
        # from_dict fills fields added to TrainConfig since the checkpoint was written.
        saved = TrainConfig.from_dict(ckpt["config"]).to_dict()
        now = self.config.to_dict()
        differ = {k for k in saved if saved[k] != now[k]}
        if differ - set(RESUMABLE_CHANGES):
            raise ValueError(f"{path} was written with another training config; "
                             "resume with the same settings or use another output directory")
        self.changes = list(ckpt.get("changes", []))
        changed = {k: [saved[k], now[k]] for k in RESUMABLE_CHANGES if k in differ}
        if changed:
            self.changes.append({"step": ckpt["step"], "changed": changed})
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"])
        self.step, self.epoch = ckpt["step"], ckpt["epoch"]
        self.tokens_seen = ckpt.get("tokens_seen", 0)
        self.train_seconds = ckpt.get("train_seconds", 0.0)
        self.data_state = ckpt["data"]
        self.lstm_state = [tuple(s) for s in ckpt["lstm_state"]] if ckpt["lstm_state"] else None
        self.best_valid, self.lr = ckpt["best_valid"], ckpt["lr"]
        self.best_iterate_valid = ckpt.get("best_iterate_valid", self.best_valid)
        self._set_lr(self.lr)
        if ckpt.get("averaged") is not None:
            self.averaged = AveragedModel(self.model)
            self.averaged.load_state_dict(ckpt["averaged"])
            self.average_lr = ckpt.get("average_lr")
        self.init_record = ckpt.get("init_record", self.init_record)
        self.log(f"resumed from {path} at step {self.step} (epoch {self.epoch + 1})")
        return True

    def _set_lr(self, lr: float) -> None:
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # ------------------------------------------------------------------ training
    @property
    def result_model(self) -> LanguageModel:
        """The weights that are validated and saved: the running average once it is on."""
        return self.averaged.module if self.averaged is not None else self.model

    def valid_perplexity(self, model: LanguageModel | None = None) -> Perplexity | None:
        """Validation perplexity of ``model`` (default: :attr:`result_model`); None without data."""
        if self.valid_paths is None:
            return None
        c = self.config
        return evaluate(model or self.result_model, lambda: read_sentences(self.valid_paths, c.tokenizer),
                        self.vocab, rows=c.rows, unroll=c.unroll, contiguous=c.contiguous)

    def _train_step(self, batcher: StreamBatcher) -> tuple[float, int] | None:
        window = next(batcher, None)
        if window is None:
            return None
        c = self.config
        per_rank = c.rows // self.world
        mine = window.rows(self.rank * per_rank, (self.rank + 1) * per_rank)
        global_counts = window.mask.sum(dim=(1, 2)).clamp(min=1).to(self.device)
        generator = None
        if c.negatives:
            generator = torch.Generator().manual_seed(c.seed * 1_000_003 + self.step)
        sums, counts, state = self.net(mine, self.lstm_state, c.negatives, generator, c.bf16)
        # Mean NLL over the global batch per direction, averaged over directions; DDP
        # averages gradients over workers, hence the factor world.
        loss = (sums / global_counts).mean() * self.world
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.clip)
        self.optimizer.step()
        if c.average_from_epoch is not None and self.epoch >= c.average_from_epoch:
            # Polyak averaging assumes one step size: a new lr starts a new mean, else the
            # iterates of the larger steps hold it back (PTB, kim-small: the mean of epochs 10-14
            # scored 116.5 where the iterate after epoch 14 scored 114.2).
            if self.averaged is None or self.average_lr != self.lr:
                self.averaged = AveragedModel(self.model)
                self.average_lr = self.lr
            self.averaged.update_parameters(self.model)
        self.lstm_state = _detach(state)
        self.step += 1
        n_tokens = int(window.mask[0].sum())
        self.tokens_seen += n_tokens
        return loss.item() / self.world, n_tokens

    def train(self, resume: bool = False) -> Perplexity | None:
        c = self.config
        if resume:
            self.load_checkpoint()
        elif (self.output / CHECKPOINT).exists():
            raise FileExistsError(f"{self.output / CHECKPOINT} exists: pass --resume to continue "
                                  "that run, or choose another output directory")
        done = False
        with _StopRequest() as stop:
            while self.epoch < c.epochs and not done:
                done = self._train_epoch(stop)
        if done or not self._keeps_best_epoch:
            self._save_model()
        self.log(f"model in {self.output / 'model'}")
        return self.last_valid or self.valid_perplexity()

    def _train_sentences(self) -> Iterator[list[str]]:
        """The training corpus as the config reads it (tokenizer, order, skipped lines)."""
        c = self.config
        return read_sentences(self.train_paths, c.tokenizer, c.interleave, c.skip_lines)

    def _train_epoch(self, stop: _StopRequest) -> bool:
        """One pass over the corpus (or its rest, when resumed); True when max_steps is reached."""
        c = self.config
        batcher = StreamBatcher(self._train_sentences, self.vocab,
                                c.rows, c.unroll, c.model.bidirectional, self.data_state,
                                contiguous=c.contiguous)
        self.data_state = None
        # In a log file (not a terminal) a progress line a minute is enough.
        bar = tqdm(desc=f"epoch {self.epoch + 1}/{c.epochs}", unit="tok",
                   disable=not self.progress, unit_scale=True,
                   mininterval=0.1 if sys.stderr.isatty() else 60.0)
        start, tokens, loss_sum, n_steps = time.perf_counter(), 0, 0.0, 0
        while True:
            if stop.requested:
                # SIGINT/SIGTERM arrive between two steps: save exactly where we are and stop.
                bar.close()
                self.save_checkpoint(batcher)
                if not self._keeps_best_epoch:
                    self._save_model()
                self.log(f"stopped at step {self.step}: checkpoint saved in {self.output}; "
                         "continue with --resume")
                raise KeyboardInterrupt
            step_start = time.perf_counter()
            result = self._train_step(batcher)
            self.train_seconds += time.perf_counter() - step_start
            if result is None:
                break
            loss, n_tokens = result
            tokens += n_tokens
            loss_sum += loss
            n_steps += 1
            bar.update(n_tokens)
            if self.step % 10 == 0:
                rate = tokens / (time.perf_counter() - start)
                bar.set_postfix(loss=f"{loss_sum / n_steps:.3f}",
                                ppl=f"{math.exp(min(loss_sum / n_steps, 50)):.1f}",
                                tok_s=f"{rate:.0f}", step=self.step, refresh=False)
            if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                self.save_checkpoint(batcher)
            if c.max_steps is not None and self.step >= c.max_steps:
                bar.close()
                self.save_checkpoint(batcher)
                return True
        bar.close()
        elapsed = time.perf_counter() - start
        self.epoch += 1
        self.lstm_state = None
        valid = self.last_valid = self.valid_perplexity()
        message = (f"epoch {self.epoch}: train loss {loss_sum / max(n_steps, 1):.3f}, "
                   f"{tokens / max(elapsed, 1e-9):.0f} tokens/s, {elapsed:.0f} s")
        # The halving rule reads the iterate itself: a mean restarted at each lr improves
        # little in its second epoch even while the iterate still does, and halving on it
        # annealed kim-small's lr every epoch from epoch 16 on.
        iterate = valid
        if valid is not None and self.averaged is not None:
            iterate = self.valid_perplexity(self.model)
            message += f", the iterate's valid perplexity {iterate.average:.2f}"
        stalled = (iterate is not None and c.lr_halving
                   and iterate.average > self.best_iterate_valid - 1.0)
        if iterate is not None:
            self.best_iterate_valid = min(self.best_iterate_valid, iterate.average)
        if stalled or (c.halve_from_epoch is not None and self.epoch >= c.halve_from_epoch):
            self._set_lr(self.lr / 2)
        if valid is not None:
            message += f", valid perplexity {valid.average:.2f}"
            if valid.average < self.best_valid:
                self.best_valid = valid.average
                self._save_model()  # model/ keeps the epoch that is best on valid
                message += " (best so far: saved)"
        if self.lr != c.lr:
            message += f" (lr now {self.lr:g})"
        self.log(message)
        self.save_checkpoint(None)
        return False

    @property
    def _keeps_best_epoch(self) -> bool:
        """Whether model/ holds the epoch best on validation (then only that epoch is saved)."""
        return math.isfinite(self.best_valid)

    def _save_model(self) -> None:
        if self.rank != 0:
            return
        directory = save_model(self.result_model, self.vocab, self.output / "model")
        record = {
            "steps": self.step, "epochs_completed": self.epoch, "tokens_seen": self.tokens_seen,
            "train_seconds": round(self.train_seconds, 1), "processes": self.world,
            "threads": torch.get_num_threads(),
            "train_files": [str(p) for p in self.train_paths],
            "valid_perplexity": None if self.last_valid is None else self.last_valid.average,
            "averaged_steps": 0 if self.averaged is None else int(self.averaged.n_averaged),
            "config": self.config.to_dict(),
        }
        if self.changes:
            record["changes"] = self.changes  # settings changed on resuming, and from which step
        if self.init_record is not None:
            record["init"] = self.init_record  # steps, tokens, time before this run
        with atomic_path(directory / TRAINING_RECORD) as tmp:
            Path(tmp).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


class _StopRequest:
    """While active, SIGINT/SIGTERM only set ``requested``; a second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
