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
record contradicts its task. Prediction (exactly the training run's scores) is
:mod:`contextvec.tasks.predictor`'s.
"""

from __future__ import annotations

import json
import os
import shutil
import typing
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from contextvec.api import load as load_encoder
from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.loader import check_tokenizer_files
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.registry import SAVED_TASK_FILE
from contextvec.io import hf_bert
from contextvec.io.atomic import atomic_path, output_target
from contextvec.io.native import read_safetensors
from contextvec.io.untrusted import model_file, read_json
from contextvec.tasks.finetune import head_model
from contextvec.tasks.models import Indexer, ModelSettings, TokenEmbedder, Vocabulary, contextual_embedder
from contextvec.tasks.predictor import TaskModel
from contextvec.tasks.spec import get_task
from contextvec.tasks.train import ENCODER_PREFIX

FORMAT, VERSION = "contextvec-task-model", 1
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


def _publish(tmp: Path, directory: Path) -> None:
    """Rename the finished ``tmp`` onto ``directory`` (an existing one is replaced)."""
    old = directory.with_name(f".{directory.name}.old{os.getpid()}")
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def _staging(directory: str | os.PathLike) -> tuple[Path, Path]:
    directory = output_target(directory, directory=True)  # a link's target is what is replaced
    tmp = directory.with_name(f".{directory.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return directory, tmp


def _finish(tmp: Path, directory: Path, record: dict, eval_batch_size: int, reported: dict,
            seen_mentions: Iterable[str] | None) -> None:
    """Write ``task.json`` (the kind's ``record`` plus what every kind records), then publish."""
    spec = get_task(record["task"])
    _write_json(tmp / TASK_FILE, {
        "format": FORMAT, "version": VERSION, **record, "pair": spec.pair, "regression": spec.regression,
        "eval_batch_size": eval_batch_size,
        "reported": reported, "seen_mentions": None if seen_mentions is None else sorted(seen_mentions),
    })
    _publish(tmp, directory)


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
    contextual vectors; ``features``: ``{"dtype", "embed_batch_size"}`` of its feature pass.
    """
    indexer: Indexer = model.indexer
    settings: ModelSettings = model.settings
    if (encoder is None) != (settings.num_mixes == 0):
        raise ValueError(f"placement {settings.placement.value!r} and encoder {encoder!r} do not match")
    directory, tmp = _staging(directory)
    try:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
                 if not k.startswith(ENCODER_PREFIX)}
        with atomic_path(tmp / WEIGHTS) as path:  # also gives the file the usual permissions
            save_file(state, str(path))
        _write_json(tmp / WORDS, indexer.words.itos)
        _write_json(tmp / CHARS, indexer.chars.itos)
        if indexer.ngrams is not None:
            _write_json(tmp / NGRAMS, indexer.ngrams.itos)
        _finish(tmp, directory, {
            "kind": "features", "task": task, "labels": list(indexer.labels),
            "model_settings": asdict(settings), "word_dim": int(model.tokens.words.weight.shape[1]),
            "encoder": None if encoder is None else {**(encoder_ref or {}),
                                                     "fingerprint": model_identity(encoder)},
            "features": features or {"dtype": "float32", "embed_batch_size": 64},
        }, model.eval_batch_size, reported, model.seen_mentions)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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
    directory, tmp = _staging(directory)
    try:
        model.save_pretrained(tmp, tokenizer_dir=base_model)
        _finish(tmp, directory, {
            "kind": "fine-tune", "task": task,
            "labels": [] if get_task(task).regression else list(model.labels),
            "model_settings": {"tag_scheme": "bio"},
            "encoder": {**encoder_reference(base_model), "fingerprint": None},
        }, model.eval_batch_size, reported, model.seen_mentions)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def _read_json(path: Path) -> object:
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path.parent} is not a saved task model: {path.name} is missing")
    return read_json(model_file(path.parent, path.name))


def _vocabulary(path: Path) -> Vocabulary:
    itos = _read_json(path)
    if not (isinstance(itos, list) and itos[:2] == ["<pad>", "<unk>"]
            and all(isinstance(item, str) for item in itos)):
        raise ValueError(f"{path}: expected a JSON list of strings starting with \"<pad>\", \"<unk>\"")
    return Vocabulary(itos[2:])


def _check_config(directory: Path) -> dict:
    config = _read_json(directory / TASK_FILE)
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{directory / TASK_FILE}: not a contextvec task model (format {FORMAT!r})")
    if config.get("version") != VERSION:
        raise ValueError(f"{directory / TASK_FILE}: format version {config.get('version')!r}; "
                         f"this contextvec reads version {VERSION}")
    _check_fields(directory / TASK_FILE, config)
    return config


_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _is(value: object, kind: type) -> bool:
    """``isinstance``, where a bool is not a number (JSON's true is not 1) and an int is a float."""
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


def _check_fields(path: Path, config: dict) -> None:
    """Every field ``task.json`` is read for has its type, before anything is built from it: a
    file from elsewhere is data, and a wrong type is one line naming the field."""
    def need(ok: bool, field: str, want: str, value: object) -> None:
        if not ok:
            raise ValueError(f"{path}: {field} must be {want}, not {json.dumps(value)[:60]}")

    kind, labels = config.get("kind"), config.get("labels")
    need(kind in ("features", "fine-tune"), "kind", "'features' or 'fine-tune'", kind)
    need(isinstance(config.get("task"), str), "task", "a task's name", config.get("task"))
    spec = get_task(config["task"])
    for field in ("pair", "regression"):  # absent in files of single-sentence tasks written before
        need(config.get(field, False) is getattr(spec, field), field,
             f"{str(getattr(spec, field)).lower()} for task {spec.name}", config.get(field))
    need(isinstance(labels, list) and bool(labels) != spec.regression
         and all(isinstance(x, str) for x in labels) and len(set(labels)) == len(labels), "labels",
         "[] (a regression task)" if spec.regression else "a list of distinct strings", labels)
    seen = config.get("seen_mentions")
    need(seen is None or isinstance(seen, list) and all(isinstance(x, str) for x in seen),
         "seen_mentions", "null or a list of strings", seen)
    reported = config.get("reported")
    dev = reported.get("dev") if isinstance(reported, dict) else None
    need(reported is None or isinstance(reported, dict) and (dev is None or _is(dev, float)),
         "reported", "an object with a numeric dev score", reported)
    if kind == "fine-tune":
        return
    for field in ("word_dim", "eval_batch_size"):
        value = config.get(field)
        need(_is(value, int) and value >= 1, field, "a positive integer", value)
    features = config.get("features")
    need(isinstance(features, dict) and features.get("dtype") in ("float32", "float16")
         and _is(features.get("embed_batch_size"), int) and features["embed_batch_size"] >= 1,
         "features", "{dtype: float32|float16, embed_batch_size: a positive integer}", features)
    encoder = config.get("encoder")
    need(encoder is None or isinstance(encoder, dict) and isinstance(encoder.get("fingerprint"), str)
         and all(encoder.get(k) is None or isinstance(encoder[k], str)
                 for k in ("model", "options_file", "weight_file")),
         "encoder", "null or {model, options_file, weight_file, fingerprint} as strings", encoder)
    settings = config.get("model_settings")
    need(isinstance(settings, dict), "model_settings", "an object", settings)
    hints = typing.get_type_hints(ModelSettings)
    for name, value in settings.items():
        want = hints.get(name)
        need(want is not None, f"model_settings.{name}", f"one of {', '.join(hints)}", name)
        basic = want if want in (int, float, bool) else str  # the enums are stored by value
        need(_is(value, basic), f"model_settings.{name}", _KIND_NAMES[basic], value)
    try:
        ModelSettings(**settings)
    except ValueError as error:
        raise ValueError(f"{path}: model_settings: {error}") from None


def _encoder_for(config: dict, directory: Path, encoder: Encoder | None, device: str) -> Encoder:
    ref = config["encoder"]
    if encoder is None:
        try:
            encoder = load_encoder(ref["model"], options_file=ref.get("options_file"),
                                   weight_file=ref.get("weight_file"), device=device)
        except (FileNotFoundError, ValueError) as error:
            raise ValueError(f"{directory}: cannot load the encoder it was trained on "
                             f"({ref['model'] or ref['options_file']}): {error}") from None
    found = model_identity(encoder)
    if found != ref["fingerprint"]:
        raise ValueError(f"{directory} was trained on encoder {ref['model'] or ref['options_file']} "
                         f"with fingerprint {ref['fingerprint'][:12]}..., but the encoder given has "
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
            on, or weights that do not fit the configuration.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory (a saved task model is one)")
    config = _check_config(directory)
    spec = get_task(config["task"])
    if config["kind"] == "fine-tune":
        for name in (hf_bert.CONFIG_NAME, hf_bert.SAFETENSORS_NAME):  # before the HF reader opens them
            model_file(directory, name)
        check_tokenizer_files(directory)
        model = head_model(spec, directory, config["labels"]).to(device).eval()
        return TaskModel(spec, config, model, device, tokenizer=WordPieceTokenizer.from_directory(directory))
    settings = ModelSettings(**config["model_settings"])
    words, chars = _vocabulary(directory / WORDS), _vocabulary(directory / CHARS)
    contextual = None
    if settings.num_mixes:
        encoder = _encoder_for(config, directory, encoder, device)
        contextual = contextual_embedder(encoder, settings)
    ngrams = _vocabulary(directory / NGRAMS) if settings.char_ngram_dim else None
    if not os.path.lexists(directory / WEIGHTS):
        raise FileNotFoundError(f"{directory} is not a saved task model: {WEIGHTS} is missing")
    weights = model_file(directory, WEIGHTS)
    state = read_safetensors(weights)
    # The sizes task.json declares are checked against the tensors the file holds before the
    # model is allocated: the embeddings first (their rows come from the vocabularies), then
    # every tensor of the model built on the meta device, which allocates nothing.
    for name, rows, dim in ((WORD_EMBEDDING, len(words), config["word_dim"]),
                            (NGRAM_EMBEDDING, len(ngrams or ()), settings.char_ngram_dim)):
        if name == NGRAM_EMBEDDING and not dim:
            continue
        held = tuple(state[name].shape) if name in state else None
        if held != (rows, dim):
            raise ValueError(f"{weights} does not fit {TASK_FILE}: its {name} has shape {held}, "
                             f"the vocabulary and model_settings make {(rows, dim)}")

    def build() -> nn.Module:
        shape = np.zeros((len(words), config["word_dim"]), dtype=np.float32)  # filled from the weights
        tokens = TokenEmbedder(words, chars, settings, shape, ngrams)
        return spec.model_class(settings)(tokens, config["labels"], settings, contextual)

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
    return TaskModel(spec, config, model, device, Indexer(words, chars, config["labels"], ngrams),
                     None if contextual is None else encoder)
