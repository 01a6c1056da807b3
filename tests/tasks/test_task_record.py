"""``task.json`` of a saved task model as :class:`~contextvec.tasks.record.TaskRecord`: written
back byte for byte, older files upgraded, every field fault one line naming the field."""

from __future__ import annotations

import json
import re

import pytest
from conftest import shared_file

from contextvec.cli import main as cli_main
from contextvec.tasks import load_task_model
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.predictor import FeatureTaskModel
from contextvec.tasks.record import EncoderRef, FeaturePass, TaskRecord

FEATURES = TaskRecord(
    kind="features", task="sst2", labels=("negative", "positive"),
    model_settings=ModelSettings(placement="input", hidden=8), word_dim=8,
    encoder=EncoderRef("elmo-en-small", fingerprint="0" * 64), features=FeaturePass("float16", 32),
    eval_batch_size=64, reported={"metric": "accuracy", "dev": 0.5, "test": None})
FINE_TUNE = TaskRecord(
    kind="fine-tune", task="ner", labels=("O", "B-PER", "I-PER"), model_settings=ModelSettings(),
    encoder=EncoderRef("/models/bert"), eval_batch_size=32, reported={"dev": 0.25},
    seen_mentions=frozenset({"PER Ann", "LOC Rome"}))


def _text(value: dict) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A model saved by train-task (no contextual vectors: quick) and its task.json's text."""
    out = tmp_path_factory.mktemp("saved") / "m"
    assert cli_main.main([
        "train-task", "sst2", "--train", str(shared_file("tasks/sst/trees/train.txt.gz")),
        "--dev", str(shared_file("tasks/sst/trees/dev.txt.gz")), "--max-sentences", "50",
        "--no-contextual", "--epochs", "1", "--hidden", "8", "--word-dim", "8", "--threads", "1",
        "--quiet", "--save-model", str(out)]) == 0
    return out, (out / "task.json").read_text(encoding="utf-8")


def test_a_saved_task_json_is_written_back_byte_for_byte(saved):
    directory, text = saved
    record = TaskRecord.from_json(json.loads(text), directory / "task.json")
    assert _text(record.to_json()) == text
    loaded = load_task_model(directory)
    assert loaded.record == record and loaded.config == json.loads(text)
    assert isinstance(loaded, FeatureTaskModel) and loaded.encoder is None  # one predictor per kind


@pytest.mark.parametrize("record", [FEATURES, FINE_TUNE], ids=["features", "fine-tune"])
def test_each_kind_reads_back_as_the_record_written(record):
    written = json.loads(_text(record.to_json()))
    assert TaskRecord.from_json(written, "task.json") == record
    # The kinds' own fields, in the file's order: a fine-tuned BERT has no word_dim or features.
    keys = ["format", "version", "kind", "task", "labels", "model_settings", "word_dim", "encoder",
            "features", "pair", "regression", "eval_batch_size", "reported", "seen_mentions"]
    if record.kind == "fine-tune":
        keys = [k for k in keys if k not in ("word_dim", "features")]
        assert written["model_settings"] == {"tag_scheme": "bio"}
        assert written["seen_mentions"] == ["LOC Rome", "PER Ann"]  # sorted
    assert list(written) == keys


def test_a_file_written_before_pairs_and_regression_loads_and_is_written_with_them(saved, tmp_path):
    directory, text = saved
    old = {k: v for k, v in json.loads(text).items() if k not in ("pair", "regression")}
    (directory / "task.json").write_text(_text(old), encoding="utf-8")
    try:
        model = load_task_model(directory)
        assert model.record == TaskRecord.from_json(json.loads(text), "task.json")
        assert _text(model.record.to_json()) == text
    finally:
        (directory / "task.json").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("change, message", [
    ({"format": "other"}, "not a contextvec task model (format 'contextvec-task-model')"),
    ({"version": 2}, "format version 2; this contextvec reads version 1"),
    ({"kind": "bert"}, "kind must be 'features' or 'fine-tune', not \"bert\""),
    ({"labels": ["a", "a"]}, 'labels must be a list of distinct strings, not ["a", "a"]'),
    ({"seen_mentions": [1]}, "seen_mentions must be null or a list of strings, not [1]"),
    ({"reported": {"dev": "high"}}, "reported must be an object with a numeric dev score, not "
                                     '{"dev": "high"}'),
    ({"word_dim": 0}, "word_dim must be a positive integer, not 0"),
    ({"eval_batch_size": True}, "eval_batch_size must be a positive integer, not true"),
    ({"features": {"dtype": "float64", "embed_batch_size": 1}}, "features must be {dtype: float32|float16"),
    ({"encoder": {"model": "m", "fingerprint": None}}, "encoder must be null or {model, options_file"),
    ({"model_settings": {"hidden": "8"}}, 'model_settings.hidden must be an integer, not "8"'),
    ({"model_settings": {"size": 8}}, 'model_settings.size must be one of word_dim, '),
    ({"model_settings": {"hidden": 0}}, "model_settings: "),
])
def test_each_field_fault_is_one_line_naming_it(change, message):
    with pytest.raises(ValueError, match=re.escape(f"task.json: {message}")) as error:
        TaskRecord.from_json({**FEATURES.to_json(), **change}, "task.json")
    assert "\n" not in str(error.value)


def test_only_a_fine_tuned_model_has_no_encoder_fingerprint():
    assert TaskRecord.from_json(FINE_TUNE.to_json(), "task.json").encoder.fingerprint is None
    unfingerprinted = {**FEATURES.to_json(), "encoder": FINE_TUNE.to_json()["encoder"]}
    with pytest.raises(ValueError, match="encoder must be null or"):
        TaskRecord.from_json(unfingerprinted, "task.json")


def test_a_placement_without_an_encoder_is_one_line(saved):
    directory, text = saved
    value = json.loads(text)
    value["model_settings"]["placement"] = "input"
    (directory / "task.json").write_text(_text(value), encoding="utf-8")
    try:
        with pytest.raises(ValueError, match=re.escape("task.json: placement 'input' needs an encoder, "
                                                       "and encoder is null")):
            load_task_model(directory)
    finally:
        (directory / "task.json").write_text(text, encoding="utf-8")
