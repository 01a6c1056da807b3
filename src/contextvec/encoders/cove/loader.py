"""CoVe model directories (native format) and the released Salesforce MT-LSTM weights.

A directory of model_type ``"cove"`` holds the MT-LSTM alone: ``config.json`` (an
:class:`~contextvec.encoders.cove.mt_lstm.MTLSTMConfig`), ``model.safetensors`` (the
MT-LSTM's state dict: ``word_vectors``, ``unk``, ``layers.k.*``) and ``words.json`` (the word
list, row i of ``word_vectors`` = word i). A trained translation model (model_type
``"cove-seq2seq"``, written by ``contextvec train-mt``) loads as a CoVe encoder too: its
``encoder.*`` tensors are the MT-LSTM.

A directory may hold no word vectors (a converted Salesforce model: the release has the LSTM
only, GloVe is separate); :func:`load_cove_encoder` then needs ``word_vectors``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.cove.encoder import CoveEncoder
from contextvec.encoders.cove.mt_lstm import MTLSTM, MTLSTMConfig
from contextvec.encoders.cove.seq2seq import MODEL_TYPE as SEQ2SEQ_TYPE
from contextvec.encoders.cove.seq2seq import Seq2SeqConfig
from contextvec.encoders.family import Family, Form
from contextvec.io.cove import (
    LSTMSizes,
    expected_shapes,
    load_words,
    read_salesforce_checkpoint,
    salesforce_state_dict,
    save_words,
)
from contextvec.io.native import CONFIG_NAME, NativeFormatError, load_native, native_model_type, save_native
from contextvec.io.word_vectors import WordVectors, load_word_vectors

MODEL_TYPE = "cove"
MODEL_TYPES = (MODEL_TYPE, SEQ2SEQ_TYPE)
"""The native model types :func:`load_cove_encoder` reads."""

WordVectorSource = str | os.PathLike | WordVectors


def save_cove_encoder(encoder: CoveEncoder | MTLSTM, directory: str | os.PathLike) -> Path:
    """Write the MT-LSTM (with its word vectors and word list) as a ``"cove"`` directory."""
    mt_lstm = encoder.mt_lstm if isinstance(encoder, CoveEncoder) else encoder
    directory = save_native(directory, MODEL_TYPE, mt_lstm.config.to_dict(), mt_lstm.state_dict())
    save_words(mt_lstm.words, directory)
    return directory


def _vectors(source: WordVectorSource) -> WordVectors:
    return source if isinstance(source, WordVectors) else load_word_vectors(source)


def _check_shapes(path: Path, config: MTLSTMConfig, state: dict[str, torch.Tensor],
                  with_vectors: bool) -> None:
    """Refuse a ``config.json`` whose sizes the tensors do not have, before the MT-LSTM is built
    (building one allocates what the configuration declares)."""
    sizes = LSTMSizes(config.input_dim, config.hidden_size, config.num_layers)
    for field, value in sizes._asdict().items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise NativeFormatError(f"{path / CONFIG_NAME}: {field} {value!r} is not a whole number")
    expected = {**expected_shapes(sizes), "unk": (config.input_dim,)}
    if with_vectors:
        expected["word_vectors"] = (-1, config.input_dim)
    for key, shape in expected.items():
        if key not in state:
            raise NativeFormatError(f"{path}: no tensor {key!r}")
        found = tuple(state[key].shape)
        if len(found) != len(shape) or any(n not in (-1, m) for n, m in zip(shape, found, strict=True)):
            raise NativeFormatError(f"{path}: {key} has shape {found}; its configuration makes "
                                    f"{tuple('any' if n < 0 else n for n in shape)}")


def load_mt_lstm(path: str | os.PathLike, word_vectors: WordVectorSource | None = None) -> MTLSTM:
    """The MT-LSTM of a ``"cove"`` or ``"cove-seq2seq"`` directory.

    ``word_vectors`` (a file or loaded vectors) replaces the directory's vectors and word list;
    it is required when the directory has none.
    """
    path = Path(path)
    model_type, config, state = load_native(path)
    try:
        if model_type == SEQ2SEQ_TYPE:
            mt_config = Seq2SeqConfig.from_dict(config).encoder
        elif model_type == MODEL_TYPE:
            mt_config = MTLSTMConfig.from_dict(config)
    except (ValueError, TypeError) as e:  # the configs' checks, and values they did not expect
        raise NativeFormatError(f"{path / CONFIG_NAME}: {e}") from None
    if model_type == SEQ2SEQ_TYPE:
        state = {k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")}
    elif model_type != MODEL_TYPE:
        raise NativeFormatError(f"{path}: model_type {model_type!r} is not a CoVe model {MODEL_TYPES}")
    _check_shapes(path, mt_config, state, with_vectors=word_vectors is None)
    if word_vectors is not None:
        loaded = _vectors(word_vectors)
        if loaded.dim != mt_config.input_dim:
            raise ValueError(f"word vectors of {loaded.dim} dims for an MT-LSTM that reads "
                             f"{mt_config.input_dim}")
        words, vectors = loaded.words, torch.from_numpy(loaded.vectors)
    else:
        words = load_words(path)
        if not words:
            raise ValueError(f"{path} holds no word vectors (a converted Salesforce MT-LSTM?): "
                             "pass word_vectors (the GloVe file it was trained with)")
        vectors = state["word_vectors"]
    try:
        mt_lstm = MTLSTM(mt_config, words, vectors)
    except (TypeError, ValueError) as e:  # sizes and flags of other types than the config's
        raise NativeFormatError(f"{path / CONFIG_NAME}: {e}") from None
    state = {k: v for k, v in state.items() if k != "word_vectors"}
    missing, unexpected = mt_lstm.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "word_vectors"]
    if missing or unexpected:
        raise NativeFormatError(f"{path}: missing tensors {missing}, unexpected {unexpected}")
    return mt_lstm


def load_cove_encoder(
    path: str | os.PathLike,
    word_vectors: WordVectorSource | None = None,
    device: str | torch.device = "cpu",
) -> CoveEncoder:
    """A :class:`CoveEncoder` (eval mode) from a ``"cove"`` or ``"cove-seq2seq"`` directory;
    see :func:`load_mt_lstm` for ``word_vectors``."""
    return CoveEncoder(load_mt_lstm(path, word_vectors)).to(device).eval()


def convert_salesforce_mt_lstm(
    pt_file: str | os.PathLike,
    out_dir: str | os.PathLike,
    word_vectors: WordVectorSource | None = None,
    lowercase: bool = False,
) -> Path:
    """Convert Salesforce's released MT-LSTM (``wmtlstm-*.pth``, a pickled state dict, read
    with ``weights_only=True`` so that no code runs) into a ``"cove"`` directory.

    The release has no word vectors: give ``word_vectors`` (GloVe 840B, cased, as CoVe was
    trained with: ``lowercase=False``) to make a complete model, or pass them to
    :func:`load_cove_encoder` later.
    """
    sizes, tensors = salesforce_state_dict(read_salesforce_checkpoint(pt_file))
    config = MTLSTMConfig(**sizes._asdict(), lowercase=lowercase)
    words: list[str] = []
    vectors = None
    if word_vectors is not None:
        loaded = _vectors(word_vectors)
        if loaded.dim != config.input_dim:
            raise ValueError(f"word vectors of {loaded.dim} dims for an LSTM that reads {config.input_dim}")
        words, vectors = loaded.words, torch.from_numpy(loaded.vectors)
    mt_lstm = MTLSTM(config, words, vectors)
    mt_lstm.load_state_dict(tensors, strict=False)
    return save_cove_encoder(mt_lstm, out_dir)


def _save(encoder: Encoder, directory: Path) -> Path:
    if not isinstance(encoder, CoveEncoder):
        raise TypeError(f"cannot save {type(encoder).__name__} as {MODEL_TYPE}")
    return save_cove_encoder(encoder, directory)


COVE = Family(
    MODEL_TYPE, lambda path: native_model_type(path) in MODEL_TYPES,
    lambda path, device: load_cove_encoder(path, device=device), "a CoVe model",
    saves=CoveEncoder, writes={Form.NATIVE: _save},
    format="contextvec native, model_type cove or cove-seq2seq "
           "(config.json + model.safetensors + words.json)",
    facts=lambda encoder: {"vocabulary": f"{len(encoder.mt_lstm.words)} words "
                                         f"({encoder.mt_lstm.config.input_dim}-d vectors)",
                           "MT-LSTM": f"{encoder.mt_lstm.config.num_layers} layers"},
    converts_to=(Form.NATIVE,),
)
