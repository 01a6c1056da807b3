"""``experiment squad``: one run per representation and seed, stored as it ends, reused on resume."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from contextvec.cli.main import main
from contextvec.experiments import squad as experiment
from contextvec.tasks.qa.squad import Answer, Question, SquadData

CONTEXTS = ["bob ate a red apple at noon .", "ann swam in the cold lake .", "tom read a long book today .",
            "sue sang a sad song at dusk ."]
ASKED = [("what did bob eat ?", "red apple"), ("where did ann swim ?", "cold lake"),
         ("what did tom read ?", "long book"), ("what did sue sing ?", "sad song")]


def toy(articles: tuple[int, ...]) -> SquadData:
    questions = [Question(f"q{i}", q, c, (Answer(a, c.index(a)),), f"t{i}")
                 for i, (c, (q, a)) in enumerate(zip(CONTEXTS, ASKED, strict=True))]
    return SquadData(tuple(questions[i] for i in articles), articles, "toy")


def quick() -> experiment.SquadExperimentSettings:
    base = experiment.SquadExperimentSettings()
    span = replace(base.span, model=replace(base.span.model, hidden=8, word_dim=8),
                   fit=replace(base.span.fit, epochs=2, progress=False))
    return replace(base, representations=("none",), seeds=(0, 1), span=span)


def test_runs_are_stored_tabulated_and_reused_on_resume(tmp_path: Path, monkeypatch) -> None:
    train, dev = toy((0, 1, 2)), toy((3,))
    runs = experiment.run_squad_experiment(train, dev, tmp_path, quick(), say=lambda _: None)
    assert [(r["representation"], r["seed"]) for r in runs] == [("none", 0), ("none", 1)]
    stored = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert len(stored) == 2
    table = (tmp_path / "results.md").read_text()
    assert "| none |" in table and "± " in table
    assert (tmp_path / "results.csv").read_text().startswith("representation,model,runs,")
    with pytest.raises(FileExistsError, match="--resume"):
        experiment.run_squad_experiment(train, dev, tmp_path, quick(), say=lambda _: None)

    said: list[str] = []
    experiment.run_squad_experiment(train, toy((2,)), tmp_path, quick(), resume=True, say=said.append)
    assert sum("(trained)" in line for line in said) == 2  # other dev questions: other runs

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr("contextvec.tasks.qa.frozen.train_span_model", no_training)
    said.clear()
    again = experiment.run_squad_experiment(train, dev, tmp_path, quick(), resume=True, say=said.append)
    assert [r["dev"] for r in again] == [r["dev"] for r in runs]
    assert all("(stored)" in line for line in said)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown representation 'glove'"):
        experiment.SquadExperimentSettings(representations=("glove",))
    with pytest.raises(ValueError, match="need --bert"):
        experiment.SquadExperimentSettings(representations=("bert-features",))
    with pytest.raises(ValueError, match="twice"):
        experiment.SquadExperimentSettings(seeds=(1, 1))


def test_the_command_line_runs_the_table(tmp_path: Path, capsys) -> None:
    data = tmp_path / "squad.json"
    document = toy((0, 1, 2, 3)).to_json()
    data.write_text(json.dumps(document))
    code = main(["experiment", "squad", "--train", str(data), "--output-dir", str(tmp_path / "out"),
                 "--representations", "none", "--seeds", "0", "--epochs", "1", "--hidden", "8", "--quiet",
                 "--threads", "1"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "none: 1 runs, dev exact match" in out and "results.md" in out
