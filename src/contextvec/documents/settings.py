"""What a document's embedding asks for: the context a sentence sees, layers, pooling, chunks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contextvec.choices import checked_choice, spellings
from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling
from contextvec.text.tokenize import TokenizerName, as_tokenizer_name


class Context(StrEnum):
    """What a sentence's vectors may depend on."""

    SENTENCE = "sentence"
    """The sentence alone (every family's default; what ``embed`` has always given)."""
    DOCUMENT = "document"
    """The whole document, read in order (``Encoder.embed_document``; each family's docstring
    and docs/documents.md say exactly how)."""


CONTEXTS = spellings(Context)
"""The spellings of :class:`Context`: ``sentence``, ``document``."""


def as_context(value: Context | str) -> Context:
    """``value`` as a :class:`Context`; a ``ValueError`` naming the choices for any other."""
    return checked_choice(Context, value, "context")


@dataclass(frozen=True)
class DocumentSettings:
    """How documents are embedded; every value is checked here, once.

    With ``chunk_tokens`` (or spans given to :func:`~contextvec.documents.embed_document`), the
    result holds one pooled vector per chunk instead of token vectors: late chunking, each
    chunk's tokens pooled after the whole document was read, so a chunk's vector knows its
    document (under ``context="document"``).
    """

    context: Context = Context.SENTENCE
    layers: Layers = Layers.ALL
    """``all``, ``top`` or ``average``: as ``Encoder.embed``."""
    pool: Pooling | None = None
    """Without chunks: None (token vectors) or one vector per sentence, as ``Encoder.embed``.
    With chunks: how each chunk's tokens are pooled (None means ``mean``)."""
    chunk_tokens: int | None = None
    """Pool every ``chunk_tokens`` consecutive tokens of the document (across sentences)."""
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
    """How a raw text's lines become tokens (with character offsets)."""
    pass_tokens: int = 4096
    """``context="document"``: tokens held in one pass over time (bounds memory)."""
    batch_size: int = 64
    """``context="sentence"``: sentences per forward pass."""
    max_tokens: int | None = 4096
    """``context="sentence"``: padded tokens per forward pass."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "context", as_context(self.context))
        set_(self, "layers", as_layers(self.layers))
        set_(self, "pool", as_pooling(self.pool))
        set_(self, "tokenizer", as_tokenizer_name(self.tokenizer))
        for name in ("chunk_tokens", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, not {value!r}")
        for name in ("pass_tokens", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")

    @property
    def chunk_pool(self) -> Pooling:
        """How a chunk's (or span's) tokens are pooled."""
        return self.pool or Pooling.MEAN
