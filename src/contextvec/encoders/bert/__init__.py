"""BERT: HF checkpoints as word-level contextual vectors (see ``encoder.py``).

``BertEncoder`` is contextvec's word-level :class:`~contextvec.encoders.base.Encoder`; the
transformer layer stack (HF's ``BertEncoder``, attribute ``encoder``) is ``model.BertLayerStack``.
"""

from contextvec.encoders.bert.combine import LayerCombination, combine_layers
from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.encoder import SUBWORD_POOLING, BertEncoder, window_spans
from contextvec.encoders.bert.loader import (
    build_model,
    load_bert_encoder,
    load_bert_model,
    read_bert_dir,
)
from contextvec.encoders.bert.model import BertModel, BertModelOutput
from contextvec.encoders.bert.tokenizer import WordPieces, WordPieceTokenizer
from contextvec.io.hf_bert import BertCheckpointError

MODEL_TYPE = "bert"

__all__ = [
    "MODEL_TYPE",
    "SUBWORD_POOLING",
    "BertCheckpointError",
    "BertConfig",
    "BertEncoder",
    "BertModel",
    "BertModelOutput",
    "LayerCombination",
    "WordPieceTokenizer",
    "WordPieces",
    "build_model",
    "combine_layers",
    "load_bert_encoder",
    "load_bert_model",
    "read_bert_dir",
    "window_spans",
]

