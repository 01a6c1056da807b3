"""`contextvec embed --dtype/--compression`: every stored form reads back as written (the local
engine, a Ray worker's shards and their merge, ``embed_file``, the feature cache's vocabulary),
a resume refuses another storage, bfloat16 is torch's rounding, float16 keeps the cosine."""

from __future__ import annotations

import json
from importlib import resources

import h5py
import numpy as np
import pytest
import torch

import contextvec
from contextvec import bulk
from contextvec.api import ModelSpec
from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.cli.main import main
from contextvec.distributed.worker import EmbedWorker
from contextvec.features import FeatureSettings, load_features
from contextvec.io.hdf5_vectors import merge_shards, read_vectors
from contextvec.io.shards import ResumeError, ShardDir
from contextvec.io.vector_storage import VectorDtype, VectorStorage, bfloat16_bits

LINES = ["The bank was robbed .", "We sat on the bank of the river .", "a", "b c d e f g",
         "Short one .", "Another sentence , with a comma ."]
DTYPES = ("float32", "float16", "bfloat16")
COMPRESSIONS = ("none", "gzip", "lzf")
STORED = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


@pytest.fixture(scope="module")
def encoder(own_tiny_dir):
    return contextvec.load(own_tiny_dir)


@pytest.fixture()
def src(tmp_path):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return tmp_path / "in.txt"


def _vectors(path):
    with h5py.File(path, "r") as f:
        return {k: read_vectors(f[k]) for k in f if k != "sentence_to_index"}


@pytest.fixture(scope="module")
def float32(encoder, tmp_path_factory):
    """The float32 output of LINES in chunks of 4 lines, and embed_file's float32 arrays."""
    folder = tmp_path_factory.mktemp("float32")
    (folder / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    settings = BulkSettings(chunk_lines=4, progress=False)
    out = embed_to_hdf5(encoder, folder / "in.txt", folder / "out.h5", settings)
    return _vectors(out), contextvec.embed_file(folder / "in.txt", encoder)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_each_storage_reads_back_as_written(tmp_path, src, encoder, float32, dtype, compression):
    """The output reads back as the float32 run's vectors in the dtype; embed_file(dtype=) gives
    the same rounding of its own vectors."""
    settings = BulkSettings(chunk_lines=4, progress=False, dtype=dtype, compression=compression)
    out = embed_to_hdf5(encoder, src, tmp_path / "out.h5", settings)
    storage, (written, arrays) = VectorStorage(dtype), float32
    with h5py.File(out, "r") as f:
        for key, array in written.items():
            stored = f[key]
            assert stored.dtype == STORED[dtype]
            assert stored.compression == (None if compression == "none" else compression)
            got, want = read_vectors(stored), storage.values(array)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), key
        run = json.loads(f.attrs["contextvec_run"])
        assert json.loads(f["sentence_to_index"][0])["a"] == "2"
    assert (run.get("dtype", "float32"), run.get("compression", "none")) == (dtype, compression)
    assert run.get("gzip_level") == (1 if compression == "gzip" else None)
    for got, array in zip(contextvec.embed_file(src, encoder, dtype=dtype), arrays, strict=True):
        want = storage.values(array)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("dtype", "compression", "level"),
                         [("bfloat16", "gzip", 9), ("float16", "lzf", None)])
def test_ray_worker_shards_merge_into_the_local_output(tmp_path, src, encoder, own_tiny_dir,
                                                       dtype, compression, level):
    """What a Ray run does, without a cluster: workers write shards, the driver merges them."""
    settings = BulkSettings(chunk_lines=4, progress=False, dtype=dtype, compression=compression,
                            gzip_level=level)
    local = _vectors(embed_to_hdf5(encoder, src, tmp_path / "local.h5", settings))
    worker = EmbedWorker(ModelSpec(model=str(own_tiny_dir)), settings)
    parts = ShardDir(tmp_path / "ray.h5.parts", {"run": 1})
    parts.start(resume=False)
    lines = list(enumerate(LINES))
    for number in range(2):
        worker.embed_block(number, lines[number * 4:(number + 1) * 4], str(parts.shard(number)),
                           worker.model_identity())
    merge_shards(parts, 2, tmp_path / "ray.h5", src, index=True, progress=False)
    with h5py.File(tmp_path / "ray.h5", "r") as f:
        assert (f["0"].compression, f["0"].compression_opts) == (compression, level)
    merged = _vectors(tmp_path / "ray.h5")
    assert sorted(merged) == sorted(local)
    assert all(merged[k].dtype == local[k].dtype and merged[k].tobytes() == local[k].tobytes() for k in local)


def test_resume_with_another_storage_is_refused_naming_it(tmp_path, src, encoder, monkeypatch):
    real = bulk.write_shard

    def crash(path, items):
        if path.name == "shard-000001.h5":
            raise SystemExit("crash")
        real(path, items)

    out = tmp_path / "out.h5"
    monkeypatch.setattr(bulk, "write_shard", crash)
    with pytest.raises(SystemExit):
        embed_to_hdf5(encoder, src, out, BulkSettings(chunk_lines=4, progress=False, dtype="float16"))
    monkeypatch.setattr(bulk, "write_shard", real)
    resume = {"chunk_lines": 4, "progress": False, "resume": True}
    gzip = {"dtype": "float16", "compression": "gzip"}
    for other, named in (({}, "dtype"), (gzip, "compression, gzip_level")):
        with pytest.raises(ResumeError, match=f"cannot resume .*: {named} changed"):
            embed_to_hdf5(encoder, src, out, BulkSettings(**resume, **other))
    embed_to_hdf5(encoder, src, out, BulkSettings(**resume, dtype="float16"))
    with pytest.raises(ResumeError, match=r"made by another run: compression None \(now 'lzf'\)"):
        embed_to_hdf5(encoder, src, out, BulkSettings(progress=False, resume=True, dtype="float16",
                                                      compression="lzf"))


def test_the_command_takes_the_options_and_refuses_bad_ones_in_one_line(tmp_path, src, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    base = ["embed", str(src), str(out), "--top", "--model", str(own_tiny_dir), "--quiet"]
    assert main([*base, "--dtype", "float16", "--compression", "gzip", "--gzip-level", "1"]) == 0
    with h5py.File(out, "r") as f:
        assert (f["0"].dtype, f["0"].compression, f["0"].compression_opts) == (np.float16, "gzip", 1)
    capsys.readouterr()
    for bad, says in ((["--dtype", "int8"], "invalid choice: 'int8'"),
                      (["--compression", "zstd"], "invalid choice: 'zstd'"),
                      (["--compression", "gzip", "--gzip-level", "0"], "expected an integer from 1 to 9"),
                      (["--compression", "lzf", "--gzip-level", "5"], "gzip_level is for compression gzip"),
                      (["--resume", "--dtype", "bfloat16"], "dtype 'float16' (now 'bfloat16')")):
        assert main([*base, *bad]) == 2, bad
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and says in lines[0], (bad, lines)


def test_bad_settings_are_one_line_naming_the_choices():
    for options, message in (
        ({"dtype": "int8"}, "dtype must be one of float32, float16, bfloat16, not 'int8'"),
        ({"compression": "zstd"}, "compression must be one of none, gzip, lzf, not 'zstd'"),
        ({"compression": "gzip", "gzip_level": 10}, "gzip_level must be an integer from 1 to 9"),
        ({"gzip_level": 3}, "gzip_level is for compression gzip, not none"),
    ):
        with pytest.raises(ValueError, match=message):
            BulkSettings(**options)
    with pytest.raises(ValueError, match="dtype must be one of float32, float16, bfloat16, not 'int8'"):
        contextvec.embed_file("unused.txt", dtype="int8")
    # the feature cache speaks the same vocabulary and stores two of its dtypes
    assert FeatureSettings(dtype=VectorDtype.FLOAT16).dtype == "float16"
    with pytest.raises(ValueError, match="feature dtype must be one of float32, float16, not 'bfloat16'"):
        FeatureSettings(dtype=VectorDtype.BFLOAT16)


def test_the_feature_cache_in_float16_holds_embed_files_float16(tmp_path, src, encoder):
    sentences = [line.split() for line in LINES]
    settings = FeatureSettings(tmp_path, VectorDtype.FLOAT16)
    with load_features(encoder, sentences, settings, progress=False) as f:
        assert f.file["layers"].dtype == np.float16
        for i, array in enumerate(contextvec.embed_file(src, encoder, dtype="float16")):
            np.testing.assert_array_equal(f.sentence(i), array.astype(np.float32))


def test_bfloat16_bits_are_torchs_rounding():
    generator = np.random.default_rng(0)
    values = np.concatenate([generator.normal(0, 3, 4096).astype(np.float32),
                             np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-40, np.nan,
                                       1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)])  # ties go to even
    want = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    got = bfloat16_bits(values)
    assert got[:-3].tobytes() == want[:-3].tobytes()
    assert np.isnan(VectorStorage("bfloat16").values(values)[-3])
    assert got[-2:].tolist() == want[-2:].tolist()


def test_float16_keeps_every_vector_within_the_issues_cosine():
    """The bundled model on real text: every token vector of every layer in float16 keeps a
    cosine to float32 of at least 0.9999, and its error is float16's rounding of it."""
    text = resources.files("contextvec.data").joinpath("explore_corpus.txt").read_text(encoding="utf-8")
    sentences = text.splitlines()[:24]
    storage = VectorStorage("float16")
    for array in contextvec.load().embed(sentences, layers="all"):
        rows = array.reshape(-1, array.shape[-1]).astype(np.float64)
        half = storage.values(array).reshape(rows.shape).astype(np.float64)
        cosine = (rows * half).sum(1) / np.linalg.norm(rows, axis=1) / np.linalg.norm(half, axis=1)
        assert cosine.min() >= 0.9999
        # round to nearest: at most half a float16 step (2 ** -11 relative) off, for normal numbers
        assert np.all(np.abs(half - rows) <= 2.0 ** -11 * np.abs(rows) + 2.0 ** -25)
