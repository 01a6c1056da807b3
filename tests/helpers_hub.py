"""A loopback HTTP server of fixture files, tiny published models packed as their publishers pack
them, and a registry file pointing at the server (for contextvec.hub's pull tests).

The server binds 127.0.0.1 on a free port, runs on a daemon thread and stops with its ``with``
block; nothing reaches beyond it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import lzma
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data"
EFML_CHARS = DATA / "efml" / "chars"
TF_HUB = DATA / "tfckpt" / "hub"


@dataclass
class Files:
    """What the server serves (path -> bytes) and what it was asked (``requests``: paths)."""

    url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


class _Loopback(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def _on_loopback(handler: type[http.server.BaseHTTPRequestHandler], state: Files) -> Iterator[None]:
    """Serve with ``handler`` on a free port of 127.0.0.1 (its URL into ``state.url``) on a daemon
    thread, stopped when the block ends."""
    server = _Loopback(("127.0.0.1", 0), handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def serving(files: dict[str, bytes]) -> Iterator[Files]:
    """Serve ``files`` (``/path`` -> bytes) on 127.0.0.1; 404 for anything else."""
    state = Files(files=dict(files))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            body = state.files.get(self.path)
            status = 200 if body is not None else 404
            body = body if body is not None else b"not found"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with _on_loopback(Handler, state):
        yield state


def zip_of(directory: Path, top: str | None = None, extra: dict[str, bytes] | None = None) -> bytes:
    """The files of ``directory`` zipped (flat, or under the folder ``top``), plus ``extra``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            name = path.relative_to(directory).as_posix()
            z.writestr(f"{top}/{name}" if top else name, path.read_bytes())
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buffer.getvalue()


def tf_hub_tarball() -> bytes:
    """The fixture TF-Hub module as tensorflow_hub's compressed format packs one: a tar.gz whose
    root is the module (``./tfhub_module.pb``, ``./saved_model.pb``, ``./variables/...``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for path in sorted(p for p in TF_HUB.rglob("*") if p.is_file() and p.suffix != ".xz"):
            add(path.relative_to(TF_HUB).as_posix(), path.read_bytes())
        add("saved_model.pb", lzma.decompress((TF_HUB / "saved_model.pb.xz").read_bytes()))
    return buffer.getvalue()


def hostile_zip() -> bytes:
    """A zip whose member climbs out of the folder it is unpacked into."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("../../escaped.txt", b"out")
    return buffer.getvalue()


def write_registry(path: Path, entries: list[dict]) -> Path:
    """A ``$CONTEXTVEC_REGISTRY`` file of ``entries``."""
    path.write_text(json.dumps({"models": entries}))
    return path


HUB_COMMIT = "c0ffee" * 6 + "c0ff"
"""The commit the fake Hub serves every revision at."""


@contextlib.contextmanager
def fake_hub(repos: dict[str, dict[str, bytes]]) -> Iterator[Files]:
    """The few routes of the Hugging Face Hub that ``huggingface_hub.snapshot_download`` asks
    for, on 127.0.0.1: a repository's file list (``/api/models/ID/revision/REV``) and each file
    (``/ID/resolve/COMMIT/NAME``, HEAD and GET, with the commit and ETag headers it reads)."""
    state = Files()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _route(self, head: bool) -> None:
            path = self.path.split("?")[0]
            state.requests.append(path)
            for repo, files in repos.items():
                if path.startswith(f"/api/models/{repo}/revision/"):
                    listing = {"id": repo, "sha": HUB_COMMIT, "siblings": [{"rfilename": f} for f in files]}
                    self._send(200, json.dumps(listing).encode(), {"Content-Type": "application/json"}, head)
                    return
                name = path.removeprefix(f"/{repo}/resolve/{HUB_COMMIT}/")
                if name != path and name in files:
                    data = files[name]
                    etag = '"' + hashlib.sha1(data).hexdigest() + '"'
                    self._send(200, data, {"X-Repo-Commit": HUB_COMMIT, "ETag": etag}, head)
                    return
            self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"}, head)

        def do_GET(self) -> None:
            self._route(head=False)

        def do_HEAD(self) -> None:
            self._route(head=True)

    with _on_loopback(Handler, state):
        yield state
