"""The attentional English->German translation model whose encoder CoVe reuses (McCann et
al. 2017, section 3; the global attention of Luong et al. 2015 with input feeding, as in
OpenNMT, which CoVe was trained with).

- Encoder: the :class:`~contextvec.encoders.cove.mt_lstm.MTLSTM`, a biLSTM stack over fixed
  word vectors; its top layer H (batch, source, 2 * hidden) is the attention memory.
- Decoder: ``num_layers`` unidirectional LSTM layers of ``2 * hidden`` units (dot attention
  needs the decoder's size to equal the memory's), started from the encoder layers' final
  states (both directions concatenated). Step t reads ``[z_{t-1}; h~_{t-1}]``: the embedding of
  the previous target word and the previous attentional state (input feeding; h~_0 = 0).
- Attention: ``alpha_t = softmax(H h_t)`` over the real source positions, context
  ``c_t = sum alpha_t H``, attentional state ``h~_t = tanh(W [h_t; c_t])`` (no bias, as
  OpenNMT's dot attention), output ``softmax(W_out h~_t + b)``.
- Dropout (0.2 in CoVe) on the encoder layers' inputs, the target embeddings, between decoder
  layers and on h~_t (which is also what is fed to the next step, as in OpenNMT).

Decoding is batched: :meth:`Seq2Seq.greedy` and :meth:`Seq2Seq.beam_search` (beam 1 gives the
greedy output). A hypothesis ends at ``</S>`` or at ``2 * source length + 10`` words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.cove.mt_lstm import MTLSTM, MTLSTMConfig, sequence_mask

MODEL_TYPE = "cove-seq2seq"


@dataclass(frozen=True)
class Seq2SeqConfig:
    """The translation model's shape. The decoder has ``encoder.num_layers`` layers of
    ``encoder.output_dim`` units (see the module docstring)."""

    target_vocab_size: int
    encoder: MTLSTMConfig = field(default_factory=MTLSTMConfig)
    target_dim: int = 300
    dropout: float = 0.2

    def __post_init__(self) -> None:
        if self.target_vocab_size < 4 or self.target_dim < 1 or not 0 <= self.dropout < 1:
            raise ValueError(f"bad seq2seq config: {self}")

    def to_dict(self) -> dict[str, Any]:
        return {"target_vocab_size": self.target_vocab_size, "encoder": self.encoder.to_dict(),
                "target_dim": self.target_dim, "dropout": self.dropout}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Seq2SeqConfig:
        d = dict(d)
        encoder = MTLSTMConfig.from_dict(d.pop("encoder", {}))
        unknown = set(d) - {"target_vocab_size", "target_dim", "dropout"}
        if unknown:
            raise ValueError(f"unknown seq2seq config fields: {sorted(unknown)}")
        return cls(encoder=encoder, **d)


class DecoderState(NamedTuple):
    """``memory`` (batch, source, dim) and its ``mask``; per decoder layer ``(h, c)``; ``feed``:
    the previous attentional state h~ (batch, dim)."""

    memory: torch.Tensor
    mask: torch.Tensor
    lstm: list[tuple[torch.Tensor, torch.Tensor]]
    feed: torch.Tensor

    def select(self, index: torch.Tensor) -> DecoderState:
        """The rows ``index`` of every tensor (beam reordering)."""
        return DecoderState(self.memory[index], self.mask[index],
                            [(h[index], c[index]) for h, c in self.lstm], self.feed[index])


class Seq2Seq(nn.Module):
    """MT-LSTM encoder + attentional LSTM decoder (see the module docstring)."""

    def __init__(self, config: Seq2SeqConfig, source_words: Sequence[str],
                 source_vectors: torch.Tensor | None = None) -> None:
        super().__init__()
        self.config = config
        self.encoder = MTLSTM(config.encoder, source_words, source_vectors)
        dim = config.encoder.output_dim
        self.target_embedding = nn.Embedding(config.target_vocab_size, config.target_dim)
        self.decoder = nn.ModuleList(
            nn.LSTMCell(config.target_dim + dim if k == 0 else dim, dim)
            for k in range(config.encoder.num_layers)
        )
        self.attention_out = nn.Linear(2 * dim, dim, bias=False)
        self.generator = nn.Linear(dim, config.target_vocab_size)

    # ------------------------------------------------------------------ model
    def encode(self, source_ids: torch.Tensor, source_lengths: torch.Tensor) -> DecoderState:
        out = self.encoder(source_ids, source_lengths, dropout=self.config.dropout)
        memory = out.layers[-1]
        mask = sequence_mask(source_lengths, source_ids.shape[1])
        return DecoderState(memory, mask, out.final, memory.new_zeros(memory.shape[0], memory.shape[2]))

    def step(self, state: DecoderState, previous: torch.Tensor) -> tuple[torch.Tensor, DecoderState]:
        """One decoder step from the previous target ids (batch,): ``(h~_t, new state)``."""
        p = self.config.dropout
        embedded = F.dropout(self.target_embedding(previous), p, self.training)
        x = torch.cat([embedded, state.feed], dim=-1)
        new_lstm = []
        for k, (cell, hc) in enumerate(zip(self.decoder, state.lstm, strict=True)):
            if k > 0:
                x = F.dropout(x, p, self.training)
            h, c = cell(x, hc)
            new_lstm.append((h, c))
            x = h
        scores = torch.bmm(state.memory, x.unsqueeze(2)).squeeze(2)
        alpha = scores.masked_fill(~state.mask, float("-inf")).softmax(dim=-1)
        context = torch.bmm(alpha.unsqueeze(1), state.memory).squeeze(1)
        attentional = torch.tanh(self.attention_out(torch.cat([x, context], dim=-1)))
        attentional = F.dropout(attentional, p, self.training)
        return attentional, DecoderState(state.memory, state.mask, new_lstm, attentional)

    def forward(self, source_ids: torch.Tensor, source_lengths: torch.Tensor,
                target_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the decoder reads the reference target, one step per position.

        Args:
            source_ids: ``(batch, source timesteps)`` long source word ids.
            source_lengths: ``(batch,)`` long, the number of real source tokens of each row.
            target_in: ``(batch, target timesteps)`` long, ``<S>`` and the target words, padded
                with any id.

        Returns:
            ``(batch, target timesteps, vocab)`` float logits of the next target word.
        """
        state = self.encode(source_ids, source_lengths)
        outputs = []
        for t in range(target_in.shape[1]):
            attentional, state = self.step(state, target_in[:, t])
            outputs.append(attentional)
        return self.generator(torch.stack(outputs, dim=1))

    # ------------------------------------------------------------------ decoding
    @staticmethod
    def max_lengths(source_lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
        caps = 2 * source_lengths + 10
        return caps.clamp(max=max_len) if max_len is not None else caps

    @torch.no_grad()
    def greedy(self, source_ids: torch.Tensor, source_lengths: torch.Tensor, bos: int, eos: int,
               max_len: int | None = None) -> list[list[int]]:
        """Most probable word at each step; returns the target ids without ``</S>``."""
        state = self.encode(source_ids, source_lengths)
        caps = self.max_lengths(source_lengths, max_len)
        batch = source_ids.shape[0]
        previous = torch.full((batch,), bos, dtype=torch.long, device=source_ids.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=source_ids.device)
        out = []
        for t in range(int(caps.max()) + 1):
            attentional, state = self.step(state, previous)
            logp = self._constrain(self.generator(attentional).log_softmax(dim=-1), t >= caps, eos)
            previous = logp.argmax(dim=-1)
            out.append(previous)
            finished |= previous == eos
            if finished.all():
                break
        return _strip(torch.stack(out, dim=1), eos)

    @torch.no_grad()
    def beam_search(self, source_ids: torch.Tensor, source_lengths: torch.Tensor, bos: int,
                    eos: int, beam: int = 5, length_penalty: float = 0.0,
                    max_len: int | None = None) -> list[list[int]]:
        """Batched beam search; the best hypothesis per sentence, ids without ``</S>``.

        A beam that has produced ``</S>`` stays in its slot with a fixed score (its only
        continuation costs nothing), so the search ends when every beam has finished. The
        final choice maximises ``log p / ((5 + length) / 6) ** length_penalty`` (GNMT's
        normalisation; 0, the default: raw log-probability), length counting ``</S>``.
        """
        if beam < 1:
            raise ValueError(f"beam must be >= 1, not {beam}")
        batch, device = source_ids.shape[0], source_ids.device
        state = self.encode(source_ids, source_lengths)
        rows = torch.arange(batch, device=device).repeat_interleave(beam)
        state = state.select(rows)
        caps = self.max_lengths(source_lengths, max_len)[rows]
        scores = torch.full((batch, beam), float("-inf"), device=device)
        scores[:, 0] = 0.0  # all beams start as the same empty hypothesis: keep one of them
        previous = torch.full((batch * beam,), bos, dtype=torch.long, device=device)
        finished = torch.zeros(batch * beam, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch * beam, dtype=torch.long, device=device)
        history = torch.zeros(batch * beam, 0, dtype=torch.long, device=device)
        offsets = (torch.arange(batch, device=device) * beam).unsqueeze(1)
        for t in range(int(caps.max()) + 1):
            attentional, state = self.step(state, previous)
            logp = self._constrain(self.generator(attentional).log_softmax(dim=-1), t >= caps, eos)
            vocab = logp.shape[1]
            logp[finished] = float("-inf")
            logp[finished, eos] = 0.0
            total = (scores.view(-1, 1) + logp).view(batch, beam * vocab)
            scores, best = total.topk(beam, dim=1)
            origin = (offsets + torch.div(best, vocab, rounding_mode="floor")).view(-1)
            previous = (best % vocab).view(-1)
            state = state.select(origin)
            lengths = lengths[origin] + (~finished[origin]).long()
            finished = finished[origin] | (previous == eos)
            history = torch.cat([history[origin], previous.unsqueeze(1)], dim=1)
            if finished.all():
                break
        final = scores
        if length_penalty:
            final = scores / (((5.0 + lengths.view(batch, beam).float()) / 6.0) ** length_penalty)
        choice = final.argmax(dim=1) + offsets.squeeze(1)
        return _strip(history[choice], eos)

    @staticmethod
    def _constrain(logp: torch.Tensor, at_cap: torch.Tensor, eos: int) -> torch.Tensor:
        """Only ``</S>`` may follow once a hypothesis reaches its length cap."""
        if at_cap.any():
            keep = logp[:, eos].clone()
            logp = logp.masked_fill(at_cap.unsqueeze(1), float("-inf"))
            logp[:, eos] = torch.where(at_cap, keep, logp[:, eos])
        return logp


def _strip(ids: torch.Tensor, eos: int) -> list[list[int]]:
    """Rows of ids cut before their first ``eos``."""
    out = []
    for row in ids.tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out
