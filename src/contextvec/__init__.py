"""contextvec: deep contextualized word representations (ELMo, CoVe, BERT).

>>> import contextvec
>>> encoder = contextvec.load("path/to/model")           # doctest: +SKIP
>>> vectors = encoder.embed(["The bank was robbed ."])    # doctest: +SKIP
>>> vectors[0].shape                                      # (layers, tokens, dim)  # doctest: +SKIP
"""

from contextvec.api import ModelNotFoundError, load, save
from contextvec.embedder import ContextualEmbedder, ScalarMix
from contextvec.encoders import Encoder

__version__ = "0.1.0"

__all__ = ["ContextualEmbedder", "Encoder", "ModelNotFoundError", "ScalarMix", "load", "save"]
