"""The Ray engine's outputs: the same checks as the local engine's, before Ray starts (a link
is written through, a FIFO never replaced, `-` and an empty path refused, and an output in use
by another process refused at once)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from contextvec.distributed.outputs import output_path
from contextvec.io.atomic import OutputInUseError

pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")


@pytest.mark.parametrize("merge", [False, True])
def test_fifo_dash_and_empty_outputs_are_refused(tmp_path, monkeypatch, merge):
    from contextvec.bulk import BulkSettings
    from contextvec.distributed import RaySettings, embed_ray

    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    for given, message in (("fifo", "is a FIFO (named pipe), not a regular file"),
                           ("-", "`-` means standard input"), ("", "the output path is empty")):
        with pytest.raises((OSError, ValueError)) as caught:
            embed_ray(["in.txt"], given, settings=BulkSettings(overwrite=True),
                      cluster=RaySettings(merge=merge))
        assert message in str(caught.value)
    assert stat.S_ISFIFO(os.stat("fifo").st_mode)


def test_a_link_leads_to_its_target(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "folder").symlink_to("real")
    (tmp_path / "file.h5").symlink_to("real/out.h5")
    assert output_path(tmp_path / "folder", merge=False) == (tmp_path / "real").resolve()
    assert output_path(tmp_path / "file.h5", merge=True) == (tmp_path / "real" / "out.h5").resolve()


@pytest.mark.skipif(sys.platform == "win32", reason="outputs are held with fcntl")
def test_an_output_in_use_is_refused_before_ray_starts(tmp_path):
    from contextvec.bulk import BulkSettings
    from contextvec.distributed import embed_ray

    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from contextvec.io.atomic import output_lock\n"
         "with output_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(OutputInUseError, match=f"is in use by pid {holder.pid}"):
            embed_ray(["in.txt"], out, settings=BulkSettings(resume=True))
    finally:
        holder.communicate("", timeout=60)
