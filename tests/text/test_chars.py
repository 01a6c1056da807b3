"""ELMo character ids: parity with allennlp's ``batch_to_ids`` and the byte-level rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_io import reference_expected, reference_sentences
from hypothesis import given, settings
from hypothesis import strategies as st

from contextvec.text.chars import (
    BOS_IDS,
    EOS_IDS,
    MAX_BYTES_PER_TOKEN,
    MAX_CHARS_PER_TOKEN,
    batch_to_char_ids,
    token_to_char_ids,
)

BOW, EOW, PAD = 259, 260, 261


def _ids(token: str) -> list[int]:
    return batch_to_char_ids([[token]])[0, 0].tolist()


def test_reference_char_ids_all_sentences():
    sentences = reference_sentences("elmo-tiny")
    expected = reference_expected("elmo-tiny")
    assert len(sentences) == 64
    for i, tokens in enumerate(sentences):
        assert list(tokens) == str(expected["sentences"][i]).split()
        want = expected[f"char_ids_{i:03d}"]
        got = batch_to_char_ids([list(tokens)])[0]
        assert got.dtype == torch.int64
        assert got.shape == want.shape == (len(tokens), 50), i
        assert np.array_equal(got.numpy(), want), f"sentence {i}: {tokens}"


def test_reference_char_ids_whole_batch():
    # the same ids when all 64 sentences form one padded batch
    sentences = [list(s) for s in reference_sentences("elmo-tiny")]
    expected = reference_expected("elmo-tiny")
    batch = batch_to_char_ids(sentences)
    assert batch.shape == (64, max(map(len, sentences)), 50)
    for i, tokens in enumerate(sentences):
        assert np.array_equal(batch[i, : len(tokens)].numpy(), expected[f"char_ids_{i:03d}"])
        assert not batch[i, len(tokens) :].any()


def test_single_char():
    assert _ids("a") == [BOW, ord("a") + 1, EOW] + [PAD] * 47


def test_empty_token():
    assert _ids("") == [BOW, EOW] + [PAD] * 48


def test_multibyte_chars():
    # é = c3 a9, € = e2 82 ac, 😀 = f0 9f 98 80 ; every byte is shifted by 1
    token = "é€😀"
    data = token.encode("utf-8")
    assert len(data) == 9
    assert _ids(token) == [BOW, *[b + 1 for b in data], EOW] + [PAD] * 39


def test_long_ascii_token_cut_to_48_bytes():
    token = "".join(chr(ord("a") + i % 26) for i in range(60))
    ids = _ids(token)
    assert len(ids) == 50
    assert ids[0] == BOW
    assert ids[1:49] == [ord(c) + 1 for c in token[:48]]
    assert ids[49] == EOW
    assert PAD not in ids
    # exactly 48 bytes: the same, and nothing cut
    assert _ids(token[:48]) == ids


def test_cut_inside_two_byte_char():
    token = "x" * 47 + "é" + "yy"  # bytes 0..46 'x', 47..48 'é', the cut keeps c3 only
    ids = _ids(token)
    assert ids[:48] == [BOW] + [ord("x") + 1] * 47
    assert ids[48] == 0xC3 + 1
    assert ids[49] == EOW
    assert 0xA9 + 1 not in ids


def test_reference_has_cut_inside_multibyte_char():
    # the fixture's token whose 48-byte cut splits a character is covered by the parity test
    tokens = {t for s in reference_sentences("elmo-tiny") for t in s}
    split = []
    for t in tokens:
        data = t.encode("utf-8")
        if len(data) > MAX_BYTES_PER_TOKEN:
            try:
                data[:MAX_BYTES_PER_TOKEN].decode("utf-8")
            except UnicodeDecodeError:
                split.append(t)
    assert split, "fixture lost its split-character token"
    for t in split:
        assert _ids(t)[1:49] == [b + 1 for b in t.encode("utf-8")[:48]]


def test_lone_surrogate_is_dropped():
    assert _ids("a\ud800b") == _ids("ab")


def test_nul_byte_is_id_1():
    assert _ids("\x00")[:3] == [BOW, 1, EOW]


def test_literal_boundary_tokens_get_the_boundary_rows():
    # allennlp's ELMoCharacterMapper and bilm-tf's vocabulary: a token that is exactly <S> or
    # </S> is the sentence boundary (raw 256 / 257 between begin- and end-of-word, all + 1).
    bos, eos = [BOW, 257, EOW] + [PAD] * 47, [BOW, 258, EOW] + [PAD] * 47
    batch = batch_to_char_ids([["<S>", "and", "</S>"]])[0].tolist()
    assert batch == [bos, _ids("and"), eos]
    assert token_to_char_ids("<S>").tolist() == bos and token_to_char_ids("</S>").tolist() == eos
    assert BOS_IDS.tolist() == bos and EOS_IDS.tolist() == eos
    for token in ("<s>", "</s>", "<S>.", " <S>"):  # only the exact spellings
        assert _ids(token)[1 : len(token) + 1] == [ord(c) + 1 for c in token], token


def test_padding_rows_all_zero():
    batch = batch_to_char_ids([["The", "cat", "sat"], ["Hi"], []])
    assert batch.shape == (3, 3, 50)
    assert batch.dtype == torch.int64
    assert batch[0].ne(0).all()
    assert batch[1, 0].tolist() == _ids("Hi")
    assert not batch[1, 1:].any()
    assert not batch[2].any()


def test_empty_batches():
    assert batch_to_char_ids([]).shape == (0, 0, 50)
    assert batch_to_char_ids([[], []]).shape == (2, 0, 50)


def test_token_to_char_ids_is_a_fresh_array():
    a = token_to_char_ids("cached")
    a[1] = 0
    b = token_to_char_ids("cached")
    assert b[1] == ord("c") + 1
    assert b.dtype == np.int64
    assert b.shape == (MAX_CHARS_PER_TOKEN,)


def test_batch_tensor_is_writable_and_independent():
    first = batch_to_char_ids([["dog"]])
    first[0, 0, 1] = 0
    assert batch_to_char_ids([["dog"]])[0, 0, 1] == ord("d") + 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_property_any_text_token(token):
    ids = token_to_char_ids(token)
    assert ids.shape == (50,)
    assert ids[0] == BOW
    assert int((ids == EOW).sum()) == 1
    assert ids.min() >= 1 and ids.max() <= 261
    data = token.encode("utf-8", "ignore")[:MAX_BYTES_PER_TOKEN]
    n = len(data)
    assert ids[1 : n + 1].tolist() == [b + 1 for b in data]
    assert ids[n + 1] == EOW
    assert (ids[n + 2 :] == PAD).all()
    assert batch_to_char_ids([[token]])[0, 0].tolist() == ids.tolist()


@pytest.mark.parametrize("token", ["a" * 47, "a" * 48, "a" * 49])
def test_cut_boundary(token):
    ids = _ids(token)
    n = min(len(token), 48)
    assert ids[n + 1] == EOW
    assert ids.count(ord("a") + 1) == n
