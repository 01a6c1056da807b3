"""Atomic writes: complete file or none, with the permissions of a plain open()."""

import os
import stat

import pytest
import torch
from safetensors.torch import save_file

from contextvec.io.atomic import atomic_path


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
