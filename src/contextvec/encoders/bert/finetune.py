"""BERT with task heads for fine-tuning, named as HF's ``BertFor...`` classes.

Each model is a :class:`BertModel` (attribute ``bert``) plus one linear head, and its state dict
is the matching HF checkpoint name for name (``bert.*``, ``classifier.*`` or ``qa_outputs.*``):

- :class:`BertForSequenceClassification`: pooled [CLS] vector -> dropout -> ``classifier``
  (hidden -> labels), or one output for regression (``config.json``'s ``problem_type``
  ``"regression"``: HF's choice for a single output, trained with MSE);
- :class:`BertForTokenClassification`: every piece's last hidden state -> dropout ->
  ``classifier``; :meth:`~BertForTokenClassification.word_logits` scores *words* by their first
  piece (BERT's NER setup). No pooler, as in HF;
- :class:`BertForQuestionAnswering`: ``qa_outputs`` (hidden -> 2) gives start and end logits
  per piece; :func:`best_spans` decodes the answer span. No pooler and no dropout, as in HF;
- :class:`BertForMultipleChoice`: (batch, choices, pieces) rows, each pooled -> dropout ->
  ``classifier`` (hidden -> 1) -> (batch, choices) logits.

Dropout is ``hidden_dropout_prob``. ``from_pretrained(directory, ...)`` reads an HF BERT
directory (any layout :mod:`~contextvec.encoders.bert.loader` reads): the encoder from its
``bert.*`` weights, the head from the checkpoint when it has one (a saved fine-tuned model),
else newly initialised as BERT does (normal(0, 0.02) weights, zero biases) from ``seed``; so is
a pooler the checkpoint lacks. ``save_pretrained`` writes an HF directory that both
``transformers`` and ``contextvec.load`` read. Models come back in eval mode.

Words -> rows of pieces: :func:`word_rows` (every word, long sentences in sliding windows as
:class:`~contextvec.encoders.bert.encoder.BertEncoder` runs them), :func:`truncated_rows`
(one row per sentence, cut at the position limit: for sentence classification) and
:func:`pair_rows` (``[CLS] A [SEP] B [SEP]`` with segment ids 0 and 1, the BERT paper's input for
sentence pairs, cut longest-first as HF's tokenizers cut).
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Self

import torch

from contextvec.encoders.bert.model import BertModel, BertModelOutput
from contextvec.encoders.bert.qa import BertForQuestionAnswering, SpanLogits, best_spans, context_mask
from contextvec.encoders.bert.rows import WordPieceRows, moved_to, pad_rows, truncated_rows, word_rows
from contextvec.encoders.bert.tokenizer import WordPieces
from contextvec.encoders.bert.with_head import TOKENIZER_FILES, BertWithHead
from contextvec.io.hf_bert import CONFIG_NAME, BertCheckpointError

__all__ = [
    "TOKENIZER_FILES", "BertForMultipleChoice", "BertForQuestionAnswering", "BertForSequenceClassification",
    "BertForTokenClassification", "BertWithHead", "PairRows", "SpanLogits", "WordPieceRows", "best_spans",
    "context_mask", "longest_first", "pad_rows", "pair_rows", "truncated_rows", "word_rows",
]

REGRESSION, CLASSIFICATION = "regression", "single_label_classification"
"""HF's ``problem_type`` values of a sequence head."""


class BertForSequenceClassification(BertWithHead):
    """One label per input row: the pooled [CLS] vector -> dropout -> ``classifier`` (HF's
    ``BertForSequenceClassification``). With ``regression`` the head has one output, a real
    number per row (HF's ``problem_type`` ``"regression"``, trained with MSE)."""

    def __init__(self, bert: BertModel, labels: Sequence[str] = (), regression: bool = False) -> None:
        super().__init__(bert, labels)
        if regression and len(self.labels) != 1:
            raise ValueError(f"a regression head has one output, not {len(self.labels)} labels")
        self.regression = regression

    def _head(self, output: BertModelOutput) -> torch.Tensor:
        """(rows, labels) logits; (rows, 1) for regression."""
        return self.classifier(self.dropout(output.pooler_output))

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        labels: Sequence[str] | None = None,
        num_labels: int | None = None,
        seed: int = 0,
        regression: bool | None = None,
    ) -> Self:
        """As :meth:`BertWithHead.from_pretrained`; ``regression``: a one-output head (no labels
        given), None: what the checkpoint's ``config.json`` says (``problem_type``, else HF's
        rule: one label is regression). A regression head is refused where labels are asked."""
        stored = _stored_regression(Path(directory) / CONFIG_NAME)
        if regression is None:
            regression = stored and labels is None and num_labels in (None, 1)
        if stored and not regression:
            raise BertCheckpointError(f"{directory}: its classifier is a regression head; "
                                      "start from a checkpoint without that head")
        if regression:
            if labels is not None or num_labels not in (None, 1):
                raise ValueError("a regression head takes no labels (it has one output)")
            num_labels = 1
        model = super().from_pretrained(directory, labels, num_labels, seed)
        if regression and len(model.labels) != 1:
            raise BertCheckpointError(f"{directory}: its classifier predicts {model.labels}, not one "
                                      "regression output; start from a checkpoint without that head")
        model.regression = regression
        return model

    def config_extras(self) -> dict:
        """HF's ``problem_type``, so ``transformers`` trains and scores a regression head with MSE."""
        return {"problem_type": REGRESSION if self.regression else CLASSIFICATION}


def _stored_regression(config_path: Path) -> bool:
    """Whether an HF ``config.json`` describes a regression head: its ``problem_type``, or
    without one, a single label (HF's rule). Unreadable files are left to the reader of the weights."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(config, dict):
        return False
    problem = config.get("problem_type")
    if problem is not None:
        return problem == REGRESSION
    labels = config.get("id2label")
    return isinstance(labels, dict) and len(labels) == 1


class PairRows(NamedTuple):
    """Sentence pairs as model input (:func:`pair_rows`): ``input_ids``, ``attention_mask`` and
    ``token_type_ids`` (pairs, pieces); ``truncated`` (pairs,): True where a pair lost pieces."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    truncated: torch.Tensor

    to = moved_to


def longest_first(first: int, second: int, budget: int) -> tuple[int, int]:
    """How many pieces of each sentence a pair keeps when only ``budget`` fit: the longer one is
    cut first; when both are longer than half, each keeps half (the second the odd piece when they
    tie). HF's fast tokenizers' ``truncation="longest_first"``, piece for piece."""
    if first + second <= budget:
        return first, second
    swap = first > second
    short, long = (second, first) if swap else (first, second)
    long = short if short > budget else max(short, budget - short)
    if short + long > budget:
        short = budget // 2
        long = short + budget % 2
    return (long, short) if swap else (short, long)


def pair_rows(
    first: Sequence[WordPieces], second: Sequence[WordPieces], max_pieces: int, pad_id: int = 0
) -> PairRows:
    """One row per pair, ``[CLS] A [SEP] B [SEP]``, segment ids 0 up to the first [SEP] and 1
    after (the BERT paper, section 4.1); a pair of more than ``max_pieces`` pieces is cut
    :func:`longest_first` at the ends of its sentences, its [SEP]s kept.

    ``first``/``second``: :meth:`~contextvec.encoders.bert.WordPieceTokenizer.encode_batch`
    results (each with its [CLS] and [SEP]), one per pair.
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first sentences but {len(second)} second ones")
    if max_pieces < 5:
        raise ValueError(f"max_pieces must leave room for [CLS], two [SEP]s and a piece of each, "
                         f"not {max_pieces}")
    rows, types, cut = [], [], []
    for a, b in zip(first, second, strict=True):
        a_body, b_body = a.ids[1:-1], b.ids[1:-1]
        keep_a, keep_b = longest_first(len(a_body), len(b_body), max_pieces - 3)
        cls_id, sep_id = a.ids[0], a.ids[-1]
        rows.append([cls_id, *a_body[:keep_a], sep_id, *b_body[:keep_b], sep_id])
        types.append([0] * (keep_a + 2) + [1] * (keep_b + 1))
        cut.append(keep_a + keep_b < len(a_body) + len(b_body))
    ids, mask = pad_rows(rows, pad_id)
    token_types, _ = pad_rows(types, 0)
    return PairRows(ids, mask, token_types, torch.tensor(cut, dtype=torch.bool))


class BertForTokenClassification(BertWithHead):
    """One label per piece: the last hidden state -> dropout -> ``classifier`` (HF's
    ``BertForTokenClassification``; no pooler). Words are scored at their first piece
    (:meth:`word_logits`)."""

    with_pooler = False

    def _head(self, output: BertModelOutput) -> torch.Tensor:
        """(rows, pieces, labels) logits."""
        return self.classifier(self.dropout(output.hidden_states[-1]))

    def word_logits(self, rows: WordPieceRows) -> torch.Tensor:
        """(sentences, max words, labels): each word's logits at its first piece; zeros at padding.

        Only the first pieces go through the classifier (the same numbers as :meth:`forward`
        gives there)."""
        hidden = self.bert(rows.input_ids, rows.attention_mask).hidden_states[-1]
        first = self.classifier(self.dropout(hidden[rows.first_row, rows.first_pos]))
        out = first.new_zeros(*rows.word_mask.shape, first.shape[-1])
        out[rows.word_mask] = first
        return out


class BertForMultipleChoice(BertWithHead):
    """Scores choices: input (batch, choices, pieces), every row pooled -> dropout ->
    ``classifier`` (hidden -> 1) -> (batch, choices) logits, trained with cross-entropy over the
    choices (HF's ``BertForMultipleChoice``)."""

    fixed_outputs = 1

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Score every choice of every example.

        Args:
            input_ids: ``(batch, choices, pieces)`` long, word-piece ids of each choice's row.
            attention_mask: ``(batch, choices, pieces)``, 1/True at real pieces; all real if omitted.
            token_type_ids: ``(batch, choices, pieces)`` long, segment ids; all 0 if omitted.

        Returns:
            ``(batch, choices)`` float logits.
        """
        batch, choices, length = input_ids.shape

        def flat(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.reshape(batch * choices, length)

        scores = super().forward(flat(input_ids), flat(attention_mask), flat(token_type_ids))
        return scores.view(batch, choices)

    def _head(self, output: BertModelOutput) -> torch.Tensor:
        return self.classifier(self.dropout(output.pooler_output))
