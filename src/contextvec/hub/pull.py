"""``pull``: a published model into the cache, checked; and the list of the cache's models.

The cache (:func:`~contextvec.hub.cache.cache_dir`) holds ``models/<key>/``, the directory that
``contextvec.load`` receives (the publisher's files as published, an archive unpacked), and
beside it ``models/<key>.json``, the record of the pull (:mod:`contextvec.hub.record`: the record,
and every load's check of the files against it). The record is written last and atomically, so a
model without one is not pulled (a pull that stopped half way resumes where it stopped) and is
never loaded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextvec.extras import EXTRAS, needs
from contextvec.hub.cache import OFFLINE_ENV, cache_dir, offline
from contextvec.hub.download import DownloadError, DownloadSettings, download
from contextvec.hub.record import (
    CorruptModelError,
    NotPulledError,
    PulledModel,
    cache_key,
    cached_path,
    check_files,
    models_dir,
    new_record,
    pulled_model,
    read_record,
    record_path,
    verify,
    write_record,
)
from contextvec.hub.registry import HF_PREFIX, ArchiveKind, ModelFormat, PublishedModel, registry, resolve
from contextvec.io.atomic import file_lock, lock_file

# The checked cache's names are importable from here too, the hub's front door.
__all__ = ["CachedModel", "CorruptModelError", "NotPulledError", "PullError", "PullSettings", "PulledModel",
           "cache_key", "list_models", "pull", "pulled_model", "verify"]

# An archive unpacks to at most this many times its own size: model weights compress little,
# so a larger ratio is a hostile archive, not a model.
UNPACK_RATIO = 8
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
    models = models_dir()
    models.mkdir(parents=True, exist_ok=True)
    with file_lock(lock_file(models / key)):
        if settings.force:
            _remove(key)
        elif (path := cached_path(key)) is not None:
            check_files(model.name, models / key, read_record(key)).result()
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
        write_record(key, record)
        return models / key / record["directory"]


def _needs_hub() -> contextlib.AbstractContextManager[None]:
    """Imports of the hub extra's packages (the extra is named once pyproject declares it)."""
    return needs("hub") if "hub" in EXTRAS else contextlib.nullcontext()


def _remove(key: str) -> None:
    record_path(key).unlink(missing_ok=True)  # first: a model without a record is not pulled
    shutil.rmtree(models_dir() / key, ignore_errors=True)


def _pull_files(model: PublishedModel, key: str, settings: PullSettings) -> dict[str, Any]:
    """The publisher's files, each downloaded into the model directory under its own name."""
    directory = models_dir() / key
    for remote in model.files:
        download(remote.url, directory / remote.name, size=remote.size, sha256=remote.sha256,
                 settings=settings.download)
    return new_record(model, directory, ".", sources={r.name: r.url for r in model.files})


def _pull_archive(model: PublishedModel, key: str, settings: PullSettings) -> dict[str, Any]:
    """The publisher's archive, downloaded beside the models and unpacked into the model
    directory (the archive is removed once unpacked)."""
    from contextvec.hub.archive import unpack

    (remote,) = model.files
    downloads = cache_dir() / "downloads"
    archive = downloads / f"{key}.{ArchiveKind(model.archive).value}"
    download(remote.url, archive, size=remote.size, sha256=remote.sha256, settings=settings.download)
    directory = models_dir() / key
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
    return new_record(model, directory, found.relative_to(directory).as_posix(),
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

    staging = models_dir() / f".{key}.incoming"
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
    directory = models_dir() / key
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
    revision = _hf_commit(directory)
    record = new_record(model, directory, ".", sources={"*": f"{HF_PREFIX}{model.hf_repo}"})
    record["revision"] = revision
    return record


def _hf_commit(directory: Path) -> str | None:
    """The commit ``huggingface_hub`` fetched (its local-dir metadata keeps it per file)."""
    for meta in sorted((directory / ".cache" / "huggingface" / "download").rglob("*.metadata")):
        lines = meta.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines:
            return lines[0].strip()
    return None


def list_models(known: Mapping[str, PublishedModel] | None = None) -> list[CachedModel]:
    """Every registry entry (pulled or not) and every pulled model (named or not), in the
    registry's order then the others' by name."""
    known = registry() if known is None else known
    rows, seen = [], set()
    for name, model in known.items():
        key = cache_key(name)
        seen.add(key)
        rows.append(_row(name, model, key))
    models = models_dir()
    others = sorted(p for p in models.glob("*.json") if p.stem not in seen) if models.is_dir() else []
    for path in others:
        try:
            name = str(read_record(path.stem)["name"])
        except CorruptModelError:
            name = path.stem
        rows.append(_row(name, None, path.stem))
    return rows


def _row(name: str, model: PublishedModel | None, key: str) -> CachedModel:
    try:
        path = cached_path(key)
        size = (sum(int(entry.get("size", 0)) for entry in read_record(key)["files"].values())
                if path else None)
    except (CorruptModelError, AttributeError, TypeError, ValueError):
        path, size = None, None  # an unreadable record: the model counts as not pulled
    return CachedModel(name, model, path, size)
