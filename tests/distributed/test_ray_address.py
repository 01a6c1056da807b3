"""`--ray-address` where no Ray cluster answers: one line (exit code 2) within seconds, never
Ray's endless "Failed to connect to GCS" (loopback only; skipped where Ray is not installed)."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from contextvec.cli.main import main
from contextvec.distributed.address import check_ray_address


@pytest.fixture()
def ray():
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    assert not ray.is_initialized()  # an initialised session would be used whatever the address
    return ray


def _embed_on(address, tmp_path, own_tiny_dir, capsys):
    src = tmp_path / "in.txt"
    src.write_text("The bank was robbed .\n")
    out = tmp_path / "vectors"
    code = main(["embed", str(src), str(out), "--top", "--engine", "ray", "--ray-address", address,
                 "--model", str(own_tiny_dir), "--quiet"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert not out.exists()
    return code, lines


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the server's log is not the command's stderr
        pass


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_address_is_one_line(ray, tmp_path, own_tiny_dir, capsys):
    port = _closed_port()
    code, lines = _embed_on(f"127.0.0.1:{port}", tmp_path, own_tiny_dir, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"contextvec: error: no Ray cluster at 127.0.0.1:{port} (Connection refused)")
    assert not ray.is_initialized()


def test_a_port_that_is_not_ray_is_one_line(ray, tmp_path, own_tiny_dir, capsys):
    """An HTTP server (the dashboard's port, say) accepts the connection but is not Ray's GCS."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        code, lines = _embed_on(address, tmp_path, own_tiny_dir, capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 2 and len(lines) == 1, lines
    assert f"{address} answers but is not a Ray cluster's GCS port" in lines[0]


@pytest.mark.parametrize("address", ["nohost", "127.0.0.1:", "127.0.0.1:port", "127.0.0.1:70000"])
def test_an_address_that_is_not_host_port_is_one_line(ray, tmp_path, own_tiny_dir, capsys, address):
    code, lines = _embed_on(address, tmp_path, own_tiny_dir, capsys)
    assert code == 2 and len(lines) == 1 and "expected HOST:PORT" in lines[0], lines


def test_a_silent_listener_is_refused_after_the_deadline():
    """Accepts, never greets: refused once the deadline passes (a short one here)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(ConnectionError, match=f"no Ray cluster answers at {address} within 0.2 s"):
            check_ray_address(address, timeout=0.2)


def test_local_and_none_need_no_cluster():
    check_ray_address(None)
    check_ray_address("local")
