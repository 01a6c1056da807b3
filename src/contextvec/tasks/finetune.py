"""Fine-tuning BERT on the ``train-task`` tasks (``contextvec train-task TASK --fine-tune``).

The whole of BERT is trained with a task head (:mod:`contextvec.encoders.bert.finetune`)
instead of a frozen-feature model:

- **ner**: :class:`~contextvec.encoders.bert.finetune.BertForTokenClassification`, one IOB2
  tag per word from the word's first piece (the BERT paper's NER setup), plain softmax with
  cross-entropy over the words (no CRF). Predicted tags are argmaxes per word, so a sequence may
  be ill-formed IOB2 (``O I-PER``); :func:`~contextvec.tasks.train.ner_scores` scores it as the
  frozen-feature tagger's output (conlleval-like: the ``I-`` starts an entity). Sentences longer
  than ``max_position_embeddings - 2`` pieces run in sliding windows as in ``BertEncoder``, so
  every word is tagged and scored.
- **sst5/sst2/trec**: :class:`~contextvec.encoders.bert.finetune.BertForSequenceClassification`
  on ``[CLS] sentence [SEP]``. A sentence of more pieces than ``max_position_embeddings`` is cut
  to its first ``max_position_embeddings - 2`` pieces (counted in the report's
  ``extra.truncated_sentences``; none in SST or TREC with BERT's 512 positions).

The recipe is the BERT paper's (Devlin et al. 2019, appendix A.3): AdamW with weight decay 0.01
except biases and LayerNorm weights, lr 5e-5, linear warmup over the first 10% of the steps
then linear decay to 0, 3 epochs, batches of 32 sentences, gradient-norm clipping at 1.0.
Batches group sentences of similar piece counts (:func:`~contextvec.tasks.train.training_batches`).
Dev is scored after every epoch and the best-on-dev weights are restored at the end (all epochs
run: the learning-rate schedule spans them); the test split, when given, is scored once with
those weights. Data, labels, metrics and the report are those of
:mod:`contextvec.tasks.train`.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from contextvec.encoders.bert.finetune import (
    BertForSequenceClassification,
    BertForTokenClassification,
    truncated_rows,
    word_rows,
)
from contextvec.encoders.bert.tokenizer import WordPieces, WordPieceTokenizer
from contextvec.tasks.train import (
    TAGGING,
    TASKS,
    Split,
    TaskReport,
    accuracy,
    entity_mentions,
    ner_scores,
    subsample,
    task_labels,
    to_scheme,
    training_batches,
)
from contextvec.text.batching import length_batches
from contextvec.training.optim import bert_parameter_groups

FineTuned = BertForSequenceClassification | BertForTokenClassification


@dataclass(frozen=True)
class FineTuneSettings:
    """The fine-tuning recipe (defaults: the BERT paper's; see the module docstring).
    ``warmup``: the fraction of all steps over which the learning rate rises linearly from 0."""

    epochs: int = 3
    lr: float = 5e-5
    batch_size: int = 32
    warmup: float = 0.1
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0
    train_fraction: float = 1.0
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1: {self}")
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], not {self.train_fraction}")
        if self.lr <= 0 or self.clip <= 0 or self.weight_decay < 0 or not 0 <= self.warmup < 1:
            raise ValueError(f"lr and clip must be > 0, weight_decay >= 0, warmup in [0, 1): {self}")


def warmup_linear_decay(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The learning-rate factor of step ``s``: ``s / warmup_steps`` rising, then falling linearly
    to 0 at ``total_steps`` (HF's ``get_linear_schedule_with_warmup``)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


class _Encoded:
    """A split as word pieces (tokenized once) with label ids for training."""

    def __init__(
        self,
        split: Split,
        tokenizer: WordPieceTokenizer,
        tagging: bool,
        max_pieces: int,
        label_ids: dict[str, int] | None = None,
    ) -> None:
        self.split = split
        self.tagging = tagging
        self.max_pieces = max_pieces
        self.pieces: list[WordPieces] = tokenizer.encode_batch(split.sentences)
        self.lengths = [len(p.ids) for p in self.pieces]
        self.targets = None
        if label_ids is not None:
            if tagging:
                self.targets = [
                    torch.tensor([label_ids[t] for t in to_scheme(tags, "bio")]) for tags in split.labels
                ]
            else:
                self.targets = [torch.tensor(label_ids[label]) for label in split.labels]

    @property
    def long_sentences(self) -> int:
        """Sentences over the position limit: windowed (tagging) or truncated (classification)."""
        return sum(n > self.max_pieces for n in self.lengths)

    def logits(self, model: FineTuned, ids: Sequence[int], device: str) -> torch.Tensor:
        """(sentences, words, labels) for tagging, (sentences, labels) for classification."""
        pieces = [self.pieces[i] for i in ids]
        pad = model.config.pad_token_id
        if self.tagging:
            assert isinstance(model, BertForTokenClassification)
            return model.word_logits(word_rows(pieces, self.max_pieces - 2, pad).to(device))
        input_ids, mask = truncated_rows(pieces, self.max_pieces, pad)
        return model(input_ids.to(device), mask.to(device))

    def loss(self, model: FineTuned, ids: Sequence[int], device: str) -> torch.Tensor:
        """Mean cross-entropy per word (tagging) or per sentence."""
        assert self.targets is not None
        logits = self.logits(model, ids, device)
        if self.tagging:
            targets = nn.utils.rnn.pad_sequence(
                [self.targets[i] for i in ids], batch_first=True, padding_value=-100
            ).to(device)
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        return F.cross_entropy(logits, torch.stack([self.targets[i] for i in ids]).to(device))

    @torch.no_grad()
    def predict(self, model: FineTuned, batch_size: int, device: str) -> list:
        """Per-word tags or one label per sentence, in split order."""
        model.eval()
        out: list = [None] * len(self.split)
        for ids in length_batches(self.lengths, batch_size):
            best = self.logits(model, ids, device).argmax(-1).tolist()
            for i, row in zip(ids, best, strict=True):
                n = len(self.split.sentences[i])
                out[i] = [model.labels[t] for t in row[:n]] if self.tagging else model.labels[row]
        return out

    def score(self, model: FineTuned, batch_size: int, device: str, seen: set[str] | None = None) -> dict:
        """Dev/test scores; ``seen``: the training split's entity mentions (NER's ``by_mention``)."""
        predicted = self.predict(model, batch_size, device)
        if self.tagging:
            return ner_scores(self.split.labels, predicted, "bio", self.split.sentences, seen)
        return accuracy(self.split.labels, predicted)


def fine_tune(
    task: str,
    train: Split,
    dev: Split,
    test: Split | None,
    model_dir: str | os.PathLike,
    settings: FineTuneSettings,
) -> tuple[TaskReport, FineTuned]:
    """Fine-tune the HF BERT in ``model_dir`` on ``task``, keep the best-on-dev weights, score dev
    (and test); see the module docstring. Returns the report and the model (eval mode)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    full_train_size = len(train)
    train = subsample(train, settings.train_fraction, settings.seed)
    tagging = task in TAGGING
    labels = task_labels(task, train.labels, "bio")
    head = BertForTokenClassification if tagging else BertForSequenceClassification
    model = head.from_pretrained(model_dir, labels=labels, seed=settings.seed).to(settings.device)
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    max_pieces = model.config.max_position_embeddings
    label_ids = {label: i for i, label in enumerate(labels)}
    data_train = _Encoded(train, tokenizer, tagging, max_pieces, label_ids)
    data_dev = _Encoded(dev, tokenizer, tagging, max_pieces)
    metric = "f1" if tagging else "accuracy"
    seen = entity_mentions(train.sentences, train.labels) if tagging else None
    eval_batch = max(settings.batch_size, 64)
    device = settings.device

    optimizer = torch.optim.AdamW(bert_parameter_groups(model, settings.weight_decay), lr=settings.lr)
    batches_per_epoch = math.ceil(len(train) / settings.batch_size)
    total_steps = settings.epochs * batches_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_linear_decay(round(settings.warmup * total_steps), total_steps)
    )
    rng = random.Random(settings.seed)
    best_score, best_epoch = -math.inf, 0
    best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    curve: list[dict] = []
    train_seconds = 0.0
    for epoch in range(1, settings.epochs + 1):
        started = time.perf_counter()
        model.train()
        total_loss, n_batches = 0.0, 0
        bar = tqdm(
            training_batches(data_train.lengths, settings.batch_size, rng),
            desc=f"epoch {epoch}",
            unit="batch",
            disable=not settings.progress,
            leave=False,
        )
        for ids in bar:
            loss = data_train.loss(model, ids, device)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
            optimizer.step()
            scheduler.step()
            total_loss += float(loss.detach())
            n_batches += 1
            bar.set_postfix(loss=f"{total_loss / n_batches:.3f}")
        epoch_train = time.perf_counter() - started
        train_seconds += epoch_train
        score = data_dev.score(model, eval_batch, device, seen)[metric]
        curve.append(
            {
                "epoch": epoch,
                "train_loss": round(total_loss / max(n_batches, 1), 5),
                f"dev_{metric}": round(score, 5),
                "train_s": round(epoch_train, 3),
                "eval_s": round(time.perf_counter() - started - epoch_train, 3),
            }
        )
        if settings.progress:
            tqdm.write(f"epoch {epoch}: loss {total_loss / max(n_batches, 1):.4f}, dev {metric} {score:.4f}")
        if score > best_score:
            best_score, best_epoch = score, epoch
            best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    model.eval()
    started = time.perf_counter()
    dev_scores = data_dev.score(model, eval_batch, device, seen)
    encoded = {"train": data_train, "dev": data_dev}
    test_scores = None
    if test is not None:
        encoded["test"] = _Encoded(test, tokenizer, tagging, max_pieces)
        test_scores = encoded["test"].score(model, eval_batch, device, seen)
    eval_seconds = time.perf_counter() - started
    n_head = sum(p.numel() for p in model.head.parameters())
    epochs_run = len(curve)
    report = TaskReport(
        task=task,
        metric=metric,
        best_epoch=best_epoch,
        dev=dev_scores,
        test=test_scores,
        curve=curve,
        mixes=[],
        labels=labels,
        splits={
            name: {
                "source": d.split.source,
                "sentences": len(d.split),
                "tokens": d.split.num_tokens,
                "pieces": sum(d.lengths),
            }
            for name, d in encoded.items()
        },
        parameters={"trainable": sum(p.numel() for p in model.parameters()), "head": n_head},
        model_settings={
            "mode": "fine-tune",
            "head": type(model).__name__,
            "model": str(model_dir),
            "max_position_embeddings": max_pieces,
            "long_sentences": "sliding window" if tagging else "truncated",
            "tag_scheme": "bio" if tagging else None,
            "hidden_dropout_prob": model.config.hidden_dropout_prob,
        },
        train_settings=asdict(settings),
        runtime_s={
            "train": round(train_seconds, 3),
            "final_eval": round(eval_seconds, 3),
            "train_tokens_per_s": round(train.num_tokens * epochs_run / max(train_seconds, 1e-9), 1),
            "train_sentences_per_s": round(len(train) * epochs_run / max(train_seconds, 1e-9), 1),
        },
        extra={
            "train_sentences_before_fraction": full_train_size,
            "warmup_steps": round(settings.warmup * total_steps),
            "total_steps": total_steps,
            ("windowed_sentences" if tagging else "truncated_sentences"): {
                name: d.long_sentences for name, d in encoded.items()
            },
        },
    )
    return report, model
