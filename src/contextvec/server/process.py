"""Run ``contextvec serve`` as a child process on a free loopback port (tests, benchmarks, notebooks).

>>> with ServerProcess(["--model", "path/to/model"]) as server:    # doctest: +SKIP
...     Client(server.url).embed(["The bank was robbed ."])
"""

from __future__ import annotations

import fcntl
import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence

READY_LINE = re.compile(r"serving on (http://\S+)")


class ServerStartError(RuntimeError):
    """The server exited or was not ready in time: a one-line message (with the server's last
    line of output); ``output`` holds all it printed."""

    def __init__(self, message: str, output: str) -> None:
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
        super().__init__(f"{message}; its last output: {last}" if last else f"{message}; no output")
        self.output = output


class ServerProcess:
    """``python -m contextvec.cli.main serve ARGS --host 127.0.0.1 --port 0``, ready on enter.

    Waits for the "serving on URL" line, then for ``/ready``; raises :class:`ServerStartError`
    if it exits or is not ready within ``start_timeout`` seconds (it is then stopped). On exit
    it sends SIGTERM and waits ``stop_timeout`` seconds, then kills it.
    """

    def __init__(self, args: Sequence[str] = (), env: dict[str, str] | None = None,
                 start_timeout: float = 60.0, stop_timeout: float = 30.0) -> None:
        self.args = [*args, "--host", "127.0.0.1", "--port", "0"]
        self.env = {**os.environ, **(env or {})}
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.url = ""
        self.command = [sys.executable, "-m", "contextvec.cli.main", "serve", *self.args]
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 (output() reads it after stop())
        # The child shares this file's offset. Without O_APPEND, a child write that falls between
        # output()'s seek(0) and its read lands over the start of the log (the ready line, say).
        flags = fcntl.fcntl(self._log.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(self._log.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spawn(self) -> None:
        """Start ``self.command`` with its stdout and stderr going to the log; do not wait."""
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                        env=self.env)

    def start(self) -> None:
        self.spawn()
        deadline = time.monotonic() + self.start_timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.process.poll() is not None:
                status = self.process.returncode
                self.process = None
                raise ServerStartError(f"the server exited with status {status} before it was ready",
                                       self.output())
            found = READY_LINE.search(self.output())
            if found and self._ready(found.group(1), min(left, 2.0)):
                self.url = found.group(1)
                return
            time.sleep(0.05)
        self.stop()
        raise ServerStartError(f"the server was not ready within {self.start_timeout:g} s "
                               "(ServerProcess start_timeout)", self.output())

    def _ready(self, url: str, timeout: float) -> bool:
        key = self.env.get("CONTEXTVEC_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/ready", headers=headers),
                                        timeout=timeout) as response:
                return response.status == 200
        except (OSError, http.client.HTTPException):  # URLError is an OSError
            return False

    def output(self) -> str:
        """Everything the server printed so far."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def terminate(self) -> None:
        """Send SIGTERM (graceful shutdown) without waiting."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; the exit status."""
        if self.process is None:
            return None
        self.terminate()
        try:
            return self.process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self.process = None
