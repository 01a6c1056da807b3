"""Tokens/s of ``contextvec embed --engine ray`` with 1 and 2 workers (1 torch thread each) on
this machine, and the scaling ratio (goal: >= 1.7x on 2 cores). Run on an idle machine:

    OMP_NUM_THREADS=1 python benchmarks/ray_scaling.py                 # 2,000 lines, 1 and 2 workers
    OMP_NUM_THREADS=1 python benchmarks/ray_scaling.py --lines 300     # a quick look
    OMP_NUM_THREADS=1 python benchmarks/ray_scaling.py --model original --lines 300

Text: the non-empty lines of WikiText-2 valid (``../shared/data``), or the bundled demo
sentences cycled when that is absent. Model: the bundled elmo-en-small, ``--model original``
(seeded random weights of the original 2x4096_512 ELMo's size, saved for the workers to load)
or any model directory. Each
row times the dealing of the blocks only (workers started and models loaded before the clock
starts, as on a long run, where start-up is amortised); the outputs of all rows are checked to
be byte-identical. Prints per-worker throughput, the figure docs/ray.md turns into the cost of
a 1-billion-token corpus.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import sys
import tempfile
from pathlib import Path

import h5py
import ray

from contextvec.bulk import BulkSettings
from contextvec.distributed import ModelSpec, RaySettings, embed_ray

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora" / "wikitext-2" / \
    "wiki.valid.tokens.gz"
DEMO = Path(__file__).resolve().parents[1] / "src" / "contextvec" / "data" / "demo_sentences.txt"


def corpus(n: int) -> list[str]:
    if WIKITEXT.is_file():
        with gzip.open(WIKITEXT, "rt", encoding="utf-8") as f:
            lines = (line.strip() for line in f)
            return list(itertools.islice((line for line in lines if line), n))
    demo = [line for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    return list(itertools.islice(itertools.cycle(demo), n))


def model_path(name: str | None, folder: Path) -> str | None:
    """The workers load a spec, not a pickled model: the random original-size ELMo is saved."""
    if name != "original":
        return name
    import torch

    import contextvec
    from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder

    torch.manual_seed(0)
    return str(contextvec.save(ElmoEncoder(ElmoBiLM(PRESETS["elmo-original"])).eval(), folder / "original"))


def datasets(folder: Path) -> dict[str, bytes]:
    out = {}
    for shard in sorted(folder.glob("shard-*.h5")):
        with h5py.File(shard, "r") as f:
            out.update({k: f[k][()].tobytes() for k in f})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--chunk-lines", type=int, default=100, help="lines per block (default: 100)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--model", help="a model directory or name, or 'original' (default: the bundled "
                                   "elmo-en-small)")
    args = p.parse_args()

    lines = corpus(args.lines)
    tokens = sum(len(line.split()) for line in lines)
    print(f"{len(lines)} lines, {tokens} tokens, blocks of {args.chunk_lines} lines; "
          f"text: {'WikiText-2 valid' if WIKITEXT.is_file() else 'bundled demo sentences'}")
    ray.init(address="local", num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    rates, outputs = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "corpus.txt"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        model = model_path(args.model, Path(tmp))
        for n in args.workers:
            out = Path(tmp) / f"out-{n}"
            busy: list = []
            summary = embed_ray([src], out, ModelSpec(model, threads=1),
                                BulkSettings(chunk_lines=args.chunk_lines, progress=False),
                                RaySettings(workers=n),
                                on_block=lambda block, busy=busy: busy.append(block))
            rates[n] = summary.tokens / summary.seconds
            # busy near n: the workers never waited for the driver; CPU/wall per block near 1:
            # they never waited for a core (on a shared machine, they do)
            wall, cpu = sum(b.seconds for b in busy), sum(b.cpu_seconds for b in busy)
            print(f"{n} worker(s): {summary.tokens} tokens in {summary.seconds:.1f} s = "
                  f"{rates[n]:.0f} tokens/s ({rates[n] / n:.0f} per worker); workers busy "
                  f"{wall / summary.seconds:.2f} of {n}; per block {wall / len(busy):.2f} s, "
                  f"of which on a CPU {cpu / wall:.0%}")
            outputs.append(datasets(out))
    ray.shutdown()
    identical = all(o == outputs[0] for o in outputs)
    print(f"outputs byte-identical across worker counts: {identical}")
    if 1 in rates:
        for n in rates:
            if n != 1:
                print(f"scaling {n} workers / 1 worker: {rates[n] / rates[1]:.2f}x")
    print("command: OMP_NUM_THREADS=1 python " + " ".join(["benchmarks/ray_scaling.py", *sys.argv[1:]]))
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
