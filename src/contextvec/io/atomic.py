"""Atomic file writes: a result appears complete under its final name, or not at all.

Writes never replace what a path points to: an output that is a symbolic link is written
through to its target (the temporary file lies beside the target, then is renamed onto it), and
an output that exists but is not a regular file (a FIFO, a device, a socket) is refused.
:func:`output_target` checks an output's name and kind, :func:`refuse_to_replace` that it is
neither an input nor in the way; :func:`output_lock` holds an output for one run, so that a
second run on it is refused at once.

What survives the machine: a result is flushed to the disk (``fsync``) before its rename, and its
folder after, so a power loss leaves the old file or the complete new one, never a short one under
the final name. A write the disk refuses (full, over quota, over the file size limit, an I/O
error) is one :class:`WriteFailed` naming the output, and its temporary file is removed; a run
that died mid-write leaves a temporary file that :func:`remove_temporaries` clears.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: output_lock does not lock
    fcntl = None  # type: ignore[assignment]

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class OutputInUseError(RuntimeError):
    """Another process holds the output (:func:`output_lock`)."""


class WriteFailed(OSError):
    """The disk refused a write (``errno`` says why: ``ENOSPC``, ``EDQUOT``, ``EFBIG``, ``EIO``);
    the message names the output, not its temporary file, which is gone."""


DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""The errors of a disk that refuses writes, as opposed to a path that is wrong."""


def _special(mode: int) -> str | None:
    """What a file of ``mode`` is, if it is neither a regular file nor a directory."""
    return next((kind for test, kind in _KINDS if test(mode)), None)


def _follow(path: Path) -> Path:
    """``path``, or where it leads if it is a symbolic link (through every link of a chain)."""
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if target.is_symlink():  # realpath stops where a chain loops
        raise OSError(f"the output {path} is a symbolic link that loops; give another path")
    return target


def output_target(path: str | os.PathLike, *, directory: bool = False) -> Path:
    """The path a write to the output ``path`` lands on, after checking that it may be written.

    A symbolic link leads to its target, which is what gets written (a dangling link's target is
    created, if its folder exists; a directory output that is a dangling link is refused). Raises
    with a one-line message: ``ValueError`` for an empty path or ``-`` (standard input, not an
    output), ``IsADirectoryError`` for a directory (or a name ending in ``/``) where a file
    belongs, ``NotADirectoryError`` for the reverse, ``FileExistsError`` for a FIFO, device or
    socket (never replaced), ``FileNotFoundError`` for a file output whose folder is missing.
    """
    text = os.fspath(path)
    what = "directory" if directory else "file"
    if text == "":
        raise ValueError(f"the output path is empty; give a {what} path")
    if text == "-":
        raise ValueError(f"`-` means standard input, not an output; give an output {what} path")
    given = Path(text)
    target = _follow(given)
    via = f" (a symbolic link to {target})" if target != given else ""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise NotADirectoryError(f"the output {given}{via} lies below a file, not a folder") from None
    if mode is not None and (kind := _special(mode)):
        raise FileExistsError(f"the output {given}{via} is {kind}, not a regular file: refusing to "
                              "replace it")
    if directory:
        if mode is not None and not stat.S_ISDIR(mode):
            raise NotADirectoryError(f"the output directory {given}{via} is a file")
        if mode is None and target != given:
            raise FileNotFoundError(f"the output directory {given} is a symbolic link to {target}, "
                                    "which does not exist; create it or give another path")
        return target
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(f"the output {given}{via} is a directory; give a file path")
    if text.endswith(("/", os.sep)):
        raise IsADirectoryError(f"the output {text} ends with '/', which names a folder; give a file "
                                "path")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"the folder of the output {given}{via} does not exist")
    return target


def refuse_to_replace(
    target: Path,
    named: str | os.PathLike,
    *,
    inputs: Iterable[str | os.PathLike | None] = (),
    in_use: bool | None = None,
    replace: bool = False,
    suggest_resume: bool = False,
) -> None:
    """The one check before an output is written: refuse ``target`` (the output as the user
    ``named`` it) if it is one of ``inputs`` (also through links), even when ``replace``; or
    if it is ``in_use`` (default: it exists) and ``replace`` is false, saying to pass
    ``--overwrite`` (and ``--resume`` if ``suggest_resume``). Raises ``ValueError`` or
    ``FileExistsError`` with a one-line message."""
    for given in inputs:
        if given is not None and Path(given).exists() and target.exists() \
                and os.path.samefile(target, given):
            raise ValueError(f"the output {named} is the input {given}: refusing to destroy it")
    if (target.exists() if in_use is None else in_use) and not replace:
        raise FileExistsError(f"{named} exists; pass --overwrite to replace it"
                              + (" or --resume to continue it" if suggest_resume else ""))


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def fsync(path: str | os.PathLike) -> None:
    """Flush ``path`` (a file, or a folder's list of names) from the page cache to the disk:
    what a rename or a new file in a folder needs to survive a power loss."""
    path = Path(path)
    folder = path.is_dir()
    if folder and os.name != "posix":
        return  # folders cannot be opened on Windows; its renames are durable without it
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:  # a file system without fsync (some FUSE, /proc) has no cache
            raise
    finally:
        os.close(fd)


def write_failed(error: OSError, path: str | os.PathLike) -> WriteFailed:
    """``error`` (a write the disk refused), said of the output ``path``."""
    return WriteFailed(error.errno, f"cannot write {path}: {error.strerror or error}")


@contextlib.contextmanager
def _disk_errors_name(path: Path) -> Iterator[None]:
    """A write the disk refuses inside the block becomes :class:`WriteFailed` naming ``path``."""
    try:
        yield
    except OSError as e:
        if e.errno in DISK_ERRORS and not isinstance(e, WriteFailed):
            raise write_failed(e, path) from None
        raise


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds.

    The temporary file lives in the same directory (so the rename is atomic on POSIX) and is
    removed if the block raises. The result gets the permissions a plain ``open(path, "w")``
    would give (0o666 minus the umask): some writers, safetensors among them, create 0o600 files.
    It is flushed to the disk before the rename, and the folder after it, so that neither a crash
    nor a power loss leaves a short file under ``path``. A write the disk refuses (full disk,
    quota, file size limit, I/O error) in the block or in the flush raises :class:`WriteFailed`
    naming ``path``. A symbolic link is written through: the temporary file lies beside its
    target and replaces the target, the link stays. A ``path`` that is a FIFO, device or socket
    is refused (``FileExistsError``), before the block runs.
    """
    path = _follow(Path(path))
    with contextlib.suppress(FileNotFoundError):
        if kind := _special(os.stat(path).st_mode):
            raise FileExistsError(f"{path} is {kind}, not a regular file: refusing to replace it")
    tmp = _temporary(path)
    try:
        with _disk_errors_name(path):
            yield tmp
            if tmp.is_file():
                os.chmod(tmp, 0o666 & ~_umask())
            fsync(tmp)
            os.replace(tmp, path)
            fsync(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty folder beside ``path``; when the block succeeds, it becomes ``path`` (an
    existing folder there is replaced; a link's target is what is replaced), so readers find the
    whole folder or none. The folder is removed if the block raises."""
    target = output_target(path, directory=True)
    tmp = _temporary(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    old = target.with_name(f".{target.name}.old{os.getpid()}")
    try:
        with _disk_errors_name(target):
            yield tmp
            if target.exists():
                target.rename(old)
            tmp.rename(target)
            fsync(target.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


class _Recorded(io.FileIO):
    """A file that keeps the first error a write met: a library that writes through it (h5py's
    file-object driver) reports that error as another exception, or drops it."""

    error: OSError | None = None

    def write(self, data) -> int:  # type: ignore[override]
        try:
            return os.write(self.fileno(), data)
        except OSError as e:
            self.error = self.error or e
            raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[io.FileIO]:
    """:func:`atomic_path`, opened: yield the temporary file, open for reading and writing
    (binary, unbuffered), for a writer that takes a file object, such as
    ``h5py.File(stream, "w")``.

    A write the disk refuses raises :class:`WriteFailed` naming ``path``, whatever the writer
    made of the error: HDF5, writing to a path of its own, crashes the process on a full disk
    instead (it fails again while closing the file), and through a file object it reports the
    error as an unrelated one.
    """
    with atomic_path(path) as tmp:
        stream = _Recorded(tmp, "w+")
        try:
            yield stream
        except Exception as e:
            if stream.error is None:
                raise
            raise write_failed(stream.error, path) from e
        finally:
            stream.close()
        if stream.error is not None:  # the writer swallowed it
            raise write_failed(stream.error, path)


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp\d+")


def remove_temporaries(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the temporary files that :func:`atomic_path` left in ``folder`` (of the output
    ``name`` only, if given) when its process died mid-write; returns them. Call it only while
    holding what is written there (:func:`output_lock`): a live writer's file would go too."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for child in Path(folder).iterdir():
            match = _TEMPORARY.fullmatch(child.name)
            if match and (name is None or match["name"] == name) and child.is_file():
                child.unlink(missing_ok=True)
                removed.append(child)
    return removed


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock named ``path`` for the block: processes (and threads) that ask
    for the same ``path`` take turns. The lock file is created on demand and removed by its
    holder, so no lock files are left behind.

    Advisory (``fcntl.flock``): it orders the code that takes it and nothing else. Where there
    is no ``fcntl`` (Windows) it does not lock.
    """
    if fcntl is None:
        yield
        return
    fd = _locked(Path(path), wait=True)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


_held: dict[Path, list[int]] = {}  # lock file -> [descriptor, holds] in this process
_held_guard = threading.Lock()


def lock_file(path: str | os.PathLike) -> Path:
    """The lock file of the output ``path``: beside it (through a link, beside its target)."""
    path = Path(os.path.realpath(path))
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def output_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the output ``path`` (a file or a folder, with its ``.parts`` folder) for the block;
    if another process holds it, raise :class:`OutputInUseError` at once, naming its pid.

    Re-entrant within a process (a command and the library function it calls take the same
    output). The lock file (``.NAME.lock`` beside the output, holding the holder's pid) is
    removed by its holder. Advisory (``fcntl.flock``): without ``fcntl`` (Windows) it does not
    lock.
    """
    if fcntl is None:
        yield
        return
    lock = lock_file(path)
    with _held_guard:
        if lock in _held:
            _held[lock][1] += 1
        else:
            _held[lock] = [_acquire(lock, path), 1]
    try:
        yield
    finally:
        with _held_guard:
            _held[lock][1] -= 1
            if _held[lock][1] == 0:
                fd = _held.pop(lock)[0]
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                os.close(fd)


def _locked(lock: Path, wait: bool) -> int:
    """A descriptor of the file at ``lock`` (created on demand), locked exclusively. Holders
    remove the file when done, so a lock won on a file no longer at ``lock`` is dropped and the
    file now there locked instead. Without ``wait``, ``BlockingIOError`` carries the open
    descriptor of a lock another process holds as ``e.fd`` (the caller reads and closes it)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as e:
            e.fd = fd
            raise
        try:
            current = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return fd
        os.close(fd)


def _acquire(lock: Path, path: str | os.PathLike) -> int:
    try:
        fd = _locked(lock, wait=False)
    except PermissionError:  # said of the output: the lock file is not a name the user gave
        raise PermissionError(f"cannot write the output {path}: its folder {lock.parent} is "
                              "not writable") from None
    except BlockingIOError as e:
        holder = os.read(e.fd, 32).decode("ascii", "replace").strip()
        os.close(e.fd)
        raise OutputInUseError(f"{path} is in use by "
                               + (f"pid {holder}" if holder.isdigit() else "another process")
                               + "; wait for that run to end") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode("ascii"))
    return fd
