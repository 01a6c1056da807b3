"""The interface every contextual encoder (ELMo, CoVe, BERT) offers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from contextvec.encoders.outputs import LAYER_MODES, POOL_MODES, pool_tokens, select_layers
from contextvec.text.batching import length_batches
from contextvec.text.tokenize import Sentence, as_sentences


class EncoderOutput(NamedTuple):
    """``layers``: (num_layers, batch, time, dim), zero past each sentence's end;
    ``mask``: (batch, time) bool, True at real tokens."""

    layers: torch.Tensor
    mask: torch.Tensor


class Encoder(nn.Module, ABC):
    """Tokenized sentences in, one vector per token per layer out.

    Subclasses implement :meth:`forward` on a batch of token lists; this class adds the
    user-facing :meth:`embed`, which batches by length, runs without gradients and returns
    numpy arrays in input order.
    """

    num_layers: int
    output_dim: int

    @abstractmethod
    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """Layers and mask for one batch of tokenized sentences."""

    def embed(
        self,
        sentences: Iterable[Sentence],
        batch_size: int = 32,
        max_tokens: int | None = 4096,
        *,
        layers: str = "all",
        pool: str | None = None,
    ) -> list[np.ndarray]:
        """Vectors for each sentence: a float32 array ``(num_layers, n_tokens, dim)``.

        Sentences are strings (split on whitespace) or token lists; an empty sentence gives a
        ``(num_layers, 0, dim)`` array. Order and count follow the input. A bare string is a
        ``TypeError`` (pass ``[text]`` for one sentence).

        ``layers``: ``"all"`` (default), ``"top"`` (tokens, dim) or ``"average"`` (tokens, dim),
        as ``contextvec embed --all/--top/--average`` writes them. ``pool``: ``"mean"``, ``"max"``
        or ``"first"`` for one vector per sentence (per layer with ``"all"``); a sentence without
        tokens pools to zeros.
        """
        tokenized = as_sentences(sentences)
        if layers not in LAYER_MODES:
            raise ValueError(f"layers must be one of {', '.join(LAYER_MODES)}, not {layers!r}")
        if pool is not None and pool not in POOL_MODES:
            raise ValueError(f"pool must be one of {', '.join(POOL_MODES)} or None, not {pool!r}")
        out: list[np.ndarray] = [np.empty(0)] * len(tokenized)
        for index, array in self.embed_batches(tokenized, batch_size, max_tokens):
            array = select_layers(array, layers)
            out[index] = array if pool is None else pool_tokens(array, pool)
        return out

    def clear_caches(self) -> None:
        """Forget cached intermediate results (ELMo's char-CNN token vectors).

        A cached vector was computed in an earlier batch, whose shape can change its last bits
        (about 1e-6); clearing first makes a chunk's output depend on the chunk alone, whichever
        chunks ran before it (the local and Ray engines call it before every chunk).
        """

    def embed_batches(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int = 32,
        max_tokens: int | None = 4096,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index, array)`` for each sentence, batch by batch in length order.

        Safe to call from several threads at once on an encoder in eval mode (the default after
        ``contextvec.load``): the mode is switched, and restored, only when it is in train mode.
        """
        # Eval mode for this call only, restored module by module: a wrapped model shared with
        # another encoder keeps its own mode, and an encoder already in eval mode (the server's)
        # is never switched, so threads can share it.
        modes = {module: module.training for module in self.modules()}
        switched = any(modes.values())
        if switched:
            self.eval()
        try:
            with torch.inference_mode():
                empty = np.zeros((self.num_layers, 0, self.output_dim), dtype=np.float32)
                nonempty = [i for i, s in enumerate(sentences) if s]
                for i in range(len(sentences)):
                    if not sentences[i]:
                        yield i, empty.copy()
                lengths = [len(sentences[i]) for i in nonempty]
                for batch in length_batches(lengths, batch_size, max_tokens):
                    indices = [nonempty[b] for b in batch]
                    layers, _ = self([sentences[i] for i in indices])
                    layers = layers.float().cpu().numpy()
                    for row, i in enumerate(indices):
                        yield i, np.ascontiguousarray(layers[:, row, : len(sentences[i])])
        finally:
            if switched:  # (restoring what never changed cost 2% of a lone sentence's time)
                for module, mode in modes.items():
                    module.training = mode
