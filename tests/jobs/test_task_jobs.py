"""The train-task and predict jobs through their Python API (no command line): a tiny TREC file
written here and the seeded tiny ELMo."""

from __future__ import annotations

import io
import json

import pytest
from helpers_tasks import write_trec

from contextvec.features import FeatureSettings
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.predict import PredictSettings, run_predict
from contextvec.jobs.train_task import TrainMode, TrainTaskSettings, run_train_task
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TrainSettings


def _settings(tmp_path, tiny_dir, **changes) -> TrainTaskSettings:
    fields = {"task": "trec", "files": TaskFiles(write_trec(tmp_path / "train.label")),
              "mode": TrainMode.CONTEXTUAL, "encoder": EncoderChoice(str(tiny_dir)),
              "model": ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, placement="input"),
              "training": TrainSettings(epochs=2, lr=0.01, progress=False),
              "features": FeatureSettings(cache_dir=tmp_path / "cache"), "threads": 1}
    return TrainTaskSettings(**{**fields, **changes})


def test_train_task_job_trains_saves_and_reports_what_the_command_prints(tmp_path, own_tiny_dir):
    result = run_train_task(_settings(tmp_path, own_tiny_dir, save_model=str(tmp_path / "model")))
    report = result.report
    assert report.task == "trec" and report.metric == "accuracy"
    assert report.extra["dev_carved_from_train"] and report.extra["model"] == str(own_tiny_dir)
    assert report.splits["train"]["sentences"] + report.splits["dev"]["sentences"] == 40
    assert len(report.mixes) == 1 and len(report.mixes[0]["weights"]) == 3  # the tiny ELMo's layers
    assert result.saved_model == tmp_path / "model" and (tmp_path / "model" / "task.json").is_file()
    lines = result.lines()
    sizes = report.splits["train"]["sentences"], report.splits["dev"]["sentences"]
    assert lines[0] == f"trec with {own_tiny_dir} (input); train {sizes[0]} sent, dev {sizes[1]} sent"
    assert lines[-1].startswith(f"saved the model to {tmp_path / 'model'}")

    # The same seed gives the same scores; the saved model predicts text and scores the task file.
    again = run_train_task(_settings(tmp_path, own_tiny_dir))
    assert again.report.dev == report.dev and again.saved_model is None
    text = tmp_path / "questions.txt"
    text.write_text("how many dogs are there ?\nwhere is the boats city ?\n", encoding="utf-8")
    out = io.StringIO()
    predicted = run_predict(PredictSettings(tmp_path / "model", str(text), progress=False), out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert predicted.count == 2 and [r["tokens"][0] for r in rows] == ["how", "where"]
    assert {r["label"] for r in rows} <= {"NUM", "LOC"}
    scored = run_predict(PredictSettings(tmp_path / "model", str(tmp_path / "train.label"), format="task",
                                         score=True, progress=False), None)
    assert scored.count == 40 and 0 <= scored.scores["accuracy"] <= 1
    assert scored.score_line().startswith("trec accuracy ") and scored.reported_dev == report.dev["accuracy"]


def test_train_task_settings_are_checked_when_made(tmp_path, own_tiny_dir):
    with pytest.raises(ValueError, match="--fine-tune needs --model"):
        _settings(tmp_path, own_tiny_dir, mode="fine-tune", encoder=EncoderChoice(), model=None,
                  training=FineTuneSettings())
    with pytest.raises(ValueError, match="--fine-tune trains BERT"):
        _settings(tmp_path, own_tiny_dir, mode="fine-tune", model=None, training=FineTuneSettings())
    with pytest.raises(ValueError, match="does not fit mode 'no-contextual'"):
        _settings(tmp_path, own_tiny_dir, mode=TrainMode.NO_CONTEXTUAL)
    with pytest.raises(ValueError, match="FineTuneSettings"):
        _settings(tmp_path, own_tiny_dir, training=FineTuneSettings())
    with pytest.raises(ValueError, match="not both"):
        EncoderChoice("elmo-en-small", options_file="options.json")
    with pytest.raises(ValueError, match="--score needs labels"):
        PredictSettings(tmp_path, "in.txt", score=True)
    with pytest.raises(ValueError, match="feature dtype"):
        FeatureSettings(dtype="int8")
