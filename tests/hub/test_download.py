"""contextvec.hub.download against a loopback HTTP server that misbehaves on purpose: cut
connections, ignored ranges, stalls, errors. Every server binds 127.0.0.1 and stops with its test."""

from __future__ import annotations

import errno
import hashlib
import http.server
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextvec.hub.cache import cache_dir, offline
from contextvec.hub.download import (
    ChecksumMismatch,
    DownloadError,
    DownloadSettings,
    download,
    part_file,
)

BODY = bytes(range(256)) * 64  # 16 KiB, every byte value, so a shifted resume cannot match
DIGEST = hashlib.sha256(BODY).hexdigest()
QUIET = DownloadSettings(timeout=2.0, retries=0, progress=False)
ONE_RETRY = DownloadSettings(timeout=2.0, retries=1, progress=False)


@dataclass
class Server:
    """What the handler does per request (``plan``, popped in order; then ``ok``), and what it
    was asked (``requests``: the Range header of each, or None)."""

    url: str = ""
    plan: list[str] = field(default_factory=list)
    requests: list[str | None] = field(default_factory=list)
    cut_at: int = 5000
    pause: float = 0.0  # between chunks of a normal answer
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "CONTEXTVEC_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


class _Loopback(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is the point
            super().handle_error(request, client_address)


@pytest.fixture
def server():
    state = Server()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            asked = self.headers.get("Range")
            state.requests.append(asked)
            mode = state.plan.pop(0) if state.plan else "ok"
            if self.path != "/file.bin" or mode == "404":
                self._answer(404, b"not found")
                return
            if mode == "500":
                self._answer(500, b"try later")
                return
            start = int(asked.removeprefix("bytes=").rstrip("-")) if asked and mode != "ignore_range" else 0
            if start >= len(BODY) and asked:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(BODY)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
            self.send_header("Content-Length", str(len(BODY) - start))
            self.end_headers()
            if mode == "cut":  # the promised length, then half of it, then the socket closes
                self.wfile.write(BODY[start:state.cut_at])
                self.wfile.flush()
                self.close_connection = True
                return
            if mode == "stall":
                self.wfile.write(BODY[start:start + 100])
                self.wfile.flush()
                state.release.wait(10)
                self.close_connection = True
                return
            for at in range(start, len(BODY), 4096):
                self.wfile.write(BODY[at:at + 4096])
                self.wfile.flush()
                time.sleep(state.pause)

        def _answer(self, status: int, text: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    httpd = _Loopback(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/file.bin"
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_download_places_the_file_and_returns_its_sha256(server, tmp_path, capsys):
    target = tmp_path / "models" / "file.bin"
    digest = download(server.url, target, size=len(BODY), sha256=DIGEST,
                      settings=DownloadSettings(progress=True))
    assert digest == DIGEST
    assert target.read_bytes() == BODY
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]  # no .part, no lock
    assert server.requests == [None]
    assert "file.bin" in capsys.readouterr().err  # the progress bar


def test_a_file_already_in_place_is_not_fetched_again(server, tmp_path):
    target = tmp_path / "file.bin"
    target.write_bytes(BODY)
    assert download(server.url, target, sha256=DIGEST, settings=QUIET) == DIGEST
    assert server.requests == []


def test_a_cut_connection_resumes_with_a_range_request(server, tmp_path):
    server.plan = ["cut"]
    target = tmp_path / "file.bin"
    assert download(server.url, target, size=len(BODY), sha256=DIGEST, settings=ONE_RETRY) == DIGEST
    assert server.requests == [None, f"bytes={server.cut_at}-"]
    assert target.read_bytes() == BODY


def test_a_cut_connection_without_retries_keeps_the_part_for_the_next_run(server, tmp_path):
    server.plan = ["cut"]
    target = tmp_path / "file.bin"
    with pytest.raises(DownloadError, match=r"file\.bin: the connection broke after 5000 bytes"):
        download(server.url, target, settings=QUIET)
    assert not target.exists()
    assert part_file(target).read_bytes() == BODY[:server.cut_at]
    assert download(server.url, target, settings=QUIET) == DIGEST  # the next run resumes
    assert server.requests == [None, f"bytes={server.cut_at}-"]
    assert target.read_bytes() == BODY


def test_a_server_that_ignores_the_range_restarts_from_zero(server, tmp_path):
    server.plan = ["ignore_range"]
    target = tmp_path / "file.bin"
    part_file(target).write_bytes(b"stale bytes of another file")
    assert download(server.url, target, sha256=DIGEST, settings=QUIET) == DIGEST
    assert server.requests == ["bytes=27-"]
    assert target.read_bytes() == BODY


def test_a_part_longer_than_the_file_restarts(server, tmp_path):
    target = tmp_path / "file.bin"
    part_file(target).write_bytes(BODY + b"more")
    assert download(server.url, target, settings=QUIET) == DIGEST  # 416, then the whole file
    assert server.requests == [f"bytes={len(BODY) + 4}-", None]
    part_file(target).write_bytes(BODY + b"more")
    target.unlink()
    assert download(server.url, target, size=len(BODY), settings=QUIET) == DIGEST  # no 416 needed
    assert server.requests[2:] == [None]
    assert target.read_bytes() == BODY


def test_a_checksum_mismatch_leaves_neither_file_nor_part(server, tmp_path):
    target = tmp_path / "file.bin"
    wrong = "0" * 64
    with pytest.raises(ChecksumMismatch, match=f"expected {wrong}, got {DIGEST}") as caught:
        download(server.url, target, sha256=wrong, settings=QUIET)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_size_the_server_does_not_announce_is_refused_before_the_body(server, tmp_path):
    target = tmp_path / "file.bin"
    with pytest.raises(ChecksumMismatch, match=f"expected {len(BODY) - 1} bytes, the server announces "
                                               f"{len(BODY)}"):
        download(server.url, target, size=len(BODY) - 1, settings=QUIET)
    assert list(tmp_path.iterdir()) == []


def test_a_stalled_server_fails_within_the_timeout(server, tmp_path):
    server.plan = ["stall"]
    target = tmp_path / "file.bin"
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"file\.bin: stalled for 0\.5 s$"):
        download(server.url, target, settings=DownloadSettings(timeout=0.5, retries=0, progress=False))
    assert time.monotonic() - started < 1.5
    assert part_file(target).read_bytes() == BODY[:100]  # kept for the next try


def test_a_404_fails_at_once_in_one_line(server, tmp_path):
    with pytest.raises(DownloadError) as caught:
        download(server.url.replace("file.bin", "missing.bin"), tmp_path / "file.bin",
                 settings=DownloadSettings(retries=3, progress=False))
    assert str(caught.value) == f"cannot download {server.url[:-8]}missing.bin: HTTP 404 Not Found"
    assert server.requests == [None]
    assert list(tmp_path.iterdir()) == []


def test_a_5xx_is_retried(server, tmp_path):
    server.plan = ["500"]
    assert download(server.url, tmp_path / "file.bin", settings=ONE_RETRY) == DIGEST
    assert server.requests == [None, None]
    server.plan = ["500", "500"]
    with pytest.raises(DownloadError, match=r"HTTP 500 Internal Server Error \(2 tries\)$"):
        download(server.url, tmp_path / "other.bin", settings=ONE_RETRY)


def test_a_refused_connection_names_the_url(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/file.bin"
    with pytest.raises(DownloadError, match=rf"^cannot download {url}: cannot connect \(.*refused"):
        download(url, tmp_path / "file.bin", settings=QUIET)


def test_offline_refuses_and_says_how_to_turn_it_off(server, tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTVEC_OFFLINE", "yes")
    assert offline()
    with pytest.raises(DownloadError, match="is not in the cache and CONTEXTVEC_OFFLINE is set; unset it"):
        download(server.url, tmp_path / "file.bin", settings=QUIET)
    assert server.requests == []
    (tmp_path / "file.bin").write_bytes(BODY)  # what is in the cache needs no network
    assert download(server.url, tmp_path / "file.bin", sha256=DIGEST, settings=QUIET) == DIGEST
    monkeypatch.setenv("CONTEXTVEC_OFFLINE", "maybe")
    with pytest.raises(ValueError, match="CONTEXTVEC_OFFLINE='maybe' is not a switch"):
        offline()
    monkeypatch.setenv("CONTEXTVEC_OFFLINE", "0")
    assert not offline()


def test_two_downloads_of_one_target_take_turns(server, tmp_path):
    server.pause = 0.05  # the first download lasts long enough for the second to meet it
    target = tmp_path / "file.bin"
    results: list[str | BaseException] = []

    def pull() -> None:
        try:
            results.append(download(server.url, target, size=len(BODY), settings=QUIET))
        except BaseException as e:  # reported by the assertion below
            results.append(e)

    threads = [threading.Thread(target=pull) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert results == [DIGEST, DIGEST]
    assert server.requests == [None]  # the second found the first's file in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]


def _file_size_limit(size: int):
    def limit() -> None:  # in the child: a write past `size` bytes fails with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return limit


def test_a_disk_that_refuses_the_file_is_one_line_naming_the_target(server, tmp_path):
    target = tmp_path / "file.bin"
    code = ("import sys; from pathlib import Path; from contextvec.hub.download import *\n"
            "try: download(sys.argv[1], Path(sys.argv[2]), settings=DownloadSettings(progress=False))\n"
            "except OSError as e: print(e)")
    run = subprocess.run([sys.executable, "-c", code, server.url, str(target)], capture_output=True,
                         text=True, timeout=30, preexec_fn=_file_size_limit(4096))
    assert run.stdout == f"[Errno {errno.EFBIG}] cannot write {target}: File too large\n", run.stderr
    assert not target.exists()
    assert part_file(target).stat().st_size <= 4096  # kept: a run with space resumes it


def test_settings_are_checked():
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        DownloadSettings(timeout=0)
    with pytest.raises(ValueError, match="retries must be a whole number >= 0"):
        DownloadSettings(retries=-1)
    with pytest.raises(ValueError, match="only http:// and https://"):
        download("file:///etc/passwd", Path("x"))
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        download("https://example.invalid/x", Path("x"), sha256="abc")


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTEXTVEC_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "own"
    monkeypatch.setenv("CONTEXTVEC_CACHE", "")
    assert cache_dir() == tmp_path / "xdg" / "contextvec"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "contextvec"
