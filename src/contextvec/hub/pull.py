"""``pull``: a published model into the cache, checked; and the cache's models, checked on load.

The cache (:func:`~contextvec.hub.cache.cache_dir`) holds ``models/<key>/``, the directory that
``contextvec.load`` receives (the publisher's files as published, an archive unpacked), and
beside it ``models/<key>.json``, the record of the pull: where each file came from, its size
and its SHA-256. The record is written last and atomically, so a model without one is not
pulled (a pull that stopped half way resumes where it stopped) and is never loaded.

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
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextvec.extras import EXTRAS, needs
from contextvec.hub.cache import OFFLINE_ENV, cache_dir, offline
from contextvec.hub.download import DownloadError, DownloadSettings, download
from contextvec.hub.registry import HF_PREFIX, ArchiveKind, ModelFormat, PublishedModel, registry, resolve
from contextvec.io.atomic import atomic_file, file_lock, lock_file

logger = logging.getLogger(__name__)

RECORD_VERSION = 1
# An archive unpacks to at most this many times its own size: model weights compress little,
# so a larger ratio is a hostile archive, not a model.
UNPACK_RATIO = 8
# Bytes hashed at a time: the hashing changes hands (background thread, caller) between chunks.
HASH_CHUNK = 1 << 20
# What a Hugging Face checkpoint needs beside its weights (config, tokenizer, sentence pooling).
HF_FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
            "1_Pooling/config.json")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # the first the checkpoint has is fetched
# The names that mark a format's directory inside an unpacked archive (any one tuple, in whole):
# contextvec.load checks the files themselves when it loads them.
LAYOUTS: dict[ModelFormat, tuple[tuple[str, ...], ...]] = {
    ModelFormat.BILM_TF: (("options.json", "weights.hdf5"),),
    ModelFormat.ELMOFORMANYLANGS: (("config.json", "encoder.pkl", "token_embedder.pkl"),),
    ModelFormat.TF_HUB: (("tfhub_module.pb", "variables"), ("saved_model.pb", "variables")),
    ModelFormat.HF_BERT: (("config.json",),),
}


class PullError(RuntimeError):
    """A pull failed; ``str()`` is one line naming the model and what went wrong."""


class NotPulledError(FileNotFoundError):
    """A published model's name where the model is not in the cache; ``str()`` says what to run."""


class CorruptModelError(ValueError):
    """A cached model's files are not those its pull recorded; ``str()`` names the file and says
    what to run."""


@dataclass(frozen=True)
class PullSettings:
    """What ``pull`` does beyond fetching: ``force`` fetches again a model already cached;
    ``download`` is how each download behaves (timeout, retries, progress bar)."""

    download: DownloadSettings = field(default_factory=DownloadSettings)
    force: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.download, DownloadSettings):
            raise ValueError(f"download must be DownloadSettings, not {type(self.download).__name__}")
        if not isinstance(self.force, bool):
            raise ValueError(f"force must be True or False, not {self.force!r}")


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


@dataclass(frozen=True)
class CachedModel:
    """A row of :func:`list_models`: a known or cached model and where it is.

    ``model`` is None for a cached model the registry no longer names; ``path`` is the
    directory ``contextvec.load`` receives (None: not pulled); ``size`` its bytes on disk.
    """

    name: str
    model: PublishedModel | None
    path: Path | None
    size: int | None


def cache_key(name: str) -> str:
    """The folder name in the cache of the model ``name`` names (a registry name as it is; an
    ``hf:`` id and a URL as safe file names)."""
    if name.startswith(HF_PREFIX):
        return "hf--" + name[len(HF_PREFIX):].replace("/", "--")
    if "://" in name:
        return "url--" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return name


def _models_dir() -> Path:
    return cache_dir() / "models"


def _record_path(key: str) -> Path:
    return _models_dir() / f"{key}.json"


def pull(name: str, settings: PullSettings = PullSettings(), *,
         known: Mapping[str, PublishedModel] | None = None) -> Path:
    """Fetch the model ``name`` names into the cache (unless it is there) and return its
    directory, which ``contextvec.load(name)`` (or of the path) then loads.

    Args:
        name: a registry name (``contextvec models``), ``hf:OWNER/NAME``, or an archive's URL.
        settings: ``force`` and the downloads' behaviour.
        known: the registry to look ``name`` up in; None: :func:`~contextvec.hub.registry.registry`.

    Returns:
        The model directory in the cache.

    Raises:
        KeyError: an unknown name (one line).
        PullError: offline, the network, the server, a checksum mismatch, a hostile archive, an
            archive holding no model (one line each).
    """
    model = resolve(name, known)
    key = cache_key(model.name)
    models = _models_dir()
    models.mkdir(parents=True, exist_ok=True)
    with file_lock(lock_file(models / key)):
        if settings.force:
            _remove(key)
        elif (path := _cached_path(key)) is not None:
            check_files(model.name, models / key, _record(key)).result()
            return path
        if offline():
            raise PullError(f"cannot pull {model.name}: it is not in the cache ({cache_dir()}) and "
                            f"{OFFLINE_ENV} is set; unset it (or set it to 0) to download")
        try:
            if model.hf_repo is not None:
                record = _pull_hf(model, key, settings)
            elif model.archive is not None:
                record = _pull_archive(model, key, settings)
            else:
                record = _pull_files(model, key, settings)
        except DownloadError as e:
            raise PullError(f"cannot pull {model.name}: {e}") from None
        _write_record(key, record)
        return models / key / record["directory"]


def _needs_hub() -> contextlib.AbstractContextManager[None]:
    """Imports of the hub extra's packages (the extra is named once pyproject declares it)."""
    return needs("hub") if "hub" in EXTRAS else contextlib.nullcontext()


def _remove(key: str) -> None:
    _record_path(key).unlink(missing_ok=True)  # first: a model without a record is not pulled
    shutil.rmtree(_models_dir() / key, ignore_errors=True)


def _pull_files(model: PublishedModel, key: str, settings: PullSettings) -> dict[str, Any]:
    """The publisher's files, each downloaded into the model directory under its own name."""
    directory = _models_dir() / key
    for remote in model.files:
        download(remote.url, directory / remote.name, size=remote.size, sha256=remote.sha256,
                 settings=settings.download)
    return _new_record(model, directory, ".", sources={r.name: r.url for r in model.files})


def _pull_archive(model: PublishedModel, key: str, settings: PullSettings) -> dict[str, Any]:
    """The publisher's archive, downloaded beside the models and unpacked into the model
    directory (the archive is removed once unpacked)."""
    from contextvec.hub.archive import unpack

    (remote,) = model.files
    downloads = cache_dir() / "downloads"
    archive = downloads / f"{key}.{ArchiveKind(model.archive).value}"
    download(remote.url, archive, size=remote.size, sha256=remote.sha256, settings=settings.download)
    directory = _models_dir() / key
    shutil.rmtree(directory, ignore_errors=True)  # an unpack that stopped: it starts again
    try:
        unpack(archive, directory, max_bytes=UNPACK_RATIO * archive.stat().st_size + (1 << 20))
    except ValueError as e:
        archive.unlink(missing_ok=True)
        raise PullError(f"cannot pull {model.name}: {remote.url}: {e}") from None
    archive.unlink()
    found = _model_inside(directory, model.format)
    if found is None:
        shutil.rmtree(directory, ignore_errors=True)
        raise PullError(f"cannot pull {model.name}: {remote.url} holds no model contextvec loads "
                        "(no directory of a known format in the archive)")
    return _new_record(model, directory, found.relative_to(directory).as_posix(),
                       sources={remote.name: remote.url})


def _model_inside(directory: Path, format: ModelFormat | None) -> Path | None:
    """The model directory in an unpacked archive: ``directory`` itself, else the first folder
    within two levels that holds the files of ``format`` (None: of any format); an archive often
    holds one top folder."""
    layouts = LAYOUTS[format] if format is not None else tuple(t for ts in LAYOUTS.values() for t in ts)
    candidates = [directory, *sorted(p for p in directory.glob("*") if p.is_dir() and not p.is_symlink()),
                  *sorted(p for p in directory.glob("*/*") if p.is_dir() and not p.is_symlink())]
    for candidate in candidates:
        if any(all((candidate / name).exists() for name in names) for names in layouts):
            return candidate
    return None


def _pull_hf(model: PublishedModel, key: str, settings: PullSettings) -> dict[str, Any]:
    """A Hugging Face checkpoint through ``huggingface_hub`` into a folder beside the models,
    renamed into place once whole (a pull that stopped resumes in that folder)."""
    with _needs_hub():
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    staging = _models_dir() / f".{key}.incoming"
    # Read here, not at huggingface_hub's import: the environment of this call counts.
    endpoint = os.environ.get("HF_ENDPOINT") or None
    common = dict(repo_id=model.hf_repo, revision=model.revision, local_dir=staging, endpoint=endpoint,
                  etag_timeout=settings.download.timeout)
    try:
        snapshot_download(allow_patterns=[*HF_FILES, HF_WEIGHTS[0]], **common)
        if not (staging / HF_WEIGHTS[0]).is_file():
            snapshot_download(allow_patterns=list(HF_WEIGHTS[1:]), **common)
    except LocalEntryNotFoundError:
        raise PullError(f"cannot pull {model.name}: cannot reach {endpoint or 'huggingface.co'} (no "
                        "network?)") from None
    except (HfHubHTTPError, OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PullError(f"cannot pull {model.name}: {first}") from None
    if not any((staging / w).is_file() for w in HF_WEIGHTS):
        raise PullError(f"cannot pull {model.name}: {model.hf_repo} has neither "
                        f"{' nor '.join(HF_WEIGHTS)}")
    directory = _models_dir() / key
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
    revision = _hf_commit(directory)
    record = _new_record(model, directory, ".", sources={"*": f"{HF_PREFIX}{model.hf_repo}"})
    record["revision"] = revision
    return record


def _hf_commit(directory: Path) -> str | None:
    """The commit ``huggingface_hub`` fetched (its local-dir metadata keeps it per file)."""
    for meta in sorted((directory / ".cache" / "huggingface" / "download").rglob("*.metadata")):
        lines = meta.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines:
            return lines[0].strip()
    return None


# --------------------------------------------------------------------------- records


def _files_of(directory: Path) -> list[Path]:
    """The model's files: every regular file under ``directory``, but ``huggingface_hub``'s own
    bookkeeping."""
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and not p.is_symlink() and ".cache" not in p.relative_to(directory).parts)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _new_record(model: PublishedModel, root: Path, directory: str,
                sources: dict[str, str]) -> dict[str, Any]:
    files = {p.relative_to(root).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)}
             for p in _files_of(root)}
    return {"version": RECORD_VERSION, "name": model.name, "format": model.format, "directory": directory,
            "sources": sources, "pulled": datetime.now(UTC).isoformat(timespec="seconds"), "files": files}


def _write_record(key: str, record: dict[str, Any]) -> None:
    with atomic_file(_record_path(key)) as f:
        f.write(json.dumps(record, indent=1, sort_keys=True).encode())


def _record(key: str) -> dict[str, Any]:
    path = _record_path(key)
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


def _cached_path(key: str) -> Path | None:
    """The model directory of ``key``, where its pull finished (has a record); None if not."""
    if not _record_path(key).is_file():
        return None
    return _models_dir() / key / _record(key)["directory"]


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
    path = _cached_path(key)
    if path is None:
        raise NotPulledError(f"{name} is not in the cache ({_models_dir()}): run `contextvec pull {name}` "
                             "first (loading never downloads)")
    return PulledModel(model.name, path, check_files(model.name, _models_dir() / key, _record(key)))


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


def list_models(known: Mapping[str, PublishedModel] | None = None) -> list[CachedModel]:
    """Every registry entry (pulled or not) and every pulled model (named or not), in the
    registry's order then the others' by name."""
    known = registry() if known is None else known
    rows, seen = [], set()
    for name, model in known.items():
        key = cache_key(name)
        seen.add(key)
        rows.append(_row(name, model, key))
    models = _models_dir()
    others = sorted(p for p in models.glob("*.json") if p.stem not in seen) if models.is_dir() else []
    for path in others:
        try:
            name = str(_record(path.stem)["name"])
        except CorruptModelError:
            name = path.stem
        rows.append(_row(name, None, path.stem))
    return rows


def _row(name: str, model: PublishedModel | None, key: str) -> CachedModel:
    try:
        path = _cached_path(key)
        size = sum(int(entry.get("size", 0)) for entry in _record(key)["files"].values()) if path else None
    except (CorruptModelError, AttributeError, TypeError, ValueError):
        path, size = None, None  # an unreadable record: the model counts as not pulled
    return CachedModel(name, model, path, size)
