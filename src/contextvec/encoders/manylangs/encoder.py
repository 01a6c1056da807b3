"""An ELMoForManyLangs model behind contextvec's common
[`Encoder`][contextvec.encoders.base.Encoder] interface."""

from __future__ import annotations

import hashlib
import json

import torch

from contextvec.encoders.bilm.encoder import TokenVectorEncoder
from contextvec.encoders.manylangs.model import ManyLangsBiLM


class ManyLangsEncoder(TokenVectorEncoder):
    """Token lists -> an ELMoForManyLangs model's layers (token layer ``[x; x]``, then each
    biLSTM layer), as its ``Embedder.sents2elmo(output_layer=-2)`` gives them from fresh
    states; ``embed(layers="average")`` is its default ``output_layer=-1``.

    Unlike the original, which carries the LSTM states over from batch to batch, every sentence
    starts from the zero state, so its vectors do not depend on the others. Recent tokens' vectors
    are cached as :class:`~contextvec.encoders.bilm.ElmoEncoder` caches its char-CNN's.
    """

    token_layer, upper_layers, token_layer_context_free = "word + char-CNN", "biLSTM", True
    skip_connections = True
    """Every biLSTM layer after the first adds its input to its output (the original's)."""

    def __init__(self, bilm: ManyLangsBiLM, token_cache_size: int = 50_000) -> None:
        super().__init__(bilm, token_cache_size)
        # The dictionaries change the vectors but are not in the state dict: part of the model's
        # fingerprint through this attribute.
        vocabulary = json.dumps(bilm.vocabulary.to_dict(), sort_keys=True, ensure_ascii=False)
        self.vocabulary_sha256 = hashlib.sha256(vocabulary.encode()).hexdigest()

    def _token_vectors(self, words: list[str]) -> torch.Tensor:
        return self.bilm.embed_words(words)
