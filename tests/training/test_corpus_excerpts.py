"""The corpus excerpts in tests/data are the first lines of their files in ../shared/data, byte for
byte: the training tests read at most that many lines from a file's start, so they see the same
text on a clone alone as where ../shared is present."""

from __future__ import annotations

import gzip
import itertools

from conftest import EXCERPTS, SHARED


def test_each_corpus_excerpt_is_the_first_lines_of_its_shared_file():
    excerpts = sorted((EXCERPTS / "corpora").rglob("*.gz"))
    assert excerpts
    for excerpt in excerpts:
        with gzip.open(excerpt, "rb") as f:
            kept = f.readlines()
        with gzip.open(SHARED / excerpt.relative_to(EXCERPTS), "rb") as f:
            first = list(itertools.islice(f, len(kept)))
        assert kept and kept == first, excerpt
        # gzip -9 -n: no file name and no time in the header, so the bytes depend on the text alone.
        header = excerpt.read_bytes()[:10]
        assert header[3] == 0 and header[4:8] == bytes(4), excerpt
