"""BERT with task heads for fine-tuning, named as HF's ``BertFor...`` classes.

Each model is a :class:`BertModel` (attribute ``bert``) plus one linear head, and its state dict
is the matching HF checkpoint name for name (``bert.*``, ``classifier.*`` or ``qa_outputs.*``):

- :class:`BertForSequenceClassification`: pooled [CLS] vector -> dropout -> ``classifier``
  (hidden -> labels);
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
:class:`~contextvec.encoders.bert.encoder.BertEncoder` runs them) and :func:`truncated_rows`
(one row per sentence, cut at the position limit: for sentence classification).
"""
from __future__ import annotations

import torch

from contextvec.encoders.bert.model import BertModelOutput
from contextvec.encoders.bert.qa import BertForQuestionAnswering, SpanLogits, best_spans, context_mask
from contextvec.encoders.bert.rows import WordPieceRows, pad_rows, truncated_rows, word_rows
from contextvec.encoders.bert.with_head import TOKENIZER_FILES, BertWithHead

__all__ = [
    "TOKENIZER_FILES", "BertForMultipleChoice", "BertForQuestionAnswering", "BertForSequenceClassification",
    "BertForTokenClassification", "BertWithHead", "SpanLogits", "WordPieceRows", "best_spans", "context_mask",
    "pad_rows", "truncated_rows", "word_rows",
]


class BertForSequenceClassification(BertWithHead):
    """One label per input row: the pooled [CLS] vector -> dropout -> ``classifier`` (HF's
    ``BertForSequenceClassification``)."""

    def _head(self, output: BertModelOutput) -> torch.Tensor:
        """(rows, labels) logits."""
        return self.classifier(self.dropout(output.pooler_output))


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
