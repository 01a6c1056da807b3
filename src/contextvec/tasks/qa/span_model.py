"""The span model of extractive question answering over frozen features (BiDAF, Seo et al. 2017,
with ELMo's placement of contextual vectors, Peters et al. 2018).

For a context of ``T`` tokens and a question of ``J`` tokens:

1. each token's representation ``[x; ELMo_task]`` as in the other task models
   (:class:`~contextvec.tasks.models.bilstm.TaskModelBase`: learned word embeddings, optional
   char CNN and n-grams, the contextual mixes; the no-contextual baseline has ``x`` alone);
2. one shared biLSTM (``ModelSettings.lstm_layers``, ``hidden`` units per direction) over the
   context and over the question: ``H`` ``(T, d)``, ``U`` ``(J, d)`` (``input+output`` puts the
   second mix beside it);
3. BiDAF's attention: similarities ``S_tj = w [h_t; u_j; h_t * u_j]``; context-to-query
   ``a_t = softmax_j(S_tj) U``; query-to-context ``b = softmax_t(max_j S_tj) H`` (one vector,
   every context token gets it); ``G = [h; a; h * a; h * b]`` ``(T, 4d)``;
4. the modelling biLSTM (``SpanSettings.modelling_layers``) over ``G``: ``M``;
5. start scores ``w1 [G; M]``; one more biLSTM over ``M``: ``M2``; end scores ``w2 [G; M2]``.

Training minimises the cross-entropy of the first answer's start and end tokens; answers are the
spans ``start <= end < start + max_answer_length`` of the highest ``p_start * p_end``
(:mod:`~contextvec.tasks.qa.frozen`).
Padding is masked everywhere (attention, pooling, softmaxes), so a question's answer does not
depend on its batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from contextvec.tasks.models import Batch
from contextvec.tasks.models.bilstm import BiLSTMModel


@dataclass(frozen=True)
class SpanSettings:
    """What the span model adds to :class:`~contextvec.tasks.models.ModelSettings`: the layers
    of its modelling biLSTM (BiDAF: 2) and the longest answer it predicts, in tokens."""

    modelling_layers: int = 2
    max_answer_length: int = 30

    def __post_init__(self) -> None:
        if self.modelling_layers < 1 or self.max_answer_length < 1:
            raise ValueError(f"modelling_layers and max_answer_length must be >= 1, not "
                             f"{self.modelling_layers}, {self.max_answer_length}")


@dataclass
class SpanBatch:
    """A batch of questions on their contexts: ``context`` and ``question``, each a
    :class:`~contextvec.tasks.models.Batch` with its own padding, mask and precomputed layers;
    ``starts``/``ends``: ``(batch,)`` long answer tokens of the context, or None."""

    context: Batch
    question: Batch
    starts: torch.Tensor | None = None
    ends: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> SpanBatch:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return SpanBatch(self.context.to(device), self.question.to(device), move(self.starts),
                         move(self.ends))


def _lstm(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``lstm`` over ``x`` ``(batch, time, in)`` within each row's length (``mask`` ``(batch,
    time)``): ``(batch, time, 2 * hidden)``, zeros at padding."""
    packed = pack_padded_sequence(x, mask.sum(1).cpu(), batch_first=True, enforce_sorted=False)
    out, _ = lstm(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


class SpanModel(BiLSTMModel):
    """BiDAF over frozen features (see the module docstring). ``labels`` is empty; ``span``:
    its :class:`SpanSettings`."""

    def __init__(self, *args: object, span: SpanSettings, **kwargs: object) -> None:
        self.span = span  # read by _add_head, which the base class's constructor calls
        super().__init__(*args, **kwargs)

    def _add_head(self) -> None:
        d, hidden = self.output_dim, self.settings.hidden
        self.similarity_context = nn.Linear(d, 1)
        self.similarity_question = nn.Linear(d, 1, bias=False)
        self.similarity_product = nn.Parameter(torch.empty(d).uniform_(-d ** -0.5, d ** -0.5))
        self.modelling = nn.LSTM(4 * d, hidden, num_layers=self.span.modelling_layers, batch_first=True,
                                 bidirectional=True,
                                 dropout=self.settings.dropout if self.span.modelling_layers > 1 else 0.0)
        self.end_lstm = nn.LSTM(2 * hidden, hidden, batch_first=True, bidirectional=True)
        self.start_scores = nn.Linear(4 * d + 2 * hidden, 1)
        self.end_scores = nn.Linear(4 * d + 2 * hidden, 1)

    def attend(self, h: torch.Tensor, context_mask: torch.Tensor, u: torch.Tensor,
               question_mask: torch.Tensor) -> torch.Tensor:
        """BiDAF's attention flow.

        Args:
            h: ``(batch, T, d)`` the context's encodings.
            context_mask: ``(batch, T)`` bool, True at real tokens.
            u: ``(batch, J, d)`` the question's encodings.
            question_mask: ``(batch, J)`` bool.

        Returns:
            ``G`` ``(batch, T, 4 * d)``: ``[h; a; h * a; h * b]`` (context-to-query ``a``,
            query-to-context ``b``).
        """
        scores = (self.similarity_context(h) + self.similarity_question(u).transpose(1, 2)
                  + torch.bmm(h * self.similarity_product, u.transpose(1, 2)))  # (batch, T, J)
        a = torch.bmm(_masked_softmax(scores, question_mask.unsqueeze(1), -1), u)
        best = scores.masked_fill(~question_mask.unsqueeze(1), float("-inf")).max(-1).values  # (batch, T)
        b = torch.bmm(_masked_softmax(best, context_mask, -1).unsqueeze(1), h)  # (batch, 1, d)
        return torch.cat([h, a, h * a, h * b.expand_as(h)], dim=-1)

    def logits(self, batch: SpanBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Start and end scores of every context token.

        Returns:
            ``(start, end)``, each ``(batch, T)`` float, ``-inf`` at the context's padding.
        """
        mask = batch.context.mask
        g = self.attend(self.encode(batch.context), mask, self.encode(batch.question), batch.question.mask)
        m = self.dropout(_lstm(self.modelling, g, mask))
        m2 = self.dropout(_lstm(self.end_lstm, m, mask))
        start = self.start_scores(torch.cat([g, m], -1)).squeeze(-1)
        end = self.end_scores(torch.cat([g, m2], -1)).squeeze(-1)
        return start.masked_fill(~mask, float("-inf")), end.masked_fill(~mask, float("-inf"))

    def loss(self, batch: SpanBatch) -> torch.Tensor:
        """Mean over the batch of the start and end tokens' cross-entropies, summed."""
        assert batch.starts is not None and batch.ends is not None
        start, end = self.logits(batch)
        return F.cross_entropy(start, batch.starts) + F.cross_entropy(end, batch.ends)
