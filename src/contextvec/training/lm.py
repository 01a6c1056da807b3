"""The biLM with its training head: shared token layer and softmax, separate LSTM stacks."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.text.chars import BOS_IDS, BOS_TOKEN, EOS_IDS, EOS_TOKEN, token_to_char_ids
from contextvec.training.batcher import Window

LSTMState = list[tuple[torch.Tensor, torch.Tensor]]


def log_uniform_log_prob(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """log P(id) under the Zipfian sampler of TF/bilm-tf: P(k) = log((k+2)/(k+1)) / log(V+1)."""
    ids = ids.double()
    return (torch.log1p(1.0 / (ids + 1.0)) / math.log(vocab_size + 1)).log().float()


def sample_log_uniform(n: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` ids drawn with replacement from the log-uniform distribution over ``[0, vocab_size)``."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    return (torch.exp(u * math.log(vocab_size + 1)) - 1).long().clamp_(0, vocab_size - 1)


def _char_ids(token: str) -> np.ndarray:
    # Sentence boundaries get the special characters the encoder adds at inference.
    if token == BOS_TOKEN:
        return BOS_IDS
    if token == EOS_TOKEN:
        return EOS_IDS
    return token_to_char_ids(token)


class LanguageModel(nn.Module):
    """:class:`ElmoBiLM` + dropout + a softmax shared by the forward and backward LMs.

    ``forward`` scores one :class:`Window` and returns the summed NLL and the number of scored
    targets per direction, plus the LSTM states to carry into the next window.
    """

    def __init__(
        self, config: BiLMConfig, vocab_size: int, dropout: float = 0.0, token_dropout: bool = True
    ) -> None:
        super().__init__()
        self.bilm = ElmoBiLM(config)
        self.softmax = nn.Linear(config.projection_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)
        self.token_dropout = token_dropout

    @property
    def config(self) -> BiLMConfig:
        return self.bilm.config

    def forward(
        self,
        window: Window,
        state: LSTMState | None = None,
        negatives: int = 0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, LSTMState]:
        """NLL sums (directions,), target counts (directions,), next state.

        ``negatives`` > 0 uses sampled softmax with that many log-uniform negatives shared by
        the batch (drawn from ``generator``); 0 uses the full softmax.
        """
        device = self.softmax.weight.device
        vocab: dict[str, int] = {}
        index = torch.tensor(
            [[[vocab.setdefault(w, len(vocab)) if w is not None else -1 for w in row]
              for row in direction] for direction in window.tokens],
            dtype=torch.long,
        ).to(device)
        char_ids = torch.from_numpy(np.stack([_char_ids(w) for w in vocab])).to(device)
        vectors = self.bilm.token_encoder(char_ids)
        x = vectors[index.clamp(min=0)] * (index >= 0).unsqueeze(-1)  # (dirs, rows, steps, P)
        lengths = torch.full((x.shape[1],), x.shape[2], dtype=torch.long)
        new_state: LSTMState = []
        for i, layer in enumerate(self.bilm.layers):
            inputs = x if i == 0 and not self.token_dropout else self.dropout(x)
            out, layer_state = layer(inputs, lengths, None if state is None else state[i])
            if i > 0 and self.config.use_skip_connections:
                out = out + x
            x = out
            new_state.append(layer_state)
        mask = window.mask.to(device)
        hidden = self.dropout(x)[mask]  # (n, P)
        targets = window.targets.to(device)[mask]
        direction = torch.arange(mask.shape[0], device=device).view(-1, 1, 1).expand_as(mask)[mask]
        if negatives > 0:
            nll = self._sampled_nll(hidden, targets, negatives, generator)
        else:
            nll = F.cross_entropy(self.softmax(hidden), targets, reduction="none")
        sums = torch.zeros(mask.shape[0], device=device).index_add(0, direction, nll)
        counts = mask.sum(dim=(1, 2))
        return sums, counts, new_state

    def _sampled_nll(
        self, hidden: torch.Tensor, targets: torch.Tensor, n: int, generator: torch.Generator | None
    ) -> torch.Tensor:
        if generator is None:
            raise ValueError("sampled softmax needs a generator")
        vocab_size = self.softmax.out_features
        samples = sample_log_uniform(n, vocab_size, generator).to(hidden.device)
        weight, bias = self.softmax.weight, self.softmax.bias
        # Logits corrected by the log expected count of each class in the sample.
        log_count = math.log(n)
        true = (hidden * weight[targets]).sum(-1) + bias[targets]
        true = true - log_uniform_log_prob(targets, vocab_size) - log_count
        sampled = hidden @ weight[samples].T + bias[samples]
        sampled = sampled - log_uniform_log_prob(samples, vocab_size) - log_count
        sampled = sampled.masked_fill(samples.view(1, -1) == targets.view(-1, 1), float("-inf"))
        logits = torch.cat([true.unsqueeze(1), sampled], dim=1)
        return -torch.log_softmax(logits, dim=1)[:, 0]
