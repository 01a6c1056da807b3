"""BERT pretraining (masked LM + next sentence prediction): config, presets, training loop, evaluation.

In the style of the biLM :class:`~contextvec.training.trainer.Trainer`: checkpoints with exact
resume (model, optimizer, schedule, every process's RNG, the data stream's position), data
parallelism under ``torchrun`` (DDP; gloo on CPU, nccl on GPU) where every process builds the
same global batch and computes its slice of rows with the losses normalised by global counts, so
N processes compute the update of one process on the whole batch; SIGINT/SIGTERM stop between
steps with a checkpoint and a model saved.

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

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.heads import BertForPreTraining, save_pretraining_model
from contextvec.encoders.bert.tokenizer import VOCAB_TXT, WordPieceTokenizer
from contextvec.encoders.bilm.config import ConfigError
from contextvec.io.atomic import atomic_path
from contextvec.training.bert_data import (
    IGNORE_INDEX,
    PretrainingStream,
    collate,
    copy_tokenizer_files,
    train_wordpiece,
)
from contextvec.training.corpus import expand_paths
from contextvec.training.distributed import join_process_group
from contextvec.training.optim import bert_parameter_groups
from contextvec.training.trainer import TRAINING_RECORD, _StopRequest

CHECKPOINT = "checkpoint.pt"
TOKENIZER_DIR = "tokenizer"
MODEL_DIR = "model"
EVAL_SEED = 12345
"""Masking and pairing seed of held-out evaluation: every model is scored on the same instances."""


@dataclass(frozen=True)
class BertTrainConfig:
    """Everything that defines a BERT pretraining run besides the data.

    ``model.vocab_size`` is the size of the vocabulary trained from the corpus when none is given
    (with ``lowercase``); the model takes the vocabulary's actual size. ``batch_size`` is the
    global batch (split across processes); ``max_steps`` also sets the learning-rate decay, which
    ends at 0 there. ``sentences=False`` takes each corpus line as one segment instead of
    splitting it into sentences. ``pool_size``: runs kept for random next segments.
    """

    model: BertConfig = field(default_factory=BertConfig)
    max_seq_length: int = 128
    batch_size: int = 32
    lr: float = 1e-4
    warmup_steps: int = 10_000
    max_steps: int = 1_000_000
    weight_decay: float = 0.01
    clip: float = 1.0
    masked_lm_prob: float = 0.15
    whole_word_mask: bool = False
    short_seq_prob: float = 0.1
    sentences: bool = True
    pool_size: int = 1000
    lowercase: bool = True
    bf16: bool = False
    checkpoint_every: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_seq_length > self.model.max_position_embeddings:
            raise ConfigError(f"max_seq_length {self.max_seq_length} exceeds the model's "
                              f"max_position_embeddings {self.model.max_position_embeddings}")
        if self.max_seq_length < 5:
            raise ConfigError("max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP])")
        if self.batch_size < 1 or self.max_steps < 1 or self.warmup_steps < 0:
            raise ConfigError("batch_size and max_steps must be >= 1, warmup_steps >= 0")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ConfigError(f"masked_lm_prob must be in (0, 1), not {self.masked_lm_prob}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model"] = {k: v for k, v in self.model.to_dict().items() if k not in ("model_type",
                                                                                 "architectures")}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BertTrainConfig:
        """Training fields, optionally ``"preset"`` to start from and ``"model"`` (a dict of
        :class:`BertConfig` fields, over the preset's)."""
        d = dict(d)
        base = PRESETS[d.pop("preset")] if "preset" in d else cls()
        model = d.pop("model", None)
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown BERT training config fields: {sorted(unknown)}")
        if isinstance(model, dict):
            d["model"] = BertConfig.from_dict({**base.model.to_dict(), **model})
        return replace(base, **d)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BertTrainConfig:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from e


PRESETS: dict[str, BertTrainConfig] = {
    # For tests and smoke runs: trains in seconds on a CPU.
    "bert-tiny": BertTrainConfig(
        model=BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64),
        max_seq_length=64, batch_size=8, lr=1e-3, warmup_steps=10, max_steps=200,
        checkpoint_every=50, pool_size=200,
    ),
    # Turc et al.'s BERT-Mini shape (4 layers, 256 wide) at sequence length 128, for CPU training.
    "bert-mini": BertTrainConfig(
        model=BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=128),
        max_seq_length=128, batch_size=32, lr=5e-4, warmup_steps=1000, max_steps=100_000,
        checkpoint_every=500,
    ),
}


# ---------------------------------------------------------------------------- evaluation


@dataclass
class BertScores:
    """Held-out scores: masked-LM accuracy and perplexity (exp of the mean NLL of the predicted
    pieces), NSP accuracy, and how many pieces and pairs they count."""

    mlm_accuracy: float
    perplexity: float
    nsp_accuracy: float
    masked: int
    pairs: int

    def __str__(self) -> str:
        return (f"MLM accuracy {self.mlm_accuracy:.4f}, MLM perplexity {self.perplexity:.2f}, "
                f"NSP accuracy {self.nsp_accuracy:.4f} ({self.masked:,} masked pieces, "
                f"{self.pairs:,} pairs)")


@torch.no_grad()
def evaluate(
    model: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    paths: Sequence[str | os.PathLike],
    max_seq_length: int = 128,
    batch_size: int = 32,
    seed: int = EVAL_SEED,
    masked_lm_prob: float = 0.15,
    whole_word_mask: bool = False,
    short_seq_prob: float = 0.1,
    sentences: bool = True,
    max_pairs: int | None = None,
    progress: bool = False,
) -> BertScores:
    """Score a model on one pass over held-out files; masking and pairing are fixed by ``seed``,
    so the same files and settings give the same instances for every model."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    stream = PretrainingStream(paths, tokenizer, max_seq_length, masked_lm_prob, whole_word_mask,
                               short_seq_prob, seed=seed, loop=False, sentences=sentences)
    pad_id = _pad_id(tokenizer)
    totals = torch.zeros(5, dtype=torch.float64)  # NLL, MLM correct, masked, NSP correct, pairs
    bar = tqdm(desc="evaluating", unit="pair", disable=not progress)
    try:
        while max_pairs is None or totals[4] < max_pairs:
            wanted = batch_size if max_pairs is None else min(batch_size, max_pairs - int(totals[4]))
            instances = [i for _, i in zip(range(wanted), stream, strict=False)]
            if not instances:
                break
            batch = collate(instances, pad_id).to(device)
            totals += _scores(model(batch.input_ids, batch.attention_mask, batch.token_type_ids,
                                    batch.mlm_labels), batch.mlm_labels, batch.nsp_labels).cpu()
            bar.update(len(instances))
    finally:
        bar.close()
        stream.close()
        model.train(was_training)
    if not totals[4]:
        raise ValueError(f"no sentence pairs in {', '.join(map(str, paths))}")
    nll, correct, masked, nsp_correct, pairs = totals.tolist()
    return BertScores(correct / masked, math.exp(nll / masked), nsp_correct / pairs, int(masked),
                      int(pairs))


def _scores(output: Any, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor) -> torch.Tensor:
    """(MLM NLL sum, MLM correct, masked pieces, NSP correct, pairs) of one batch, float64."""
    targets = mlm_labels[mlm_labels != IGNORE_INDEX]
    logits = output.mlm_logits.float()
    return torch.stack([
        F.cross_entropy(logits, targets, reduction="sum").double(),
        (logits.argmax(-1) == targets).sum().double(),
        torch.tensor(float(targets.numel()), dtype=torch.float64, device=targets.device),
        (output.nsp_logits.argmax(-1) == nsp_labels).sum().double(),
        torch.tensor(float(nsp_labels.numel()), dtype=torch.float64, device=targets.device),
    ])


def _pad_id(tokenizer: WordPieceTokenizer) -> int:
    pad_id = tokenizer.tokenizer.token_to_id("[PAD]")
    if pad_id is None:
        raise ValueError("the vocabulary has no [PAD] token")
    return pad_id


# ---------------------------------------------------------------------------- training


def _optimizer(model: BertForPreTraining, config: BertTrainConfig) -> torch.optim.AdamW:
    """AdamW with BERT's groups (no weight decay on biases and LayerNorm weights) and eps 1e-6."""
    return torch.optim.AdamW(bert_parameter_groups(model, config.weight_decay), lr=config.lr,
                             betas=(0.9, 0.999), eps=1e-6)


class BertTrainer:
    """Pretrain a BERT on a corpus (module docstring); :meth:`train` runs it.

    ``vocab``: a tokenizer directory (``contextvec train-wordpiece``); without one, a WordPiece
    vocabulary of ``config.model.vocab_size`` is trained on the training files first (once: it
    is kept in ``output_dir/tokenizer``).
    """

    def __init__(
        self,
        config: BertTrainConfig,
        train_files: Sequence[str],
        output_dir: str | os.PathLike,
        valid_files: Sequence[str] | None = None,
        vocab: str | os.PathLike | None = None,
        log: Callable[[str], None] = print,
        progress: bool = True,
    ) -> None:
        self.output = Path(output_dir)
        self.train_paths = expand_paths(train_files)
        self.valid_paths = expand_paths(valid_files) if valid_files else None
        place = join_process_group()
        self.distributed, self.rank, self.world = place.distributed, place.rank, place.world
        self.device = place.device
        if config.batch_size % self.world:
            raise ValueError(f"batch_size ({config.batch_size}) must be divisible by the "
                             f"{self.world} workers")
        self.log = log if self.rank == 0 else (lambda message: None)
        self.progress = progress and self.rank == 0

        self.tokenizer_dir = self.output / TOKENIZER_DIR
        if self.rank == 0:
            self._prepare_tokenizer(config, vocab)
        if self.distributed:
            dist.barrier()
        self.tokenizer = WordPieceTokenizer.from_directory(self.tokenizer_dir)
        self.pad_id = _pad_id(self.tokenizer)
        vocab_size = self.tokenizer.tokenizer.get_vocab_size(with_added_tokens=True)
        self.config = replace(config, model=replace(config.model, vocab_size=vocab_size,
                                                    pad_token_id=self.pad_id))
        self.model = BertForPreTraining(self.config.model)
        self.model.init_weights(self.config.seed)  # the same start in every process
        self.model.to(self.device)
        n_parameters = sum(p.numel() for p in self.model.parameters())
        self.log(f"vocabulary {vocab_size:,} pieces; {n_parameters:,} parameters")
        self.net: torch.nn.Module = (
            DistributedDataParallel(self.model) if self.distributed else self.model
        )
        self.optimizer = _optimizer(self.model, self.config)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: self._lr_factor(step))  # reads max_steps when called
        self.step = 0
        self.tokens_seen = 0  # real pieces of the global batches, summed over steps
        self.train_seconds = 0.0
        self.data_state: dict[str, Any] | None = None
        self.valid_scores: BertScores | None = None
        torch.manual_seed(self.config.seed + self.rank)  # dropout differs between processes

    def _prepare_tokenizer(self, config: BertTrainConfig, vocab: str | os.PathLike | None) -> None:
        """Fill ``output/tokenizer`` (once) from ``vocab``, or train one on the corpus."""
        target = self.tokenizer_dir
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
                if not (Path(vocab) / VOCAB_TXT).is_file():
                    raise FileNotFoundError(f"{vocab}: no {VOCAB_TXT} (make one with "
                                            "contextvec train-wordpiece)")
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
    def _rng_states(self) -> list[dict[str, torch.Tensor]]:
        """Every process's RNG state (gathered to all: dropout differs between processes)."""
        mine = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            mine["cuda"] = torch.cuda.get_rng_state(self.device)
        if not self.distributed:
            return [mine]
        states: list[Any] = [None] * self.world
        dist.all_gather_object(states, mine)
        return states

    def save_checkpoint(self, stream: PretrainingStream | None) -> None:
        """Write ``checkpoint.pt`` atomically (every process must call it: RNG states are gathered)."""
        rng = self._rng_states()
        if self.rank != 0:
            return
        state = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "rng": rng, "step": self.step,
            "tokens_seen": self.tokens_seen, "train_seconds": self.train_seconds,
            "data": stream.state() if stream is not None else self.data_state,
            "config": self.config.to_dict(), "world": self.world,
        }
        self.output.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.output / CHECKPOINT) as tmp:
            torch.save(state, tmp)

    def load_checkpoint(self) -> bool:
        """Continue from ``checkpoint.pt`` if there is one; only ``max_steps`` (which also
        re-stretches the learning-rate decay from here) and ``checkpoint_every`` may change."""
        path = self.output / CHECKPOINT
        if not path.is_file():
            return False
        ckpt = torch.load(path, map_location=self.device, weights_only=True)
        free = ("max_steps", "checkpoint_every")
        saved = BertTrainConfig.from_dict(ckpt["config"]).to_dict()
        if {k: v for k, v in saved.items() if k not in free} != {
            k: v for k, v in self.config.to_dict().items() if k not in free
        }:
            raise ValueError(f"{path} was written with another training config; resume with the "
                             "same settings or use another output directory")
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        rng = ckpt["rng"][self.rank] if len(ckpt["rng"]) == self.world else ckpt["rng"][0]
        if len(ckpt["rng"]) != self.world:
            self.log(f"the checkpoint was written by {len(ckpt['rng'])} processes: dropout draws "
                     "will differ from an uninterrupted run")
        torch.set_rng_state(rng["cpu"].cpu())
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"].cpu(), self.device)
        self.step, self.tokens_seen = ckpt["step"], ckpt["tokens_seen"]
        self.train_seconds = ckpt["train_seconds"]
        self.data_state = ckpt["data"]
        self.log(f"resumed from {path} at step {self.step}")
        return True

    # ------------------------------------------------------------------ training
    def _train_step(self, stream: PretrainingStream, stop: _StopRequest | None = None) -> torch.Tensor:
        """One update; returns the global (MLM NLL, MLM correct, masked, NSP correct, pairs,
        pieces, stop requests) of the batch. A stop request counts if it came before the update's
        end, in any process."""
        c = self.config
        batch = collate([next(stream) for _ in range(c.batch_size)], self.pad_id)
        per_rank = c.batch_size // self.world
        mine = batch.rows(self.rank * per_rank, (self.rank + 1) * per_rank).to(self.device)
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
        self.step += 1
        self.tokens_seen += batch.n_pieces
        with torch.no_grad():
            stats = _scores(output, mine.mlm_labels, mine.nsp_labels)
        requested = stop is not None and stop.requested
        extra = torch.tensor([batch.n_pieces / self.world, float(requested)], dtype=torch.float64)
        stats = torch.cat([stats.cpu(), extra])
        if self.distributed:  # one small collective: the progress figures and any stop request
            stats = stats.to(self.device)
            dist.all_reduce(stats)
            stats = stats.cpu()
        return stats

    def train(self, resume: bool = False) -> BertScores | None:
        """Train to ``max_steps``; returns the held-out scores when there are valid files."""
        c = self.config
        if resume:
            self.load_checkpoint()
        elif (self.output / CHECKPOINT).exists():
            raise FileExistsError(f"{self.output / CHECKPOINT} exists: pass --resume to continue "
                                  "that run, or choose another output directory")
        stream = PretrainingStream(
            self.train_paths, self.tokenizer, c.max_seq_length, c.masked_lm_prob, c.whole_word_mask,
            c.short_seq_prob, seed=c.seed, loop=True, sentences=c.sentences, pool_size=c.pool_size,
            state=self.data_state,
        )
        # In a log file (not a terminal) a progress line a minute is enough.
        bar = tqdm(total=c.max_steps, initial=self.step, desc="train-bert", unit="step",
                   disable=not self.progress, mininterval=0.1 if sys.stderr.isatty() else 60.0)
        window = torch.zeros(7, dtype=torch.float64)
        window_start = time.perf_counter()
        try:
            with _StopRequest() as stop:
                while self.step < c.max_steps:
                    start = time.perf_counter()
                    stats = self._train_step(stream, stop)
                    self.train_seconds += time.perf_counter() - start
                    window += stats
                    bar.update(1)
                    if stats[6] > 0:  # SIGINT/SIGTERM in any process: save exactly here and stop
                        bar.close()
                        self.save_checkpoint(stream)
                        self._save_model()
                        self.log(f"stopped at step {self.step}: checkpoint and model saved in "
                                 f"{self.output}; continue with --resume")
                        raise KeyboardInterrupt
                    if self.step % 10 == 0 or self.step == c.max_steps:
                        nll, correct, masked, nsp_correct, pairs, pieces, _ = window.tolist()
                        bar.set_postfix(
                            tok_s=f"{pieces / (time.perf_counter() - window_start):.0f}",
                            mlm_loss=f"{nll / masked:.3f}", mlm_acc=f"{correct / masked:.3f}",
                            nsp_acc=f"{nsp_correct / pairs:.3f}",
                            lr=f"{self.scheduler.get_last_lr()[0]:.2e}", refresh=False)
                        window.zero_()
                        window_start = time.perf_counter()
                    if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                        self.save_checkpoint(stream)
        finally:
            bar.close()
            stream.close()
        self.save_checkpoint(stream)
        if self.rank == 0 and self.valid_paths is not None:
            self.valid_scores = self.evaluate(self.valid_paths)
            self.log(f"valid: {self.valid_scores}")
        self._save_model()
        self.log(f"model in {self.output / MODEL_DIR}")
        return self.valid_scores

    def evaluate(self, paths: Sequence[str | os.PathLike]) -> BertScores:
        """Held-out scores of the current model with this run's data settings."""
        c = self.config
        return evaluate(self.model, self.tokenizer, paths, c.max_seq_length, c.batch_size,
                        masked_lm_prob=c.masked_lm_prob, whole_word_mask=c.whole_word_mask,
                        short_seq_prob=c.short_seq_prob, sentences=c.sentences)

    def _save_model(self) -> None:
        if self.rank != 0:
            return
        directory = save_pretraining_model(self.model, self.output / MODEL_DIR)
        copy_tokenizer_files(self.tokenizer_dir, directory, self.config.max_seq_length)
        record = {
            "steps": self.step, "tokens_seen": self.tokens_seen,
            "train_seconds": round(self.train_seconds, 1), "processes": self.world,
            "threads": torch.get_num_threads(),
            "train_files": [str(p) for p in self.train_paths],
            "valid": None if self.valid_scores is None else asdict(self.valid_scores),
            "config": self.config.to_dict(),
        }
        with atomic_path(directory / TRAINING_RECORD) as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
