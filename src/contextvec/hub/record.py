"""The record of a pull, and the cache's models checked against it on every load.

Beside each model directory ``models/<key>/`` of the cache (:func:`~contextvec.hub.cache.cache_dir`)
stands ``models/<key>.json``, the record of its pull: where each file came from, its size and its
SHA-256. :mod:`contextvec.hub.pull` writes the record last and atomically, so a model without one
is not pulled (a pull that stopped half way resumes where it stopped) and is never loaded.

Every load checks the files against the record: a missing file or another size is refused at
once, before anything is loaded; then every file's SHA-256 is computed on a thread of its own
while the model loads (:class:`PulledModel`), and the load waits for it before it returns, so
content that changed is refused on every load, whatever its times say, at little cost to the
load (docs/models.md says how little).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextvec.hub.cache import cache_dir
from contextvec.hub.registry import HF_PREFIX, PublishedModel, resolve
from contextvec.io.atomic import atomic_file

logger = logging.getLogger(__name__)

RECORD_VERSION = 1
# Bytes hashed at a time: the hashing changes hands (background thread, caller) between chunks.
HASH_CHUNK = 1 << 20


class NotPulledError(FileNotFoundError):
    """A published model's name where the model is not in the cache; ``str()`` says what to run."""


class CorruptModelError(ValueError):
    """A cached model's files are not those its pull recorded; ``str()`` names the file and says
    what to run."""


class Verification:
    """The SHA-256 of a pulled model's files compared with its record: begun on a thread at the
    lowest CPU priority when made, so that it takes only the time no other thread wants (a load
    beside it runs as fast as alone; the load's CPU threads are never slowed by a thread sharing
    their core), and finished by :meth:`result` on the calling thread at its own priority (a busy
    machine never leaves the check waiting for an idle core)."""

    def __init__(self, name: str, root: Path, record: dict[str, Any]) -> None:
        self._name = name
        self._files = [(root / relative, entry.get("sha256")) for relative, entry in record["files"].items()]
        self._done = 0
        self._open: tuple[Any, Any] | None = None  # the file being hashed and its digest so far
        self._error: str | None = None
        self._buffer = memoryview(bytearray(HASH_CHUNK))
        self._lock = threading.Lock()
        self._taken = threading.Event()
        threading.Thread(target=self._background, name="contextvec-verify", daemon=True).start()

    def result(self) -> int:
        """Hash what is left, here: the number of files whose SHA-256 is the recorded one.

        Raises:
            CorruptModelError: the first file that differs or cannot be read (one line).
        """
        self._taken.set()
        with self._lock:
            while self._step():
                pass
        if self._error is not None:
            raise CorruptModelError(self._error)
        logger.debug("%s: %d files match the sha256 recorded at the pull", self._name, self._done)
        return self._done

    def _background(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # SCHED_IDLE: Linux; the calling thread alone
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        while not self._taken.is_set():
            with self._lock:
                if not self._step():
                    return

    def _step(self) -> bool:
        """Hash the next chunk (the lock held): False once every file is done or one differs."""
        if self._error is not None or self._done == len(self._files):
            return False
        path, expected = self._files[self._done]
        again = f"run `contextvec pull {self._name} --force` to fetch it again"
        try:
            if self._open is None:
                self._open = (open(path, "rb"), hashlib.sha256())  # noqa: SIM115 (open across chunks; _close)
            file, digest = self._open
            read = file.readinto(self._buffer)
        except OSError as e:
            self._close()
            self._error = f"{self._name}: {path} cannot be read ({e.strerror or e}); {again}"
            return False
        if read:
            digest.update(self._buffer[:read])  # hashlib lets go of the GIL on a chunk this size
            return True
        self._close()
        if digest.hexdigest() != expected:
            self._error = (f"{self._name}: {path} is not the file downloaded (its sha256 differs from the "
                           f"record); {again}")
            return False
        self._done += 1
        return True

    def _close(self) -> None:
        if self._open is not None:
            self._open[0].close()
            self._open = None


@dataclass(frozen=True)
class PulledModel:
    """A pulled model found in the cache, its files there with their recorded sizes, their
    SHA-256 under way (the caller loads the model meanwhile).

    ``path`` is the directory ``contextvec.load`` receives; ``check`` the hashing of its files.
    """

    name: str
    path: Path
    check: Verification

    def verified(self) -> int:
        """Finish the hashing: the number of files checked.

        Raises:
            CorruptModelError: the first file whose SHA-256 differs from the record (one line).
        """
        return self.check.result()


def cache_key(name: str) -> str:
    """The folder name in the cache of the model ``name`` names (a registry name as it is; an
    ``hf:`` id and a URL as safe file names)."""
    if name.startswith(HF_PREFIX):
        return "hf--" + name[len(HF_PREFIX):].replace("/", "--")
    if "://" in name:
        return "url--" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return name


def models_dir() -> Path:
    """The cache's folder of model directories and their records."""
    return cache_dir() / "models"


def record_path(key: str) -> Path:
    """The record of the pull of ``key``, beside its model directory."""
    return models_dir() / f"{key}.json"


def _files_of(directory: Path) -> list[Path]:
    """The model's files: every regular file under ``directory``, but ``huggingface_hub``'s own
    bookkeeping."""
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and not p.is_symlink() and ".cache" not in p.relative_to(directory).parts)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def new_record(model: PublishedModel, root: Path, directory: str,
               sources: dict[str, str]) -> dict[str, Any]:
    """The record of ``model`` just fetched into ``root``: every file's size and SHA-256;
    ``directory`` is the model's folder relative to ``root``, ``sources`` each file's URL."""
    files = {p.relative_to(root).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)}
             for p in _files_of(root)}
    return {"version": RECORD_VERSION, "name": model.name, "format": model.format, "directory": directory,
            "sources": sources, "pulled": datetime.now(UTC).isoformat(timespec="seconds"), "files": files}


def write_record(key: str, record: dict[str, Any]) -> None:
    """Write ``record`` atomically: the model counts as pulled once it is there."""
    with atomic_file(record_path(key)) as f:
        f.write(json.dumps(record, indent=1, sort_keys=True).encode())


def read_record(key: str) -> dict[str, Any]:
    """The record of the pull of ``key``, its version and fields checked.

    Raises:
        CorruptModelError: unreadable, or not a record of this version (one line).
    """
    path = record_path(key)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CorruptModelError(f"{path}: the record of this pull cannot be read ({e}); pull the model "
                                "again with --force") from None
    if not isinstance(record, dict):
        record = {}
    files, directory = record.get("files"), record.get("directory")
    inside = isinstance(directory, str) and not Path(directory).is_absolute() \
        and ".." not in Path(directory).parts
    if record.get("version") != RECORD_VERSION or not isinstance(files, dict) or not inside:
        raise CorruptModelError(f"{path}: not a record of a pull (version {RECORD_VERSION}); pull the model "
                                "again with --force")
    return record


def cached_path(key: str) -> Path | None:
    """The model directory of ``key``, where its pull finished (has a record); None if not."""
    if not record_path(key).is_file():
        return None
    return models_dir() / key / read_record(key)["directory"]


def check_files(name: str, root: Path, record: dict[str, Any]) -> Verification:
    """Check the files under ``root`` against ``record``: every one there with its recorded size
    now, then every one hashed and compared (the returned :class:`Verification`, under way).

    Raises:
        CorruptModelError: the first file that is missing or of another size (one line).
    """
    again = f"run `contextvec pull {name} --force` to fetch it again"
    for relative, entry in record["files"].items():
        path = root / relative
        try:
            size = path.stat().st_size
        except OSError:
            raise CorruptModelError(f"{name}: {path} is missing from the cache; {again}") from None
        if size != entry.get("size"):
            raise CorruptModelError(f"{name}: {path} has {size} bytes, not the {entry.get('size')} "
                                    f"downloaded; {again}")
    return Verification(name, root, record)


def pulled_model(name: str, *, known: Mapping[str, PublishedModel] | None = None) -> PulledModel | None:
    """The pulled model ``name`` names, for ``contextvec.load``: its files' sizes checked, their
    hashes under way (:meth:`PulledModel.verified` waits for them). None where ``name`` is no
    published model's name (a path, a bundled model, a typo: the caller says what is missing).

    Raises:
        NotPulledError: ``name`` is a published model not in the cache: one line saying which
            ``contextvec pull`` to run.
        CorruptModelError: a cached file missing or of another size than its pull recorded.
    """
    try:
        model = resolve(name, known)
    except KeyError:
        return None
    key = cache_key(model.name)
    path = cached_path(key)
    if path is None:
        raise NotPulledError(f"{name} is not in the cache ({models_dir()}): run `contextvec pull {name}` "
                             "first (loading never downloads)")
    return PulledModel(model.name, path, check_files(model.name, models_dir() / key, read_record(key)))


def verify(name: str, *, known: Mapping[str, PublishedModel] | None = None) -> tuple[Path, int]:
    """Hash every file of the pulled model ``name`` against its record: (its directory, the
    number of files checked).

    Raises:
        NotPulledError, CorruptModelError: as for :func:`pulled_model` and
            :meth:`PulledModel.verified`.
        KeyError: an unknown name.
    """
    model = resolve(name, known)
    pulled = pulled_model(model.name, known=known)
    assert pulled is not None  # resolve() found it
    return pulled.path, pulled.verified()

