"""Dealing blocks to Ray actors, a few in flight per worker.

Retries are Ray's: the actors are made with ``max_restarts=-1`` and ``max_task_retries =
MAX_ATTEMPTS - 1``, so a block whose worker dies (killed, preempted, out of memory) runs again on
the restarted worker, which loads the model anew. A retried block rewrites the same shard
atomically, so a worker that died after writing it changes nothing. An exception raised by the
embedding itself is not retried (it would fail again): it ends the run, naming the block's lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from contextvec.distributed.worker import BlockDone
from contextvec.io.text_lines import Lines
from contextvec.io.untrusted import error_line

MAX_ATTEMPTS = 3
"""Runs of one block before the run gives up on it (a block that kills every worker it meets)."""

Block = tuple[int, Lines]


class WorkerFailure(RuntimeError):
    """A block that could not be embedded; the message names the block and its input lines."""


def run_blocks(
    workers: Sequence[Any],
    blocks: Iterator[Block],
    submit: Callable[[Any, int, Lines], Any],
    describe: Callable[[Lines], str],
    on_done: Callable[[BlockDone], None],
    depth: int = 2,
) -> None:
    """Embed every block of ``blocks`` on ``workers``; ``submit(worker, number, lines)``
    returns the Ray object ref of one ``embed_block`` call. ``depth`` calls per worker are in
    flight at once, so a worker never waits for the driver between blocks."""
    import ray
    from ray.exceptions import RayError, RayTaskError

    in_flight: dict[Any, tuple[int, Block]] = {}
    load = [0] * len(workers)
    while True:
        while True:  # top up the least busy worker
            w = min(range(len(workers)), key=load.__getitem__)
            block = next(blocks, None) if load[w] < depth else None
            if block is None:
                break
            in_flight[submit(workers[w], *block)] = (w, block)
            load[w] += 1
        if not in_flight:
            return
        [ref], _ = ray.wait(list(in_flight), num_returns=1)
        w, (number, lines) = in_flight.pop(ref)
        load[w] -= 1
        try:
            done = ray.get(ref)
        except RayTaskError as e:  # raised by our code on the worker
            cause = e.cause if e.cause is not None else e
            raise WorkerFailure(f"block {number} ({describe(lines)}): {error_line(cause)}") from None
        except RayError as e:  # Ray's retries are spent
            raise WorkerFailure(
                f"block {number} ({describe(lines)}) lost its worker {MAX_ATTEMPTS} times, giving up "
                f"(last: {error_line(e)}); finished blocks are kept, rerun with --resume"
            ) from None
        on_done(done)
