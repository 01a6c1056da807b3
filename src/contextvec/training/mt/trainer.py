"""Training CoVe's translation model (:class:`~contextvec.encoders.cove.seq2seq.Seq2Seq`): what
differs from the shared loop (:mod:`contextvec.training.loop`).

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

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from contextvec.encoders.cove.loader import load_words, save_words
from contextvec.encoders.cove.mt_lstm import MTLSTMConfig
from contextvec.encoders.cove.seq2seq import Seq2Seq, Seq2SeqConfig
from contextvec.io.atomic import atomic_path
from contextvec.io.cove import WORDS_FILE
from contextvec.io.word_vectors import load_word_vectors
from contextvec.training.corpus import CorpusVocabulary
from contextvec.training.loop import CHECKPOINT, MODEL_DIR, StopRequest, TrainingLoop, mean_loss
from contextvec.training.mt.config import MTTrainSettings, Selection
from contextvec.training.mt.data import MTFiles, epoch_batches, read_parallel
from contextvec.training.mt.translator import (
    TARGET_VOCAB,
    batch_tensors,
    bleu,
    bleu_signature,
    nll,
    perplexity,
    save_translator,
    translate,
)
from contextvec.training.optim import make_optimizer


class MTTrainer(TrainingLoop):
    """Train a :class:`Seq2Seq` on ``files`` (see the module docstring); one process, on
    ``device``. A resumed run may be given more ``epochs`` (or ``max_steps``), nothing else."""

    free_fields = ("epochs", "max_steps", "checkpoint_every")
    outputs = (CHECKPOINT, MODEL_DIR, TARGET_VOCAB, WORDS_FILE)

    def __init__(
        self,
        config: MTTrainSettings,
        files: MTFiles,
        output_dir: str | os.PathLike,
        log: Callable[[str], None] = print,
        progress: bool = True,
        on_step: Callable[[MTTrainer], None] | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(output_dir, log, progress, device=device, on_step=on_step)
        self.config = c = config
        vectors = load_word_vectors(files.word_vectors, max_words=c.max_word_vectors)
        lowercase = c.lowercase
        if lowercase is None:  # lower-cased vectors: look words up lower-cased
            lowercase = all(w == w.lower() for w in vectors.words)
        pairs = read_parallel(files.train_source, files.train_target, c.tokenizer)
        if c.max_length is not None:
            kept = [p for p in pairs if max(len(p[0]), len(p[1])) <= c.max_length]
            log(f"left out {len(pairs) - len(kept):,} training pairs longer than {c.max_length} words")
            pairs = kept
        if not pairs:
            raise ValueError(f"no training pairs in {files.train_source}")
        self.valid = (read_parallel(files.valid_source, files.valid_target, c.tokenizer)
                      if files.valid_source is not None and files.valid_target is not None else None)

        self.output.mkdir(parents=True, exist_ok=True)
        vocab_path = self.output / TARGET_VOCAB
        if vocab_path.is_file():
            self.vocab = CorpusVocabulary.load(vocab_path)
        else:
            self.vocab = CorpusVocabulary.build((t for _, t in pairs), c.min_count, c.max_vocab)
            with atomic_path(vocab_path) as tmp:
                self.vocab.save(tmp)
        if (self.output / WORDS_FILE).is_file():
            if load_words(self.output) != vectors.words:
                raise ValueError(f"{files.word_vectors} is not the word-vector file this run in "
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
        self.model.to(self.device)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(c.optimizer, params, c.lr)
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
        self.position = 0  # batches done in the current epoch
        self.lr = c.lr
        self.best: float | None = None
        self.previous_ppl: float | None = None
        self.history: list[dict[str, Any]] = []
        self.sentences_seen = 0

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_extra(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "lr": self.lr, "best": self.best,
                "previous_ppl": self.previous_ppl, "history": self.history,
                "sentences_seen": self.sentences_seen}

    def restore_extra(self, ckpt: dict[str, Any]) -> None:
        self.epoch, self.position = ckpt["epoch"], ckpt["position"]
        self.best, self.previous_ppl = ckpt["best"], ckpt["previous_ppl"]
        self.history, self.sentences_seen = ckpt["history"], ckpt["sentences_seen"]
        self.set_lr(ckpt["lr"])

    def record_extra(self) -> dict[str, Any]:
        return {"epochs_completed": self.epoch, "sentences_seen": self.sentences_seen,
                "target_tokens_seen": self.tokens_seen, "history": self.history,
                "bleu_signature": bleu_signature(self.config.bleu_tokenize)}

    def save_model(self) -> Path:
        return save_translator(self.model, self.vocab, self.output / MODEL_DIR, self.record())

    def save_on_stop(self) -> None:
        if not (self.output / MODEL_DIR).exists():
            self.save_model()

    # ------------------------------------------------------------------ training
    def train(self, resume: bool = False) -> list[dict[str, Any]]:
        """Train to ``epochs`` (or ``max_steps``); returns the per-epoch history."""
        self.start(resume)
        self.run_epochs(self._epoch_steps)
        if self.valid is None or self.best is None:  # else model/ holds the best epoch
            self.save_model()
        self.log(f"model in {self.output / MODEL_DIR}")
        return self.history

    def _step(self, batch: list[int]) -> dict[str, float]:
        c = self.config
        self.model.train()
        tensors = batch_tensors(self.model, [self.sources[i] for i in batch],
                                [self.targets[i] for i in batch], self.vocab)
        total, n = nll(self.model, tensors)
        loss = total / max(n, 1)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.clip:
            torch.nn.utils.clip_grad_norm_(
                [p for p in self.model.parameters() if p.requires_grad], c.clip)
        self.optimizer.step()
        self.position += 1
        self.sentences_seen += len(batch)
        return {"loss_sum": float(loss.detach()) * n, "tokens": n, "sentences": len(batch),
                "progress": len(batch)}

    def _epoch_steps(self, stop: StopRequest) -> bool:
        """The rest of the current epoch; True when the run must end (max_steps)."""
        c = self.config
        batches = epoch_batches(self.lengths, c.batch_size, c.seed, self.epoch)

        def step() -> dict[str, float] | None:
            return self._step(batches[self.position]) if self.position < len(batches) else None

        with self.progress_bar(total=len(self.lengths), desc=f"epoch {self.epoch + 1}/{c.epochs}",
                               initial=sum(len(b) for b in batches[:self.position]), unit="sent") as bar:
            done = self.run_steps(step, stop, bar, lambda s: {
                "loss": f"{mean_loss(s, count='tokens'):.3f}",
                "sent_s": f"{s['sentences'] / max(s['seconds'], 1e-9):.1f}"})
        if done:
            self.log(f"reached max_steps={c.max_steps}")
        return done

    def end_epoch(self, stats: dict[str, float]) -> None:
        """The epoch's entry in the history: train loss, speed, validation, the best model."""
        c = self.config
        self.position = 0
        seconds = max(stats.get("seconds", 0.0), 1e-9)  # training steps only, without validation
        entry: dict[str, Any] = {
            "epoch": self.epoch, "step": self.step, "lr": self.lr,
            "train_loss": mean_loss(stats, count="tokens"),
            "sentences_per_s": stats.get("sentences", 0) / seconds,
            "target_tokens_per_s": stats.get("tokens", 0) / seconds,
        }
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

    def _validate(self, entry: dict[str, Any]) -> None:
        c = self.config
        assert self.valid is not None
        ppl = perplexity(self.model, self.vocab, self.valid, c.batch_size)
        hyps = translate(self.model, self.vocab, [s for s, _ in self.valid], beam=c.valid_beam,
                         batch_size=c.batch_size, progress=self.progress)
        score = bleu(hyps, [t for _, t in self.valid], c.bleu_tokenize).score
        entry.update(valid_perplexity=ppl, valid_bleu=score)
        if c.lr_halving and self.previous_ppl is not None and ppl > self.previous_ppl:
            self.set_lr(self.lr / 2)
            entry["lr_halved"] = True
        self.previous_ppl = ppl
        value = score if c.select is Selection.BLEU else -ppl
        if self.best is None or value > self.best:
            self.best = value
            entry["best"] = True
            self.save_model()
