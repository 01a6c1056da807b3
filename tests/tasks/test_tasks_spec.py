"""The task table and the one fit loop: every command reads the table, a new task is one entry plus a
reader, and the fit loop stops early and restores the best-on-dev weights. Needs no ../shared."""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
from pathlib import Path
from types import MappingProxyType

import pytest
import torch
from torch import nn

from contextvec.cli.main import build_parser
from contextvec.cli.train_task import QA_TASK
from contextvec.tasks import spec as spec_module
from contextvec.tasks.fit import FitSettings, Objective, Optimisation, fit
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.spec import TASK_SPECS, TASKS, get_task
from contextvec.tasks.split import Split
from contextvec.tasks.train import TrainSettings, train_task


def _choices(*path: str) -> list[str]:
    parser = build_parser(path[0])
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return next(a for a in parser._actions if a.dest == "task").choices


@pytest.mark.parametrize("path", [("train-task",), ("experiment", "layers"), ("experiment", "placement"),
                                  ("experiment", "sample-efficiency")])
def test_every_task_command_offers_the_tasks_of_the_table(path):
    # train-task also trains extractive QA, which is no sentence task of the table (tasks/qa/).
    extra = [QA_TASK] if path == ("train-task",) else []
    assert list(_choices(*path)) == [*TASKS, *extra] and list(TASKS) == list(TASK_SPECS)


def test_an_unknown_task_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown task 'pos'; choose from ner, sst5, sst2, trec"):
        get_task("pos")


def _read_toy(path: str | os.PathLike, max_sentences: int | None = None) -> Split:
    """A made-up format: ``label<TAB>tokens`` per line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()[:max_sentences]
    return Split([line.split("\t")[1].split() for line in lines], [line.split("\t")[0] for line in lines],
                 str(path))


def test_a_new_task_is_one_entry_plus_a_reader(tmp_path, monkeypatch):
    toy = dataclasses.replace(get_task("trec"), name="toy", summary="toy questions", read=_read_toy)
    monkeypatch.setattr(spec_module, "TASK_SPECS", MappingProxyType({**TASK_SPECS, "toy": toy}))
    rng = random.Random(0)
    rows = [f"{label}\t{word} {rng.choice('abc')}" for label, word in
            (rng.choice([("yes", "good"), ("no", "bad")]) for _ in range(60))]
    (tmp_path / "toy.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    train, dev, test = get_task("toy").load_splits(tmp_path / "toy.txt", None)  # dev carved like trec
    assert test is None and len(dev) == 6 and len(train) == 54
    settings = ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, mlp_hidden=8)
    report, model = train_task("toy", train, dev, None, settings,
                               TrainSettings(epochs=8, lr=0.05, batch_size=8, progress=False))
    assert report.task == "toy" and report.metric == "accuracy" and model.labels == ["no", "yes"]
    assert report.dev["accuracy"] == 1.0


class _Scripted(nn.Module):
    """One weight; the dev scores are scripted per epoch to test the loop's choices."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))


@pytest.mark.parametrize(("scores", "patience", "best", "epochs_run"), [
    ([0.5, 0.7, 0.7, 0.6, 0.6, 0.9], 2, 2, 4),  # ties keep the earlier epoch; stops 2 epochs after it
    ([0.5, 0.7, 0.7, 0.6, 0.6, 0.9], None, 6, 6),  # no patience: every epoch runs
])
def test_fit_stops_early_and_restores_the_best_weights(scores, patience, best, epochs_run):
    model = _Scripted()
    dev = iter(scores)
    weights: list[float] = []

    def dev_score() -> float:
        weights.append(model.w.item())
        return next(dev)

    result = fit(model, lengths=[1, 1, 1],
                 objective=Objective(lambda ids: (model.w - 10.0) ** 2, dev_score, "accuracy"),
                 optimisation=Optimisation(torch.optim.SGD(model.parameters(), lr=0.1), model.parameters()),
                 settings=FitSettings(epochs=6, batch_size=1, progress=False), patience=patience)
    assert result.best_epoch == best and len(result.curve) == epochs_run
    assert model.w.item() == weights[best - 1]  # the weights scored at the best epoch
    assert [row["dev_accuracy"] for row in result.curve] == scores[:epochs_run]
    assert not model.training


def test_model_settings_take_what_is_given_and_the_tasks_defaults_for_the_rest():
    ner, sst2 = get_task("ner").model_settings(), get_task("sst2").model_settings(dropout=0.25, hidden=None)
    assert (ner.word_dim, ner.char_cnn, ner.lstm_layers, ner.hidden) == (50, True, 2, 100)
    assert (sst2.word_dim, sst2.char_cnn, sst2.lstm_layers, sst2.dropout) == (100, False, 1, 0.25)
    assert get_task("sst2").model_settings(classifier="bcn").hidden == 300  # CoVe's BCN
    assert get_task("sst2").model_settings(classifier="bcn", hidden=8).hidden == 8
