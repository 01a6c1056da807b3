"""The front door of the engine: many callers' sentences, batched by length on one torch thread.

Each call's sentences join a queue; the engine's one worker thread takes queued sentences of
every caller into one forward pass under a budget of padded tokens, then answers each caller
with its own vectors (the rule: :mod:`contextvec.engine.batcher`). An encoder is stateless, so
the vectors are those ``Encoder.embed`` gives each sentence, up to float rounding. With batching
off and no budget, each call is one forward pass of exactly its sentences.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType

import numpy as np

from contextvec.encoders.base import Encoder
from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling, view_layers
from contextvec.engine.batcher import Batcher, BatchObserver
from contextvec.engine.worker import WorkerThread
from contextvec.text.tokenize import Sentence, as_sentences


@dataclass(frozen=True)
class EngineSettings:
    """How an engine batches (``contextvec serve``'s options of the same names).

    Attributes:
        max_batch_tokens: padded tokens (longest sentence x sentences) per forward pass; a
            longer sentence runs alone. None: no budget; with ``batching`` off, each call then
            runs as one forward pass of exactly its sentences.
        max_wait_ms: under load, the longest the oldest queued call waits for others to share
            its forward pass (a call to an idle engine runs at once).
        max_queue: calls waiting at once; one more raises
            [`QueueFull`][contextvec.engine.QueueFull].
        batching: False for one call per forward pass (the unbatched baseline); a call over
            ``max_batch_tokens`` is still split.

    Raises:
        ValueError: a budget below one token, a negative or infinite wait, a queue below one.
    """

    max_batch_tokens: int | None = 4096
    max_wait_ms: float = 5.0
    max_queue: int = 512
    batching: bool = True

    def __post_init__(self) -> None:
        for name, value, none_too in (("max_batch_tokens", self.max_batch_tokens, True),
                                      ("max_queue", self.max_queue, False)):
            if none_too and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                choices = "None or a whole number" if none_too else "a whole number"
                raise ValueError(f"{name} must be {choices} of at least 1, not {value!r}")
        if not (isinstance(self.max_wait_ms, int | float) and 0 <= self.max_wait_ms < math.inf):
            raise ValueError(f"max_wait_ms must be a finite number of at least 0, not {self.max_wait_ms!r}")


@dataclass(frozen=True)
class EngineStats:
    """What an engine has run so far.

    Attributes:
        batches: forward passes (a batch that failed and was rerun call by call counts once).
        sentences: sentences in those forward passes.
        padded_tokens: padded tokens (longest sentence x sentences) in those forward passes.
    """

    batches: int = 0
    sentences: int = 0
    padded_tokens: int = 0


class Engine:
    """Embeds sentences for many callers at once, batching their calls together.

    >>> import contextvec
    >>> encoder = contextvec.load("path/to/model")                        # doctest: +SKIP
    >>> with contextvec.Engine(encoder) as engine:                        # doctest: +SKIP
    ...     vectors = engine.embed(["The bank was robbed ."], layers="top")

    [`embed`][contextvec.engine.Engine.embed] is safe to call from any number of threads and
    [`aembed`][contextvec.engine.Engine.aembed] from any number of coroutines; calls that wait
    at the same time share forward passes. Each call gets what ``encoder.embed`` gives for the
    same arguments, up to float rounding (a batch's shape sets the order matrix products sum in).

    Args:
        encoder: a loaded encoder in eval mode (as ``contextvec.load`` returns it). The engine
            runs every forward pass on its worker thread; do not train the encoder meanwhile.
        settings: the batching budget and queue bound (None: the defaults of
            [`EngineSettings`][contextvec.engine.EngineSettings]).
        worker: the thread to run forward passes on, e.g. the one that loaded the model (a new
            one if None; ``contextvec.engine.worker`` says why one thread for all torch work).
        on_batch: called on the worker thread after each forward pass with (sentences, padded
            tokens, seconds), e.g. to record metrics.
        start: False to start the worker loop later with [`start`][contextvec.engine.Engine.start]
            (a server starts it when it starts serving).
    """

    def __init__(self, encoder: Encoder, settings: EngineSettings | None = None, *,
                 worker: WorkerThread | None = None, on_batch: BatchObserver | None = None,
                 start: bool = True) -> None:
        self.encoder = encoder
        self.settings = settings = settings or EngineSettings()
        self._on_batch = on_batch
        self._stats = EngineStats()
        self._stats_lock = threading.Lock()
        self._batcher = Batcher(encoder, settings.max_batch_tokens, settings.max_wait_ms / 1000,
                                settings.max_queue, settings.batching, self._observe, worker)
        if start:
            self.start()

    def start(self) -> None:
        """Start the worker loop (the constructor does, unless given ``start=False``)."""
        if not self.accepting:
            self._batcher.start()

    @property
    def accepting(self) -> bool:
        """True while the engine takes new calls (started, not closed)."""
        return self._batcher.accepting

    @property
    def depth(self) -> int:
        """Sentences waiting in the queue."""
        return self._batcher.depth

    @property
    def stats(self) -> EngineStats:
        """What the engine has run so far (a snapshot)."""
        with self._stats_lock:
            return self._stats

    def embed(self, sentences: Iterable[Sentence], *, layers: Layers | str = Layers.ALL,
              pool: Pooling | str | None = None, timeout: float | None = None) -> list[np.ndarray]:
        """Vectors for each sentence, in input order, batched with other callers' sentences.

        Args:
            sentences: strings (split on whitespace) or token lists. A bare string is refused
                (pass ``[text]`` for one sentence).
            layers: a [`Layers`][contextvec.encoders.outputs.Layers] or its spelling (``"all"``,
                ``"top"``, ``"average"``), as in ``Encoder.embed``.
            pool: None or a [`Pooling`][contextvec.encoders.outputs.Pooling] (``"mean"``,
                ``"max"``, ``"first"``), as in ``Encoder.embed``.
            timeout: seconds to wait, queue included (None: no limit); past it the call's
                sentences not yet run are dropped.

        Returns:
            What ``Encoder.embed(sentences, layers=layers, pool=pool)`` returns.

        Raises:
            TypeError: a bare string or bytes instead of a list of sentences.
            ValueError: an unknown ``layers`` or ``pool``.
            QueueFull: ``max_queue`` calls are already waiting; retry later.
            ShuttingDown: the engine is closed (or was never started).
            TimeoutError: not done within ``timeout``.
        """
        future = self._submit(sentences, layers, pool, timeout)
        try:
            arrays = future.result(timeout)
        except TimeoutError:
            if future.done():  # the encoder's own TimeoutError, not this call's
                raise
            future.cancel()
            raise TimeoutError(f"the sentences were not embedded within {timeout:g} s") from None
        return _view(arrays, layers, pool)

    async def aembed(self, sentences: Iterable[Sentence], *, layers: Layers | str = Layers.ALL,
                     pool: Pooling | str | None = None, timeout: float | None = None) -> list[np.ndarray]:
        """[`embed`][contextvec.engine.Engine.embed] for coroutines: awaits without blocking
        the event loop; a cancelled call's sentences not yet run are dropped."""
        future = self._submit(sentences, layers, pool, timeout)
        try:
            arrays = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            if future.done() and not future.cancelled():  # the encoder's own
                raise
            future.cancel()
            raise TimeoutError(f"the sentences were not embedded within {timeout:g} s") from None
        except asyncio.CancelledError:
            future.cancel()
            raise
        return _view(arrays, layers, pool)

    def submit(self, sentences: list[Sequence], deadline: float,
               run: Callable[[list[Sequence]], list] | None = None, kind: Hashable = None) -> Future:
        """The call below ``embed``: queue token lists, get a future of the list of each
        sentence's ``(num_layers, tokens, dim)`` array. Past ``deadline`` (``time.monotonic()``)
        or once the future is cancelled the sentences not yet run are dropped.

        Work other than the encoder's layers: ``run`` gets a batch of items (any sized objects:
        ``len`` counts against the budget) on the worker thread and returns one result per item,
        in order; ``kind`` (hashable) names the work it does. Calls share a forward pass only
        when their kinds are equal, and the batch runs its first call's ``run``, so give every
        call whose ``run`` does the same work the same kind (a bound method made per call is a
        new object each time, and no kind of its own).

        Raises:
            ValueError: a ``run`` without a ``kind``, or a ``kind`` without a ``run``.
            TypeError: a ``kind`` that is not hashable.
            QueueFull: ``max_queue`` calls are already waiting.
            ShuttingDown: the engine is closed (or was never started).
        """
        return self._batcher.submit(sentences, deadline, run, kind)

    def close(self, timeout: float | None = None) -> None:
        """Take no new calls; the queued ones still run (waits up to ``timeout`` seconds for them)."""
        self._batcher.close(timeout)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _submit(self, sentences: Iterable[Sentence], layers: Layers | str, pool: Pooling | str | None,
                timeout: float | None) -> Future:
        tokenized = as_sentences(sentences)
        as_layers(layers), as_pooling(pool)  # refused before the call queues
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        return self.submit(tokenized, deadline)

    def _observe(self, sentences: int, padded_tokens: int, seconds: float) -> None:
        with self._stats_lock:
            s = self._stats
            self._stats = EngineStats(s.batches + 1, s.sentences + sentences,
                                      s.padded_tokens + padded_tokens)
        if self._on_batch is not None:
            self._on_batch(sentences, padded_tokens, seconds)


def _view(arrays: list[np.ndarray], layers: Layers | str, pool: Pooling | str | None) -> list[np.ndarray]:
    """The caller's layers and pooling, applied on the caller's thread (not the torch thread)."""
    layers, pool = as_layers(layers), as_pooling(pool)
    return [view_layers(array, layers, pool) for array in arrays]
