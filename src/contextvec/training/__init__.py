"""Training the encoders: the shared loop (``loop``), biLM (``bilm/``), BERT (``bert/``) and
CoVe's translation model (``mt/``), static word vectors (``word2vec``)."""

from contextvec.renamed import renamed_names
from contextvec.training.bilm.config import PRESETS, BiLMTrainSettings
from contextvec.training.bilm.model_files import Perplexity, evaluate_perplexity, load_model, save_model
from contextvec.training.bilm.trainer import Trainer
from contextvec.training.corpus import CorpusVocabulary

__all__ = ["PRESETS", "BiLMTrainSettings", "CorpusVocabulary", "Perplexity", "Trainer",
           "evaluate_perplexity", "load_model", "save_model"]

# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
__getattr__ = renamed_names(__name__, globals(), {"TrainConfig": "BiLMTrainSettings"})
