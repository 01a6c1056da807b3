"""Settings of a translation (CoVe MT) training run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from contextvec.choices import checked_choice, plain
from contextvec.renamed import renamed_names
from contextvec.text.tokenize import TokenizerName, as_tokenizer_name
from contextvec.training.optim import Optimizer


class Selection(StrEnum):
    """What "best on valid" means for the saved model (``MTTrainSettings.select``)."""

    BLEU = "bleu"
    PERPLEXITY = "perplexity"


class BleuTokenize(StrEnum):
    """sacrebleu's tokenization for BLEU (``bleu_tokenize``, ``translate --tokenize``)."""

    NONE = "none"
    """The given tokens (tokenized BLEU, as multi-bleu.perl)."""
    T13A = "13a"
    """The joined text re-tokenized the WMT way."""


MT_OPTIMIZERS = (Optimizer.ADAM.value, Optimizer.SGD.value)
"""The optimizers of a translation run."""


@dataclass(frozen=True)
class MTTrainSettings:
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
    optimizer: Optimizer = Optimizer.ADAM
    lr: float | None = None
    lr_halving: bool | None = None
    clip: float = 5.0
    epochs: int = 15
    max_steps: int | None = None
    checkpoint_every: int = 500
    valid_beam: int = 1
    select: Selection = Selection.BLEU
    bleu_tokenize: BleuTokenize = BleuTokenize.NONE
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
    seed: int = 0

    def __post_init__(self) -> None:
        # A spelling (a config file's) becomes its enum member; parallel files: one sentence a line.
        object.__setattr__(self, "optimizer", checked_choice(Optimizer, self.optimizer, "optimizer",
                                                             among=MT_OPTIMIZERS))
        for name, kind in (("select", Selection), ("bleu_tokenize", BleuTokenize)):
            object.__setattr__(self, name, checked_choice(kind, getattr(self, name), name))
        object.__setattr__(self, "tokenizer", as_tokenizer_name(self.tokenizer, one_per_line=True))
        if self.batch_size < 1 or self.valid_beam < 1 or self.epochs < 0:
            raise ValueError("batch_size and valid_beam must be >= 1, epochs >= 0")
        # Resolve the optimizer's defaults so that the saved config says what ran.
        if self.lr is None:
            object.__setattr__(self, "lr", 1e-3 if self.optimizer is Optimizer.ADAM else 1.0)
        if self.lr_halving is None:
            object.__setattr__(self, "lr_halving", self.optimizer is Optimizer.SGD)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MTTrainSettings:
        names = {f.name for f in fields(cls)}
        if not set(d) <= names:
            raise ValueError(f"unknown MT training config fields: {sorted(set(d) - names)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (spellings, not enum members): what checkpoints and
        config files hold."""
        return plain(asdict(self))


# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
__getattr__ = renamed_names(__name__, globals(), {"MTTrainConfig": "MTTrainSettings"})
