"""`contextvec embed --engine ray`: the same bytes as the local engine, killed workers, resume,
bad input, several inputs; on a local Ray with 2 CPUs (skipped where Ray is not installed)."""

from __future__ import annotations

import gzip
import json
import os
import sys
import time

import h5py
import pytest
import torch

from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.cli.main import main
from contextvec.distributed.worker import FAULT_ENV
from contextvec.io.shards import ResumeError
from contextvec.io.text_lines import InputError

SENTENCES = [
    "The bank was robbed .",
    "We sat on the bank of the river .",
    "Zürich 日本語 🙂 naïve",
    "a",
    "x" * 60 + " long-token",
    "one two three four five six seven eight nine ten eleven twelve",
    "Short one .",
    "Another sentence , with a comma .",
    "b c",
    "The end ?",
    "Last but not least .",
]
OPTIONS = {"layers": "all", "batch_size": 2, "chunk_lines": 2}


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """A local Ray (2 CPUs) whose workers die once on a block when the test creates the file
    named by the fault hook (set before Ray starts, so the workers inherit it)."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    marker = tmp_path_factory.mktemp("fault") / "die-once"
    os.environ[FAULT_ENV] = str(marker)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield marker
    ray.shutdown()
    del os.environ[FAULT_ENV]


def _write(path, lines):
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _datasets(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f}, dict(f.attrs)


def _folder(path):
    """Every dataset of a shard folder, keyed as in the merged file."""
    done = json.loads((path / "done.json").read_text())
    data = {}
    for n in range(done["n_shards"]):
        with h5py.File(path / done["shard_pattern"].format(n), "r") as f:
            data.update({k: f[k][()] for k in f})
    return data


def _assert_same_bytes(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
        if want[key].dtype == object:  # sentence_to_index: strings
            assert list(got[key]) == list(want[key]), key
        else:
            assert got[key].tobytes() == want[key].tobytes(), key


@pytest.fixture(scope="module")
def local(own_tiny_dir, tmp_path_factory):
    """What every Ray run must equal: the local engine's file for SENTENCES (its keys, index
    and run record). Both engines embed through ``bulk.embed_chunk``, which clears ELMo's token
    cache first, so a chunk's bytes do not depend on the chunks embedded before it."""
    import contextvec

    folder = tmp_path_factory.mktemp("local")
    src = _write(folder / "in.txt", SENTENCES)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the Ray workers: threads change a matmul's last bits
    try:
        encoder = contextvec.load(own_tiny_dir)
        data, attrs = _datasets(embed_to_hdf5(encoder, src, folder / "local.h5",
                                              BulkSettings(progress=False, **OPTIONS)))
    finally:
        torch.set_num_threads(threads)
    return src, (data, attrs)


def _run(own_tiny_dir, inputs, output, merge=False, on_block=None, **options):
    from contextvec.distributed import ModelSpec, RaySettings, embed_ray

    return embed_ray(inputs, output, ModelSpec(str(own_tiny_dir)),
                     BulkSettings(progress=False, **{**OPTIONS, **options}),
                     RaySettings(workers=2, merge=merge), on_block=on_block)


@pytest.mark.slow  # each Ray run starts its workers: a process, torch, the model
def test_merged_output_is_the_local_engines_file(ray_session, own_tiny_dir, local, tmp_path):
    src, (want, attrs) = local
    summary = _run(own_tiny_dir, [src], tmp_path / "ray.h5", merge=True)
    got, got_attrs = _datasets(tmp_path / "ray.h5")
    _assert_same_bytes(got, want)
    assert got_attrs == attrs  # the same run record: either engine can resume the other's run
    assert (summary.blocks, summary.blocks_run, summary.workers) == (6, 6, 2)
    assert not (tmp_path / "ray.h5.parts").exists()


@pytest.mark.slow  # each Ray run starts its workers: a process, torch, the model
def test_a_killed_worker_changes_nothing(ray_session, own_tiny_dir, local, tmp_path):
    ray_session.touch()  # the first worker to take a block dies (os._exit) before embedding it
    summary = _run(own_tiny_dir, [local[0]], tmp_path / "out")
    assert not ray_session.exists(), "no worker died: the fault hook did not fire"
    want = {k: v for k, v in local[1][0].items() if k != "sentence_to_index"}
    _assert_same_bytes(_folder(tmp_path / "out"), want)
    assert summary.blocks_run == 6
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == \
        ["done.json", "manifest.json"] + [f"shard-{n:06d}.h5" for n in range(6)]


def _settled_shards(out, quiet_seconds=3.0, limit=60.0):
    """The finished shards once no new one has appeared for ``quiet_seconds``: a block already
    running when the run was stopped may still land (atomically, complete) a moment later."""
    start, seen, since = time.monotonic(), None, time.monotonic()
    while time.monotonic() - start < limit:
        now = {p.name for p in out.glob("shard-*.h5")}
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_seconds:
            break
        time.sleep(0.2)
    return seen


@pytest.mark.slow  # each Ray run starts its workers: a process, torch, the model
def test_resume_after_an_interrupted_run(ray_session, own_tiny_dir, local, tmp_path):
    out = tmp_path / "out"

    def stop(block):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(own_tiny_dir, [local[0]], out, on_block=stop)
    finished = _settled_shards(out)
    assert 1 <= len(finished) <= 4 and not (out / "done.json").exists()  # at most 4 were dealt
    with pytest.raises(ResumeError, match="layers"):  # another run's folder is refused
        _run(own_tiny_dir, [local[0]], out, resume=True, layers="top")
    with pytest.raises(FileExistsError, match="--resume"):
        _run(own_tiny_dir, [local[0]], out)
    ran = []
    summary = _run(own_tiny_dir, [local[0]], out, resume=True, on_block=lambda b: ran.append(b.number))
    assert summary.blocks_run == len(ran) == 6 - len(finished)
    assert not {f"shard-{n:06d}.h5" for n in ran} & finished
    want = {k: v for k, v in local[1][0].items() if k != "sentence_to_index"}
    _assert_same_bytes(_folder(out), want)
    again = _run(own_tiny_dir, [local[0]], out, resume=True)  # finished: nothing to do
    assert again.blocks_run == 0


@pytest.mark.slow  # each Ray run starts its workers: a process, torch, the model
def test_several_inputs_are_one_corpus(ray_session, own_tiny_dir, local, tmp_path):
    """Inputs (plain and gzip) keyed through the files in order: the local engine's output of
    their concatenation, sentence_to_index included."""
    first = _write(tmp_path / "a.txt", SENTENCES[:4])
    second = _write(tmp_path / "b.txt.gz", SENTENCES[4:])
    assert main(["embed", str(first), str(second), str(tmp_path / "ray.h5"), "--all",
                 "--model", str(own_tiny_dir), "--batch-size", "2", "--chunk-lines", "2",
                 "--engine", "ray", "--workers", "2", "--merge", "--quiet"]) == 0
    got, attrs = _datasets(tmp_path / "ray.h5")
    _assert_same_bytes(got, local[1][0])
    run = json.loads(attrs["contextvec_run"])
    assert [i["name"] for i in run["inputs"]] == ["a.txt", "b.txt.gz"]


def test_bad_input_names_the_file_and_line(own_tiny_dir, tmp_path, capsys):
    """Checked in the driver before Ray starts: one line naming the file and line."""
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    good = _write(tmp_path / "good.txt", SENTENCES[:2])
    bad = _write(tmp_path / "bad.txt", ["fine", "   ", "fine too"])
    with pytest.raises(InputError, match=r"bad\.txt: 1 empty .* line\(s\) 2 "):
        _run(own_tiny_dir, [good, bad], tmp_path / "out")
    assert main(["embed", str(good), str(bad), str(tmp_path / "out"), "--top", "--engine", "ray",
                 "--model", str(own_tiny_dir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.txt" in err and "line(s) 2" in err
    with pytest.raises(InputError, match=r"b\.txt:1: repeats .*a\.txt:2"):  # unique across files
        _run(own_tiny_dir, [_write(tmp_path / "a.txt", ["x y", "z"]), _write(tmp_path / "b.txt", ["z"])],
             tmp_path / "keys", sentence_keys=True)
    assert not (tmp_path / "out").exists() and not (tmp_path / "keys").exists()


def test_without_ray_the_engine_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    src = _write(tmp_path / "in.txt", SENTENCES[:2])
    assert main(["embed", str(src), str(tmp_path / "out"), "--all", "--engine", "ray"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'contextvec[ray]'" in err


def test_ray_options_and_several_inputs_need_the_ray_engine(tmp_path, capsys):
    src = _write(tmp_path / "in.txt", SENTENCES[:2])
    assert main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--workers", "2"]) == 2
    assert "--workers need(s) --engine ray" in capsys.readouterr().err
    assert main(["embed", str(src), str(src), str(tmp_path / "o.h5"), "--all"]) == 2
    assert "several inputs need --engine ray" in capsys.readouterr().err


def test_a_file_name_without_merge_is_refused(tmp_path, capsys):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    src = _write(tmp_path / "in.txt", SENTENCES[:2])
    assert main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--engine", "ray"]) == 2
    assert "name a folder" in capsys.readouterr().err and not (tmp_path / "o.h5").exists()


def test_corpus_blocks_cross_file_boundaries(tmp_path):
    """No Ray needed: several files are one numbered corpus, cut into blocks across files."""
    from contextvec.distributed.inputs import Corpus
    from contextvec.io.text_lines import read_lines

    a = tmp_path / "a.txt"
    a.write_bytes(b"\xef\xbb\xbfone\n\xef\xbb\xbftwo\nthree\n")  # a BOM, and U+FEFF inside line 2
    b = _write(tmp_path / "b.txt.gz", ["four", "five"])
    corpus = Corpus.scan([a, b])
    assert corpus.n_lines == 5 and corpus.where(3) == f"{b}:1"
    assert list(corpus.blocks(2, skip={1})) == [(0, [(0, "one"), (1, "\ufefftwo")]), (2, [(4, "five")])]
    assert corpus.describe([(2, "three"), (3, "four")]) == f"{a}:3 to {b}:1"
    joined = tmp_path / "joined.txt"
    corpus.write_concatenation(joined)
    assert list(read_lines(joined)) == list(corpus.lines())
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="empty.txt is empty"):
        Corpus.scan([a, tmp_path / "empty.txt"])


def test_a_live_cluster_passes_the_address_check(ray_session):
    """The check before `ray.init` accepts a real GCS port (the session's own)."""
    import ray

    from contextvec.distributed.address import check_ray_address

    gcs = ray.get_runtime_context().gcs_address
    check_ray_address(gcs)
    check_ray_address("127.0.0.1:" + gcs.rpartition(":")[2])


def test_corpus_refuses_sentence_keys_hdf5_cannot_hold(tmp_path):
    """No Ray needed: the Ray engine's scan refuses a NUL (HDF5 would end the key there) and an
    empty sentence kept as a key, naming the file and lines, as the local engine does."""
    from contextvec.distributed.inputs import Corpus
    from contextvec.io.text_lines import InputError

    a = tmp_path / "a.txt"
    a.write_bytes(b"a b\nc\0d e\nc\n\n")
    with pytest.raises(InputError, match=r"a\.txt: 2 sentence\(s\) that cannot be HDF5 keys .* "
                                         r"line\(s\) 2, 4 "):
        Corpus.scan([a], sentence_keys=True, empty_lines="keep")
    with pytest.raises(InputError, match=r"a\.txt: 1 empty .* line\(s\) 4 .*; 1 sentence\(s\) that cannot be "
                                         r"HDF5 keys .* line\(s\) 2 "):
        Corpus.scan([a], sentence_keys=True)
    assert Corpus.scan([a], empty_lines="keep").n_lines == 4  # line-index keys hold any text
