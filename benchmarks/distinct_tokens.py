"""ELMo in batches with and without a batch's repeated tokens projected once, alternated.

    python benchmarks/distinct_tokens.py --sentences reference --n-sentences 64
    python benchmarks/distinct_tokens.py --sentences wikitext --n-sentences 512 --pairs 3
    python benchmarks/distinct_tokens.py --model bundled --sentences wikitext --n-sentences 1024

``--model``: ``original`` (random weights of the 2x4096_512_2048cnn_2xhighway dimensions) or
``bundled`` (elmo-en-small). One process, one model per precision: each pair runs the same
length-sorted batches once as shipped and once with the first layer given no distinct tokens
(every position projected), in alternating order, so that the machine's drift between runs,
large on a shared machine, falls on both alike. Prints the tokens/s of each and their ratio per
pair and the median ratio, and checks that both give the same vectors. The token cache is
emptied before every pass.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from checkpoints import original_elmo
from sentences import SOURCES, benchmark_sentences

import contextvec
from contextvec.allocator import keep_freed_memory
from contextvec.encoders.precision import PRECISIONS, apply_precision
from contextvec.text.batching import length_batches


def compare(model: str, precision: str, batches: list[list[list[str]]], batch_size: int,
            pairs: int) -> None:
    """Prints the alternated pairs of one precision (see the module's docstring)."""
    n_tokens = sum(len(s) for batch in batches for s in batch)
    encoder = (apply_precision(original_elmo(), precision) if model == "original"
               else contextvec.load("elmo-en-small", precision=precision))
    shipped = encoder.bilm.contextualize

    def every_position(*args, distinct=None, **kwargs):
        return shipped(*args, **kwargs)

    def run(projected_once: bool) -> tuple[float, list]:
        encoder.bilm.contextualize = shipped if projected_once else every_position
        encoder.clear_caches()
        start = time.perf_counter()
        out = [encoder.embed(b, batch_size=batch_size) for b in batches]
        return time.perf_counter() - start, out

    _, once = run(True)  # warm-up, and the vectors to compare
    _, every = run(False)
    same = all(torch.equal(torch.as_tensor(a), torch.as_tensor(b))
               for x, y in zip(once, every, strict=True) for a, b in zip(x, y, strict=True))
    ratios = []
    for pair in range(pairs):
        first = pair % 2 == 0
        seconds = dict([(first, run(first)[0]), (not first, run(not first)[0])])
        ratios.append(seconds[False] / seconds[True])
        print(f"{precision:<5} pair {pair + 1}: once {n_tokens / seconds[True]:8.1f} tokens/s, every "
              f"position {n_tokens / seconds[False]:8.1f}, ratio {ratios[-1]:.3f}", flush=True)
    print(f"{precision:<5} median ratio {statistics.median(ratios):.3f}; same vectors: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("original", "bundled"), default="original")
    parser.add_argument("--sentences", choices=SOURCES, default="reference")
    parser.add_argument("--n-sentences", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    sentences = benchmark_sentences(args.sentences, args.n_sentences)
    order = length_batches([len(s) for s in sentences], args.batch_size, 10**9)
    batches = [[sentences[i] for i in b] for b in order]
    print(f"{args.model}, {len(sentences)} {args.sentences} sentences ({sum(map(len, sentences))} "
          f"tokens), batch {args.batch_size}, {args.threads} threads, {args.pairs} alternated pairs")
    for precision in args.precisions.split(","):
        compare(args.model, precision, batches, args.batch_size, args.pairs)


if __name__ == "__main__":
    main()
