"""Hyperparameters of the task models (:class:`ModelSettings`)."""

from __future__ import annotations

from dataclasses import dataclass

from contextvec.encoders.bert.combine import LAYER_COMBINATIONS

PLACEMENTS = ("none", "input", "input+output")
MIX_PLACEMENTS = PLACEMENTS[1:]
"""Where the mixes enter a model that reads contextual vectors (``--placement``)."""
LAYERS = ("mix", *LAYER_COMBINATIONS)
"""How the encoder's layers enter: learned scalar mixes, or a fixed combination."""
CLASSIFIERS = ("pool", "bcn")
"""Sentence classifiers: biLSTM + max/mean pooling + MLP, or CoVe's biattentive network."""


@dataclass(frozen=True)
class ModelSettings:
    """Hyperparameters of the task models (defaults: small models that train on a CPU)."""

    word_dim: int = 50
    char_cnn: bool = True
    char_dim: int = 16
    char_filters: int = 64
    char_width: int = 3
    char_ngram_dim: int = 0
    """The token representation: random word embeddings of ``word_dim``, a char CNN, and (size
    > 0) character n-gram embeddings (Hashimoto et al. 2016; CoVe's "Char", 100 there)."""
    hidden: int = 100
    lstm_layers: int = 2
    dropout: float = 0.5
    mlp_hidden: int = 100
    word_unk_rate: float = 0.5
    fixed_word_vectors: bool = False
    """The biLSTM (units per direction, layers), its dropout, the classifier's MLP, and the rate at
    which a training word seen once becomes UNK; ``fixed_word_vectors``: pretrained word vectors
    are not trained (CoVe's fixed GloVe; needs a word-vector file)."""
    placement: str = "none"
    layer_norm: bool = False
    mix_dropout: float = 0.5
    layers: str = "mix"
    """Contextual vectors: where they enter (``none``, ``input``, ``input+output``), layer norm
    and dropout of each mix, learned mixes or a fixed combination of layers."""
    tag_scheme: str = "bio"
    constrained: bool = True
    """Tagging: the tags predicted (``bio``, ``iob1``, ``bioul``), CRF transition constraints."""
    classifier: str = "pool"
    """Sentence classification: ``pool`` (:class:`SentenceClassifier`) or ``bcn``
    (:class:`~contextvec.tasks.models.bcn.BCNClassifier`, contextual vectors at its input only)."""

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, not {self.placement!r}")
        if self.layers not in LAYERS:
            raise ValueError(f"layers must be one of {LAYERS}, not {self.layers!r}")
        if self.lstm_layers < 1 or self.hidden < 1 or self.word_dim < 1 or self.char_ngram_dim < 0:
            raise ValueError(f"lstm_layers, hidden and word_dim must be >= 1, char_ngram_dim >= 0: {self}")
        if self.classifier not in CLASSIFIERS:
            raise ValueError(f"classifier must be one of {CLASSIFIERS}, not {self.classifier!r}")
        if self.classifier == "bcn" and self.placement == "input+output":
            raise ValueError("the BCN reads contextual vectors at its input only: placement input")
        if not 0 <= self.dropout < 1 or not 0 <= self.mix_dropout < 1 or not 0 <= self.word_unk_rate <= 1:
            raise ValueError(f"dropout rates must be in [0, 1): {self}")

    @property
    def num_mixes(self) -> int:
        return {"none": 0, "input": 1, "input+output": 2}[self.placement]
