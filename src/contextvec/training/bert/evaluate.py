"""Held-out BERT pretraining scores: masked-LM accuracy and perplexity, NSP accuracy."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from contextvec.encoders.bert.heads import BertForPreTraining
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.training.bert.instances import IGNORE_INDEX, InstanceSettings, collate
from contextvec.training.bert.stream import PretrainingStream

EVAL_SEED = 12345
"""Masking and pairing seed of held-out evaluation: every model is scored on the same instances."""


@dataclass(frozen=True)
class EvalSettings:
    """How :func:`evaluate_pretraining` scores a model.

    Attributes:
        instances: how the held-out pairs are made and masked (seeded by :data:`EVAL_SEED`
            unless told).
        batch_size: sentence pairs per forward pass.
        max_pairs: stop after this many pairs (None: one whole pass).
        progress: show a progress bar.
    """

    instances: InstanceSettings = field(default_factory=lambda: InstanceSettings(seed=EVAL_SEED))
    batch_size: int = 32
    max_pairs: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        if self.batch_size < 1 or (self.max_pairs is not None and self.max_pairs < 1):
            raise ValueError(f"batch_size and max_pairs must be >= 1, not {self.batch_size} "
                             f"and {self.max_pairs}")


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
def evaluate_pretraining(
    model: BertForPreTraining,
    tokenizer: WordPieceTokenizer,
    paths: Sequence[str | os.PathLike],
    settings: EvalSettings | None = None,
) -> BertScores:
    """Score a model on one pass over held-out files; masking and pairing are fixed by the
    instances' seed, so the same files and settings give the same instances for every model
    (``settings`` None: the defaults of :class:`EvalSettings`)."""
    settings = settings or EvalSettings()
    batch_size, max_pairs = settings.batch_size, settings.max_pairs
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    stream = PretrainingStream(paths, tokenizer, settings.instances, loop=False)
    pad_id = padding_id(tokenizer)
    totals = torch.zeros(5, dtype=torch.float64)  # NLL, MLM correct, masked, NSP correct, pairs
    start, pieces = time.perf_counter(), 0  # for the tokens/s figure
    bar = tqdm(desc="evaluating", unit="pair", disable=not settings.progress)
    try:
        while max_pairs is None or totals[4] < max_pairs:
            wanted = batch_size if max_pairs is None else min(batch_size, max_pairs - int(totals[4]))
            instances = [i for _, i in zip(range(wanted), stream, strict=False)]
            if not instances:
                break
            batch = collate(instances, pad_id).to(device)
            totals += batch_scores(model(batch.input_ids, batch.attention_mask, batch.token_type_ids,
                                    batch.mlm_labels), batch.mlm_labels, batch.nsp_labels).cpu()
            bar.update(len(instances))
            pieces += batch.n_pieces
            bar.set_postfix(tok_s=f"{pieces / max(time.perf_counter() - start, 1e-9):.0f}",
                            refresh=False)
    finally:
        bar.close()
        stream.close()
        model.train(was_training)
    if not totals[4]:
        raise ValueError(f"no sentence pairs in {', '.join(map(str, paths))}")
    nll, correct, masked, nsp_correct, pairs = totals.tolist()
    return BertScores(correct / masked, math.exp(nll / masked), nsp_correct / pairs, int(masked),
                      int(pairs))


def batch_scores(output: Any, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor) -> torch.Tensor:
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


def padding_id(tokenizer: WordPieceTokenizer) -> int:
    pad_id = tokenizer.tokenizer.token_to_id("[PAD]")
    if pad_id is None:
        raise ValueError("the vocabulary has no [PAD] token")
    return pad_id
