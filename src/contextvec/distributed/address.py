"""A bounded check that a Ray cluster answers at an address, before ``ray.init`` joins it.

Ray retries an address where nothing answers for minutes, printing "Failed to connect to GCS"
again and again; its own timeouts, once shortened, abort the whole process. So the driver first
opens the address itself, with a deadline: a Ray cluster's GCS port (and a Ray Client
``ray://`` port) is a gRPC server, which greets every new connection with an HTTP/2 SETTINGS
frame. A refused or unreachable address, or a port that answers otherwise (the dashboard's
HTTP port, say), is one line within :data:`PROBE_SECONDS` per step (connect, then the greeting).
"""

from __future__ import annotations

import os
import socket

PROBE_SECONDS = 5.0
_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's client preface and an empty SETTINGS frame (length 0, type 4, no flags, stream 0)."""
_FRAME_HEADER = 9
_SETTINGS = 4


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT``, optionally after ``ray://``) -> ``(host, port)``."""
    text = address.removeprefix("ray://")
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray-address {address!r}: expected HOST:PORT (e.g. 10.0.0.1:6379) or auto")
    return host, int(port)


def _auto_address() -> str | None:
    """What Ray itself resolves ``auto`` to: ``RAY_ADDRESS``, else the address ``ray start``
    recorded on this machine; None where there is none (``ray.init`` then says so at once)."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        from ray._private.utils import read_ray_address  # no public name for it
    except ImportError:
        return None
    return read_ray_address(None)


def check_ray_address(address: str | None, timeout: float = PROBE_SECONDS) -> None:
    """Raise :class:`ConnectionError` (one line) unless a Ray cluster answers at ``address``.

    ``None`` and ``"local"`` (a Ray started for the run) need no check. With TLS
    (``RAY_USE_TLS``) only the connection is checked: the greeting is encrypted.
    """
    if address in (None, "local"):
        return
    given = address
    if address == "auto":
        address = _auto_address()
        if address is None or address == "local":
            return
    host, port = split_address(address)
    where = given if given == address else f"{given} ({address})"
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.settimeout(timeout)
            sock.sendall(_CLIENT_PREFACE)
            head = b""
            while len(head) < _FRAME_HEADER:
                chunk = sock.recv(_FRAME_HEADER - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError:
        raise ConnectionError(f"no Ray cluster answers at {where} within {timeout:g} s: check the "
                              "address, or start one there with `ray start --head`") from None
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConnectionError(f"no Ray cluster at {where} ({reason}): check the address, or start "
                              "one there with `ray start --head`") from None
    if len(head) < _FRAME_HEADER or head[3] != _SETTINGS:
        raise ConnectionError(f"{where} answers but is not a Ray cluster's GCS port (the one "
                              "`ray start --head --port` opens, 6379 by default; not the dashboard's)")


__all__ = ["PROBE_SECONDS", "check_ray_address", "split_address"]
