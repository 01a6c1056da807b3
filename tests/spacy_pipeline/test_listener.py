"""contextvec.Listener.v1: spaCy's tagger trains on frozen contextvec vectors (needs the spacy extra)."""

from __future__ import annotations

import numpy as np
import pytest

spacy = pytest.importorskip("spacy", reason="the optional spacy extra is not installed")

from spacy.training import Example  # noqa: E402
from spacy.util import fix_random_seed  # noqa: E402
from thinc.api import Adam  # noqa: E402

import contextvec  # noqa: E402
from contextvec.spacy import build_listener  # noqa: E402

TAGGED = [
    ("The bank was robbed .", ["DET", "NOUN", "AUX", "VERB", "PUNCT"]),
    ("We sat on the river bank .", ["PRON", "VERB", "ADP", "DET", "NOUN", "NOUN", "PUNCT"]),
    ("A dog barked at the man .", ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]),
    ("They saw the boats .", ["PRON", "VERB", "DET", "NOUN", "PUNCT"]),
]


def _tagger(model, width):
    nlp = spacy.blank("en")
    nlp.add_pipe("tagger", config={"model": {
        "@architectures": "spacy.Tagger.v2", "nO": None, "normalize": False,
        "tok2vec": {"@architectures": "contextvec.Listener.v1", "model": str(model), "width": width},
    }})
    return nlp


def test_a_tagger_trains_on_the_listener_and_its_loss_falls(own_tiny_dir, tmp_path):
    fix_random_seed(0)
    nlp = _tagger(own_tiny_dir, width=32)
    examples = [Example.from_dict(nlp.make_doc(text), {"tags": tags}) for text, tags in TAGGED]
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.03)
    tok2vec = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    vectors = tok2vec.predict([nlp.make_doc(TAGGED[0][0]), nlp.make_doc("")])
    assert [v.shape for v in vectors] == [(5, 32), (0, 32)]

    frozen, projection = tok2vec.layers
    docs = [nlp.make_doc(text) for text, _ in TAGGED]
    vectors_before = frozen.predict(docs)
    weights_before = [node.get_param("W").copy() for node in projection.walk() if node.has_param("W")]
    losses = []
    for _ in range(10):
        step = {}
        nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step["tagger"])
    assert losses[-1] < 0.75 * losses[0], losses
    # The projection learned; the contextvec vectors underneath stayed the model's own.
    weights = [node.get_param("W") for node in projection.walk() if node.has_param("W")]
    assert weights and not any(np.array_equal(a, b) for a, b in zip(weights, weights_before, strict=True))
    expected = contextvec.load(own_tiny_dir).embed([[t.text for t in doc] for doc in docs], layers="all")
    for doc, before, after, every in zip(docs, vectors_before, frozen.predict(docs), expected, strict=True):
        assert np.array_equal(before, after)
        assert np.array_equal(after, every.transpose(1, 0, 2).reshape(len(doc), -1))  # layer 0 first

    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    texts = [text for text, _ in TAGGED]
    assert [t.tag_ for d in loaded.pipe(texts) for t in d] == [t.tag_ for d in nlp.pipe(texts) for t in d]


@pytest.mark.parametrize(("width", "message"), [(0, "width must be a whole number of at least 1, not 0"),
                                                (None, "width must be a whole number of at least 1")])
def test_a_bad_width_is_one_line(own_tiny_dir, width, message):
    with pytest.raises(ValueError, match=message):
        build_listener(width=width, model=str(own_tiny_dir))
