"""``results.json``: finished runs stored by what they were run on, so reruns skip them.

Several commands may add to one output directory at once (``experiment representations``, one
command per task, all sharing a GPU): :meth:`ResultStore.save` takes an exclusive lock on the
directory, adopts the runs that other commands saved meanwhile, and writes atomically, so no
command's runs overwrite another's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path

from contextvec.experiments.plans import RunSpec
from contextvec.io.atomic import atomic_path, file_lock
from contextvec.tasks.split import Split

RESULTS_JSON = "results.json"


def split_identity(split: Split) -> str:
    """A sha256 hex digest of a split's tokens and labels (and a pair task's second sentences)."""
    content = [split.sentences, split.labels] + ([] if split.second is None else [split.second])
    text = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normalised(value: object) -> object:
    """JSON round trip, so keys built now compare equal to keys read back (tuples -> lists)."""
    return json.loads(json.dumps(value, sort_keys=True))


def _model_settings(spec: RunSpec) -> dict:
    if spec.model_settings is None:
        return {"kind": spec.kind.value}
    settings = asdict(spec.model_settings)
    # Runs stored before the BCN, the n-grams and fixed vectors existed keep their keys.
    for name, default in (("classifier", "pool"), ("char_ngram_dim", 0), ("fixed_word_vectors", False)):
        if settings[name] == default:
            del settings[name]
    return settings


def run_key(spec: RunSpec, task: str, data: dict[str, str | None], model_id: str | None) -> dict:
    """What a finished run is found by in ``results.json`` (see the module docstring)."""
    train = None if spec.train_settings is None else asdict(spec.train_settings)
    if train is not None:
        del train["progress"]  # never changes a result
    return _normalised({
        "task": task, "data": data, "model": model_id if spec.contextual else None,
        "model_settings": _model_settings(spec), "train_settings": train,
    })


class ResultStore:
    """``results.json`` of an output directory: finished runs by key, saved atomically."""

    def __init__(self, output_dir: Path, experiment: str, header: dict, fresh: bool = False) -> None:
        """``fresh``: start empty, whatever ``results.json`` holds (it is replaced on save)."""
        self.path = output_dir / RESULTS_JSON
        self.experiment = experiment
        self.header = header
        self.records: list[dict] = []
        self._discarded: list[dict] = []  # keys a fresh store drops: never adopted back on save
        self._holding = False  # this store holds the directory's lock (see locked)
        stored = self._read()
        if fresh:
            self._discarded = [r["key"] for r in stored]
        else:
            self.records = stored

    def _read(self) -> list[dict]:
        """The runs ``results.json`` holds now (none if it does not exist)."""
        if not self.path.exists():
            return []
        stored = json.loads(self.path.read_text(encoding="utf-8"))
        if stored.get("experiment") != self.experiment:
            raise ValueError(f"{self.path} holds the {stored.get('experiment')!r} experiment, not "
                             f"{self.experiment!r}: give another --output-dir")
        return stored["runs"] + stored.get("other_runs", [])

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the output directory's lock (re-entrant): no other store saves meanwhile, so a
        save and the outputs written from its records belong together."""
        if self._holding:
            yield
            return
        with file_lock(self.path.with_name(f".{RESULTS_JSON}.lock")):
            self._holding = True
            try:
                yield
            finally:
                self._holding = False

    def find(self, key: dict) -> dict | None:
        return next((r for r in self.records if r["key"] == key), None)

    def add(self, record: dict) -> None:
        self.records = [r for r in self.records if r["key"] != record["key"]] + [record]

    def save(self, plan_keys: Sequence[dict], extra: dict | None = None) -> None:
        """Write the plan's finished runs in plan order, then every other stored run, those
        that other commands saved since this store read the file included."""
        with self.locked():
            known = [r["key"] for r in self.records] + self._discarded
            self.records += [r for r in self._read() if r["key"] not in known]
            in_plan = [r for key in plan_keys if (r := self.find(key)) is not None]
            others = [r for r in self.records if r["key"] not in plan_keys]
            document = {"experiment": self.experiment, **self.header, **(extra or {}),
                        "runs": in_plan, "other_runs": others}
            with atomic_path(self.path) as tmp:
                tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
