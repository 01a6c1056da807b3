"""Every connection has a deadline: ``Client`` calls, ``ServerProcess`` start-up and
``contextvec serve``'s own start-up end with one clear line, never a hang.

Each test is bounded by a deadline of a second or two against a loopback port that is closed,
or held by a listener that accepts connections and never answers.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator

import pytest

from contextvec.cli.main import build_parser
from contextvec.client import Client
from contextvec.server.process import ServerProcess, ServerStartError


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose listener accepts connections (the kernel does) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]   # closed on return: nothing listens there


def test_client_to_a_closed_port_is_one_connection_error(closed_port):
    with pytest.raises(ConnectionError) as error:
        Client(f"http://127.0.0.1:{closed_port}", timeout=2).embed(["a b"])
    message = str(error.value)
    assert message == f"http://127.0.0.1:{closed_port}: cannot reach the server: connection refused"


def test_client_to_a_silent_server_times_out(silent_port):
    client = Client(f"http://127.0.0.1:{silent_port}", timeout=1)
    with pytest.raises(TimeoutError, match=r"no answer within 1 s \(Client\(timeout=\.\.\.\)\)$"):
        client.models()


def test_client_timeout_must_be_a_finite_positive_number():
    for bad in (0, -1, float("nan"), float("inf"), None, True, "5"):
        with pytest.raises(ValueError, match="timeout: expected seconds"):
            Client("http://127.0.0.1:8080", timeout=bad)
    assert Client("http://127.0.0.1:8080").timeout == 60.0


def test_server_process_that_never_prints_ready_fails_in_one_line():
    server = ServerProcess(start_timeout=1)
    server.command = [sys.executable, "-c", "import time; print('loading', flush=True); time.sleep(120)"]
    with pytest.raises(ServerStartError) as error:
        server.start()
    assert str(error.value) == ("the server was not ready within 1 s (ServerProcess start_timeout); "
                                "its last output: loading")
    assert server.process is None   # stopped, not left running


def test_server_process_whose_ready_check_never_answers_fails_in_one_line(silent_port):
    server = ServerProcess(start_timeout=1.5)
    server.command = [sys.executable, "-c", f"import time; print('serving on http://127.0.0.1:{silent_port}',"
                                            " flush=True); time.sleep(120)"]
    with pytest.raises(ServerStartError, match=r"^the server was not ready within 1.5 s [^\n]*$"):
        server.start()


def test_server_process_that_exits_says_its_last_line():
    server = ServerProcess(start_timeout=30)
    server.command = [sys.executable, "-c",
                      "import sys; print('contextvec: error: no such model'); sys.exit(2)"]
    with pytest.raises(ServerStartError) as error:
        server.start()
    assert str(error.value) == ("the server exited with status 2 before it was ready; its last output: "
                                "contextvec: error: no such model")
    assert "no such model" in error.value.output


def test_serve_gives_up_on_a_model_that_never_loads(monkeypatch):
    from contextvec.api import ModelSpec

    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    released = threading.Event()
    monkeypatch.setattr(ModelSpec, "load", lambda spec: released.wait(60))
    args = build_parser("serve").parse_args(["serve", "--start-timeout", "0.5"])
    try:
        with pytest.raises(RuntimeError) as error:
            args.run(args)
    finally:
        released.set()
    assert str(error.value) == "the model was not loaded and warmed up within 0.5 s (--start-timeout)"
