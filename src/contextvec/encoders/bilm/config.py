"""Configuration of an ELMo biLM, and its translation to and from bilm-tf's ``options.json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from contextvec.text.chars import MAX_CHARS_PER_TOKEN

MODEL_TYPE = "elmo-bilm"
"""The model_type of an ELMo biLM in contextvec's native format."""


class ConfigError(ValueError):
    """A model configuration that contextvec cannot run, with the reason."""


class BiLMSizes:
    """What an ELMo-style biLM's configuration (a frozen dataclass with ``projection_dim``,
    ``n_layers`` and ``filters``) derives from its fields, whatever its token layer."""

    projection_dim: int
    n_layers: int
    filters: tuple[tuple[int, int], ...]

    @property
    def output_dim(self) -> int:
        """Size of each output layer: ``[forward; backward]``."""
        return 2 * self.projection_dim

    @property
    def num_output_layers(self) -> int:
        return self.n_layers + 1

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (contextvec's native ``config.json``)."""
        d = asdict(self)
        d["filters"] = [list(f) for f in self.filters]
        return d


@dataclass(frozen=True)
class BiLMConfig(BiLMSizes):
    """Dimensions of a character-CNN biLM (names follow the ELMo paper and bilm-tf).

    ``filters`` lists ``(width, n_maps)`` pairs. ``n_characters`` is the embedding table size at
    inference (262: 261 training characters plus the padding row 0). Clip values of 0 or
    ``None`` switch clipping off. ``lstm_projection=False`` drops the LSTMs' output projection
    (Kim et al.'s plain LSTM; needs ``lstm_dim == projection_dim``). ``bidirectional=False``
    gives a forward-only LM (language model training and perplexity only; encoders need both
    directions). ``token_projection=False`` feeds the highway output (``n_filters`` wide) to the
    first LSTM without the linear map to ``projection_dim``, as Kim et al. do; only a forward-only
    LM may drop it, since ELMo's layer 0 must be as wide as the LSTM outputs.
    """

    char_embed_dim: int = 16
    filters: tuple[tuple[int, int], ...] = (
        (1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024),
    )
    n_highway: int = 1
    activation: str = "relu"
    n_characters: int = 262
    max_characters_per_token: int = MAX_CHARS_PER_TOKEN
    projection_dim: int = 128
    lstm_dim: int = 1024
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    bidirectional: bool = True
    lstm_projection: bool = True
    token_projection: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        if self.activation not in ("relu", "tanh"):
            raise ConfigError(f"char_cnn.activation must be 'relu' or 'tanh', not {self.activation!r}")
        if self.max_characters_per_token != MAX_CHARS_PER_TOKEN:
            raise ConfigError(
                f"max_characters_per_token is {self.max_characters_per_token}; contextvec's "
                f"character mapper produces {MAX_CHARS_PER_TOKEN}"
            )
        if self.n_characters not in (261, 262):
            raise ConfigError(f"n_characters must be 261 or 262, not {self.n_characters}")
        if self.n_layers < 1 or not self.filters:
            raise ConfigError("a biLM needs at least one LSTM layer and one CNN filter")
        if not self.lstm_projection and self.lstm_dim != self.projection_dim:
            raise ConfigError("an LSTM without projection needs lstm_dim == projection_dim")
        if not self.token_projection and self.bidirectional:
            raise ConfigError("only a forward-only LM (bidirectional false) may drop the token projection")
        if max(w for w, _ in self.filters) > MAX_CHARS_PER_TOKEN:
            raise ConfigError("a CNN filter is wider than a token's 50 characters")

    @property
    def n_filters(self) -> int:
        """Width of the concatenated max-pooled convolution outputs."""
        return sum(n for _, n in self.filters)

    @property
    def token_dim(self) -> int:
        """Width of the token vectors the char-CNN gives the first LSTM."""
        return self.projection_dim if self.token_projection else self.n_filters

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> BiLMConfig:
        """Read bilm-tf/allennlp ``options.json`` content."""
        try:
            lstm, cnn = options["lstm"], options["char_cnn"]
            config = cls(
                char_embed_dim=int(cnn["embedding"]["dim"]),
                filters=tuple(tuple(f) for f in cnn["filters"]),
                n_highway=int(cnn["n_highway"]),
                activation=cnn.get("activation", "relu"),
                # bilm-tf training files say 261; the model always gets a padding row.
                n_characters=int(cnn.get("n_characters", 262)),
                max_characters_per_token=int(
                    cnn.get("max_characters_per_token", MAX_CHARS_PER_TOKEN)
                ),
                projection_dim=int(lstm["projection_dim"]),
                lstm_dim=int(lstm["dim"]),
                n_layers=int(lstm["n_layers"]),
                cell_clip=lstm.get("cell_clip"),
                proj_clip=lstm.get("proj_clip"),
                use_skip_connections=bool(lstm.get("use_skip_connections", False)),
                bidirectional=bool(options.get("bidirectional", True)),
                extra={
                    k: v for k, v in options.items() if k not in ("lstm", "char_cnn", "bidirectional")
                },
            )
        except (KeyError, TypeError) as e:
            raise ConfigError(f"options.json lacks or mistypes a required field: {e}") from e
        return config

    def to_options(self) -> dict[str, Any]:
        """bilm-tf/allennlp ``options.json`` content (inference form, ``n_characters`` 262)."""
        return {
            **self.extra,
            "bidirectional": self.bidirectional,
            "lstm": {
                "use_skip_connections": self.use_skip_connections,
                "projection_dim": self.projection_dim,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
                "dim": self.lstm_dim,
                "n_layers": self.n_layers,
            },
            "char_cnn": {
                "activation": self.activation,
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "embedding": {"dim": self.char_embed_dim},
                "n_characters": 262,
                "max_characters_per_token": self.max_characters_per_token,
            },
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BiLMConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown biLM config fields: {sorted(unknown)}")
        return cls(**d)


# Published ELMo dimensions, for building random models (tests, benchmarks) and training presets.
PRESETS: dict[str, BiLMConfig] = {
    "elmo-small": BiLMConfig(),
    "elmo-medium": BiLMConfig(projection_dim=256, lstm_dim=2048),
    "elmo-original": BiLMConfig(projection_dim=512, lstm_dim=4096, n_highway=2),
    # The bundled English model: widths 1..5 (512 maps), LSTM 512 -> 128, narrower than
    # elmo-small so that it trains on a CPU (benchmarks/train_speed.py compares the presets).
    "elmo-en-small": BiLMConfig(
        filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)), lstm_dim=512,
    ),
    "tiny": BiLMConfig(
        char_embed_dim=4, filters=((1, 4), (2, 8), (3, 16)), n_highway=1,
        projection_dim=16, lstm_dim=32,
    ),
}
