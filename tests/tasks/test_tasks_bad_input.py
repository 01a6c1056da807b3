"""Bad input to the task commands (train-task, experiment, probe pos/wsd/neighbours) and the task
readers: each class ends in exit code 2 and a one-line message, never a traceback, a silent
overwrite or a wrong result. Needs no ../shared: every file is made here."""

from __future__ import annotations

import argparse
import gzip

import pytest

from contextvec.cli.main import build_parser, main
from contextvec.tasks.readers import read_conll2003, read_conllu, read_sst, read_trec

BOM = b"\xef\xbb\xbf"
CONLL = b"-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\n"
SST = b"(3 (2 It) (4 (4 works) (2 .)))\n(1 (1 Bad) (2 .))\n"
TREC = b"DESC:manner How do you do ?\nNUM:count How many ?\n"
CONLLU = b"1\tHello\thello\tINTJ\tUH\t_\t0\troot\t_\t_\n2\t!\t!\tPUNCT\t.\t_\t1\tpunct\t_\t_\n\n"


@pytest.fixture
def files(tmp_path):
    """A small valid CoNLL-2003 train and dev file, and an existing output."""
    (tmp_path / "train.txt").write_bytes(CONLL)
    (tmp_path / "dev.txt").write_bytes(CONLL)
    (tmp_path / "old.json").write_text('{"keep": true}\n', encoding="utf-8")
    return tmp_path


def _train_task(files, *argv: str) -> list[str]:
    return ["train-task", "ner", "--train", str(files / "train.txt"), "--dev", str(files / "dev.txt"),
            "--no-contextual", "--quiet", *argv]


def _fails(argv: list[str], capsys, *wanted: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err  # one line, no traceback
    for text in wanted:
        assert text in err, err
    return err


# -- out-of-range numbers: refused at parse time, before any file is read ----------------------

@pytest.mark.parametrize(("argv", "wanted"), [
    (["train-task", "ner", "--train", "x", "--epochs", "0"], "an integer > 0"),
    (["train-task", "ner", "--train", "x", "--dropout", "1.5"], "a probability in [0, 1)"),
    (["train-task", "ner", "--train", "x", "--mix-dropout", "nan"], "a probability in [0, 1)"),
    (["train-task", "ner", "--train", "x", "--train-fraction", "0"], "a fraction in (0, 1]"),
    (["train-task", "ner", "--train", "x", "--max-sentences=-3"], "an integer > 0"),
    (["train-task", "ner", "--train", "x", "--lr=-1e-3"], "a number > 0"),
    (["train-task", "ner", "--train", "x", "--l2=-1"], "a number >= 0"),
    (["train-task", "ner", "--train", "x", "--embed-batch-size", "0"], "an integer > 0"),
    (["train-task", "ner", "--train", "x", "--warmup", "1"], "a probability in [0, 1)"),
    (["train-task", "ner", "--train", "x", "--seed=-1"], "an integer in 0..4294967295"),
    (["experiment", "sample-efficiency", "ner", "--train", "x", "--output-dir", "o", "--fractions", "0"],
     "a fraction in (0, 1]"),
    (["experiment", "layers", "ner", "--train", "x", "--output-dir", "o", "--patience", "0"],
     "an integer > 0"),
    (["probe", "pos", "--train", "x", "--dev", "y", "--batch-size", "0"], "an integer > 0"),
    (["probe", "wsd", "--train", "x", "--eval", "y", "--gold", "z", "--embed-batch-size", "0"],
     "an integer > 0"),
    (["probe", "neighbours", "--sentence", "a b", "--word", "a", "--corpus", "c", "--top-k", "0"],
     "an integer > 0"),
])
def test_numeric_options_are_range_checked(argv, wanted, capsys):
    _fails(argv, capsys, wanted)


# -- outputs: never overwritten silently, never the input ----------------------------------------

def test_an_existing_output_is_refused_without_overwrite(files, capsys):
    _fails(_train_task(files, "--output", str(files / "old.json")), capsys, "exists", "--overwrite")
    assert (files / "old.json").read_text(encoding="utf-8") == '{"keep": true}\n'


def test_an_output_that_is_the_input_is_refused(files, capsys):
    _fails(_train_task(files, "--output", str(files / "dev.txt"), "--overwrite"), capsys, "is the input")
    assert (files / "dev.txt").read_bytes() == CONLL


def test_a_directory_as_output_file_is_refused(files, capsys):
    _fails(_train_task(files, "--output", str(files)), capsys, "is a directory")


def test_probe_pos_refuses_an_existing_output(tmp_path, capsys):
    (tmp_path / "ud.conllu").write_bytes(CONLLU)
    (tmp_path / "out.json").write_text("{}", encoding="utf-8")
    _fails(["probe", "pos", "--train", str(tmp_path / "ud.conllu"), "--dev", str(tmp_path / "ud.conllu"),
            "--output", str(tmp_path / "out.json")], capsys, "exists", "--overwrite")


def test_save_model_refuses_an_existing_directory_and_the_model_itself(files, capsys):
    (files / "saved").mkdir()
    (files / "saved" / "config.json").write_text("{}", encoding="utf-8")
    argv = ["train-task", "sst2", "--train", str(files / "train.txt"), "--dev", str(files / "dev.txt"),
            "--fine-tune", "--model", str(files / "saved"), "--quiet"]
    _fails([*argv, "--save-model", str(files / "saved")], capsys, "is the input")
    (files / "model").mkdir()
    _fails([*argv[:-3], "--model", str(files / "model"), "--quiet", "--save-model", str(files / "saved")],
           capsys, "exists", "--overwrite")


def test_experiment_refuses_a_used_output_dir_without_resume_or_overwrite(files, capsys):
    (files / "runs").mkdir()
    (files / "runs" / "results.json").write_text("{}", encoding="utf-8")
    argv = ["experiment", "layers", "ner", "--train", str(files / "train.txt"),
            "--dev", str(files / "dev.txt"), "--output-dir", str(files / "runs"), "--quiet"]
    _fails(argv, capsys, "--overwrite", "--resume")
    _fails([*argv, "--resume", "--overwrite"], capsys, "give one")


def test_wsd_refuses_existing_predictions(tmp_path, capsys):
    for name in ("semcor.xml", "eval.xml", "gold.txt"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    (tmp_path / "pred.layer0.key.txt").write_text("d000.s000.t000 be%2:42:03::\n", encoding="utf-8")
    _fails(["probe", "wsd", "--train", str(tmp_path / "semcor.xml"), "--eval", str(tmp_path / "eval.xml"),
            "--gold", str(tmp_path / "gold.txt"), "--predictions", str(tmp_path / "pred")],
           capsys, "pred.layer0.key.txt exists", "--overwrite")


# -- inputs: a directory, a missing or an empty file get one line naming the option --------------

def test_a_directory_as_input_file(files, capsys):
    _fails(["train-task", "ner", "--train", str(files), "--dev", str(files / "dev.txt"), "--no-contextual"],
           capsys, "--train", "is a directory")


def test_an_empty_input_file(files, capsys):
    (files / "empty.txt").write_bytes(b"")
    _fails(_train_task(files, "--test", str(files / "empty.txt")), capsys, "--test", "empty file")


def test_a_file_of_blank_lines_has_no_sentences(files, capsys):
    (files / "blank.txt").write_bytes(b"\n\n  \n")
    _fails(_train_task(files, "--test", str(files / "blank.txt")), capsys, "blank.txt", "no sentences")


def test_neighbours_with_an_empty_corpus(tmp_path, capsys, tiny_dir):
    (tmp_path / "corpus.txt").write_bytes(b"\n\n")
    _fails(["probe", "neighbours", "--sentence", "a b", "--word", "a",
            "--corpus", str(tmp_path / "corpus.txt"), "--model", str(tiny_dir), "--quiet"],
           capsys, "no sentences")


# -- a UTF-8 byte-order mark is not part of the first token --------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_every_task_reader_drops_a_byte_order_mark(tmp_path, gz):
    def write(name: str, data: bytes):
        path = tmp_path / (name + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(BOM + data) if gz else BOM + data)
        return path

    assert read_conll2003(write("conll", CONLL)).sentences[0] == ["EU", "rejects"]
    assert read_sst(write("sst", SST)).sentences[0] == ["It", "works", "."]
    trec = read_trec(write("trec", TREC))  # latin-1: the mark arrives as three characters
    assert trec.labels == ["DESC", "NUM"] and trec.sentences[0][0] == "How"
    assert read_conllu(write("ud", CONLLU)).sentences[0] == ["Hello", "!"]


# -- one vocabulary: the Python spelling of layer combinations, --embed-batch-size everywhere ------

def _parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv[0]).parse_args(list(argv))


def test_layer_combinations_are_spelled_as_in_python():
    base = ("train-task", "ner", "--train", "x")
    assert _parse(*base, "--layers", "sum_last_4").layers == "sum_last_4"
    assert _parse(*base, "--layers", "concat-last-4").layers == "concat_last_4"  # the earlier spelling


def test_encoder_batches_are_embed_batch_size_in_every_task_command():
    wsd = ("probe", "wsd", "--train", "x", "--eval", "y", "--gold", "z")
    assert _parse(*wsd, "--embed-batch-size", "8").embed_batch_size == 8
    assert _parse(*wsd, "--batch-size", "8").embed_batch_size == 8  # the earlier spelling, still read
    nb = ("probe", "neighbours", "--sentence", "a", "--word", "a", "--corpus", "c")
    assert _parse(*nb, "--embed-batch-size", "4").embed_batch_size == 4
    pos = ("probe", "pos", "--train", "x", "--dev", "y")
    assert _parse(*pos, "--embed-batch-size", "4").embed_batch_size == 4


def _subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("path", [("train-task",), ("probe", "pos"), ("probe", "wsd"),
                                  ("probe", "neighbours"), ("experiment", "layers"),
                                  ("experiment", "placement"), ("experiment", "sample-efficiency")])
def test_every_option_that_takes_a_value_names_its_default(path):
    parser = _subparser(build_parser(path[0]), *path)
    undocumented = [a.option_strings[0] for a in parser._actions
                    if a.option_strings and a.nargs != 0 and a.help != argparse.SUPPRESS
                    and not any(word in (a.help or "") for word in ("default", "required", "(with "))]
    # --model/--options-file/--weight-file/--threads/--device come from cli/common.py (not this room)
    assert set(undocumented) <= {"--model", "--options-file", "--weight-file", "--threads", "--device"}, \
        undocumented
