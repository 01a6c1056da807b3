"""BERT pretraining (masked LM + next sentence prediction): what differs from the shared loop
(:mod:`contextvec.training.loop`).

Batches are sentence pairs from a :class:`~contextvec.training.bert.stream.PretrainingStream`
(its position is checkpointed); under ``torchrun`` every process builds the same global batch
and computes its slice of rows with the losses normalised by global counts, so N processes
compute the update of one process on the whole batch.

Optimisation is BERT's: AdamW (betas 0.9/0.999, eps 1e-6), weight decay on all weights except
LayerNorm weights and biases, linear warmup then linear decay to 0 at ``max_steps``, gradient
norm clipping; optional bf16 autocast. The loss is the mean masked-LM NLL over the batch's
predicted pieces plus the mean NSP NLL over its pairs.

The output directory holds ``checkpoint.pt``, ``tokenizer/`` (trained from the corpus unless a
vocabulary is given) and ``model/``: an HF BERT directory (``config.json``, ``model.safetensors``
with ``BertForPreTraining`` keys, the tokenizer files, ``training.json``) that
``contextvec.load`` and HF transformers read.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from contextvec.encoders.bert.heads import BertForPreTraining, save_pretraining_model
from contextvec.encoders.bert.tokenizer import VOCAB_TXT, WordPieceTokenizer
from contextvec.training.bert.config import BertTrainSettings
from contextvec.training.bert.evaluate import (
    EVAL_SEED,
    BertScores,
    EvalSettings,
    batch_scores,
    evaluate_pretraining,
    padding_id,
)
from contextvec.training.bert.instances import IGNORE_INDEX, InstanceSettings, collate
from contextvec.training.bert.stream import PretrainingStream
from contextvec.training.bert.wordpiece import copy_tokenizer_files, train_wordpiece
from contextvec.training.corpus import expand_paths
from contextvec.training.loop import CHECKPOINT, MODEL_DIR, StopRequest, TrainingLoop
from contextvec.training.optim import bert_parameter_groups

TOKENIZER_DIR = "tokenizer"


def check_vocab(vocab: str | os.PathLike, what: str = "the vocabulary") -> None:
    """A ``FileNotFoundError`` in one line where ``vocab`` is not a tokenizer directory holding
    ``vocab.txt``, saying which of that it is not (``what`` names it in the message)."""
    path = Path(vocab)
    problem = ("does not exist" if not path.exists() else "is not a directory" if not path.is_dir()
               else f"has no {VOCAB_TXT}" if not (path / VOCAB_TXT).is_file() else None)
    if problem:
        raise FileNotFoundError(f"{what} {path} {problem}: {what} is a tokenizer directory holding "
                                f"{VOCAB_TXT}, as contextvec train-wordpiece writes")


class BertTrainer(TrainingLoop):
    """Pretrain a BERT on a corpus (module docstring); :meth:`train` runs it.

    ``vocab``: a tokenizer directory (``contextvec train-wordpiece``); without one, a WordPiece
    vocabulary of ``config.model.vocab_size`` is trained on the training files first (once: it
    is kept in ``output_dir/tokenizer``). Only ``max_steps`` (which also re-stretches the
    learning-rate decay from there) and ``checkpoint_every`` may change when resuming.
    """

    outputs = (CHECKPOINT, MODEL_DIR, TOKENIZER_DIR)

    def __init__(
        self,
        config: BertTrainSettings,
        train_files: Sequence[str],
        output_dir: str | os.PathLike,
        valid_files: Sequence[str] | None = None,
        *,
        vocab: str | os.PathLike | None = None,
        log: Callable[[str], None] = print,
        progress: bool = True,
        on_step: Callable[[BertTrainer], None] | None = None,
    ) -> None:
        super().__init__(output_dir, log, progress, on_step=on_step)
        paths = [expand_paths(files) if files else None for files in (train_files, valid_files)]
        self.train_paths, self.valid_paths = paths
        self.rows = self.rows_per_process(config.batch_size, "batch_size")
        self.tokenizer_dir = self.output / TOKENIZER_DIR
        if self.rank == 0:
            self._prepare_tokenizer(config, vocab)
        if self.distributed:
            dist.barrier()
        self.tokenizer = WordPieceTokenizer.from_directory(self.tokenizer_dir)
        self.pad_id = padding_id(self.tokenizer)
        vocab_size = self.tokenizer.tokenizer.get_vocab_size(with_added_tokens=True)
        self.config = replace(config, model=replace(config.model, vocab_size=vocab_size,
                                                    pad_token_id=self.pad_id))
        self.model = BertForPreTraining(self.config.model)
        self.model.init_weights(self.config.seed)  # the same start in every process
        self.model.to(self.device)
        n_parameters = sum(p.numel() for p in self.model.parameters())
        self.log(f"vocabulary {vocab_size:,} pieces; {n_parameters:,} parameters")
        self.net = self.wrap(self.model)
        # AdamW with BERT's groups (no weight decay on biases and LayerNorm weights), eps 1e-6.
        self.optimizer = torch.optim.AdamW(bert_parameter_groups(self.model, self.config.weight_decay),
                                           lr=self.config.lr, betas=(0.9, 0.999), eps=1e-6)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: self._lr_factor(step))  # reads max_steps when called
        self.data_state: dict[str, Any] | None = None
        self._stream: PretrainingStream | None = None
        self.valid_scores: BertScores | None = None
        torch.manual_seed(self.config.seed + self.rank)  # dropout differs between processes

    def _prepare_tokenizer(self, config: BertTrainSettings, vocab: str | os.PathLike | None) -> None:
        """Fill ``output/tokenizer`` (once) from ``vocab``, or train one on the corpus."""
        target = self.tokenizer_dir
        if vocab is not None:
            check_vocab(vocab)
        if (target / VOCAB_TXT).is_file():
            given = None if vocab is None else (Path(vocab) / VOCAB_TXT).read_bytes()
            if given is not None and given != (target / VOCAB_TXT).read_bytes():
                raise ValueError(f"{target} holds another vocabulary than {vocab}; use another "
                                 "output directory")
            return
        staging = self.output / f".{TOKENIZER_DIR}.tmp{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            if vocab is not None:
                copy_tokenizer_files(vocab, staging)
            else:
                self.log(f"training a WordPiece vocabulary of {config.model.vocab_size:,} on the "
                         "training files")
                train_wordpiece(self.train_paths, config.model.vocab_size, staging,
                                lowercase=config.lowercase, max_seq_length=config.max_seq_length)
            staging.rename(target)  # the directory appears complete or not at all
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _lr_factor(self, step: int) -> float:
        """Learning rate of update ``step + 1`` over the peak: linear warmup, then linear decay
        reaching 0 after ``max_steps`` updates."""
        c, n = self.config, step + 1
        if n <= c.warmup_steps:
            return n / c.warmup_steps
        return max(0.0, (c.max_steps - n + 1) / max(1, c.max_steps - c.warmup_steps))

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_extra(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(),
                "data": self._stream.state() if self._stream is not None else self.data_state}

    def restore_extra(self, ckpt: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.data_state = ckpt["data"]

    # ------------------------------------------------------------------ training
    def train_step(self, stream: PretrainingStream) -> dict[str, float]:
        """One update; returns the global (over processes) statistics of its batch."""
        c = self.config
        batch = collate([next(stream) for _ in range(c.batch_size)], self.pad_id)
        mine = batch.rows(self.rank * self.rows, (self.rank + 1) * self.rows).to(self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=c.bf16):
            output = self.net(mine.input_ids, mine.attention_mask, mine.token_type_ids, mine.mlm_labels)
        targets = mine.mlm_labels[mine.mlm_labels != IGNORE_INDEX]
        mlm_nll = F.cross_entropy(output.mlm_logits.float(), targets, reduction="sum")
        nsp_nll = F.cross_entropy(output.nsp_logits.float(), mine.nsp_labels, reduction="sum")
        # Means over the global batch; DDP averages gradients over processes, hence * world.
        loss = (mlm_nll / max(batch.n_masked, 1) + nsp_nll / c.batch_size) * self.world
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.clip)
        self.optimizer.step()
        self.scheduler.step()
        with torch.no_grad():
            stats = batch_scores(output, mine.mlm_labels, mine.nsp_labels)
        if self.distributed:  # one small collective: the progress figures
            stats = stats.to(self.device)
            dist.all_reduce(stats)
        nll, correct, masked, nsp_correct, pairs = stats.cpu().tolist()
        return {"nll": nll, "correct": correct, "masked": masked, "nsp_correct": nsp_correct,
                "pairs": pairs, "tokens": batch.n_pieces, "progress": 1}

    def _postfix(self, s: dict[str, float]) -> dict[str, str]:
        masked, pairs = max(s["masked"], 1), max(s["pairs"], 1)
        return {"mlm_loss": f"{s['nll'] / masked:.3f}", "mlm_acc": f"{s['correct'] / masked:.3f}",
                "nsp_acc": f"{s['nsp_correct'] / pairs:.3f}",
                "lr": f"{self.scheduler.get_last_lr()[0]:.2e}"}

    def train(self, resume: bool = False) -> BertScores | None:
        """Train to ``max_steps``; returns the held-out scores when there are valid files."""
        c = self.config
        self.start(resume)
        stream = self._stream = PretrainingStream(self.train_paths, self.tokenizer, c.instances(),
                                                  loop=True, state=self.data_state)
        bar = self.progress_bar(total=c.max_steps, initial=self.step, desc="train-bert", unit="step")
        try:
            with StopRequest() as stop, bar:
                if self.step < c.max_steps:
                    self.run_steps(lambda: self.train_step(stream), stop, bar, self._postfix)
        finally:
            stream.close()
        self.save_checkpoint()
        if self.rank == 0 and self.valid_paths is not None:
            self.valid_scores = self.evaluate(self.valid_paths)
            self.log(f"valid: {self.valid_scores}")
        self.save_model()
        self.log(f"model in {self.output / MODEL_DIR}")
        return self.valid_scores

    def evaluate(self, paths: Sequence[str | os.PathLike]) -> BertScores:
        """Held-out scores of the current model with this run's data settings."""
        # The held-out seed and reservoir size are eval-bert's, so its scores of the saved model match.
        held_out = replace(self.config.instances(), seed=EVAL_SEED, pool_size=InstanceSettings.pool_size)
        return evaluate_pretraining(self.model, self.tokenizer, paths,
                                    EvalSettings(held_out, self.config.batch_size))

    def save_model(self) -> Path:
        directory = self.output / MODEL_DIR
        if self.rank == 0:
            save_pretraining_model(self.model, directory)
            copy_tokenizer_files(self.tokenizer_dir, directory, self.config.max_seq_length)
            self.write_record(directory)
        return directory

    def record_extra(self) -> dict[str, Any]:
        return {"train_files": [str(p) for p in self.train_paths],
                "valid": None if self.valid_scores is None else asdict(self.valid_scores)}
