"""Task scores per precision with the bundled model: the POS probe per layer (UD-EWT train -> dev,
UPOS) and NER dev F1 (CoNLL-2003 train -> eng.testa), each trained and scored on the features of
that precision, same seeds and recipe. A score more than 0.3 points from fp32 is flagged.

    python benchmarks/precision_tasks.py --output-dir runs/precision-tasks [--precisions fp32 int8]
    python benchmarks/precision_tasks.py --output-dir runs/precision-tasks --seeds 0 1 2

The NER tagger's dev F1 moves by a few tenths between seeds (more than bf16 or int8 move it), so
with several ``--seeds`` its column is the mean over them (sample std beside it).

It runs the CLI (`contextvec probe pos`, `contextvec train-task ner`), keeps each JSON in
--output-dir (a rerun reuses finished ones) and prints a Markdown table. bf16 is skipped with the
CLI's reason on a CPU without native bf16.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from contextvec.encoders.precision import PRECISIONS, check_precision

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tasks"
EWT, CONLL = DATA / "ud-english-ewt", DATA / "conll2003"
FLAG = 0.3  # points


def run(command: list[str], output: Path) -> dict:
    if not output.exists():
        print("+", " ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True)
    return json.loads(output.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=Path("runs/precision-tasks"))
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--threads", default="1")
    parser.add_argument("--ner-epochs", default="5")
    parser.add_argument("--seeds", nargs="+", default=["0"], help="NER seeds (default: 0)")
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict[str, float]] = {}
    spread: dict[str, float | None] = {}
    for precision in args.precisions:
        try:
            check_precision(precision)
        except ValueError as e:
            print(f"skip {precision}: {e}", file=sys.stderr)
            continue
        common = ["--precision", precision, "--threads", args.threads, "--quiet",
                  "--cache-dir", str(args.output_dir / "cache")]
        pos = run(["contextvec", "probe", "pos", "--train", str(EWT / "en_ewt-ud-train.conllu.gz"),
                   "--dev", str(EWT / "en_ewt-ud-dev.conllu.gz"), *common,
                   "--output", str(args.output_dir / f"pos-{precision}.json")],
                  args.output_dir / f"pos-{precision}.json")
        f1s = []
        for seed in args.seeds:
            name = f"ner-{precision}.json" if seed == "0" else f"ner-{precision}-s{seed}.json"
            output = args.output_dir / name
            ner = run(["contextvec", "train-task", "ner", "--train", str(CONLL / "eng.train.gz"),
                       "--dev", str(CONLL / "eng.testa.gz"), "--epochs", args.ner_epochs, "--patience", "3",
                       "--lr", "0.005", "--seed", seed, *common, "--output", str(output)], output)
            f1s.append(100 * ner["dev"]["f1"])
        scores = {f"POS {probe['name']}": 100 * probe["dev_accuracy"] for probe in pos["probes"]}
        scores["NER dev F1"] = statistics.mean(f1s)
        spread[precision] = statistics.stdev(f1s) if len(f1s) > 1 else None
        rows[precision] = scores
    names = list(next(iter(rows.values())))
    print(f"| precision | {' | '.join(names)} |")
    print(f"| --- | {' | '.join('---:' for _ in names)} |")
    base = rows.get("fp32")
    for precision, scores in rows.items():
        cells = []
        for name in names:
            cell = f"{scores[name]:.2f}"
            if name == "NER dev F1" and spread[precision] is not None:
                cell += f" ± {spread[precision]:.2f} (n={len(args.seeds)})"
            if base is not None and precision != "fp32":
                delta = scores[name] - base[name]
                cell += f" ({delta:+.2f}{' **> 0.3**' if abs(delta) > FLAG else ''})"
            cells.append(cell)
        print(f"| {precision} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
