"""docs/spacy.md's example runs as written and prints what its comments say (needs the spacy extra)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("spacy", reason="the optional spacy extra is not installed")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "spacy.md"
RUN_MARK = "<!-- doc-test: run -->"


def test_the_pages_example_runs_and_prints_its_comments(tmp_path, monkeypatch):
    block = PAGE.read_text(encoding="utf-8").split(RUN_MARK + "\n```python\n", 1)[1].split("```", 1)[0]
    # Each print's comment starts with what it prints (up to ": ").
    expected = [comment.split(": ")[0]
                for comment in re.findall(r"^print\(.*?\)\s+# (.*)$", block, flags=re.M)]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec"), {})
    assert out.getvalue().splitlines() == expected
    assert (tmp_path / "pipeline" / "config.cfg").is_file()
