"""What a server is configured with (set once at start-up by ``contextvec serve``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from contextvec.choices import checked_choice
from contextvec.encoders.outputs import Layers, Pooling
from contextvec.engine import EngineSettings
from contextvec.io.sentence_transformers import SentencePooling
from contextvec.text.tokenize import TokenizerName, as_tokenizer_name

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""The ``Host`` names every server takes: this machine's own (``[::1]`` as a URL writes it)."""


def host_name(address: str) -> str:
    """A bind address as a ``Host`` header carries it: an IPv6 address in brackets."""
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


def _host_pattern(pattern: str) -> str:
    """A ``Host`` name (no port), ``*.domain`` or ``*``: the patterns of Starlette's
    ``TrustedHostMiddleware``, lower-cased, an IPv6 address in brackets."""
    name = host_name(pattern).lower()
    rest = name[2:] if name.startswith("*.") else name
    if (not rest or any(c.isspace() or c in "/@," for c in name) or ("*" in rest and name != "*")
            or (":" in name and not name.startswith("["))):
        raise ValueError(f"allowed_hosts: {pattern!r} is not a host name (without a port), "
                         "'*.domain' or '*' (--allowed-hosts)")
    return name


def _origin(origin: str) -> str:
    """``scheme://host[:port]``, as a browser sends it in ``Origin``."""
    parts = urlsplit(origin)
    if (parts.scheme not in ("http", "https") or not parts.netloc
            or parts.path or parts.query or parts.fragment or "@" in parts.netloc):
        raise ValueError(f"cors_origins: {origin!r} is not an origin such as "
                         "'https://app.example.com' (scheme://host[:port], no path) (--cors-origin)")
    return origin


@dataclass(frozen=True)
class ServerSettings:
    """Limits and defaults of one server (``contextvec serve``'s options of the same names).

    Attributes:
        model_name: the model's id in responses and ``/v1/models``.
        api_key: if set, every request needs ``Authorization: Bearer <api_key>`` (else 401).
        engine: how the engine batches requests (``--max-batch-tokens``, ``--max-wait-ms``,
            ``--no-batching``) and how many it queues before the server answers 429
            (``--max-queue``).
        request_timeout: seconds a request may take, queue included, before a 504.
        max_sentences: sentences per request (more: 422, the schema's ``maxItems``).
        max_sentence_tokens: tokens per sentence (more: 413; a token list: 422).
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
        allowed_hosts: the names a request's ``Host`` may carry besides :data:`LOOPBACK_HOSTS`
            (``contextvec serve`` adds the address it binds): DNS names such as
            ``embed.example.com``, ``*.example.com`` for its subdomains, ``*`` for any. Any
            other is refused (400), so a web page cannot reach the server by DNS rebinding.
        cors_origins: the browser origins (``https://app.example.com``) whose pages may call
            the API and read its answers; none: no CORS headers (browsers keep other pages out).
        max_context_chars: characters of a ``/v1/answer`` context (more: 422, the schema's
            ``maxLength``).

    Raises:
        ValueError: a ``tokenizer``, ``openai_layers`` or ``openai_pool`` that is none of the
            choices (``Layers.ALL`` is none: it is no sentence vector); a host name with a
            space or a wildcard other than a leading ``*.``; an origin that is not
            ``scheme://host[:port]``.
    """

    model_name: str = "elmo-en-small"
    api_key: str | None = None
    engine: EngineSettings = field(default_factory=EngineSettings)
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
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    max_context_chars: int = 20_000

    def __post_init__(self) -> None:
        if isinstance(self.max_context_chars, bool) or not isinstance(self.max_context_chars, int) \
                or self.max_context_chars < 1:
            raise ValueError(f"max_context_chars must be a whole number of at least 1, "
                             f"not {self.max_context_chars!r}")
        object.__setattr__(self, "allowed_hosts", tuple(_host_pattern(h) for h in self.allowed_hosts))
        object.__setattr__(self, "cors_origins", tuple(_origin(o) for o in self.cors_origins))
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
