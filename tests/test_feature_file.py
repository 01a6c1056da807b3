"""Reading a feature cache entry through :class:`~contextvec.features.FeatureFile` (the one reader of
its layout): blocks of whole sentences, layers in the stored dtype, layers mapped from the file."""

from __future__ import annotations

import numpy as np
import pytest

import contextvec
from contextvec.features import FeatureFile, FeatureSettings, cached_features

SENTENCES = [["the", "bank", "was", "robbed"], ["we", "sat", "on", "the", "river", "bank"], ["a"],
             ["a", "bank"]]


@pytest.fixture(scope="module", params=["float32", "float16"])
def entry(request, tmp_path_factory, own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    settings = FeatureSettings(cache_dir=tmp_path_factory.mktemp("cache"), dtype=request.param)
    return cached_features(encoder, SENTENCES, settings, progress=False), np.dtype(request.param)


@pytest.mark.parametrize("max_tokens", [1, 6, 10, 11, 1000])
def test_blocks_hold_whole_sentences_once_in_order(entry, max_tokens):
    path, _ = entry
    with FeatureFile.open(path) as features:
        blocks = list(features.blocks(max_tokens))
        sentences = [features.sentence(i) for i in range(len(features))]
    assert [i for ids, _ in blocks for i in ids] == list(range(len(SENTENCES)))
    for ids, layers in blocks:
        assert len(ids) == 1 or layers.shape[1] <= max_tokens  # a longer sentence comes alone
        assert layers.dtype == np.float32
        np.testing.assert_array_equal(layers, np.concatenate([sentences[i] for i in ids], axis=1))
    if max_tokens == 10:  # 4 + 6 tokens fit; the next sentence starts a block
        assert [ids for ids, _ in blocks] == [[0, 1], [2, 3]]


def test_stored_and_mapped_layers_keep_the_stored_dtype(entry):
    path, dtype = entry
    with FeatureFile.open(path) as features:
        every = features.all_layers()
        stored, last = features.stored_layers(), features.stored_layers(features.num_layers - 1)
        mapped = features.mapped_layers()
        shape = (features.num_layers, sum(map(len, SENTENCES)), features.dim)
    assert stored.dtype == mapped.dtype == last.dtype == dtype
    assert isinstance(mapped, np.memmap)  # the cache writes a contiguous dataset
    assert stored.shape == mapped.shape == shape
    np.testing.assert_array_equal(stored.astype(np.float32), every)
    np.testing.assert_array_equal(mapped, stored)  # still readable after the file was closed
    np.testing.assert_array_equal(last, stored[-1:])
