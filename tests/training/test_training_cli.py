"""Bad input to the training and evaluation commands: one-line errors (exit code 2), never a
traceback, a silent overwrite or a silently damaged first token."""

from __future__ import annotations

import argparse
import gzip

import pytest
import torch

from contextvec.cli.main import COMMANDS, build_parser, main
from contextvec.training.corpus import read_sentences
from contextvec.training.mt.data import read_parallel_side

COMMANDS_HERE = ("train-bilm", "train-bert", "train-mt", "train-wordpiece", "train-word-vectors",
                 "perplexity", "eval-bert", "translate", "bleu")


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("the cat sat on the mat .\na dog ran .\n" * 20, encoding="utf-8")
    return path


def _usage_error(argv, capsys) -> str:
    """The one-line message of an argparse error (exit code 2)."""
    try:
        code = main(argv)
    except SystemExit as stopped:
        code = stopped.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def _error(argv, capsys) -> str:
    """The one-line message of a refused run (exit code 2)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(("argv", "wanted"), [
    (["train-bilm", "--train", "T", "--output-dir", "O", "--rows", "0"], "an integer > 0"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--lr", "-1"], "a number > 0"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--dropout", "1"], "a probability"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--checkpoint-every", "-5"], "an integer >= 0"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--lr", "nan"], "a number > 0"),
    (["train-bert", "--train", "T", "--output-dir", "O", "--batch-size", "0"], "an integer > 0"),
    (["train-bert", "--train", "T", "--output-dir", "O", "--masked-lm-prob", "1.5"], "a probability"),
    (["train-mt", "--train-src", "S", "--train-tgt", "T", "--word-vectors", "V", "--output-dir", "O",
      "--epochs", "0"], "an integer > 0"),
    (["perplexity", "T", "--model", "M", "--rows", "0"], "an integer > 0"),
    (["eval-bert", "T", "--model", "M", "--batch-size", "-2"], "an integer > 0"),
    (["translate", "T", "--model", "M", "--beam", "0"], "an integer > 0"),
    (["train-wordpiece", "--train", "T", "--output-dir", "O", "--vocab-size", "0"],
     "an integer in 1..1048576"),
    (["train-word-vectors", "--train", "T", "--output", "O", "--dim", "0"], "an integer in 1..2147483647"),
])
def test_numeric_options_are_range_checked_at_parse_time(argv, wanted, capsys):
    assert wanted in _usage_error(argv, capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a CPU-only torch")
@pytest.mark.parametrize("argv", [
    ["train-mt", "--train-src", "S", "--train-tgt", "T", "--word-vectors", "V", "--output-dir", "O"],
    ["eval-bert", "T", "--model", "M"],
    ["translate", "T", "--model", "M"],
])
def test_cuda_on_a_cpu_only_torch_is_a_usage_error(argv, capsys):
    assert "CUDA is not available" in _usage_error([*argv, "--device", "cuda"], capsys)


def test_an_existing_output_is_refused_unless_overwrite_or_resume(text, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    args = ["train-bilm", "--train", str(text), "--output-dir", str(out), "--preset", "tiny",
            "--max-steps", "2", "--quiet"]
    assert "exists; pass --overwrite" in _error(args, capsys)
    assert main([*args, "--overwrite"]) == 0
    assert (out / "model" / "model.safetensors").is_file()
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"  # only the run's files go
    # --overwrite starts again: the old checkpoint does not block it.
    assert main([*args, "--overwrite"]) == 0

    vectors = tmp_path / "vectors.txt"
    vectors.write_text("old", encoding="utf-8")
    err = _error(["train-word-vectors", "--train", str(text), "--output", str(vectors),
                  "--min-count", "1", "--dim", "4", "--quiet"], capsys)
    assert "exists; pass --overwrite" in err and vectors.read_text(encoding="utf-8") == "old"


def test_an_output_that_is_an_input_is_refused(text, capsys):
    before = text.read_bytes()
    err = _error(["train-word-vectors", "--train", str(text), "--output", str(text), "--overwrite",
                  "--quiet"], capsys)
    assert "is the input" in err and text.read_bytes() == before
    err = _error(["translate", str(text), "--model", "M", "--output", str(text), "--overwrite"], capsys)
    assert "is the input" in err and text.read_bytes() == before


@pytest.mark.parametrize("command", [
    ["train-bilm", "--output-dir", "{out}", "--train", "{dir}", "--preset", "tiny"],
    ["perplexity", "{dir}", "--model", "elmo-en-small"],
    ["train-wordpiece", "--output-dir", "{out}", "--train", "{dir}"],
    ["bleu", "--src", "{dir}", "--ref", "{dir}", "--model", "M"],
])
def test_a_directory_given_as_an_input_file(command, tmp_path, capsys):
    argv = [a.format(dir=tmp_path, out=tmp_path / "out") for a in command]
    assert "is a directory" in _error(argv, capsys)


def test_an_output_file_that_is_a_directory(text, tmp_path, capsys):
    err = _error(["train-word-vectors", "--train", str(text), "--output", str(tmp_path), "--quiet"],
                 capsys)
    assert "is a directory" in err


@pytest.mark.parametrize("command", [
    ["train-bilm", "--output-dir", "{out}", "--train", "{empty}", "--preset", "tiny"],
    ["perplexity", "{empty}", "--model", "elmo-en-small"],
    ["train-mt", "--train-src", "{empty}", "--train-tgt", "{empty}", "--word-vectors", "{empty}",
     "--output-dir", "{out}"],
    ["train-word-vectors", "--train", "{empty}", "--output", "{out}"],
])
def test_an_empty_input_file_gets_a_clear_message(command, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    argv = [a.format(empty=empty, out=tmp_path / "out") for a in command]
    assert f"{empty} is empty" in _error(argv, capsys)


def test_a_corpus_of_blank_lines_has_no_tokens(tmp_path, capsys):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n", encoding="utf-8")
    assert "no tokens" in _error(["train-bilm", "--train", str(blank), "--output-dir",
                                  str(tmp_path / "out"), "--preset", "tiny", "--quiet"], capsys)
    assert "no tokens" in _error(["perplexity", str(blank), "--model", "elmo-en-small", "--quiet"],
                                 capsys)


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_every_corpus_reader_drops_a_byte_order_mark(tmp_path, suffix):
    path = tmp_path / f"bom{suffix}"
    data = "\ufeffHello world .\nBye .\n".encode()
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    assert list(read_sentences([path])) == [["Hello", "world", "."], ["Bye", "."]]
    assert read_parallel_side(path) == ["Hello world .", "Bye ."]


def test_perplexity_of_a_file_with_a_byte_order_mark_is_that_of_the_file_without(tmp_path, capsys):
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text("Rome is the capital of Italy .\n", encoding="utf-8")
    marked.write_text("\ufeffRome is the capital of Italy .\n", encoding="utf-8")
    printed = []
    for path in (plain, marked):
        assert main(["perplexity", str(path), "--model", "elmo-en-small", "--quiet"]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1]


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("name", COMMANDS_HERE)
def test_every_option_has_help_with_its_default(name):
    assert name in COMMANDS
    parser = _subcommand(name)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name} {action.option_strings or action.dest}: no help"
        if action.option_strings and action.default not in (None, False):
            assert "default" in formatter._get_help_string(action), \
                f"{name} {action.option_strings}: default {action.default!r} not shown"


@pytest.mark.parametrize(("name", "output"), [
    ("train-bilm", "--output-dir"), ("train-bert", "--output-dir"), ("train-mt", "--output-dir"),
    ("train-wordpiece", "--output-dir"), ("train-word-vectors", "--output"), ("translate", "--output"),
    ("bleu", "--output"),
])
def test_the_same_thing_has_the_same_option_name(name, output):
    """A directory output is --output-dir, a file output --output; a batch is --batch-size."""
    options = {s for a in _subcommand(name)._actions for s in a.option_strings}
    assert output in options
    assert "--embed-batch-size" not in options
