"""Several input files read as one corpus: checked like the local path, numbered globally, cut
into blocks.

Line ``k`` of the corpus (0-based, counting through the files in the order given) is output key
``k``, exactly as if the files had been concatenated: one input gives the local engine's keys.
Block ``n`` holds corpus lines ``n * block_lines`` up to the next block, across file boundaries.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from contextvec.io.text_lines import BOM, InputError, Lines, check_scan, read_lines, scan_lines


@dataclass(frozen=True)
class InputFile:
    path: Path
    n_lines: int
    sha256: str
    first_key: int


class Corpus:
    """The checked input files, in order; build with :meth:`scan`."""

    def __init__(self, files: Sequence[InputFile]) -> None:
        self.files = list(files)
        self.n_lines = sum(f.n_lines for f in self.files)
        self._starts = [f.first_key for f in self.files]

    @classmethod
    def scan(cls, paths: Sequence[str | os.PathLike], sentence_keys: bool = False,
             empty_lines: str = "error", invalid_utf8: str = "error") -> Corpus:
        """Check every file with the local path's policies; errors name the file and lines."""
        files: list[InputFile] = []
        first = 0
        for given in paths:
            path = Path(given)
            scan = scan_lines(path, sentence_keys)
            try:
                check_scan(scan, empty_lines, invalid_utf8)
            except InputError as e:
                raise InputError(f"{path}: {e}") from None
            if scan.n_lines == 0:
                raise ValueError(f"{path} is empty: there is nothing to embed")
            files.append(InputFile(path, scan.n_lines, scan.sha256, first))
            first += scan.n_lines
        corpus = cls(files)
        if sentence_keys and len(files) > 1:
            corpus._check_unique_across_files()
        return corpus

    def _check_unique_across_files(self) -> None:
        """Sentence keys must be unique in the whole corpus, not only within each file."""
        seen: dict[bytes, int] = {}
        for key, text in self.lines():
            digest = hashlib.blake2b(text.strip().encode("utf-8", "surrogatepass"),
                                     digest_size=16).digest()
            if digest in seen:
                raise InputError(f"{self.where(key)}: repeats {self.where(seen[digest])}; "
                                 "--use-sentence-keys needs unique sentences; use line-index keys instead")
            seen[digest] = key

    def manifest(self) -> dict:
        """The input part of the run's manifest. One input: exactly the local engine's fields
        (so either engine can resume the other's run); several: also each file's hash."""
        if len(self.files) == 1:
            return {"input_sha256": self.files[0].sha256, "n_lines": self.n_lines}
        hashes = "\n".join(f.sha256 for f in self.files)
        return {
            "input_sha256": hashlib.sha256(hashes.encode()).hexdigest(),
            "n_lines": self.n_lines,
            "inputs": [{"name": f.path.name, "sha256": f.sha256, "n_lines": f.n_lines}
                       for f in self.files],
        }

    def where(self, key: int) -> str:
        """``file:line`` (1-based line) of corpus line ``key``."""
        f = self.files[bisect.bisect_right(self._starts, key) - 1]
        return f"{f.path}:{key - f.first_key + 1}"

    def describe(self, lines: Lines) -> str:
        """The span of a block, for messages."""
        return self.where(lines[0][0]) if len(lines) == 1 else \
            f"{self.where(lines[0][0])} to {self.where(lines[-1][0])}"

    def lines(self) -> Iterator[tuple[int, str]]:
        """Every ``(key, text)`` of the corpus, streamed (invalid UTF-8 replaced: the policies
        were checked by :meth:`scan`)."""
        for f in self.files:
            for index, text in read_lines(f.path):
                yield f.first_key + index, text

    def blocks(self, block_lines: int, skip: set[int] | frozenset[int] = frozenset()
               ) -> Iterator[tuple[int, Lines]]:
        """``(block number, lines)`` of every block not in ``skip``, streamed."""
        block: Lines = []
        for item in self.lines():
            block.append(item)
            if len(block) == block_lines:
                number = item[0] // block_lines
                if number not in skip:
                    yield number, block
                block = []
        if block and block[0][0] // block_lines not in skip:
            yield block[0][0] // block_lines, block

    def write_concatenation(self, path: Path) -> None:
        """The corpus as one file that ``read_lines`` reads back line for line (for a merged
        output's ``sentence_to_index``). It starts with a byte-order mark, so that the one
        ``read_lines`` drops is that one, never part of a sentence."""
        with open(path, "wb") as out:
            out.write(BOM)
            for _, text in self.lines():
                out.write(text.encode("utf-8") + b"\n")
