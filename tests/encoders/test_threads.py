"""Loading runs on a thread that ends: no OpenMP team is left behind on the caller's thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from contextvec.encoders.threads import in_passing_thread


def test_in_passing_thread_returns_the_result_from_a_thread_that_has_ended():
    seen = []

    def work() -> int:
        seen.append(threading.current_thread())
        return 42

    assert in_passing_thread(work) == 42
    assert seen[0] is not threading.current_thread() and not seen[0].is_alive()


def test_in_passing_thread_raises_the_error_of_its_function():
    def fail() -> None:
        raise KeyError("missing weight")

    with pytest.raises(KeyError, match="missing weight") as info:
        in_passing_thread(fail)
    assert any(frame.name == "fail" for frame in info.traceback)  # its own traceback


# With 2 torch threads (whatever the machine's cores), count the process's OS threads before and
# after loading the bundled model, once settled: a load on the calling thread leaves that
# thread's OpenMP team (one more thread), contextvec.load leaves none.
COUNT_THREADS = textwrap.dedent("""
    import os, sys, time
    import torch
    torch.set_num_threads(2)
    import contextvec
    from contextvec.api import DEFAULT_MODEL, bundled_models
    from contextvec.encoders.registry import family_of

    def settled():
        counts = []
        for _ in range(50):
            counts.append(len(os.listdir("/proc/self/task")))
            if len(counts) > 3 and len(set(counts[-4:])) == 1:
                return counts[-1]
            time.sleep(0.02)
        return counts[-1]

    before = settled()
    if sys.argv[1] == "api":
        contextvec.load()
    else:
        path = bundled_models()[DEFAULT_MODEL]
        family_of(path).load(path, "cpu")
    print(settled() - before)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_load_leaves_no_openmp_team_on_the_calling_thread():
    def added(how: str) -> int:
        done = subprocess.run([sys.executable, "-c", COUNT_THREADS, how], capture_output=True,
                              text=True, timeout=120, check=True)
        return int(done.stdout.strip())

    assert added("direct") >= 1  # loading does start a team where it runs
    assert added("api") == 0
