"""A pytest plugin for CI's first step (.ci/run): appends the node id of every skipped test, and of
every module skipped whole (an ``importorskip`` at its top), to the file named by
``CONTEXTVEC_SKIPPED_FILE``, one a line, for the second step to run them again with the extras."""

from __future__ import annotations

import os

import pytest


def _write_down(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped:
        with open(os.environ["CONTEXTVEC_SKIPPED_FILE"], "a", encoding="utf-8") as out:
            out.write(report.nodeid + "\n")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _write_down(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A skip is reported in the setup phase (a skip mark, a fixture) or the call (pytest.skip).
    _write_down(report)
