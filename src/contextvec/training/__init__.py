"""biLM training: corpora and vocabulary, LM windows, the LM head, the training loop."""

from contextvec.training.config import PRESETS, TrainConfig
from contextvec.training.corpus import Vocabulary
from contextvec.training.trainer import Perplexity, Trainer, evaluate, load_model, save_model

__all__ = ["PRESETS", "Perplexity", "TrainConfig", "Trainer", "Vocabulary", "evaluate",
           "load_model", "save_model"]
