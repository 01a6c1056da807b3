"""Downloading one file into the cache: resumable, retried, verified, placed atomically.

A file is written to ``<target>.part`` beside its target; a try that fails leaves the ``.part``
for the next try (or the next run), which asks the server for the rest with an HTTP ``Range``
request. Only a complete file whose size and SHA-256 match what the caller expects is renamed
to the target's name (after ``fsync``), so the target name never holds half a file.

Concurrent downloads of one target take turns on a lock file beside it (``.<name>.lock``,
:func:`contextvec.io.atomic.file_lock`): the second waits for the first, then finds the file in
place and returns its checksum without another request. Waiting cannot outlast the first
download, whose every read has a deadline; a holder that dies releases the lock with its process.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tqdm import tqdm

from contextvec.extras import needs
from contextvec.hub.cache import OFFLINE_ENV, offline
from contextvec.io.atomic import DISK_ERRORS, WriteFailed, file_lock, fsync, lock_file, write_failed

_BACKOFF_FIRST = 0.25  # seconds before the first retry; doubled for each one after
_BACKOFF_MOST = 8.0
_RETRY_STATUS = frozenset({408, 429})  # the client errors that say "later", not "never"


@dataclass(frozen=True)
class DownloadSettings:
    """How a download behaves when the network does not.

    ``timeout``: seconds without a byte (to connect, and for each read) before a try fails;
    ``retries``: further tries after a failed one, each resuming where the file stopped;
    ``progress``: a bar with size, rate and time left on standard error.
    """

    timeout: float = 30.0
    retries: int = 3
    progress: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) \
                or not math.isfinite(self.timeout) or self.timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {self.timeout!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be a whole number >= 0, not {self.retries!r}")
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be True or False, not {self.progress!r}")


class DownloadError(RuntimeError):
    """A download failed; ``str()`` is one line naming the URL and what went wrong."""


class ChecksumMismatch(DownloadError):
    """The downloaded file is not the expected one (size or SHA-256); its ``.part`` is removed."""


class _Retry(Exception):
    """A try failed in a way another try may not (the network, the server's 5xx)."""


class _StartOver(Exception):
    """The server cannot continue the ``.part`` (which is gone): ask for the whole file."""


def _httpx() -> ModuleType:
    """httpx, which comes with the hub extra."""
    with needs("hub"):
        import httpx
    return httpx


def part_file(target: Path) -> Path:
    """Where the download of ``target`` is written until it is complete and verified."""
    return target.with_name(target.name + ".part")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _check_args(url: str, size: int | None, sha256: str | None) -> str | None:
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"cannot download {url!r}: only http:// and https:// URLs are fetched")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ValueError(f"the expected size of {url} must be a whole number of bytes >= 0, not {size!r}")
    if sha256 is None:
        return None
    digest = sha256.lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"the expected sha256 of {url} must be 64 hexadecimal digits, not {sha256!r}")
    return digest


def _placed(target: Path, size: int | None, sha256: str | None) -> str | None:
    """The checksum of ``target`` if it is already there as expected (a file only ever gets
    its final name complete, so one without an expected size or checksum counts as done)."""
    if not target.is_file() or (size is not None and target.stat().st_size != size):
        return None
    digest = _sha256(target)
    return digest if sha256 is None or digest == sha256 else None


def download(url: str, target: Path, *, size: int | None = None, sha256: str | None = None,
             settings: DownloadSettings = DownloadSettings()) -> str:
    """Download ``url`` to ``target`` and return the SHA-256 (hex) of the file placed there.

    ``size`` (bytes) and ``sha256`` (hex), when given, are checked before the file gets its
    name: a mismatch removes the ``.part`` and raises :class:`ChecksumMismatch`. A ``target``
    already in place with the expected size and checksum is kept without a request (offline
    too). The target's folder is created if missing.

    Raises :class:`DownloadError` (one line: the URL and what went wrong) when offline
    (``CONTEXTVEC_OFFLINE``), on an HTTP error (4xx at once; 5xx, a stall, a refused or cut
    connection after ``settings.retries`` further tries, each resuming the ``.part``);
    ``ValueError`` for a URL that is not http(s) or a malformed ``size``/``sha256``; ``OSError``
    when the file cannot be written (:class:`~contextvec.io.atomic.WriteFailed` naming
    ``target`` when the disk refuses: full, over quota).
    """
    target = Path(target)
    expected = _check_args(url, size, sha256)
    if offline():
        if (digest := _placed(target, size, expected)) is not None:
            return digest
        raise DownloadError(f"cannot download {url}: {target} is not in the cache and "
                            f"{OFFLINE_ENV} is set; unset it (or set it to 0) to download")
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(lock_file(target)):
        if (digest := _placed(target, size, expected)) is not None:
            return digest
        part = part_file(target)
        try:
            _fetch_with_retries(url, part, size, settings)
        except OSError as e:
            if e.errno in DISK_ERRORS and not isinstance(e, WriteFailed):
                raise write_failed(e, target) from None
            raise
        digest = _sha256(part)
        if expected is not None and digest != expected:
            part.unlink(missing_ok=True)
            raise ChecksumMismatch(f"cannot download {url}: sha256 mismatch: expected {expected}, "
                                   f"got {digest}; the download was removed")
        fsync(part)
        os.replace(part, target)
        fsync(target.parent)
        return digest


def _fetch_with_retries(url: str, part: Path, size: int | None, settings: DownloadSettings) -> None:
    """Bring ``part`` to the whole file (``size`` bytes, if given), in at most
    ``1 + settings.retries`` tries with growing pauses between them."""
    httpx = _httpx()
    timeout = httpx.Timeout(settings.timeout)
    headers = {"Accept-Encoding": "identity"}  # the bytes as published: ranges count those
    with httpx.Client(timeout=timeout, follow_redirects=True, headers=headers) as client, \
            tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024,
                 desc=part.name.removesuffix(".part"), file=sys.stderr, disable=not settings.progress,
                 leave=False) as bar:
        for attempt in range(settings.retries + 1):
            try:
                _fetch(client, httpx, url, part, size, settings, bar)
                return
            except _Retry as e:
                if attempt == settings.retries:
                    tries = f" ({attempt + 1} tries)" if attempt else ""
                    raise DownloadError(f"cannot download {url}: {e}{tries}") from None
            time.sleep(min(_BACKOFF_FIRST * 2 ** attempt, _BACKOFF_MOST))


def _fetch(client, httpx: ModuleType, url: str, part: Path, size: int | None,
           settings: DownloadSettings, bar: tqdm) -> None:
    """One try: resume ``part`` from its length (or start it), to the end of the file."""
    have = part.stat().st_size if part.is_file() else 0
    if size is not None and have > size:  # not the file we expect: start over
        part.unlink()
        have = 0
    if size is not None and have == size:
        return
    try:
        try:
            _stream(client, httpx, url, part, have, size, bar)
        except _StartOver:
            _stream(client, httpx, url, part, 0, size, bar)
    except httpx.TimeoutException as e:
        what = "no connection" if isinstance(e, httpx.ConnectTimeout) else "stalled"
        raise _Retry(f"{what} for {settings.timeout:g} s") from None
    except httpx.ConnectError as e:
        raise _Retry(f"cannot connect ({_reason(e)})") from None
    except (httpx.TooManyRedirects, httpx.UnsupportedProtocol) as e:
        raise DownloadError(f"cannot download {url}: {_reason(e)}") from None
    except httpx.TransportError as e:  # a connection reset or closed before the end
        got = part.stat().st_size if part.is_file() else 0
        raise _Retry(f"the connection broke after {got} bytes ({_reason(e)})") from None


def _reason(error: Exception) -> str:
    """The innermost cause's text, on one line (httpx wraps the socket's error)."""
    while error.__context__ is not None and not str(error):
        error = error.__context__  # type: ignore[assignment]
    return " ".join(str(error).split()) or type(error).__name__


def _stream(client, httpx: ModuleType, url: str, part: Path, have: int, size: int | None,
            bar: tqdm) -> None:
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers) as response:
        status = response.status_code
        if status == 416 and have:  # the .part is not a prefix of this file: start over
            part.unlink(missing_ok=True)
            raise _StartOver
        if status >= 500 or status in _RETRY_STATUS:
            raise _Retry(f"HTTP {status} {response.reason_phrase}".rstrip())
        if status not in (200, 206):
            raise DownloadError(f"cannot download {url}: HTTP {status} {response.reason_phrase}".rstrip())
        if status == 206 and not _resumes_at(content_range := response.headers.get("Content-Range", ""),
                                             have):
            part.unlink(missing_ok=True)
            if have:
                raise _StartOver
            raise _Retry(f"the server sent a range that was not asked for ({content_range or 'none'})")
        if status == 200:  # the whole file, whatever was asked
            have = 0
        length = response.headers.get("Content-Length")
        if size is not None and length is not None and length.isdigit() and int(length) != size - have:
            part.unlink(missing_ok=True)
            raise ChecksumMismatch(f"cannot download {url}: size mismatch: expected {size} bytes, the server "
                                   f"announces {have + int(length)}; the download was removed")
        bar.reset(total=size if size is not None else
                  have + int(length) if length is not None and length.isdigit() else None)
        bar.update(have)
        with open(part, "r+b" if have else "wb") as f:
            f.seek(have)
            f.truncate()
            for chunk in response.iter_bytes():  # as received: a cut loses no buffered bytes
                have += len(chunk)
                if size is not None and have > size:
                    f.close()
                    part.unlink(missing_ok=True)
                    raise ChecksumMismatch(f"cannot download {url}: size mismatch: expected {size} bytes, "
                                           "got more; "
                                           "the download was removed")
                f.write(chunk)
                bar.update(len(chunk))
    if size is not None and have != size:
        raise _Retry(f"the connection ended after {have} of {size} bytes")


def _resumes_at(content_range: str, start: int) -> bool:
    """Whether a 206's ``Content-Range`` (``bytes START-END/TOTAL``) starts at ``start``."""
    unit, _, spec = content_range.partition(" ")
    return unit.strip().lower() == "bytes" and spec.split("-", 1)[0].strip() == str(start)
