"""CoVe's biattentive classification network (BCN; McCann et al. 2017, section 5 and figure 3).

For an input sequence ``w`` (each token's ``[x; ELMo_task]``, as the other task models read it;
``x`` is the word vector, with character n-grams and/or CoVe/ELMo/BERT vectors when chosen):

1. ``f``: a ReLU feedforward layer on every vector (``hidden`` units). The dropout before it is
   the one every task model applies to its input (``dropout`` on ``x``, the mix's own on the
   contextual vectors); a second one here would drop each input twice;
2. a biLSTM encoder: ``X = biLSTM(f(w))``;
3. biattention. The paper's BCN reads two sequences ``x`` and ``y``; for single-sentence tasks
   the sequence is duplicated, ``y = x``: the affinity ``A = X Y^T``, its row-wise softmax
   (padding masked), and the context summary ``C = softmax(A) Y`` of each token;
4. an integrating biLSTM over ``[X; X - C; X * C]``;
5. pooling over the tokens: max, mean, min and self-attentive (``softmax(X_y v + d)``);
6. a three-layer batch-normalised maxout network with 4 channels per unit (dropout before each
   layer; widths ``4 * hidden``, ``2 * hidden``, labels: 1200 and 600 at the paper's hidden 300,
   the widths of allennlp's BCN) giving the class scores.

With ``y = x`` both halves of the network compute the same vectors, so the pooled ``x`` and ``y``
are equal: they are computed once and fed to the maxout network once (allennlp's BCN does the
same); duplicating them would only duplicate input weights. The seed's training details
(Adam 0.001, hidden 300, dropout before the feedforward layers) are ``train-task --classifier
bcn``'s defaults.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from contextvec.tasks.models.bilstm import TaskModelBase
from contextvec.tasks.models.vocab import Batch

MAXOUT_PIECES = 4


class _BatchNorm(nn.BatchNorm1d):
    """BatchNorm1d that, on a training batch of one sentence (no batch statistics), normalises
    with the running statistics instead of failing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Batch norm over the batch dimension.

        Args:
            x: ``(batch, dim)`` float, one pooled vector per sentence.

        Returns:
            ``(batch, dim)`` float, normalised with the batch's statistics in training (the
            running ones on a batch of one) and with the running ones in evaluation.
        """
        if self.training and x.shape[0] == 1:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                                self.eps)
        return super().forward(x)


class Maxout(nn.Module):
    """Batch norm -> dropout -> linear to ``out * pieces`` -> the max of each unit's pieces."""

    def __init__(self, in_dim: int, out_dim: int, dropout: float, pieces: int = MAXOUT_PIECES) -> None:
        super().__init__()
        self.norm = _BatchNorm(in_dim)
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(in_dim, out_dim * pieces)
        self.out_dim, self.pieces = out_dim, pieces

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise, drop out, project, and keep the largest piece of each unit.

        Args:
            x: ``(batch, in_dim)`` float, one pooled vector per sentence.

        Returns:
            ``(batch, out_dim)`` float.
        """
        y = self.linear(self.dropout(self.norm(x)))
        return y.view(*y.shape[:-1], self.out_dim, self.pieces).max(dim=-1).values


def _run_lstm(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    lengths = mask.sum(1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    h, _ = lstm(packed)
    return pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])[0]


def _feedforward_renamed(module: nn.Module, state_dict: dict, prefix: str, *_: object) -> None:
    """Models saved while ``f`` began with a dropout name its linear layer ``feedforward.1``."""
    for name in ("weight", "bias"):
        if f"{prefix}feedforward.1.{name}" in state_dict:
            state_dict[f"{prefix}feedforward.0.{name}"] = state_dict.pop(f"{prefix}feedforward.1.{name}")


class BCNClassifier(TaskModelBase):
    """The biattentive classification network (see the module docstring); one label per sentence."""

    def _build(self) -> None:
        h, p = self.settings.hidden, self.settings.dropout
        in_dim = self.tokens.output_dim + self.context_dim
        self.feedforward = nn.Sequential(nn.Linear(in_dim, h), nn.ReLU())
        self.register_load_state_dict_pre_hook(_feedforward_renamed)
        self.encoder = nn.LSTM(h, h, batch_first=True, bidirectional=True)
        self.integrator = nn.LSTM(6 * h, h, batch_first=True, bidirectional=True)
        self.self_attention = nn.Linear(2 * h, 1)
        self.maxout = nn.Sequential(Maxout(8 * h, 4 * h, p), Maxout(4 * h, 2 * h, p),
                                    Maxout(2 * h, len(self.labels), p))

    def logits(self, batch: Batch) -> torch.Tensor:
        w, mixes = self.inputs(batch)
        if len(mixes) == 2:
            raise ValueError("the BCN reads contextual vectors at its input only (placement input)")
        mask = batch.mask
        x = _run_lstm(self.encoder, self.feedforward(w), mask)
        affinity = x @ x.transpose(1, 2)  # y = x: the sequence attends over its duplicate
        affinity = affinity.masked_fill(~mask.unsqueeze(1), float("-inf"))
        context = torch.softmax(affinity, dim=-1) @ x
        integrated = _run_lstm(self.integrator, torch.cat([x, x - context, x * context], dim=-1), mask)
        m = mask.unsqueeze(-1)
        pooled_max = integrated.masked_fill(~m, float("-inf")).max(dim=1).values
        pooled_min = integrated.masked_fill(~m, float("inf")).min(dim=1).values
        pooled_mean = (integrated * m).sum(1) / m.sum(1).clamp(min=1)
        scores = self.self_attention(integrated).squeeze(-1).masked_fill(~mask, float("-inf"))
        pooled_self = (torch.softmax(scores, dim=-1).unsqueeze(-1) * integrated).sum(1)
        return self.maxout(torch.cat([pooled_max, pooled_mean, pooled_min, pooled_self], dim=-1))

    def loss(self, batch: Batch) -> torch.Tensor:
        """Mean cross-entropy per sentence."""
        assert batch.targets is not None
        return F.cross_entropy(self.logits(batch), batch.targets)

    def predict(self, batch: Batch) -> list[str]:
        return [self.labels[i] for i in self.logits(batch).argmax(-1).tolist()]
