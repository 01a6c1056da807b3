"""Which thread runs torch's work, and why it matters on the CPU.

torch's CPU kernels run their parallel regions on an OpenMP team, and GNU OpenMP (libgomp, what
the PyPI wheels use) keeps a team of worker threads for every thread that has started a parallel
region, for as long as that thread lives. Once a process holds more team threads than cores,
libgomp stops letting idle team threads spin before they sleep, and every one of the many small
parallel regions of a forward pass then waits for sleeping threads to wake.

Loading a model starts parallel regions (copying and converting weights). A model loaded on the
main thread and then used from another one (a web framework's thread pool, an executor, a
server's batcher) left two teams on the cores, and a sentence embedded from a pool thread
took much longer than from the main thread (``benchmarks/lone_sentence.py --pool-thread``
shows it; figures in docs/speed.md).
:func:`in_passing_thread` runs the loading on a thread that ends, and a thread that ends takes
its team with it, so whichever thread then embeds holds the process's only team.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def in_passing_thread(fn: Callable[[], T], name: str = "contextvec-load") -> T:
    """``fn()`` run on a new thread that ends when it returns; its result, or its exception
    raised here (with its own traceback). The thread is a daemon: an interrupted caller does not
    keep the process alive waiting for it."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["result"] = fn()
        except BaseException as error:  # handed to the caller, whatever it is
            outcome["error"] = error

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
