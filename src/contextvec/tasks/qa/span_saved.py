"""Saved span models (:func:`save_span_model`, :func:`load_span_model`).

``task.json`` is the question-answering record of :mod:`contextvec.tasks.qa.record` (kind
``features``); ``span_model.json`` holds this model's own record (format
``contextvec-span-model`` and its version, the model and span settings, the word-embedding width,
the feature dtype and encoder batch size, and the encoder as
:func:`~contextvec.tasks.saved.encoder_reference` names it with its fingerprint);
``model.safetensors`` its weights without the encoder's; ``words.json``, ``chars.json``
(``ngrams.json``) its vocabularies. Loading reloads the encoder and refuses one whose
fingerprint differs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureSettings
from contextvec.io.atomic import atomic_directory, atomic_path
from contextvec.io.native import read_safetensors
from contextvec.io.untrusted import model_file, read_json
from contextvec.tasks.models import Indexer, ModelSettings
from contextvec.tasks.qa.frozen import TOKENIZER, SpanReader, build_span_model, check_encoder
from contextvec.tasks.qa.record import QARecord, read_record, write_record
from contextvec.tasks.qa.span_model import SpanSettings
from contextvec.tasks.saved import CHARS, NGRAMS, WEIGHTS, WORDS, EncoderRef, encoder_for, read_vocabulary
from contextvec.tasks.train import ENCODER_PREFIX

SPAN_FORMAT, SPAN_VERSION = "contextvec-span-model", 1
SPAN_FILE = "span_model.json"


def save_span_model(directory: str | os.PathLike, reader: SpanReader, *, encoder: Encoder | None = None,
                    encoder_ref: dict | None = None) -> Path:
    """Write a trained :class:`SpanReader` to ``directory`` (see the module docstring).

    ``encoder``/``encoder_ref``: the encoder and how to load it again
    (:func:`~contextvec.tasks.saved.encoder_reference`), None for the no-contextual baseline.
    """
    model = reader.model
    check_encoder(model.settings, encoder)
    indexer = reader.indexer
    record = {
        "format": SPAN_FORMAT, "version": SPAN_VERSION, "tokenizer": TOKENIZER,
        "model_settings": asdict(model.settings), "span_settings": asdict(model.span),
        "word_dim": int(model.tokens.words.weight.shape[1]),
        "features": {"dtype": reader.features.dtype.value, "embed_batch_size": reader.features.batch_size},
        "encoder": None if encoder is None else {**(encoder_ref or {}),
                                                 "fingerprint": model_identity(encoder)},
    }
    with atomic_directory(directory) as tmp:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
                 if not k.startswith(ENCODER_PREFIX)}
        with atomic_path(tmp / WEIGHTS) as path:
            save_file(state, str(path))
        for name, vocabulary in ((WORDS, indexer.words), (CHARS, indexer.chars), (NGRAMS, indexer.ngrams)):
            if vocabulary is not None:
                text = json.dumps(vocabulary.itos, ensure_ascii=False)
                (tmp / name).write_text(text + "\n", encoding="utf-8")
        (tmp / SPAN_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        write_record(tmp, QARecord("features", eval_batch_size=reader.batch_size, reported=reader.reported))
    return Path(directory)


def _settings(path: Path, kind: type, value: object) -> object:
    """``kind(**value)`` or one line naming the file and what is wrong."""
    names = {f.name for f in fields(kind)}
    if not isinstance(value, dict) or set(value) - names:
        raise ValueError(f"{path}: {kind.__name__} must be an object with fields among "
                         f"{', '.join(sorted(names))}")
    try:
        return kind(**value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {kind.__name__}: {error}") from None


def _read_span_record(directory: Path) -> dict:
    if not os.path.lexists(directory / SPAN_FILE):
        raise FileNotFoundError(f"{directory} is not a saved span model: {SPAN_FILE} is missing")
    path = model_file(directory, SPAN_FILE)
    config = read_json(path)
    if not isinstance(config, dict) or config.get("format") != SPAN_FORMAT:
        raise ValueError(f"{path}: not a contextvec span model (format {SPAN_FORMAT!r})")
    if config.get("version") != SPAN_VERSION:
        raise ValueError(f"{path}: format version {config.get('version')!r}; this contextvec reads "
                         f"version {SPAN_VERSION}")
    if config.get("tokenizer") != TOKENIZER:
        raise ValueError(f"{path}: tokenizer must be {TOKENIZER!r}, not {config.get('tokenizer')!r}")
    word_dim, features, ref = config.get("word_dim"), config.get("features"), config.get("encoder")
    if isinstance(word_dim, bool) or not isinstance(word_dim, int) or word_dim < 1:
        raise ValueError(f"{path}: word_dim must be a positive integer, not {word_dim!r}")
    if not (isinstance(features, dict) and set(features) == {"dtype", "embed_batch_size"}
            and isinstance(features["embed_batch_size"], int)):
        raise ValueError(f"{path}: features must be {{dtype: float32|float16, embed_batch_size: an integer}}")
    if ref is not None and not (isinstance(ref, dict) and isinstance(ref.get("fingerprint"), str) and all(
            ref.get(k) is None or isinstance(ref[k], str) for k in ("model", "options_file", "weight_file"))):
        raise ValueError(f"{path}: encoder must be null or {{model, options_file, weight_file, fingerprint}} "
                         "as strings")
    config["model_settings"] = _settings(path, ModelSettings, config.get("model_settings"))
    config["span_settings"] = _settings(path, SpanSettings, config.get("span_settings"))
    config["features"] = _settings(path, FeatureSettings, {"dtype": features["dtype"],
                                                           "batch_size": features["embed_batch_size"]})
    if (ref is None) != (config["model_settings"].num_mixes == 0):
        raise ValueError(f"{path}: placement {config['model_settings'].placement.value!r} and encoder "
                         f"{json.dumps(ref)[:60]} do not match")
    return config


def load_span_model(directory: str | os.PathLike, record: QARecord | None = None, device: str = "cpu",
                    encoder: Encoder | None = None) -> SpanReader:
    """A span model saved by :func:`save_span_model`, ready to answer.

    Args:
        directory: the saved model's directory.
        record: its ``task.json`` already read (:func:`~contextvec.tasks.qa.record.read_record`).
        device: where to run the model (and load its encoder).
        encoder: the frozen encoder, if already loaded (its fingerprint is checked); by default
            the one ``span_model.json`` names is loaded.

    Raises:
        FileNotFoundError: a file of the saved model missing.
        ValueError: not a span model, a format version this contextvec does not read, an
            encoder that cannot be loaded or whose fingerprint differs from the one trained on,
            or weights that do not fit the record.
    """
    directory = Path(directory)
    record = record or read_record(directory)
    config = _read_span_record(directory)
    settings: ModelSettings = config["model_settings"]
    words, chars = read_vocabulary(directory / WORDS), read_vocabulary(directory / CHARS)
    ngrams = read_vocabulary(directory / NGRAMS) if settings.char_ngram_dim else None
    encoder = (encoder_for(EncoderRef.from_json(config["encoder"]), directory, encoder, device)
               if settings.num_mixes else None)
    if not os.path.lexists(directory / WEIGHTS):
        raise FileNotFoundError(f"{directory} is not a saved span model: {WEIGHTS} is missing")
    weights = model_file(directory, WEIGHTS)
    state = read_safetensors(weights)

    def build() -> nn.Module:
        shape = np.zeros((len(words), config["word_dim"]), dtype=np.float32)  # filled from the weights
        return build_span_model(words, chars, ngrams, settings, config["span_settings"], encoder, shape)

    # Every tensor's shape is checked against a model built on the meta device (which allocates
    # nothing) before the real one is built: the record is data.
    with torch.device("meta"):
        like = {k: tuple(v.shape) for k, v in build().state_dict().items()
                if not k.startswith(ENCODER_PREFIX)}
    held = {k: tuple(v.shape) for k, v in state.items()}
    if like != held:
        wrong = sorted(k for k in set(like) | set(held) if like.get(k) != held.get(k))
        raise ValueError(f"{weights} does not fit {SPAN_FILE}: {wrong[0]} has shape {held.get(wrong[0])}, "
                         f"the record makes {like.get(wrong[0])}")
    model = build()
    model.load_state_dict(state, strict=False)
    reader = SpanReader(model.to(device), Indexer(words, chars, [], ngrams), encoder, config["features"],
                        record.eval_batch_size, device)
    reader.reported = dict(record.reported)
    return reader
