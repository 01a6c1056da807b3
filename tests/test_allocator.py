"""Freed memory kept for reuse: after ``keep_freed_memory`` (which the ``contextvec`` command
calls), a large buffer freed and allocated again faults in no fresh pages."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from contextvec.allocator import keep_freed_memory

pytestmark = pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's malloc only")

# 64 MiB: above the largest size glibc ever raises its own mmap threshold to, so by default every
# allocation of it is a fresh mapping whose pages fault in on first touch.
_CYCLE = """
import ctypes, resource
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def cycle():
    buffer = libc.malloc(64 * 2**20)
    ctypes.memset(buffer, 1, 64 * 2**20)
    libc.free(buffer)
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
cycle()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults_of_second_cycle(setup: str, env: dict[str, str] | None = None) -> int:
    code = textwrap.dedent(setup) + _CYCLE
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    return int(done.stdout.split()[-1])


def test_a_freed_buffer_is_reused_without_page_faults():
    assert _faults_of_second_cycle("from contextvec.allocator import keep_freed_memory\n"
                                   "assert keep_freed_memory()\n") < 100


def test_the_command_keeps_freed_memory(tmp_path):
    # A command that fails on its input (an empty file) still ran with the setting, which is made
    # once the options have parsed.
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    setup = f"""
    from contextvec.cli.main import main
    assert main(["embed", {str(empty)!r}, {str(tmp_path / "out.h5")!r}, "--top"]) == 2
    """
    assert _faults_of_second_cycle(setup) < 100


def test_the_users_own_malloc_settings_are_left_in_charge(monkeypatch):
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    assert keep_freed_memory() is False
    monkeypatch.delenv("MALLOC_TOP_PAD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    assert keep_freed_memory() is False
