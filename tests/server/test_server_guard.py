"""What ``contextvec serve`` refuses that a browser page or a slow client could send: Host names
it was not given (DNS rebinding), cross-origin calls from origins it was not given (CORS), and
connections that hold a request's head (or nothing) open. A real server on a loopback port."""

from __future__ import annotations

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")

from contextvec.server.process import ServerProcess  # noqa: E402
from contextvec.server.settings import ServerSettings  # noqa: E402

ENV = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}
HEADER_TIMEOUT, IDLE_TIMEOUT = 1.0, 0.5
APP = "http://app.example.com"


@pytest.fixture(scope="module")
def server():
    args = ["--threads", "1", "--no-ui", "--allowed-hosts", "embed.example.com, *.example.org",
            "--cors-origin", APP, "--header-timeout", str(HEADER_TIMEOUT),
            "--idle-timeout", str(IDLE_TIMEOUT)]
    with ServerProcess(args, env=ENV) as process:
        yield process.url


def request(url: str, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_allowed_hosts_are_taken_and_no_others(server):
    for host in ("embed.example.com", "EMBED.example.com:443", "a.example.org", "localhost"):
        assert request(server, "GET", "/health", headers={"Host": host})[0] == 200, host
    for host in ("example.org", "embed.example.com.evil.example", "evil.example"):
        status, _, body = request(server, "POST", "/v1/embed", b'{"sentences": ["a"]}',
                                  {"Host": host, "Content-Type": "application/json"})
        error = json.loads(body)["error"]
        assert status == 400 and error["param"] == "host", (host, error)
        assert "127.0.0.1, localhost, [::1], embed.example.com, *.example.org" in error["message"]


def test_cors_answers_the_named_origin_only(server):
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, authorization"}
    status, headers, _ = request(server, "OPTIONS", "/v1/embed", headers={"Origin": APP, **preflight})
    assert status == 200 and headers["access-control-allow-origin"] == APP
    assert "POST" in headers["access-control-allow-methods"]
    status, headers, _ = request(server, "POST", "/v1/embed", b'{"sentences": ["a b"]}',
                                 {"Origin": APP, "Content-Type": "application/json"})
    assert status == 200 and headers["access-control-allow-origin"] == APP
    for origin in ("http://evil.example", "https://app.example.com", "http://app.example.com:8080"):
        status, headers, _ = request(server, "OPTIONS", "/v1/embed", headers={"Origin": origin, **preflight})
        assert status == 400 and "access-control-allow-origin" not in headers, origin
        status, headers, _ = request(server, "GET", "/v1/models", headers={"Origin": origin})
        assert status == 200 and "access-control-allow-origin" not in headers, origin


def closed_within(sock: socket.socket, trickle: bytes, bound: float) -> float:
    """Seconds until the server closes ``sock`` while a byte of ``trickle`` goes every 0.1 s."""
    start = time.monotonic()
    sock.settimeout(0.1)
    sent = 0
    while (elapsed := time.monotonic() - start) < bound:
        try:
            if sent < len(trickle):
                sock.sendall(trickle[sent:sent + 1])
                sent += 1
            if sock.recv(4096) == b"":
                return elapsed
        except TimeoutError:
            continue
        except OSError:   # reset while sending: closed
            return elapsed
    raise AssertionError(f"the connection was still open after {bound:g} s")


def test_a_request_head_sent_slowly_or_never_is_cut_off(server):
    parts = urlsplit(server)
    head = b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"y" * 1000
    with socket.create_connection((parts.hostname, parts.port)) as sock:   # a header, byte by byte
        assert closed_within(sock, head, HEADER_TIMEOUT + 2.0) > HEADER_TIMEOUT - 0.2
    with socket.create_connection((parts.hostname, parts.port)) as sock:   # nothing at all
        closed_within(sock, b"", HEADER_TIMEOUT + 2.0)
    # A kept-alive connection that falls silent after a response is closed after --idle-timeout;
    # one that then trickles its next head, after --header-timeout.
    for trickle, bound in ((b"", IDLE_TIMEOUT), (head, HEADER_TIMEOUT)):
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            closed_within(sock, trickle, bound + 2.0)
    assert request(server, "GET", "/health")[0] == 200


@pytest.mark.parametrize(("settings", "words"), [
    ({"allowed_hosts": ("embed.example.com:8080",)}, "'embed.example.com:8080' is not a host name"),
    ({"allowed_hosts": ("a b",)}, "'a b' is not a host name"),
    ({"allowed_hosts": ("x.*.example.com",)}, "'*.domain' or '*'"),
    ({"cors_origins": ("app.example.com",)}, "'app.example.com' is not an origin"),
    ({"cors_origins": ("https://app.example.com/page",)}, "scheme://host[:port], no path"),
])
def test_host_and_origin_settings_are_checked(settings, words):
    with pytest.raises(ValueError, match="^(allowed_hosts|cors_origins): ") as error:
        ServerSettings(**settings)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_body_sent_slowly_is_a_408_within_the_request_timeout():
    """A client that sends its head at once and then trickles its body (a slow POST) holds the
    connection no longer than a request may take."""
    with ServerProcess(["--threads", "1", "--no-ui", "--request-timeout", "1"], env=ENV) as process:
        parts = urlsplit(process.url)
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            sock.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{")
            start, answer = time.monotonic(), b""
            sock.settimeout(0.1)
            while time.monotonic() - start < 5.0:
                try:
                    sock.sendall(b" ")
                    data = sock.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                answer += data
            elapsed = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"did not arrive within 1 s (--request-timeout)" in answer
        assert 0.8 < elapsed < 4.0, elapsed
