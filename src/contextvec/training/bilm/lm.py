"""The biLM with its training head: shared token layer and softmax, separate LSTM stacks."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.text.chars import token_to_char_ids
from contextvec.training.bilm.batcher import Window

LSTMState = list[tuple[torch.Tensor, torch.Tensor]]


def log_uniform_log_prob(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """log P(id) under the Zipfian sampler of TF/bilm-tf: P(k) = log((k+2)/(k+1)) / log(V+1)."""
    ids = ids.double()
    return (torch.log1p(1.0 / (ids + 1.0)) / math.log(vocab_size + 1)).log().float()


def sample_log_uniform(n: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` ids drawn with replacement from the log-uniform distribution over ``[0, vocab_size)``."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    return (torch.exp(u * math.log(vocab_size + 1)) - 1).long().clamp_(0, vocab_size - 1)


class ChunkedSoftmaxNLL(torch.autograd.Function):
    """Full-softmax NLL computed over blocks of rows, never holding the (n, V) logits.

    Autograd's ``cross_entropy(linear(h))`` keeps the logits, their log-softmax and their
    gradient: three (n, V) tensors (1.3 GB for 2,560 targets over 50,000 words) streamed
    through memory several times. Here each block's logits are recomputed in the backward
    pass and turned into the gradient while still in cache: one more matmul, far less traffic.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
        targets: torch.Tensor, block: int,
    ) -> torch.Tensor:
        """Each row's NLL of its target, a block of rows' logits at a time.

        Args:
            ctx: autograd's context, which keeps what the backward pass needs.
            hidden: ``(n, dim)`` float, the softmax inputs.
            weight: ``(vocab, dim)`` float, the softmax weights.
            bias: ``(vocab,)`` float, the softmax bias.
            targets: ``(n,)`` long target ids.
            block: how many rows' logits to hold at once.

        Returns:
            ``(n,)`` float, ``logsumexp(logits) - logits[target]`` of each row.
        """
        lse = hidden.new_empty(hidden.shape[0])
        picked = (hidden * weight[targets]).sum(-1) + bias[targets]
        for s in range(0, hidden.shape[0], block):
            lse[s:s + block] = torch.logsumexp(torch.addmm(bias, hidden[s:s + block], weight.T), 1)
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.block = block
        return lse - picked

    @staticmethod
    def backward(ctx, grad_nll: torch.Tensor):  # type: ignore[override]
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight)
        grad_bias = torch.zeros_like(bias)
        rows = torch.arange(ctx.block, device=hidden.device)
        for s in range(0, hidden.shape[0], ctx.block):
            h, g = hidden[s:s + ctx.block], grad_nll[s:s + ctx.block]
            # d nll / d logits = softmax - onehot(target), scaled by the incoming gradient.
            p = torch.addmm(bias, h, weight.T).sub_(lse[s:s + ctx.block, None]).exp_()
            p[rows[: len(h)], targets[s:s + ctx.block]] -= 1.0
            p.mul_(g[:, None])
            torch.mm(p, weight, out=grad_hidden[s:s + ctx.block])
            grad_weight.addmm_(p.T, h)
            grad_bias += p.sum(0)
        return grad_hidden, grad_weight, grad_bias, None, None


def softmax_nll(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Per-row NLL of ``targets`` under ``softmax(hidden @ weight.T + bias)`` (exact).

    Logits of up to 64M entries (256 MB) go through autograd's fused ``cross_entropy``, the
    faster choice there (Kim-small on PTB: 700 x 10,002); larger ones through blocks of ~8M,
    faster and lighter for a large vocabulary (the bundled run's 2,560 x 50,000), without which
    bilm-tf's 793k-word vocabulary would need 16 GB per window. See
    ``benchmarks/softmax_speed.py``.
    """
    if hidden.shape[0] * weight.shape[0] <= 1 << 26:
        return F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="none")
    block = max(1, (1 << 23) // weight.shape[0])
    return ChunkedSoftmaxNLL.apply(hidden, weight, bias, targets, block)


class LockableDropout(nn.Dropout):
    """Dropout on (directions, rows, steps, dim) activations; ``locked`` draws one mask per row
    and shares it across the steps of the window (Gal & Ghahramani's variational dropout), as
    AWD-LSTM does between its layers."""

    def __init__(self, p: float = 0.0, locked: bool = False) -> None:
        super().__init__(p)
        self.locked = locked

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Dropout, with one mask per row shared by its steps when ``locked``.

        Args:
            x: ``(directions, rows, steps, dim)`` float activations.

        Returns:
            ``(directions, rows, steps, dim)``, dropped out and rescaled in training, ``x`` itself
            otherwise.
        """
        if not (self.locked and self.training and self.p > 0):
            return super().forward(x)
        keep = x.new_empty(x.shape[:-2] + (1, x.shape[-1])).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class LanguageModel(nn.Module):
    """:class:`ElmoBiLM` + dropout + a softmax shared by the forward and backward LMs.

    ``forward`` scores one :class:`Window` and returns the summed NLL and the number of scored
    targets per direction, plus the LSTM states to carry into the next window. Regularization
    in training: ``dropout`` on every LSTM input (the token layer's only with
    ``token_dropout``) and on the softmax input, one mask per window row with
    ``locked_dropout``; ``weight_drop`` on the LSTMs' recurrent weights
    (:class:`~contextvec.encoders.bilm.lstm.ProjectedLSTMLayer`).
    """

    def __init__(
        self, config: BiLMConfig, vocab_size: int, dropout: float = 0.0, token_dropout: bool = True,
        locked_dropout: bool = False, weight_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.bilm = ElmoBiLM(config)
        self.softmax = nn.Linear(config.projection_dim, vocab_size)
        self.dropout = LockableDropout(dropout, locked_dropout)
        self.token_dropout = token_dropout
        self.set_weight_drop(weight_drop)

    def set_weight_drop(self, p: float) -> None:
        """Drop this fraction of every LSTM's recurrent weights in training (0: off)."""
        for layer in self.bilm.layers:
            layer.state_weight_dropout = p

    @property
    def config(self) -> BiLMConfig:
        return self.bilm.config

    def forward(
        self,
        window: Window,
        state: LSTMState | None = None,
        negatives: int = 0,
        generator: torch.Generator | None = None,
        bf16: str = "off",
    ) -> tuple[torch.Tensor, torch.Tensor, LSTMState]:
        """Score one window of both directions' next-token targets.

        Args:
            window: the tokens and ``(directions, rows, unroll)`` targets and mask of one step.
            state: per LSTM layer, the ``(h, c)`` carried from the previous window, each
                ``(directions, rows, dim)``; zeros if omitted.
            negatives: > 0 uses sampled softmax with that many log-uniform negatives shared by the
                batch (drawn from ``generator``); 0 uses the full softmax.
            generator: the random source of the negatives.
            bf16: autocasts the ``"softmax"`` or ``"all"`` of the pass to bfloat16 (``"off"``:
                float32 throughout).

        Returns:
            NLL sums ``(directions,)`` float, target counts ``(directions,)`` long, and the next
            state, float32 whatever the autocast made of it.
        """
        device = self.softmax.weight.device
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16 == "all"):
            hidden, targets, direction, mask, new_state = self._contextualize(window, state)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16 != "off"):
                if negatives > 0:
                    nll = self._sampled_nll(hidden, targets, negatives, generator)
                else:
                    nll = softmax_nll(hidden, self.softmax.weight, self.softmax.bias, targets)
        sums = torch.zeros(mask.shape[0], device=device).index_add(0, direction, nll.float())
        counts = mask.sum(dim=(1, 2))
        # Carried to the next window in float32 whatever the autocast made of it.
        return sums, counts, [(h.float(), c.float()) for h, c in new_state]

    def _contextualize(
        self, window: Window, state: LSTMState | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, LSTMState]:
        """The softmax inputs of the window's scored positions (n, P), their targets (n,) and
        directions (n,), the target mask (directions, rows, steps) and the LSTM states."""
        device = self.softmax.weight.device
        vocab: dict[str, int] = {}
        index = torch.tensor(
            [[[vocab.setdefault(w, len(vocab)) if w is not None else -1 for w in row]
              for row in direction] for direction in window.tokens],
            dtype=torch.long,
        ).to(device)
        char_ids = torch.from_numpy(np.stack([token_to_char_ids(w) for w in vocab])).to(device)
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
        return hidden, targets, direction, mask, new_state

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
