"""Bytes on disk, write speed and agreement with float32 of each ``embed --dtype/--compression``.

Run on an idle machine, from the repository root:

    PYTHONPATH=src python benchmarks/embed_storage.py --lines 3000

Input: the first ``--lines`` lines of PTB valid (``../shared/data``). The model (default: the
bundled one) embeds them once, through ``embed_to_hdf5`` in float32 without compression (timed:
the whole run's sentences/s). Then every dtype x compression (gzip at each of ``--levels``) is
written from those vectors through the same write path as a run (each chunk's shard, then the
merge), timed alone: ``write sent/s`` is what storing costs on top of the forward passes. Each
output is read back with ``read_vectors`` and compared with float32, vector by vector (each
token of each layer, or each pooled vector): the least cosine over all of them and the mean
absolute error. Bytes are the output file's size relative to float32 without compression.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

import contextvec
from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.io.hdf5_vectors import Shard, merge_shards, read_vectors, write_shard
from contextvec.io.shards import ShardDir
from contextvec.io.vector_storage import COMPRESSIONS, DTYPES, VectorStorage

CORPUS = Path(__file__).resolve().parents[1].parent / "shared/data/corpora/ptb/ptb.valid.txt.gz"


def _write(vectors: dict[str, np.ndarray], storage: VectorStorage, folder: Path, source: Path,
           chunk_lines: int) -> tuple[Path, float]:
    """The output of ``vectors`` in ``storage``, as a run writes it; returns it and the seconds."""
    keys = list(vectors)
    parts = ShardDir(folder / "out.h5.parts", {"storage": storage.record()})
    parts.start(resume=False)
    start = time.perf_counter()
    n_chunks = -(-len(keys) // chunk_lines)
    for number in range(n_chunks):
        chunk = keys[number * chunk_lines:(number + 1) * chunk_lines]
        write_shard(parts.shard(number), Shard([(k, storage.encode(vectors[k])) for k in chunk], storage))
    merge_shards(parts, n_chunks, folder / "out.h5", source, index=True, progress=False)
    seconds = time.perf_counter() - start
    parts.remove()
    return folder / "out.h5", seconds


def _agreement(path: Path, vectors: dict[str, np.ndarray]) -> tuple[float, float]:
    """The least cosine to float32 over every vector, and the mean absolute error."""
    least, error, count = 1.0, 0.0, 0
    with h5py.File(path, "r") as f:
        for key, want in vectors.items():
            rows = want.reshape(-1, want.shape[-1]).astype(np.float64)
            got = read_vectors(f[key]).reshape(rows.shape).astype(np.float64)
            norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(got, axis=1)
            keep = norms > 0
            if keep.any():
                least = min(least, float(((rows * got).sum(1)[keep] / norms[keep]).min()))
            error += float(np.abs(got - rows).sum())
            count += rows.size
    return least, error / max(count, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--model", default=None, help="model directory or bundled name (default: bundled)")
    parser.add_argument("--layers", default="all", choices=("all", "top", "average"))
    parser.add_argument("--levels", default="1,4,9", help="gzip levels to measure (default: 1,4,9)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    levels = [int(level) for level in args.levels.split(",")]

    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in itertools.islice(f, args.lines) if line.strip()]
    tokens = sum(len(line.split()) for line in lines)
    encoder = contextvec.load(args.model)
    settings = BulkSettings(layers=args.layers, progress=False)
    print(f"model {args.model or 'bundled'}, {len(lines)} sentences, {tokens} tokens, --{args.layers}, "
          f"chunk_lines {settings.chunk_lines}, torch threads {args.threads}")

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "input.txt"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        start = time.perf_counter()
        reference = embed_to_hdf5(encoder, source, Path(tmp) / "float32.h5", settings)
        embed_seconds = time.perf_counter() - start
        base = reference.stat().st_size
        with h5py.File(reference, "r") as f:
            vectors = {key: f[key][()] for key in f if key != "sentence_to_index"}
        print(f"embed_to_hdf5, float32 none: {len(lines) / embed_seconds:.0f} sent/s end to end, "
              f"{base:,} bytes")
        print("| dtype | compression | bytes | of float32 | write sent/s | least cosine | mean abs error |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for dtype, compression in itertools.product(DTYPES, COMPRESSIONS):
            for level in levels if compression == "gzip" else [None]:
                storage = VectorStorage(dtype, compression, level)
                folder = Path(tmp) / f"{dtype}-{compression}-{level}"
                folder.mkdir()
                path, seconds = _write(vectors, storage, folder, source, settings.chunk_lines)
                size = path.stat().st_size
                least, error = _agreement(path, vectors)
                name = f"gzip {level}" if level else compression
                print(f"| {dtype} | {name} | {size:,} | {size / base:.1%} | {len(lines) / seconds:,.0f} "
                      f"| {least:.9f} | {error:.2e} |", flush=True)
                path.unlink()


if __name__ == "__main__":
    main()
