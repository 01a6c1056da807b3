"""biLM training on a corpus: what differs from the shared loop (:mod:`contextvec.training.loop`).

Batches are LM windows (:class:`~contextvec.training.bilm.batcher.StreamBatcher`) with the LSTM
states carried from one to the next; the loss is the mean NLL per direction (full or sampled
softmax); after each epoch, validation perplexity, the lr schedule (halving) and the best
epoch's model. Under ``torchrun`` every process builds the same global batch and computes its
slice of rows, the loss normalised by the global token count, so N processes compute the same
update as one process on the whole batch.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.optim.swa_utils import AveragedModel

from contextvec.training.bilm.batcher import StreamBatcher
from contextvec.training.bilm.config import BiLMTrainSettings
from contextvec.training.bilm.lm import LanguageModel, LSTMState
from contextvec.training.bilm.model_files import (
    VOCAB_FILE,
    Perplexity,
    evaluate_perplexity,
    init_weights,
    load_model,
    save_model,
    training_record,
)
from contextvec.training.corpus import SPECIALS, CorpusVocabulary, expand_paths, read_sentences
from contextvec.training.loop import (
    CHECKPOINT,
    MODEL_DIR,
    StopRequest,
    TrainingLoop,
    mean_loss,
    perplexity_of,
)
from contextvec.training.optim import make_optimizer

# Settings a run may change when resumed: its length, the lr schedule, and full vs sampled softmax
# and bf16 autocast (training-time approximations: same parameters, same data stream).
RESUMABLE_CHANGES = ("epochs", "max_steps", "checkpoint_every", "halve_from_epoch",
                     "average_from_epoch", "negatives", "bf16")


class Trainer(TrainingLoop):
    """Train a :class:`LanguageModel` on a corpus (module docstring); :meth:`train` runs it.

    ``init``: a trained model directory (or a bundled model's name) to continue from; its
    architecture replaces ``config.model``.
    """

    free_fields = RESUMABLE_CHANGES
    outputs = (CHECKPOINT, MODEL_DIR, VOCAB_FILE)

    def __init__(self, config: BiLMTrainSettings, train_files: list[str], output_dir: str | os.PathLike,
                 valid_files: list[str] | None = None, init: str | os.PathLike | None = None,
                 log: Callable[[str], None] = print, progress: bool = True,
                 on_step: Callable[[Trainer], None] | None = None) -> None:
        super().__init__(output_dir, log, progress, on_step=on_step)
        self.train_paths, self.valid_paths = expand_paths(train_files), None
        if valid_files:
            self.valid_paths = expand_paths(valid_files)
        self.rows = self.rows_per_process(config.rows, "rows")
        # What a fine-tuned model started from: its name and its own training record.
        self.init_record: dict[str, Any] | None = None
        if init is not None:
            self.model, self.vocab = load_model(init)
            self.init_record = {"model": str(init), **training_record(init)}
            config = dataclasses.replace(config, model=self.model.config)
            self.model.dropout.p = config.dropout
            self.model.dropout.locked = config.locked_dropout
            self.model.token_dropout = config.token_dropout
            self.model.set_weight_drop(config.weight_drop)
        else:
            self.vocab = self._vocabulary(config)
            self.model = LanguageModel(config.model, len(self.vocab), config.dropout,
                                       config.token_dropout, config.locked_dropout,
                                       config.weight_drop)
            init_weights(self.model, config.seed)
        self.config = config
        self.model.to(self.device)
        self.log(f"vocabulary {len(self.vocab):,} types; "
                 f"{sum(p.numel() for p in self.model.parameters()):,} parameters")
        self.net = self.wrap(self.model)
        self.optimizer = make_optimizer(config.optimizer, self.model.parameters(), config.lr)
        self.lr = config.lr
        self.data_state: dict[str, Any] | None = None
        self.lstm_state: LSTMState | None = None
        self.best_valid = math.inf
        self.best_iterate_valid = math.inf  # what the lr-halving rule compares with
        self.last_valid: Perplexity | None = None
        self.averaged: AveragedModel | None = None  # the running mean of the weights, once on
        self.average_lr: float | None = None  # the one lr of the steps in that mean
        self._batcher: StreamBatcher | None = None  # the epoch in progress (its data position)
        torch.manual_seed(config.seed + self.rank)

    def _vocabulary(self, config: BiLMTrainSettings) -> CorpusVocabulary:
        """The output's vocabulary (a resumed run), else one built from the corpus."""
        path = self.output / VOCAB_FILE
        if path.is_file():
            return CorpusVocabulary.load(path)
        vocab = CorpusVocabulary.build(self._train_sentences(config), config.min_count, config.max_vocab)
        if len(vocab) == len(SPECIALS):
            files = ", ".join(map(str, self.train_paths))
            if len(CorpusVocabulary.build(self._train_sentences(config))) == len(SPECIALS):
                raise ValueError(f"no tokens in {files}")
            raise ValueError(f"the vocabulary keeps no word of {files}: --min-count {config.min_count} "
                             f"and --max-vocab {config.max_vocab} (which counts the {len(SPECIALS)} "
                             f"specials {' '.join(SPECIALS)}) leave none")
        if self.rank == 0:
            self.output.mkdir(parents=True, exist_ok=True)
            vocab.save(path)
        return vocab

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_extra(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "data": self._batcher.state() if self._batcher is not None else None,
            "lstm_state": [list(s) for s in self.lstm_state] if self.lstm_state else None,
            "best_valid": self.best_valid, "best_iterate_valid": self.best_iterate_valid,
            "lr": self.lr,
            "averaged": self.averaged.state_dict() if self.averaged is not None else None,
            "average_lr": self.average_lr, "init_record": self.init_record,
        }

    def restore_extra(self, ckpt: dict[str, Any]) -> None:
        self.epoch, self.data_state = ckpt["epoch"], ckpt["data"]
        self.lstm_state = [tuple(s) for s in ckpt["lstm_state"]] if ckpt["lstm_state"] else None
        self.best_valid, self.best_iterate_valid = ckpt["best_valid"], ckpt["best_iterate_valid"]
        self.set_lr(ckpt["lr"])
        if ckpt["averaged"] is not None:
            self.averaged = AveragedModel(self.model)
            self.averaged.load_state_dict(ckpt["averaged"])
            self.average_lr = ckpt["average_lr"]
        self.init_record = ckpt["init_record"]

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
        return evaluate_perplexity(model or self.result_model,
                                   lambda: read_sentences(self.valid_paths, c.tokenizer),
                                   self.vocab, rows=c.rows, unroll=c.unroll, contiguous=c.contiguous)

    def train_step(self, batcher: StreamBatcher) -> tuple[float, int] | None:
        """One update on the next window: (its loss, its tokens), None at the corpus end."""
        window = next(batcher, None)
        if window is None:
            return None
        c = self.config
        mine = window.rows(self.rank * self.rows, (self.rank + 1) * self.rows)
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
            # iterates of the larger steps hold it back (on PTB with kim-small, a mean across an
            # lr halving scored worse than the last iterate alone).
            if self.averaged is None or self.average_lr != self.lr:
                self.averaged = AveragedModel(self.model)
                self.average_lr = self.lr
            self.averaged.update_parameters(self.model)
        self.lstm_state = [(h.detach(), cell.detach()) for h, cell in state]
        return loss.item() / self.world, int(window.mask[0].sum())

    def _step_stats(self, batcher: StreamBatcher) -> dict[str, float] | None:
        result = self.train_step(batcher)
        if result is None:
            return None
        loss, n_tokens = result
        return {"loss_sum": loss, "tokens": n_tokens, "progress": n_tokens}

    def train(self, resume: bool = False) -> Perplexity | None:
        """Train ``epochs`` (or to ``max_steps``); returns the validation perplexity."""
        self.start(resume)
        if self.run_epochs(self._epoch_steps) or not self._keeps_best_epoch:
            self.save_model()
        self.log(f"model in {self.output / MODEL_DIR}")
        return self.last_valid or self.valid_perplexity()

    def _train_sentences(self, config: BiLMTrainSettings | None = None) -> Iterator[list[str]]:
        """The training corpus as the config reads it (tokenizer, order, skipped lines)."""
        c = config or self.config
        return read_sentences(self.train_paths, c.tokenizer, c.interleave, c.skip_lines)

    def _epoch_steps(self, stop: StopRequest) -> bool:
        """One pass over the corpus (or its rest, when resumed); True when max_steps is reached."""
        c = self.config
        batcher = self._batcher = StreamBatcher(self._train_sentences, self.vocab, c.rows, c.unroll,
                                                c.model.bidirectional, self.data_state,
                                                contiguous=c.contiguous)
        self.data_state = None
        with self.progress_bar(desc=f"epoch {self.epoch + 1}/{c.epochs}", unit="tok",
                               unit_scale=True) as bar:
            return self.run_steps(lambda: self._step_stats(batcher), stop, bar, lambda s: {
                "loss": f"{mean_loss(s):.3f}", "ppl": f"{perplexity_of(mean_loss(s)):.1f}"})

    def end_epoch(self, stats: dict[str, float]) -> None:
        """Validation, the lr schedule, and the best epoch's model."""
        c = self.config
        self._batcher = None
        self.lstm_state = None
        valid = self.last_valid = self.valid_perplexity()
        seconds = stats.get("seconds", 0.0)  # training steps only, without validation
        message = (f"epoch {self.epoch}: train loss {mean_loss(stats):.3f}, "
                   f"{stats.get('tokens', 0) / max(seconds, 1e-9):.0f} tokens/s, {seconds:.0f} s")
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
            self.set_lr(self.lr / 2)
        if valid is not None:
            message += f", valid perplexity {valid.average:.2f}"
            if valid.average < self.best_valid:
                self.best_valid = valid.average
                self.save_model()  # model/ keeps the epoch that is best on valid
                message += " (best so far: saved)"
        if self.lr != c.lr:
            message += f" (lr now {self.lr:g})"
        self.log(message)

    @property
    def _keeps_best_epoch(self) -> bool:
        """Whether model/ holds the epoch best on validation (then only that epoch is saved)."""
        return math.isfinite(self.best_valid)

    def save_on_stop(self) -> None:
        if not self._keeps_best_epoch:
            self.save_model()

    def save_model(self) -> Path:
        directory = self.output / MODEL_DIR
        if self.rank == 0:
            save_model(self.result_model, self.vocab, directory)
            self.write_record(directory)
        return directory

    def record_extra(self) -> dict[str, Any]:
        extra = {
            "epochs_completed": self.epoch,
            "train_files": [str(p) for p in self.train_paths],
            "valid_perplexity": None if self.last_valid is None else self.last_valid.average,
            "averaged_steps": 0 if self.averaged is None else int(self.averaged.n_averaged),
        }
        if self.init_record is not None:
            extra["init"] = self.init_record  # steps, tokens, time before this run
        return extra
