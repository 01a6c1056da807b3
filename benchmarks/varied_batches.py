"""Resident memory and time over batches of ever new shapes, as a server sees them.

    python benchmarks/varied_batches.py --precision bf16            # the bundled model
    python benchmarks/varied_batches.py --model original --precision int8 --batches 100

Embeds ``--batches`` batches, each of 1 to ``--max-batch`` consecutive wikitext-103 validation
sentences from a seeded random start (``sentences.py``), in one ``embed`` call each, and prints the
process's resident memory (``/proc/self/statm``) and the seconds so far every ``--every``
batches. Each batch has its own row counts (tokens, running steps, distinct tokens), so a kernel
library that keeps memory per row count shows it here as growth that does not level off.
Freed memory is kept for reuse (``contextvec.allocator.keep_freed_memory``), as the
``contextvec`` command does. To compare two commits, run each from its own ``src`` with
``PYTHONPATH`` (``lone_sentence.py`` shows how).
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from pathlib import Path

import torch
from checkpoints import original_elmo
from sentences import benchmark_sentences

import contextvec
from contextvec.allocator import keep_freed_memory
from contextvec.encoders.precision import PRECISIONS, apply_precision


def resident_mb() -> float:
    """The process's resident memory now, in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="bundled", help="bundled, original (random weights of the "
                        "published dims), or what contextvec.load takes")
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keep_freed_memory()
    torch.set_grad_enabled(False)
    if args.model == "original":
        encoder = apply_precision(original_elmo(), args.precision)
    else:
        encoder = contextvec.load(None if args.model == "bundled" else args.model, precision=args.precision)
    sentences = benchmark_sentences("wikitext", 4000)
    rng = random.Random(args.seed)
    print(f"{args.model}, {args.precision}, {args.batches} batches of 1-{args.max_batch} sentences "
          f"(contextvec from {contextvec.__file__}); resident after loading: {resident_mb():.0f} MB")
    start = time.perf_counter()
    for i in range(1, args.batches + 1):
        size = rng.randint(1, args.max_batch)
        first = rng.randrange(len(sentences) - size)
        encoder.embed(sentences[first : first + size], batch_size=args.max_batch)
        if i % args.every == 0 or i == args.batches:
            print(f"{i:5d} batches: resident {resident_mb():7.0f} MB, {time.perf_counter() - start:6.1f} s",
                  flush=True)


if __name__ == "__main__":
    main()
