"""``contextvec serve`` with the model's forward replaced by a busy wait: what the server itself
costs a request at a forward's duration, with no model work (``serve_load.py --only stack``).

    python benchmarks/serve_stub.py SECONDS [contextvec serve options]

Each distinct batch runs once through the model (so responses keep their shapes and values);
after that, each ``Encoder.embed_batches`` call on the same batch is a busy wait of SECONDS on
the server's torch thread, which then returns the same vectors. A yardstick for benchmarks, not a
server to use.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence

import numpy as np

from contextvec.cli.main import main
from contextvec.encoders.base import Encoder

_real_embed_batches = Encoder.embed_batches
_pairs: dict[tuple[tuple[str, ...], ...], list[tuple[int, np.ndarray]]] = {}


def _stub_embed_batches(self: Encoder, sentences: Sequence[Sequence[str]], batch_size: int = 32,
                        max_tokens: int | None = 4096, *, seconds: float) -> Iterator[tuple[int, np.ndarray]]:
    key = tuple(tuple(s) for s in sentences)
    if key not in _pairs:  # the first time: the model's own vectors, kept for the next times
        _pairs[key] = list(_real_embed_batches(self, sentences, batch_size, max_tokens))
        return iter(_pairs[key])
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return iter(_pairs[key])


if __name__ == "__main__":
    forward_s = float(sys.argv[1])
    Encoder.embed_batches = lambda self, sentences, batch_size=32, max_tokens=4096: _stub_embed_batches(
        self, sentences, batch_size, max_tokens, seconds=forward_s)
    sys.argv = ["contextvec", *sys.argv[2:]]
    main()
