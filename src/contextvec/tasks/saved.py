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

**Exactly the training run's scores.** Prediction computes the encoder's layers the way the
feature cache did (chunks of ``FEATURE_CHUNK`` sentences, the same encoder batches, stored in
the same dtype, the same layer combination), then runs the task model on batches of similar
length of the same size as training's evaluation; a reloaded model therefore scores the same
split exactly as training reported.
"""

from __future__ import annotations

import json
import os
import shutil
import typing
from collections.abc import Iterable, Iterator, Sequence
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
from contextvec.tasks.finetune import PieceSplit
from contextvec.tasks.models import Indexer, ModelSettings, TokenEmbedder, Vocabulary, contextual_embedder
from contextvec.tasks.schemes import to_scheme
from contextvec.tasks.spec import TaskSpec, get_task
from contextvec.tasks.split import Split
from contextvec.tasks.train import ENCODER_PREFIX, PreparedSplit, predict_split, task_layers

FORMAT, VERSION = "contextvec-task-model", 1
TASK_FILE = SAVED_TASK_FILE  # the registry recognises a saved task model by it
WEIGHTS, WORDS, CHARS = "model.safetensors", "words.json", "chars.json"
NGRAMS = "ngrams.json"
WORD_EMBEDDING = "tokens.words.weight"
NGRAM_EMBEDDING = "tokens.ngrams.embedding.weight"
FEATURE_CHUNK = 1000
"""Sentences per feature chunk: the feature cache's ``chunk_sentences`` (same encoder batches)."""
MAX_TOKENS = 4096
"""Padded tokens per encoder batch: the feature cache's ``max_tokens``."""


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
    _write_json(tmp / TASK_FILE, {
        "format": FORMAT, "version": VERSION, **record, "eval_batch_size": eval_batch_size,
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
            "kind": "fine-tune", "task": task, "labels": list(model.labels),
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


class TaskModel:
    """A loaded task model ([`load_task_model`][contextvec.tasks.saved.load_task_model]):
    [`predict`][contextvec.tasks.saved.TaskModel.predict] gives one label per sentence, or one
    tag per token for a tagging task (NER).

    Attributes:
        labels: the task's labels (or tags), in the order of the model's outputs.
        scheme: the tag scheme predictions are given in (``"bio"`` = IOB2, ``"iob1"``,
            ``"bioul"``) for a tagging task.
        encoder: the frozen encoder the model reads (None for a fine-tuned BERT or a model
            without contextual vectors).
        seen_mentions: the training split's entity mentions, for NER's seen/unseen scores
            (None for a classification task).
    """

    def __init__(self, spec: TaskSpec, config: dict, model: nn.Module, device: str,
                 indexer: Indexer | None = None, encoder: Encoder | None = None,
                 tokenizer: WordPieceTokenizer | None = None) -> None:
        self.spec, self.config, self.model, self.device = spec, config, model, device
        self.indexer, self.encoder, self.tokenizer = indexer, encoder, tokenizer
        self.labels: list[str] = list(config["labels"])
        self.scheme: str = config["model_settings"].get("tag_scheme") or "bio"
        seen = config.get("seen_mentions")
        self.seen_mentions: set[str] | None = None if seen is None else set(seen)

    @property
    def tagging(self) -> bool:
        """True for a task that labels every token (NER), False for one label per sentence."""
        return self.spec.tagging

    def _features(self, sentences: Sequence[list[str]], embed_batch_size: int) -> list[np.ndarray]:
        """The encoder's layers as the feature cache stores them and ``attach_features`` keeps them."""
        assert self.encoder is not None
        dtype = self.config["features"]["dtype"]
        how = self.config["model_settings"]["layers"]
        out: list[np.ndarray] = []
        for start in range(0, len(sentences), FEATURE_CHUNK):
            chunk = sentences[start:start + FEATURE_CHUNK]
            arrays: list[np.ndarray] = [np.empty(0)] * len(chunk)
            for row, array in self.encoder.embed_batches(chunk, embed_batch_size, MAX_TOKENS):
                arrays[row] = task_layers(array.astype(dtype, copy=False), how)
            out += arrays
        return out

    def predict(self, sentences: Iterable[Sequence[str]], batch_size: int | None = None,
                embed_batch_size: int | None = None) -> list:
        """Predictions for a list of sentences, computed as training's evaluation computed them
        (so a reloaded model scores a split exactly as training reported).

        Args:
            sentences: token lists; none may be empty, no token may be empty.
            batch_size: sentences per task-model batch (None: the evaluation batch size
                recorded at training).
            embed_batch_size: sentences per encoder batch (None: the one recorded at training).

        Returns:
            One label (a ``str``) per sentence, or for a tagging task one list of tags per
            sentence (one tag per token, in [`scheme`][contextvec.tasks.saved.TaskModel]).

        Raises:
            ValueError: an empty sentence or token.
        """
        sentences = [list(s) for s in sentences]
        for i, sentence in enumerate(sentences):
            if not sentence or not all(isinstance(t, str) and t for t in sentence):
                raise ValueError(f"sentence {i + 1}: expected a non-empty list of non-empty tokens")
        if not sentences:
            return []
        batch_size = batch_size or self.config["eval_batch_size"]
        split = Split(sentences, [None] * len(sentences), "<predict>")
        with torch.no_grad():
            if self.tokenizer is not None:
                max_pieces = self.model.config.max_position_embeddings
                return PieceSplit(split, self.tokenizer, self.spec, max_pieces).predict(
                    self.model, batch_size, self.device)
            if self.encoder is not None:
                split.features = self._features(
                    sentences, embed_batch_size or self.config["features"]["embed_batch_size"])
            predicted = predict_split(self.model, PreparedSplit(split, self.indexer, None), batch_size,
                                      self.device)
        if self.tagging and self.scheme != "bio":
            return [to_scheme(tags, "bio", self.scheme) for tags in predicted]
        return predicted

    def predict_stream(self, sentences: Iterable[Sequence[str]], chunk: int = FEATURE_CHUNK,
                       batch_size: int | None = None,
                       embed_batch_size: int | None = None) -> Iterator[tuple[list[str], object]]:
        """Predictions for a stream of sentences, ``chunk`` at a time (bounded memory).

        Args:
            sentences: token lists (any iterable).
            chunk: sentences predicted together.
            batch_size: as in [`predict`][contextvec.tasks.saved.TaskModel.predict].
            embed_batch_size: as in [`predict`][contextvec.tasks.saved.TaskModel.predict].

        Yields:
            ``(tokens, prediction)`` for each sentence, in order.

        Raises:
            ValueError: ``chunk`` below 1, or an empty sentence or token.
        """
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, not {chunk}")
        pending: list[list[str]] = []
        for sentence in sentences:
            pending.append(list(sentence))
            if len(pending) == chunk:
                yield from zip(pending, self.predict(pending, batch_size, embed_batch_size), strict=True)
                pending = []
        if pending:
            yield from zip(pending, self.predict(pending, batch_size, embed_batch_size), strict=True)

    def score(self, split: Split, predicted: list) -> dict:
        """The task's scores of ``predicted`` against a labelled split.

        Args:
            split: the labelled sentences (a task reader's ``Split``).
            predicted: [`predict`][contextvec.tasks.saved.TaskModel.predict]'s output for
                ``split.sentences``.

        Returns:
            The task's metrics by name (accuracy, or NER precision/recall/F1), as training
            reported them.
        """
        return self.spec.score(split, predicted, "bio", self.seen_mentions)


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
    get_task(config["task"])
    need(isinstance(labels, list) and bool(labels) and all(isinstance(x, str) for x in labels)
         and len(set(labels)) == len(labels), "labels", "a list of distinct strings", labels)
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
    ready to [`predict`][contextvec.tasks.saved.TaskModel.predict].

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
        model = spec.fine_tune_head.from_pretrained(directory, labels=config["labels"]).to(device).eval()
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
