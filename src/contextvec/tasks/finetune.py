"""Fine-tuning BERT on the ``train-task`` tasks (``contextvec train-task TASK --fine-tune``).

The whole of BERT is trained with a task head (:mod:`contextvec.encoders.bert.finetune`)
instead of a frozen-feature model:

- **ner**: :class:`~contextvec.encoders.bert.finetune.BertForTokenClassification`, one IOB2
  tag per word from the word's first piece (the BERT paper's NER setup), plain softmax with
  cross-entropy over the words (no CRF). Predicted tags are argmaxes per word, so a sequence may
  be ill-formed IOB2 (``O I-PER``); :func:`~contextvec.tasks.metrics.ner_scores` scores it as the
  frozen-feature tagger's output (conlleval-like: the ``I-`` starts an entity). Sentences longer
  than ``max_position_embeddings - 2`` pieces run in sliding windows as in ``BertEncoder``, so
  every word is tagged and scored.
- **sst5/sst2/trec, cola, sst2-glue**:
  :class:`~contextvec.encoders.bert.finetune.BertForSequenceClassification` on
  ``[CLS] sentence [SEP]``. A sentence of more pieces than ``max_position_embeddings`` is cut
  to its first ``max_position_embeddings - 2`` pieces (counted in the report's
  ``extra.truncated_sentences``; none in SST or TREC with BERT's 512 positions).
- **sentence pairs (mrpc, rte, stsb, wnli)**: the same head on ``[CLS] A [SEP] B [SEP]`` with
  segment ids 0 and 1 (the BERT paper, section 4.1); a pair of more pieces than
  ``max_position_embeddings`` is cut longest-first as HF's tokenizers cut it
  (:func:`~contextvec.encoders.bert.finetune.pair_rows`; counted in ``extra.truncated_pairs``).
- **regression (stsb)**: the head has one output (HF's ``problem_type`` ``"regression"``), the
  loss is the mean squared error, predictions are floats.

The recipe is the BERT paper's (Devlin et al. 2019, appendix A.3): AdamW with weight decay 0.01
except biases and LayerNorm weights, lr 5e-5, linear warmup over the first 10% of the steps
then linear decay to 0, 3 epochs, batches of 32 sentences, gradient-norm clipping at 1.0.
The loop is :func:`contextvec.tasks.fit.fit`: batches group sentences of similar piece counts,
dev is scored after every epoch (selection by the task's metric: accuracy, F1, Matthews
correlation or Spearman correlation) and the best-on-dev weights are restored at the end (all
epochs run: the learning-rate schedule spans them); the test split, when given, is scored once
with those weights. Batches group items by their piece count (both sentences of a pair). Data,
labels, metrics and the report come from the task table (:mod:`contextvec.tasks.spec`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.bert.finetune import (
    BertForSequenceClassification,
    BertForTokenClassification,
    pair_rows,
    truncated_rows,
    word_rows,
)
from contextvec.encoders.bert.tokenizer import WordPieces, WordPieceTokenizer
from contextvec.tasks.fit import (
    FitSettings,
    Objective,
    Optimisation,
    TaskReport,
    eval_batch_size,
    fit,
    runtime_summary,
    seed_everything,
)
from contextvec.tasks.schemes import to_scheme
from contextvec.tasks.spec import TaskSpec, as_task
from contextvec.tasks.split import Split, subsample
from contextvec.text.batching import length_batches
from contextvec.training.optim import bert_parameter_groups

FineTuned = BertForSequenceClassification | BertForTokenClassification


@dataclass(frozen=True)
class FineTuneSettings(FitSettings):
    """The fine-tuning recipe (defaults: the BERT paper's; see the module docstring).
    ``warmup``: the fraction of all steps over which the learning rate rises linearly from 0."""

    epochs: int = 3
    lr: float = 5e-5
    clip: float = 1.0
    warmup: float = 0.1
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weight_decay < 0 or not 0 <= self.warmup < 1:
            raise ValueError(f"weight_decay must be >= 0 and warmup in [0, 1): {self}")


def warmup_linear_decay(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The learning-rate factor of step ``s``: ``s / warmup_steps`` rising, then falling linearly
    to 0 at ``total_steps`` (HF's ``get_linear_schedule_with_warmup``)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


class PieceSplit:
    """A split as word pieces (tokenized once) with targets for training: label ids, or float
    scores for regression (``label_ids`` then may be empty)."""

    def __init__(
        self,
        split: Split,
        tokenizer: WordPieceTokenizer,
        spec: TaskSpec,
        max_pieces: int,
        label_ids: dict[str, int] | None = None,
    ) -> None:
        self.split = split
        self.spec = spec
        self.tagging = spec.tagging
        self.max_pieces = max_pieces
        self.pieces: list[WordPieces] = tokenizer.encode_batch(split.sentences)
        self.second: list[WordPieces] | None = None
        if split.second is not None:
            self.second = tokenizer.encode_batch(split.second)
            # [CLS] A [SEP] B [SEP]: one [CLS] and one [SEP] fewer than the two rows apart.
            self.full_lengths = [len(a.ids) + len(b.ids) - 1 for a, b in zip(self.pieces, self.second,
                                                                              strict=True)]
        else:
            self.full_lengths = [len(p.ids) for p in self.pieces]
        self.lengths = [min(n, max_pieces) for n in self.full_lengths] if split.pair else self.full_lengths
        self.targets = None
        if label_ids is not None:
            if self.tagging:
                self.targets = [
                    torch.tensor([label_ids[t] for t in to_scheme(tags, "bio")]) for tags in split.labels
                ]
            elif spec.regression:
                self.targets = [torch.tensor(float(label)) for label in split.labels]
            else:
                self.targets = [torch.tensor(label_ids[label]) for label in split.labels]

    @property
    def long_sentences(self) -> int:
        """Items over the position limit: windowed (tagging) or truncated (classification, pairs)."""
        return sum(n > self.max_pieces for n in self.full_lengths)

    def logits(self, model: FineTuned, ids: Sequence[int], device: str) -> torch.Tensor:
        """(sentences, words, labels) for tagging, (items, labels) for classification, (items, 1)
        for regression."""
        pieces = [self.pieces[i] for i in ids]
        pad = model.config.pad_token_id
        if self.tagging:
            assert isinstance(model, BertForTokenClassification)
            return model.word_logits(word_rows(pieces, self.max_pieces - 2, pad).to(device))
        if self.second is not None:
            rows = pair_rows(pieces, [self.second[i] for i in ids], self.max_pieces, pad).to(device)
            return model(rows.input_ids, rows.attention_mask, rows.token_type_ids)
        input_ids, mask = truncated_rows(pieces, self.max_pieces, pad)
        return model(input_ids.to(device), mask.to(device))

    def loss(self, model: FineTuned, ids: Sequence[int], device: str) -> torch.Tensor:
        """Mean cross-entropy per word (tagging) or per item; mean squared error for regression."""
        assert self.targets is not None
        logits = self.logits(model, ids, device)
        if self.tagging:
            targets = nn.utils.rnn.pad_sequence(
                [self.targets[i] for i in ids], batch_first=True, padding_value=-100
            ).to(device)
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        targets = torch.stack([self.targets[i] for i in ids]).to(device)
        if self.spec.regression:
            return F.mse_loss(logits[:, 0], targets)
        return F.cross_entropy(logits, targets)

    @torch.no_grad()
    def predict(self, model: FineTuned, batch_size: int, device: str) -> list:
        """Per-word tags, one label per item, or one float per item (regression), in split order."""
        model.eval()
        out: list = [None] * len(self.split)
        for ids in length_batches(self.lengths, batch_size):
            logits = self.logits(model, ids, device)
            if self.spec.regression:
                for i, value in zip(ids, logits[:, 0].tolist(), strict=True):
                    out[i] = value
                continue
            for i, row in zip(ids, logits.argmax(-1).tolist(), strict=True):
                n = len(self.split.sentences[i])
                out[i] = [model.labels[t] for t in row[:n]] if self.tagging else model.labels[row]
        return out

    def score(self, model: FineTuned, batch_size: int, device: str, seen: set[str] | None = None) -> dict:
        """Dev/test scores; ``seen``: the training split's entity mentions (NER's ``by_mention``)."""
        return self.spec.score(self.split, self.predict(model, batch_size, device), "bio", seen)


def head_model(
    spec: TaskSpec, directory: str | os.PathLike, labels: Sequence[str], seed: int = 0
) -> FineTuned:
    """The task's fine-tuning head on the BERT of ``directory`` (eval mode): one output for a
    regression task, else one per label."""
    if spec.regression:
        return BertForSequenceClassification.from_pretrained(directory, seed=seed, regression=True)
    return spec.fine_tune_head.from_pretrained(directory, labels=labels, seed=seed)


def fine_tune(
    task: str | TaskSpec,
    train: Split,
    dev: Split,
    test: Split | None,
    model_dir: str | os.PathLike,
    settings: FineTuneSettings,
) -> tuple[TaskReport, FineTuned]:
    """Fine-tune the HF BERT in ``model_dir`` on ``task``, keep the best-on-dev weights, score dev
    (and test); see the module docstring. Returns the report and the model (eval mode)."""
    spec = as_task(task)
    for split in (train, dev, test):
        if split is not None and not split.labeled:
            raise ValueError(f"{split.source} has no labels to train or score on (GLUE's test.tsv is "
                             "unlabeled: predict it with contextvec predict --output-format glue)")
    seed_everything(settings.seed)
    full_train_size = len(train)
    train = subsample(train, settings.train_fraction, settings.seed)
    labels = spec.label_set(train.labels, "bio")
    model = head_model(spec, model_dir, labels, settings.seed)
    model.to(settings.device)
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    max_pieces = model.config.max_position_embeddings
    label_ids = {label: i for i, label in enumerate(labels)}
    encoded = {"train": PieceSplit(train, tokenizer, spec, max_pieces, label_ids),
               "dev": PieceSplit(dev, tokenizer, spec, max_pieces)}
    seen = spec.seen_mentions(train)
    eval_batch = eval_batch_size(settings)
    # What a saved model needs besides its weights (as train_task's models keep it).
    model.seen_mentions, model.eval_batch_size = seen, eval_batch
    device = settings.device

    optimizer = torch.optim.AdamW(bert_parameter_groups(model, settings.weight_decay), lr=settings.lr)
    total_steps = settings.epochs * -(-len(train) // settings.batch_size)
    warmup_steps = round(settings.warmup * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(warmup_steps, total_steps))
    result = fit(
        model, lengths=encoded["train"].lengths,
        objective=Objective(lambda ids: encoded["train"].loss(model, ids, device),
                            lambda: encoded["dev"].score(model, eval_batch, device, seen)[spec.metric],
                            spec.metric),
        optimisation=Optimisation(optimizer, model.parameters(), scheduler), settings=settings,
    )
    started = time.perf_counter()
    dev_scores = encoded["dev"].score(model, eval_batch, device, seen)
    test_scores = None
    if test is not None:
        encoded["test"] = PieceSplit(test, tokenizer, spec, max_pieces)
        test_scores = encoded["test"].score(model, eval_batch, device, seen)
    eval_seconds = time.perf_counter() - started
    report = TaskReport(
        task=spec.name, metric=spec.metric, best_epoch=result.best_epoch, dev=dev_scores, test=test_scores,
        curve=result.curve, mixes=[], labels=labels,
        splits={name: {"source": d.split.source, "sentences": len(d.split), "tokens": d.split.num_tokens,
                       "pieces": sum(d.lengths)} for name, d in encoded.items()},
        parameters={"trainable": sum(p.numel() for p in model.parameters()),
                    "head": sum(p.numel() for p in model.head.parameters())},
        model_settings={
            "mode": "fine-tune", "head": type(model).__name__, "model": str(model_dir),
            "max_position_embeddings": max_pieces,
            "long_sentences": ("sliding window" if spec.tagging else
                               "truncated longest-first" if spec.pair else "truncated"),
            "tag_scheme": "bio" if spec.tagging else None,
            "pair": spec.pair, "regression": spec.regression,
            "hidden_dropout_prob": model.config.hidden_dropout_prob,
        },
        train_settings=asdict(settings),
        runtime_s=runtime_summary(train.num_tokens, len(train), result, eval_seconds),
        extra={
            "train_sentences_before_fraction": full_train_size, "warmup_steps": warmup_steps,
            "total_steps": total_steps,
            ("windowed_sentences" if spec.tagging else "truncated_pairs" if spec.pair
             else "truncated_sentences"): {
                name: d.long_sentences for name, d in encoded.items()
            },
        },
    )
    return report, model
