"""Which representation helps extractive QA (``contextvec experiment squad``).

One SQuAD-format training file, one dev split (given, or carved by article), and per
representation of :data:`REPRESENTATIONS` one run per seed:

- ``none``: the span model over its own word embeddings and character CNN alone;
- ``elmo``: the same span model over ELMo's learned scalar mix;
- ``cove``: over CoVe's top biLSTM layer (with the GloVe-like embeddings the span model learns);
- ``bert-features``: over BERT's last four layers summed (the BERT paper's best feature row);
- ``bert-finetune``: the whole BERT fine-tuned with a span head (the paper's section 4.2).

Every frozen run shares the span model's settings, so the rows differ only in what the model
reads. Finished runs are kept in ``results.json`` by their settings and data and skipped on
``--resume``; ``results.md`` and ``results.csv`` tabulate every finished run (mean and standard
deviation of exact match and F1 over the seeds). The table states results; the papers' reported
directions are printed beside them, not asserted.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from contextvec.api import load as load_encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.io.atomic import atomic_path, file_lock, lock_file
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.qa.frozen import SpanTrainSettings
from contextvec.tasks.qa.squad import SquadData
from contextvec.tasks.qa.windows import WindowSettings

REPRESENTATIONS = ("none", "elmo", "cove", "bert-features", "bert-finetune")
"""The table's rows, in order."""
LAYERS = {"elmo": "mix", "cove": "last", "bert-features": "sum_last_4"}
"""How each frozen representation's layers are read."""
RESULTS_JSON, RESULTS_MD, RESULTS_CSV = "results.json", "results.md", "results.csv"
REPORTED = (
    "The papers' reported directions (full SQuAD v1.1 training set, not this split): ELMo added to "
    "BiDAF-style models +4.7 F1 (Peters et al. 2018, Table 1: 81.1 -> 85.8); BERT-base fine-tuned "
    "88.5 F1 (Devlin et al. 2019, Table 2).")


@dataclass(frozen=True)
class SquadExperimentSettings:
    """The runs of one experiment. ``encoders``: the model each representation reads
    (``elmo``, ``cove``, ``bert``: a bundled or published name, or a directory; BERT must be an
    HF directory); ``span``: the frozen runs' span model (its ``placement`` and ``layers`` are
    set per row); ``fine_tune``/``windows``: the ``bert-finetune`` row's recipe."""

    representations: tuple[str, ...] = REPRESENTATIONS[:3]
    seeds: tuple[int, ...] = (0, 1, 2)
    encoders: dict[str, str | None] = field(default_factory=lambda: {"elmo": None, "cove": "cove-en-multi30k",
                                                                     "bert": None})
    span: SpanTrainSettings = field(default_factory=SpanTrainSettings)
    fine_tune: FineTuneSettings = field(default_factory=FineTuneSettings)
    windows: WindowSettings = field(default_factory=WindowSettings)

    def __post_init__(self) -> None:
        unknown = [r for r in self.representations if r not in REPRESENTATIONS]
        if unknown:
            raise ValueError(f"unknown representation {unknown[0]!r}; "
                             f"choose from {', '.join(REPRESENTATIONS)}")
        if not self.representations or len(set(self.representations)) != len(self.representations):
            raise ValueError("--representations names one twice or none")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError("--seeds names one twice or none")
        needs_bert = {"bert-features", "bert-finetune"} & set(self.representations)
        if needs_bert and not self.encoders.get("bert"):
            raise ValueError(f"{', '.join(sorted(needs_bert))} need --bert (a Hugging Face BERT directory)")
        object.__setattr__(self, "representations",
                           tuple(r for r in REPRESENTATIONS if r in self.representations))


def data_identity(data: SquadData) -> str:
    """A sha256 of the questions, contexts and answers (which runs a stored result belongs to)."""
    content = [[q.id, q.question, q.context, [[a.text, a.start] for a in q.answers]] for q in data.questions]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()


def _key(representation: str, seed: int, settings: SquadExperimentSettings, data: dict,
         model: str | None) -> str:
    # Progress bars never change a result.
    if representation == "bert-finetune":
        how = {"fine_tune": asdict(replace(settings.fine_tune, seed=seed, progress=True)),
               "windows": asdict(settings.windows)}
    else:
        span = _span_settings(settings.span, representation, seed)
        span = replace(span, fit=replace(span.fit, progress=True))
        how = {"span": json.loads(json.dumps(asdict(span), default=str))}
    return json.dumps({"representation": representation, "seed": seed, "data": data, "model": model, **how},
                      sort_keys=True, default=str)


def _span_settings(span: SpanTrainSettings, representation: str, seed: int) -> SpanTrainSettings:
    contextual = representation != "none"
    model = replace(span.model, placement="input" if contextual else "none",
                    layers=LAYERS.get(representation, "mix"))
    return replace(span, model=model, fit=replace(span.fit, seed=seed))


def _read(path: Path) -> dict:
    if not path.exists():
        return {}
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict) or not isinstance(value.get("runs"), dict):
        raise ValueError(f"{path}: not the results.json of experiment squad")
    return value["runs"]


def run_squad_experiment(
    train: SquadData, dev: SquadData, output_dir: str | Path, settings: SquadExperimentSettings,
    resume: bool = False, say: Callable[[str], None] = print,
) -> list[dict]:
    """Run every (representation, seed) not finished yet, storing each as it ends; write the
    table. Returns the finished runs of these settings, in table order."""
    from contextvec.tasks.qa.bert import fine_tune_qa
    from contextvec.tasks.qa.frozen import train_span_model

    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    results = output / RESULTS_JSON
    if results.exists() and not resume:
        raise FileExistsError(f"{results} exists: add to it with --resume, or choose another --output-dir")
    data = {"train": data_identity(train), "dev": data_identity(dev)}
    names = {"none": None, "elmo": settings.encoders.get("elmo"), "cove": settings.encoders.get("cove"),
             "bert-features": settings.encoders.get("bert"), "bert-finetune": settings.encoders.get("bert")}
    finished: list[dict] = []
    for representation in settings.representations:
        encoder = None
        for seed in settings.seeds:
            model_id = None
            if representation != "none":
                if encoder is None and representation != "bert-finetune":
                    encoder = load_encoder(names[representation])
                model_id = (model_identity(encoder) if encoder is not None
                            else str(Path(names[representation]).resolve()))
            key = _key(representation, seed, settings, data, model_id)
            with file_lock(lock_file(results)):
                stored = _read(results).get(key)
            if stored is None:
                say(f"squad: {representation}, seed {seed}")
                if representation == "bert-finetune":
                    report, _ = fine_tune_qa(train, dev, names[representation],
                                             replace(settings.fine_tune, seed=seed), settings.windows)
                else:
                    report, _ = train_span_model(train, dev, encoder,
                                                 _span_settings(settings.span, representation, seed))
                stored = {"representation": representation, "seed": seed,
                          "model": names[representation] or ("bundled" if representation != "none" else None),
                          "dev": report.dev, "best_epoch": report.best_epoch,
                          "train_s": report.runtime_s["train"], "report": report.to_dict()}
                with file_lock(lock_file(results)):
                    runs = _read(results)
                    runs[key] = stored
                    with atomic_path(results) as tmp:
                        tmp.write_text(json.dumps({"runs": runs}, indent=1) + "\n", encoding="utf-8")
                how = "trained"
            else:
                how = "stored"
            say(f"squad: {representation}, seed {seed} ({how}): dev exact match "
                f"{stored['dev']['exact_match']:.2f}, F1 {stored['dev']['f1']:.2f}")
            finished.append(stored)
    _write_tables(output, finished, train, dev)
    return finished


def summary_rows(runs: Sequence[dict]) -> list[dict]:
    """One row per representation: runs, mean and standard deviation of exact match and F1."""
    rows = []
    for representation in REPRESENTATIONS:
        mine = [r for r in runs if r["representation"] == representation]
        if not mine:
            continue
        em = [r["dev"]["exact_match"] for r in mine]
        f1 = [r["dev"]["f1"] for r in mine]
        rows.append({"representation": representation, "model": mine[0]["model"] or "", "runs": len(mine),
                     "seeds": " ".join(str(r["seed"]) for r in mine),
                     "exact_match": statistics.fmean(em), "exact_match_std": statistics.pstdev(em),
                     "f1": statistics.fmean(f1), "f1_std": statistics.pstdev(f1),
                     "train_s": statistics.fmean(r["train_s"] for r in mine)})
    return rows


def _write_tables(output: Path, runs: Sequence[dict], train: SquadData, dev: SquadData) -> None:
    rows = summary_rows(runs)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["representation"])
    writer.writeheader()
    writer.writerows(rows)
    with atomic_path(output / RESULTS_CSV) as tmp:
        tmp.write_text(buffer.getvalue(), encoding="utf-8")
    lines = ["# Extractive QA: which representation helps", "",
             f"Train: {train.source} ({len(train)} questions, {train.num_articles} articles); "
             f"dev: {dev.source} ({len(dev)} questions, {dev.num_articles} articles). "
             "Scores: SQuAD v1.1's official exact match and F1 on dev (percentages), mean ± standard "
             "deviation over the seeds.", "",
             "| representation | model | runs | exact match | F1 | training s (mean) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['representation']} | {r['model']} | {r['runs']} | "
                     f"{r['exact_match']:.2f} ± {r['exact_match_std']:.2f} | "
                     f"{r['f1']:.2f} ± {r['f1_std']:.2f} | {r['train_s']:.0f} |")
    lines += ["", REPORTED, ""]
    with atomic_path(output / RESULTS_MD) as tmp:
        tmp.write_text("\n".join(lines), encoding="utf-8")
