"""What a server is configured with (set once at start-up by ``contextvec serve``)."""

from __future__ import annotations

from dataclasses import dataclass

from contextvec.io.sentence_transformers import SentencePooling


@dataclass(frozen=True)
class ServerSettings:
    """Limits and defaults of one server.

    ``/v1/embeddings``: with ``openai_layers`` and ``openai_pool`` both None (the default), the
    model's own sentence vector: for BERT, the top layer's word pieces pooled as
    ``openai_sentence`` says (a sentence-transformers checkpoint's declared pooling, read by
    :func:`contextvec.io.sentence_transformers.read_sentence_pooling`; None: their mean, as
    sentence-transformers does for a plain BERT); for ELMo and CoVe, the mean over the words of
    the average of all layers. Otherwise the words' vectors of ``openai_layers`` (``"top"``,
    ``"average"`` or scalar-mix weights, one per layer, scaled by ``openai_gamma``; default
    ``"top"`` for BERT, ``"average"`` for the others) pooled by ``openai_pool`` (default
    ``"mean"``). ``openai_normalize``: unit length on top of that. ``openai_max_inputs``: texts
    per request (OpenAI's limit).
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
    tokenizer: str = "whitespace"
    openai_layers: str | tuple[float, ...] | None = None
    openai_gamma: float = 1.0
    openai_pool: str | None = None
    openai_normalize: bool = False
    openai_max_inputs: int = 2048
    openai_sentence: SentencePooling | None = None
