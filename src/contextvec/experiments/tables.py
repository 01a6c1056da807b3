"""The one writer of every experiment's tables: CSV rows and markdown tables, written atomically.
Each experiment supplies its columns and rows (:mod:`.elmo_table`, :mod:`.rep_table`)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from contextvec.io.atomic import atomic_path


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_csv(path: Path, fields: Sequence[str], rows: Iterable[dict]) -> None:
    """``results.csv``: a header of ``fields``, then one line per row (a dict by field)."""
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_table(header: Sequence[str], aligns: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table's lines: ``aligns`` per column (``---``, ``---:``)."""
    return [table_row(header), table_row(aligns), *(table_row(row) for row in rows)]
