"""``contextvec experiment``: the ELMo paper's analyses on tiny real data with the tiny ELMo."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import SHARED, need_shared, shared_file

import contextvec.experiments as experiments
import contextvec.experiments.workers as workers
from contextvec.cli.main import main
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TrainSettings

TASKS = SHARED / "tasks"
CONLL = ["--train", str(TASKS / "conll2003" / "eng.train.gz"),
         "--dev", str(TASKS / "conll2003" / "eng.testa.gz")]
SST = ["--train", str(shared_file("tasks/sst/trees/train.txt.gz")),  # 40 sentences: the excerpts serve
       "--dev", str(shared_file("tasks/sst/trees/dev.txt.gz"))]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One feature cache for the module: each split's features are computed once."""
    return tmp_path_factory.mktemp("features")


def _experiment(out, cache_dir, tiny_dir, *argv: str) -> int:
    need_shared(*argv)
    return main(["experiment", *argv, "--output-dir", str(out), "--model", str(tiny_dir),
                 "--cache-dir", str(cache_dir), "--threads", "1", "--hidden", "8", "--epochs", "1",
                 "--lr", "0.01", "--quiet"])


def _outputs(out, experiment: str) -> tuple[list[dict], str, dict]:
    for png in (f"{experiment}.png", "layer_weights.png"):
        data = (out / png).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000, png
    with (out / "results.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    markdown = (out / "results.md").read_text(encoding="utf-8")
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["run"] for r in document["runs"]] == [row["run"] for row in rows]
    for row in rows:
        assert f"| {row['run']} |" in markdown
    assert not list(out.glob(".*tmp*"))  # atomic writes leave no temporaries
    return rows, markdown, document


def _count_train_task(monkeypatch, fail_at: int | None = None) -> list[str]:
    """Count (and optionally interrupt) the experiment's calls of train_task."""
    calls: list[str] = []
    real = workers.train_task

    def counted(*args, **kwargs):
        calls.append(args[4].placement)
        if len(calls) == fail_at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(workers, "train_task", counted)
    return calls


def test_layers_runs_table_2_and_a_rerun_skips_finished_runs(tmp_path, cache_dir, tiny_dir, monkeypatch):
    out = tmp_path / "layers"
    argv = ["layers", "ner", *CONLL, "--test", CONLL[3], "--max-sentences", "30", "--baseline"]
    assert _experiment(out, cache_dir, tiny_dir, *argv) == 0
    rows, markdown, document = _outputs(out, "layers")
    assert [r["config"] for r in rows] == ["last layer", "all layers, lambda=1", "all layers, lambda=0.001",
                                           "no contextual vectors"]
    assert [r["lambda"] for r in rows] == ["", "1.0", "0.001", ""]
    reports = [run["report"] for run in document["runs"]]
    assert [r["train_settings"]["l2"] for r in reports[1:3]] == [1.0, 0.001]
    assert [r["model_settings"]["layers"] for r in reports[:3]] == ["last", "mix", "mix"]
    assert [len(r["mixes"]) for r in reports] == [1, 1, 1, 0]
    assert reports[0]["mixes"][0]["weights"] == [1.0]  # the fixed top-layer mix
    assert all(len(r["mixes"][0]["weights"]) == 3 for r in reports[1:3])
    assert all(r["test"] is not None and r["splits"]["train"]["sentences"] == 30 for r in reports)
    assert "test f1" in markdown and "## Mean ± sample std over seeds" in markdown
    assert set(document["runtime_s"]) >= {"features", "runs", "total"}
    assert all(run["runtime_s"] > 0 for run in document["runs"])

    calls = _count_train_task(monkeypatch)
    assert _experiment(out, cache_dir, tiny_dir, *argv, "--resume") == 0
    assert calls == []
    again, _, _ = _outputs(out, "layers")
    assert again == rows


def test_placement_resumes_after_an_interruption(tmp_path, cache_dir, tiny_dir, monkeypatch):
    out = tmp_path / "placement"
    argv = ["placement", "sst2", *SST, "--max-sentences", "40"]
    calls = _count_train_task(monkeypatch, fail_at=2)
    with pytest.raises(SystemExit) as stopped:
        _experiment(out, cache_dir, tiny_dir, *argv)
    assert stopped.value.code == 130 and calls == ["input", "input+output"]
    stored = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [run["config"] for run in stored["runs"]] == ["input"]

    calls = _count_train_task(monkeypatch)
    assert _experiment(out, cache_dir, tiny_dir, *argv, "--resume") == 0
    assert calls == ["input+output"]  # the finished run is reused
    rows, _, document = _outputs(out, "placement")
    assert [r["placement"] for r in rows] == ["input", "input+output"]
    assert [len(run["report"]["mixes"]) for run in document["runs"]] == [1, 2]
    assert rows[1]["mix_weights"].startswith("input ") and "; output " in rows[1]["mix_weights"]

    # Other settings are other runs; the earlier ones are kept, and another experiment is refused.
    calls = _count_train_task(monkeypatch)
    assert _experiment(out, cache_dir, tiny_dir, *argv, "--baseline", "--batch-size", "16",
                       "--resume") == 0
    assert calls == ["input", "input+output", "none"]
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(document["runs"]) == 3 and len(document["other_runs"]) == 2
    assert _experiment(out, cache_dir, tiny_dir, "layers", "sst2", *SST, "--max-sentences", "40",
                       "--resume") == 2


def test_sample_efficiency_covers_every_fraction_with_and_without(tmp_path, cache_dir, tiny_dir):
    out = tmp_path / "sample"
    assert _experiment(out, cache_dir, tiny_dir, "sample-efficiency", "ner", *CONLL, "--max-sentences", "30",
                       "--fractions", "0.1", "1.0", "0.5", "--seeds", "0", "1") == 0
    rows, markdown, document = _outputs(out, "sample-efficiency")
    cells = {(float(r["train_fraction"]), r["contextual"], int(r["seed"])) for r in rows}
    assert cells == {(f, c, s) for f in (0.1, 0.5, 1.0) for c in ("True", "False") for s in (0, 1)}
    assert len(rows) == 12
    assert {int(r["train_sentences"]) for r in rows if r["train_fraction"] == "0.1"} == {3}
    summary = document["summary"]
    assert [(s["config"], s["fraction"]) for s in summary][:2] == [
        ("with contextual vectors", 0.1), ("without contextual vectors", 0.1)]
    assert all(s["seeds"] == [0, 1] and len(s["dev"]) == 2 for s in summary)
    assert "| with contextual vectors | 50% | 2 |" in markdown
    assert all(len(s["weights"]["input"]) == 3 for s in summary if s["contextual"])


def test_plans_reject_bad_settings():
    model, train = ModelSettings(placement="input"), TrainSettings()
    with pytest.raises(ValueError, match="fractions must be in"):
        experiments.sample_efficiency_plan(model, train, [0], [0.0, 1.0])
    with pytest.raises(ValueError, match="needs contextual vectors"):
        experiments.layers_plan(ModelSettings(), train, [0])
    plan = experiments.placement_plan(model, train, [0, 1], baseline=True)
    assert [(s.config, s.train_settings.seed) for s in plan] == [
        ("input", 0), ("input", 1), ("input+output", 0), ("input+output", 1),
        ("no contextual vectors", 0), ("no contextual vectors", 1)]
