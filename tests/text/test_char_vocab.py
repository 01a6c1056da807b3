"""Character ids from a model's own character dictionary (ELMoForManyLangs' scheme)."""

from __future__ import annotations

import numpy as np
import pytest

from contextvec.text.char_vocab import CharVocabulary

VOCAB = CharVocabulary({"a": 0, "ä": 1, "天": 2}, begin=3, end=4, unknown=5, padding=6, max_chars=6,
                       whole_tokens={"<bos>": 7})


def test_tokens_become_markers_characters_and_padding():
    ids = VOCAB.encode(["aä", "天x", "", "<bos>"])
    np.testing.assert_array_equal(ids, [
        [3, 0, 1, 4, 6, 6],  # one id per Unicode character, not per UTF-8 byte
        [3, 2, 5, 4, 6, 6],  # an unknown character
        [3, 4, 6, 6, 6, 6],
        [3, 7, 4, 6, 6, 6],  # a whole token of its own
    ])
    assert VOCAB.size == 8


def test_long_tokens_keep_what_fits_between_the_markers():
    assert VOCAB.clip("aaaaaaa") == "aaaa"
    np.testing.assert_array_equal(VOCAB.encode(["ääääää"]), [[3, 1, 1, 1, 1, 4]])
    with pytest.raises(ValueError, match="needs its two markers"):
        CharVocabulary({}, 0, 1, 2, 3, max_chars=2)
