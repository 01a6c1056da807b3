"""Unpacking a downloaded archive (tar, gzip/bzip2/xz tar, zip) without trusting it.

A published archive is input from anyone (docs/security.md): no member may land outside the
folder it is unpacked into (an absolute name, a ``..`` step, a link that leads out, a member
below a link), none may be a device or FIFO, and the total size is bounded before a byte past
the bound is written. Each refusal is one line naming the archive and the member. Tar members go
through tarfile's ``data`` filter as well (which also drops setuid bits and foreign owners).

The archive is unpacked into a fresh folder beside the target and renamed onto it once complete
and flushed, so the target's name never holds half an archive.
"""

from __future__ import annotations

import gzip
import lzma
import os
import posixpath
import re
import secrets
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path

from contextvec.io.atomic import fsync

_DRIVE = re.compile(r"^[A-Za-z]:")
_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, gzip.BadGzipFile,
            lzma.LZMAError, NotImplementedError)
"""What a damaged or unsupported archive raises while it is read."""


def unpack(archive: Path, target_dir: Path, *, max_bytes: int) -> list[Path]:
    """Unpack ``archive`` (a tar, plain or gzip/bzip2/xz-compressed, or a zip: recognised by
    content, not by name) into ``target_dir``, which must not exist yet; returns the regular
    files placed, in archive order, as paths below ``target_dir``.

    ``max_bytes`` bounds the unpacked files' total size. Raises ``ValueError`` (one line naming
    the archive and, where one is at fault, the member) for a member that would leave
    ``target_dir``, a device or FIFO, a zip member that is a link, a total over ``max_bytes``, a
    damaged archive or one of another kind; ``FileExistsError`` if ``target_dir`` exists. Hold
    the cache's lock around the call: two unpackings into one ``target_dir`` race for its name.
    """
    archive, target_dir = Path(archive), Path(target_dir)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"max_bytes must be a whole number of bytes >= 0, not {max_bytes!r}")
    if target_dir.exists() or target_dir.is_symlink():
        raise FileExistsError(f"cannot unpack {archive} into {target_dir}: it exists; remove it first")
    if not archive.is_file():
        raise FileNotFoundError(f"the archive {archive} does not exist or is not a file")
    target_dir.parent.mkdir(parents=True, exist_ok=True)
    work = target_dir.with_name(f".{target_dir.name}.unpack-{secrets.token_hex(4)}")
    work.mkdir()
    try:
        try:
            if zipfile.is_zipfile(archive):
                names = _unzip(archive, work, max_bytes)
            elif tarfile.is_tarfile(archive):
                names = _untar(archive, work, max_bytes)
            else:
                raise ValueError(f"cannot unpack {archive}: it is neither a tar archive (plain, gzip, "
                                 "bzip2 or xz) nor a zip archive")
        except _CORRUPT as e:
            raise ValueError(f"cannot unpack {archive}: {' '.join(str(e).split()) or type(e).__name__}") \
                from None
        for folder, _, files in os.walk(work):
            for name in files:
                if not os.path.islink(os.path.join(folder, name)):
                    fsync(os.path.join(folder, name))
            fsync(folder)
        try:
            os.rename(work, target_dir)
        except OSError:  # another unpacking placed it first
            if target_dir.exists():
                raise FileExistsError(f"cannot unpack {archive} into {target_dir}: it appeared while "
                                      "unpacking; remove it first") from None
            raise
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    fsync(target_dir.parent)
    return [target_dir / name for name in names]


def _refuse(archive: Path, name: str, why: str) -> ValueError:
    return ValueError(f"cannot unpack {archive}: the member {name!r} {why}; refusing to unpack it")


def _inside(archive: Path, name: str) -> str:
    """``name`` as a relative path that stays inside the target (``\\`` counts as a separator,
    as zip archives made on Windows use it), normalised; refused otherwise."""
    path = name.replace("\\", "/")
    if path.startswith("/") or _DRIVE.match(path):
        raise _refuse(archive, name, "is an absolute path")
    if ".." in path.split("/"):
        raise _refuse(archive, name, "climbs out of the target folder with '..'")
    if "\0" in path:
        raise _refuse(archive, name, "has a NUL character in its name")
    return posixpath.normpath(path)


def _over(archive: Path, name: str, total: int, max_bytes: int) -> ValueError:
    return _refuse(archive, name, f"takes the unpacked size to {total} bytes, over the bound of "
                                  f"{max_bytes} bytes")


def _untar(archive: Path, work: Path, max_bytes: int) -> list[str]:
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        raise RuntimeError(f"cannot unpack {archive}: a safe tar unpacking needs tarfile's data filter "
                           "(Python 3.11.4 or newer)")
    names, links, total = [], set(), 0
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:  # one pass: a compressed tar is not read twice
            name = _inside(archive, member.name)
            if member.ischr() or member.isblk() or member.isfifo():
                raise _refuse(archive, member.name, "is a device file or FIFO")
            if any(name == link or name.startswith(link + "/") for link in links):
                raise _refuse(archive, member.name, "lies below a symbolic link of the archive")
            if member.issym() or member.islnk():
                link = member.linkname.replace("\\", "/")
                if link.startswith("/") or _DRIVE.match(link):
                    raise _refuse(archive, member.name, f"is a link to the absolute path {member.linkname!r}")
                # a symbolic link is relative to its own folder, a hard link to the archive's root
                start = posixpath.dirname(name) if member.issym() else ""
                joined = posixpath.normpath(posixpath.join(start, link))
                if joined == ".." or joined.startswith("../"):
                    raise _refuse(archive, member.name, f"is a link out of the target folder "
                                                        f"({member.linkname!r})")
                if member.issym():
                    links.add(name)
            elif member.isreg():
                total += member.size
                if total > max_bytes:
                    raise _over(archive, member.name, total, max_bytes)
            try:
                tar.extract(member, work, filter=data_filter)
            except tarfile.FilterError as e:
                raise _refuse(archive, member.name, f"is refused by tarfile's data filter ({e})") from None
            if member.isreg():
                names.append(name)
    return names


def _unzip(archive: Path, work: Path, max_bytes: int) -> list[str]:
    names, total = [], 0
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        for info in members:  # the central directory lists every member before any is written
            name = _inside(archive, info.filename)
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind == stat.S_IFLNK:
                raise _refuse(archive, info.filename, "is a symbolic link")
            if kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
                raise _refuse(archive, info.filename, "is a device file or FIFO")
            if not info.is_dir():
                total += info.file_size  # zipfile reads no more than a member declares
                if total > max_bytes:
                    raise _over(archive, info.filename, total, max_bytes)
                names.append(name)
        for info in members:
            try:
                zf.extract(info, work)
            except RuntimeError as e:  # an encrypted member
                raise ValueError(f"cannot unpack {archive}: {info.filename!r}: {e}") from None
    return names
