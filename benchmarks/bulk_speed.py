"""Tokens/s of ``contextvec embed`` (``bulk.embed_to_hdf5``) against the forward passes alone.

Run on an idle machine:

    python benchmarks/bulk_speed.py --lines 2000 --rounds 5

Input: the first ``--lines`` non-empty lines of WikiText-2 valid (``../shared/data``). Each round
times, alternately, (a) ``embed_to_hdf5`` into a fresh HDF5 file (reading, batching through the
engine, slicing, shard writes and the merge) and (b) ``Encoder.embed_batches`` over the same
chunks with the same ``batch_size``/``max_tokens``, results dropped: the forward passes alone,
the most a bulk run could reach. The model is loaded once. Medians of ``--rounds``.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import time
from pathlib import Path

import torch

import contextvec
from contextvec.bulk import BulkSettings, embed_to_hdf5

CORPUS = Path(__file__).resolve().parents[1].parent / "shared/data/corpora/wikitext-2/wiki.valid.tokens.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default=None, help="model directory or bundled name (default: bundled)")
    parser.add_argument("--layers", default="all", choices=("all", "top", "average"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][: args.lines]
    tokens = sum(len(line.split()) for line in lines)
    encoder = contextvec.load(args.model)
    settings = BulkSettings(layers=args.layers, progress=False, overwrite=True)
    chunks = [lines[i:i + settings.chunk_lines] for i in range(0, len(lines), settings.chunk_lines)]

    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "input.txt", Path(tmp) / "out.h5"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        bulk, forward = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            embed_to_hdf5(encoder, source, output, settings)
            bulk.append(time.perf_counter() - start)
            start = time.perf_counter()
            for chunk in chunks:
                encoder.clear_caches()
                for _ in encoder.embed_batches([line.split() for line in chunk], settings.batch_size,
                                               settings.max_tokens):
                    pass
            forward.append(time.perf_counter() - start)

    b, f = statistics.median(bulk), statistics.median(forward)
    print(f"{len(lines)} lines, {tokens} tokens, layers {args.layers}, {args.threads} threads, "
          f"median of {args.rounds}")
    print(f"embed_to_hdf5          {tokens / b:9.1f} tokens/s  ({b:.2f} s)")
    print(f"forward passes alone   {tokens / f:9.1f} tokens/s  ({f:.2f} s)")
    print(f"bulk / forward         {f / b:9.3f}")


if __name__ == "__main__":
    main()
