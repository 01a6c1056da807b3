"""The character-CNN token encoder of ELMo: characters -> one context-independent vector per token."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.precision import Int8Role, Pack, PackedFloatWeights, run_linear
from contextvec.text.chars import PAD_CHAR

_PAD_ID = PAD_CHAR + 1  # in-word padding at inference (0 is a padded token)


class Highway(nn.Module):
    """Highway layers in bilm-tf's form: ``y = g * relu(T x) + (1 - g) * x``, ``g = sigmoid(C x)``.

    ``transform`` and ``gate`` hold bilm-tf's ``W_transform`` and ``W_carry`` (the "carry"
    gate of bilm-tf gates the *transform*, so no sign flip is needed, unlike allennlp's form).
    """

    def __init__(self, dim: int, n_layers: int) -> None:
        super().__init__()
        self.transform = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.gate = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        for gate in self.gate:
            # bilm-tf's training init (b_carry = -2): the gate starts mostly closed, so a new
            # layer first passes its input through. Loaded weights replace it.
            nn.init.constant_(gate.bias, -2.0)
        self._onednn = PackedFloatWeights()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply every highway layer in turn.

        Args:
            x: ``(tokens, dim)`` float, the pooled filter outputs (``dim`` = ``n_filters``).

        Returns:
            ``(tokens, dim)`` float.
        """
        for k, (transform, gate) in enumerate(zip(self.transform, self.gate, strict=True)):
            g = torch.sigmoid(run_linear(self._onednn, f"gate.{k}", gate, x))
            x = x + g * (torch.relu(run_linear(self._onednn, f"transform.{k}", transform, x)) - x)
        return x


class CharCNN(nn.Module):
    """Token vectors from character ids: embed, convolve, max-pool, activate, highway, project.

    Input ``(n_tokens, 50)`` character ids (0 = padding row, all-zero rows are padded tokens);
    output ``(n_tokens, config.token_dim)``. Each filter width has its own convolution; the
    activation follows the max over positions, as in bilm-tf.

    A model with a character dictionary of its own (ELMoForManyLangs) gives its table size
    ``n_characters``, its in-word ``padding_id`` (0 is then a character like any other) and
    ``project=False``: its projection also reads word embeddings, outside this module.
    """

    int8_role = Int8Role.KEPT
    """``precision="int8"`` leaves this module in bf16 (or fp32): the LSTMs amplify its rounding
    more than any other matrix's, and it runs once per distinct token, not once per step."""
    min_group = 64
    """Tokens per length group at least (see ``forward``): fewer would cost more in calls than
    the shorter groups save."""
    max_groups = 8
    """Length groups at most: past a few, the groups' longest tokens differ little."""

    def __init__(
        self, config: BiLMConfig, *, n_characters: int = 262, padding_id: int | None = None,
        project: bool = True,
    ) -> None:
        super().__init__()
        # Ids of characters that fill a token after its end marker (bilm-tf: 0 and in-word padding).
        self._blank_ids = (0, _PAD_ID) if padding_id is None else (padding_id,)
        self.char_embedding = nn.Embedding(
            n_characters, config.char_embed_dim, padding_idx=0 if padding_id is None else padding_id
        )
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embed_dim, n_maps, width) for width, n_maps in config.filters
        )
        self.activation = torch.relu if config.activation == "relu" else torch.tanh
        self.max_width = max(w for w, _ in config.filters)
        self.highway = Highway(config.n_filters, config.n_highway)
        # bilm-tf omits the projection when the filters already have the projection's width.
        self.projection: nn.Module = (
            nn.Linear(config.n_filters, config.projection_dim)
            if project and config.token_dim != config.n_filters
            else nn.Identity()
        )
        # Lower-precision filters, one per convolution (see pack_weights); None runs the float ones.
        self.packed_filters: nn.ModuleList | None = None
        self._onednn = PackedFloatWeights()

    def pack_weights(self, pack: Pack) -> None:
        """Replace the convolution filters by ``pack(filters)`` (flattened to (maps, dim * width))
        for lower-precision inference; the biases stay float. (Highway and projection are
        ``nn.Linear`` layers, converted by :func:`contextvec.encoders.precision.apply_precision`.)"""
        self.packed_filters = nn.ModuleList(pack(conv.weight.flatten(1)) for conv in self.convolutions)
        for conv in self.convolutions:
            conv.weight = None

    def _used_lengths(self, char_ids: torch.Tensor) -> torch.Tensor:
        """``(tokens,)``: per token, the columns up to its last character that is not padding."""
        used = torch.ones_like(char_ids, dtype=torch.bool)
        for blank in self._blank_ids:
            used &= char_ids != blank
        columns = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
        return (used * columns).amax(dim=1)

    def _width(self, used: int, columns: int) -> int:
        """The columns to keep of tokens whose longest uses ``used`` columns, without changing
        any output: every window that lies wholly in the padding scores the same, so keeping
        one such window per width (``max_width`` padding columns) keeps every maximum."""
        return min(used + self.max_width, columns)

    def _trim(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Drop the padding columns that no token of the batch needs (most tokens are far
        shorter than 50 characters, so this cuts the convolutions' work by half or more)."""
        used = int(lengths.max()) if lengths.numel() else 0
        return char_ids[:, : self._width(used, char_ids.shape[1])]

    def _length_groups(self, lengths: torch.Tensor, columns: int) -> list[tuple[torch.Tensor, int]]:
        """``(token indices, columns to keep)`` per group of tokens of similar length, shortest
        first: ``min_group`` tokens or more per group, at most ``max_groups`` groups; empty when
        the tokens make one group."""
        n = lengths.shape[0]
        groups = min(self.max_groups, n // self.min_group)
        if groups < 2:
            return []
        order = torch.argsort(lengths, stable=True)
        bounds = [n * g // groups for g in range(groups + 1)]
        return [(order[a:b], self._width(int(lengths[order[b - 1]]), columns))
                for a, b in itertools.pairwise(bounds)]

    def _pooled(self, chars: torch.Tensor) -> torch.Tensor:
        """``chars (tokens, columns, char_dim)`` -> ``(tokens, n_filters)``: each width's
        filters, max over positions, plus the bias (before the activation)."""
        pooled = []
        packed = self.packed_filters or [None] * len(self.convolutions)
        for conv, filters in zip(self.convolutions, packed, strict=True):
            # The convolution as one matmul over unfolded windows: faster than conv1d on CPU
            # for these narrow inputs. The bias is added after the max, which gives the same
            # maximum.
            windows = chars.unfold(1, conv.kernel_size[0], 1).flatten(2)  # (n, positions, dim*w)
            # (Not on oneDNN's packed weights: the windows' row counts (tokens x positions) vary
            # most from call to call, and oneDNN keeps memory per row count it has seen.)
            scores = windows @ conv.weight.flatten(1).T if filters is None else filters(windows)
            pooled.append(scores.amax(dim=1) + conv.bias)
        return torch.cat(pooled, dim=-1)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """One context-independent vector per token.

        Tokens of similar length are convolved together, each group over its own longest's
        columns only (:meth:`_length_groups`): the same windows' maxima as over the batch's
        longest, for a fraction of the work when lengths differ.

        Args:
            char_ids: ``(tokens, characters)`` long character ids (``characters`` is 50 for
                bilm-tf's models), each row a token between its begin and end markers.

        Returns:
            ``(tokens, token_dim)`` float (``(tokens, n_filters)`` with ``project=False``).
        """
        lengths = self._used_lengths(char_ids)
        chars = self.char_embedding(self._trim(char_ids, lengths))  # (n, <= 50, dim)
        groups = self._length_groups(lengths, chars.shape[1])
        if not groups:
            pooled = self._pooled(chars)
        else:
            pooled = chars.new_empty(chars.shape[0], sum(conv.out_channels for conv in self.convolutions))
            for index, width in groups:
                pooled[index] = self._pooled(chars[index, :width])
        features = self.activation(pooled)
        return run_linear(self._onednn, "projection", self.projection, self.highway(features))
