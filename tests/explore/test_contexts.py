"""A word across contexts and its nearest corpus contexts, per layer, on the bundled model
(``contextvec.explore.contexts``), checked against cosines computed here from ``Encoder.embed``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from tolerance import FP16_EPS, FP32_EPS, assert_reordered_close

import contextvec
from contextvec.explore.contexts import (
    ContextIndex,
    nearest_sense,
    read_marked,
    sense_separation,
    word_across_contexts,
)

SENTENCES = [s.split() for s in (
    "We had a picnic on the bank of the river .",
    "The boat drifted slowly towards the muddy bank .",
    "She deposited the cheque at the bank before noon .",
    "The bank on the other end of the street was robbed .",
)]
CORPUS = [s.split() for s in (
    "We walked along the bank of the river at sunset .",
    "She opened a savings account at the bank near her office .",
    "The children fished from the grassy bank of the stream .",
    "Thieves broke into the bank and emptied the safe .",
    "We had a picnic on the bank of the river .",
    "The match ended in a draw after extra time .",
)]


@pytest.fixture(scope="module")
def encoder():
    return contextvec.load("elmo-en-small")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_every_pair_of_occurrences_has_the_cosine_of_their_vectors(encoder):
    layers = encoder.embed(SENTENCES)
    result = word_across_contexts(layers, SENTENCES, "bank")
    assert result.occurrences == [(0, 6), (1, 7), (2, 6), (3, 1)] and result.total == 4
    expected = np.array([[[cosine(layers[i][k, p], layers[j][k, q]) for j, q in result.occurrences]
                          for i, p in result.occurrences] for k in range(encoder.num_layers)])
    # a cosine sums dim products, three times (the dot product and two norms)
    assert_reordered_close(result.similarity, expected, terms=3 * encoder.output_dim)
    assert np.allclose(result.similarity[0], 1.0, atol=encoder.output_dim * FP32_EPS)  # the char-CNN
    river_money = result.similarity[:, 0, 2]
    assert river_money[-1] < river_money[0] - 0.1  # the top layer tells the senses apart
    for k in range(encoder.num_layers):
        upper = expected[k][np.triu_indices(4, k=1)]
        closest, farthest = result.closest[k], result.farthest[k]
        assert closest.first < closest.second and farthest.first < farthest.second
        assert closest.similarity == pytest.approx(upper.max(), abs=1e-5)
        assert farthest.similarity == pytest.approx(upper.min(), abs=1e-5)
    assert (result.farthest[-1].first, result.farthest[-1].second) in {(0, 3), (1, 3), (0, 2), (1, 2)}


def test_case_and_a_limit_on_the_occurrences_compared(encoder):
    sentences = [["Bank", "holidays"], ["the", "bank", "and", "the", "bank"], ["a", "BANK"]]
    layers = encoder.embed(sentences)
    assert word_across_contexts(layers, sentences, "bank").occurrences == [(1, 1), (1, 4)]
    result = word_across_contexts(layers, sentences, "bank", ignore_case=True, most=3)
    assert result.occurrences == [(0, 0), (1, 1), (1, 4)] and result.total == 4
    assert result.similarity.shape == (encoder.num_layers, 3, 3)


@pytest.mark.parametrize("sentences, message", [
    ([["the", "bank"], ["a", "river"]], "'bank' occurs once in the sentences"),
    ([["a", "river"]], "'bank' does not occur in the sentences"),
])
def test_a_word_that_occurs_less_than_twice_is_refused(encoder, sentences, message):
    with pytest.raises(ValueError, match=message):
        word_across_contexts(encoder.embed(sentences), sentences, "bank")


def test_layer_names_say_what_each_layer_is(encoder, own_tiny_bert_dir):
    """Each family names its own layers; an encoder that does not (a fixed mix of another's
    layers) gets plain numbers."""
    from contextvec.tasks.models.contextual import FixedLayers

    assert encoder.layer_names() == ["0 char-CNN", "1 biLSTM-1", "2 biLSTM-2"]
    assert encoder.token_layer_context_free
    cove = contextvec.load("cove-en-multi30k")
    assert cove.layer_names() == ["0 word vectors", "1 MT-LSTM-1", "2 MT-LSTM-2"]
    assert cove.token_layer_context_free
    bert = contextvec.load(own_tiny_bert_dir)
    assert bert.layer_names() == ["0 embeddings", "1 transformer-1", "2 transformer-2"]
    assert not bert.token_layer_context_free
    assert FixedLayers(encoder, "last").layer_names() == ["0 layer 0"]


def test_nearest_contexts_rank_the_corpus_by_cosine_per_layer(encoder, tmp_path):
    index = ContextIndex.build(encoder, CORPUS, cache_dir=tmp_path, progress=False, label="corpus")
    assert index.num_tokens == sum(map(len, CORPUS)) and index.count("bank") == 5
    query = SENTENCES[0]
    vectors = encoder.embed([query] + CORPUS)
    ranked = index.nearest(vectors[0][:, 6], "bank", top_k=3, skip=query)
    bank = [(i, s.index("bank")) for i, s in enumerate(CORPUS) if "bank" in s and s != query]
    for k, contexts in enumerate(ranked):
        expected = sorted(((cosine(vectors[0][k, 6], vectors[1 + i][k, j]), i, j) for i, j in bank),
                          key=lambda t: -t[0])
        # the corpus's vectors are stored as float16: each element rounds once, the cosine moves
        # by about float16's epsilon
        assert_reordered_close(np.array([c.similarity for c in contexts]),
                               np.array([e[0] for e in expected[:3]]), terms=2, eps=FP16_EPS)
        assert len(contexts) == 3 and all(c.sentence != 4 for c in contexts)  # the query's own: skipped
    top = ranked[-1][0]
    assert CORPUS[top.sentence][top.position] == "bank" and "river" in CORPUS[top.sentence]
    assert index.nearest(vectors[0][:, 6], "bank", top_k=9)[-1][0].sentence == 4  # not skipped
    with pytest.raises(ValueError, match="'robbed' does not occur in the corpus"):
        index.nearest(vectors[0][:, 6], "robbed")


def test_the_corpus_vectors_are_cached(encoder, tmp_path):
    first = ContextIndex.build(encoder, CORPUS, cache_dir=tmp_path, progress=False)
    stamp = first.path.stat().st_mtime_ns
    again = ContextIndex.build(encoder, CORPUS, cache_dir=tmp_path, progress=False)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    assert np.array_equal(np.asarray(again.layers), np.asarray(first.layers))
    assert ContextIndex.build(encoder, CORPUS[:2], cache_dir=tmp_path, progress=False).path != first.path


def hand_built(layers: list[list[list[float]]]) -> list[np.ndarray]:
    """One-token sentences whose ``(num_layers, 1, dim)`` arrays are given per sentence."""
    return [np.array(sentence, dtype=np.float32)[:, None, :] for sentence in layers]


# Four one-word sentences of two senses; per sentence, three layers of 2-d vectors: layer 0 the
# same vector everywhere, layer 1 the senses on two axes, layer 2 the senses crossed.
SENSES = ["river", "money", "river", "money"]
LAYERS = hand_built([[[1, 0], [1, 0], [1, 0]],
                     [[1, 0], [0, 1], [1, 0]],
                     [[1, 0], [1, 0.1], [0, 1]],
                     [[1, 0], [0, 1], [0, 1]]])
NAMES = ["0 char-CNN", "1 biLSTM-1", "2 biLSTM-2"]


def test_sense_separation_compares_same_sense_pairs_with_different_sense_pairs():
    result = word_across_contexts(LAYERS, [["bank"]] * 4, "bank")
    separation = sense_separation(result, SENSES, NAMES)
    assert separation.senses == SENSES and separation.best == 1
    flat, apart, crossed = separation.layers
    # float32 cosines of 2-d vectors: a few roundings of values up to 1
    close = functools.partial(pytest.approx, abs=8 * FP32_EPS)
    assert (flat.same, flat.different, flat.separates) == (close(1.0), close(1.0), False)
    assert flat.verdict() == "margin 0.000: does not separate the senses"
    # layer 1: same-sense pairs (0, 2) and (1, 3); the other four pairs differ in sense
    cos = 1 / np.hypot(1, 0.1)
    assert apart.means == {"river": close(cos), "money": close(1.0), "river/money": close(0.1 * cos / 2)}
    assert apart.margin == close((1 + cos) / 2 - 0.1 * cos / 2)
    assert apart.separates and apart.every_pair
    assert crossed.margin == close(-0.5) and not crossed.separates
    assert separation.summary() == (
        f"biLSTM-1 separates the senses best, by a margin of {apart.margin:.3f} (same-sense pairs "
        f"{apart.same:.3f} on average, different-sense pairs {apart.different:.3f}; every same-sense "
        "pair is closer than every different-sense pair). No other layer separates them.")


def test_when_no_layer_separates_the_senses_the_summary_says_so():
    result = word_across_contexts(LAYERS, [["bank"]] * 4, "bank")
    separation = sense_separation(result, ["river", "money", "money", "river"], NAMES)
    assert separation.best is None and not any(s.separates for s in separation.layers)
    assert separation.summary() == (
        "No layer separates the senses: in every layer, pairs of different senses are on average "
        "as close as pairs of the same sense, or closer (the largest margin, char-CNN's, is 0.000).")


@pytest.mark.parametrize("senses, message", [
    (["river"] * 4, "no two occurrences of different senses"),
    (["river", "money", "mud", "cash"], "no two occurrences of the same sense"),
    (["river", "money"], "2 senses for sentences up to #4: give one sense per sentence"),
])
def test_senses_that_cannot_be_compared_are_refused(senses, message):
    result = word_across_contexts(LAYERS, [["bank"]] * 4, "bank")
    with pytest.raises(ValueError, match=message):
        sense_separation(result, senses, NAMES)


def test_sense_marks_are_read_off_the_lines():
    assert read_marked(["[river] We sat on the bank .", "", "  [money]  The bank was robbed . ",
                        "[not a mark] bank", "A bank ."]) == (
        ["We sat on the bank .", "The bank was robbed .", "[not a mark] bank", "A bank ."],
        ["river", "money", None, None])


@pytest.mark.parametrize("ranked, expected", [
    ([(0.9, "river"), (0.8, "money"), (0.7, "river")],
     "2 of the 3 nearest share its sense (river); the nearest is of its sense (0.900; of another: 0.800)"),
    ([(0.9, "money"), (0.8, "river")],
     "1 of the 2 nearest share its sense (river); the nearest is of another sense (money, 0.900; "
     "its own sense: 0.800)"),
    ([(1.0, "money"), (0.99996, "river")],
     "1 of the 2 nearest share its sense (river); the nearest of its sense and of another (money) "
     "tie at 1.000"),
    ([(0.9, "money")], "no context of its sense (river) is in the set"),
])
def test_whether_the_nearest_context_shares_the_querys_sense(ranked, expected):
    assert nearest_sense("river", ranked, 3) == expected


def test_the_bundled_demo_word_is_separated_by_the_bundled_model(encoder):
    """The demo's and the page's example: the bundled model separates its senses (the words
    would say so either way; this keeps the example one that shows something)."""
    from importlib import resources

    lines = resources.files("contextvec.data").joinpath("demo_senses.txt").read_text("utf-8").splitlines()
    texts, senses = read_marked(lines)
    sentences = [t.split() for t in texts]
    separation = sense_separation(word_across_contexts(encoder.embed(sentences), sentences, "play"),
                                  senses, encoder.layer_names())
    assert separation.best is not None and separation.layers[separation.best].margin > 0.05
