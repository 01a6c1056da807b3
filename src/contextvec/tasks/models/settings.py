"""Hyperparameters of the task models (:class:`ModelSettings`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contextvec.choices import checked_choice, spellings
from contextvec.encoders.bert.combine import LayerCombination
from contextvec.tasks.schemes import TagScheme


class Placement(StrEnum):
    """Where contextual vectors enter a task model."""

    NONE = "none"
    """Nowhere: a model without contextual vectors (no encoder)."""
    INPUT = "input"
    """One mix, beside the token representation at the biLSTM's input."""
    INPUT_OUTPUT = "input+output"
    """Two mixes: at the biLSTM's input and beside its output."""


# The fixed combinations' members are LayerCombination's, so their spellings are written once.
ModelLayers = StrEnum("ModelLayers", [("MIX", "mix"), *((c.name, c.value) for c in LayerCombination)],
                      module=__name__)
ModelLayers.__doc__ = """How the encoder's layers enter a task model: ``MIX``, learned scalar mixes of
all layers, or one fixed :class:`~contextvec.encoders.bert.combine.LayerCombination` (``LAST``,
``SUM_LAST_4``, ``CONCAT_LAST_4``) with no mix weights."""


class Classifier(StrEnum):
    """The head of a sentence classification model."""

    POOL = "pool"
    """A biLSTM, max and mean pooling, an MLP (:class:`SentenceClassifier`)."""
    BCN = "bcn"
    """CoVe's biattentive classification network (:class:`BCNClassifier`)."""


LAYERS = spellings(ModelLayers)
MIX_PLACEMENTS = tuple(p.value for p in Placement if p is not Placement.NONE)
"""Where the mixes enter a model that reads contextual vectors (``--placement``)."""
CLASSIFIERS = spellings(Classifier)


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
    placement: Placement = Placement.NONE
    layer_norm: bool = False
    mix_dropout: float = 0.5
    layers: ModelLayers = ModelLayers.MIX
    """Contextual vectors: where they enter (``none``, ``input``, ``input+output``), layer norm
    and dropout of each mix, learned mixes or a fixed combination of layers (each enum field also
    takes its spelling)."""
    tag_scheme: TagScheme = TagScheme.BIO
    constrained: bool = True
    """Tagging: the tags predicted (``bio``, ``iob1``, ``bioul``), CRF transition constraints."""
    classifier: Classifier = Classifier.POOL
    """Sentence classification: ``pool`` (:class:`SentenceClassifier`) or ``bcn``
    (:class:`~contextvec.tasks.models.bcn.BCNClassifier`, contextual vectors at its input only)."""

    def __post_init__(self) -> None:
        for name, kind in (("placement", Placement), ("layers", ModelLayers), ("tag_scheme", TagScheme),
                           ("classifier", Classifier)):
            object.__setattr__(self, name, checked_choice(kind, getattr(self, name), name))
        if self.lstm_layers < 1 or self.hidden < 1 or self.word_dim < 1 or self.char_ngram_dim < 0:
            raise ValueError("lstm_layers, hidden and word_dim must be >= 1, char_ngram_dim >= 0, not "
                             f"{self.lstm_layers}, {self.hidden}, {self.word_dim}, {self.char_ngram_dim}")
        if self.classifier is Classifier.BCN and self.placement is Placement.INPUT_OUTPUT:
            raise ValueError("the BCN reads contextual vectors at its input only: placement input")
        if not 0 <= self.dropout < 1 or not 0 <= self.mix_dropout < 1 or not 0 <= self.word_unk_rate <= 1:
            raise ValueError("dropout rates must be in [0, 1), word_unk_rate in [0, 1], not dropout "
                             f"{self.dropout}, mix_dropout {self.mix_dropout}, "
                             f"word_unk_rate {self.word_unk_rate}")

    @property
    def num_mixes(self) -> int:
        return {Placement.NONE: 0, Placement.INPUT: 1, Placement.INPUT_OUTPUT: 2}[self.placement]
