"""ELMo's bidirectional language model: char-CNN token layer under forward and backward LSTM stacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
from torch import nn

from contextvec.encoders.bilm.char_cnn import CharCNN
from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.bilm.lstm import ProjectedLSTMLayer
from contextvec.text.chars import BOS_IDS, EOS_IDS


class BiLMOutput(NamedTuple):
    """``layers``: (n_layers + 1, batch, time, 2 * projection_dim); ``mask``: (batch, time) bool."""

    layers: torch.Tensor
    mask: torch.Tensor


class ElmoBiLM(nn.Module):
    """The biLM of Peters et al. (2018) as used for representations (no softmax).

    Layer 0 is the token vector duplicated ``[x; x]``; layer k >= 1 is ``[forward_k; backward_k]``.
    The model adds ``<S>`` and ``</S>`` around every sentence and removes their rows from the
    output. Every sentence starts from the zero state, so its vectors do not depend on the
    other sentences of the batch.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = CharCNN(config)
        p = config.projection_dim
        self.layers = nn.ModuleList(
            ProjectedLSTMLayer(
                config.token_dim if index == 0 else p, config.lstm_dim, p,
                config.cell_clip, config.proj_clip,
                n_directions=2 if config.bidirectional else 1,
                projection=config.lstm_projection,
            )
            for index in range(config.n_layers)
        )
        # A constant, not part of the state: made from numpy, it has its values in a model built
        # on the meta device too (see from_state_dict).
        self.register_buffer(
            "boundary_char_ids", torch.from_numpy(BOS_IDS[None].repeat(2, 0)), persistent=False
        )
        self.boundary_char_ids[1] = torch.from_numpy(EOS_IDS)

    @classmethod
    def from_state_dict(cls, config: BiLMConfig, state_dict: Mapping[str, torch.Tensor]) -> ElmoBiLM:
        """The model of ``config`` holding the tensors of ``state_dict`` (eval mode).

        The model is built without storage (on the meta device) and takes the tensors
        themselves, so no random initial values are drawn only to be overwritten. A tensor
        that is already what ``load_state_dict`` would make of it (the parameter's dtype,
        contiguous, in a storage of its own that torch allocated) becomes the parameter as it
        is; any other is copied into one, so the loaded model is laid out as a copied one.

        Args:
            config: the architecture.
            state_dict: every tensor of the model's state dict, on the CPU.

        Returns:
            The model, its parameters on the CPU.

        Raises:
            RuntimeError: missing or unexpected tensors, or tensors of other shapes than
                ``config`` makes (``load_state_dict``'s message).
        """
        with torch.device("meta"):
            model = cls(config)
        like = model.state_dict()
        state = {name: _owned(tensor, like[name].dtype) if name in like else tensor
                 for name, tensor in state_dict.items()}
        model.load_state_dict(state, assign=True)
        return model.eval()

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Token vectors ``(n, token_dim)`` for character ids ``(n, 50)``.

        Identical rows (repeated words) go through the CNN once.
        """
        unique, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        return self.token_encoder(unique)[inverse]

    def boundary_vectors(self) -> torch.Tensor:
        """Token vectors of ``<S>`` and ``</S>``, shape (2, token_dim)."""
        return self.token_encoder(self.boundary_char_ids)

    def forward(self, char_ids: torch.Tensor) -> BiLMOutput:
        """Every layer of the biLM for a padded batch of sentences.

        Args:
            char_ids: ``(batch, timesteps, 50)`` long character ids; all-zero rows are padding,
                which must follow each sentence's tokens.

        Returns:
            A :class:`BiLMOutput`: ``layers`` ``(n_layers + 1, batch, timesteps, 2 *
            projection_dim)`` float (token layer first) and ``mask`` ``(batch, timesteps)`` bool,
            True at real tokens.
        """
        mask = (char_ids > 0).any(dim=-1)
        dtype = self.token_encoder.char_embedding.weight.dtype
        tokens = torch.zeros(
            *mask.shape, self.config.token_dim, dtype=dtype, device=char_ids.device
        )
        if mask.any():
            tokens[mask] = self.encode_tokens(char_ids[mask])
        return self.contextualize(tokens, mask)

    def contextualize(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        boundaries: torch.Tensor | None = None,
        keep_boundaries: bool = False,
        distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> BiLMOutput:
        """Run the LSTM stacks over token vectors ``(batch, time, projection_dim)``.

        ``mask`` (batch, time) marks real tokens, which must form a prefix of each row.
        ``boundaries`` are the ``<S>``/``</S>`` vectors (computed if omitted). With
        ``keep_boundaries`` the output keeps their rows: time becomes ``time + 2`` and the mask
        covers them. ``distinct``: the batch's distinct token vectors and which one each real
        token is (see :func:`run_bilstm`).
        """
        if not self.config.bidirectional:
            raise ValueError("a forward-only LM has no ELMo representations; train it bidirectional")
        if boundaries is None:
            boundaries = self.boundary_vectors()
        return run_bilstm(
            self.layers, tokens, mask, boundaries, self.config.use_skip_connections, keep_boundaries,
            distinct,
        )


def _owned(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` where it is a contiguous ``dtype`` tensor alone in a storage torch allocated
    (aligned as torch aligns), else a copy that is: a view would keep its whole base alive, and a
    storage borrowed from numpy or a file's reader is aligned (and freed) by someone else."""
    storage = tensor.untyped_storage()
    if (tensor.dtype == dtype and tensor.is_contiguous() and tensor.storage_offset() == 0
            and storage.nbytes() == tensor.numel() * tensor.element_size() and storage.resizable()):
        return tensor
    return tensor.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)


def run_bilstm(
    layers: Sequence[nn.Module],
    tokens: torch.Tensor,
    mask: torch.Tensor,
    boundaries: torch.Tensor,
    skip_connections: bool,
    keep_boundaries: bool = False,
    distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> BiLMOutput:
    """Forward and backward LSTM stacks (``ProjectedLSTMLayer`` modules) over token vectors
    ``(batch, time, dim)`` with ``boundaries`` ``(2, dim)`` (the sentence start and end vectors)
    added around each sentence; see :meth:`ElmoBiLM.contextualize`. With ``skip_connections``
    each layer after the first adds its input to its output.

    ``distinct`` ``(vectors, ids)``: the batch's distinct token vectors ``(n, dim)`` and which
    one each real token is, ``ids`` ``(mask.sum(),)`` long in the row-major order of ``mask``'s
    real positions. Where a batch of several sentences repeats enough tokens (and boundaries) to
    leave out at least an eighth of the first layer's input projections, and that layer's rows
    are costly enough (``ProjectedLSTMLayer.shares_repeated_inputs``), it projects each distinct
    vector once and each step gathers its rows of them: a gathered row costs a small fraction of
    its product, but gathering is an operation of its own, more than a lone sentence's few
    repeats save. The outputs are the same."""
    batch, steps, dim = tokens.shape
    lengths = mask.sum(dim=1) + 2
    positions = torch.arange(steps + 2, device=tokens.device)
    full_mask = positions.view(1, -1) < lengths.view(-1, 1)
    seq = torch.zeros(batch, steps + 2, dim, dtype=tokens.dtype, device=tokens.device)
    seq[:, 0] = boundaries[0]
    seq[:, 1 : steps + 1] = tokens * mask.unsqueeze(-1)
    seq[torch.arange(batch, device=tokens.device), lengths - 1] = boundaries[1]
    where = None
    if (distinct is not None and batch > 1
            and 8 * (len(distinct[0]) + 2) <= 7 * (len(distinct[1]) + 2 * batch)
            and layers[0].shares_repeated_inputs()):
        # Which of ``vectors`` (then <S>, </S>) each position of ``seq`` holds.
        vectors, ids = distinct
        where = torch.full((batch, steps + 2), len(vectors), dtype=torch.long, device=tokens.device)
        where[:, 1 : steps + 1][mask] = ids
        where[torch.arange(batch, device=tokens.device), lengths - 1] = len(vectors) + 1

    # Sort longest first so that each LSTM step only computes the sequences still running;
    # the backward LM reads each sequence reversed within its own length.
    lengths, order = lengths.sort(descending=True)
    seq, full_mask = seq[order], full_mask[order]
    rev = torch.where(full_mask, lengths.view(-1, 1) - 1 - positions.view(1, -1), positions)
    rows = torch.arange(batch, device=tokens.device).view(-1, 1)
    x = torch.stack([seq, seq[rows, rev]])
    first = None
    if where is not None:
        where = where[order]
        first = (torch.cat([vectors, boundaries]).to(seq.dtype), torch.stack([where, where[rows, rev]]))
    outputs = [torch.cat([seq, seq], dim=-1)]
    for index, layer in enumerate(layers):
        out, _ = layer(x, lengths, distinct=first if index == 0 else None)
        if index > 0 and skip_connections:
            out = out + x
        x = out
        outputs.append(torch.cat([out[0], out[1][rows, rev]], dim=-1))
    # Rows past each sequence's end are already 0: the LSTM does not compute them.
    unsort = order.argsort()
    stacked = torch.stack(outputs)[:, unsort]
    if keep_boundaries:
        return BiLMOutput(stacked, full_mask[unsort])
    return BiLMOutput(stacked[:, :, 1 : steps + 1] * mask.unsqueeze(-1), mask)
