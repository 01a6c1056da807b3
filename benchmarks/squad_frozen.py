"""SQuAD with the span model over frozen features: the bundled ELMo against no contextual vectors.

Trains :func:`contextvec.tasks.qa.frozen.train_span_model` on the even-articles SQuAD file minus
the dev articles :func:`~contextvec.tasks.qa.squad.carve_dev_by_article` carves (its default
seed), once with the bundled ELMo's scalar mix at the input and once without contextual vectors
(the same model otherwise), and prints and writes each run's dev exact match and F1, training
time and settings::

    python benchmarks/squad_frozen.py --output /tmp/squad-frozen            # both runs, in turn
    python benchmarks/squad_frozen.py --output /tmp/squad-frozen --only elmo

Both runs use one torch thread (the machine is shared); ``--epochs`` caps the epochs, and the
epoch with the best dev F1 is kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "tasks" / "squad-v1.1" / \
    "dev-v1.1-even-articles.json.gz"
RUNS = ("none", "elmo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(SQUAD))
    parser.add_argument("--output", required=True, help="folder for each run's report JSON")
    parser.add_argument("--only", choices=RUNS, help="one run only")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--train-fraction", type=float, default=1.0,
                        help="a seeded fraction of the training questions")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--modelling-layers", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import contextvec
    from contextvec.features import FeatureSettings
    from contextvec.tasks.models import ModelSettings
    from contextvec.tasks.qa.frozen import SpanTrainSettings, train_span_model
    from contextvec.tasks.qa.span_model import SpanSettings
    from contextvec.tasks.qa.squad import carve_dev_by_article, read_squad
    from contextvec.tasks.train import TrainSettings

    train, dev = carve_dev_by_article(read_squad(args.data))
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    for run in (args.only,) if args.only else RUNS:
        encoder = contextvec.load() if run == "elmo" else None
        settings = SpanTrainSettings(
            model=ModelSettings(hidden=args.hidden, lstm_layers=1, dropout=args.dropout,
                                mix_dropout=args.dropout, placement="input" if encoder else "none"),
            span=SpanSettings(modelling_layers=args.modelling_layers),
            fit=TrainSettings(epochs=args.epochs, patience=args.patience, train_fraction=args.train_fraction,
                              progress=True),
            features=FeatureSettings(cache_dir=output / "features", dtype="float16"),
        )
        started = time.perf_counter()
        report, _ = train_span_model(train, dev, encoder, settings)
        wall = time.perf_counter() - started
        result = {"run": run, "wall_s": round(wall, 1), "threads": args.threads, **report.to_dict()}
        (output / f"{run}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"{run}: dev exact match {report.dev['exact_match']:.2f}, F1 {report.dev['f1']:.2f} "
              f"(best epoch {report.best_epoch} of {len(report.curve)}; "
              f"training {report.runtime_s['train']:.0f} s, "
              f"features {report.runtime_s['features']:.0f} s, wall {wall:.0f} s; "
              f"{report.extra['inexact_answers']} of {report.splits['train']['questions']} training answers "
              "not on token boundaries)", flush=True)


if __name__ == "__main__":
    main()
