"""CoVe (McCann et al. 2017): the encoder of an attentional En->De translation model (the
MT-LSTM, a biLSTM over fixed word vectors), reused as context vectors."""

from contextvec.encoders.cove.context import CoveContext
from contextvec.encoders.cove.encoder import CoveEncoder
from contextvec.encoders.cove.loader import (
    MODEL_TYPE,
    MODEL_TYPES,
    convert_salesforce_mt_lstm,
    load_cove_encoder,
    load_mt_lstm,
    save_cove_encoder,
)
from contextvec.encoders.cove.mt_lstm import MTLSTM, MTLSTMConfig
from contextvec.encoders.cove.seq2seq import Seq2Seq, Seq2SeqConfig

__all__ = [
    "MODEL_TYPE",
    "MODEL_TYPES",
    "MTLSTM",
    "CoveContext",
    "CoveEncoder",
    "MTLSTMConfig",
    "Seq2Seq",
    "Seq2SeqConfig",
    "convert_salesforce_mt_lstm",
    "load_cove_encoder",
    "load_mt_lstm",
    "save_cove_encoder",
]
