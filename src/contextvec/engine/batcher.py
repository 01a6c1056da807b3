"""Dynamic batching: one bounded queue of jobs, one worker thread running the encoder.

Different callers' sentences run in the same forward pass; the encoder is stateless (every
sentence starts from the zero state, padding is masked), so each sentence's vectors are the
ones ``Encoder.embed`` gives it alone, up to float rounding.

The worker's rule:

- **Idle is not taxed.** When only one job is queued, it runs at once.
- **Under load it batches.** With several jobs queued it waits until their sentences fill
  ``max_batch_tokens`` (padded: longest x count) or the oldest job has waited ``max_wait_s``,
  then takes sentences in arrival order while they fit; a sentence over the budget runs alone,
  a job over the budget is split across batches. The encoder sorts each batch by length.
- **Dead work is dropped.** Jobs whose caller went away or whose deadline passed are skipped.
- **One bad job does not fail its partners**: if a batch raises, its jobs are run one by one and
  only the failing one gets the exception.

With ``batching=False`` the worker takes one job at a time (one call = one forward when it
fits the budget): the baseline of ``benchmarks/serve_load.py`` and ``benchmarks/engine_threads.py``.
With no budget as well, every job is one forward pass of exactly its sentences (or one call of
its ``run``).

The worker loop runs on a :class:`~contextvec.engine.worker.WorkerThread`: the one thread for
torch work, which in a server also loaded and warmed the model (see that module for why).
[`Engine`][contextvec.engine.Engine] is the front door; this module is its machinery.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, InvalidStateError, wait
from dataclasses import dataclass, field

import numpy as np

from contextvec.encoders.base import Encoder
from contextvec.engine.worker import WorkerThread

logger = logging.getLogger("contextvec.engine")


class QueueFull(Exception):
    """The queue already holds ``max_queue`` calls: retry later (a server answers 429)."""


class ShuttingDown(Exception):
    """The engine is closed, or not yet started: it takes no new calls (a server answers 503)."""


Runner = Callable[[list[Sequence]], list[np.ndarray]]
"""Runs a batch of items (sentences) on the worker thread: one array per item, in order."""


@dataclass(eq=False)
class Job:
    """One request's sentences; ``future`` gets the list of (num_layers, tokens, dim) arrays,
    or of what ``run`` makes of each item (None: the encoder's layers). The caller holds only
    the future: cancelling it drops the sentences not yet run.

    ``kind`` says which jobs may share a forward pass: those of equal kinds (a batch runs the
    ``run`` of its first job, so jobs of one kind must have runs that do the same work). None,
    with no ``run``: the encoder's layers.
    """

    sentences: list[Sequence]
    deadline: float
    run: Runner | None = None
    kind: Hashable = None
    enqueued: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)
    results: list[np.ndarray | None] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)   # sentence indices not yet taken
    remaining: int = 0                                  # sentences without a result

    def dead(self, now: float) -> bool:
        """Its caller cancelled the future (gone, timed out), or its deadline passed."""
        return now >= self.deadline or self.future.done()


BatchObserver = Callable[[int, int, float], None]
"""Called after each forward with (sentences, padded tokens, seconds)."""


class Batcher:
    """Runs jobs on ``encoder`` on ``worker`` (a new :class:`WorkerThread` if None);
    :meth:`submit` from any thread."""

    def __init__(
        self,
        encoder: Encoder,
        max_batch_tokens: int | None = 4096,
        max_wait_s: float = 0.005,
        max_queue: int = 512,
        batching: bool = True,
        on_batch: BatchObserver | None = None,
        worker: WorkerThread | None = None,
    ) -> None:
        self.encoder = encoder
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.batching = batching
        self.on_batch = on_batch
        self._queue: deque[Job] = deque()
        self._queued_sentences = 0
        self._cond = threading.Condition()
        self._closing = False
        self._free_since = 0.0  # when the last forward ended: the answered clients come back
        self._expected = 0  # jobs in the server when it ended (answered + queued): who comes back
        self._worker = worker
        self._own_worker = worker is None  # made here, so ended here when the loop ends
        self._running: Future | None = None  # the worker loop, once started

    def start(self) -> None:
        if self._closing:
            return  # a closed engine stays closed (its own thread may be gone)
        self._worker = self._worker or WorkerThread("contextvec-batcher")
        self._running = self._worker.submit(self._run)
        if self._own_worker:
            self._worker.close()  # the thread ends when the loop does

    @property
    def depth(self) -> int:
        """Sentences waiting in the queue."""
        return self._queued_sentences

    @property
    def accepting(self) -> bool:
        return not self._closing and self._running is not None and not self._running.done()

    def submit(self, sentences: list[Sequence], deadline: float, run: Runner | None = None,
               kind: Hashable = None) -> Future:
        """Queue a job; its future. Raises :class:`QueueFull` or :class:`ShuttingDown`.

        ``run``: what to run on a batch of its items instead of the encoder's layers; it runs
        every item, where the encoder's empty layers for an empty sentence are made without a
        forward. ``kind``: items of other jobs join the batch only if their job's kind is equal;
        a ``run`` needs one (and a kind needs its ``run``).
        """
        if (run is None) != (kind is None):
            raise ValueError("run and kind go together: a run needs the kind of work it does "
                             "(calls of equal kinds share forward passes), and a kind its run")
        hash(kind)  # a kind that cannot be a key is refused here, not on the worker thread
        job = Job(sentences, deadline, run, kind)
        job.results = [None] * len(sentences)
        empty = np.zeros((self.encoder.num_layers, 0, self.encoder.output_dim), dtype=np.float32)
        for i, tokens in enumerate(sentences):
            if tokens or run is not None:
                job.pending.append(i)
            else:
                job.results[i] = empty
        job.remaining = len(job.pending)
        if not job.pending:
            job.future.set_result(job.results)
            return job.future
        with self._cond:
            if not self.accepting:
                raise ShuttingDown("the engine is closed: it takes no new calls")
            if len(self._queue) >= self.max_queue:
                self._purge_dead()
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} calls waiting, max_queue)")
            self._queue.append(job)
            self._queued_sentences += len(job.pending)
            self._cond.notify()
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting; the worker finishes the queued jobs, then exits (waits ``timeout``)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._running is not None:
            wait([self._running], timeout)

    # -- worker --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                self._wait_for_partners()
                batch = self._take()
            if batch:
                try:
                    self._forward(batch)
                except Exception:  # never let the worker die: the queue would hang
                    logger.exception("batch of %d sentences failed", len(batch))
                    for job, _ in batch:
                        _fail(job, RuntimeError("internal error while running the batch"))
                self._expected = len(dict.fromkeys(job for job, _ in batch)) + len(self._queue)
                self._free_since = time.monotonic()

    def _wait_for_partners(self) -> None:
        """Wait while fewer jobs are queued than the last forward left in the server (the clients
        it answered send their next requests, and join this batch), the budget is not full, and
        ``max_wait_s`` has not passed since the later of the oldest job's arrival and the end of
        the last forward. A job alone that came ``max_wait_s`` or more after that end found the
        server idle: it runs at once."""
        if not self.batching:
            return
        while not self._closing:
            queued = len(self._queue)
            if (not queued or queued >= self._expected or (self.max_batch_tokens is not None
                    and self._queued_padded_tokens() >= self.max_batch_tokens)):
                return
            since = max(self._queue[0].enqueued, self._free_since)
            if queued == 1 and since >= self._free_since + self.max_wait_s:
                return  # it came to an idle server: the answered clients are not coming back
            left = since + self.max_wait_s - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _queued_padded_tokens(self) -> int:
        longest = count = 0
        for job in self._queue:
            for i in job.pending:
                longest = max(longest, len(job.sentences[i]))
                count += 1
        return longest * count

    def _take(self) -> list[tuple[Job, int]]:
        """Sentences in arrival order while they fit the budget (at least one)."""
        now = time.monotonic()
        batch: list[tuple[Job, int]] = []
        longest = 0
        while self._queue:
            job = self._queue[0]
            if job.dead(now):
                self._drop(job)
                continue
            if batch and job.kind != batch[0][0].kind:
                return batch  # another kind of work: the next batch
            while job.pending:
                n = len(job.sentences[job.pending[0]])
                if (batch and self.max_batch_tokens is not None
                        and max(longest, n) * (len(batch) + 1) > self.max_batch_tokens):
                    return batch
                longest = max(longest, n)
                batch.append((job, job.pending.pop(0)))
                self._queued_sentences -= 1
            self._queue.popleft()
            if not self.batching:
                return batch
        return batch

    def _purge_dead(self) -> None:
        """Dropped jobs (client gone, deadline passed) no longer count against ``max_queue``."""
        now = time.monotonic()
        for job in [job for job in self._queue if job.dead(now)]:
            self._queue.remove(job)
            self._queued_sentences -= len(job.pending)
            job.pending.clear()

    def _drop(self, job: Job) -> None:
        self._queue.popleft()
        self._queued_sentences -= len(job.pending)
        job.pending.clear()

    def _forward(self, batch: list[tuple[Job, int]]) -> None:
        start = time.perf_counter()
        try:
            done = self._run_batch(batch)
        except Exception as error:
            done = []
            jobs = list(dict.fromkeys(job for job, _ in batch))
            if len(jobs) == 1:
                _fail(jobs[0], error)
            else:  # find the job at fault: the others still get their vectors
                for job in jobs:
                    done += self._run_alone(job, [(j, i) for j, i in batch if j is job])
        if self.on_batch is not None:
            longest = max(len(job.sentences[i]) for job, i in batch)
            self.on_batch(len(batch), longest * len(batch), time.perf_counter() - start)
        # Answered last: the event loop that resumes needs the GIL, which this thread holds
        # until it waits for the next job; so the bookkeeping above is not added to the latency.
        for job in done:
            _settle(job.future.set_result, job.results)

    def _run_alone(self, job: Job, batch: list[tuple[Job, int]]) -> list[Job]:
        try:
            return self._run_batch(batch)
        except Exception as error:
            _fail(job, error)
            return []

    def _run_batch(self, batch: list[tuple[Job, int]]) -> list[Job]:
        """Run the batch; only if all of it succeeds are the results given to their jobs. The jobs
        that now have all their results are returned (the caller answers them)."""
        sentences = [job.sentences[i] for job, i in batch]
        run = batch[0][0].run
        if run is not None:
            arrays = dict(enumerate(run(sentences)))
        else:
            budget = self.max_batch_tokens if self.batching else None
            arrays = dict(self.encoder.embed_batches(sentences, len(sentences), budget))
        done = []
        for k, (job, i) in enumerate(batch):
            job.results[i] = arrays[k]
            job.remaining -= 1
            if job.remaining == 0:
                done.append(job)
        return done


def _fail(job: Job, error: Exception) -> None:
    _settle(job.future.set_exception, error)


def _settle(setter: Callable[[object], None], value: object) -> None:
    # The waiting side may have cancelled the future meanwhile (client gone, shutdown).
    with contextlib.suppress(InvalidStateError):
        setter(value)
