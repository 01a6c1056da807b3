"""What a server is configured with (set once at start-up by ``contextvec serve``)."""

from __future__ import annotations

from dataclasses import dataclass

from contextvec.choices import checked_choice
from contextvec.encoders.outputs import Layers, Pooling
from contextvec.io.sentence_transformers import SentencePooling
from contextvec.text.tokenize import TokenizerName, as_tokenizer_name


@dataclass(frozen=True)
class ServerSettings:
    """Limits and defaults of one server (``contextvec serve``'s options of the same names).

    Attributes:
        model_name: the model's id in responses and ``/v1/models``.
        api_key: if set, every request needs ``Authorization: Bearer <api_key>`` (else 401).
        max_batch_tokens: padded tokens (longest sentence x sentences) per forward pass.
        max_wait_ms: under load, the longest the oldest queued request waits for others to
            share its forward pass.
        batching: False for one request per forward pass.
        max_queue: queued requests before the server answers 429.
        request_timeout: seconds a request may take, queue included, before a 504.
        max_sentences: sentences per request (more: 413).
        max_sentence_tokens: tokens per sentence (more: 413).
        max_body_bytes: request body size in bytes (more: 413).
        tokenizer: how string sentences are split unless a request says:
            ``TokenizerName.WHITESPACE`` or ``TokenizerName.MOSES`` (or their spellings).
        openai_layers: ``Layers.TOP``, ``Layers.AVERAGE`` (or their spellings) or scalar-mix
            weights (one per layer) for ``/v1/embeddings``; None (with ``openai_pool`` None):
            the model's own sentence vector.
        openai_gamma: the scale of the ``openai_layers`` mix.
        openai_pool: pooling over the words for ``/v1/embeddings`` (a ``Pooling`` or its
            spelling); None: the model's own.
        openai_normalize: unit-length ``/v1/embeddings`` vectors, on top of any of these.
        openai_max_inputs: texts per ``/v1/embeddings`` request (OpenAI's limit).
        openai_sentence: a sentence-transformers checkpoint's declared pooling (read by
            ``contextvec.io.sentence_transformers.read_sentence_pooling``);
            None for a plain BERT (the mean of its pieces) and for ELMo and CoVe (the mean over
            the words of the average of all layers).

    Raises:
        ValueError: a ``tokenizer``, ``openai_layers`` or ``openai_pool`` that is none of the
            choices (``Layers.ALL`` is none: it is no sentence vector).
    """

    model_name: str = "elmo-en-small"
    api_key: str | None = None
    max_batch_tokens: int = 4096
    max_wait_ms: float = 5.0
    batching: bool = True
    max_queue: int = 512
    request_timeout: float = 30.0
    max_sentences: int = 256
    max_sentence_tokens: int = 512
    max_body_bytes: int = 4 * 1024 * 1024
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
    openai_layers: Layers | tuple[float, ...] | None = None
    openai_gamma: float = 1.0
    openai_pool: Pooling | None = None
    openai_normalize: bool = False
    openai_max_inputs: int = 2048
    openai_sentence: SentencePooling | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokenizer", as_tokenizer_name(self.tokenizer, one_per_line=True))
        if self.openai_pool is not None:
            object.__setattr__(self, "openai_pool",
                               checked_choice(Pooling, self.openai_pool, "openai_pool", none_too=True))
        if isinstance(self.openai_layers, str):
            if self.openai_layers not in (Layers.TOP, Layers.AVERAGE):  # ALL is no sentence vector
                raise ValueError(f"openai_layers must be top, average or scalar-mix weights, "
                                 f"not {self.openai_layers!r}")
            object.__setattr__(self, "openai_layers", Layers(self.openai_layers))
        elif self.openai_layers is not None:
            object.__setattr__(self, "openai_layers", tuple(self.openai_layers))
