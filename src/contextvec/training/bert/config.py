"""BERT pretraining settings, with named presets."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bilm.config import ConfigError
from contextvec.renamed import renamed_names
from contextvec.training.bert.instances import InstanceSettings


@dataclass(frozen=True)
class BertTrainSettings(InstanceSettings):
    """Everything that defines a BERT pretraining run besides the data: how its training stream
    makes and masks instances (the fields of :class:`InstanceSettings`, defined and checked there;
    ``seed`` also seeds the weights and dropout), the model and the optimisation.

    ``model.vocab_size`` is the size of the vocabulary trained from the corpus when none is given
    (with ``lowercase``); the model takes the vocabulary's actual size. ``batch_size`` is the
    global batch (split across processes); ``max_steps`` also sets the learning-rate decay, which
    ends at 0 there.
    """

    model: BertConfig = field(default_factory=BertConfig)
    batch_size: int = 32
    """The global batch of sentence pairs, split across processes."""
    lr: float = 1e-4
    warmup_steps: int = 10_000
    """Peak learning rate, reached by a linear warmup of this many steps."""
    max_steps: int = 1_000_000
    weight_decay: float = 0.01
    clip: float = 1.0
    """AdamW weight decay (not on biases and LayerNorm weights); gradient-norm clipping."""
    lowercase: bool = True
    bf16: bool = False
    checkpoint_every: int = 1000

    def __post_init__(self) -> None:
        if self.max_seq_length > self.model.max_position_embeddings:
            raise ConfigError(f"max_seq_length {self.max_seq_length} exceeds the model's "
                              f"max_position_embeddings {self.model.max_position_embeddings}")
        super().__post_init__()
        if self.batch_size < 1 or self.max_steps < 1 or self.warmup_steps < 0:
            raise ConfigError("batch_size and max_steps must be >= 1, warmup_steps >= 0")

    def instances(self) -> InstanceSettings:
        """How this run's training stream makes and masks its instances."""
        return InstanceSettings(**{f.name: getattr(self, f.name) for f in fields(InstanceSettings)})

    def to_dict(self) -> dict[str, Any]:
        """The fields as saved configs, checkpoints and ``training.json`` hold them, in
        :data:`SAVED_ORDER`."""
        d = asdict(self)
        d["model"] = {k: v for k, v in self.model.to_dict().items() if k not in ("model_type",
                                                                                 "architectures")}
        return {name: d.pop(name) for name in SAVED_ORDER} | d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BertTrainSettings:
        """Training fields, optionally ``"preset"`` to start from and ``"model"`` (a dict of
        :class:`BertConfig` fields, over the preset's)."""
        d = dict(d)
        base = PRESETS[d.pop("preset")] if "preset" in d else cls()
        model = d.pop("model", None)
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown BERT training config fields: {sorted(unknown)}")
        if isinstance(model, dict):
            d["model"] = BertConfig.from_dict({**base.model.to_dict(), **model})
        return replace(base, **d)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BertTrainSettings:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from e


SAVED_ORDER = ("model", "max_seq_length", "batch_size", "lr", "warmup_steps", "max_steps", "weight_decay",
               "clip", "masked_lm_prob", "whole_word_mask", "short_seq_prob", "sentences", "pool_size",
               "lowercase", "bf16", "checkpoint_every", "seed")
"""The order of the keys in a saved config (the order they have always been written in, so that
checkpoints stay the same bytes); a field added later goes after them."""

PRESETS: dict[str, BertTrainSettings] = {
    # For tests and smoke runs: trains in seconds on a CPU.
    "bert-tiny": BertTrainSettings(
        model=BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64),
        max_seq_length=64, batch_size=8, lr=1e-3, warmup_steps=10, max_steps=200,
        checkpoint_every=50, pool_size=200,
    ),
    # Turc et al.'s BERT-Mini shape (4 layers, 256 wide) at sequence length 128, for CPU training.
    "bert-mini": BertTrainSettings(
        model=BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=128),
        max_seq_length=128, batch_size=32, lr=5e-4, warmup_steps=1000, max_steps=100_000,
        checkpoint_every=500,
    ),
}


# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
__getattr__ = renamed_names(__name__, globals(), {"BertTrainConfig": "BertTrainSettings"})
