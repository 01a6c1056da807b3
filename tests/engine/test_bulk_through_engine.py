"""``contextvec embed`` through the engine: the datasets are, bit for bit, the arrays of
``Encoder.embed_batches`` over each chunk (caches cleared at each chunk), and a failure or an
interruption stops the run at once, keeps the finished shards and leaves no thread behind."""

from __future__ import annotations

import threading
import time

import h5py
import numpy as np
import pytest

import contextvec
from contextvec import bulk
from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.encoders.base import Encoder
from contextvec.encoders.outputs import view_layers

LINES = [
    "The bank was robbed .",
    "we sat on the river bank .",
    "",
    "a",
    "the river",
    " ".join(["the bank was robbed"] * 6),  # 24 tokens: longer than the smallest max_tokens
    "robbed the bank",
    "   ",
    "we sat",
    "on the bank of the river we sat .",
    "unknown words land in no vocabulary",
    "a a a",
    "the the",
    ". . . . .",
    "was robbed",
]


@pytest.fixture(scope="module")
def encoders(tiny_dir) -> dict[str, Encoder]:
    """The test suite's tiny ELMo (a char-CNN token cache: chunks must not share it) and the
    bundled CoVe (words, no cache)."""
    return {"elmo": contextvec.load(tiny_dir), "cove": contextvec.load("cove-en-multi30k")}


def expected(encoder: Encoder, settings: BulkSettings) -> dict[str, np.ndarray]:
    """What the run promises: each chunk through ``embed_batches`` alone, caches cleared first."""
    want = {}
    for start in range(0, len(LINES), settings.chunk_lines):
        chunk = LINES[start:start + settings.chunk_lines]
        encoder.clear_caches()
        for row, array in encoder.embed_batches([line.split() for line in chunk], settings.batch_size,
                                                settings.max_tokens):
            want[str(start + row)] = view_layers(array, settings.layers, settings.pool)
    return want


@pytest.mark.parametrize("kind", ["elmo", "cove"])
@pytest.mark.parametrize(("batch_size", "max_tokens", "layers", "pool", "chunk_lines"), [
    (64, 4096, "all", None, 2048),
    (3, 12, "all", None, 4),
    (2, None, "top", "mean", 6),
    (1, 8, "average", None, 5),
    (4, 16, "top", "max", 15),
])
def test_datasets_are_the_bytes_of_embed_batches(tmp_path, encoders, kind, batch_size, max_tokens,
                                                 layers, pool, chunk_lines):
    encoder = encoders[kind]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    settings = BulkSettings(layers=layers, pool=pool, batch_size=batch_size, max_tokens=max_tokens,
                            chunk_lines=chunk_lines, empty_lines="keep", progress=False)
    out = embed_to_hdf5(encoder, src, tmp_path / "out.h5", settings)
    want = expected(encoder, settings)
    with h5py.File(out, "r") as f:
        assert sorted(f) == sorted([*want, "sentence_to_index"])
        for key, array in want.items():
            got = f[key][()]
            assert got.dtype == array.dtype == np.float32 and got.shape == array.shape
            assert np.array_equal(got, array), key
    assert want["2"].shape[-2:] == ((0, encoder.output_dim) if pool is None else (encoder.output_dim,))


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


def _no_new_threads(before: set[threading.Thread]) -> None:
    deadline = time.monotonic() + 10
    while _threads() - before:
        assert time.monotonic() < deadline, f"threads left running: {_threads() - before}"
        time.sleep(0.01)


class _Broken(Exception):
    pass


def test_an_encoder_failing_mid_chunk_stops_the_run_and_keeps_the_finished_shards(
        tmp_path, encoders, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(f"the bank {'was robbed ' * (i % 5)}." for i in range(40)) + "\n")
    encoder = encoders["elmo"]
    calls: list[int] = []
    real = type(encoder).forward

    def failing(self, sentences):
        calls.append(len(sentences))
        if len(calls) == 6:  # the second chunk's second forward pass
            raise _Broken("the encoder failed")
        return real(self, sentences)

    monkeypatch.setattr(type(encoder), "forward", failing)
    out = tmp_path / "out.h5"
    before = _threads()
    start = time.monotonic()
    with pytest.raises(_Broken, match="the encoder failed"):
        embed_to_hdf5(encoder, src, out, BulkSettings(batch_size=4, chunk_lines=16, progress=False))
    assert time.monotonic() - start < 30
    # The failing chunk stopped at its failure, and the third chunk never started.
    assert calls == [4] * 6
    assert sorted(p.name for p in (tmp_path / "out.h5.parts").glob("shard-*")) == ["shard-000000.h5"]
    assert not out.exists()
    _no_new_threads(before)


def test_an_interruption_while_a_shard_is_written_keeps_the_written_ones(tmp_path, encoders, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(f"we sat {'on the bank ' * (i % 4)}." for i in range(30)) + "\n")
    real = bulk.write_shard
    written: list[str] = []

    def interrupted(path, items):
        if written:
            raise KeyboardInterrupt
        real(path, items)
        written.append(path.name)

    monkeypatch.setattr(bulk, "write_shard", interrupted)
    before = _threads()
    with pytest.raises(KeyboardInterrupt):
        embed_to_hdf5(encoders["cove"], src, tmp_path / "out.h5",
                      BulkSettings(batch_size=2, chunk_lines=10, progress=False))
    shards = sorted(p.name for p in (tmp_path / "out.h5.parts").glob("shard-*"))
    assert shards == written == ["shard-000000.h5"]
    _no_new_threads(before)
    # The same run, resumed, finishes with the bytes of a run never interrupted.
    monkeypatch.setattr(bulk, "write_shard", real)
    settings = BulkSettings(batch_size=2, chunk_lines=10, progress=False)
    resumed = embed_to_hdf5(encoders["cove"], src, tmp_path / "out.h5",
                            BulkSettings(batch_size=2, chunk_lines=10, resume=True, progress=False))
    whole = embed_to_hdf5(encoders["cove"], src, tmp_path / "whole.h5", settings)
    with h5py.File(resumed, "r") as a, h5py.File(whole, "r") as b:
        assert sorted(a) == sorted(b)
        for key in b:
            if key != "sentence_to_index":
                assert np.array_equal(a[key][()], b[key][()]), key
