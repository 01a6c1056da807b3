"""Training the encoders: the shared loop (``loop``), biLM (``bilm/``), BERT (``bert/``) and
CoVe's translation model (``mt/``), static word vectors (``word2vec``)."""

from contextvec.training.bilm.config import PRESETS, TrainConfig
from contextvec.training.bilm.model_files import Perplexity, evaluate_perplexity, load_model, save_model
from contextvec.training.bilm.trainer import Trainer
from contextvec.training.corpus import CorpusVocabulary

__all__ = ["PRESETS", "CorpusVocabulary", "Perplexity", "TrainConfig", "Trainer", "evaluate_perplexity",
           "load_model", "save_model"]
