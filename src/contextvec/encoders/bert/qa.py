"""Extractive question answering: :class:`BertForQuestionAnswering` (HF's names) and span decoding."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from contextvec.encoders.bert.model import BertModelOutput
from contextvec.encoders.bert.with_head import BertWithHead


class SpanLogits(NamedTuple):
    """Start and end logits, (rows, pieces) each."""

    start_logits: torch.Tensor
    end_logits: torch.Tensor


class BertForQuestionAnswering(BertWithHead):
    """Extractive QA: ``qa_outputs`` (hidden -> 2) on the last hidden state gives each piece a
    start and an end logit (HF's ``BertForQuestionAnswering``; no pooler, no dropout). Rows are
    ``[CLS] question [SEP] context [SEP]`` with token types 0 then 1; :func:`best_spans` decodes."""

    head_name = "qa_outputs"
    with_pooler = False
    fixed_outputs = 2
    with_dropout = False

    def _head(self, output: BertModelOutput) -> SpanLogits:
        start, end = self.qa_outputs(output.hidden_states[-1]).unbind(-1)
        return SpanLogits(start, end)

    @staticmethod
    def loss(logits: SpanLogits, start_positions: torch.Tensor, end_positions: torch.Tensor) -> torch.Tensor:
        """Mean of the start and end cross-entropies (HF's loss); a position outside the row
        (HF's marker of an answer cut off by truncation) is ignored."""
        length = logits.start_logits.shape[1]
        start = start_positions.clamp(0, length)
        end = end_positions.clamp(0, length)
        return (
            F.cross_entropy(logits.start_logits, start, ignore_index=length)
            + F.cross_entropy(logits.end_logits, end, ignore_index=length)
        ) / 2


def context_mask(token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(rows, pieces) bool: the context pieces of ``[CLS] question [SEP] context [SEP]`` rows,
    i.e. token type 1 without the closing [SEP]."""
    mask = (token_type_ids == 1) & attention_mask.bool()
    last = mask.shape[1] - 1 - mask.flip(1).int().argmax(1)  # the last context-segment piece
    mask[torch.arange(mask.shape[0], device=mask.device), last] = False
    return mask


def best_spans(
    start_logits: torch.Tensor, end_logits: torch.Tensor, allowed: torch.Tensor, max_answer_length: int = 30
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best answer span of each row: ``(start, end, score)``, (rows,) each.

    Maximises ``start_logits[i] + end_logits[j]`` over ``i <= j < i + max_answer_length`` with
    both ends where ``allowed`` (rows, pieces) is True (the context: :func:`context_mask`).
    """
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be >= 1, not {max_answer_length}")
    if not allowed.any(1).all():
        raise ValueError("every row needs at least one allowed piece")
    length = start_logits.shape[1]
    positions = torch.arange(length, device=start_logits.device)
    offset = positions[None, :] - positions[:, None]  # end - start
    valid = ((offset >= 0) & (offset < max_answer_length))[None] & allowed[:, :, None] & allowed[:, None, :]
    scores = (start_logits[:, :, None] + end_logits[:, None, :]).masked_fill(~valid, float("-inf"))
    best, flat = scores.flatten(1).max(1)
    return flat // length, flat % length, best
