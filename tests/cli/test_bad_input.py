"""The bad-input table (docs/bad-input.md), rows for `embed`, `demo`, the CLI and the Python API.

Every test here runs on a clone alone: the model is ``own_tiny_dir`` (seeded random weights) or
the bundled one. Commands are run as a user runs them, through ``main([...])``: a refused input
is exit code 2 and one line on stderr that says what is wrong.
"""

from __future__ import annotations

import errno
import gzip

import h5py
import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec import bulk
from contextvec.cli.main import main
from contextvec.encoders.bilm.config import PRESETS
from contextvec.encoders.cove import MTLSTM, CoveEncoder, MTLSTMConfig

TINY_TERMS = elmo_terms(PRESETS["tiny"])  # own_tiny_dir's model


def _write(path, lines, end="\n", encoding="utf-8"):
    path.write_bytes((end.join(lines) + end).encode(encoding))
    return path


def _embed(capsys, *args):
    code = main(["embed", *map(str, args), "--quiet"])
    err = capsys.readouterr().err.strip()
    return code, err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture()
def src(tmp_path):
    return _write(tmp_path / "in.txt", ["The bank was robbed .", "A river bank ."])


def _read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f if k != "sentence_to_index"}


# -- outputs ----------------------------------------------------------------------------------

def test_existing_output_is_refused_without_overwrite(tmp_path, src, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    out.write_text("precious")
    code, err = _embed(capsys, src, out, "--all", "--model", own_tiny_dir)
    assert code == 2 and "exists; pass --overwrite" in _one_line(err)
    assert out.read_text() == "precious"
    assert _embed(capsys, src, out, "--all", "--model", own_tiny_dir, "--overwrite")[0] == 0
    assert sorted(_read(out)) == ["0", "1"]


def test_output_that_is_the_input_is_refused_also_through_a_link(tmp_path, src, own_tiny_dir, capsys):
    before = src.read_bytes()
    link = tmp_path / "link.h5"
    link.symlink_to(src)
    for out in (src, link):
        code, err = _embed(capsys, src, out, "--all", "--model", own_tiny_dir, "--overwrite")
        assert code == 2 and "is the input" in _one_line(err)
    assert src.read_bytes() == before


def test_directory_as_input_or_output(tmp_path, src, own_tiny_dir, capsys):
    code, err = _embed(capsys, tmp_path, tmp_path / "out.h5", "--all", "--model", own_tiny_dir)
    assert code == 2 and "is a directory" in _one_line(err)
    code, err = _embed(capsys, src, tmp_path, "--all", "--model", own_tiny_dir)
    assert code == 2 and "directory" in _one_line(err)


def test_output_in_a_missing_folder(tmp_path, src, own_tiny_dir, capsys):
    code, err = _embed(capsys, src, tmp_path / "nope" / "out.h5", "--all", "--model", own_tiny_dir)
    assert code == 2 and "folder of the output" in _one_line(err)
    assert not (tmp_path / "nope").exists()


def test_disk_full_leaves_no_output_and_a_resumable_run(tmp_path, src, own_tiny_dir, monkeypatch, capsys):
    out = tmp_path / "out.h5"
    real = bulk.merge_shards

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bulk, "merge_shards", full)
    code, err = _embed(capsys, src, out, "--all", "--model", own_tiny_dir)
    assert code == 2 and "No space left on device" in _one_line(err)
    assert not out.exists() and not list(tmp_path.glob(".out.h5.tmp*"))
    monkeypatch.setattr(bulk, "merge_shards", real)
    assert _embed(capsys, src, out, "--all", "--model", own_tiny_dir, "--resume")[0] == 0
    assert sorted(_read(out)) == ["0", "1"]


# -- resume checks what it resumes ------------------------------------------------------------

def test_resume_of_a_finished_output_checks_input_model_and_settings(tmp_path, src, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    assert _embed(capsys, src, out, "--all", "--model", own_tiny_dir)[0] == 0
    first = _read(out)
    # The same run again: nothing to do, the file is kept.
    assert _embed(capsys, src, out, "--all", "--model", own_tiny_dir, "--resume")[0] == 0
    other = _write(tmp_path / "other.txt", ["Completely different words here ."])
    for args, differs in (
        ((other, out, "--all", "--model", own_tiny_dir), "input_sha256"),
        ((src, out, "--top", "--model", own_tiny_dir), "layers"),
        ((src, out, "--all"), "model"),  # the bundled model
        ((src, out, "--all", "--model", own_tiny_dir, "--pool", "mean"), "pool"),
    ):
        code, err = _embed(capsys, *args, "--resume")
        assert code == 2 and differs in _one_line(err), err
    assert {k: v.tolist() for k, v in _read(out).items()} == {k: v.tolist() for k, v in first.items()}


def test_resume_of_an_output_without_a_record_is_refused(tmp_path, src, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    with h5py.File(out, "w") as f:
        f.create_dataset("0", data=np.zeros(3))
    code, err = _embed(capsys, src, out, "--all", "--model", own_tiny_dir, "--resume")
    assert code == 2 and "does not record how it was made" in _one_line(err)


# -- numeric options and devices --------------------------------------------------------------

@pytest.mark.parametrize("option, value", [
    ("--chunk-lines", "0"), ("--batch-size", "-1"), ("--max-tokens", "0"), ("--threads", "0"),
    ("--chunk-lines", "x"),
])
def test_out_of_range_options_are_refused_and_leave_nothing(tmp_path, src, own_tiny_dir, capsys,
                                                            option, value):
    out = tmp_path / "out.h5"
    code, err = _embed(capsys, src, out, "--all", "--model", own_tiny_dir, option, value)
    wanted = "expected an integer in 1..4096" if option == "--threads" else "expected an integer > 0"
    assert code == 2 and option in _one_line(err) and wanted in err
    assert not out.exists() and not (tmp_path / "out.h5.parts").exists()
    assert _embed(capsys, src, out, "--all", "--model", own_tiny_dir)[0] == 0


def test_python_api_checks_the_same_ranges(tmp_path, src, own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    with pytest.raises(ValueError, match="chunk_lines must be an integer >= 1"):
        bulk.embed_to_hdf5(encoder, src, tmp_path / "out.h5", bulk.BulkSettings(chunk_lines=0))
    assert not (tmp_path / "out.h5.parts").exists()


def test_bulk_settings_check_every_mode_once_and_record_plain_values(tmp_path):
    from contextvec.distributed import ModelSpec, RaySettings
    from contextvec.encoders.outputs import Layers, Pooling
    from contextvec.encoders.precision import Precision
    from contextvec.io.text_lines import EmptyLines

    for options, message in (({"layers": "last"}, "layers must be one of all, top, average, not 'last'"),
                             ({"pool": "sum"}, "pool must be one of mean, max, first or None"),
                             ({"empty_lines": "drop"}, "empty_lines must be one of error, keep"),
                             ({"invalid_utf8": "ignore"}, "invalid_utf8 must be one of error, replace"),
                             ({"batch_size": True}, "batch_size must be an integer >= 1"),
                             ({"max_tokens": 0}, "max_tokens must be an integer >= 1")):
        with pytest.raises(ValueError, match=message):
            bulk.BulkSettings(**options)
    settings = bulk.BulkSettings(layers="top", pool="max", empty_lines="keep")
    assert (settings.layers, settings.pool) == (Layers.TOP, Pooling.MAX)
    assert settings.empty_lines is EmptyLines.KEEP
    assert settings == bulk.BulkSettings(layers=Layers.TOP, pool=Pooling.MAX, empty_lines=EmptyLines.KEEP)
    record = settings.record()  # what a resume compares: the spellings, as earlier runs wrote them
    assert record["layers"] == "top" and type(record["layers"]) is str and record["pool"] == "max"
    with pytest.raises(ValueError, match="workers must be an integer >= 1, not 0"):
        RaySettings(workers=0)
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, not 'fp16'"):
        ModelSpec(precision="fp16")
    assert ModelSpec(precision="int8").precision is Precision.INT8
    (tmp_path / "in.txt").write_text("a b\n\n", encoding="utf-8")  # it used to be kept
    with pytest.raises(ValueError, match="empty_lines must be one of error, keep, not 'drop'"):
        contextvec.embed_file(tmp_path / "in.txt", empty_lines="drop")


@pytest.mark.parametrize("device, message", [("cuda", "no usable CUDA"), ("gpu", "unknown device")])
def test_unusable_device_is_one_line(tmp_path, src, own_tiny_dir, capsys, device, message):
    if device == "cuda" and __import__("torch").cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, err = _embed(capsys, src, tmp_path / "o.h5", "--all", "--model", own_tiny_dir, "--device", device)
    assert code == 2 and message in _one_line(err)


# -- text input -------------------------------------------------------------------------------

def test_byte_order_mark_is_dropped(tmp_path, own_tiny_dir, capsys):
    plain = _write(tmp_path / "plain.txt", ["bank robbed ."])
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    for name in ("plain", "bom"):
        assert _embed(capsys, tmp_path / f"{name}.txt", tmp_path / f"{name}.h5", "--all",
                      "--model", own_tiny_dir)[0] == 0
    np.testing.assert_array_equal(_read(tmp_path / "plain.h5")["0"], _read(tmp_path / "bom.h5")["0"])
    with h5py.File(tmp_path / "bom.h5") as f:
        assert "bank robbed ." in f["sentence_to_index"][0].decode()
    vectors = contextvec.embed_file(bom, own_tiny_dir)
    # (Another batching than the command's: the same sums in other orders.)
    assert_reordered_close(vectors[0], _read(tmp_path / "plain.h5")["0"], terms=TINY_TERMS)


def test_crlf_lines_equal_lf_lines(tmp_path, own_tiny_dir, capsys):
    _write(tmp_path / "lf.txt", ["a b", "c d e"])
    _write(tmp_path / "crlf.txt", ["a b", "c d e"], end="\r\n")
    for name in ("lf", "crlf"):
        assert _embed(capsys, tmp_path / f"{name}.txt", tmp_path / f"{name}.h5", "--top",
                      "--model", own_tiny_dir)[0] == 0
    lf, crlf = _read(tmp_path / "lf.h5"), _read(tmp_path / "crlf.h5")
    assert all(np.array_equal(lf[k], crlf[k]) for k in lf)


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"\n  \n", "empty or whitespace-only line(s) at line(s) 1, 2"),
])
def test_empty_and_whitespace_only_files(tmp_path, own_tiny_dir, capsys, content, message):
    src = tmp_path / "in.txt"
    src.write_bytes(content)
    code, err = _embed(capsys, src, tmp_path / "o.h5", "--all", "--model", own_tiny_dir)
    assert code == 2 and message in _one_line(err)


def test_truncated_gzip_input_is_named(tmp_path, own_tiny_dir, capsys):
    src = tmp_path / "in.txt.gz"
    src.write_bytes(gzip.compress(("a b c\n" * 2000).encode())[:-40])
    code, err = _embed(capsys, src, tmp_path / "o.h5", "--all", "--model", own_tiny_dir)
    assert code == 2 and "truncated or corrupt gzip" in _one_line(err)


def test_gzip_input_equals_plain(tmp_path, own_tiny_dir, capsys):
    _write(tmp_path / "in.txt", ["a b", "c"])
    (tmp_path / "in.txt.gz").write_bytes(gzip.compress((tmp_path / "in.txt").read_bytes()))
    for name in ("in.txt", "in.txt.gz"):
        assert _embed(capsys, tmp_path / name, tmp_path / f"{name}.h5", "--all",
                      "--model", own_tiny_dir)[0] == 0
    a, b = _read(tmp_path / "in.txt.h5"), _read(tmp_path / "in.txt.gz.h5")
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_control_and_zero_width_characters_stay_in_their_token(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    zero_width, control = "bank\u200b", "bank\x07"
    vectors = encoder.embed([["the", zero_width], ["the", control], ["the", "bank"]])
    assert all(v.shape[1] == 2 for v in vectors)
    # They are different byte strings, so different character ids and vectors, never dropped.
    assert not np.allclose(vectors[0][0, 1], vectors[2][0, 1])
    assert not np.allclose(vectors[1][0, 1], vectors[2][0, 1])


def test_tokens_over_50_characters_are_cut_to_48_bytes(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    long_a, long_b = "x" * 48 + "a" * 30, "x" * 48 + "b" * 30
    a, b = encoder.embed([[long_a], [long_b]])
    np.testing.assert_array_equal(a[0], b[0])  # ELMo's char-CNN sees 48 bytes (bilm-tf, allennlp)


def test_a_10k_token_sentence(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    [vectors] = encoder.embed([["word"] * 10_000])
    assert vectors.shape == (3, 10_000, encoder.output_dim) and np.isfinite(vectors).all()


def test_stdin_input(tmp_path, src, own_tiny_dir, monkeypatch, capsys):
    out = tmp_path / "out.h5"
    with open(src, "rb") as f:
        monkeypatch.setattr("sys.stdin", type("In", (), {"buffer": f})())
        assert main(["embed", "-", str(out), "--all", "--model", str(own_tiny_dir), "--quiet"]) == 0
    [want] = contextvec.load(own_tiny_dir).embed([src.read_text().split("\n")[1]])
    assert_reordered_close(_read(out)["1"], want, terms=TINY_TERMS)


# -- Python API -------------------------------------------------------------------------------

def test_a_bare_string_is_not_a_list_of_sentences(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    with pytest.raises(TypeError, match=r"not a single str; for one sentence pass \['a sentence'\]"):
        encoder.embed("a sentence")
    with pytest.raises(TypeError, match="not bytes"):
        encoder.embed([b"a sentence"])
    with pytest.raises(TypeError, match="tokens must be str"):
        encoder.embed([["a", 3]])


@pytest.mark.parametrize("kind", ["elmo", "bert", "cove"])
def test_forward_refuses_a_bare_string_as_embed_does(kind, own_tiny_dir, own_tiny_bert_dir):
    """``forward("a b")`` read the string as three one-character sentences."""
    if kind == "cove":
        encoder = CoveEncoder(MTLSTM(MTLSTMConfig(input_dim=4, hidden_size=2), ["a"], torch.zeros(1, 4)))
    else:
        encoder = contextvec.load(own_tiny_dir if kind == "elmo" else own_tiny_bert_dir)
    for call in (encoder, encoder.forward):
        with pytest.raises(TypeError, match=r"not a single str; for one sentence pass \['a b'\]"):
            call("a b")
    layers, mask = encoder([["a", "b"]])
    assert mask.tolist() == [[True, True]] and layers.shape[:3] == (encoder.num_layers, 1, 2)


def test_pooling_and_layer_selection_in_python(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    [full] = encoder.embed(["a b c"])
    [mean] = encoder.embed(["a b c"], layers="top", pool="mean")
    [first] = encoder.embed(["a b c"], layers="all", pool="first")
    [empty] = encoder.embed([""], layers="average", pool="max")
    assert_reordered_close(mean, full[-1].mean(0), terms=3)  # the same vectors; a mean of 3
    np.testing.assert_array_equal(first, full[:, 0])
    assert empty.shape == (encoder.output_dim,) and not empty.any()
    with pytest.raises(ValueError, match="pool must be one of"):
        encoder.embed(["a"], pool="sum")


def test_pool_in_the_hdf5_output(tmp_path, src, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    assert _embed(capsys, src, out, "--average", "--pool", "max", "--model", own_tiny_dir)[0] == 0
    encoder = contextvec.load(own_tiny_dir)
    want = encoder.embed(src.read_text().splitlines(), layers="average", pool="max")
    data = _read(out)
    assert data["0"].shape == (encoder.output_dim,)
    assert_reordered_close(data["1"], want[1], terms=TINY_TERMS + 3)  # other batches; 3 layers' mean


def test_missing_model_is_one_line(tmp_path, src, capsys):
    code, err = _embed(capsys, src, tmp_path / "o.h5", "--all", "--model", tmp_path / "nope")
    assert code == 2 and "no model at" in _one_line(err)
    assert "bundled models: cove-en-multi30k, elmo-en-small" in err


def test_unknown_command_and_help_are_fast_paths(capsys):
    assert main(["nosuch"]) == 2
    assert "invalid choice" in _one_line(capsys.readouterr().err)
    assert main(["--version"]) == 0


def test_every_command_module_uses_the_help_of_the_command_table():
    import importlib

    from contextvec.cli.main import COMMANDS

    for name, (module, help_text) in COMMANDS.items():
        try:
            loaded = importlib.import_module(f"contextvec.cli.{module}")
        except ImportError as e:  # an optional extra (the server) that is not installed
            pytest.importorskip(e.name or module)
            raise
        helps = {v for k, v in vars(loaded).items() if k.endswith("HELP") and isinstance(v, str)}
        assert help_text in helps, name


def test_help_does_not_import_torch():
    code = ("import sys; from contextvec.cli.main import main\n"
            "try: main(['--help'])\nexcept SystemExit: pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'")
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_option_with_a_default_says_it_in_its_help():
    """And has help at all (`convert --to`, `serve --log-level` had none); a default of 0 is shown
    (0 == False hid `translate --length-penalty`'s); a --no-X flag does not say "default: True"."""
    import argparse

    from contextvec.cli.main import COMMANDS, build_parser

    silent = []
    for name in COMMANDS:
        try:
            parser = build_parser(name)
        except ImportError:  # an optional extra that is not installed
            continue
        stack = [parser]
        while stack:
            current = stack.pop()
            formatter = current._get_formatter()
            for action in current._actions:
                if isinstance(action, argparse._SubParsersAction):
                    stack.extend(p for n, p in action.choices.items() if n == name or current is not parser)
                elif not action.option_strings or isinstance(action, argparse._HelpAction):
                    continue
                elif (not action.help or "default: True" in formatter._get_help_string(action)
                      or (action.default not in (None, argparse.SUPPRESS) and action.default is not False
                          and "default" not in formatter._get_help_string(action).lower())):
                    silent.append(f"{current.prog} {action.option_strings[-1]}")
    assert silent == []


def test_demo_words_follow_the_model_family(minilm_dir, capsys):
    assert main(["demo", "--model", str(minilm_dir)]) == 0
    out = capsys.readouterr().out
    assert "char-CNN" not in out and "biLSTM" not in out
    assert "0 embeddings" in out and "6 transformer-6" in out
    assert "adds the word's position" in out
