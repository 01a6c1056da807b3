"""Saved GLUE task models: a frozen-feature pair model reloaded scores dev exactly as training
reported, and ``contextvec predict`` on GLUE files: pairs, GLUE's submission format, bad input.

Data are tiny synthetic files in GLUE's own layouts; the encoders are the tiny random ELMo of
``own_tiny_dir`` and the tiny BERT of ``own_tiny_bert_dir``: nothing here needs ../shared.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch
from helpers_tasks import write_trec
from safetensors.torch import load_file, save_file

from contextvec.cli.main import main
from contextvec.tasks import load_task_model
from contextvec.tasks.spec import get_task

TRAIN = ["--epochs", "2", "--hidden", "8", "--word-dim", "8", "--batch-size", "8", "--lr", "0.02",
         "--quiet", "--threads", "1"]
COLOURS = ["red", "blue", "green", "black"]
FILLER = ["the", "a", "car", "is", "was", "house", "seen"]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models; the machine is shared


def _pair(rng: random.Random) -> tuple[str, str, bool]:
    a = rng.choice(COLOURS)
    same = rng.random() < 0.5
    b = a if same else rng.choice([c for c in COLOURS if c != a])
    return " ".join([*rng.sample(FILLER, 2), a]) + " .", " ".join([b, *rng.sample(FILLER, 2)]) + " .", same


def _rte(path: Path, n: int, seed: int, test_ids: list[str] | None = None) -> Path:
    """RTE's train layout (index, sentence1, sentence2, label) or, with ``test_ids``, its test layout."""
    rng = random.Random(seed)
    if test_ids is not None:
        rows = ["index\tsentence1\tsentence2"]
        for i in test_ids:
            a, b, _ = _pair(rng)
            rows.append(f"{i}\t{a}\t{b}")
    else:
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            a, b, same = _pair(rng)
            rows.append(f"{i}\t{a}\t{b}\t{'entailment' if same else 'not_entailment'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


STSB_HEAD = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"


def _stsb(path: Path, n: int, seed: int, test_ids: list[str] | None = None) -> Path:
    """STS-B's train layout (score last) or, with ``test_ids``, its test layout."""
    rng = random.Random(seed)
    rows = [STSB_HEAD if test_ids is not None else f"{STSB_HEAD}\tscore"]
    for i in test_ids or range(n):
        a, b, same = _pair(rng)
        score = rng.uniform(3.5, 5) if same else rng.uniform(0, 1.5)
        score = "" if test_ids is not None else f"\t{score:.3f}"
        rows.append(f"{i}\tmain-captions\tMSRvid\t2012test\t{i:>04}\tnone\tnone\t{a}\t{b}{score}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _cola(path: Path, n: int, seed: int, test_ids: list[str] | None = None) -> Path:
    """CoLA's train layout (no header: source, label, mark, sentence) or its test layout."""
    rng = random.Random(seed)
    if test_ids is not None:
        rows = ["index\tsentence", *(f"{i}\tthe {rng.choice(COLOURS)} car is seen ." for i in test_ids)]
    else:
        rows = []
        for _ in range(n):
            good = rng.random() < 0.5
            words = ["the", rng.choice(COLOURS), "car", "is", "seen"] if good else ["car", "the", "is"]
            rows.append(f"gj04\t{int(good)}\t{'' if good else '*'}\t{' '.join(words)} .")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


WRITERS = {"rte": _rte, "stsb": _stsb, "cola": _cola}


def _train(tmp_path: Path, task: str, *options: str) -> dict:
    train = WRITERS[task](tmp_path / f"{task}-train.tsv", 60, 1)
    out = tmp_path / "report.json"
    assert main(["train-task", task, "--train", str(train), *options, "--output", str(out), "--overwrite",
                 "--save-model", str(tmp_path / task)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("task, options", [("rte", []), ("rte", ["--feature-dtype", "float16"]),
                                           ("stsb", ["--no-contextual"]), ("stsb", [])])
def test_a_reloaded_pair_model_scores_exactly_as_training_reported(tmp_path, own_tiny_dir, capsys, task,
                                                                     options):
    contextual = "--no-contextual" not in options
    model = ["--model", str(own_tiny_dir), "--cache-dir", str(tmp_path / "cache")] if contextual else []
    report = _train(tmp_path, task, *TRAIN, *model, *options)
    saved = load_task_model(tmp_path / task)
    assert saved.pair and saved.regression is (task == "stsb") and (saved.encoder is not None) is contextual
    _, dev, _ = saved.spec.load_splits(tmp_path / f"{task}-train.tsv", None)
    assert saved.score(dev, saved.predict(dev.sentences, second=dev.second)) == report["dev"]
    # The command: the same figure, to the 4 decimals it prints, with the task's other metrics.
    capsys.readouterr()
    assert main(["predict", str(tmp_path / task), str(tmp_path / f"{task}-train.tsv"), "--format", "task",
                 "--score", "--quiet"]) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"{task} {report['metric']} ") and " on 60 pairs of " in line
    assert ("; pearson " in line) if task == "stsb" else ("; accuracy" not in line)


def _rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_glue_output_on_unlabeled_test_files(tmp_path, capsys):
    ids = ["7", "3", "12", "0"]
    for task, labels in (("rte", {"entailment", "not_entailment"}), ("cola", {"0", "1"})):
        _train(tmp_path, task, *TRAIN, "--no-contextual")
        test = WRITERS[task](tmp_path / f"{task}-test.tsv", 0, 2, test_ids=ids)
        capsys.readouterr()
        assert main(["predict", str(tmp_path / task), str(test), "--format", "task",
                     "--output-format", "glue", "--quiet"]) == 0
        rows = _rows(capsys.readouterr().out)
        split = get_task(task).load(test)
        saved = load_task_model(tmp_path / task)
        want = saved.predict(split.sentences, second=split.second)
        assert rows == [["index", "prediction"], *([i, p] for i, p in zip(ids, want, strict=True))]
        assert {p for _, p in rows[1:]} <= labels


def test_stsb_glue_scores_are_clipped_to_the_range(tmp_path, own_tiny_bert_dir, capsys):
    """A fine-tuned STS-B model whose output is pushed out of 0-5: JSON lines give the model's
    floats, GLUE's format the clipped scores."""
    _train(tmp_path, "stsb", "--fine-tune", "--model", str(own_tiny_bert_dir), "--epochs", "1", "--quiet",
           "--threads", "1")
    test = _stsb(tmp_path / "test.tsv", 0, 3, test_ids=["5", "1", "9"])
    weights = tmp_path / "stsb" / "model.safetensors"
    state = load_file(weights)
    capsys.readouterr()
    for shift, clipped in ((10.0, "5.000"), (-10.0, "0.000")):
        save_file({**state, "classifier.bias": state["classifier.bias"] + shift}, str(weights),
                  metadata={"format": "pt"})
        base = ["predict", str(tmp_path / "stsb"), str(test), "--format", "task", "--quiet"]
        assert main([*base, "--output-format", "glue"]) == 0
        assert _rows(capsys.readouterr().out) == [["index", "prediction"], ["5", clipped], ["1", clipped],
                                                  ["9", clipped]]
        assert main(base) == 0
        scores = [json.loads(line)["score"] for line in capsys.readouterr().out.splitlines()]
        assert len(scores) == 3 and all((s > 5) if shift > 0 else (s < 0) for s in scores)


def test_pair_text_input_is_a_tab_between_the_sentences(tmp_path, capsys):
    _train(tmp_path, "rte", *TRAIN, "--no-contextual")
    text = tmp_path / "pairs.txt"
    text.write_text("the red car .\tred is the house .\na blue house\tthe green car\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "rte"), str(text), "--quiet"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    first = [["the", "red", "car", "."], ["a", "blue", "house"]]
    second = [["red", "is", "the", "house", "."], ["the", "green", "car"]]
    want = load_task_model(tmp_path / "rte").predict(first, second=second)
    assert rows == [{"tokens": a, "second": b, "label": p}
                    for a, b, p in zip(first, second, want, strict=True)]
    # Text input in GLUE's format: the items numbered from 0.
    assert main(["predict", str(tmp_path / "rte"), str(text), "--output-format", "glue", "--quiet"]) == 0
    assert _rows(capsys.readouterr().out) == [["index", "prediction"], ["0", want[0]], ["1", want[1]]]


def test_pair_text_is_tokenized_as_the_tasks_files_were_unless_told(tmp_path, capsys):
    """RTE's raw text was tokenized with moses in training; text input was split at spaces, so
    "house." stayed one unknown word."""
    _train(tmp_path, "rte", *TRAIN, "--no-contextual")
    text = tmp_path / "pairs.txt"
    text.write_text("the red car.\tred is the house.\n", encoding="utf-8")
    capsys.readouterr()
    for given, first, second in ((None, ["the", "red", "car", "."], ["red", "is", "the", "house", "."]),
                                 ("whitespace", ["the", "red", "car."], ["red", "is", "the", "house."])):
        extra = [] if given is None else ["--tokenizer", given]
        assert main(["predict", str(tmp_path / "rte"), str(text), "--quiet", *extra]) == 0
        row = json.loads(capsys.readouterr().out)
        assert (row["tokens"], row["second"]) == (first, second)


def test_glue_prediction_errors_are_one_line(tmp_path, capsys):
    _train(tmp_path, "rte", *TRAIN, "--no-contextual")
    model = str(tmp_path / "rte")
    no_tab = tmp_path / "no-tab.txt"
    no_tab.write_text("the red car\tred car\nthe blue car is seen\n", encoding="utf-8")
    two_tabs = tmp_path / "two-tabs.txt"
    two_tabs.write_text("the red car\tred\tcar\n", encoding="utf-8")
    empty_half = tmp_path / "empty-half.txt"
    empty_half.write_text("the red car\t \n", encoding="utf-8")
    test = _rte(tmp_path / "test.tsv", 0, 2, test_ids=["0", "1"])
    write_trec(tmp_path / "trec.label")
    assert main(["train-task", "trec", "--train", str(tmp_path / "trec.label"), *TRAIN, "--no-contextual",
                 "--output", str(tmp_path / "trec.json"), "--save-model", str(tmp_path / "trec")]) == 0
    cases = [
        ([model, str(no_tab)], "line 2: rte predicts sentence pairs: expected two sentences separated "
                               "by one tab, found 0 tabs"),
        ([model, str(two_tabs)], "line 1: rte predicts sentence pairs: expected two sentences separated "
                                 "by one tab, found 2 tabs"),
        ([model, str(empty_half)], "line 1: empty second sentence"),
        ([model, str(test), "--format", "task", "--score"], "has no labels"),
        ([model, str(test), "--format", "task", "--output-format", "conll"], "for NER"),
        ([str(tmp_path / "trec"), str(tmp_path / "trec.label"), "--format", "task",
          "--output-format", "glue"], "--output-format glue is for the GLUE tasks"),
    ]
    capsys.readouterr()
    for argv, wanted in cases:
        assert main(["predict", *argv, "--quiet"]) == 2, argv
        err = capsys.readouterr().err
        assert wanted in err and err.count("\n") == 1, (argv, err)
    with pytest.raises(ValueError, match="sentence pairs: give the second sentences"):
        load_task_model(model).predict([["a", "red", "car"]])


def test_task_json_pair_and_regression_fields_are_checked(tmp_path):
    _train(tmp_path, "stsb", *TRAIN, "--no-contextual")
    path = tmp_path / "stsb" / "task.json"
    good = json.loads(path.read_text(encoding="utf-8"))
    assert (good["pair"], good["regression"], good["labels"]) == (True, True, [])
    cases = [({"pair": False}, "pair must be true for task stsb, not false"),
             ({"regression": 1}, "regression must be true for task stsb, not 1"),
             ({"labels": ["0", "1"]}, 'labels must be [] (a regression task), not ["0", "1"]')]
    for change, wanted in cases:
        path.write_text(json.dumps({**good, **change}), encoding="utf-8")
        with pytest.raises(ValueError, match=re.escape(wanted)):
            load_task_model(tmp_path / "stsb")
    path.write_text(json.dumps({**good, "task": "rte", "regression": False}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape("labels must be a list of distinct strings, not []")):
        load_task_model(tmp_path / "stsb")
