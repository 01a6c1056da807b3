"""What a server is configured with (set once at start-up by ``contextvec serve``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    """Limits and defaults of one server.

    ``openai_layers``: ``"top"``, ``"average"`` or scalar-mix weights (one per layer) for the
    pooled vectors of ``/v1/embeddings``; ``openai_gamma`` scales the mix.
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
    openai_layers: str | tuple[float, ...] = "average"
    openai_gamma: float = 1.0
    openai_pool: str = "mean"
    openai_normalize: bool = False
