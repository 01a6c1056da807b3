"""Speed of ``contextvec.allennlp.Elmo`` vs contextvec's own ELMo encoder, on the same batches.

The protocol of ../shared/data/reference/README.md ("Reference speed"): ``sentences.txt`` cycled
to 500 sentences, batches of 32 in file order padded to the longest, eval, no gradients,
median of 3 passes, 2 torch threads. Each pass runs the two back to back, alternating which goes
first. ``Elmo`` is timed as its users call it: ``batch_to_ids`` then ``elmo(ids)`` (one output
representation, dropout 0). The encoder is timed on the token lists (``encoder(batch)``).

Both keep a cache of char-CNN vectors; a warm-up pass fills each before timing. allennlp's own
``Elmo`` cannot be installed beside torch 2.x, so its figure is the README's (same protocol, same
machine kind) unless allennlp imports here (docs/allennlp-check.md builds such an environment),
when it is measured in the same run::

    python benchmarks/compat_speed.py                  # elmo-small reference weights
    python benchmarks/compat_speed.py --passes 1 --sentences 100   # a quick look only

Check the printed CPU-s per wall-s: near the thread count means nothing else competed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from itertools import cycle, islice
from pathlib import Path

import torch

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "reference"
# allennlp 2.10.1 Elmo forward, elmo-small weights, this protocol (reference/README.md).
ALLENNLP_README_SENTENCES_PER_S = {"elmo-small": 29.5}


def _cpu() -> str:
    """The CPU's name and the vector flags that decide matmul speed (benchmarking rule 4)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []))
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    return f"{name}; {' '.join(f for f in wanted if f in flags) or 'no AVX2'}"


def _time(run: Callable[[list[list[str]]], object], batches: list[list[list[str]]]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of one pass over the batches."""
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for batch in batches:
            run(batch)
    return time.perf_counter() - wall, time.process_time() - cpu


def _runners(model_dir: Path, with_allennlp: bool) -> dict[str, Callable[[list[list[str]]], object]]:
    import contextvec
    from contextvec.allennlp import Elmo, batch_to_ids

    options, weights = model_dir / "options.json", model_dir / "weights.hdf5"
    encoder = contextvec.load(options_file=options, weight_file=weights).eval()
    elmo = Elmo(str(options), str(weights), 1, dropout=0.0).eval()
    runners = {
        "contextvec encoder(batch)": lambda batch: encoder(batch),
        "contextvec.allennlp Elmo": lambda batch: elmo(batch_to_ids(batch)),
    }
    if with_allennlp:
        from allennlp.modules.elmo import Elmo as AllennlpElmo
        from allennlp.modules.elmo import batch_to_ids as allennlp_batch_to_ids

        reference = AllennlpElmo(str(options), str(weights), 1, dropout=0.0).eval()

        def allennlp_run(batch: list[list[str]]) -> object:
            reference._elmo_lstm._elmo_lstm.reset_states()  # the stateless outputs, as fixtures
            return reference(allennlp_batch_to_ids(batch))

        runners["allennlp Elmo"] = allennlp_run
    return runners


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="elmo-small", help="reference folder (elmo-small)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--allennlp", action="store_true", help="also time allennlp's Elmo (must import)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model_dir = REFERENCE / args.model
    lines = (model_dir / "sentences.txt").read_text("utf-8").splitlines()
    sentences = [line.split() for line in islice(cycle(lines), args.sentences)]
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    n_tokens = sum(map(len, sentences))
    runners = _runners(model_dir, args.allennlp)

    for run in runners.values():  # warm-up: fills the char-CNN caches, first-call allocations
        _time(run, batches[:4])
    walls: dict[str, list[float]] = {name: [] for name in runners}
    cpu_total = wall_total = 0.0
    for index in range(args.passes):
        names = list(runners) if index % 2 == 0 else list(reversed(runners))
        for name in names:
            wall, cpu = _time(runners[name], batches)
            walls[name].append(wall)
            wall_total, cpu_total = wall_total + wall, cpu_total + cpu

    print(f"{args.model}: {len(sentences)} sentences, {n_tokens} tokens, batches of {args.batch_size}, "
          f"{args.threads} threads, {args.passes} passes, torch {torch.__version__}")
    print(f"CPU: {_cpu()}")
    print(f"CPU-s per wall-s: {cpu_total / wall_total:.2f} (near {args.threads}: nothing else competed)")
    medians = {name: statistics.median(w) for name, w in walls.items()}
    encoder_s, encoder_min = medians["contextvec encoder(batch)"], min(walls["contextvec encoder(batch)"])
    print(f"{'median pass':28} {'sentences/s':>12} {'tokens/s':>10} {'time vs encoder':>16} "
          f"{'(fastest passes)':>17}")
    for name, seconds in medians.items():
        print(f"{name:28} {len(sentences) / seconds:12.1f} {n_tokens / seconds:10.0f} "
              f"{seconds / encoder_s:16.3f} {min(walls[name]) / encoder_min:17.3f}")
    compat = len(sentences) / medians["contextvec.allennlp Elmo"]
    if "allennlp Elmo" in medians:
        print(f"contextvec.allennlp Elmo / allennlp Elmo (same run): "
              f"{compat / (len(sentences) / medians['allennlp Elmo']):.2f}x the sentences/s")
    elif args.model in ALLENNLP_README_SENTENCES_PER_S:
        reference = ALLENNLP_README_SENTENCES_PER_S[args.model]
        print(f"contextvec.allennlp Elmo / allennlp Elmo (README figure, {reference} sentences/s, "
              f"not this run): {compat / reference:.2f}x")


if __name__ == "__main__":
    main()
