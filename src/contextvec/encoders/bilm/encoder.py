"""ELMo behind contextvec's common [`Encoder`][contextvec.encoders.base.Encoder] interface."""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.bilm.document import embed_document
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.encoders.torch_private import weights_key
from contextvec.text.chars import token_to_char_ids


class TokenVectorEncoder(Encoder):
    """A biLM over context-free token vectors that depend on each token's own string alone
    (ELMo's char-CNN; ELMoForManyLangs' word embedding + char-CNN): the shared forward pass and
    token vector cache of :class:`ElmoEncoder` and its kin.

    ``bilm`` offers ``token_encoder`` (the module whose weights the token vectors depend on),
    ``boundary_vectors()``, ``layers`` (its ``ProjectedLSTMLayer`` modules) and ``contextualize(tokens,
    mask, boundaries, distinct=...)``; a subclass gives :meth:`_token_vectors` and
    :attr:`skip_connections`. Without gradients the token vectors of recent tokens are kept in an
    LRU cache (``token_cache_size`` entries); any change to the token encoder's weights (an
    optimizer step, ``load_state_dict``) empties it. With gradients every batch runs the token
    encoder once per distinct token, so the encoder can be fine-tuned.
    """

    def __init__(self, bilm: nn.Module, token_cache_size: int = 50_000) -> None:
        super().__init__()
        self.bilm = bilm
        self.num_layers = bilm.config.num_output_layers
        self.output_dim = bilm.config.output_dim
        self.token_cache_size = token_cache_size
        self._cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._cache_key: tuple = ()
        # The sentence boundaries through the token encoder, kept with the token cache (a full
        # pass over the highway weights for two rows, a visible share of a lone sentence's time).
        self._boundaries: torch.Tensor | None = None

    @property
    def config(self):
        return self.bilm.config

    @abstractmethod
    def _token_vectors(self, words: list[str]) -> torch.Tensor:
        """Context-free vectors ``(len(words), dim)`` of distinct tokens (gradients flow)."""

    @property
    @abstractmethod
    def skip_connections(self) -> bool:
        """Whether each biLSTM layer after the first adds its input to its output."""

    def embed_document(
        self, sentences: Sequence[Sequence[str]], pass_tokens: int = 4096
    ) -> Iterator[np.ndarray]:
        """One document's sentences with document context: ``<S> s1 </S> <S> s2 </S> ...`` read
        as one sequence, the LSTM states carried across sentences, so the forward half of
        sentence k's biLSTM layers depends on sentences 1..k, the backward half on k..n, and
        layer 0 on the token alone; the same bit for bit whatever ``pass_tokens``
        (:mod:`contextvec.encoders.bilm.document` says how).

        Args:
            sentences: the document's strings or token lists, in order (empty ones allowed).
            pass_tokens: steps (tokens and sentence boundaries) per pass, rounded up to a multiple of
                :data:`~contextvec.encoders.bilm.document.BLOCK`; a longer document spills each
                pass to a temporary file.

        Returns:
            An iterator of each sentence's float32 ``(num_layers, tokens, output_dim)`` array,
            in document order.

        Raises:
            TypeError: a bare string instead of a list of sentences.
            ValueError: ``pass_tokens`` not a positive integer.
        """
        return embed_document(self, self._token_vectors, self.skip_connections, sentences, pass_tokens)

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """The biLM's layers of one batch.

        Args:
            sentences: ``batch`` token lists.

        Returns:
            ``layers`` ``(num_layers, batch, time, 2 * projection_dim)`` float32 (layer 0 the
            token vector ``[x; x]``, then each biLSTM layer's ``[forward; backward]`` outputs;
            zero past each sentence's end) and ``mask`` ``(batch, time)`` bool.
        """
        device = next(self.bilm.token_encoder.parameters()).device
        lengths = [len(s) for s in sentences]
        width = max(lengths, default=0)
        mask = torch.arange(width).view(1, -1) < torch.tensor(lengths).view(-1, 1)
        # Distinct tokens of the batch, and where each position points among them.
        vocab: dict[str, int] = {}
        positions = torch.tensor(
            [vocab.setdefault(tok, len(vocab)) for s in sentences for tok in s], dtype=torch.long
        )
        words = list(vocab)
        caching = self.token_cache_size > 0 and not torch.is_grad_enabled()
        if caching:
            self._check_cache()
        vectors = self._cached_vectors(words) if caching else self._token_vectors(words)
        tokens = vectors.new_zeros(len(sentences), width, vectors.shape[-1])
        tokens[mask.to(device)] = vectors[positions.to(device)]
        boundaries = self._cached_boundaries() if caching else None
        layers, mask = self.bilm.contextualize(tokens, mask.to(device), boundaries,
                                               distinct=(vectors, positions.to(device)))
        return EncoderOutput(layers, mask)

    def clear_caches(self) -> None:
        """Forget the cached token vectors (see
        [`Encoder.clear_caches`][contextvec.encoders.base.Encoder.clear_caches])."""
        self._cache.clear()
        self._boundaries = None

    def _check_cache(self) -> None:
        """Empty the caches if the CNN's weights changed since they were filled."""
        key = weights_key(self.bilm.token_encoder.parameters())
        if key != self._cache_key:
            self.clear_caches()
            self._cache_key = key

    # Both below assume _check_cache() ran first in this forward.
    def _cached_boundaries(self) -> torch.Tensor:
        if self._boundaries is None:
            self._boundaries = self.bilm.boundary_vectors()
        return self._boundaries

    def _cached_vectors(self, words: list[str]) -> torch.Tensor:
        cache = self._cache
        missing = [w for w in words if w not in cache]
        if missing:
            for word, vector in zip(missing, self._token_vectors(missing), strict=True):
                cache[word] = vector
        for word in words:
            cache.move_to_end(word)
        rows = [cache[w] for w in words]
        while len(cache) > self.token_cache_size:
            cache.popitem(last=False)
        return torch.stack(rows) if rows else self._token_vectors([])


class ElmoEncoder(TokenVectorEncoder):
    """Token lists -> ELMo's 3 layers (token layer ``[x; x]``, then each biLSTM layer).

    Without gradients the char-CNN vectors of recent tokens are kept in an LRU cache
    (``token_cache_size`` entries); any change to the CNN weights (an optimizer step,
    ``load_state_dict``) empties it. With gradients every batch runs the CNN once per distinct
    token, so the encoder can be fine-tuned.
    """

    token_layer, upper_layers, token_layer_context_free = "char-CNN", "biLSTM", True

    def __init__(self, bilm: ElmoBiLM, token_cache_size: int = 50_000) -> None:
        super().__init__(bilm, token_cache_size)

    @property
    def skip_connections(self) -> bool:
        return self.config.use_skip_connections

    def embed_document(
        self, sentences: Sequence[Sequence[str]], pass_tokens: int = 4096
    ) -> Iterator[np.ndarray]:
        """:meth:`TokenVectorEncoder.embed_document`; a forward-only LM is refused (``ValueError``),
        as its ``forward`` refuses it: it has no backward half to give."""
        if not self.config.bidirectional:
            raise ValueError("a forward-only LM has no ELMo representations; train it bidirectional")
        return super().embed_document(sentences, pass_tokens)

    def _token_vectors(self, words: list[str]) -> torch.Tensor:
        cnn = self.bilm.token_encoder
        if not words:
            return cnn.char_embedding.weight.new_zeros(0, self.config.projection_dim)
        ids = np.stack([token_to_char_ids(w) for w in words])
        return cnn(torch.from_numpy(ids).to(cnn.char_embedding.weight.device))

