"""The work of one Ray actor: load the model once, then embed blocks into shards.

Each actor embeds on its own torch thread (:class:`contextvec.bulk.BulkEngine`), made once with
the model, as a local run does; its worker thread is a daemon that ends with the actor's process.

This module does not import Ray: :func:`contextvec.distributed.engine.embed_ray` wraps
:class:`EmbedWorker` with ``ray.remote``, so the class is tested and read as plain Python.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from contextvec.allocator import keep_freed_memory
from contextvec.api import ModelSpec
from contextvec.bulk import BulkEngine, BulkSettings, embed_chunk, write_shard
from contextvec.encoders.fingerprint import model_identity
from contextvec.io.text_lines import Lines

FAULT_ENV = "CONTEXTVEC_RAY_TEST_FAULT"
"""Test hook: a file path. A worker that finds that file when a block arrives deletes it and
dies at once (``os._exit``), as a preempted node would; only one worker can claim it."""


@dataclass(frozen=True)
class BlockDone:
    """What a worker reports for one finished block (its shard is written)."""

    number: int
    lines: int
    tokens: int
    seconds: float
    cpu_seconds: float
    """CPU time of the worker process for the block: far below ``seconds`` = waiting for a core."""
    node: str


class EmbedWorker:
    """Loads the model from ``spec`` once; :meth:`embed_block` embeds with the run's settings.

    A loading error is kept and raised by every call, so the driver gets it as a normal
    exception (with its message) rather than as a dead actor.
    """

    def __init__(self, spec: ModelSpec, settings: BulkSettings) -> None:
        self.settings = settings
        self.node = platform.node()
        keep_freed_memory()  # a worker process runs batch after batch, as the command does
        try:
            self.encoder = spec.load()
            self.identity = model_identity(self.encoder)
            self.engine = BulkEngine(self.encoder)
            self.error: Exception | None = None
        except Exception as e:  # noqa: BLE001 - reported on the first call, see the docstring
            self.error = e

    def model_identity(self) -> str:
        """The fingerprint of the model this worker loaded."""
        if self.error is not None:
            raise RuntimeError(f"a worker on {self.node} could not load the model: {self.error}")
        return self.identity

    def embed_block(self, number: int, lines: Lines, shard: str, identity: str) -> BlockDone:
        """Embed ``lines`` and write them atomically to ``shard``; refuses if this worker's
        model is not the run's (a restarted worker may land on a node with other files)."""
        if self.model_identity() != identity:
            raise RuntimeError(f"the worker on {self.node} loaded another model than the run's "
                               "(its files differ on that node)")
        _fault_hook()
        start, cpu = time.perf_counter(), time.process_time()
        items = embed_chunk(self.engine, lines, self.settings)
        write_shard(Path(shard), items)
        return BlockDone(number, len(lines), sum(len(text.split()) for _, text in lines),
                         time.perf_counter() - start, time.process_time() - cpu, self.node)


def _fault_hook() -> None:
    marker = os.environ.get(FAULT_ENV)
    if marker:
        try:
            os.unlink(marker)
        except FileNotFoundError:
            return
        os._exit(1)
