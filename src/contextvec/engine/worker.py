"""The one thread that runs an engine's torch work (in a server: loading, warm-up and every forward).

torch's CPU kernels run their parallel regions on an OpenMP thread team, and GNU OpenMP keeps one
team for every thread that has started a parallel region. Once a process holds more team threads
than cores (loading in the main thread and serving in a batcher thread: two teams of 2 on 2
cores), libgomp stops letting idle team threads spin before they sleep, and every small parallel
region then pays for waking threads that have gone to sleep: a lone sentence's forward with the
bundled model took much longer served than in a plain script (figures in docs/speed.md).
Doing all torch work on this one thread keeps the process at one team (``contextvec.load`` itself
loads on a thread that ends: :mod:`contextvec.encoders.threads`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Self, TypeVar

T = TypeVar("T")


class WorkerThread:
    """A daemon thread that runs the callables given to :meth:`submit`, one at a time, in order.

    A daemon, so that a process told to stop is not held up past its grace period by queued work.
    """

    def __init__(self, name: str = "contextvec-torch") -> None:
        self._tasks: queue.SimpleQueue[tuple[Future, Callable[[], object]] | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn()`` on the thread after what was submitted before; its future."""
        if self._closed:
            raise RuntimeError("the worker thread is closed: it runs nothing more")
        future: Future[T] = Future()
        self._tasks.put((future, fn))
        return future

    def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` on the thread and wait for its result (its exception is raised here)."""
        return self.submit(fn).result()

    def close(self, wait: bool = False) -> None:
        """End the thread once what was submitted before has run (a cancelled future's callable
        is skipped); its OpenMP team ends with it (a process that makes and drops engines keeps no
        idle teams behind). ``wait``: return once it has ended."""
        self._closed = True
        self._tasks.put(None)
        if wait:
            self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving a ``with`` block closes the thread and waits for it to end."""
        self.close(wait=True)

    def _loop(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, fn = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as error:  # handed to the caller, never lost with the thread
                future.set_exception(error)
