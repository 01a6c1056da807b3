"""BERT's document context (``BertEncoder.embed_document``): the document read as one text in
the windows of ``window_spans``, each sentence yielded once its windows have run, the same bits
whatever ``pass_tokens``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, bert_terms

from contextvec.encoders.bert import BertEncoder, load_bert_encoder, window_spans
from contextvec.encoders.precision import apply_precision

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WINDOW = 16   # pieces per window: a ~200-word document runs as dozens of windows


@pytest.fixture(autouse=True)
def _one_thread():
    """Dozens of one-row calls on a tiny model: a second thread only waits on the first."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _document(n_sentences: int, seed: int = 0, empty_every: int = 0) -> list[list[str]]:
    """Sentences of 1-8 words of 1-3 letters (the tiny vocabulary: a letter per piece)."""
    rng = np.random.default_rng(seed)
    document = []
    for k in range(n_sentences):
        size = 0 if empty_every and k % empty_every == 0 else int(rng.integers(1, 9))
        lengths = rng.integers(1, 4, size=size)
        document.append(["".join(rng.choice(list(LETTERS), size=int(n))) for n in lengths])
    return document


def _words(document: list[list[str]]) -> list[str]:
    return [word for sentence in document for word in sentence]


def _cut(layers: np.ndarray, document: list[list[str]]) -> list[np.ndarray]:
    """``(num_layers, words, dim)`` of the whole document -> one array per sentence."""
    bounds = np.cumsum([0, *(len(s) for s in document)])
    return [layers[:, a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _forward(encoder: BertEncoder, words: list[str]) -> np.ndarray:
    with torch.inference_mode():
        return encoder([words]).layers[:, 0].float().numpy()


def _spans_of_sentence(encoder: BertEncoder, document: list[list[str]], k: int) -> tuple[int, int, int, int]:
    """Sentence ``k``'s pieces ``(first, end)`` and the pieces ``(lo, hi)`` of the windows that
    supply them (from ``window_spans`` on the document's pieces)."""
    pieces = encoder.tokenizer.encode_words(_words(document)).word_index[1:-1]
    before = sum(len(s) for s in document[:k])
    own = [p for p, w in enumerate(pieces) if before <= w < before + len(document[k])]
    first, end = own[0], own[-1] + 1
    spans = window_spans(len(pieces), encoder.window)
    supplying = [(s, e) for s, e, ks, ke in spans if ks < end and ke > first]
    return first, end, min(s for s, _ in supplying), max(e for _, e in supplying)


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_a_short_document_is_one_row_of_all_its_words(own_tiny_bert_dir, pooling):
    encoder = load_bert_encoder(own_tiny_bert_dir, subword_pooling=pooling)
    document = _document(6, seed=1)
    document[2] = []
    assert len(encoder.tokenizer.encode_words(_words(document)).ids) - 2 <= encoder.window
    got = list(encoder.embed_document(document))
    assert [g.shape for g in got] == [(3, len(s), 16) for s in document]
    assert all(g.dtype == np.float32 for g in got)
    # The same single row [CLS] document [SEP] with the same pieces read: the same products of
    # the same shapes, so the same bits.
    whole = encoder.embed([_words(document)])[0]
    for g, want in zip(got, _cut(whole, document), strict=True):
        np.testing.assert_array_equal(g, want)
    # Every sentence sees the whole document: the first one changes with the last.
    changed = [*document[:-1], [("x" if w[0] != "x" else "y") + w[1:] for w in document[-1]]]
    assert not np.allclose(next(encoder.embed_document(changed)), got[0], atol=1e-4)


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_a_long_document_reads_the_windows_of_one_sentence(own_tiny_bert_dir, pooling):
    encoder = load_bert_encoder(own_tiny_bert_dir, subword_pooling=pooling, window=WINDOW)
    document = _document(55, seed=2, empty_every=7)
    words = _words(document)
    assert len(words) > 180
    got = list(encoder.embed_document(document))
    assert [g.shape for g in got] == [(3, len(s), 16) for s in document]
    # ``forward`` reads one long sentence in the same windows; one window per call, it runs the
    # same products of the same shapes, so gives the same bits.
    encoder.max_pieces_per_call = 1
    for g, want in zip(got, _cut(_forward(encoder, words), document), strict=True):
        np.testing.assert_array_equal(g, want)
    # Batched windows sum the same products over other row counts.
    encoder.max_pieces_per_call = 16384
    terms = bert_terms(encoder.model.config, WINDOW + 2)
    assert_reordered_close(np.concatenate(got, 1), _forward(encoder, words), terms=terms)
    # Not a sentence at a time: the sentences' vectors differ from reading each alone.
    alone = encoder.embed([s for s in document if s])
    assert not np.allclose(np.concatenate(got, 1), np.concatenate(alone, 1), atol=1e-3)
    # Whatever pass_tokens, other documents or calls before: the same bits.
    list(encoder.embed_document(_document(5, seed=3)))
    for pass_tokens in (16, 64, 100_000):
        again = list(encoder.embed_document(document, pass_tokens=pass_tokens))
        for g, a in zip(got, again, strict=True):
            np.testing.assert_array_equal(a, g)


def test_a_sentence_depends_on_its_windows_only(own_tiny_bert_dir):
    encoder = load_bert_encoder(own_tiny_bert_dir, window=WINDOW)
    document = _document(24, seed=4)
    k = 12
    first, end, lo, hi = _spans_of_sentence(encoder, document, k)
    base = list(encoder.embed_document(document))

    def changed(j: int) -> list[np.ndarray]:
        # Another word of as many pieces: the windows stay where they are.
        edited = [list(s) for s in document]
        edited[j][0] = "".join("b" if c != "b" else "c" for c in edited[j][0])
        return list(encoder.embed_document(edited))

    # A neighbour whose first word lies in a window supplying sentence k's pieces.
    neighbour = changed(k + 1)
    assert end < hi
    assert not np.allclose(neighbour[k], base[k], atol=1e-4)
    # Sentences whose pieces all lie outside those windows, after and before it.
    pieces = [_spans_of_sentence(encoder, document, j)[:2] for j in range(len(document))]
    far_after = next(j for j in range(k + 1, len(document)) if pieces[j][0] >= hi)
    far_before = max(j for j in range(k) if pieces[j][1] <= lo)
    for j in (far_after, far_before):
        far = changed(j)
        assert not np.allclose(far[j], base[j], atol=1e-4)
        np.testing.assert_array_equal(far[k], base[k])


def test_each_sentence_is_yielded_once_its_last_window_has_run(own_tiny_bert_dir, monkeypatch):
    encoder = load_bert_encoder(own_tiny_bert_dir, window=WINDOW)
    document = _document(25, seed=5, empty_every=6)
    rows: list[list[int]] = []
    run = encoder.model.forward_unpadded

    def counting(ids, lengths, last_rows=None):
        rows.append(list(lengths))
        return run(ids, lengths, last_rows)

    monkeypatch.setattr(encoder.model, "forward_unpadded", counting)
    pieces = encoder.tokenizer.encode_words(_words(document)).word_index[1:-1]
    spans = window_spans(len(pieces), WINDOW)
    before = 0
    stream = encoder.embed_document(document)
    for sentence in document:
        own = [p for p, w in enumerate(pieces) if before <= w < before + len(sentence)]
        before += len(sentence)
        next(stream)
        # Windows run so far: up to the one supplying the sentence's last piece (for an empty
        # sentence, whatever ran for the sentence before it).
        if own:
            assert len(rows) == next(i for i, (_, _, _, ke) in enumerate(spans) if ke > own[-1]) + 1
    assert next(stream, None) is None
    # One window per call, every one [CLS] + WINDOW pieces + [SEP].
    assert rows == [[WINDOW + 2]] * len(spans)


def test_empty_sentences_add_no_pieces_to_mean_pooled_windows(own_tiny_bert_dir):
    # (The contract, test_encoder_contract.py, runs the default first-piece pooling.)
    encoder = load_bert_encoder(own_tiny_bert_dir, subword_pooling="mean", window=WINDOW)
    document = _document(12, seed=6)
    with_empty = [[], *document[:5], [], [], *document[5:], []]
    got = list(encoder.embed_document(with_empty))
    assert [g.shape[1] for g in got] == [len(s) for s in with_empty]
    # Empty sentences add no pieces: the others' vectors are those of the document without them.
    for g, want in zip([g for g in got if g.shape[1]], encoder.embed_document(document), strict=True):
        np.testing.assert_array_equal(g, want)


def test_mean_pooling_averages_a_words_pieces_across_windows(own_tiny_bert_dir):
    first = load_bert_encoder(own_tiny_bert_dir, subword_pooling="first", window=WINDOW)
    mean = load_bert_encoder(own_tiny_bert_dir, subword_pooling="mean", window=WINDOW)
    document = _document(20, seed=7)
    got_first = np.concatenate(list(first.embed_document(document)), 1)
    got_mean = np.concatenate(list(mean.embed_document(document)), 1)
    words = _words(document)
    one = np.array([len(w) == 1 for w in words])
    # A word of one piece: its piece's vectors either way (the last layer runs at the pieces
    # read only, more of them for the mean: the same sums over another row count there).
    np.testing.assert_array_equal(got_mean[:-1, one], got_first[:-1, one])
    assert_reordered_close(got_mean[-1, one], got_first[-1, one],
                           terms=bert_terms(mean.model.config, WINDOW + 2))
    # Longer words: the mean of their pieces is another vector.
    assert not np.allclose(got_mean[:, ~one], got_first[:, ~one], atol=1e-4)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_lower_precision_reads_the_same_windows(own_tiny_bert_dir, precision):
    encoder = apply_precision(load_bert_encoder(own_tiny_bert_dir, window=WINDOW), precision,
                              check_cpu=False)
    document = _document(12, seed=8)
    got = list(encoder.embed_document(document, pass_tokens=16))
    encoder.max_pieces_per_call = 1
    for g, want in zip(got, _cut(_forward(encoder, _words(document)), document), strict=True):
        np.testing.assert_array_equal(g, want)
    for g, again in zip(got, encoder.embed_document(document, pass_tokens=100_000), strict=True):
        np.testing.assert_array_equal(again, g)


def test_a_document_runs_in_eval_mode_and_the_callers_modes_are_kept(own_tiny_bert_dir):
    encoder = load_bert_encoder(own_tiny_bert_dir, window=WINDOW)
    document = _document(10, seed=9)
    want = list(encoder.embed_document(document))
    encoder.train()
    stream = encoder.embed_document(document)
    np.testing.assert_array_equal(next(stream), want[0])   # eval mode: no dropout
    # Between sentences the caller's modes are its own: training, gradients on.
    assert encoder.training and encoder.model.encoder.training
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    for g, w in zip(stream, want[1:], strict=True):
        np.testing.assert_array_equal(g, w)
