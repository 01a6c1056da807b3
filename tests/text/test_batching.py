"""length_batches: every index once, longest first, within batch_size and max_tokens."""

from __future__ import annotations

import pytest
from helpers_io import reference_sentences
from hypothesis import given, settings
from hypothesis import strategies as st

from contextvec.text.batching import length_batches


def _check(lengths: list[int], batch_size: int, max_tokens: int | None) -> list[list[int]]:
    batches = length_batches(lengths, batch_size, max_tokens)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths))), "each index exactly once"
    assert all(b for b in batches), "no empty batch"
    for b in batches:
        assert len(b) <= batch_size
        longest = max(lengths[i] for i in b)
        if max_tokens is not None and len(b) > 1:
            assert len(b) * longest <= max_tokens
        if max_tokens is not None and longest > max_tokens:
            assert len(b) == 1, "an item longer than max_tokens goes alone"
    # longest first, overall and within each batch
    flat_lengths = [lengths[i] for i in flat]
    assert flat_lengths == sorted(flat_lengths, reverse=True)
    # greedy: a batch is only closed when the next item would not fit
    for b, nxt in zip(batches, batches[1:], strict=False):
        longest = lengths[b[0]]
        assert len(b) == batch_size or (
            max_tokens is not None and (len(b) + 1) * longest > max_tokens
        )
        assert lengths[nxt[0]] <= longest
    return batches


def test_simple_batch_size():
    lengths = [3, 9, 1, 7, 5]
    assert length_batches(lengths, 2) == [[1, 3], [4, 0], [2]]


def test_batch_size_one():
    assert length_batches([2, 5, 3], 1) == [[1], [2], [0]]


def test_max_tokens_limits_padded_size():
    lengths = [10, 10, 10, 4, 4, 4, 4, 4]
    batches = _check(lengths, batch_size=100, max_tokens=20)
    assert batches == [[0, 1], [2, 3], [4, 5, 6, 7]]


def test_long_item_alone():
    lengths = [5, 500, 5, 5, 40]
    batches = _check(lengths, batch_size=8, max_tokens=64)
    assert batches[0] == [1]
    assert [4] in batches
    assert batches[-1] == [0, 2, 3]


def test_all_items_longer_than_max_tokens():
    assert length_batches([100, 200, 150], 4, max_tokens=50) == [[1], [2], [0]]


def test_max_tokens_exact_fit():
    # 4 * 8 = 32 tokens fits exactly; a 5th would make 40
    assert length_batches([8] * 5, 10, max_tokens=32) == [[0, 1, 2, 3], [4]]


def test_stable_for_equal_lengths():
    assert length_batches([2, 2, 2, 2], 3) == [[0, 1, 2], [3]]


def test_zero_lengths_and_empty_input():
    assert length_batches([], 4) == []
    assert length_batches([], 4, max_tokens=10) == []
    _check([0, 0, 3, 0], 2, max_tokens=1)


def test_invalid_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        length_batches([1, 2], 0)


def test_reference_lengths():
    # the README's reference setting: 64 sentences of 1..60 tokens, batches of 32, 4096 tokens
    lengths = [len(s) for s in reference_sentences("elmo-tiny")]
    assert len(lengths) == 64 and max(lengths) == 60
    batches = _check(lengths, 32, 4096)
    assert [len(b) for b in batches] == [32, 32]
    batches = _check(lengths, 32, 256)
    assert batches[0] == [25, 61, 41, 53]  # 4 * 60 = 240 <= 256 < 5 * 60


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=0, max_value=120), max_size=60),
    batch_size=st.integers(min_value=1, max_value=12),
    max_tokens=st.one_of(st.none(), st.integers(min_value=1, max_value=400)),
)
def test_property(lengths, batch_size, max_tokens):
    _check(lengths, batch_size, max_tokens)
