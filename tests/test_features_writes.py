"""The feature cache on a disk that refuses writes: one error naming the file, no temporary file
left, and the next call computes what is missing."""

from __future__ import annotations

import errno
import os

import pytest

import contextvec
from contextvec.features import FeatureFile, FeatureSettings, cached_features

SENTENCES = [["the", "bank", "was", "robbed"], ["we", "sat", "on", "the", "river", "bank"], ["a"]] * 4


def test_a_full_disk_is_one_error_and_the_next_call_finishes(tmp_path, own_tiny_dir, monkeypatch):
    encoder = contextvec.load(own_tiny_dir)
    settings = FeatureSettings(cache_dir=tmp_path / "cache", chunk_sentences=5)
    real = os.write

    def full(fd, data):  # the second shard meets a full disk
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".shard-000001.h5.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught:
        cached_features(encoder, SENTENCES, settings, progress=False)
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC
    [parts] = (tmp_path / "cache").glob("*.parts")
    assert str(caught.value) == (f"[Errno {errno.ENOSPC}] cannot write {parts / 'shard-000001.h5'}: "
                                 f"{os.strerror(errno.ENOSPC)}")
    assert sorted(os.listdir(parts)) == ["manifest.json", "shard-000000.h5"]
    path = cached_features(encoder, SENTENCES, settings, progress=False)
    with FeatureFile.open(path) as f:
        assert len(f) == len(SENTENCES)
