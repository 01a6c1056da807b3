"""Atomic file writes: a result appears complete under its final name, or not at all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds.

    The temporary file lives in the same directory (so the rename is atomic on POSIX) and is
    removed if the block raises. The result gets the permissions a plain ``open(path, "w")``
    would give (0o666 minus the umask): some writers, safetensors among them, create 0o600 files.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        if tmp.is_file():
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock named ``path`` for the block: processes (and threads) that ask
    for the same ``path`` take turns. The lock file is created on demand and removed by its
    holder, so no lock files are left behind.

    Advisory (``fcntl.flock``): it orders the code that takes it and nothing else. Where there
    is no ``fcntl`` (Windows) it does not lock.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # its holder removed that file meanwhile: lock the file now at ``path``
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
