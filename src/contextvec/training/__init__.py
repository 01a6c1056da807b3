"""Training the encoders: the shared loop (``loop``), biLM (``bilm/``), BERT (``bert/``) and
CoVe's translation model (``mt/``), static word vectors (``word2vec``)."""

import warnings
from typing import Any

from contextvec.training.bilm.config import PRESETS, BiLMTrainSettings
from contextvec.training.bilm.model_files import Perplexity, evaluate_perplexity, load_model, save_model
from contextvec.training.bilm.trainer import Trainer
from contextvec.training.corpus import CorpusVocabulary

__all__ = ["PRESETS", "BiLMTrainSettings", "CorpusVocabulary", "Perplexity", "Trainer",
           "evaluate_perplexity", "load_model", "save_model"]

# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
_RENAMED = {"TrainConfig": "BiLMTrainSettings"}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        warnings.warn(f"{__name__}.{name} is renamed {_RENAMED[name]}; the old name goes in 0.3.0",
                      DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
