"""ELMoForManyLangs (HIT-SCIR) models: its directories and their native form (see
docs/elmo-formats.md)."""

from contextvec.encoders.manylangs.config import MODEL_TYPE, ManyLangsConfig, ManyLangsVocabulary
from contextvec.encoders.manylangs.encoder import ManyLangsEncoder
from contextvec.encoders.manylangs.loader import MANYLANGS, MANYLANGS_NATIVE, read_manylangs_bilm
from contextvec.encoders.manylangs.model import ManyLangsBiLM

__all__ = [
    "MANYLANGS",
    "MANYLANGS_NATIVE",
    "MODEL_TYPE",
    "ManyLangsBiLM",
    "ManyLangsConfig",
    "ManyLangsEncoder",
    "ManyLangsVocabulary",
    "read_manylangs_bilm",
]
