"""Saved task models: ``train-task --save-model DIR``, `load_task_model` and prediction.

**Layout of DIR.** ``task.json``: the format name and version, the task, its labels, the kind
(``features``: a frozen-feature model of ``contextvec.tasks.models``; ``fine-tune``: a
fine-tuned BERT), the model settings, the encoder it was trained on and the dev score training
reported. A frozen-feature model adds ``model.safetensors`` (its weights, without the frozen
encoder's), ``words.json`` and ``chars.json`` (its vocabularies, in id order; ``ngrams.json`` too with
character n-grams). A fine-tuned BERT
is an HF directory (``config.json`` with the labels, ``model.safetensors``, ``vocab.txt``)
that ``transformers`` reads too, plus ``task.json``. The directory is written beside its final
name and renamed into place, so it is complete or absent.

**The encoder** is not copied: ``task.json`` names it (a bundled model's name, or an absolute
path) with its fingerprint (``contextvec.encoders.fingerprint.model_identity``); loading
reloads it and refuses one whose fingerprint differs (other weights would give other vectors).

``task.json`` also records whether the task's items are sentence pairs (``pair``) and whether
it predicts floats (``regression``: no labels, a one-output head); loading refuses a file whose
record contradicts its task. The record is :class:`~contextvec.tasks.record.TaskRecord`
(validated field by field when read). Prediction (exactly the training run's scores) is
:mod:`contextvec.tasks.predictor`'s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from contextvec.api import load as load_encoder
from contextvec.documents.settings import Context
from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.loader import check_tokenizer_files
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.registry import SAVED_TASK_FILE
from contextvec.io import hf_bert
from contextvec.io.atomic import atomic_directory, atomic_path, output_target
from contextvec.io.native import read_safetensors
from contextvec.io.untrusted import model_file, read_json
from contextvec.tasks.finetune import head_model
from contextvec.tasks.models import Indexer, ModelSettings, TokenEmbedder, Vocabulary, contextual_embedder
from contextvec.tasks.predictor import FeatureTaskModel, FineTunedTaskModel, TaskModel
from contextvec.tasks.record import EncoderRef, FeaturePass, TaskRecord
from contextvec.tasks.spec import get_task
from contextvec.tasks.train import ENCODER_PREFIX

TASK_FILE = SAVED_TASK_FILE  # the registry recognises a saved task model by it
WEIGHTS, WORDS, CHARS = "model.safetensors", "words.json", "chars.json"
NGRAMS = "ngrams.json"
WORD_EMBEDDING = "tokens.words.weight"
NGRAM_EMBEDDING = "tokens.ngrams.embedding.weight"


def encoder_reference(model: str | None, options_file: str | None = None,
                      weight_file: str | None = None) -> dict:
    """How ``task.json`` names an encoder: a bundled name as given, paths made absolute."""
    def where(path: str | None) -> str | None:
        return str(Path(path).resolve()) if path is not None and Path(path).exists() else path

    return {"model": where(model), "options_file": where(options_file), "weight_file": where(weight_file)}


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_task_model(
    directory: str | os.PathLike,
    task: str,
    model: nn.Module,
    *,
    reported: dict,
    encoder: Encoder | None = None,
    encoder_ref: dict | None = None,
    features: dict | None = None,
) -> Path:
    """Write a frozen-feature task model (from :func:`~contextvec.tasks.train.train_task`, which
    keeps with it its :class:`~contextvec.tasks.models.Indexer`, the mentions it saw in training
    and its evaluation batch size) to ``directory``.

    ``reported``: the dev (and test) scores training reported; ``encoder``/``encoder_ref``: the
    encoder and how to load it again (:func:`encoder_reference`), None for a model without
    contextual vectors; ``features``: ``{"dtype", "embed_batch_size", "context"}`` of its feature
    pass (:class:`~contextvec.tasks.record.FeaturePass`).
    """
    indexer: Indexer = model.indexer
    settings: ModelSettings = model.settings
    if (encoder is None) != (settings.num_mixes == 0):
        raise ValueError(f"placement {settings.placement.value!r} and encoder {encoder!r} do not match")
    record = TaskRecord(
        kind="features", task=task, labels=tuple(indexer.labels), model_settings=settings,
        word_dim=int(model.tokens.words.weight.shape[1]),
        encoder=None if encoder is None else EncoderRef(**{**(encoder_ref or {"model": None}),
                                                           "fingerprint": model_identity(encoder)}),
        features=FeaturePass(**features) if features else FeaturePass(),
        eval_batch_size=model.eval_batch_size, reported=reported,
        seen_mentions=None if model.seen_mentions is None else frozenset(model.seen_mentions))
    directory = output_target(directory, directory=True)  # a link's target is what is replaced
    with atomic_directory(directory) as tmp:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
                 if not k.startswith(ENCODER_PREFIX)}
        with atomic_path(tmp / WEIGHTS) as path:  # also gives the file the usual permissions
            save_file(state, str(path))
        _write_json(tmp / WORDS, indexer.words.itos)
        _write_json(tmp / CHARS, indexer.chars.itos)
        if indexer.ngrams is not None:
            _write_json(tmp / NGRAMS, indexer.ngrams.itos)
        _write_json(tmp / TASK_FILE, record.to_json())
    return directory


def save_fine_tuned(
    directory: str | os.PathLike,
    task: str,
    model: nn.Module,
    *,
    base_model: str,
    reported: dict,
) -> Path:
    """Write a fine-tuned BERT (:func:`~contextvec.tasks.finetune.fine_tune`, which keeps with it
    the mentions it saw in training and its evaluation batch size) as an HF directory with the
    tokenizer of ``base_model``, plus ``task.json``."""
    record = TaskRecord(
        kind="fine-tune", task=task, labels=() if get_task(task).regression else tuple(model.labels),
        model_settings=ModelSettings(), encoder=EncoderRef(**encoder_reference(base_model)),
        eval_batch_size=model.eval_batch_size, reported=reported,
        seen_mentions=None if model.seen_mentions is None else frozenset(model.seen_mentions))
    directory = output_target(directory, directory=True)
    with atomic_directory(directory) as tmp:
        model.save_pretrained(tmp, tokenizer_dir=base_model)
        _write_json(tmp / TASK_FILE, record.to_json())
    return directory


def _read_json(path: Path) -> object:
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path.parent} is not a saved task model: {path.name} is missing")
    return read_json(model_file(path.parent, path.name))


def read_vocabulary(path: Path) -> Vocabulary:
    """A saved model's vocabulary file (a JSON list of its strings in id order, ``<pad>`` and
    ``<unk>`` first); one line naming the file if it is anything else."""
    itos = _read_json(path)
    if not (isinstance(itos, list) and itos[:2] == ["<pad>", "<unk>"]
            and all(isinstance(item, str) for item in itos)):
        raise ValueError(f"{path}: expected a JSON list of strings starting with \"<pad>\", \"<unk>\"")
    return Vocabulary(itos[2:])


def read_task_record(directory: Path) -> TaskRecord:
    """``task.json`` of the saved model in ``directory``, validated."""
    path = directory / TASK_FILE
    return TaskRecord.from_json(_read_json(path), path)


def encoder_for(ref: EncoderRef, directory: Path, encoder: Encoder | None, device: str) -> Encoder:
    """The encoder a saved model in ``directory`` was trained on: ``encoder`` if given, else
    loaded from ``ref``; refused (one line) if its fingerprint is not ``ref``'s."""
    if encoder is None:
        try:
            encoder = load_encoder(ref.model, options_file=ref.options_file,
                                   weight_file=ref.weight_file, device=device)
        except (FileNotFoundError, ValueError) as error:
            raise ValueError(f"{directory}: cannot load the encoder it was trained on "
                             f"({ref.name}): {error}") from None
    found = model_identity(encoder)
    if found != ref.fingerprint:
        raise ValueError(f"{directory} was trained on encoder {ref.name} "
                         f"with fingerprint {ref.fingerprint[:12]}..., but the encoder given has "
                         f"fingerprint {found[:12]}...: other weights give other vectors")
    return encoder


def load_task_model(directory: str | os.PathLike, encoder: Encoder | None = None,
                    device: str = "cpu") -> TaskModel:
    """A model saved by ``train-task --save-model DIR`` (frozen features or fine-tuned BERT),
    ready to [`predict`][contextvec.tasks.predictor.TaskModel.predict].

    Args:
        directory: the saved model's directory.
        encoder: the frozen encoder, if already loaded (its fingerprint is checked); by
            default the one named in ``task.json`` is loaded.
        device: where to run the model (and load its encoder).

    Returns:
        The loaded model, in eval mode.

    Raises:
        FileNotFoundError: no directory, or a file of the saved model missing.
        ValueError: not a task model, a format version this contextvec does not read, an
            encoder that cannot be loaded or whose fingerprint differs from the one trained
            on, weights that do not fit the configuration, or a model trained on features
            with document context (prediction reads sentences alone, which would give it
            other vectors than it was trained on).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory (a saved task model is one)")
    record = read_task_record(directory)
    if record.features is not None and record.features.context == Context.DOCUMENT:
        raise ValueError(f"{directory / TASK_FILE}: trained with --context document, and prediction reads "
                         "sentences alone (other vectors); retrain with --context sentence to predict")
    spec = get_task(record.task)
    if record.kind == "fine-tune":
        for name in (hf_bert.CONFIG_NAME, hf_bert.SAFETENSORS_NAME):  # before the HF reader opens them
            model_file(directory, name)
        check_tokenizer_files(directory)
        model = head_model(spec, directory, list(record.labels)).to(device).eval()
        return FineTunedTaskModel(spec, record, model, device, WordPieceTokenizer.from_directory(directory))
    settings = record.model_settings
    words, chars = read_vocabulary(directory / WORDS), read_vocabulary(directory / CHARS)
    contextual = None
    if settings.num_mixes:
        if record.encoder is None:
            raise ValueError(f"{directory / TASK_FILE}: placement {settings.placement.value!r} needs an "
                             "encoder, and encoder is null")
        encoder = encoder_for(record.encoder, directory, encoder, device)
        contextual = contextual_embedder(encoder, settings)
    ngrams = read_vocabulary(directory / NGRAMS) if settings.char_ngram_dim else None
    if not os.path.lexists(directory / WEIGHTS):
        raise FileNotFoundError(f"{directory} is not a saved task model: {WEIGHTS} is missing")
    weights = model_file(directory, WEIGHTS)
    state = read_safetensors(weights)
    # The sizes task.json declares are checked against the tensors the file holds before the
    # model is allocated: the embeddings first (their rows come from the vocabularies), then
    # every tensor of the model built on the meta device, which allocates nothing.
    for name, rows, dim in ((WORD_EMBEDDING, len(words), record.word_dim),
                            (NGRAM_EMBEDDING, len(ngrams or ()), settings.char_ngram_dim)):
        if name == NGRAM_EMBEDDING and not dim:
            continue
        held = tuple(state[name].shape) if name in state else None
        if held != (rows, dim):
            raise ValueError(f"{weights} does not fit {TASK_FILE}: its {name} has shape {held}, "
                             f"the vocabulary and model_settings make {(rows, dim)}")

    def build() -> nn.Module:
        shape = np.zeros((len(words), record.word_dim), dtype=np.float32)  # filled from the weights
        tokens = TokenEmbedder(words, chars, settings, shape, ngrams)
        return spec.model_class(settings)(tokens, list(record.labels), settings, contextual)

    with torch.device("meta"):
        like = {k: v for k, v in build().state_dict().items() if not k.startswith(ENCODER_PREFIX)}
    missing, unexpected = sorted(set(like) - set(state)), sorted(set(state) - set(like))
    if missing or unexpected:
        raise ValueError(f"{weights} does not fit {TASK_FILE}: missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}")
    for name, tensor in like.items():
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise ValueError(f"{weights} does not fit {TASK_FILE}: {name} has shape "
                             f"{tuple(state[name].shape)}, its settings make {tuple(tensor.shape)}")
    model = build()
    model.load_state_dict(state, strict=False)
    model.to(device).eval()
    return FeatureTaskModel(spec, record, model, device, Indexer(words, chars, list(record.labels), ngrams),
                            None if contextual is None else encoder)
