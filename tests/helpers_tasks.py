"""A tiny TREC file for the task jobs' tests: two coarse labels, each with its own words (so a
model can learn them)."""

from __future__ import annotations

from pathlib import Path

QUESTIONS = [("NUM:count", "how many {} are there ?"), ("LOC:city", "where is the {} city ?")]
THINGS = ["dogs", "cats", "rivers", "books", "trees", "cars", "birds", "stars", "hills", "boats"]


def write_trec(path: Path, repeat: int = 2) -> Path:
    """``repeat`` x 20 labelled questions in TREC's format (latin-1), written to ``path``."""
    lines = [f"{label} {text.format(thing)}" for _ in range(repeat) for thing in THINGS
             for label, text in QUESTIONS]
    path.write_text("\n".join(lines) + "\n", encoding="latin-1")
    return path
