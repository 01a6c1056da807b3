"""Character ids from a model's own character dictionary, as ELMoForManyLangs models read them.

Unlike allennlp's byte ids (:mod:`contextvec.text.chars`), such a model learned one embedding
per Unicode character it saw in training; any other character is its "unknown" character. A
token becomes ``max_chars`` ids: a begin marker, one id per character, an end marker, then
padding. Whole tokens of their own (the sentence boundaries ``<bos>``/``<eos>``) sit between
the markers as one id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class CharVocabulary:
    """A character dictionary and its special ids.

    ``ids`` maps a character to its embedding row; ``begin``, ``end``, ``unknown`` and
    ``padding`` are the rows of the word markers, of characters not in ``ids`` and of the
    filler after the end marker; ``whole_tokens`` maps tokens encoded as one id (not character
    by character) to theirs. ``max_chars`` counts the markers: a token keeps its first
    ``max_chars - 2`` characters (:meth:`clip`).
    """

    ids: Mapping[str, int]
    begin: int
    end: int
    unknown: int
    padding: int
    max_chars: int
    whole_tokens: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_chars < 3:
            raise ValueError(f"max_chars {self.max_chars}: a token needs its two markers and a character")

    @property
    def size(self) -> int:
        """Rows of the character embedding the ids index (the largest id + 1)."""
        specials = (self.begin, self.end, self.unknown, self.padding, *self.whole_tokens.values())
        return 1 + max(*self.ids.values(), *specials)

    def clip(self, token: str) -> str:
        """The token cut to the ``max_chars - 2`` characters that fit between the markers."""
        return token[: self.max_chars - 2]

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Ids ``(len(tokens), max_chars)`` int64 of tokens (each clipped first)."""
        out = np.full((len(tokens), self.max_chars), self.padding, dtype=np.int64)
        out[:, 0] = self.begin
        for row, token in enumerate(tokens):
            whole = self.whole_tokens.get(token)
            if whole is not None:
                chars = [whole]
            else:
                chars = [self.ids.get(c, self.unknown) for c in self.clip(token)]
            out[row, 1 : len(chars) + 1] = chars
            out[row, len(chars) + 1] = self.end
        return out
