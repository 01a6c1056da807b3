"""The contract of every encoder family (``Encoder.embed``, ``embed_batches``,
``embed_document`` and ``contextvec.embed_document``'s offsets), run on a tiny seeded model of
each: ELMo, ELMoForManyLangs, CoVe and BERT. What one family does beyond it (parity with its
reference outputs, how its document context reads) stays in that family's tests.

Results that may sum in another order (another batch shape) are compared within
``tolerance.reorder_bound`` of the family's products per output; results computed by the same
calls are compared bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tiny_cove
from tolerance import assert_reordered_close, bert_terms, elmo_terms

import contextvec
from contextvec import DocumentSettings, Encoder

EFML = Path(__file__).resolve().parents[1] / "data" / "efml"
# Lower-case letters only: the tiny BERT's pieces are letters.
SENTENCES = [line.split() for line in (
    "the bank was robbed by a man .",
    "go",
    "we walked along the river to see the boats",
    "a man sat on the bank of the river and we saw him , zebra",
    "boats go",
)]
OUT_OF_VOCABULARY = {"zebra", "quixotic"}  # words the tiny CoVe has no vector for
VOCABULARY = sorted({w for s in SENTENCES for w in s} - OUT_OF_VOCABULARY)
# Long enough for several passes of every family's document blocks, with empty sentences.
LENGTHS = [7, 0, 12, 30, 1, 25, 0, 18, 9, 3]


def _document(seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    words = [*VOCABULARY, *sorted(OUT_OF_VOCABULARY)]
    return [[str(w) for w in rng.choice(words, size=n)] for n in LENGTHS]


DOCUMENT = _document()


@dataclass(frozen=True)
class Family:
    name: str
    load: Callable[[pytest.FixtureRequest], Encoder]
    terms: Callable[[Encoder], int]
    """Products summed on the way to one output (``tolerance``'s ``terms``)."""


def _manylangs_terms(encoder: Encoder) -> int:
    """As ``elmo_terms``, the word embedding entering the token projection beside the char-CNN."""
    config = encoder.config
    widest = max((width for width, _ in config.filters), default=0)
    tokens = config.char_dim * widest + (2 * config.n_highway + 1) * config.n_filters + config.word_dim
    return tokens + config.n_layers * (2 * config.projection_dim + config.lstm_dim)


def _cove_terms(encoder: Encoder) -> int:
    """Per MT-LSTM layer one step's gates: its input and its state."""
    config = encoder.config
    return config.input_dim + config.hidden_size + config.output_dim + config.hidden_size


def _load_cove(request: pytest.FixtureRequest) -> Encoder:
    directory = request.getfixturevalue("tmp_path_factory").mktemp("contract-cove") / "model"
    return contextvec.load(write_tiny_cove(directory, VOCABULARY))


FAMILIES = [
    Family("elmo", lambda r: contextvec.load(r.getfixturevalue("own_tiny_dir")),
           lambda e: elmo_terms(e.config)),
    Family("elmoformanylangs", lambda r: contextvec.load(EFML / "words"), _manylangs_terms),
    Family("cove", _load_cove, _cove_terms),
    Family("bert", lambda r: contextvec.load(r.getfixturevalue("own_tiny_bert_dir")),
           lambda e: bert_terms(e.model.config, e.model.config.max_position_embeddings)),
]


@dataclass(frozen=True)
class Case:
    encoder: Encoder
    terms: int

    def shape(self, tokens: int) -> tuple[int, int, int]:
        return (self.encoder.num_layers, tokens, self.encoder.output_dim)


@pytest.fixture(scope="module", params=FAMILIES, ids=lambda family: family.name)
def case(request) -> Case:
    encoder = request.param.load(request)
    return Case(encoder, request.param.terms(encoder))


def test_every_sentence_has_num_layers_by_tokens_by_dim_float32(case):
    encoder = case.encoder
    assert len(encoder.layer_names()) == encoder.num_layers
    vectors = encoder.embed(SENTENCES)
    assert [v.shape for v in vectors] == [case.shape(len(s)) for s in SENTENCES]
    assert all(v.dtype == np.float32 and np.isfinite(v).all() for v in vectors)
    # embed_batches gives each sentence once, under its index, as embed does.
    batches = list(encoder.embed_batches(SENTENCES))
    assert sorted(i for i, _ in batches) == list(range(len(SENTENCES)))
    for index, array in batches:
        np.testing.assert_array_equal(array, vectors[index])


def test_a_sentence_does_not_depend_on_its_batch(case):
    encoder = case.encoder
    alone = [encoder.embed([s], batch_size=1)[0] for s in SENTENCES]
    together = encoder.embed(SENTENCES, batch_size=len(SENTENCES))
    regrouped = encoder.embed(SENTENCES[::-1], batch_size=2, max_tokens=20)[::-1]
    for k, (a, b, c) in enumerate(zip(alone, together, regrouped, strict=True)):
        assert_reordered_close(b, a, terms=case.terms, msg=f"sentence {k} in one batch")
        assert_reordered_close(c, a, terms=case.terms, msg=f"sentence {k} in other batches")


def test_empty_sentences_have_no_tokens_and_change_nothing(case):
    encoder = case.encoder
    assert encoder.embed([]) == []
    [empty] = encoder.embed([[]])
    assert empty.shape == case.shape(0) and empty.dtype == np.float32
    given = [[], SENTENCES[0], "", SENTENCES[2], []]  # "" splits into no tokens
    mixed = encoder.embed(given)
    lengths = [0, len(SENTENCES[0]), 0, len(SENTENCES[2]), 0]
    assert [m.shape for m in mixed] == [case.shape(n) for n in lengths]
    for got, want in zip(mixed[1::2], encoder.embed([SENTENCES[0], SENTENCES[2]]), strict=True):
        np.testing.assert_array_equal(got, want)  # the same batch without them: the same bits
    [pooled] = encoder.embed([[]], pool="mean")
    np.testing.assert_array_equal(pooled, np.zeros((encoder.num_layers, encoder.output_dim), np.float32))


def test_the_same_call_twice_gives_the_same_bits(case):
    first = case.encoder.embed(SENTENCES)
    second = case.encoder.embed(SENTENCES)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_document_is_the_same_bits_whatever_its_passes(case):
    encoder = case.encoder
    reference = list(encoder.embed_document(DOCUMENT, pass_tokens=10**6))
    assert [r.shape for r in reference] == [case.shape(len(s)) for s in DOCUMENT]
    assert all(r.dtype == np.float32 and np.isfinite(r).all() for r in reference)
    for pass_tokens in (1, 10**6):  # passes of a block each; one pass again
        again = list(encoder.embed_document(DOCUMENT, pass_tokens=pass_tokens))
        for k, (a, b) in enumerate(zip(again, reference, strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"pass_tokens={pass_tokens}, sentence {k}")


def test_a_documents_empty_sentences_have_no_tokens_and_change_nothing(case):
    encoder = case.encoder
    assert list(encoder.embed_document([])) == []
    assert [e.shape for e in encoder.embed_document([[], []])] == [case.shape(0)] * 2
    document = DOCUMENT[2:5]  # one of them empty already
    with_empties = [[], *document[:2], [], document[2], []]
    got = list(encoder.embed_document(with_empties))
    assert [g.shape for g in got] == [case.shape(len(s)) for s in with_empties]
    nonempty = [g for g in got if g.shape[1]]
    for g, want in zip(nonempty, encoder.embed_document([s for s in document if s]), strict=True):
        np.testing.assert_array_equal(g, want)


def test_a_one_sentence_document_is_the_sentence(case):
    for sentence in (SENTENCES[0], SENTENCES[3]):
        [got] = case.encoder.embed_document([sentence])
        assert_reordered_close(got, case.encoder.embed([sentence])[0], terms=case.terms)


def test_a_documents_bad_arguments_are_refused_at_the_call(case):
    for pass_tokens in (0, -64, 1.5, True):
        with pytest.raises(ValueError, match="pass_tokens must be a positive integer"):
            case.encoder.embed_document(SENTENCES, pass_tokens=pass_tokens)
    with pytest.raises(TypeError, match="a document must be a list of sentences, not a single str"):
        case.encoder.embed_document("the bank was robbed")


@pytest.mark.parametrize("context", ["sentence", "document"])
def test_offsets_name_each_tokens_characters(case, context):
    lines = ["  the bank  was robbed .", "", "we walked along\tthe river ", "go"]
    text = "\n".join(lines)
    result = contextvec.embed_document(case.encoder, text, DocumentSettings(context=context))
    tokens = [line.split() for line in lines if line.strip()]  # a blank line is no sentence
    assert result.tokens == tokens
    assert [o.shape for o in result.offsets] == [(len(s), 2) for s in tokens]
    assert all(o.dtype == np.int64 for o in result.offsets)
    assert [[text[a:b] for a, b in o] for o in result.offsets] == tokens
    assert [v.shape for v in result.vectors] == [case.shape(len(s)) for s in tokens]
    if context == "document":
        for got, want in zip(result.vectors, case.encoder.embed_document(tokens), strict=True):
            np.testing.assert_array_equal(got, want)
    else:
        for got, want in zip(result.vectors, case.encoder.embed(tokens), strict=True):
            assert_reordered_close(got, want, terms=case.terms)
