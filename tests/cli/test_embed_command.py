"""`contextvec embed`: output layout, bad input, interruption and --resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec import bulk
from contextvec.bulk import BulkSettings, ResumeError, embed_to_hdf5
from contextvec.cli.main import main
from contextvec.encoders.base import Encoder

SENTENCES = [
    "The bank was robbed .",
    "We sat on the bank of the river .",
    "Zürich 日本語 🙂 naïve",
    "a",
    "x" * 80 + " long-token",
]


def _write(path, lines, end="\n"):
    path.write_text(end.join(lines) + end, encoding="utf-8")
    return path


def _read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f}


@pytest.mark.parametrize("mode", ["all", "top", "average"])
def test_layouts_match_the_python_api(tmp_path, tiny_dir, mode):
    src = _write(tmp_path / "in.txt", SENTENCES)
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), f"--{mode}", "--model", str(tiny_dir),
                 "--batch-size", "2", "--quiet"]) == 0
    data = _read(out)
    encoder = contextvec.load(tiny_dir)
    expected = encoder.embed(SENTENCES)
    assert sorted(data) == sorted([str(i) for i in range(len(SENTENCES))] + ["sentence_to_index"])
    for i, layers in enumerate(expected):
        want = {"all": layers, "top": layers[-1], "average": layers.mean(0)}[mode]
        assert data[str(i)].dtype == np.float32
        # Batches of 2 against one batch: the same sums in other orders; then 3 layers' mean.
        assert_reordered_close(data[str(i)], want, terms=elmo_terms(encoder.config) + 3)
    index = json.loads(data["sentence_to_index"][0])
    assert index == {s: str(i) for i, s in enumerate(SENTENCES)}
    assert not (tmp_path / "out.h5.parts").exists()


def test_bilm_tf_file_arguments_and_forget_sentences(tmp_path, tiny_dir):
    src = _write(tmp_path / "in.txt", SENTENCES[:2])
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--top", "--options-file",
                 str(tiny_dir / "options.json"), "--weight-file", str(tiny_dir / "weights.hdf5"),
                 "--forget-sentences", "--quiet"]) == 0
    assert sorted(_read(out)) == ["0", "1"]


def test_sentence_keys(tmp_path, tiny_dir):
    src = _write(tmp_path / "in.txt", SENTENCES[:3])
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--all", "--model", str(tiny_dir),
                 "--use-sentence-keys", "--quiet"]) == 0
    assert sorted(_read(out)) == sorted(SENTENCES[:3])


@pytest.mark.parametrize("lines, message", [
    (["a b", "a b"], "repeated sentence(s) at line(s) 2"),
    (["a / b", "c"], "cannot be HDF5 keys"),
])
def test_sentence_keys_refuse_duplicates_and_slashes(tmp_path, tiny_dir, capsys, lines, message):
    src = _write(tmp_path / "in.txt", lines)
    assert main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--model", str(tiny_dir),
                 "--use-sentence-keys", "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_empty_lines_are_refused_by_number_and_nothing_is_written(tmp_path, tiny_dir, capsys):
    src = _write(tmp_path / "in.txt", ["one", "", "two", " \t ", "three"])
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--all", "--model", str(tiny_dir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "2 empty or whitespace-only line(s) at line(s) 2, 4" in err
    assert not out.exists() and not (tmp_path / "out.h5.parts").exists()


def test_empty_lines_kept_as_zero_token_datasets(tmp_path, tiny_dir):
    src = _write(tmp_path / "in.txt", ["one", "", "two", "   "])
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--all", "--model", str(tiny_dir),
                 "--empty-lines", "keep", "--quiet"]) == 0
    data = _read(out)
    assert data["1"].shape == (3, 0, 32) and data["3"].shape == (3, 0, 32)
    assert data["0"].shape == (3, 1, 32) and data["2"].shape == (3, 1, 32)


def test_invalid_utf8(tmp_path, tiny_dir, capsys):
    src = tmp_path / "in.txt"
    src.write_bytes(b"good line\nbad \xff\xfe line\nalso good\n")
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--top", "--model", str(tiny_dir), "--quiet"]) == 2
    assert "not valid UTF-8 at line(s) 2" in capsys.readouterr().err
    assert main(["embed", str(src), str(out), "--top", "--model", str(tiny_dir),
                 "--invalid-utf8", "replace", "--quiet"]) == 0
    data = _read(out)
    assert data["1"].shape == (3, 32)  # "bad", "\ufffd\ufffd", "line"
    assert "bad \ufffd\ufffd line" in json.loads(data["sentence_to_index"][0])


def test_line_indices_never_shift(tmp_path, tiny_dir):
    # CRLF endings, a Unicode line separator and no final newline: still 3 lines, keys 0..2.
    src = tmp_path / "in.txt"
    src.write_bytes("first line\r\nsecond\u2028same line\r\nthird".encode())
    out = tmp_path / "out.h5"
    embed_to_hdf5(contextvec.load(tiny_dir), src, out, BulkSettings(layers="top", progress=False))
    data = _read(out)
    assert sorted(data) == ["0", "1", "2", "sentence_to_index"]
    assert data["1"].shape == (3, 32)  # "second", "same", "line": \u2028 is whitespace
    assert data["2"].shape == (1, 32)


def test_long_sentence_and_tokens(tmp_path, tiny_dir):
    encoder = contextvec.load(tiny_dir)
    long_sentence = " ".join(f"w{i}" for i in range(3000))
    src = _write(tmp_path / "in.txt", [long_sentence, "é" * 500, "short"])
    out = tmp_path / "out.h5"
    embed_to_hdf5(encoder, src, out, BulkSettings(max_tokens=1000, progress=False))
    data = _read(out)
    assert data["0"].shape == (3, 3000, 32)
    alone = encoder.embed([long_sentence])[0]
    terms = elmo_terms(encoder.config)  # other batches: the same sums in other orders
    assert_reordered_close(data["0"], alone, terms=terms)
    assert_reordered_close(data["1"], encoder.embed(["é" * 24])[0], terms=terms)


class _Interrupt(Exception):
    pass


def test_resume_computes_only_what_is_missing(tmp_path, tiny_dir, monkeypatch):
    encoder = contextvec.load(tiny_dir)
    lines = [f"sentence number {i} " + "word " * (i % 7) for i in range(50)]
    src = _write(tmp_path / "in.txt", lines)
    reference = tmp_path / "reference.h5"
    embed_to_hdf5(encoder, src, reference, BulkSettings(chunk_lines=8, progress=False))

    calls: list[int] = []
    interrupt_at = [3]
    real = Encoder.embed_batches

    def flaky(self, sentences, *args):
        calls.append(len(sentences))
        if len(calls) == interrupt_at[0]:
            raise _Interrupt
        yield from real(self, sentences, *args)

    monkeypatch.setattr(Encoder, "embed_batches", flaky)
    out = tmp_path / "out.h5"
    with pytest.raises(_Interrupt):
        embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, progress=False))
    assert not out.exists()
    assert sorted(p.name for p in (tmp_path / "out.h5.parts").glob("shard-*")) == [
        "shard-000000.h5", "shard-000001.h5"]
    with pytest.raises(ResumeError, match="--resume"):
        embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, progress=False))

    calls.clear()
    interrupt_at[0] = 0
    # A resumed run keeps the first run's chunking even if asked for another.
    embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=100, resume=True, progress=False))
    assert calls == [8, 8, 8, 8, 2]  # chunks 2..6 only
    got, want = _read(out), _read(reference)
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    assert not (tmp_path / "out.h5.parts").exists()
    # Resuming a finished run is a no-op.
    calls.clear()
    embed_to_hdf5(encoder, src, out, BulkSettings(resume=True, progress=False))
    assert calls == []


def test_resume_refuses_a_changed_input_or_model(tmp_path, tiny_dir, monkeypatch):
    encoder = contextvec.load(tiny_dir)
    src = _write(tmp_path / "in.txt", [f"line {i}" for i in range(20)])
    monkeypatch.setattr(bulk, "merge_shards", lambda *a, **k: (_ for _ in ()).throw(_Interrupt()))
    with pytest.raises(_Interrupt):
        embed_to_hdf5(encoder, src, tmp_path / "o.h5", BulkSettings(chunk_lines=8, progress=False))
    _write(src, [f"line {i}" for i in range(21)])
    with pytest.raises(ResumeError, match="input_sha256"):
        embed_to_hdf5(encoder, src, tmp_path / "o.h5", BulkSettings(resume=True, progress=False))
    _write(src, [f"line {i}" for i in range(20)])
    with pytest.raises(ResumeError, match="model"):
        other = contextvec.load(tiny_dir)
        other.bilm.layers[0].bias.data += 1
        embed_to_hdf5(other, src, tmp_path / "o.h5", BulkSettings(resume=True, progress=False))


def test_bad_model_files_give_clear_cli_errors(tmp_path, tiny_dir, capsys):
    src = _write(tmp_path / "in.txt", ["a"])
    broken = tmp_path / "weights.hdf5"
    broken.write_bytes((tiny_dir / "weights.hdf5").read_bytes()[:5000])
    code = main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--options-file",
                 str(tiny_dir / "options.json"), "--weight-file", str(broken), "--quiet"])
    assert code == 2
    assert "truncated" in capsys.readouterr().err



def test_bundled_model_is_the_default(tmp_path, monkeypatch, capsys):
    src = _write(tmp_path / "in.txt", ["The bank was robbed .", "We sat on the river bank ."])
    assert main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--quiet"]) == 0
    default = contextvec.load()
    named = contextvec.load("elmo-en-small")
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["0"].shape == (3, 5, default.output_dim)
        expected = named.embed([["The", "bank", "was", "robbed", "."]])[0]
        assert_reordered_close(f["0"][()], expected, terms=elmo_terms(named.config))
    # A broken installation says what is missing instead of failing obscurely.
    monkeypatch.setattr(contextvec.resolve, "bundled_models", lambda: {})
    assert main(["embed", str(src), str(tmp_path / "p.h5"), "--all", "--quiet"]) == 2
    assert "bundled model elmo-en-small is missing" in capsys.readouterr().err


@pytest.mark.slow
def test_hard_kill_then_resume_loses_nothing(tmp_path, tiny_dir):
    """SIGKILL a real `contextvec embed` process mid-run; --resume completes it exactly."""
    lines = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(1 + i % 23)) for i in range(6000)]
    src = _write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "contextvec.cli.main", "embed", str(src), str(out), "--top",
           "--model", str(tiny_dir), "--chunk-lines", "100", "--batch-size", "16", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    parts = tmp_path / "out.h5.parts"
    deadline = time.monotonic() + 120
    while not (parts / "shard-000002.h5").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no shard appeared"
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    shards = sorted(parts.glob("shard-*.h5"))
    assert 3 <= len(shards) < 60
    assert subprocess.run([*cmd, "--resume"], capture_output=True).returncode == 0
    assert not parts.exists()
    encoder = contextvec.load(tiny_dir)
    data = _read(out)
    assert len(data) == 6001
    for i in (0, 150, 299, 5999):
        assert_reordered_close(data[str(i)], encoder.embed([lines[i]])[0][-1],
                               terms=elmo_terms(encoder.config))


def test_demo_runs_on_the_bundled_model(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "elmo-en-small (bundled)" in out
    table = out.split("2. cosine similarity")[1].split("\n")
    char_cnn = next(line for line in table if line.strip().startswith("0 char-CNN")).split()[2:]
    assert char_cnn == ["1.000"] * 3  # the token layer is context-free
    assert "[bank]" in out and "[play]" in out  # nearest contexts were listed


def test_demo_counts_the_training_of_fine_tuning_bases(tmp_path, monkeypatch, capsys):
    from contextvec.api import DEFAULT_MODEL
    from contextvec.cli import demo
    from contextvec.training.loop import TRAINING_RECORD

    record = {"steps": 5, "tokens_seen": 50, "train_seconds": 1800.0,
              "init": {"model": "base", "steps": 1000, "tokens_seen": 2000, "train_seconds": 3600.0}}
    (tmp_path / TRAINING_RECORD).write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.setattr(demo, "bundled_models", lambda: {DEFAULT_MODEL: tmp_path})  # its record only
    assert main(["demo"]) == 0
    assert "biLM trained 1,005 steps on 2,050 tokens of English books and Wikipedia (1.5 h on CPU)" \
        in capsys.readouterr().out


def test_a_model_spec_is_loaded_only_after_the_output_and_input_pass(tmp_path, tiny_dir):
    from contextvec.api import ModelNotFoundError, ModelSpec
    from contextvec.io.text_lines import InputError

    src = _write(tmp_path / "in.txt", ["the bank was robbed .", "we sat on the bank"])
    settings = BulkSettings(layers="top", progress=False)
    loaded = embed_to_hdf5(contextvec.load(tiny_dir), src, tmp_path / "loaded.h5", settings)
    named = embed_to_hdf5(ModelSpec(str(tiny_dir), threads=None), src, tmp_path / "named.h5", settings)
    want, got = _read(loaded), _read(named)
    assert sorted(got) == sorted(want)
    assert all(got[key].tobytes() == want[key].tobytes() for key in want if key != "sentence_to_index")

    missing = ModelSpec(str(tmp_path / "no-model"), threads=None)
    with pytest.raises(FileExistsError, match="exists; pass --overwrite"):  # not ModelNotFoundError
        embed_to_hdf5(missing, src, loaded, settings)
    with pytest.raises(InputError, match="empty"):
        embed_to_hdf5(missing, _write(tmp_path / "gap.txt", ["a", ""]), tmp_path / "gap.h5", settings)
    with pytest.raises(ModelNotFoundError):
        embed_to_hdf5(missing, src, tmp_path / "new.h5", settings)
    assert not (tmp_path / "new.h5").exists() and not (tmp_path / "gap.h5").exists()
