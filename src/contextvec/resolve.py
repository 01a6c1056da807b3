"""Which directory a model name means: a path, a bundled model, or a published model pulled into
the cache (its files hashed while it loads); what ``contextvec.load`` and its kin read first."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from contextvec.encoders.family import Family
from contextvec.encoders.registry import family_of, not_a_model
from contextvec.hub.pull import NotPulledError, PulledModel, pulled_model
from contextvec.io.native import is_native_dir

__all__ = ["DEFAULT_MODEL", "ModelNotFoundError", "bundled_models", "resolve_model"]

DEFAULT_MODEL = "elmo-en-small"
"""The model shipped inside the package: ``load()`` and ``contextvec embed`` use it by default."""


def bundled_models() -> dict[str, Path]:
    """Names and directories of the models shipped inside the package."""
    root = Path(str(resources.files("contextvec") / "models"))
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if is_native_dir(p)}


class ModelNotFoundError(FileNotFoundError):
    """No model at the path given, or no bundled default model (a ``FileNotFoundError``)."""


@contextmanager
def verified(pulled: PulledModel | None) -> Iterator[None]:
    """Run the body (the load) while a pulled model's files are hashed, then wait for the hashes:
    a file that differs raises ``CorruptModelError`` and what the body made is dropped; it also
    takes the place of the body's own error, which a corrupted file explains."""
    if pulled is None:
        yield
        return
    try:
        yield
    except Exception:
        pulled.verified()
        raise
    pulled.verified()


def model_path(model: str | os.PathLike | None) -> tuple[Path, PulledModel | None]:
    """The directory of ``model`` (None: the bundled default; a bundled model's name), and the
    check of its files under way where it is a pulled model."""
    bundled = bundled_models()
    if model is None:
        model = DEFAULT_MODEL
        if model not in bundled:
            raise ModelNotFoundError(
                f"the bundled model {DEFAULT_MODEL} is missing from this installation of "
                f"contextvec ({Path(__file__).parent / 'models'}); reinstall, or pass a model "
                "directory"
            )
    path, pulled = _resolved(model)
    if not path.exists():
        names = ", ".join(bundled) or "none"
        raise ModelNotFoundError(f"no model at {path} (bundled models: {names})")
    return path, pulled


def resolve_model(model: str | os.PathLike) -> Path:
    """The path ``model`` names: itself where it exists, else the bundled model of that name,
    else the published model of that name pulled into the cache (``contextvec pull``; its files
    checked against the pull's record), else itself (not checked: [`load`][contextvec.api.load]
    says what is missing).

    Raises:
        ModelNotFoundError: a published model's name (``contextvec models``) not pulled yet: one
            line saying which ``contextvec pull`` to run (loading never downloads).
        CorruptModelError: a pulled model whose files differ from what was downloaded (a
            ``ValueError``).
    """
    path, pulled = _resolved(model)
    if pulled is not None:
        pulled.verified()
    return path


def _resolved(model: str | os.PathLike) -> tuple[Path, PulledModel | None]:
    """What [`resolve_model`][contextvec.api.resolve_model] finds, a pulled model's hashes still
    under way."""
    path = Path(model)
    if path.exists():
        return path, None
    bundled = bundled_models().get(str(model))
    if bundled is not None:
        return bundled, None
    try:
        pulled = pulled_model(str(model))
    except NotPulledError as e:
        raise ModelNotFoundError(str(e)) from None
    return (path, None) if pulled is None else (pulled.path, pulled)


def family_at(path: Path) -> Family:
    """The family that loads the model at ``path``; ``ModelNotFoundError`` where none does."""
    family = family_of(path)
    if family is None:
        raise ModelNotFoundError(not_a_model(path))
    return family
