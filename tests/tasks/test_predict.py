"""Saved task models: ``train-task --save-model``, ``load_task_model`` and ``contextvec predict``.

Data are tiny synthetic files in each task's own format and the encoder is the tiny random
ELMo of ``own_tiny_dir``: nothing here needs ../shared.
"""

from __future__ import annotations

import io
import json
import random
import sys

import pytest
import torch

import contextvec
from contextvec.cli import main as cli_main
from contextvec.cli.predict import HELP
from contextvec.tasks import load_task_model
from contextvec.tasks.spec import get_task

# Small and quick; epochs enough that the best epoch is not always the first.
TRAIN = ["--epochs", "3", "--hidden", "8", "--word-dim", "8", "--batch-size", "8", "--lr", "0.02",
         "--quiet", "--threads", "1"]


@pytest.fixture(autouse=True)
def _predict_command(monkeypatch):
    """``predict`` in the command table (the lead wires it into cli/main.py)."""
    monkeypatch.setitem(cli_main.COMMANDS, "predict", ("predict", HELP))
    torch.set_num_threads(1)


def _sst(path, n: int, seed: int):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        label = rng.choice("0134")
        words = [rng.choice(["a", "film", "it", "was", "plot", "the"]) for _ in range(rng.randint(2, 7))]
        words.insert(rng.randrange(len(words) + 1), "good" if label in "34" else "bad")
        lines.append(f"({label} " + " ".join(f"(2 {w})" for w in words) + ")")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _conll(path, n: int, seed: int):
    rng = random.Random(seed)
    blocks = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(2, 7)):
            kind = rng.random()
            if kind < 0.25:
                rows.append(f"{rng.choice(['Ann', 'Bob', 'Eve'])} NNP I-NP I-PER")
            elif kind < 0.4:
                rows.append(f"{rng.choice(['Rome', 'Oslo'])} NNP I-NP I-LOC")
            else:
                rows.append(f"{rng.choice(['the', 'met', 'in', 'and'])} DT I-NP O")
        blocks.append("\n".join(rows))
    path.write_text("-DOCSTART- -X- O O\n\n" + "\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def _trec(path, n: int, seed: int):
    rng = random.Random(seed)
    starts = {"HUM:ind": "Who", "LOC:city": "Where", "NUM:date": "When"}
    lines = [f"{label} {starts[label]} {rng.choice(['is', 'was'])} {rng.choice(['it', 'he', 'that'])} ?"
             for label in (rng.choice(sorted(starts)) for _ in range(n))]
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return path


def _train(tmp_path, task: str, *extra: str, data: dict | None = None) -> dict:
    files = data or _files(tmp_path, task)
    argv = ["train-task", task, "--train", str(files["train"]), *TRAIN,
            "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "report.json"), "--overwrite",
            *(["--dev", str(files["dev"])] if "dev" in files else []), *extra]
    assert cli_main.main(argv) == 0
    return json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))


def _files(tmp_path, task: str) -> dict:
    if task == "ner":
        return {"train": _conll(tmp_path / "train.txt", 60, 1), "dev": _conll(tmp_path / "dev.txt", 25, 2)}
    if task.startswith("trec"):
        return {"train": _trec(tmp_path / "train.label", 80, 1)}
    return {"train": _sst(tmp_path / "train.txt", 60, 1), "dev": _sst(tmp_path / "dev.txt", 30, 2)}


@pytest.mark.parametrize("task, options", [
    ("ner", ["--placement", "input+output", "--tag-scheme", "bioul"]),
    ("ner", ["--no-contextual"]),
    ("sst2", ["--layers", "last", "--feature-dtype", "float16"]),
    ("sst5", ["--layer-norm", "--char-cnn"]),
    ("sst2", ["--classifier", "bcn", "--feature-dtype", "float16", "--char-ngrams", "6"]),
])
def test_a_reloaded_model_scores_exactly_as_training_reported(tmp_path, own_tiny_dir, capsys, task, options):
    model_args = [] if "--no-contextual" in options else ["--model", str(own_tiny_dir)]
    report = _train(tmp_path, task, *model_args, *options, "--save-model", str(tmp_path / "m"))
    assert report["extra"]["saved_model"] == str(tmp_path / "m")
    saved = load_task_model(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "task.json").read_text(encoding="utf-8"))
    assert config["labels"] == report["labels"]
    assert config["reported"]["dev"] == report["dev"][report["metric"]]
    assert (config["encoder"] is None) == ("--no-contextual" in options)
    dev = saved.spec.load(tmp_path / "dev.txt")
    scores = saved.score(dev, saved.predict(dev.sentences))
    assert scores == report["dev"]  # every figure, by_mention included
    # The command line, on the task's own file: the same figure, to the 4 decimals it prints.
    assert cli_main.main(["predict", str(tmp_path / "m"), str(tmp_path / "dev.txt"), "--format", "task",
                          "--score", "--quiet"]) == 0
    metric = report["metric"]
    assert f"{task} {metric} {report['dev'][metric]:.4f} on {len(dev)} sentences" in capsys.readouterr().out


@pytest.mark.parametrize("task", ["trec", "trec50"])
def test_trec_saved_model_predicts_the_carved_dev_split(tmp_path, own_tiny_dir, task):
    report = _train(tmp_path, task, "--model", str(own_tiny_dir), "--save-model", str(tmp_path / "m"))
    saved = load_task_model(tmp_path / "m")
    _, dev, _ = get_task(task).load_splits(tmp_path / "train.label", None)
    assert saved.score(dev, saved.predict(dev.sentences)) == report["dev"]
    fine = ["HUM:ind", "LOC:city", "NUM:date"]
    assert report["labels"] == (fine if task == "trec50" else [label.split(":")[0] for label in fine])


def test_predict_command_outputs(tmp_path, own_tiny_dir, capsys, monkeypatch):
    _train(tmp_path, "ner", "--model", str(own_tiny_dir), "--save-model", str(tmp_path / "m"))
    capsys.readouterr()
    saved = load_task_model(tmp_path / "m")
    text = tmp_path / "in.txt"
    text.write_text("Ann met Bob in Rome\nthe Oslo\n", encoding="utf-8")
    want = saved.predict([["Ann", "met", "Bob", "in", "Rome"], ["the", "Oslo"]])
    args = ["predict", str(tmp_path / "m"), str(text), str(tmp_path / "out.jsonl"), "--quiet"]
    assert cli_main.main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows == [{"tokens": ["Ann", "met", "Bob", "in", "Rome"], "tags": want[0]},
                    {"tokens": ["the", "Oslo"], "tags": want[1]}]
    # CoNLL out, stdin in, stdout out.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.read_bytes()), encoding="utf-8"))
    assert cli_main.main(["predict", str(tmp_path / "m"), "-", "-", "--output-format", "conll",
                          "--quiet"]) == 0
    tokens = [["Ann", "met", "Bob", "in", "Rome"], ["the", "Oslo"]]
    assert capsys.readouterr().out == "".join(
        "".join(f"{t} {g}\n" for t, g in zip(words, tags, strict=True)) + "\n"
        for words, tags in zip(tokens, want, strict=True))
    # An existing output is refused without --overwrite; with it, replaced.
    assert cli_main.main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert cli_main.main([*args, "--overwrite"]) == 0


def test_predict_streams_in_chunks_like_one_call(tmp_path, own_tiny_dir):
    _train(tmp_path, "sst2", "--model", str(own_tiny_dir), "--save-model", str(tmp_path / "m"))
    saved = load_task_model(tmp_path / "m")
    sentences = saved.spec.load(tmp_path / "dev.txt").sentences
    streamed = [p for _, p in saved.predict_stream(iter(sentences), chunk=7)]
    assert streamed == saved.predict(sentences) and all(p in ("negative", "positive") for p in streamed)


def test_a_different_encoder_is_refused(tmp_path, own_tiny_dir):
    _train(tmp_path, "sst2", "--model", str(own_tiny_dir), "--save-model", str(tmp_path / "m"))
    other = contextvec.load(own_tiny_dir)
    with torch.no_grad():
        next(other.parameters()).add_(0.01)
    with pytest.raises(ValueError, match="fingerprint"):
        load_task_model(tmp_path / "m", encoder=other)
    assert load_task_model(tmp_path / "m", encoder=contextvec.load(own_tiny_dir)).encoder is not None


def test_predict_errors_are_one_line(tmp_path, own_tiny_dir, capsys):
    _train(tmp_path, "sst2", "--no-contextual", "--save-model", str(tmp_path / "m"))
    capsys.readouterr()
    bad = tmp_path / "bad.txt"
    bad.write_text("a good film\n\nbad\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"a good film\ncaf\xe9 bad\n")
    cases = [
        (["predict", str(tmp_path / "m"), str(bad)], "line 2: empty line"),
        (["predict", str(tmp_path / "m"), str(bad), "--score"], "--score needs labels"),
        (["predict", str(tmp_path / "m"), str(tmp_path / "dev.txt"), "--output-format", "conll"], "for NER"),
        (["predict", str(tmp_path), str(bad)], "task.json is missing"),
        (["predict", str(tmp_path / "m"), str(tmp_path / "none.txt")], "does not exist"),
        (["predict", str(tmp_path / "m"), str(bad), "--format", "task"], "not a tree"),
        (["predict", str(tmp_path / "m"), str(bad), str(bad), "--overwrite"], "is the input"),
        (["predict", str(tmp_path / "m"), str(latin1)], "line 2: not UTF-8"),
    ]
    for argv, wanted in cases:
        assert cli_main.main([*argv, "--quiet"]) == 2, argv
        err = capsys.readouterr().err
        assert wanted in err and err.count("\n") == 1, (argv, err)
    assert cli_main.main(["predict", str(tmp_path / "m"), str(bad), "--batch-size", "0"]) == 2
    assert "expected an integer > 0" in capsys.readouterr().err
    # An existing non-empty --save-model directory is refused before training.
    assert cli_main.main(["train-task", "sst2", "--train", str(tmp_path / "train.txt"), "--dev",
                          str(tmp_path / "dev.txt"), "--no-contextual", "--quiet", "--save-model",
                          str(tmp_path / "m")]) == 2
    assert "exists" in capsys.readouterr().err
