"""Atomic writes: complete file or none, with the permissions of a plain open(); file locks."""

import os
import stat
import sys
import threading
import time

import pytest
import torch
from safetensors.torch import save_file

from contextvec.io.atomic import atomic_path, file_lock


def test_safetensors_output_gets_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        target = tmp_path / "model.safetensors"
        with atomic_path(target) as tmp:
            save_file({"w": torch.zeros(2)}, str(tmp))  # safetensors creates 0o600 files
        assert stat.S_IMODE(target.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_failed_block_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half", encoding="utf-8")
        raise RuntimeError("interrupted")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.skipif(sys.platform == "win32", reason="file_lock does not lock without fcntl")
def test_file_lock_takes_turns_and_leaves_no_file(tmp_path):
    """The second holder gets the lock only after the first let go, also when the first removed
    the lock file that the second had already opened; no lock file is left."""
    lock, events = tmp_path / ".entry.lock", []
    held, waiting = threading.Event(), threading.Event()

    def first():
        with file_lock(lock):
            held.set()
            waiting.wait(5)
            time.sleep(0.2)  # the second is at the lock by now: unlocked, it would go first
            events.append("first releases")

    def second():
        held.wait(5)
        waiting.set()
        with file_lock(lock):
            events.append("second holds")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert events == ["first releases", "second holds"]
    assert not lock.exists()
