"""What the spaCy component and the listener share: their settings, the encoder they load and
how a batch of docs becomes vectors.

A doc is one sequence for the encoder and its spaCy tokens are the words: ELMo and CoVe give one
vector per token exactly; a BERT model pools each token's word pieces into its vector (the
encoder's ``subword_pooling``, its first piece by default), and a token without pieces (spaCy's
whitespace tokens) reads BERT's ``[UNK]`` piece.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from spacy.tokens import Doc

from contextvec.api import load
from contextvec.encoders.base import Encoder
from contextvec.encoders.outputs import LAYER_MODES, Layers, as_layers, select_layers
from contextvec.encoders.precision import Precision, as_precision

Mix = tuple[float, ...]
"""Fixed weights, one per layer: the vectors are ``sum_k weight_k * layer_k``."""


@dataclass(frozen=True)
class VectorSettings:
    """Which model and which of its layers, and how to batch (the component's config keys).

    Attributes:
        model: a contextvec model name or directory (as ``contextvec.load`` takes it).
        layers: ``"all"`` (every layer, concatenated per token: ``num_layers * dim`` wide),
            ``"top"``, ``"average"``, or a fixed mix: one weight per layer (any sequence; kept
            as a tuple).
        batch_size: sentences per forward pass.
        max_tokens: padded tokens per forward pass; None for no limit.
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"`` (``contextvec.load``'s).
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises:
        ValueError: an unknown ``layers`` spelling, a mix that is empty or holds a value that is
            not a finite number, a ``batch_size`` or ``max_tokens`` below 1, an unknown
            ``precision``.
    """

    model: str
    layers: Layers | Mix = Layers.AVERAGE
    batch_size: int = 32
    max_tokens: int | None = 4096
    precision: Precision = Precision.FP32
    device: str = "cpu"

    def __post_init__(self) -> None:
        if isinstance(self.layers, str):
            object.__setattr__(self, "layers", as_layers(self.layers))
        else:
            weights = tuple(self.layers)
            if not weights or not all(_finite(w) for w in weights):
                raise ValueError(f"layers must be one of {', '.join(LAYER_MODES)} or a list of finite "
                                 f"weights, one per layer, not {list(weights)!r}")
            object.__setattr__(self, "layers", tuple(float(w) for w in weights))
        for name, value, none_too in (("batch_size", self.batch_size, False),
                                      ("max_tokens", self.max_tokens, True)):
            if none_too and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
        object.__setattr__(self, "precision", as_precision(self.precision))
        object.__setattr__(self, "model", str(self.model))

    def load_encoder(self) -> Encoder:
        """The encoder, loaded with this precision on this device.

        Raises:
            ModelNotFoundError: no model at ``model`` (a ``FileNotFoundError``).
            ValueError: a mix whose number of weights is not the model's number of layers, or
                what ``contextvec.load`` refuses.
        """
        encoder = load(self.model, device=self.device, precision=self.precision)
        if isinstance(self.layers, tuple) and len(self.layers) != encoder.num_layers:
            raise ValueError(f"layers: a mix needs one weight per layer, {encoder.num_layers} for "
                             f"{self.model}, not {len(self.layers)}")
        return encoder

    def width(self, encoder: Encoder) -> int:
        """The width of a token's combined vector: ``num_layers * dim`` for ``"all"``, else ``dim``."""
        return encoder.num_layers * encoder.output_dim if self.layers is Layers.ALL else encoder.output_dim

    def combine(self, layers: np.ndarray) -> np.ndarray:
        """One doc's ``(num_layers, tokens, dim)`` -> its ``(tokens, width)`` float32 vectors."""
        if self.layers is Layers.ALL:  # token by token, layer 0 first
            n_layers, n_tokens, dim = layers.shape
            return np.ascontiguousarray(layers.transpose(1, 0, 2).reshape(n_tokens, n_layers * dim))
        if isinstance(self.layers, Layers):
            return select_layers(layers, self.layers)
        weights = np.asarray(self.layers, dtype=np.float32)
        return np.tensordot(weights, layers, axes=1).astype(np.float32, copy=False)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def words(docs: Sequence[Doc]) -> list[list[str]]:
    """Each doc's spaCy tokens, as the encoder's words."""
    return [[token.text for token in doc] for doc in docs]


def embed_docs(encoder: Encoder, docs: Sequence[Doc], settings: VectorSettings) -> list[np.ndarray]:
    """Every layer of each doc, ``(num_layers, tokens, dim)`` float32, in the order of ``docs``.

    The docs run as one ``encoder.embed`` call, batched by length, from an empty token cache: a
    doc's vectors depend on the docs it came with only through float rounding, and a call's on
    that call alone (ELMo keeps its char-CNN's token vectors between calls).
    """
    encoder.clear_caches()
    return encoder.embed(words(docs), settings.batch_size, settings.max_tokens, layers=Layers.ALL)
