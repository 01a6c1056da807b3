"""Output paths as a user may give them (docs/bad-input.md, "Output paths, links, ..."): links are
written through, FIFOs and devices never replaced, a directory where a file belongs, a trailing
slash, `-` and an empty path get one clear line, and one run holds its output at a time."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import contextvec
from contextvec.cli.main import main


def _embed(capsys, *args):
    code = main(["embed", *map(str, args), "--quiet"])
    captured = capsys.readouterr()
    return code, captured.err.strip()


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f if k != "sentence_to_index"}


@pytest.fixture()
def src(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("The bank was robbed .\nA river bank .\n", encoding="utf-8")
    return path


def test_a_symbolic_link_output_is_written_through_to_its_target(tmp_path, src, own_tiny_dir, capsys):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.h5"
    link.symlink_to("real/target.h5")
    assert _embed(capsys, src, link, "--top", "--model", own_tiny_dir)[0] == 0
    assert link.is_symlink() and sorted(_read(tmp_path / "real" / "target.h5")) == ["0", "1"]
    code, err = _embed(capsys, src, link, "--top", "--model", own_tiny_dir)
    assert code == 2 and "link.h5 exists; pass --overwrite" in _one_line(err)
    assert _embed(capsys, src, link, "--all", "--model", own_tiny_dir, "--overwrite")[0] == 0
    assert link.is_symlink() and _read(link)["0"].ndim == 3
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["target.h5"]


def test_a_link_to_a_missing_folder_is_refused(tmp_path, src, own_tiny_dir, capsys):
    link = tmp_path / "link.h5"
    link.symlink_to("nowhere/target.h5")
    code, err = _embed(capsys, src, link, "--top", "--model", own_tiny_dir)
    assert code == 2 and "nowhere/target.h5) does not exist" in _one_line(err)
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_fifo_output_is_never_replaced(tmp_path, src, own_tiny_dir, capsys, overwrite):
    fifo = tmp_path / "out.h5"
    os.mkfifo(fifo)
    code, err = _embed(capsys, src, fifo, "--top", "--model", own_tiny_dir, *overwrite)
    assert code == 2 and "is a FIFO (named pipe), not a regular file: refusing" in _one_line(err)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_character_device_is_refused_before_anything_can_touch_it(tmp_path, src, own_tiny_dir, capsys):
    """A character device as the output is refused by its kind, with --overwrite too. Where this
    process may make device nodes (root), the output is a null device of its own in tmp_path, so
    a bug could only replace that; elsewhere /dev/null, which this process then cannot replace."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        device = Path("/dev/null")
        assert not os.access("/dev", os.W_OK)
    code, err = _embed(capsys, src, device, "--top", "--model", own_tiny_dir, "--overwrite")
    assert code == 2 and "is a character device, not a regular file" in _one_line(err)
    assert stat.S_ISCHR(os.stat(device).st_mode)


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_directory_output_is_one_line_about_its_kind(tmp_path, src, own_tiny_dir, capsys, overwrite):
    (tmp_path / "out").mkdir()
    code, err = _embed(capsys, src, tmp_path / "out", "--top", "--model", own_tiny_dir, *overwrite)
    assert code == 2 and _one_line(err).endswith("is a directory; give a file path")
    assert "exists" not in err


@pytest.mark.parametrize(("given", "message"), [
    ("out dir/", "ends with '/', which names a folder; give a file path"),
    ("-", "`-` means standard input, not an output; give an output file path"),
    ("", "the output path is empty; give a file path"),
])
def test_trailing_slash_dash_and_empty_outputs(tmp_path, src, own_tiny_dir, capsys, monkeypatch,
                                               given, message):
    monkeypatch.chdir(tmp_path)
    code, err = _embed(capsys, src, given, "--top", "--model", own_tiny_dir, "--overwrite")
    assert code == 2 and message in _one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_overwrite_discards_an_unfinished_run(tmp_path, src, own_tiny_dir, capsys):
    parts = tmp_path / "out.h5.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text('{"input_sha256": "another input"}')
    code, err = _embed(capsys, src, tmp_path / "out.h5", "--top", "--model", own_tiny_dir)
    assert code == 2 and "pass --resume to finish it or --overwrite to start again" in _one_line(err)
    assert _embed(capsys, src, tmp_path / "out.h5", "--top", "--model", own_tiny_dir, "--overwrite")[0] == 0
    assert sorted(_read(tmp_path / "out.h5")) == ["0", "1"] and not parts.exists()


def test_empty_standard_input_is_named_as_such(tmp_path, own_tiny_dir, monkeypatch, capsys):
    with open(os.devnull, "rb") as empty:
        monkeypatch.setattr("sys.stdin", type("In", (), {"buffer": empty})())
        code, err = _embed(capsys, "-", tmp_path / "out.h5", "--top", "--model", own_tiny_dir)
    assert code == 2 and _one_line(err) == \
        "contextvec: error: standard input (-) is empty: there is nothing to embed"


@pytest.mark.skipif(sys.platform == "win32", reason="outputs are held with fcntl")
def test_a_second_run_on_an_output_in_use_is_refused_at_once(tmp_path, own_tiny_dir):
    """Two real processes: the first holds the output while it waits for its standard input;
    the second (with --resume, with --overwrite) is refused while the first still runs, and the
    first then finishes its output exactly."""
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "contextvec.cli.main", "embed", "-", str(out), "--top",
           "--model", str(own_tiny_dir), "--quiet"]
    first = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lock, deadline = tmp_path / ".out.h5.lock", time.monotonic() + 120
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline, "the first run never took its output"
            time.sleep(0.01)
        for flag in ("--resume", "--overwrite"):
            second = subprocess.run([*cmd[:4], str(tmp_path / "in.txt"), *cmd[5:], flag],
                                    capture_output=True, text=True, timeout=120)
            assert second.returncode == 2
            assert _one_line(second.stderr) == \
                f"contextvec: error: {out} is in use by pid {first.pid}; wait for that run to end"
            assert first.poll() is None  # the second did not wait for the first
        _, err = first.communicate(b"The bank was robbed .\nA river bank .\n", timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    [want] = contextvec.load(own_tiny_dir).embed([["A", "river", "bank", "."]], layers="top")
    np.testing.assert_allclose(_read(out)["1"], want, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5"]


def test_cr_only_line_endings_are_line_breaks(tmp_path, own_tiny_dir, capsys):
    """Old Mac files (lone \\r) and mixed endings have the lines Python's text mode sees."""
    lines = ["The bank was robbed .", "A river bank .", "money"]
    outputs = {}
    for name, data in (("lf", "\n".join(lines) + "\n"), ("cr", "\r".join(lines) + "\r"),
                       ("crlf", "\r\n".join(lines)), ("mixed", f"{lines[0]}\r{lines[1]}\r\n{lines[2]}\n")):
        (tmp_path / f"{name}.txt").write_bytes(data.encode("utf-8"))
        assert _embed(capsys, tmp_path / f"{name}.txt", tmp_path / f"{name}.h5", "--all",
                      "--model", own_tiny_dir)[0] == 0
        outputs[name] = _read(tmp_path / f"{name}.h5")
    assert sorted(outputs["lf"]) == ["0", "1", "2"]
    for name in ("cr", "crlf", "mixed"):
        assert sorted(outputs[name]) == ["0", "1", "2"]
        for key, array in outputs["lf"].items():
            np.testing.assert_array_equal(outputs[name][key], array)


def _sst(path, n: int):
    words = ["a", "film", "it", "was", "plot", "the"]
    lines = [f"({label} (2 {words[i % 6]}) (2 {'good' if label in '34' else 'bad'}))"
             for i, label in zip(range(n), "0134" * n, strict=False)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_saved_task_model_goes_through_a_link_to_its_target(tmp_path, capsys):
    train, dev = _sst(tmp_path / "train.txt", 16), _sst(tmp_path / "dev.txt", 8)
    (tmp_path / "real").mkdir()
    link = tmp_path / "m"
    link.symlink_to("real")
    argv = ["train-task", "sst2", "--train", str(train), "--dev", str(dev), "--no-contextual",
            "--epochs", "1", "--hidden", "8", "--word-dim", "8", "--quiet", "--threads", "1",
            "--save-model", str(link)]
    for extra in ([], ["--overwrite"]):
        assert main([*argv, *extra]) == 0, capsys.readouterr().err
        assert link.is_symlink() and (tmp_path / "real" / "task.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.txt", "m", "real", "train.txt"]


def test_a_model_saved_where_a_file_is_gets_one_line(tmp_path, own_tiny_dir):
    (tmp_path / "model").write_text("keep")
    with pytest.raises(NotADirectoryError, match="the output directory .*model is a file"):
        contextvec.save(contextvec.load(own_tiny_dir), tmp_path / "model")
    assert (tmp_path / "model").read_text() == "keep"


def test_convert_does_not_suggest_a_resume_it_lacks(tmp_path, own_tiny_dir, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("keep")
    assert main(["convert", str(out), "--to", "native", "--model", str(own_tiny_dir)]) == 2
    assert _one_line(capsys.readouterr().err) == \
        f"contextvec: error: {out} exists; pass --overwrite to replace it"


def test_a_pipe_input_is_read_once_like_standard_input(tmp_path, own_tiny_dir, capsys):
    """`embed <(zcat f.gz) out.h5` gives a pipe: its lines are copied first (they are read twice)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    done = threading.Event()

    def write():  # once, as a shell's <(...) does; later opens get an empty write, never a wait
        with open(fifo, "w", encoding="utf-8") as f:
            f.write("The bank was robbed .\nA river bank .\n")
        while not done.wait(30):
            with open(fifo, "wb"):
                pass

    threading.Thread(target=write, daemon=True).start()
    try:
        code, err = _embed(capsys, fifo, tmp_path / "out.h5", "--top", "--model", own_tiny_dir)
    finally:
        done.set()
    assert code == 0, err
    [want] = contextvec.load(own_tiny_dir).embed([["A", "river", "bank", "."]], layers="top")
    np.testing.assert_allclose(_read(tmp_path / "out.h5")["1"], want, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5", "pipe"]


def test_the_python_api_refuses_a_pipe_input_without_reading_it(tmp_path, own_tiny_dir):
    from contextvec.bulk import embed_to_hdf5

    os.mkfifo(tmp_path / "pipe")  # no writer: opening it waits for one
    encoder = contextvec.load(own_tiny_dir)

    done = threading.Event()

    def unblock():  # where the pipe is opened after all, an empty write ends each wait
        while not done.wait(30):
            with open(tmp_path / "pipe", "wb"):
                pass

    threading.Thread(target=unblock, daemon=True).start()
    try:
        with pytest.raises(ValueError, match="is a pipe, FIFO or device: its lines can be read only once"):
            embed_to_hdf5(encoder, tmp_path / "pipe", tmp_path / "out.h5")
    finally:
        done.set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_an_empty_save_model_path_is_refused_not_skipped(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train = _sst(tmp_path / "train.txt", 8)
    code = main(["train-task", "sst2", "--train", str(train), "--dev", str(train), "--no-contextual",
                 "--epochs", "1", "--hidden", "4", "--word-dim", "4", "--quiet", "--save-model", ""])
    assert code == 2 and _one_line(capsys.readouterr().err) == \
        "contextvec: error: the output path is empty; give a directory path"


def test_demo_workdir_is_reused_and_checked(tmp_path, own_tiny_dir, capsys):
    """--workdir is the demo's own folder: a second run replaces its two files (the demo has no
    --overwrite to pass); an empty path is refused, not taken for "a temporary folder"."""
    for _ in range(2):
        assert main(["demo", "--model", str(own_tiny_dir), "--workdir", str(tmp_path / "w")]) == 0
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["sentences.txt", "vectors.hdf5"]
    capsys.readouterr()
    assert main(["demo", "--model", str(own_tiny_dir), "--workdir", ""]) == 2
    assert "the output path is empty" in _one_line(capsys.readouterr().err)


def test_an_empty_input_path_is_named_as_such(tmp_path, own_tiny_dir, capsys):
    code, err = _embed(capsys, "", tmp_path / "out.h5", "--top", "--model", own_tiny_dir)
    assert code == 2 and _one_line(err) == "contextvec: error: the input path is empty; give a text file"


@pytest.mark.parametrize(("given", "message"), [
    ("", "the input path is empty; give text files"),
    ("-", "- (standard input) cannot be read more than once; give text files"),
    ("fifo", "fifo is a pipe, FIFO or device: it can be read only once, and a corpus is read more"),
])
def test_corpus_paths_that_cannot_be_read_again_are_named(tmp_path, monkeypatch, given, message):
    """train-bilm, train-bert, train-word-vectors, train-wordpiece, perplexity: a FIFO used to be
    "file not found", `-` too, and "" was ". is a directory"."""
    from contextvec.training.corpus import expand_paths

    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    with pytest.raises(ValueError) as caught:
        expand_paths([given])
    assert message in str(caught.value)


def test_predict_names_an_empty_input_path(tmp_path, capsys):
    assert main(["predict", str(tmp_path), "", "--quiet"]) == 2
    assert _one_line(capsys.readouterr().err) == \
        "contextvec: error: INPUT is an empty path; give a file, or - for standard input"


@pytest.mark.parametrize(("given", "message"), [
    ("", "--train is an empty path; give a file"),
    ("fifo", "--train fifo is a pipe, FIFO or device; copy it to a file first"),
])
def test_task_inputs_that_are_not_files_are_named(tmp_path, capsys, monkeypatch, given, message):
    """A FIFO used to be "an empty file" (its size is 0) and "" "is a directory"."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    dev = _sst(tmp_path / "dev.txt", 8)
    assert main(["train-task", "sst2", "--train", given, "--dev", str(dev), "--no-contextual",
                 "--quiet"]) == 2
    assert _one_line(capsys.readouterr().err) == f"contextvec: error: {message}"


@pytest.mark.parametrize(("given", "message"), [
    ("", "the output path is empty; give a directory path"),
    ("afile", "the output directory afile is a file"),
])
def test_a_feature_cache_folder_is_checked(tmp_path, own_tiny_dir, monkeypatch, given, message):
    """`--cache-dir ""` used to fill the current folder; a file gave "[Errno 17] File exists"."""
    from contextvec.features import FeatureSettings, cached_features

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep")
    with pytest.raises(OSError if given else ValueError) as caught:
        cached_features(contextvec.load(own_tiny_dir), [["a", "b"]], FeatureSettings(cache_dir=given),
                        progress=False)
    assert message in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
