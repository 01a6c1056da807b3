"""``contextvec.explore.layer_report``: learned mixes and per-layer scores of every report kind."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import shared_file

from contextvec.cli import main as cli_main
from contextvec.experiments import summary
from contextvec.explore import layer_report as reports
from contextvec.explore.layer_report import layer_report, read_layer_report
from contextvec.probes.linear import ProbeReport, ProbeSettings, SplitData, train_probes
from contextvec.tasks import record, saved


def probe_report() -> dict:
    """A real probe run on three layers of random features whose class the top layer holds."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (300,), generator=generator)
    layers = torch.randn(3, 300, 8, generator=generator)
    layers[2, :, :3] += 4 * torch.nn.functional.one_hot(labels, 3)
    train, dev = SplitData(layers[:, :200], labels[:200]), SplitData(layers[:, 200:], labels[200:])
    results = train_probes(train, dev, 3, ProbeSettings(epochs=3, batch_size=50), progress=False)
    return ProbeReport(["a", "b", "c"], results, {"dev": 0.34}).to_dict()


def test_the_file_names_are_those_task_models_are_saved_with():
    # named, not imported, so that the server reads reports without the tasks extra
    names = (reports.FORMAT, reports.TASK_FILE, reports.WEIGHTS)
    assert names == (record.FORMAT, saved.TASK_FILE, saved.WEIGHTS)
    assert reports.MIX_NAMES == summary.MIX_NAMES


@pytest.mark.slow
def test_a_saved_task_model_gives_the_mixes_training_reported(tmp_path, own_tiny_dir):
    argv = ["train-task", "sst2", "--train", str(shared_file("tasks/sst/trees/train.txt.gz")),
            "--dev", str(shared_file("tasks/sst/trees/dev.txt.gz")), "--max-sentences", "50",
            "--model", str(own_tiny_dir),
            "--placement", "input+output", "--epochs", "2", "--hidden", "8", "--word-dim", "8",
            "--batch-size", "8", "--lr", "0.05", "--quiet", "--threads", "1",
            "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "report.json"),
            "--save-model", str(tmp_path / "model")]
    assert cli_main.main(argv) == 0
    saved, reported = read_layer_report(tmp_path / "model"), read_layer_report(tmp_path / "report.json")
    assert saved.kind == "task-model" and reported.kind == "task-report"
    assert [m.name for m in saved.mixes] == [m.name for m in reported.mixes] == ["input", "output"]
    for ours, theirs in zip(saved.mixes, reported.mixes, strict=True):
        assert sum(ours.weights) == pytest.approx(1.0)
        assert ours.weights == pytest.approx(theirs.weights, abs=1e-6)  # the report rounds to 6 digits
        assert ours.gamma == pytest.approx(theirs.gamma, abs=1e-6)
    dev = json.loads((tmp_path / "report.json").read_text())["dev"]["accuracy"]
    assert saved.metric == "accuracy" and saved.scores[0].dev == pytest.approx(dev)


def test_a_probe_report_gives_accuracy_per_layer_and_the_mix(tmp_path):
    document = probe_report()
    (tmp_path / "probe.json").write_text(json.dumps(document))
    report = read_layer_report(tmp_path / "probe.json")
    assert report.kind == "probe" and report.metric == "accuracy"
    assert [s.name for s in report.scores] == ["layer 0", "layer 1", "layer 2", "mix"]
    assert [s.dev for s in report.scores] == [p["dev_accuracy"] for p in document["probes"]]
    assert report.scores[2].dev > report.scores[0].dev + 0.2  # the layer that holds the class
    assert report.mixes[0].name == "mix" and report.mixes[0].weights == document["probes"][3]["mix_weights"]
    assert report.baselines == {"majority (dev)": 0.34}


def test_wsd_and_experiment_reports():
    layers = [{"layer": 0, "f1": 0.4}, {"layer": 1, "f1": 0.6}]
    wsd = layer_report({"first_sense": {"f1": 0.5}, "layers": layers})
    assert wsd.kind == "probe-wsd" and [s.dev for s in wsd.scores] == [0.4, 0.6]
    assert wsd.baselines == {"first sense": 0.5}
    runs = [{"run": f"mix seed {s}", "report": {"mixes": [{"weights": [0.2, 0.8], "gamma": 1.5}]}}
            for s in (1, 2)]
    experiment = layer_report({"experiment": "placement", "runs": runs})
    assert [m.name for m in experiment.mixes] == ["mix seed 1: input", "mix seed 2: input"]
    assert experiment.mixes[0].weights == [0.2, 0.8] and experiment.mixes[0].gamma == 1.5


@pytest.mark.parametrize("document, message", [
    ([1, 2], "not a report: expected a JSON object"),
    ({"hello": 1}, "not a report contextvec writes"),
    ({"probes": [{"name": "layer 0"}], "majority_baseline": {}}, "KeyError: 'layer'"),
    ({"metric": "f1", "mixes": [{"weights": ["x"], "gamma": 1}]}, "expected a finite number, got 'x'"),
])
def test_what_is_not_a_report_is_refused_in_one_line(document, message):
    with pytest.raises(ValueError, match=message):
        layer_report(document)


def test_unreadable_paths_are_refused_in_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        read_layer_report(tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError, match="task.json is missing"):
        read_layer_report(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        read_layer_report(tmp_path / "bad.json")
