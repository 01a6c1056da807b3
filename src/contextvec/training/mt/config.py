"""Settings of a translation (CoVe MT) training run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from contextvec.text.tokenize import Tokenizer

OPTIMIZERS = ("adam", "sgd")
SELECTIONS = ("bleu", "perplexity")
"""What "best on valid" means for the saved model."""
BLEU_TOKENIZERS = ("none", "13a")
"""sacrebleu's tokenizations offered: none (the given tokens) or 13a."""


@dataclass(frozen=True)
class MTTrainConfig:
    """A translation training run besides its data. ``lr``/``lr_halving`` None: the
    optimizer's default (Adam: 0.001, no halving; SGD: 1.0, halving). ``lowercase`` None: look
    source words up lower-cased if the word vectors have no upper-case word. ``max_length``:
    training pairs with a longer side are left out (their number is logged)."""

    hidden_size: int = 300
    num_layers: int = 2
    target_dim: int = 300
    dropout: float = 0.2
    trainable_unk: bool = False
    lowercase: bool | None = None
    max_word_vectors: int | None = None
    min_count: int = 2
    max_vocab: int | None = None
    batch_size: int = 64
    max_length: int | None = None
    optimizer: str = "adam"
    lr: float | None = None
    lr_halving: bool | None = None
    clip: float = 5.0
    epochs: int = 15
    max_steps: int | None = None
    checkpoint_every: int = 500
    valid_beam: int = 1
    select: str = "bleu"
    bleu_tokenize: str = "none"
    tokenizer: str = "whitespace"
    seed: int = 0

    def __post_init__(self) -> None:
        for name, allowed in (("optimizer", OPTIMIZERS), ("select", SELECTIONS),
                              ("bleu_tokenize", BLEU_TOKENIZERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be {' or '.join(allowed)}, not {getattr(self, name)!r}")
        if self.tokenizer not in Tokenizer.LINE_NAMES:
            raise ValueError("parallel files need the whitespace or moses tokenizer (one sentence "
                             f"per line), not {self.tokenizer!r}")
        if self.batch_size < 1 or self.valid_beam < 1 or self.epochs < 0:
            raise ValueError("batch_size and valid_beam must be >= 1, epochs >= 0")
        # Resolve the optimizer's defaults so that the saved config says what ran.
        if self.lr is None:
            object.__setattr__(self, "lr", 1e-3 if self.optimizer == "adam" else 1.0)
        if self.lr_halving is None:
            object.__setattr__(self, "lr_halving", self.optimizer == "sgd")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MTTrainConfig:
        names = {f.name for f in fields(cls)}
        if not set(d) <= names:
            raise ValueError(f"unknown MT training config fields: {sorted(set(d) - names)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
