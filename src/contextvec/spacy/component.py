"""The ``contextvec`` pipeline component: contextual vectors for spaCy's own tokens.

``nlp.add_pipe("contextvec", config={...})`` loads the model once; each doc then gets
``doc.tensor`` (the configured layers, ``(tokens, width)`` float32) and every layer through
extensions. A saved pipeline keeps the config (the model's name or path) and the model's
fingerprint, not its weights: ``spacy.load`` loads the model again and refuses one that changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span, Token
from spacy.util import minibatch

from contextvec.api import DEFAULT_MODEL
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.outputs import pool_tokens
from contextvec.spacy.vectors import VectorSettings, embed_docs

STATE_FILE = "contextvec.json"
"""What ``nlp.to_disk`` writes into the component's folder: the model's fingerprint."""


def _token_vector(token: Token) -> np.ndarray | None:
    vectors = token.doc._.contextvec_tensor
    return None if vectors is None else vectors[token.i]


def _token_layers(token: Token) -> np.ndarray | None:
    layers = token.doc._.contextvec_layers
    return None if layers is None else layers[:, token.i]


def _span_vector(span: Span) -> np.ndarray | None:
    vectors = span.doc._.contextvec_tensor
    return None if vectors is None else pool_tokens(vectors[span.start:span.end], "mean")


def _span_layers(span: Span) -> np.ndarray | None:
    layers = span.doc._.contextvec_layers
    return None if layers is None else pool_tokens(layers[:, span.start:span.end], "mean")


def register_extensions() -> None:
    """The ``._.contextvec_*`` attributes (None on a doc the component has not run on):

    - ``doc._.contextvec_layers``: ``(num_layers, tokens, dim)``, every layer;
    - ``doc._.contextvec_tensor``: ``(tokens, width)``, the configured layers (what
      ``doc.tensor`` holds, kept here too because a later component may replace ``doc.tensor``);
    - ``token._.contextvec_vector`` ``(width,)``, ``token._.contextvec_layers``
      ``(num_layers, dim)``;
    - ``span._.contextvec_vector`` ``(width,)``, ``span._.contextvec_layers``
      ``(num_layers, dim)``: the mean over the span's tokens (zeros for an empty span).
    """
    for name in ("contextvec_layers", "contextvec_tensor"):
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)
    for cls, vector, layers in ((Token, _token_vector, _token_layers), (Span, _span_vector, _span_layers)):
        if not cls.has_extension("contextvec_vector"):
            cls.set_extension("contextvec_vector", getter=vector)
        if not cls.has_extension("contextvec_layers"):
            cls.set_extension("contextvec_layers", getter=layers)


class ContextvecComponent(Pipe):
    """Sets ``doc.tensor`` and the ``._.contextvec_*`` extensions from a contextvec model.

    Args:
        nlp: the pipeline (for its vocab).
        name: the component's name in the pipeline.
        settings: the model, layers and batching.
        encoder: the loaded encoder (None: loaded from ``settings``).

    Attributes:
        encoder: the contextvec encoder (frozen, eval mode).
        settings: what the component was configured with.
    """

    def __init__(self, nlp: Language, name: str, settings: VectorSettings,
                 encoder: Encoder | None = None) -> None:
        self.name = name
        self.vocab = nlp.vocab
        self.settings = settings
        self.encoder = settings.load_encoder() if encoder is None else encoder
        self.width = settings.width(self.encoder)
        register_extensions()

    def __call__(self, doc: Doc) -> Doc:
        error_handler = self.get_error_handler()
        try:
            self.set_annotations([doc], self.predict([doc]))
        except Exception as e:
            error_handler(self.name, self, [doc], e)
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """The docs of ``stream`` annotated, ``batch_size`` docs per encoder call (``nlp.pipe``'s
        ``batch_size``), each call batched by length."""
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size):
            try:
                self.set_annotations(docs, self.predict(docs))
            except Exception as e:
                error_handler(self.name, self, docs, e)
            yield from docs

    def predict(self, docs: Iterable[Doc]) -> list[np.ndarray]:
        """Every layer of each doc: ``(num_layers, tokens, dim)`` float32."""
        return embed_docs(self.encoder, list(docs), self.settings)

    def set_annotations(self, docs: Iterable[Doc], layers: list[np.ndarray]) -> None:
        """``doc.tensor`` and the extensions from what :meth:`predict` returned."""
        for doc, array in zip(docs, layers, strict=True):
            tensor = self.settings.combine(array)
            doc._.contextvec_layers = array
            doc._.contextvec_tensor = tensor
            doc.tensor = tensor

    def initialize(self, get_examples: Any = None, *, nlp: Language | None = None) -> None:
        """Nothing to learn: the model is frozen."""

    def _state(self) -> dict[str, str]:
        return {"model": self.settings.model, "model_identity": model_identity(self.encoder)}

    def _check_state(self, state: dict[str, str], where: str) -> None:
        if state.get("model_identity") != model_identity(self.encoder):
            raise ValueError(f"{where}: the contextvec model {self.settings.model} is not the one this "
                             "pipeline was saved with (its weights or settings differ); load the "
                             "pipeline with that model")

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        """The model's fingerprint (its weights stay in the model's own files)."""
        return srsly.json_dumps(self._state()).encode()

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> ContextvecComponent:
        """Check that the loaded model is the one saved with the pipeline.

        Raises:
            ValueError: another model (other weights or settings) than the saved one.
        """
        self._check_state(srsly.json_loads(data), f"component {self.name}")
        return self

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        """Write the model's fingerprint to ``path/contextvec.json``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        srsly.write_json(path / STATE_FILE, self._state())

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> ContextvecComponent:
        """Check ``path/contextvec.json`` against the loaded model.

        Raises:
            ValueError: another model (other weights or settings) than the saved one.
            FileNotFoundError: no ``contextvec.json`` in ``path``.
        """
        file = Path(path) / STATE_FILE
        self._check_state(srsly.read_json(file), str(file))
        return self


@Language.factory(
    "contextvec",
    default_config={"model": DEFAULT_MODEL, "layers": "average", "batch_size": 32, "max_tokens": 4096,
                    "precision": "fp32", "device": "cpu"},
    assigns=["doc.tensor", "doc._.contextvec_layers", "doc._.contextvec_tensor"],
)
def make_contextvec(nlp: Language, name: str, model: str, layers: str | list[float], batch_size: int,
                    max_tokens: int | None, precision: str, device: str) -> ContextvecComponent:
    """The ``contextvec`` component (``nlp.add_pipe("contextvec", config={...})``).

    Args:
        nlp: the pipeline.
        name: the component's name in it.
        model: a contextvec model name or directory.
        layers: ``"all"``, ``"top"``, ``"average"`` or a fixed mix, one weight per layer.
        batch_size: sentences per forward pass.
        max_tokens: padded tokens per forward pass; None for no limit.
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"``.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns:
        The component (see [`VectorSettings`][contextvec.spacy.vectors.VectorSettings]).

    Raises:
        ModelNotFoundError: no model at ``model`` (a ``FileNotFoundError``).
        ValueError: a setting out of range, or a mix without one weight per layer.
    """
    settings = VectorSettings(model=model, layers=layers, batch_size=batch_size, max_tokens=max_tokens,
                              precision=precision, device=device)
    return ContextvecComponent(nlp, name, settings)
