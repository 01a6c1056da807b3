"""Sentences/s of 16 threads each embedding one sentence per call: through ``contextvec.Engine``
(batched across the threads) against the same calls unbatched.

    python benchmarks/engine_threads.py                    # bundled model, 16 threads x 50 calls
    python benchmarks/engine_threads.py --model PATH --threads 16 --calls 200

Three runs of the same calls (thread ``t``'s call ``k`` embeds sentence ``(t * calls + k) mod n``
of the bundled demo sentences):

- ``direct``: ``encoder.embed([sentence])`` from every thread at once (torch's own threads);
- ``engine, batching off``: ``Engine(encoder, EngineSettings(batching=False)).embed([sentence])``,
  one forward pass per call on the engine's one torch thread;
- ``engine``: ``Engine(encoder).embed([sentence])``, calls waiting together share a forward pass.

Each run starts with ``--warmup`` calls per thread, not timed. Prints sentences/s of each, the
engine's speed-up over each unbatched run, its forward passes, and the largest difference of
its vectors from ``encoder.embed`` of each sentence alone (float rounding only: a batch's
shape sets the order matrix products sum in).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from importlib.resources import files

import numpy as np

import contextvec
from contextvec.engine import Engine, EngineSettings

Embed = Callable[[list[str]], list[np.ndarray]]


def timed(embed: Embed, sentences: list[str], threads: int, calls: int, warmup: int) -> tuple[float, dict]:
    """Seconds for ``threads`` threads making ``calls`` calls each, and each call's vectors."""
    n = len(sentences)
    results: dict[tuple[int, int], np.ndarray] = {}
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        for k in range(warmup):
            embed([sentences[(t + k) % n]])
        start.wait()
        for k in range(calls):
            results[t, k] = embed([sentences[(t * calls + k) % n]])[0]
        start.wait()

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    start.wait()
    seconds = time.perf_counter() - began
    for thread in pool:
        thread.join()
    return seconds, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="what contextvec.load takes (default: bundled)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--calls", type=int, default=50, help="timed calls per thread")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per thread first")
    args = parser.parse_args()

    encoder = contextvec.load(args.model)
    text = files("contextvec.data").joinpath("demo_sentences.txt").read_text(encoding="utf-8")
    sentences = [line for line in text.splitlines() if line.strip()]
    alone = [encoder.embed([s])[0] for s in sentences]
    total = args.threads * args.calls
    rates = {}

    seconds, _ = timed(encoder.embed, sentences, args.threads, args.calls, args.warmup)
    rates["direct"] = total / seconds
    with Engine(encoder, EngineSettings(batching=False)) as engine:
        seconds, _ = timed(engine.embed, sentences, args.threads, args.calls, args.warmup)
    rates["engine, batching off"] = total / seconds
    with Engine(encoder) as engine:
        seconds, got = timed(engine.embed, sentences, args.threads, args.calls, args.warmup)
        stats = engine.stats
    rates["engine"] = total / seconds

    n = len(sentences)
    diff = max(float(np.abs(array - alone[(t * args.calls + k) % n]).max(initial=0.0))
               for (t, k), array in got.items())
    same_shapes = all(array.shape == alone[(t * args.calls + k) % n].shape and array.dtype == np.float32
                      for (t, k), array in got.items())
    print(f"{args.threads} threads x {args.calls} calls of one sentence ({n} distinct sentences)")
    for name, rate in rates.items():
        print(f"  {name:<22} {rate:9.1f} sentences/s")
    print(f"  engine / direct:               {rates['engine'] / rates['direct']:.2f}x")
    print(f"  engine / engine, batching off: {rates['engine'] / rates['engine, batching off']:.2f}x")
    print(f"  engine forward passes: {stats.batches} for {stats.sentences} sentences (warm-up included)")
    print(f"  vectors: shapes and dtype {'identical' if same_shapes else 'DIFFER'}, "
          f"largest difference from encoder.embed alone {diff:.2e}")


if __name__ == "__main__":
    main()
