"""WSD (SemCor / Raganato readers, WordNet, 1-NN sense centroids, F1) and nearest-neighbour probes.

WordNet 3.0 must be installed (``apt-get install wordnet-base``): the tests that need it fail with
that message if it is missing.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import tarfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SHARED, shared_file

from contextvec.cli.probe_wsd import add_wsd_parsers
from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.features import FeatureSettings
from contextvec.probes import wsd as wsd_module
from contextvec.probes.neighbours import ContextSearch, mark, nearest_contexts, nearest_words
from contextvec.probes.scoring import wsd_score as score
from contextvec.probes.semcor import (
    SenseSpan,
    WsdCorpus,
    WsdSentence,
    parse_attributes,
    parse_gold_keys,
    parse_raganato,
    parse_semcor,
    read_semcor,
)
from contextvec.probes.wordnet import WordNetMissingError, load_wordnet, wordnet_dir, wordnet_pos
from contextvec.probes.wsd import (
    VectorSource,
    evaluate_wsd,
    instance_vectors,
    nearest_candidates,
)

WSD = SHARED / "tasks" / "wsd"
SEMCOR = shared_file("tasks/wsd/semcor3.0.tar.gz")  # or its excerpt (tests/data): one document
SE07 = WSD / "Evaluation_Datasets" / "semeval2007"
SE07_DATA = SE07 / "semeval2007.data.xml.gz"
SE07_GOLD = SE07 / "semeval2007.gold.key.txt.gz"


def shared(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the WSD tests need ../shared/data/tasks/wsd")
    return path


# ---------------------------------------------------------------------------------------------
# SemCor

SEMCOR_SNIPPET = """<contextfile concordance=brown>
<context filename=br-x01 paras=yes>
<p pnum=1>
<s snum=1>
<wf cmd=ignore pos=DT>The</wf>
<wf cmd=done rdf=group pos=NNP lemma=group wnsn=1 lexsn=1:03:00:: pn=group>Fulton_County_Grand_Jury</wf>
<wf cmd=done pos=VB lemma=say wnsn=1 lexsn=2:32:00::>said</wf>
<wf cmd=done sep="-" pos=JJ lemma=west wnsn=1 lexsn=3:00:00::>West</wf>
<wf cmd=done pos=NN lemma=year wnsn=2;1 lexsn=1:28:02::;1:28:01::>year</wf>
<wf cmd=done pos=JJ lemma=such wnsn=0 lexsn=5:00:01:specified:00>such</wf>
<wf cmd=done pos=NN lemma=process wnsn=0;1 lexsn=1:22:00::;1:04:00::>processes</wf>
<wf cmd=done pos=JJ lemma=previous wnsn=1 lexsn=5:00:00:preceding(a):00>previous</wf>
<punc>.</punc>
</s>
</p>
<p pnum=2>
<s snum=2>
<wf cmd=done pos=VB ot=idiom>took_a_swipe_at</wf>
<punc>&</punc>
</s>
</p>
</context>
</contextfile>
"""


def test_semcor_snippet() -> None:
    stats: Counter[str] = Counter()
    first, second = parse_semcor(SEMCOR_SNIPPET, "brown1/br-x01", stats)
    assert first.id == "brown1/br-x01.s1" and second.id == "brown1/br-x01.s2"
    assert first.tokens == ["The", "Fulton", "County", "Grand", "Jury", "said", "West", "year", "such",
                            "processes", "previous", "."]
    spans = {(s.start, s.end): s for s in first.spans}
    # A multiword <wf> is split on "_"; its sense belongs to the whole span.
    assert spans[(1, 5)] == SenseSpan(1, 5, "group", "NNP", ("group%1:03:00::",))
    assert spans[(5, 6)].keys == ("say%2:32:00::",)
    assert spans[(6, 7)].keys == ("west%3:00:00::",)  # quoted attribute sep="-" parsed too
    assert spans[(7, 8)].keys == ("year%1:28:02::", "year%1:28:01::")  # every sense of a multi-sense word
    assert (8, 9) not in spans  # wnsn=0 only: not a span, counted as unmapped
    assert spans[(9, 10)].keys == ("process%1:04:00::",)  # the wnsn=0 half dropped
    assert spans[(10, 11)].keys == ("previous%5:00:00:preceding:00",)  # SemCor's (a) marker removed
    assert stats["unmapped"] == 1
    assert second.tokens == ["took", "a", "swipe", "at", "&"] and second.spans == []


def test_semcor_attributes_and_errors() -> None:
    assert parse_attributes(' cmd=done sep="-" pos=JJ x=\'a b\' lexsn=5:00:00:past:00') == {
        "cmd": "done", "sep": "-", "pos": "JJ", "x": "a b", "lexsn": "5:00:00:past:00"}
    bad = {
        "<wf pos=DT>The</wf>": "line 1: <wf> outside a sentence",
        "<s snum=1>\n<wf lemma=a wnsn=1;2 lexsn=1:00:00::>a</wf>\n</s>": "line 2: wnsn='1;2' does not pair",
        "<s snum=1>\nstray text\n</s>": "text 'stray text' outside",
        "<s snum=1>\n<wf pos=DT>The</wf>\n": "is not closed",
        "<s snum=1>\n<foo>x</foo>\n</s>": "unknown tag",
        "<s snum=1>\n<wf pos=DT></wf>\n</s>": "empty <wf>",
    }
    for text, message in bad.items():
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
            list(parse_semcor(text, "f"))


def test_semcor_archive(tmp_path: Path) -> None:
    archive = tmp_path / "semcor.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in (("semcor3.0/brown1/tagfiles/br-x01", SEMCOR_SNIPPET),
                           ("semcor3.0/README", "not a tag file"),
                           ("semcor3.0/brownv/tagfiles/br-x02", SEMCOR_SNIPPET)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    corpus = read_semcor(archive)
    assert [s.id for s in corpus.sentences] == ["brown1/br-x01.s1", "brown1/br-x01.s2", "brownv/br-x02.s1",
                                                "brownv/br-x02.s2"]
    assert corpus.unmapped == 2 and corpus.num_spans == 12
    assert len(read_semcor(archive, max_sentences=3)) == 3


def test_real_semcor_first_sentence() -> None:
    corpus = read_semcor(shared(SEMCOR), max_sentences=2)
    first = corpus.sentences[0]
    assert first.id == "brown1/br-a01.s1"
    assert first.tokens[:6] == ["The", "Fulton", "County", "Grand", "Jury", "said"]
    assert first.spans[0] == SenseSpan(1, 5, "group", "NNP", ("group%1:03:00::",))
    assert first.spans[-1] == SenseSpan(23, 25, "take_place", "VB", ("take_place%2:30:00::",))


# ---------------------------------------------------------------------------------------------
# Raganato XML + keys

RAGANATO_SNIPPET = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="test">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>
<instance id="d000.s000.t001" lemma="point_out" pos="VERB">pointed out</instance>
<wf lemma="." pos=".">.</wf>
</sentence>
<sentence id="d000.s001">
<wf lemma="no" pos="DET">No</wf>
<wf lemma="instance" pos="NOUN">instances</wf>
</sentence>
</text>
</corpus>
"""
GOLD_SNIPPET = "d000.s000.t000 bank%1:14:00::\nd000.s000.t001 point_out%2:32:01:: point_out%2:32:03::\n"


def test_raganato_snippet() -> None:
    gold = parse_gold_keys(GOLD_SNIPPET.splitlines())
    corpus = parse_raganato(ET.fromstring(RAGANATO_SNIPPET), gold)
    first = corpus.sentences[0]
    assert first.tokens == ["The", "bank", "pointed", "out", "."]
    assert first.spans == [
        SenseSpan(1, 2, "bank", "NOUN", ("bank%1:14:00::",), "d000.s000.t000"),
        SenseSpan(2, 4, "point_out", "VERB", ("point_out%2:32:01::", "point_out%2:32:03::"),
                  "d000.s000.t001"),
    ]
    assert corpus.sentences[1].spans == [] and corpus.num_spans == 2
    with pytest.raises(ValueError, match="d000.s000.t001 has no gold key"):
        parse_raganato(ET.fromstring(RAGANATO_SNIPPET), {"d000.s000.t000": ("bank%1:14:00::",)})
    with pytest.raises(ValueError, match="not instances of the data, e.g. x"):
        parse_raganato(ET.fromstring(RAGANATO_SNIPPET), {**gold, "x": ("y%1:00:00::",)})
    with pytest.raises(ValueError, match="line 2: instance 'a' repeated"):
        parse_gold_keys(["a k%1:00:00::", "a k%1:00:00::"])


# ---------------------------------------------------------------------------------------------
# WordNet (needs wordnet-base: fails, never skips, without it)


def test_wordnet() -> None:
    wn = load_wordnet()  # WordNetMissingError says: apt-get install wordnet-base
    assert wn.version == "3.0"
    assert wn.sense_keys("bank", "NOUN")[:3] == ("bank%1:17:01::", "bank%1:14:00::", "bank%1:17:00::")
    assert wn.first_sense("take_place", "VB") == "take_place%2:30:00::"
    assert wn.sense_keys("point_out", "VERB")[0] == "point_out%2:32:01::"
    assert "recent%5:00:00:past:00" in wn.sense_keys("recent", "JJ")  # satellites are adjectives
    assert wn.sense_keys("Bank", "n") == wn.sense_keys("bank", "n")
    assert wn.sense_keys("nosuchlemma", "n") == () and wn.sense_keys("the", "DET") == ()
    assert [wordnet_pos(t) for t in ("NOUN", "VBD", "JJR", "RB", "s", "DET", ".")] == [
        "n", "v", "a", "r", "a", None, None]


def test_wordnet_missing_message(tmp_path: Path) -> None:
    with pytest.raises(WordNetMissingError, match="apt-get install wordnet-base"):
        wordnet_dir(tmp_path)
    with pytest.raises(WordNetMissingError, match="does not exist"):
        wordnet_dir(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# 1-NN on vectors we control


class TableEncoder(Encoder):
    """Layer 0: the token's own table vector (context-free). Layer 1: the *next* token's table
    vector (zero at the end): a contextual layer whose senses we control."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        super().__init__()
        self.table = {w: torch.tensor(v, dtype=torch.float32) for w, v in table.items()}
        self.num_layers = 2
        self.output_dim = 2

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        width = max(len(s) for s in sentences)
        layers = torch.zeros(2, len(sentences), width, 2)
        mask = torch.zeros(len(sentences), width, dtype=torch.bool)
        for b, tokens in enumerate(sentences):
            for t, token in enumerate(tokens):
                layers[0, b, t] = self.table[token]
                if t + 1 < len(tokens):
                    layers[1, b, t] = self.table[tokens[t + 1]]
                mask[b, t] = True
        return EncoderOutput(layers, mask)


TABLE = {"bank": (1, 1), "river": (1, 0.1), "stream": (1, 0.2), "loan": (0, 1), "credit": (0.1, 1),
         "water": (-1, 0), "dog": (0.5, -1), "xyzzy": (-1, -1), "the": (0, -1)}
LAND, MONEY, SLOPE = "bank%1:17:01::", "bank%1:14:00::", "bank%1:17:00::"


class DictInventory:
    senses = {("bank", "n"): (LAND, MONEY, SLOPE), ("water", "n"): ("water%1:27:00::",),
              ("dog", "n"): ("dog%1:05:00::", "dog%1:18:01::")}

    def sense_keys(self, lemma: str, pos: str) -> tuple[str, ...]:
        return self.senses.get((lemma, wordnet_pos(pos)), ())


def _sentence(tokens: str, spans: list[tuple[int, int, str, tuple[str, ...], str | None]]) -> WsdSentence:
    return WsdSentence(tokens, tokens.split(), [SenseSpan(a, b, lemma, "NOUN", keys, iid)
                                                for a, b, lemma, keys, iid in spans])


def toy_data() -> tuple[WsdCorpus, WsdCorpus]:
    train = WsdCorpus([
        _sentence("bank river", [(0, 1, "bank", (LAND,), None)]),
        _sentence("bank loan", [(0, 1, "bank", (MONEY,), None)]),
        # Another lemma's sense whose centroid equals the "bank stream" instance: never a candidate.
        _sentence("water stream", [(0, 1, "water", ("water%1:27:00::",), None)]),
        _sentence("the the", []),  # nothing tagged: not embedded
    ], "train")
    data = WsdCorpus([
        _sentence("bank stream", [(0, 1, "bank", (LAND,), "i1")]),
        _sentence("bank credit", [(0, 1, "bank", (MONEY,), "i2")]),
        _sentence("the dog", [(1, 2, "dog", ("dog%1:05:00::",), "i3")]),  # no sense trained: 1st sense
        _sentence("xyzzy the", [(0, 1, "xyzzy", ("xyzzy%1:00:00::",), "i4")]),  # not in WordNet
    ], "eval")
    return train, data


@pytest.mark.parametrize("cache", [False, True])
def test_one_nn_on_controlled_vectors(cache: bool, tmp_path: Path) -> None:
    train, data = toy_data()
    options = VectorSource(FeatureSettings(cache_dir=str(tmp_path)), cache=cache, progress=False)
    report = evaluate_wsd(TableEncoder(TABLE), train, data, DictInventory(), options)
    answers = report.predictions
    # Layer 1 sees the next word: stream ~ river (land), credit ~ loan (money), despite the nearer
    # water%1:27:00:: centroid for i1. Layer 0 is the same "bank" vector for every sense: a tie,
    # so the earlier WordNet sense (LAND) wins twice.
    assert answers[1] == {"i1": LAND, "i2": MONEY, "i3": "dog%1:05:00::", "i4": None}
    assert answers[0] == {"i1": LAND, "i2": LAND, "i3": "dog%1:05:00::", "i4": None}
    assert report.layers[1].score == wsd_module.Score(1.0, 0.75, 2 * 0.75 / 1.75, 3, 3, 4)
    assert (report.layers[1].nearest, report.layers[1].first_sense_fallback, report.layers[1].no_sense) == (
        2, 1, 1)
    assert report.layers[0].score.correct == 2
    assert report.first_sense.correct == 2 and report.first_sense.answered == 3
    assert report.train["embedded_sentences"] == 3 and report.train["sense_keys"] == 3


def test_span_vectors_average_their_tokens() -> None:
    encoder = TableEncoder(TABLE)
    data = WsdCorpus([_sentence("the river loan", [(1, 3, "river_loan", ("x%1:00:00::",), "a")]),
                      _sentence("dog", [(0, 1, "dog", ("dog%1:05:00::",), "b")])])
    instances, vectors = instance_vectors(encoder, data, VectorSource(cache=False, progress=False))
    assert [s.id for s in instances] == ["a", "b"]
    mean = (np.array(TABLE["river"]) + np.array(TABLE["loan"])) / 2
    np.testing.assert_allclose(vectors[0, 0], mean / np.linalg.norm(mean), rtol=1e-6)
    np.testing.assert_allclose(vectors[1, 0], np.array(TABLE["loan"]) / 2 / np.linalg.norm(np.array(
        TABLE["loan"]) / 2), rtol=1e-6)  # layer 1: (next of river = loan, next of loan = 0) / 2


def test_nearest_candidates_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wsd_module, "SCORE_ROWS", 3)  # several matmul chunks
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((11, 4)).astype(np.float32)
    centroids = rng.standard_normal((7, 4)).astype(np.float32)
    centroids[5] = centroids[2]  # an exact tie: the earlier candidate wins
    candidates = [list(rng.choice(7, size=rng.integers(0, 4), replace=False)) for _ in range(11)]
    candidates[0], candidates[1] = [5, 2], [2, 5]
    chosen = nearest_candidates(vectors, centroids, candidates)
    for i, cands in enumerate(candidates):
        if not cands:
            assert chosen[i] == -1
            continue
        scores = [float(vectors[i] @ centroids[c]) for c in cands]
        assert chosen[i] == cands[int(np.argmax(scores))]  # argmax: first of equal maxima
    assert chosen[0] == 5 and chosen[1] == 2


def test_score() -> None:
    gold = {"a": ("k1",), "b": ("k2", "k3"), "c": ("k4",), "d": ("k5",)}
    s = score({"a": "k1", "b": "k3", "c": "wrong", "d": None}, gold)
    assert (s.correct, s.answered, s.total) == (2, 3, 4)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(0.5)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert score({}, gold).f1 == 0.0
    full = score({k: v[0] for k, v in gold.items()}, gold)
    assert full.precision == full.recall == full.f1 == 1.0
    with pytest.raises(ValueError, match="without gold keys"):
        score({"zz": "k"}, gold)


# ---------------------------------------------------------------------------------------------
# CLI end to end


def run_cli(*argv: str) -> None:
    parser = argparse.ArgumentParser()
    add_wsd_parsers(parser.add_subparsers(dest="task", required=True))
    args = parser.parse_args(list(argv))
    args.run(args)


def test_cli_wsd_end_to_end(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    common = ["wsd", "--train", str(shared(SEMCOR)), "--max-train-sentences", "50",
              "--eval", str(shared(SE07_DATA)), "--gold", str(shared(SE07_GOLD)),
              "--model", str(tiny_dir), "--threads", "1", "--quiet"]
    run_cli(*common, "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "wsd.json"),
            "--predictions", str(tmp_path / "pred"))
    out = capsys.readouterr().out
    assert "layer 2 1-NN" in out and "WordNet first sense" in out and "runtime:" in out
    result = json.loads((tmp_path / "wsd.json").read_text())
    assert result["task"] == "wsd" and result["num_layers"] == 3
    assert result["train"]["sentences"] == 50 and result["eval"]["instances"] == 455
    assert 0 < result["eval"]["instances_with_a_trained_sense"] < 455
    # WordNet's first sense on SemEval-2007: 55.2 F1, as published (Raganato et al. 2017).
    assert result["first_sense"]["correct"] == 251 and result["first_sense"]["answered"] == 455
    assert [r["layer"] for r in result["layers"]] == [0, 1, 2]
    for r in result["layers"]:
        assert r["total"] == r["answered"] == 455 and r["no_sense"] == 0  # the fallback answers all
        assert r["precision"] == r["recall"] == r["f1"] == pytest.approx(r["correct"] / 455)
        assert r["nearest"] + r["first_sense_fallback"] == 455
    keys = (tmp_path / "pred.layer2.key.txt").read_text().splitlines()
    assert len(keys) == 455 and keys[0].startswith("d000.s000.t000 refer%2:")
    assert set(result["runtime_s"]) >= {"train_features", "eval_features", "predict", "total"}
    # Straight from the encoder (no cache): the same answers.
    run_cli(*common, "--no-cache", "--output", str(tmp_path / "nocache.json"))
    again = json.loads((tmp_path / "nocache.json").read_text())
    assert [r["correct"] for r in again["layers"]] == [r["correct"] for r in result["layers"]]


def test_cli_neighbours_end_to_end(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    query = "Chico Ruiz made a spectacular play on Alusik 's grounder"
    lines = [query, "They saw a play on Broadway .", "The children play in the garden .", "",
             "Kids like to play football .", "A play by Shakespeare opened .", "No match here ."]
    corpus = tmp_path / "corpus.txt.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("4 2\nplay 1 0\ngame 0.9 0.1\ndrama 0.5 0.5\nstone -1 0\n")
    run_cli("neighbours", "--sentence", query, "--word", "play", "--corpus", str(corpus), "--model",
            str(tiny_dir), "--top-k", "3", "--word-vectors", str(vectors), "--output",
            str(tmp_path / "nb.json"), "--quiet", "--threads", "1")
    assert "nearest contexts by layer 2" in capsys.readouterr().out
    result = json.loads((tmp_path / "nb.json").read_text())
    assert result["position"] == 5 and result["layer"] == 2 and result["corpus_lines"] == 7
    contexts = result["contexts"]
    assert len(contexts) == 3 and all("[play]" in c["sentence"] for c in contexts)
    assert all(c["line"] != 1 for c in contexts)  # the query sentence itself is skipped
    sims = [c["similarity"] for c in contexts]
    assert sims == sorted(sims, reverse=True)
    assert len(result["nearest_words"]["layer 0"]) == 3
    assert [n["word"] for n in result["nearest_words"]["vectors.txt"]] == ["game", "drama", "stone"]


def test_nearest_contexts_on_controlled_vectors() -> None:
    encoder = TableEncoder({**TABLE, "play": (0, 0)})
    corpus = [s.split() for s in ("bank loan", "bank river", "the bank credit", "dog")]
    contexts = nearest_contexts(encoder, ["bank", "stream"], 0, corpus,
                                ContextSearch(layer=1, top_k=2, progress=False))
    assert [(c.sentence, c.position) for c in contexts] == [(1, 0), (2, 1)]  # stream ~ river, then credit
    assert contexts[0].marked() == "[bank] river" and mark(["a", "b"], 1, "<", ">") == "a <b>"
    assert nearest_words("bank", ["bank", "river", "water"], np.array([[1, 1], [1, 0.1], [-1, 0]]), 1) == [
        ("river", pytest.approx(float(np.dot([1, 1], [1, 0.1]) / np.sqrt(2) / np.hypot(1, 0.1))))]
    assert nearest_words("absent", ["bank"], np.ones((1, 2))) is None
