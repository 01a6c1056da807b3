"""Grouping sentences into batches of similar length, and undoing the grouping."""

from __future__ import annotations

from collections.abc import Sequence


def length_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches of similar length, longest first.

    A batch holds at most ``batch_size`` items and, if ``max_tokens`` is set, at most that many
    padded tokens (``len(batch) * longest``); an item longer than ``max_tokens`` gets a batch of
    its own. Every index appears exactly once; callers restore input order from the indices.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]
        full = len(current) >= batch_size or (
            max_tokens is not None and (len(current) + 1) * longest > max_tokens
        )
        if current and full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
