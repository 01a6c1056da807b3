"""Training configuration of a biLM, with named presets."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from contextvec.choices import checked_choice, plain, spellings
from contextvec.encoders.bilm.config import PRESETS as MODEL_PRESETS
from contextvec.encoders.bilm.config import BiLMConfig, ConfigError
from contextvec.renamed import renamed_names
from contextvec.text.tokenize import TokenizerName
from contextvec.training.optim import Optimizer


class Bf16(StrEnum):
    """Which part of a training step runs in bfloat16 autocast (``BiLMTrainSettings.bf16``)."""

    OFF = "off"
    SOFTMAX = "softmax"
    """The output layer only (the largest matmuls)."""
    ALL = "all"
    """The whole forward pass."""


OPTIMIZERS = spellings(Optimizer)
BF16_MODES = spellings(Bf16)


@dataclass(frozen=True)
class BiLMTrainSettings:
    """Everything that defines a training run besides the data.

    ``rows`` x ``unroll`` tokens per step (bilm-tf: 128 x 20 per GPU); ``negatives`` 0 means
    full softmax. With ``lr_halving`` the learning rate halves after an epoch whose validation
    perplexity did not improve by at least 1 (Kim et al.'s schedule); ``halve_from_epoch`` N
    also halves it after epoch N and every later epoch, to anneal within a fixed budget (it may
    be set when resuming a run). ``average_from_epoch`` N averages the weights of every step
    after epoch N (Polyak averaging, as in ASGD); from then on the average is what is
    validated and saved (it too may be set when resuming), and a change of the learning rate
    starts a new average. ``tokenizer`` names how corpus lines become tokens
    (:class:`~contextvec.text.tokenize.Tokenizer`). ``dropout`` applies to the input of every
    LSTM layer and to the softmax input; ``token_dropout=False`` spares the first
    LSTM's input, the token layer (Kim et al.); ``locked_dropout`` shares each row's dropout
    mask across the steps of a window (variational dropout), and ``weight_drop`` p drops that
    fraction of the LSTMs' recurrent weights, one mask per training step (AWD-LSTM). ``contiguous`` gives each
    of the ``rows`` streams a contiguous part of the corpus (the PTB convention; see
    :class:`~contextvec.training.bilm.batcher.StreamBatcher`), for training and validation.
    ``interleave`` reads the training files line by line in turn instead of one after the
    other (a corpus in shards of different sources; the ELMo presets). ``skip_lines`` N starts
    every training file at its line N + 1, e.g. to continue a model on the part of its corpus
    that an earlier run did not read. ``bf16`` runs training steps in bfloat16 autocast:
    ``"softmax"`` only the output layer (the largest matmuls), ``"all"`` the whole forward
    pass; parameters, optimizer and evaluation stay float32. It pays only on CPUs with native
    bf16 matmuls (AVX-512 BF16, AMX) and on GPUs.
    """

    model: BiLMConfig = field(default_factory=BiLMConfig)
    rows: int = 128
    unroll: int = 20
    optimizer: Optimizer = Optimizer.ADAGRAD
    lr: float = 0.2
    dropout: float = 0.1
    token_dropout: bool = True
    locked_dropout: bool = False
    weight_drop: float = 0.0
    clip: float = 10.0
    negatives: int = 8192
    epochs: int = 10
    max_steps: int | None = None
    min_count: int = 1
    max_vocab: int | None = None
    lr_halving: bool = False
    halve_from_epoch: int | None = None
    average_from_epoch: int | None = None
    contiguous: bool = False
    interleave: bool = False
    skip_lines: int = 0
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
    checkpoint_every: int = 1000
    seed: int = 0
    bf16: Bf16 = Bf16.OFF

    def __post_init__(self) -> None:
        try:  # a spelling (a config file's, a preset's) becomes its enum member
            for name, kind in (("optimizer", Optimizer), ("tokenizer", TokenizerName), ("bf16", Bf16)):
                object.__setattr__(self, name, checked_choice(kind, getattr(self, name), name))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.rows < 1 or self.unroll < 1:
            raise ConfigError("rows and unroll must be >= 1")
        if not 0.0 <= self.weight_drop < 1.0:
            raise ConfigError("weight_drop must be in [0, 1)")
        if self.skip_lines < 0:
            raise ConfigError("skip_lines must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (spellings, not enum members): what checkpoints and
        config files hold."""
        d = plain(asdict(self))
        d["model"] = self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BiLMTrainSettings:
        d = dict(d)
        model = d.pop("model", None)
        base = PRESETS[d.pop("preset")] if "preset" in d else cls()
        if isinstance(model, str):
            model = MODEL_PRESETS[model]
        elif isinstance(model, dict):
            model = BiLMConfig.from_dict({**base.model.to_dict(), **model})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown training config fields: {sorted(unknown)}")
        return replace(base, **d, **({"model": model} if model is not None else {}))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BiLMTrainSettings:
        """A JSON file: training fields, optionally ``"preset"`` to start from and ``"model"``
        (a model preset name or a dict of :class:`BiLMConfig` fields)."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from e


def _kim(filters: list[tuple[int, int]], n_highway: int, dim: int) -> BiLMConfig:
    # Kim et al. 2016: char embedding 15, tanh convolutions, the highway output straight into
    # plain LSTMs (no projections, no clipping), forward LM only. The linear map to the LSTM
    # width that ELMo adds costs much (PTB valid after one epoch, plain PyTorch: 241 without,
    # 310 with).
    return BiLMConfig(
        char_embed_dim=15, filters=tuple(filters), n_highway=n_highway, activation="tanh",
        projection_dim=dim, lstm_dim=dim, cell_clip=None, proj_clip=None,
        use_skip_connections=False, bidirectional=False, lstm_projection=False,
        token_projection=False,
    )


_BILM_TF = dict(rows=128, unroll=20, optimizer="adagrad", lr=0.2, dropout=0.1, clip=10.0,
                negatives=8192, epochs=10, interleave=True)
# Kim et al.'s recipe: batches of 20 x 35 read from contiguous streams, dropout 0.5 (not on the
# token layer), SGD at lr 1 with the gradient of the loss *summed* over the 35 steps clipped to
# norm 5, halving the lr when an epoch improves validation perplexity by less than 1. On
# contextvec's per-token mean loss that is lr 35 with clip 5/35. SGD is kept as the paper has
# it: Adam learns no faster on PTB (docs/ptb-kim.md).
_KIM = dict(rows=20, unroll=35, optimizer="sgd", lr=35.0, dropout=0.5, clip=5.0 / 35, negatives=0,
            epochs=25, lr_halving=True, contiguous=True, token_dropout=False)

PRESETS: dict[str, BiLMTrainSettings] = {
    "tiny": BiLMTrainSettings(model=MODEL_PRESETS["tiny"], rows=4, unroll=8, optimizer="adam",
                              lr=0.01, dropout=0.0, clip=5.0, negatives=0, epochs=1,
                              checkpoint_every=50),
    "elmo-small": BiLMTrainSettings(model=MODEL_PRESETS["elmo-small"], **_BILM_TF),
    "elmo-medium": BiLMTrainSettings(model=MODEL_PRESETS["elmo-medium"], **_BILM_TF),
    "elmo-original": BiLMTrainSettings(model=MODEL_PRESETS["elmo-original"], **_BILM_TF),
    # The bundled model's run (see the README): Moses-tokenized sentences of the shared
    # Gutenberg + Wikipedia corpora; Adam, because a CPU run sees only part of one epoch.
    "elmo-en-small": BiLMTrainSettings(
        model=MODEL_PRESETS["elmo-en-small"], rows=64, unroll=20, optimizer="adam", lr=1e-3,
        dropout=0.1, clip=10.0, negatives=4096, epochs=1, max_vocab=50_000,
        tokenizer="moses-sentences", checkpoint_every=200, interleave=True,
    ),
    "kim-small": BiLMTrainSettings(model=_kim([(w, 25 * w) for w in range(1, 7)], 1, 300), **_KIM),
    "kim-large": BiLMTrainSettings(
        model=_kim([(w, min(200, 50 * w)) for w in range(1, 8)], 2, 650), **_KIM
    ),
}


# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
__getattr__ = renamed_names(__name__, globals(), {"TrainConfig": "BiLMTrainSettings"})
