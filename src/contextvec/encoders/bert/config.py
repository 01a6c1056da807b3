"""Configuration of a BERT encoder, read from a Hugging Face ``config.json``."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from contextvec.encoders.bilm.config import ConfigError

# HF's activation names -> the ``approximate`` argument of torch's GELU (None: not supported).
# "gelu" is the exact erf GELU; "gelu_new" / "gelu_pytorch_tanh" are the tanh approximation
# (Google's original BERT code used the tanh form, HF's "gelu" is exact).
ACTIVATIONS = {
    "gelu": "none",
    "gelu_python": "none",
    "gelu_new": "tanh",
    "gelu_pytorch_tanh": "tanh",
}


@dataclass(frozen=True)
class BertConfig:
    """Dimensions of a BERT encoder; field names and defaults are HF's (bert-base-uncased).

    Only what the encoder needs is kept; other ``config.json`` fields are ignored.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"hidden_act {self.hidden_act!r} is not supported (use one of {sorted(ACTIVATIONS)})"
            )
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                f"{self.num_attention_heads}"
            )
        if self.max_position_embeddings < 3:
            raise ConfigError("max_position_embeddings must leave room for [CLS], a piece and [SEP]")
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                     "type_vocab_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def gelu_approximate(self) -> str:
        """``"none"`` (exact erf GELU) or ``"tanh"``, as ``torch.nn.functional.gelu`` takes it."""
        return ACTIVATIONS[self.hidden_act]

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> BertConfig:
        """Read HF ``config.json`` content (unknown fields are ignored)."""
        position_type = config.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ConfigError(f"position_embedding_type {position_type!r} is not supported (only absolute)")
        if config.get("is_decoder") or config.get("add_cross_attention"):
            raise ConfigError("decoder / cross-attention BERT configs are not supported")
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in config.items():
            if name not in known or value is None:
                continue
            kind = {"int": int, "float": float, "str": str}[known[name]]
            try:
                values[name] = kind(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"config field {name}: {value!r} is not a {known[name]}") from e
        return cls(**values)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        path = Path(path)
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"{path}: not a readable config.json ({e})") from e
        if not isinstance(config, dict):
            raise ConfigError(f"{path}: not a JSON object")
        try:
            return cls.from_dict(config)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from e

    def to_dict(self) -> dict[str, Any]:
        """HF ``config.json`` content (``model_type`` "bert")."""
        return {"model_type": "bert", "architectures": ["BertModel"], **asdict(self)}
