"""`contextvec embed` against the machine: a disk that refuses writes, a shard torn by a power
loss, stale temporary files, sentence keys HDF5 cannot hold, Ctrl-C, and progress."""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import contextvec
from contextvec import bulk
from contextvec.bulk import BulkSettings, bulk_engine, embed_chunks, embed_to_hdf5
from contextvec.cli.main import main
from contextvec.encoders.base import Encoder


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f}


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


@pytest.fixture(scope="module")
def encoder(own_tiny_dir):
    return contextvec.load(own_tiny_dir)


LINES = [f"sentence number {i} " + "word " * (i % 7) for i in range(50)]


def _limited(size: int):
    def limit() -> None:  # in the child: a write past `size` bytes fails with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return limit


@pytest.mark.slow
def test_a_disk_that_refuses_a_shard_is_one_line_and_resume_continues(tmp_path, own_tiny_dir, capsys):
    # The first chunk's shard fits under the limit, the second's (long sentences) does not.
    src = _write(tmp_path / "in.txt", ["a"] * 4 + [" ".join(["word"] * 60)] * 4)
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "contextvec.cli.main", "embed", str(src), str(out), "--top",
           "--model", str(own_tiny_dir), "--chunk-lines", "4", "--quiet"]
    run = subprocess.run(cmd, preexec_fn=_limited(12_000), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"contextvec: error: [Errno {errno.EFBIG}] cannot write "
                               f"{out}.parts/shard-000001.h5: ")
    assert "the 1 finished chunk(s) of 2 are kept" in lines[0] and "--resume" in lines[0]
    assert sorted(os.listdir(f"{out}.parts")) == ["manifest.json", "shard-000000.h5"]
    assert not out.exists()
    # Space is back: the resume computes the missing chunk only.
    assert main([*cmd[3:], "--resume"]) == 0
    assert "4 of 8 lines already embedded (1 of 2 chunks)" in capsys.readouterr().err
    assert sorted(_read(out)) == sorted([*map(str, range(8)), "sentence_to_index"])


def test_a_disk_that_refuses_the_merge_keeps_the_shards(tmp_path, encoder, monkeypatch, capsys):
    src = _write(tmp_path / "in.txt", LINES[:20])
    out = tmp_path / "out.h5"
    real = os.write

    def full(fd, data):  # the disk fills up while the output is written
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".out.h5.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught:
        embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, progress=False))
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value).startswith(f"[Errno {errno.ENOSPC}] cannot write {out}: No space left")
    assert "the 3 finished chunks are kept" in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.h5.parts"]
    embed_to_hdf5(encoder, src, out, BulkSettings(resume=True, progress=False))
    assert "20 of 20 lines already embedded (3 of 3 chunks)" in capsys.readouterr().err
    assert sorted(_read(out)) == sorted([*map(str, range(20)), "sentence_to_index"])


def _interrupted_run(encoder, src, out, monkeypatch, shards: int = 2) -> None:
    """A run stopped (as by a crash) once ``shards`` shards are written."""
    real = bulk.write_shard

    def write(path, items):
        if path.name == f"shard-{shards:06d}.h5":
            raise SystemExit("crash")
        real(path, items)

    monkeypatch.setattr(bulk, "write_shard", write)
    with pytest.raises(SystemExit):
        embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, progress=False))
    monkeypatch.setattr(bulk, "write_shard", real)


def _count_chunks(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = Encoder.embed_batches

    def counted(self, sentences, *args):
        calls.append(len(sentences))
        yield from real(self, sentences, *args)

    monkeypatch.setattr(Encoder, "embed_batches", counted)
    return calls


def test_a_torn_shard_is_named_and_computed_again_alone(tmp_path, encoder, monkeypatch, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    whole = embed_to_hdf5(encoder, src, tmp_path / "whole.h5", BulkSettings(chunk_lines=8, progress=False))
    want = _read(whole)
    out = tmp_path / "out.h5"
    _interrupted_run(encoder, src, out, monkeypatch, shards=3)
    torn = tmp_path / "out.h5.parts" / "shard-000002.h5"
    torn.write_bytes(torn.read_bytes()[:1000])  # what a power loss before any flush may leave
    calls = _count_chunks(monkeypatch)
    embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, resume=True, progress=False))
    err = capsys.readouterr().err
    assert f"contextvec: {torn} is damaged: it cannot be read (" in err
    assert "computing its 8 lines again" in err
    assert "resuming" in err and "16 of 50 lines already embedded (2 of 7 chunks)" in err
    assert calls == [8, 8, 8, 8, 2]  # the torn chunk and the four never written
    _assert_same(_read(out), want)


def test_a_shard_with_missing_datasets_is_computed_again(tmp_path, encoder, monkeypatch, capsys):
    src = _write(tmp_path / "in.txt", LINES[:20])
    out = tmp_path / "out.h5"
    _interrupted_run(encoder, src, out, monkeypatch)
    with h5py.File(tmp_path / "out.h5.parts" / "shard-000001.h5", "a") as f:
        del f["9"]
    calls = _count_chunks(monkeypatch)
    embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, resume=True, progress=False))
    assert "it holds 7 datasets, not 8; computing its 8 lines again" in capsys.readouterr().err
    assert calls == [8, 4]
    assert sorted(_read(out)) == sorted([*map(str, range(20)), "sentence_to_index"])


def test_temporary_files_of_a_dead_run_are_cleared_by_the_next(tmp_path, encoder, monkeypatch):
    src = _write(tmp_path / "in.txt", LINES[:20])
    out = tmp_path / "out.h5"
    _interrupted_run(encoder, src, out, monkeypatch)
    parts = tmp_path / "out.h5.parts"
    for path in (parts / ".shard-000002.h5.tmp99999", tmp_path / ".out.h5.tmp99999",
                 tmp_path / ".other.h5.tmp99999"):
        path.write_bytes(b"half a file")
    seen: list[list[str]] = []
    monkeypatch.setattr(bulk, "merge_shards", lambda parts, *args, **kwargs: seen.append(
        sorted(os.listdir(parts.path))))
    embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, resume=True, progress=False))
    assert seen == [["manifest.json", "shard-000000.h5", "shard-000001.h5", "shard-000002.h5"]]
    assert sorted(os.listdir(tmp_path)) == [".other.h5.tmp99999", "in.txt"]


@pytest.mark.parametrize("lines, bad", [
    (["a b", "c\0d e", "c", "f"], "2"),
    (["a b", " ", "c d"], "2"),
])
def test_sentence_keys_hdf5_cannot_hold_are_refused_before_any_compute(tmp_path, own_tiny_dir, capsys,
                                                                        monkeypatch, lines, bad):
    src = _write(tmp_path / "in.txt", lines)
    calls = _count_chunks(monkeypatch)
    code = main(["embed", str(src), str(tmp_path / "out.h5"), "--all", "--model", str(own_tiny_dir),
                 "--use-sentence-keys", "--empty-lines", "keep", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == ("contextvec: error: 1 sentence(s) that cannot be HDF5 keys ('/' or a NUL "
                   f"inside, '.', or empty) at line(s) {bad} (1-based; output key = line - 1); use "
                   "line-index keys instead of --use-sentence-keys")
    assert calls == []
    assert os.listdir(tmp_path) == ["in.txt"]


def test_ctrl_c_keeps_every_finished_chunk_and_resume_says_so(tmp_path, encoder, monkeypatch, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    settings = BulkSettings(chunk_lines=8, batch_size=2, progress=False)
    want = _read(embed_to_hdf5(encoder, src, tmp_path / "whole.h5", settings))
    out = tmp_path / "out.h5"
    real_write, real_forward = bulk.write_shard, type(encoder).forward
    signalled = threading.Event()
    after: list[int] = []

    def write(path, items):
        if path.name == "shard-000001.h5":  # the engine runs the third chunk meanwhile
            signalled.set()
            os.kill(os.getpid(), signal.SIGINT)
        real_write(path, items)

    def forward(self, sentences):
        if signalled.is_set():
            after.append(len(sentences))
        return real_forward(self, sentences)

    monkeypatch.setattr(bulk, "write_shard", write)
    monkeypatch.setattr(type(encoder), "forward", forward)
    handler = signal.getsignal(signal.SIGINT)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        embed_to_hdf5(encoder, src, out, settings)
    assert time.monotonic() - start < 30
    assert len(after) <= 1  # the chunk in flight stopped at its next length batch
    err = capsys.readouterr().err
    assert err == (f"contextvec: interrupted: keeping the 2 finished chunk(s) of 7 in {out}.parts and "
                   "dropping the one in flight; rerun with --resume to finish\n")
    assert sorted(p.name for p in (tmp_path / "out.h5.parts").glob("shard-*")) == [
        "shard-000000.h5", "shard-000001.h5"]
    assert signal.getsignal(signal.SIGINT) is handler
    monkeypatch.undo()
    embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=8, batch_size=2, resume=True))
    err = capsys.readouterr().err
    assert f"contextvec: resuming {out}: 16 of 50 lines already embedded (2 of 7 chunks)" in err
    assert re.search(r"embed:  32%\|[^|]*\| 16/50 \[", err)  # the bar starts where the run stopped
    assert "merge" not in err  # a merge this short shows no bar
    _assert_same(_read(out), want)


def test_progress_moves_with_each_length_batch_on_the_engine_thread(encoder):
    chunks = [(0, [(i, text) for i, text in enumerate(LINES[:10])])]
    seen: list[tuple[str, int, int]] = []
    with bulk_engine(encoder) as engine:
        [(_, _, items)] = embed_chunks(engine, chunks, BulkSettings(batch_size=3), progress=lambda n, tokens:
                                       seen.append((threading.current_thread().name, n, tokens)))
    assert len(items) == 10
    assert len(seen) == 10  # one call per sentence, as its batch ends: the bar moves within a chunk
    assert {name for name, _, _ in seen} == {"contextvec-batcher"}
    assert sorted(tokens for _, _, tokens in seen) == sorted(len(line.split()) for line in LINES[:10])


@pytest.mark.slow
def test_ctrl_c_in_the_command_is_one_line_at_once_and_exit_130(tmp_path, capsys):
    """SIGINT to a real `contextvec embed` on the bundled model once a shard is written; then
    --resume reuses what it kept."""
    src = _write(tmp_path / "in.txt", [" ".join(f"w{(i * 7 + j) % 97}" for j in range(1 + i % 23))
                                       for i in range(160)])
    out = tmp_path / "out.h5"
    args = ["embed", str(src), str(out), "--top", "--chunk-lines", "16", "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "contextvec.cli.main", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parts = tmp_path / "out.h5.parts"
    deadline = time.monotonic() + 300
    while not (parts / "shard-000000.h5").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no shard appeared"
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert time.monotonic() - start < 10
    assert proc.returncode == 130
    said = re.search(r"contextvec: interrupted: keeping the (\d+) finished chunk\(s\) of 10 in "
                     r".*out\.h5\.parts and dropping the one in flight; rerun with --resume", err)
    assert said, err
    assert err.strip().count("\n") == 0, err  # one line: the command line adds none of its own
    kept = int(said[1])
    assert len(list(parts.glob("shard-*.h5"))) == kept >= 1
    assert not list(parts.glob(".*.tmp*"))
    assert main([*args, "--resume"]) == 0
    assert f"{kept * 16} of 160 lines already embedded ({kept} of 10 chunks)" in capsys.readouterr().err
    assert len(_read(out)) == 161
