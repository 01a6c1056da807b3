"""Training CoVe's translation model (:class:`~contextvec.encoders.cove.seq2seq.Seq2Seq`).

- Data: parallel files, line i of the source = line i of the target (plain or ``.gz``; the
  Multi30k ``tok/*.lc.norm.tok.*`` files are tokenized and lower-cased already, so the
  default tokenizer is ``whitespace``). An empty line or a line-count mismatch is an error
  naming the file and line.
- Vocabularies: the source side is the fixed word vectors' word list (every word with a vector,
  also those unseen in training: they stay usable at test time); words without a vector get
  the UNK vector (zero and frozen, or trained with ``trainable_unk``). The target vocabulary is
  built from the training targets (``min_count``), with ``<S>``, ``</S>``, ``<UNK>``.
- Batches: each epoch shuffles the pairs (seeded by ``seed`` and the epoch), sorts pools of
  50 batches by length and shuffles the batches, so that a batch holds similar lengths.
- Loss: teacher forcing, cross-entropy summed over the real target tokens (``</S>``
  included) divided by their number. Adam (lr 0.001, the default) or SGD (lr 1.0, halved after
  an epoch whose valid perplexity rose: OpenNMT's schedule of the time); gradient norm clipping.
- Checkpoints (``checkpoint.pt``: model, optimizer, torch RNG, epoch and batch position, lr,
  best score, history) every ``checkpoint_every`` steps and after each epoch, written
  atomically; ``resume`` continues exactly (same parameters as an uninterrupted run). SIGINT
  or SIGTERM stops between two steps after saving a checkpoint.
- After each epoch: valid perplexity and valid BLEU (greedy or beam ``valid_beam``), with
  sacrebleu's ``corpus_bleu(hyps, [refs], tokenize=bleu_tokenize, lowercase=True)``: uncased
  BLEU as in the CoVe paper; ``tokenize="none"`` (default) scores the given tokenization, i.e.
  tokenized BLEU as ``multi-bleu.perl`` on the Moses-tokenized Multi30k files. The model that
  is best on valid (``select``: BLEU or perplexity) is kept in ``output_dir/model/``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from contextvec.encoders.cove.loader import load_words, save_words
from contextvec.encoders.cove.mt_lstm import MTLSTMConfig, pad_ids
from contextvec.encoders.cove.seq2seq import MODEL_TYPE, Seq2Seq, Seq2SeqConfig
from contextvec.io.atomic import atomic_path
from contextvec.io.native import is_native_dir, load_native, save_native
from contextvec.io.word_vectors import load_word_vectors
from contextvec.text.tokenize import Tokenizer
from contextvec.training.corpus import Vocabulary
from contextvec.training.trainer import _StopRequest

CHECKPOINT = "checkpoint.pt"
TARGET_VOCAB = "target_vocab.txt"
TRAINING_RECORD = "training.json"
MODEL_DIR = "model"
IGNORE = -100  # cross_entropy's ignore_index: padding of the targets
POOL_BATCHES = 50

Pair = tuple[list[str], list[str]]


# ---------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class MTTrainConfig:
    """A translation training run besides its data. ``lr``/``lr_halving`` None: the
    optimizer's default (Adam: 0.001, no halving; SGD: 1.0, halving). ``lowercase`` None: look
    source words up lower-cased if the word vectors have no upper-case word. ``max_length``:
    training pairs with a longer side are left out (their number is logged)."""

    hidden_size: int = 300
    num_layers: int = 2
    target_dim: int = 300
    dropout: float = 0.2
    trainable_unk: bool = False
    lowercase: bool | None = None
    max_word_vectors: int | None = None
    min_count: int = 2
    max_vocab: int | None = None
    batch_size: int = 64
    max_length: int | None = None
    optimizer: str = "adam"
    lr: float | None = None
    lr_halving: bool | None = None
    clip: float = 5.0
    epochs: int = 15
    max_steps: int | None = None
    checkpoint_every: int = 500
    valid_beam: int = 1
    select: str = "bleu"
    bleu_tokenize: str = "none"
    tokenizer: str = "whitespace"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be adam or sgd, not {self.optimizer!r}")
        if self.select not in ("bleu", "perplexity"):
            raise ValueError(f"select must be bleu or perplexity, not {self.select!r}")
        if self.bleu_tokenize not in ("none", "13a"):
            raise ValueError(f"bleu_tokenize must be none or 13a, not {self.bleu_tokenize!r}")
        if self.tokenizer not in ("whitespace", "moses"):
            raise ValueError("parallel files need the whitespace or moses tokenizer (one sentence "
                             f"per line), not {self.tokenizer!r}")
        if self.batch_size < 1 or self.valid_beam < 1 or self.epochs < 0:
            raise ValueError("batch_size and valid_beam must be >= 1, epochs >= 0")
        # Resolve the optimizer's defaults so that the saved config says what ran.
        if self.lr is None:
            object.__setattr__(self, "lr", 1e-3 if self.optimizer == "adam" else 1.0)
        if self.lr_halving is None:
            object.__setattr__(self, "lr_halving", self.optimizer == "sgd")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MTTrainConfig:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown MT training config fields: {sorted(unknown)}")
        return cls(**d)


# ---------------------------------------------------------------------- data
def read_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a plain or ``.gz`` UTF-8 file, split on ``\\n`` only (``\\r\\n`` tolerated)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (EOFError, gzip.BadGzipFile) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({e})") from e
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, raw in enumerate(lines, 1):
        try:
            out.append(raw.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}, line {number}: invalid UTF-8 ({e.reason})") from e
    return out


def tokenize_lines(lines: Sequence[str], tokenizer: str = "whitespace") -> list[list[str]]:
    """One token list per line (``whitespace`` or ``moses``)."""
    if tokenizer == "whitespace":
        return [line.split() for line in lines]
    tokenize = Tokenizer(tokenizer)
    return [tokenize(line)[0] for line in lines]


def read_parallel(source: str | os.PathLike, target: str | os.PathLike,
                  tokenizer: str = "whitespace") -> list[Pair]:
    """Tokenized sentence pairs; error on a line-count mismatch or an empty line."""
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise ValueError(f"{source} has {len(src)} lines but {target} has {len(tgt)}")
    pairs = list(zip(tokenize_lines(src, tokenizer), tokenize_lines(tgt, tokenizer), strict=True))
    for number, (s, t) in enumerate(pairs, 1):
        if not s or not t:
            raise ValueError(f"{source if not s else target}, line {number}: empty sentence")
    return pairs


def epoch_batches(lengths: Sequence[tuple[int, int]], batch_size: int, seed: int,
                  epoch: int) -> list[list[int]]:
    """The batches of one epoch, a function of ``(seed, epoch)`` only (so a resumed run
    rebuilds them): shuffle, sort pools of ``POOL_BATCHES`` batches by (source, target)
    length, cut into batches, shuffle the batches."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = batch_size * POOL_BATCHES
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches.extend(chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


# ---------------------------------------------------------------------- model files
def save_translator(model: Seq2Seq, target_vocab: Vocabulary, directory: str | os.PathLike,
                    record: dict[str, Any] | None = None) -> Path:
    """A ``"cove-seq2seq"`` directory: config.json, model.safetensors, words.json (source
    words, row i of ``encoder.word_vectors``), target_vocab.txt and, if given, training.json.
    ``contextvec.encoders.cove.load_cove_encoder`` reads its encoder."""
    directory = save_native(directory, MODEL_TYPE, model.config.to_dict(), model.state_dict())
    save_words(model.encoder.words, directory)
    with atomic_path(directory / TARGET_VOCAB) as tmp:
        target_vocab.save(tmp)
    if record is not None:
        with atomic_path(directory / TRAINING_RECORD) as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return directory


def resolve_model_dir(path: str | os.PathLike) -> Path:
    """A model directory, or a ``train-mt`` output directory (its ``model/``)."""
    path = Path(path)
    if not is_native_dir(path) and is_native_dir(path / MODEL_DIR):
        return path / MODEL_DIR
    if not is_native_dir(path):
        raise FileNotFoundError(f"{path}: no translation model (config.json + model.safetensors, "
                                f"or a train-mt output directory with {MODEL_DIR}/)")
    return path


def load_translator(path: str | os.PathLike, device: str | torch.device = "cpu"
                    ) -> tuple[Seq2Seq, Vocabulary]:
    """A saved translation model (eval mode) and its target vocabulary."""
    directory = resolve_model_dir(path)
    model_type, config, state = load_native(directory)
    if model_type != MODEL_TYPE:
        raise ValueError(f"{directory}: model_type {model_type!r} is not a translation model")
    model = Seq2Seq(Seq2SeqConfig.from_dict(config), load_words(directory),
                    state["encoder.word_vectors"])
    model.load_state_dict(state)
    return model.to(device).eval(), Vocabulary.load(directory / TARGET_VOCAB)


# ---------------------------------------------------------------------- evaluation
def _batch_tensors(model: Seq2Seq, sources: Sequence[Sequence[int]],
                   targets: Sequence[Sequence[int]], vocab: Vocabulary
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    device = model.encoder.word_vectors.device
    src, src_len = pad_ids(sources, device)
    tgt_in, _ = pad_ids([[vocab.bos, *t] for t in targets], device)
    tgt_out, _ = pad_ids([[*t, vocab.eos] for t in targets], device, pad=IGNORE)
    return src, src_len, tgt_in, tgt_out


def _nll(model: Seq2Seq, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, int]:
    src, src_len, tgt_in, tgt_out = batch
    logits = model(src, src_len, tgt_in)
    total = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=IGNORE,
                            reduction="sum")
    return total, int((tgt_out != IGNORE).sum())


@torch.no_grad()
def perplexity(model: Seq2Seq, vocab: Vocabulary, pairs: Sequence[Pair], batch_size: int = 64) -> float:
    """Teacher-forced target perplexity, ``exp(mean NLL)`` over target tokens and ``</S>``."""
    was_training = model.training
    model.eval()
    sources = [model.encoder.token_ids(s) for s, _ in pairs]
    targets = [[vocab.id(w) for w in t] for _, t in pairs]
    order = sorted(range(len(pairs)), key=lambda i: len(sources[i]))
    total, count = 0.0, 0
    for k in range(0, len(order), batch_size):
        idx = order[k:k + batch_size]
        nll, n = _nll(model, _batch_tensors(model, [sources[i] for i in idx],
                                            [targets[i] for i in idx], vocab))
        total += float(nll)
        count += n
    model.train(was_training)
    return math.exp(total / max(count, 1))


@torch.no_grad()
def translate(model: Seq2Seq, vocab: Vocabulary, sentences: Sequence[Sequence[str]],
              beam: int = 1, batch_size: int = 64, length_penalty: float = 0.0,
              max_len: int | None = None, progress: bool = False) -> list[list[str]]:
    """Target token lists for source token lists, in input order (an empty source gives an
    empty translation). ``beam`` 1 decodes greedily."""
    was_training = model.training
    model.eval()
    out: list[list[str]] = [[] for _ in sentences]
    nonempty = sorted((i for i, s in enumerate(sentences) if s), key=lambda i: -len(sentences[i]))
    rows = max(1, batch_size // beam) if beam > 1 else batch_size
    bar = tqdm(total=len(nonempty), desc=f"translating (beam {beam})", unit="sent",
               disable=not progress, mininterval=0.5 if sys.stderr.isatty() else 30.0)
    for k in range(0, len(nonempty), rows):
        idx = nonempty[k:k + rows]
        src, src_len = model.encoder.batch_ids([sentences[i] for i in idx])
        if beam == 1:
            hyps = model.greedy(src, src_len, vocab.bos, vocab.eos, max_len)
        else:
            hyps = model.beam_search(src, src_len, vocab.bos, vocab.eos, beam, length_penalty, max_len)
        for i, hyp in zip(idx, hyps, strict=True):
            out[i] = [vocab.tokens[t] for t in hyp]
        bar.update(len(idx))
    bar.close()
    model.train(was_training)
    return out


def bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
         tokenize: str = "none") -> Any:
    """sacrebleu's corpus BLEU of token lists, uncased (``lowercase=True``). ``tokenize="none"``
    scores the given tokens (tokenized BLEU, as multi-bleu.perl); ``"13a"`` re-tokenizes the
    joined text the WMT way. Returns a ``sacrebleu`` ``BLEUScore`` (``.score``, ``str()``)."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    return sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses],
                                 [[" ".join(r) for r in references]],
                                 tokenize=tokenize, lowercase=True,
                                 force=tokenize == "none")  # tokenized input is intended there


def bleu_signature(tokenize: str = "none") -> str:
    """sacrebleu's signature of :func:`bleu`'s settings (one reference)."""
    import sacrebleu

    metric = sacrebleu.BLEU(tokenize=tokenize, lowercase=True)
    metric.corpus_score(["a"], [["a"]])  # the signature needs the number of references
    return str(metric.get_signature())


# ---------------------------------------------------------------------- training
class MTTrainer:
    """Train a :class:`Seq2Seq` on parallel files (see the module docstring).

    ``on_step(trainer)`` is called after every step (progress hooks, tests).
    """

    def __init__(
        self,
        config: MTTrainConfig,
        train_source: str | os.PathLike,
        train_target: str | os.PathLike,
        word_vectors: str | os.PathLike,
        output_dir: str | os.PathLike,
        valid_source: str | os.PathLike | None = None,
        valid_target: str | os.PathLike | None = None,
        log: Callable[[str], None] = print,
        progress: bool = True,
        on_step: Callable[[MTTrainer], None] | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.config = c = config
        self.output = Path(output_dir)
        self.log = log
        self.progress = progress
        self.on_step = on_step
        if (valid_source is None) != (valid_target is None):
            raise ValueError("give both valid source and valid target, or neither")

        vectors = load_word_vectors(word_vectors, max_words=c.max_word_vectors)
        lowercase = c.lowercase
        if lowercase is None:  # lower-cased vectors: look words up lower-cased
            lowercase = all(w == w.lower() for w in vectors.words)
        pairs = read_parallel(train_source, train_target, c.tokenizer)
        if c.max_length is not None:
            kept = [p for p in pairs if max(len(p[0]), len(p[1])) <= c.max_length]
            log(f"left out {len(pairs) - len(kept):,} training pairs longer than {c.max_length} words")
            pairs = kept
        if not pairs:
            raise ValueError(f"no training pairs in {train_source}")
        self.valid = (read_parallel(valid_source, valid_target, c.tokenizer)
                      if valid_source is not None and valid_target is not None else None)

        self.output.mkdir(parents=True, exist_ok=True)
        vocab_path = self.output / TARGET_VOCAB
        if vocab_path.is_file():
            self.vocab = Vocabulary.load(vocab_path)
        else:
            self.vocab = Vocabulary.build((t for _, t in pairs), c.min_count, c.max_vocab)
            with atomic_path(vocab_path) as tmp:
                self.vocab.save(tmp)
        if (self.output / "words.json").is_file():
            if load_words(self.output) != vectors.words:
                raise ValueError(f"{word_vectors} is not the word-vector file this run in "
                                 f"{self.output} started with")
        else:
            save_words(vectors.words, self.output)

        model_config = Seq2SeqConfig(
            target_vocab_size=len(self.vocab),
            encoder=MTLSTMConfig(input_dim=vectors.dim, hidden_size=c.hidden_size,
                                 num_layers=c.num_layers, lowercase=lowercase,
                                 trainable_unk=c.trainable_unk),
            target_dim=c.target_dim, dropout=c.dropout,
        )
        torch.manual_seed(c.seed)
        self.model = Seq2Seq(model_config, vectors.words, torch.from_numpy(vectors.vectors))
        with torch.no_grad():  # OpenNMT's initialisation: uniform(-0.1, 0.1) for every weight
            for p in self.model.parameters():
                if p.requires_grad:
                    p.uniform_(-0.1, 0.1)
            self.model.encoder.unk.zero_()
        self.model.to(device)
        self.device = torch.device(device)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer: torch.optim.Optimizer = (
            torch.optim.Adam(params, lr=c.lr) if c.optimizer == "adam" else torch.optim.SGD(params, lr=c.lr)
        )
        self.sources = [self.model.encoder.token_ids(s) for s, _ in pairs]
        self.targets = [[self.vocab.id(w) for w in t] for _, t in pairs]
        self.lengths = [(len(s), len(t)) for s, t in zip(self.sources, self.targets, strict=True)]
        n_src = sum(len(s) for s in self.sources)
        oov = sum(i == 0 for s in self.sources for i in s)
        n_tgt = sum(len(t) for t in self.targets)
        unk = sum(i == self.vocab.unk for t in self.targets for i in t)
        log(f"{len(pairs):,} training pairs; source: {len(vectors.words):,} word vectors of "
            f"{vectors.dim} dims (lowercase lookup: {lowercase}), {oov / n_src:.2%} of training "
            f"tokens without a vector; target: {len(self.vocab):,} types, {unk / n_tgt:.2%} <UNK>; "
            f"{sum(p.numel() for p in params):,} trained parameters")
        self.step = 0
        self.epoch = 0
        self.position = 0  # batches done in the current epoch
        self.lr = c.lr
        self.best: float | None = None
        self.previous_ppl: float | None = None
        self.history: list[dict[str, Any]] = []
        self.train_seconds = 0.0
        self.sentences_seen = 0
        self.tokens_seen = 0  # target tokens + </S>
        # The current epoch's loss and counts so far (checkpointed: a resumed epoch reports
        # the same train loss as an uninterrupted one).
        self.epoch_stats = {"loss_sum": 0.0, "tokens": 0, "sentences": 0, "seconds": 0.0}

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            # dropout on a GPU draws from the CUDA generators
            "cuda_rng": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None,
            "step": self.step, "epoch": self.epoch,
            "position": self.position, "lr": self.lr, "best": self.best,
            "previous_ppl": self.previous_ppl, "history": json.dumps(self.history),
            "train_seconds": self.train_seconds, "sentences_seen": self.sentences_seen,
            "tokens_seen": self.tokens_seen, "epoch_stats": json.dumps(self.epoch_stats),
            "config": json.dumps(self.config.to_dict()),
        }

    def save_checkpoint(self) -> None:
        with atomic_path(self.output / CHECKPOINT) as tmp:
            torch.save(self.checkpoint_state(), tmp)

    def load_checkpoint(self) -> bool:
        path = self.output / CHECKPOINT
        if not path.is_file():
            return False
        ckpt = torch.load(path, map_location=self.device, weights_only=True)
        free = ("epochs", "max_steps", "checkpoint_every")  # a run may be extended, not changed
        saved = MTTrainConfig.from_dict(json.loads(ckpt["config"])).to_dict()
        mine = self.config.to_dict()
        changed = sorted(k for k in mine if k not in free and saved[k] != mine[k])
        if changed:
            raise ValueError(f"{path} was written with other settings ({', '.join(changed)}); resume "
                             "with the same settings or use another output directory")
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"].cpu())
        if ckpt.get("cuda_rng") is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state_all([state.cpu() for state in ckpt["cuda_rng"]])
        self.step, self.epoch, self.position = ckpt["step"], ckpt["epoch"], ckpt["position"]
        self.best, self.previous_ppl = ckpt["best"], ckpt["previous_ppl"]
        self.history = json.loads(ckpt["history"])
        self.train_seconds = ckpt["train_seconds"]
        self.sentences_seen, self.tokens_seen = ckpt["sentences_seen"], ckpt["tokens_seen"]
        self.epoch_stats = json.loads(ckpt["epoch_stats"])
        self._set_lr(ckpt["lr"])
        self.log(f"resumed from {path} at step {self.step} (epoch {self.epoch + 1}, batch "
                 f"{self.position})")
        return True

    def _set_lr(self, lr: float) -> None:
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def record(self) -> dict[str, Any]:
        return {
            "steps": self.step, "epochs_completed": self.epoch,
            "sentences_seen": self.sentences_seen, "target_tokens_seen": self.tokens_seen,
            "train_seconds": round(self.train_seconds, 1), "threads": torch.get_num_threads(),
            "history": self.history, "bleu_signature": bleu_signature(self.config.bleu_tokenize),
            "config": self.config.to_dict(),
        }

    def save_model(self) -> Path:
        return save_translator(self.model, self.vocab, self.output / MODEL_DIR, self.record())

    # ------------------------------------------------------------------ training
    def train(self, resume: bool = False) -> list[dict[str, Any]]:
        """Train to ``epochs`` (or ``max_steps``); returns the per-epoch history."""
        if resume:
            if not self.load_checkpoint():
                self.log(f"no checkpoint in {self.output}: starting from scratch")
        elif (self.output / CHECKPOINT).exists():
            raise FileExistsError(f"{self.output / CHECKPOINT} exists: pass --resume to continue "
                                  "that run, or choose another output directory")
        with _StopRequest() as stop:
            while self.epoch < self.config.epochs:
                if self._train_epoch(stop):
                    break
        if self.valid is None or self.best is None:  # else model/ holds the best epoch
            self.save_model()
        self.log(f"model in {self.output / MODEL_DIR}")
        return self.history

    def _step(self, batch: list[int]) -> tuple[float, int]:
        c = self.config
        self.model.train()
        tensors = _batch_tensors(self.model, [self.sources[i] for i in batch],
                                 [self.targets[i] for i in batch], self.vocab)
        total, n = _nll(self.model, tensors)
        loss = total / max(n, 1)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.clip:
            torch.nn.utils.clip_grad_norm_(
                [p for p in self.model.parameters() if p.requires_grad], c.clip)
        self.optimizer.step()
        self.step += 1
        self.position += 1
        self.sentences_seen += len(batch)
        self.tokens_seen += n
        return float(loss.detach()), n

    def _train_epoch(self, stop: _StopRequest) -> bool:
        """The rest of the current epoch; True when the run must end (max_steps)."""
        c = self.config
        batches = epoch_batches(self.lengths, c.batch_size, c.seed, self.epoch)
        bar = tqdm(total=len(self.lengths), initial=sum(len(b) for b in batches[:self.position]),
                   desc=f"epoch {self.epoch + 1}/{c.epochs}", unit="sent", disable=not self.progress,
                   mininterval=0.2 if sys.stderr.isatty() else 60.0)
        stats = self.epoch_stats
        n_steps = 0
        while self.position < len(batches):
            if stop.requested:  # SIGINT/SIGTERM arrive between two steps
                bar.close()
                self.save_checkpoint()
                if not (self.output / MODEL_DIR).exists():
                    self.save_model()
                self.log(f"stopped at step {self.step}: checkpoint saved in {self.output}; "
                         "continue with --resume")
                raise KeyboardInterrupt
            batch = batches[self.position]
            t0 = time.perf_counter()
            loss, n = self._step(batch)
            seconds = time.perf_counter() - t0
            self.train_seconds += seconds
            stats["seconds"] += seconds
            stats["loss_sum"] += loss * n
            stats["tokens"] += n
            stats["sentences"] += len(batch)
            n_steps += 1
            bar.update(len(batch))
            if n_steps % 10 == 0:
                bar.set_postfix(loss=f"{stats['loss_sum'] / stats['tokens']:.3f}",
                                sent_s=f"{stats['sentences'] / stats['seconds']:.1f}",
                                tok_s=f"{stats['tokens'] / stats['seconds']:.0f}", step=self.step,
                                refresh=False)
            if self.on_step is not None:
                self.on_step(self)
            if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                self.save_checkpoint()
            if c.max_steps is not None and self.step >= c.max_steps:
                bar.close()
                self.save_checkpoint()
                self.log(f"reached max_steps={c.max_steps}")
                return True
        bar.close()
        self.epoch += 1
        self.position = 0
        seconds = max(stats["seconds"], 1e-9)  # training steps only, without validation
        entry: dict[str, Any] = {
            "epoch": self.epoch, "step": self.step, "lr": self.lr,
            "train_loss": stats["loss_sum"] / max(stats["tokens"], 1),
            "sentences_per_s": stats["sentences"] / seconds,
            "target_tokens_per_s": stats["tokens"] / seconds,
        }
        self.epoch_stats = {"loss_sum": 0.0, "tokens": 0, "sentences": 0, "seconds": 0.0}
        message = (f"epoch {self.epoch}: train loss {entry['train_loss']:.3f}, "
                   f"{entry['sentences_per_s']:.1f} sentences/s, "
                   f"{entry['target_tokens_per_s']:.0f} target tokens/s")
        self.history.append(entry)
        if self.valid is not None:
            self._validate(entry)
            message += (f"; valid perplexity {entry['valid_perplexity']:.2f}, BLEU "
                        f"{entry['valid_bleu']:.2f} (beam {c.valid_beam})")
            if entry.get("best"):
                message += " (best so far: saved)"
            if entry.get("lr_halved"):
                message += f" (lr -> {self.lr:g})"
        self.log(message)
        self.save_checkpoint()
        return False

    def _validate(self, entry: dict[str, Any]) -> None:
        c = self.config
        assert self.valid is not None
        ppl = perplexity(self.model, self.vocab, self.valid, c.batch_size)
        hyps = translate(self.model, self.vocab, [s for s, _ in self.valid], beam=c.valid_beam,
                         batch_size=c.batch_size, progress=self.progress)
        score = bleu(hyps, [t for _, t in self.valid], c.bleu_tokenize).score
        entry.update(valid_perplexity=ppl, valid_bleu=score)
        if c.lr_halving and self.previous_ppl is not None and ppl > self.previous_ppl:
            self._set_lr(self.lr / 2)
            entry["lr_halved"] = True
        self.previous_ppl = ppl
        value = score if c.select == "bleu" else -ppl
        if self.best is None or value > self.best:
            self.best = value
            entry["best"] = True
            self.save_model()
