"""``contextvec.Listener.v1``: a ``tok2vec`` for spaCy's trainable components on frozen
contextvec vectors.

The listener embeds the docs it is given itself, with its own frozen encoder, and learns only a
projection of the configured layers to ``width``: a maxout layer with layer normalization,
spaCy's own reduction of embeddings (a plain linear map scored lower on CoNLL-2003). It needs
no ``contextvec`` component upstream (nor ``frozen_components``/``annotating_components`` in a
``spacy train`` config): the vectors are frozen, so there is no upstream model whose gradients
it would have to pass on. A saved pipeline keeps the projection's weights and the config (the
model's name or path).
"""

from __future__ import annotations

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, with_array
from thinc.types import Floats2d

from contextvec.api import DEFAULT_MODEL
from contextvec.encoders.base import Encoder
from contextvec.spacy.vectors import VectorSettings, embed_docs

MAXOUT_PIECES = 3
"""Pieces of the projection's maxout units (spaCy's ``MultiHashEmbed`` reduces with 3)."""


def _frozen_vectors(encoder: Encoder, settings: VectorSettings) -> Model[list[Doc], list[Floats2d]]:
    """Docs -> each doc's ``(tokens, width)`` combined layers; nothing learned, no gradient."""

    def forward(model: Model, docs: list[Doc], is_train: bool) -> tuple[list[Floats2d], object]:
        vectors = [model.ops.asarray2f(settings.combine(layers))
                   for layers in embed_docs(encoder, docs, settings)]
        return vectors, lambda d_vectors: []

    return Model("contextvec_vectors", forward, dims={"nO": settings.width(encoder)})


@registry.architectures("contextvec.Listener.v1")
def build_listener(width: int, model: str = DEFAULT_MODEL, layers: str | list[float] = "all",
                   batch_size: int = 32, max_tokens: int | None = 4096, precision: str = "fp32",
                   device: str = "cpu") -> Model[list[Doc], list[Floats2d]]:
    """A ``tok2vec`` layer: each doc's frozen contextvec vectors, projected to ``width``.

    Args:
        width: the output width (``nO``) the component on top reads.
        model: a contextvec model name or directory.
        layers: ``"all"`` (the default: the projection sees every layer and learns its own
            mix), ``"top"``, ``"average"`` or a fixed mix, one weight per layer.
        batch_size: sentences per forward pass.
        max_tokens: padded tokens per forward pass; None for no limit.
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"``.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns:
        A thinc model: docs -> one ``(tokens, width)`` array per doc.

    Raises:
        ModelNotFoundError: no model at ``model`` (a ``FileNotFoundError``).
        ValueError: a ``width`` below 1, a setting out of range, or a mix without one weight
            per layer.
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a whole number of at least 1, not {width!r}")
    settings = VectorSettings(model=model, layers=layers, batch_size=batch_size, max_tokens=max_tokens,
                              precision=precision, device=device)
    encoder = settings.load_encoder()
    vectors = _frozen_vectors(encoder, settings)
    projection = Maxout(nO=width, nI=vectors.get_dim("nO"), nP=MAXOUT_PIECES, normalize=True)
    return chain(vectors, with_array(projection))
