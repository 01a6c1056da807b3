"""``contextvec serve`` with the model's forward replaced by a busy wait: what the server itself
costs a request at a forward's duration, with no model work (``serve_load.py --only stack``).

    python benchmarks/serve_stub.py SECONDS [contextvec serve options]

Each distinct batch runs once through the model (so responses keep their shapes and values);
after that, each forward of the same batch is a busy wait of SECONDS on the server's torch
thread, which then returns the same vectors. A yardstick for benchmarks, not a server to use.
"""

from __future__ import annotations

import sys
import time

from contextvec.cli.main import main
from contextvec.engine.batcher import Batcher, Job

_real_run_batch = Batcher._run_batch
_vectors: dict[tuple[tuple[str, ...], ...], list] = {}


def _stub_run_batch(self: Batcher, batch: list[tuple[Job, int]], seconds: float) -> list[Job]:
    key = tuple(tuple(job.sentences[i]) for job, i in batch)
    if key not in _vectors:  # the first time: the model's own vectors, kept for the next times
        done = _real_run_batch(self, batch)
        _vectors[key] = [job.results[i] for job, i in batch]
        return done
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    done = []
    for (job, i), array in zip(batch, _vectors[key], strict=True):
        job.results[i] = array
        job.remaining -= 1
        if job.remaining == 0:
            done.append(job)
    return done

if __name__ == "__main__":
    forward_s = float(sys.argv[1])
    Batcher._run_batch = lambda self, batch: _stub_run_batch(self, batch, forward_s)
    sys.argv = ["contextvec", *sys.argv[2:]]
    main()
