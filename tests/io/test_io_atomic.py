"""Atomic writes: complete file or none, with the permissions of a plain open(), through links,
never over a FIFO or device; output checks; file locks and output locks."""

import errno
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from contextvec.io import atomic
from contextvec.io.atomic import (
    OutputInUseError,
    WriteFailed,
    atomic_file,
    atomic_path,
    file_lock,
    lock_file,
    output_lock,
    output_target,
    remove_temporaries,
)


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


# -- what a path points to is never replaced --------------------------------------------------

def test_a_symbolic_link_is_written_through_to_its_target(tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.txt"
    link.symlink_to("real/target.txt")  # dangling: the target is created
    for text in ("first", "second"):
        with atomic_path(link) as tmp:
            tmp.write_text(text, encoding="utf-8")
        assert link.is_symlink() and (tmp_path / "real" / "target.txt").read_text() == text
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["target.txt"]


def test_a_fifo_is_never_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    for path in (fifo, link):
        with pytest.raises(FileExistsError, match="is a FIFO"), atomic_path(path) as tmp:
            tmp.write_text("x", encoding="utf-8")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link"]


@pytest.mark.parametrize(("given", "directory", "error", "message"), [
    ("", False, ValueError, "the output path is empty; give a file path"),
    ("", True, ValueError, "the output path is empty; give a directory path"),
    ("-", False, ValueError, "`-` means standard input, not an output"),
    ("out dir/", False, IsADirectoryError, "ends with '/', which names a folder"),
    ("a_dir", False, IsADirectoryError, "is a directory; give a file path"),
    ("a_file", True, NotADirectoryError, "the output directory a_file is a file"),
    ("fifo", False, FileExistsError, "is a FIFO (named pipe), not a regular file: refusing to replace it"),
    ("fifo", True, FileExistsError, "is a FIFO (named pipe), not a regular file"),
    ("missing/out.h5", False, FileNotFoundError, "the folder of the output missing/out.h5 does not exist"),
    ("a_file/out.h5", False, NotADirectoryError, "lies below a file"),
    ("to_missing_folder", False, FileNotFoundError, "missing/x) does not exist"),
    ("dangling_dir", True, FileNotFoundError, "which does not exist; create it"),
    ("loop", False, OSError, "a symbolic link that loops"),
])
def test_output_target_refuses_in_one_line(tmp_path, monkeypatch, given, directory, error, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "a_file").write_text("keep")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to_missing_folder").symlink_to("missing/x")
    (tmp_path / "dangling_dir").symlink_to("nowhere")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(error) as caught:
        output_target(given, directory=directory)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert (tmp_path / "a_file").read_text() == "keep"


def test_output_target_follows_links(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "file_link").symlink_to("real/out.h5")
    (tmp_path / "dir_link").symlink_to("real")
    assert output_target(tmp_path / "file_link") == tmp_path / "real" / "out.h5"
    assert output_target(tmp_path / "dir_link", directory=True) == tmp_path / "real"
    assert output_target(tmp_path / "new.h5") == tmp_path / "new.h5"


# -- one run per output -----------------------------------------------------------------------

_HOLDER = """
import sys
from contextvec.io.atomic import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="output_lock does not lock without fcntl")
def test_an_output_held_by_another_process_is_refused_at_once_naming_it(tmp_path):
    out = tmp_path / "out.h5"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        for path in (out, tmp_path / "." / "out.h5"):
            with pytest.raises(OutputInUseError, match=rf"out.h5 is in use by pid {holder.pid}"), \
                    output_lock(path):
                pass
        assert holder.poll() is None  # refused while the holder still runs: it did not wait
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0 and not lock_file(out).exists()
    with output_lock(out), output_lock(out):  # free again, and re-entrant within a process
        assert lock_file(out).read_text() == f"{os.getpid()}\n"
    assert not lock_file(out).exists()


@pytest.mark.skipif(sys.platform == "win32", reason="output_lock does not lock without fcntl")
def test_a_link_and_its_target_are_one_output(tmp_path):
    out = tmp_path / "out.h5"
    (tmp_path / "link.h5").symlink_to(out)
    assert lock_file(tmp_path / "link.h5") == lock_file(out) == tmp_path / ".out.h5.lock"


@pytest.mark.skipif(sys.platform == "win32", reason="output_lock does not lock without fcntl")
def test_an_output_in_a_folder_that_is_not_writable_is_named(tmp_path, monkeypatch):
    """The lock file beside the output is not a name the user gave: the message names the output."""
    def refuse(path, *args, **kwargs):  # what a folder without write permission answers
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(PermissionError, match=r"output .*out.h5: its folder .* is not writable"), \
            output_lock(tmp_path / "out.h5"):
        pass


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_a_character_device_is_not_an_output():
    """Only looked at: output_target writes nothing, so no bug of this test can touch /dev/null."""
    for directory in (False, True):
        with pytest.raises(FileExistsError, match="/dev/null is a character device, not a regular file"):
            output_target("/dev/null", directory=directory)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_file_and_its_folder_reach_the_disk_before_and_after_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    with atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("done")
    assert events == [("fsync", str(tmp)), ("replace", str(tmp_path / "out.txt")),
                      ("fsync", str(tmp_path))]


def test_a_refused_write_in_the_block_names_the_output_not_its_temporary(tmp_path):
    with pytest.raises(WriteFailed) as caught, atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value) == f"[Errno {errno.ENOSPC}] cannot write {tmp_path / 'out.txt'}: " \
                                f"{os.strerror(errno.ENOSPC)}"
    assert os.listdir(tmp_path) == []


def _under_file_size_limit(size: int, work) -> dict:
    """``work()``'s JSON result, run in a forked child whose file size limit is ``size`` (a write
    past it fails with EFBIG, as on a full disk). A child, so that the test runner's own output
    files are not held to the limit."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test runner
        status = 1
        try:
            os.close(read)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
            os.write(write, json.dumps(work()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and answer, "the child failed"
    return json.loads(answer)


def test_hdf5_on_a_disk_that_refuses_writes_is_one_error_and_no_file(tmp_path):
    out = tmp_path / "out.h5"
    out.write_bytes(b"the previous output")

    def write() -> dict:
        try:
            with atomic_file(out) as stream, h5py.File(stream, "w") as f:
                for i in range(10):
                    f.create_dataset(str(i), data=np.ones((50, 50), np.float32))
        except WriteFailed as error:
            return {"errno": error.errno, "message": str(error)}
        return {}

    caught = _under_file_size_limit(20_000, write)
    assert caught.get("errno") == errno.EFBIG, caught
    assert f"cannot write {out}: " in caught["message"]
    assert os.listdir(tmp_path) == ["out.h5"]
    assert out.read_bytes() == b"the previous output"


def test_hdf5_through_atomic_file_is_a_plain_hdf5_file(tmp_path):
    with atomic_file(tmp_path / "out.h5") as stream, h5py.File(stream, "w") as f:
        f.create_dataset("x", data=np.arange(6, dtype=np.float32).reshape(2, 3))
    with h5py.File(tmp_path / "out.h5", "r") as f:
        np.testing.assert_array_equal(f["x"][()], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert os.listdir(tmp_path) == ["out.h5"]


def test_temporaries_of_dead_writers_are_removed_and_nothing_else(tmp_path):
    for name in ("out.h5", ".out.h5.tmp123", ".other.h5.tmp4", ".out.h5.tmp", "out.h5.tmp5",
                 ".out.h5.tmpx.tmp6"):
        (tmp_path / name).write_text("x")
    assert sorted(p.name for p in remove_temporaries(tmp_path, "out.h5")) == [".out.h5.tmp123"]
    assert sorted(p.name for p in remove_temporaries(tmp_path)) == [".other.h5.tmp4", ".out.h5.tmpx.tmp6"]
    assert sorted(os.listdir(tmp_path)) == [".out.h5.tmp", "out.h5", "out.h5.tmp5"]
