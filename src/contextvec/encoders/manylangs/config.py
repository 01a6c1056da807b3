"""Configuration and vocabularies of an ELMoForManyLangs biLM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextvec.encoders.bilm.config import BiLMConfig, BiLMSizes, ConfigError
from contextvec.text.char_vocab import CharVocabulary

MODEL_TYPE = "elmoformanylangs-bilm"
"""The model_type of an ELMoForManyLangs biLM in contextvec's native format."""

OOV, PAD, BOS, EOS, BOW, EOW = "<oov>", "<pad>", "<bos>", "<eos>", "<bow>", "<eow>"


@dataclass(frozen=True)
class ManyLangsConfig(BiLMSizes):
    """Dimensions of an ELMoForManyLangs biLM (the architecture JSON's, under contextvec's names).

    The token layer is ``projection([word_embedding; highway(char_cnn)])`` (either part may be
    absent: ``word_dim`` or ``char_dim`` 0); ``n_words`` and ``n_characters`` are the rows of the
    two embedding tables. The LSTMs are ELMo's (projected, clipped, residual from the second
    layer on); clip values of 0 or None switch clipping off.
    """

    word_dim: int
    char_dim: int
    filters: tuple[tuple[int, int], ...]
    n_highway: int
    activation: str
    max_characters_per_token: int
    projection_dim: int
    lstm_dim: int
    n_layers: int
    cell_clip: float | None
    proj_clip: float | None
    n_words: int = 0
    n_characters: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        if self.word_dim < 0 or self.char_dim < 0 or self.word_dim + self.char_dim == 0:
            raise ConfigError("a token layer needs word_dim or char_dim above 0")
        if self.activation not in ("relu", "tanh"):
            raise ConfigError(f"token_embedder.activation must be 'relu' or 'tanh', not {self.activation!r}")
        if self.char_dim and (not self.filters or self.max_characters_per_token < 3):
            raise ConfigError("a character encoder needs filters and max_characters_per_token of 3 or more")
        if self.char_dim and max(w for w, _ in self.filters) > self.max_characters_per_token:
            raise ConfigError("a CNN filter is wider than max_characters_per_token")
        if self.n_layers < 1 or self.projection_dim < 1 or self.lstm_dim < 1:
            raise ConfigError("the encoder needs n_layers, projection_dim and dim of 1 or more")

    @property
    def n_filters(self) -> int:
        """Width of the char-CNN's output (0 without characters)."""
        return sum(n for _, n in self.filters) if self.char_dim else 0

    def cnn_config(self) -> BiLMConfig:
        """The char-CNN's dimensions, in the form :class:`~contextvec.encoders.bilm.CharCNN` reads."""
        return BiLMConfig(char_embed_dim=self.char_dim, filters=self.filters, n_highway=self.n_highway,
                          activation=self.activation)

    @classmethod
    def from_architecture(
        cls, architecture: dict[str, Any], n_words: int, n_characters: int
    ) -> ManyLangsConfig:
        """Read the architecture JSON of an ELMoForManyLangs directory."""
        try:
            encoder, token = architecture["encoder"], architecture["token_embedder"]
            parts = (("encoder", encoder["name"], "elmo"), ("token_embedder", token["name"], "cnn"))
            for part, name, wanted in parts:
                if str(name).lower() != wanted:
                    raise ConfigError(f"{part} {name!r} is not supported: contextvec reads the "
                                      f"{wanted!r} {part} of the published models")
            char_dim = int(token.get("char_dim", 0))
            return cls(
                word_dim=int(token.get("word_dim", 0)),
                char_dim=char_dim,
                filters=tuple(tuple(f) for f in token["filters"]) if char_dim else (),
                n_highway=int(token.get("n_highway", 0)) if char_dim else 0,
                activation=str(token.get("activation", "relu")),
                max_characters_per_token=int(token.get("max_characters_per_token", 50)),
                projection_dim=int(encoder["projection_dim"]),
                lstm_dim=int(encoder["dim"]),
                n_layers=int(encoder["n_layers"]),
                cell_clip=encoder.get("cell_clip"),
                proj_clip=encoder.get("proj_clip"),
                n_words=n_words,
                n_characters=n_characters,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"the architecture JSON lacks or mistypes a required field: {e}") from e

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ManyLangsConfig:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown ELMoForManyLangs config fields: {sorted(unknown)}")
        try:
            return cls(**d)
        except TypeError as e:
            raise ConfigError(f"ELMoForManyLangs config: {e}") from e


@dataclass(frozen=True)
class ManyLangsVocabulary:
    """The word and character dictionaries (``word.dic``, ``char.dic``) of a model; either is
    None where its architecture has no such embedding."""

    words: dict[str, int] | None
    chars: dict[str, int] | None

    def check(self, config: ManyLangsConfig) -> None:
        """A :class:`ConfigError` where a dictionary lacks a special token its model needs or
        gives an id past its embedding table."""
        for name, table, rows, specials in (
            ("word.dic", self.words, config.n_words, (OOV, PAD)),
            ("char.dic", self.chars, config.n_characters, (OOV, PAD, BOS, EOS, BOW, EOW)),
        ):
            if table is None:
                continue
            missing = [s for s in specials if s not in table]
            if missing:
                raise ConfigError(f"{name} lacks {', '.join(missing)}")
            largest = max(table.values())
            if largest >= rows:
                raise ConfigError(f"{name} has id {largest}, past the {rows} rows of its embedding")

    def char_vocabulary(self, max_chars: int) -> CharVocabulary | None:
        """The character ids as the model was trained on them. That project's batcher writes the
        id of ``<eow>`` first and of ``<bow>`` last (its names swapped), so ours does too."""
        if self.chars is None:
            return None
        c = self.chars
        return CharVocabulary(c, begin=c[EOW], end=c[BOW], unknown=c[OOV], padding=c[PAD],
                              max_chars=max_chars, whole_tokens={BOS: c[BOS], EOS: c[EOS]})

    def to_dict(self) -> dict[str, Any]:
        return {"words": self.words, "chars": self.chars}

    @classmethod
    def from_dict(cls, d: Any) -> ManyLangsVocabulary:
        if not isinstance(d, dict) or not all(
            table is None or (isinstance(table, dict) and all(isinstance(v, int) for v in table.values()))
            for table in (d.get("words"), d.get("chars"))
        ):
            raise ConfigError("not a vocabulary: {'words': {token: id} or null, 'chars': {...} or null}")
        return cls(d.get("words"), d.get("chars"))
