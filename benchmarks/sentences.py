"""The sentences the ELMo speed benchmarks embed, from ``../shared/data`` (never downloaded)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SOURCES = ("reference", "wikitext")
_SENTENCE_END = re.compile(r"(?<= [.!?]) ")


def benchmark_sentences(source: str, n: int) -> list[list[str]]:
    """``n`` tokenized sentences from ``source``.

    ``reference``: the 64 sentences of ``reference/elmo-small/sentences.txt``, cycled past 64 (a
    warning says so: a repeated sentence repeats its tokens, and ELMo's first layer projects a
    batch's repeated tokens once, so cycled sentences run faster than as many distinct ones).
    ``wikitext``: wikitext-103's validation text split into sentences at `` . ``, `` ! `` and
    `` ? ``, those of 3 to 60 tokens in order, each once.
    """
    if source == "reference":
        lines = (DATA / "reference" / "elmo-small" / "sentences.txt").read_text("utf-8").splitlines()
        if n > len(lines):
            print(f"warning: the {len(lines)} reference sentences cycled to {n}: repeated sentences "
                  "repeat their tokens, which the first LSTM layer projects once per batch")
        return [line.split() for line in lines * (n // len(lines) + 1)][:n]
    if source != "wikitext":
        raise ValueError(f"sentences from {source!r}? one of {', '.join(SOURCES)}")
    sentences = []
    with gzip.open(DATA / "corpora" / "wikitext-103" / "wiki.valid.tokens.gz", "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("="):  # headings
                continue
            for sentence in _SENTENCE_END.split(line):
                tokens = sentence.split()
                if 3 <= len(tokens) <= 60:
                    sentences.append(tokens)
                    if len(sentences) == n:
                        return sentences
    raise SystemExit(f"wikitext-103's validation text has {len(sentences)} such sentences, not {n}")
