"""Milliseconds to embed one sentence alone: ``contextvec.load(MODEL).embed([sentence])``.

    python benchmarks/lone_sentence.py                     # bundled model, the serve benchmark's sentence
    python benchmarks/lone_sentence.py --model PATH --calls 500
    python benchmarks/lone_sentence.py --pool-thread     # load here, embed from a pool thread
    python benchmarks/lone_sentence.py --precision int8  # bf16 / int8 weights (docs/precision.md)

The direct side of ``serve_load.py --only lone``, without a server: the median of ``--calls``
calls after 20 warm-up calls, in this process with torch's default threads (``--pool-thread``:
the model loaded on the main thread and every call made from one ``ThreadPoolExecutor`` thread,
as a web framework's worker pool makes them; see ``encoders/threads.py``). To compare two
commits on one machine, alternate them with ``PYTHONPATH`` (each process imports the
``src/`` it is given; the script itself only uses ``contextvec.load`` and ``embed``):

    git worktree add /tmp/cv-before REV
    for i in 1 2 3 4 5; do
        PYTHONPATH=/tmp/cv-before/src python benchmarks/lone_sentence.py
        python benchmarks/lone_sentence.py
    done
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import contextvec
from contextvec.encoders.precision import PRECISIONS

SENTENCE = ("The game 's battle system , the BliTZ system , is carried over directly from Valkyira "
            "Chronicles , with the player 's units moving on a map .")
"""28 tokens from WikiText-2 (its valid split), about the length ``serve_load.py`` picks."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="what contextvec.load takes (default: bundled)")
    parser.add_argument("--sentence", default=SENTENCE)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS)
    parser.add_argument("--pool-thread", action="store_true",
                        help="embed from a pool thread (the model loaded on the main thread)")
    args = parser.parse_args()
    encoder = contextvec.load(args.model, precision=args.precision)
    tokens = args.sentence.split()

    def timed() -> float:
        start = time.perf_counter()
        encoder.embed([tokens])
        return time.perf_counter() - start

    with ThreadPoolExecutor(1) as pool:
        call = (lambda: pool.submit(timed).result()) if args.pool_thread else timed
        for _ in range(20):
            call()
        times = [call() for _ in range(args.calls)]
    where = "a pool thread" if args.pool_thread else "the main thread"
    print(f"{len(tokens)} tokens, {args.precision}, {args.calls} calls from {where}: median "
          f"{statistics.median(times) * 1000:.3f} ms (contextvec from {contextvec.__file__})")


if __name__ == "__main__":
    main()
