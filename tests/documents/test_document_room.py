"""The documents room: a document's sentences in sentence or document context, their character
offsets, and late chunking (chunks pooled after the document's pass)."""

from __future__ import annotations

import numpy as np
import pytest
from tolerance import FP32_EPS

import contextvec
from contextvec.documents import DocumentSettings, embed_document, embed_documents

TEXT = "The bank was robbed .\n\nWe sat on the bank of the river .\n  It rained  all day ."


@pytest.fixture(scope="module")
def encoder(own_tiny_dir):
    return contextvec.load(own_tiny_dir)


def _sentences(text):
    return [line.split() for line in text.splitlines() if line.split()]


def test_sentence_context_gives_what_embed_gives(encoder):
    got = embed_document(encoder, TEXT)
    want = encoder.embed(_sentences(TEXT))
    assert got.tokens == _sentences(TEXT)
    assert len(got.vectors) == 3
    for g, w in zip(got.vectors, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_offsets_point_at_each_token_in_the_text(encoder):
    got = embed_document(encoder, TEXT, DocumentSettings(layers="top"))
    for tokens, offsets in zip(got.tokens, got.offsets, strict=True):
        assert offsets.shape == (len(tokens), 2)
        assert [TEXT[s:e] for s, e in offsets] == tokens
    assert got.vectors[2].shape == (5, encoder.output_dim)


def test_document_context_is_the_encoders_document_pass(encoder):
    got = embed_document(encoder, TEXT, DocumentSettings(context="document"))
    want = list(encoder.embed_document(_sentences(TEXT)))
    for g, w in zip(got.vectors, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # the first sentence's backward LM has read the rest of the document
    alone = encoder.embed([_sentences(TEXT)[0]])[0]
    assert not np.allclose(got.vectors[0][1:], alone[1:], atol=1e-4)


@pytest.mark.parametrize("pool", ["mean", "max", "first"])
def test_chunks_pool_consecutive_tokens_across_sentences(encoder, pool):
    settings = DocumentSettings(layers="average", chunk_tokens=4, pool=pool)
    got = embed_document(encoder, TEXT, settings)
    tokens = np.concatenate(encoder.embed(_sentences(TEXT), layers="average"))
    assert got.vectors is None
    assert got.chunk_tokens.tolist() == [[0, 4], [4, 8], [8, 12], [12, 16], [16, 19]]
    for (lo, hi), vector in zip(got.chunk_tokens, got.chunks, strict=True):
        part = tokens[lo:hi]
        want = {"mean": part.mean(0, dtype=np.float64), "max": part.max(0), "first": part[0]}[pool]
        np.testing.assert_allclose(vector, want, rtol=0, atol=4 * FP32_EPS * np.abs(part).max())
    starts, ends = got.chunk_offsets.T
    assert TEXT[starts[1]:ends[1]] == ".\n\nWe sat on"


def test_spans_pool_the_tokens_they_overlap(encoder):
    river = TEXT.index("bank of the river")
    # "nk o" overlaps "bank" and "of"
    spans = [(river, river + len("bank of the river")), (river + 2, river + 6), (0, len(TEXT))]
    got = embed_document(encoder, TEXT, DocumentSettings(layers="all"), spans=spans)
    tokens = np.concatenate(encoder.embed(_sentences(TEXT)), axis=1)
    assert got.chunk_tokens.tolist() == [[9, 13], [9, 11], [0, 19]]
    assert got.chunks.shape == (3, encoder.num_layers, encoder.output_dim)
    scale = np.abs(tokens).max()
    np.testing.assert_allclose(got.chunks[0], tokens[:, 9:13].mean(1), rtol=0, atol=4 * FP32_EPS * scale)
    np.testing.assert_allclose(got.chunks[1], tokens[:, 9:11].mean(1), rtol=0, atol=4 * FP32_EPS * scale)


@pytest.mark.parametrize(("spans", "message"), [
    ([(3, 3)], r"spans\[0\]: \(3, 3\) is not inside"),
    ([(0, 10_000)], "not inside the text"),
    ([(21, 23)], r"spans\[0\]: \(21, 23\) covers no token"),
    ([(0, 1, 2)], "expected two integers"),
])
def test_bad_spans_are_one_line_errors(encoder, spans, message):
    with pytest.raises(ValueError, match=message):
        embed_document(encoder, TEXT, spans=spans)


def test_spans_need_text_and_exclude_chunk_tokens(encoder):
    with pytest.raises(ValueError, match="give the document as text"):
        embed_document(encoder, [["a", "b"]], spans=[(0, 1)])
    with pytest.raises(ValueError, match="not both"):
        embed_document(encoder, TEXT, DocumentSettings(chunk_tokens=2), spans=[(0, 3)])


def test_token_lists_and_lines_are_documents_too(encoder):
    from_lines = embed_document(encoder, TEXT.splitlines())
    from_tokens = embed_document(encoder, _sentences(TEXT))
    assert from_tokens.offsets is None
    for a, b in zip(from_lines.vectors, from_tokens.vectors, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="not a mix"):
        embed_document(encoder, ["a b", ["c"]])


def test_many_documents_do_not_depend_on_each_other(encoder):
    settings = DocumentSettings(context="document", pool="mean")
    both = list(embed_documents(encoder, [TEXT, "Another one here ."], settings))
    alone = embed_document(encoder, "Another one here .", settings)
    np.testing.assert_array_equal(both[1].vectors[0], alone.vectors[0])
    with pytest.raises(TypeError, match="list of documents"):
        list(embed_documents(encoder, TEXT))


def test_settings_are_checked_once():
    with pytest.raises(ValueError, match="context must be one of sentence, document"):
        DocumentSettings(context="paragraph")
    with pytest.raises(ValueError, match="chunk_tokens must be a positive integer"):
        DocumentSettings(chunk_tokens=0)


@pytest.mark.parametrize("chunk_tokens", [None, 4])
def test_embedding_a_file_of_documents_shows_a_bar_of_its_sentences(encoder, tmp_path, capsys, chunk_tokens):
    from contextvec.documents.hdf5 import embed_documents_to_hdf5

    source = tmp_path / "docs.txt"
    source.write_text("The bank was robbed .\nPolice came .\n\nAnother one here .\n", encoding="utf-8")
    settings = DocumentSettings(context="document", chunk_tokens=chunk_tokens)
    embed_documents_to_hdf5(encoder, source, tmp_path / "a.h5", settings)
    bar = capsys.readouterr().err.rstrip().rsplit("\r", 1)[-1]
    assert bar.startswith("embed: 3sent") and "2 doc" in bar
    embed_documents_to_hdf5(encoder, source, tmp_path / "b.h5", settings, progress=False)
    assert capsys.readouterr().err == ""
