"""``ServerProcess`` keeps every byte its child prints, however often the parent reads the log."""

from __future__ import annotations

import sys

from contextvec.server.process import ServerProcess

LINES = 20_000


def test_output_read_while_the_child_writes_loses_nothing():
    # The start loop reads the log while the server prints; before the log was opened for append,
    # a read between two writes let the next write land over the start of the log (CI lost the
    # ready line's newline that way, and with it the URL).
    server = ServerProcess()
    server.command = [sys.executable, "-c", f"for i in range({LINES}): print(i, flush=True)"]
    server.spawn()
    reads = 0
    while server.process.poll() is None:
        server.output()
        reads += 1
    assert server.stop() == 0
    assert reads > 10
    assert server.output().splitlines() == [str(i) for i in range(LINES)]
