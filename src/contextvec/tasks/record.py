"""The record of a saved task model: ``task.json`` as :class:`TaskRecord`.

Format ``contextvec-task-model``, version 1: the kind, the task, its labels, the model settings,
the encoder trained on (:class:`EncoderRef`), how its features were computed
(:class:`FeaturePass`), the evaluation batch size, the scores training reported and the mentions
it saw. The file is data from elsewhere: it is validated field by field when read, and a fault is
one line naming the field. The files beside it are :mod:`contextvec.tasks.saved`'s.
"""

from __future__ import annotations

import json
import os
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from contextvec.documents.settings import CONTEXTS, Context
from contextvec.features import FeatureSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.spec import get_task

FORMAT, VERSION = "contextvec-task-model", 1


_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _is(value: object, kind: type) -> bool:
    """``isinstance``, where a bool is not a number (JSON's true is not 1) and an int is a float."""
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


@dataclass(frozen=True)
class EncoderRef:
    """The encoder a saved model was trained on: how to load it again (a bundled name, or
    absolute paths) and its fingerprint (None for a fine-tuned BERT, whose weights are saved)."""

    model: str | None
    options_file: str | None = None
    weight_file: str | None = None
    fingerprint: str | None = None

    @property
    def name(self) -> str | None:
        return self.model or self.options_file

    @classmethod
    def from_json(cls, value: Mapping) -> EncoderRef:
        """The reference of an already checked ``{model, options_file, weight_file, fingerprint}``."""
        return cls(value.get("model"), value.get("options_file"), value.get("weight_file"),
                   value.get("fingerprint"))


@dataclass(frozen=True)
class FeaturePass:
    """How a frozen-feature model's features were computed (prediction computes them the same way).
    ``context``: what a sentence's features saw (``task.json`` names it only when it is
    ``document``, so a file written before it reads and writes back the same)."""

    dtype: str = FeatureSettings().dtype.value
    embed_batch_size: int = FeatureSettings().batch_size
    context: str = Context.SENTENCE.value

    def to_json(self) -> dict:
        """The fields in ``task.json`` (``context`` only when it is ``document``)."""
        fields = asdict(self)
        if fields["context"] == Context.SENTENCE:
            del fields["context"]
        return fields


@dataclass(frozen=True)
class TaskRecord:
    """``task.json`` of a saved task model (validated field by field when read).

    ``kind``: ``features`` (a frozen-feature model) or ``fine-tune`` (a fine-tuned BERT, which
    records only its tag scheme in ``model_settings`` and has no ``word_dim`` or ``features``).
    Version 1 is every file contextvec has written: one written before sentence pairs and
    regression has no ``pair``/``regression`` (both false) and is written back with them.
    """

    kind: str
    task: str
    labels: tuple[str, ...]
    model_settings: ModelSettings
    encoder: EncoderRef | None
    eval_batch_size: int
    reported: dict | None
    """The dev (and test) scores training reported."""
    seen_mentions: frozenset[str] | None = None
    """The training split's entity mentions (NER's seen/unseen scores)."""
    word_dim: int | None = None
    features: FeaturePass | None = None

    def to_json(self) -> dict:
        """The fields in ``task.json``'s order."""
        spec = get_task(self.task)
        fine_tune = self.kind == "fine-tune"
        settings = ({"tag_scheme": self.model_settings.tag_scheme} if fine_tune
                    else asdict(self.model_settings))
        return {
            "format": FORMAT, "version": VERSION, "kind": self.kind, "task": self.task,
            "labels": list(self.labels), "model_settings": settings,
            **({} if fine_tune else {"word_dim": self.word_dim}),
            "encoder": None if self.encoder is None else asdict(self.encoder),
            **({} if fine_tune else {"features": (self.features or FeaturePass()).to_json()}),
            "pair": spec.pair, "regression": spec.regression, "eval_batch_size": self.eval_batch_size,
            "reported": self.reported,
            "seen_mentions": None if self.seen_mentions is None else sorted(self.seen_mentions),
        }

    @classmethod
    def from_json(cls, value: object, source: str | os.PathLike) -> TaskRecord:
        """The record of a ``task.json`` already parsed. Every field is checked before anything
        is built from it (a file from elsewhere is data): a fault is one line naming the field."""
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise ValueError(f"{source}: not a contextvec task model (format {FORMAT!r})")
        if value.get("version") != VERSION:
            raise ValueError(f"{source}: format version {value.get('version')!r}; "
                             f"this contextvec reads version {VERSION}")

        def need(ok: bool, field: str, want: str, got: object) -> None:
            if not ok:
                raise ValueError(f"{source}: {field} must be {want}, not {json.dumps(got)[:60]}")

        kind, labels = value.get("kind"), value.get("labels")
        need(kind in ("features", "fine-tune"), "kind", "'features' or 'fine-tune'", kind)
        need(isinstance(value.get("task"), str), "task", "a task's name", value.get("task"))
        spec = get_task(value["task"])
        for field in ("pair", "regression"):  # absent in files of single-sentence tasks written before
            need(value.get(field, False) is getattr(spec, field), field,
                 f"{str(getattr(spec, field)).lower()} for task {spec.name}", value.get(field))
        need(isinstance(labels, list) and bool(labels) != spec.regression
             and all(isinstance(x, str) for x in labels) and len(set(labels)) == len(labels), "labels",
             "[] (a regression task)" if spec.regression else "a list of distinct strings", labels)
        seen = value.get("seen_mentions")
        need(seen is None or isinstance(seen, list) and all(isinstance(x, str) for x in seen),
             "seen_mentions", "null or a list of strings", seen)
        reported = value.get("reported")
        dev = reported.get("dev") if isinstance(reported, dict) else None
        need(reported is None or isinstance(reported, dict) and (dev is None or _is(dev, float)),
             "reported", "an object with a numeric dev score", reported)
        fine_tune = kind == "fine-tune"
        for field in ("eval_batch_size",) if fine_tune else ("word_dim", "eval_batch_size"):
            number = value.get(field)
            need(_is(number, int) and number >= 1, field, "a positive integer", number)
        features = value.get("features")
        need(fine_tune or isinstance(features, dict) and features.get("dtype") in ("float32", "float16")
             and _is(features.get("embed_batch_size"), int) and features["embed_batch_size"] >= 1
             and features.get("context", Context.SENTENCE.value) in CONTEXTS,
             "features", "{dtype: float32|float16, embed_batch_size: a positive integer, "
             "context: sentence|document (optional)}", features)
        encoder = value.get("encoder")
        fingerprint = encoder.get("fingerprint") if isinstance(encoder, dict) else None
        need(encoder is None or isinstance(encoder, dict)
             and (fine_tune and fingerprint is None or isinstance(fingerprint, str))
             and all(encoder.get(k) is None or isinstance(encoder[k], str)
                     for k in ("model", "options_file", "weight_file")),
             "encoder", "null or {model, options_file, weight_file, fingerprint} as strings", encoder)
        settings = value.get("model_settings")
        need(isinstance(settings, dict), "model_settings", "an object", settings)
        hints = typing.get_type_hints(ModelSettings)
        for name, setting in settings.items():
            want = hints.get(name)
            need(want is not None, f"model_settings.{name}", f"one of {', '.join(hints)}", name)
            basic = want if want in (int, float, bool) else str  # the enums are stored by value
            need(_is(setting, basic), f"model_settings.{name}", _KIND_NAMES[basic], setting)
        try:
            model_settings = ModelSettings(**settings)
        except ValueError as error:
            raise ValueError(f"{source}: model_settings: {error}") from None
        return cls(
            kind=kind, task=value["task"], labels=tuple(labels), model_settings=model_settings,
            encoder=None if encoder is None else EncoderRef.from_json(encoder),
            eval_batch_size=value["eval_batch_size"], reported=reported,
            seen_mentions=None if seen is None else frozenset(seen),
            word_dim=None if fine_tune else value["word_dim"],
            features=None if fine_tune else FeaturePass(features["dtype"], features["embed_batch_size"],
                                                        features.get("context", Context.SENTENCE.value)))
