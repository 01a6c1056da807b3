"""``contextvec models``: the published models contextvec can pull, and which are in the cache."""

from __future__ import annotations

import argparse
import json

HELP = "list the published models `contextvec pull` knows and those in the cache (size, language, path)"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("models", help=HELP, description=f"{HELP}.")
    p.add_argument("--cached", action="store_true", help="only the models in the cache")
    p.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    p.set_defaults(run=run)


def _size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def run(args: argparse.Namespace) -> None:
    from contextvec.hub.cache import cache_dir
    from contextvec.hub.pull import list_models

    rows = [row for row in list_models() if row.path is not None or not args.cached]
    if args.json:
        for row in rows:
            model = row.model
            print(json.dumps({
                "name": row.name, "format": model.format if model else None,
                "language": model.language if model else None, "licence": model.licence if model else None,
                "parameters": model.parameters if model else None,
                "download_bytes": model.size if model else None, "cached": row.path is not None,
                "cached_bytes": row.size, "path": str(row.path) if row.path else None,
                "source": model.source if model else None}, ensure_ascii=False))
        return
    table = [("NAME", "FORMAT", "LANG", "SIZE", "CACHED", "PATH")]
    for row in rows:
        model = row.model
        size = row.size if row.path is not None else (model.size if model else None)
        kind, language = ((model.format or "archive"), (model.language or "-")) if model else ("-", "-")
        table.append((row.name, kind, language, _size(size), "yes" if row.path is not None else "no",
                      str(row.path) if row.path is not None else "-"))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=False)) + "  " + r[-1])
    print(f"\ncache: {cache_dir()}; pull one with `contextvec pull NAME`")
