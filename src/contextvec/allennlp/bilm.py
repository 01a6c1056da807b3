"""The biLM's layers for character ids, in the structure of allennlp's ``_ElmoBiLm``."""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

from contextvec.allennlp.token_cache import TokenVectorCache
from contextvec.encoders.bilm import ElmoBiLM
from contextvec.text.chars import MAX_CHARS_PER_TOKEN, batch_to_char_ids

logger = logging.getLogger(__name__)


def check_char_ids(inputs: torch.Tensor) -> torch.Tensor:
    """The mask ``(batch, timesteps)`` of real tokens, after checking the ids' shape and layout."""
    if inputs.dim() != 3 or inputs.shape[-1] != MAX_CHARS_PER_TOKEN:
        raise ValueError(
            f"inputs: expected character ids of shape (batch, timesteps, {MAX_CHARS_PER_TOKEN}) "
            f"from batch_to_ids, got {tuple(inputs.shape)}"
        )
    if inputs.dtype.is_floating_point:
        raise TypeError(f"inputs: character ids must be integers, got {inputs.dtype}")
    mask = (inputs > 0).any(dim=-1)
    lengths = mask.sum(dim=1, keepdim=True)
    prefix = torch.arange(mask.shape[1], device=mask.device).view(1, -1) < lengths
    if not torch.equal(mask, prefix):
        row = int((mask != prefix).any(dim=1).nonzero()[0])
        raise ValueError(f"inputs: row {row} has an all-zero (padding) token before a real token")
    return mask


class BiLmActivations(nn.Module):
    """ELMo's layers with the sentence boundaries, as allennlp's ``_ElmoBiLm`` returns them.

    ``forward(inputs, word_inputs=None)`` gives ``{"activations": [layer_0, ..., layer_n],
    "mask": mask}``: each layer ``(batch, timesteps + 2, 2 * projection_dim)`` with ``<S>`` at
    position 0 and ``</S>`` after each sentence's last token, layer 0 the token vectors
    duplicated ``[x; x]``; ``mask`` (bool) covers the tokens and both boundaries. Every sentence
    starts from the zero LSTM state (allennlp carried states from batch to batch).

    ``vocab_to_cache``: words whose CNN vectors are computed once; ``word_inputs`` ``(batch,
    timesteps)`` index that list (0 = padding) and replace the CNN unless some id is out of
    range or gradients must reach the CNN, when the character ids are used.

    Args:
        bilm: the contextvec biLM (an ``ElmoEncoder``'s ``bilm``).
        vocab_to_cache: words whose char-CNN vectors are computed once.

    Attributes:
        bilm: the contextvec biLM.
        num_layers: layers per token (the char-CNN layer and the biLSTM layers).
    """

    def __init__(self, bilm: ElmoBiLM, vocab_to_cache: list[str] | None = None) -> None:
        super().__init__()
        self.bilm = bilm
        self.num_layers = bilm.config.num_output_layers
        self._cache = TokenVectorCache()
        vectors = None
        if vocab_to_cache:
            with torch.no_grad():
                ids = batch_to_char_ids([list(vocab_to_cache)])[0]
                vectors = bilm.encode_tokens(ids.to(bilm.boundary_char_ids.device))
        # Not persistent: a state dict stays the same with or without a cached vocabulary.
        self.register_buffer("_word_vectors", vectors, persistent=False)

    def get_output_dim(self) -> int:
        """Width ``dim`` of each layer: ``2 * projection_dim``."""
        return self.bilm.config.output_dim

    def _cnn_needs_grad(self) -> bool:
        return torch.is_grad_enabled() and any(
            p.requires_grad for p in self.bilm.token_encoder.parameters()
        )

    def _token_vectors(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        rows = inputs[mask]
        if rows.shape[0] == 0:
            vectors = self.bilm.boundary_vectors()[:0]
        elif self._cnn_needs_grad():
            vectors = self.bilm.encode_tokens(rows)
        else:
            with torch.no_grad():
                vectors = self._cache.vectors(self.bilm.token_encoder, rows)
        tokens = vectors.new_zeros(*mask.shape, vectors.shape[-1])
        tokens[mask] = vectors
        return tokens

    def _cached_word_vectors(self, word_inputs: torch.Tensor | None) -> torch.Tensor | None:
        vocab = self._word_vectors
        if word_inputs is None or vocab is None or self._cnn_needs_grad():
            return None
        ids = np.asarray(word_inputs.detach().cpu())
        if ids.size and (ids.min() < 0 or ids.max() >= vocab.shape[0]):
            return None  # a word outside the cached vocabulary: run the CNN, as allennlp does
        return vocab[word_inputs.to(vocab.device)] * (word_inputs > 0).unsqueeze(-1).to(vocab.dtype)

    def forward(
        self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """The layers of one batch, with the sentence boundaries.

        Args:
            inputs: ``(batch, timesteps, 50)`` integer character ids from ``batch_to_ids``.
            word_inputs: optional ``(batch, timesteps)`` integer indices into
                ``vocab_to_cache`` (0 = padding).

        Returns:
            A dict of ``"activations"``, a list of ``num_layers`` float32 tensors
            ``(batch, timesteps + 2, dim)``, and ``"mask"``, ``(batch, timesteps + 2)`` bool.

        Raises:
            ValueError: ids not of shape ``(batch, timesteps, 50)``, or a padding token before
                a real one.
            TypeError: floating-point ids.
        """
        layers, mask = self.layers_and_mask(inputs, word_inputs)
        return {"activations": list(layers.unbind(0)), "mask": mask}

    def layers_and_mask(
        self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """[`forward`][contextvec.allennlp.bilm.BiLmActivations.forward]'s layers, stacked.

        Args:
            inputs: as in ``forward``.
            word_inputs: as in ``forward``.

        Returns:
            The activations ``(num_layers, batch, timesteps + 2, dim)`` float32 and the mask
            ``(batch, timesteps + 2)`` bool.
        """
        tokens = self._cached_word_vectors(word_inputs)
        if tokens is not None:
            mask = (word_inputs > 0).to(tokens.device)
        else:
            mask = check_char_ids(inputs)
            tokens = self._token_vectors(inputs, mask)
        frozen = not any(p.requires_grad for p in self.bilm.parameters())
        # A frozen biLM needs no graph: only the scalar mixes above it learn.
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            output = self.bilm.contextualize(tokens, mask, keep_boundaries=True)
        return output.layers, output.mask
