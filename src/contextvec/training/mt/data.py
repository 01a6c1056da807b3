"""Parallel text for translation training: line-aligned files, tokenized; length-sorted batches."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextvec.io.text_lines import read_lines, scan_lines
from contextvec.text.tokenize import Tokenizer, TokenizerName, as_tokenizer_name

POOL_BATCHES = 50

SentencePair = tuple[list[str], list[str]]


@dataclass(frozen=True)
class MTFiles:
    """The files a translation training run reads: line-aligned training source and target,
    the source side's fixed word vectors, and optionally line-aligned valid source and target.

    Raises:
        ValueError: a valid source without a valid target or the other way round.
    """

    train_source: str | os.PathLike
    train_target: str | os.PathLike
    word_vectors: str | os.PathLike
    valid_source: str | os.PathLike | None = None
    valid_target: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if (self.valid_source is None) != (self.valid_target is None):
            raise ValueError("give both valid source and valid target, or neither")


def read_parallel_side(path: str | os.PathLike) -> list[str]:
    """One side of parallel text (source, target or references): the lines of a plain or ``.gz``
    UTF-8 file, split on ``\\n`` only (``\\r\\n`` tolerated; a byte-order mark dropped); invalid UTF-8
    is an error naming the line."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a text file")
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    scan = scan_lines(path)
    if scan.invalid_utf8:
        raise ValueError(f"{path}, line {scan.invalid_utf8[0] + 1}: invalid UTF-8")
    return [text for _, text in read_lines(path)]


def tokenize_lines(lines: Sequence[str],
                   tokenizer: TokenizerName | str = TokenizerName.WHITESPACE) -> list[list[str]]:
    """One token list per line (``whitespace`` or ``moses``: a line is one sentence)."""
    tokenizer = as_tokenizer_name(tokenizer, one_per_line=True)
    if tokenizer is TokenizerName.WHITESPACE:
        return [line.split() for line in lines]
    tokenize = Tokenizer(tokenizer)
    return [tokenize(line)[0] for line in lines]


def read_parallel(source: str | os.PathLike, target: str | os.PathLike,
                  tokenizer: TokenizerName | str = TokenizerName.WHITESPACE) -> list[SentencePair]:
    """Tokenized sentence pairs; error on a line-count mismatch or an empty line."""
    src, tgt = read_parallel_side(source), read_parallel_side(target)
    for path, lines in ((source, src), (target, tgt)):
        if not lines:
            raise ValueError(f"{path} is empty")
    if len(src) != len(tgt):
        raise ValueError(f"{source} has {len(src)} lines but {target} has {len(tgt)}")
    pairs = list(zip(tokenize_lines(src, tokenizer), tokenize_lines(tgt, tokenizer), strict=True))
    for number, (s, t) in enumerate(pairs, 1):
        if not s or not t:
            raise ValueError(f"{source if not s else target}, line {number}: empty sentence")
    return pairs


def epoch_batches(lengths: Sequence[tuple[int, int]], batch_size: int, seed: int,
                  epoch: int) -> list[list[int]]:
    """The batches of one epoch, a function of ``(seed, epoch)`` only (so a resumed run
    rebuilds them): shuffle, sort pools of ``POOL_BATCHES`` batches by (source, target)
    length, cut into batches, shuffle the batches."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = batch_size * POOL_BATCHES
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches.extend(chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches
