"""ELMo: character-CNN token encoder under forward and backward LSTM language models."""

from contextvec.encoders.bilm.char_cnn import CharCNN, Highway
from contextvec.encoders.bilm.config import MODEL_TYPE, PRESETS, BiLMConfig, ConfigError
from contextvec.encoders.bilm.encoder import ElmoEncoder
from contextvec.encoders.bilm.lstm import ProjectedLSTMLayer
from contextvec.encoders.bilm.model import BiLMOutput, ElmoBiLM

__all__ = [
    "MODEL_TYPE",
    "PRESETS",
    "BiLMConfig",
    "BiLMOutput",
    "CharCNN",
    "ConfigError",
    "ElmoBiLM",
    "ElmoEncoder",
    "Highway",
    "ProjectedLSTMLayer",
]
