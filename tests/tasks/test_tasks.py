"""Task models (``contextvec train-task``): readers, the CRF, the models and the command."""

from __future__ import annotations

import gzip
import itertools
import json
import random

import numpy as np
import pytest
import torch
from conftest import need_shared, shared_file
from helpers_task_data import (
    CONLL_DEV,
    CONLL_FIRST_DOCUMENT,
    CONLL_TRAIN,
    SST_DEV,
    SST_TRAIN,
    sentiment_split,
    tiny_elmo,
    top_layer_split,
)
from tolerance import assert_reordered_close, elmo_terms

from contextvec.cli.main import main
from contextvec.io.word_vectors import WordVectors, save_word_vectors
from contextvec.tasks.crf import CRF, allowed_transitions
from contextvec.tasks.models import (
    UNK,
    FixedLayers,
    ModelSettings,
    build_vocabularies,
    contextual_embedder,
    wanted_words,
)
from contextvec.tasks.readers import (
    bioul_to_iob2,
    carve_dev,
    iob1_to_iob2,
    iob2_to_bioul,
    iob2_to_iob1,
    parse_conll2003,
    parse_tree,
    read_conll2003,
    read_conllu,
    read_sst,
    read_trec,
)
from contextvec.tasks.train import (
    Split,
    TrainSettings,
    build_task_model,
    entity_mentions,
    ner_scores,
    train_task,
)

# The committed excerpt (tests/data) stands in for it where ../shared is absent: the first 60 lines.
TREC_TRAIN = shared_file("tasks/trec/train_5500.label.gz")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the CI box is shared; these models are tiny


# ---------------------------------------------------------------- readers

CONLL = CONLL_FIRST_DOCUMENT + """-DOCSTART- -X- O O

In IN I-PP O
Paris NNP I-NP I-LOC
Lyon NNP I-NP B-LOC
"""


def test_conll2003_reader_drops_docstart_and_keeps_iob1(tmp_path):
    corpus = parse_conll2003(CONLL)
    assert corpus.sentences == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"],
                                ["In", "Paris", "Lyon"]]
    assert corpus.tags[2] == ["O", "I-LOC", "B-LOC"]
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(CONLL.encode()))
    assert read_conll2003(path, max_sentences=2).sentences == corpus.sentences[:2]
    with pytest.raises(ValueError, match="line 3: expected 4 columns"):
        parse_conll2003("-DOCSTART- -X- O O\n\nEU NNP I-ORG\n")
    with pytest.raises(ValueError, match="line 1: bad NER tag"):
        parse_conll2003("EU NNP I-NP X-ORG\n")


def test_iob_conversions():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG", "I-ORG"]
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "B-ORG", "I-ORG"]
    assert iob1_to_iob2(iob1) == iob2
    assert iob2_to_iob1(iob2) == iob1
    assert iob1_to_iob2(iob2) == iob2  # IOB2 input passes through
    bioul = ["B-PER", "L-PER", "U-PER", "O", "U-LOC", "U-ORG", "B-ORG", "L-ORG"]
    assert iob2_to_bioul(iob2) == bioul
    assert bioul_to_iob2(bioul) == iob2
    assert iob2_to_bioul(["B-X", "I-X", "I-X", "B-X"]) == ["B-X", "I-X", "L-X", "U-X"]
    assert iob2_to_bioul([]) == [] and bioul_to_iob2([]) == []
    assert iob2_to_bioul(["B-X"]) == ["U-X"] and iob2_to_bioul(["I-X"]) == ["L-X"]


def test_sst_tree_leaves_and_labels(tmp_path):
    label, leaves = parse_tree(
        "(3 (2 (2 A) (2 -LRB-co-writer\\/director-RRB-)) (4 (2 -LRB-) (3 wow\\*) (2 -RRB-)))"
    )
    assert label == "3"
    assert leaves == ["A", "-LRB-co-writer/director-RRB-", "(", "wow*", ")"]
    lines = ["(0 (1 bad) (1 film))", "(2 (2 so) (2 so))", "(4 (4 great))", "(3 (2 ok) (3 good))"]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_sst(path, "sst5").labels == ["0", "2", "4", "3"]
    sst2 = read_sst(path, "sst2")
    assert sst2.labels == ["negative", "positive", "positive"]
    assert sst2.sentences[0] == ["bad", "film"]
    assert len(read_sst(path, "sst2", max_sentences=2)) == 2
    with pytest.raises(ValueError, match="line 1: unbalanced"):
        parse_tree("(2 (2 a) (2 b)", "line 1")


def test_trec_latin1_and_dev_carve_out(tmp_path):
    raw = b"LOC:city Which city has a sister\xf0city with Los Angeles ?\nNUM:date When was it ?\n"
    path = tmp_path / "trec.label.gz"
    path.write_bytes(gzip.compress(raw * 10))
    data = read_trec(path)
    assert data.sentences[0][4] == "sister\u00f0city" and data.labels[:2] == ["LOC", "NUM"]
    train, dev = carve_dev(data)
    assert (len(train), len(dev)) == (18, 2)
    again_train, again_dev = carve_dev(data)
    assert again_dev.sentences == dev.sentences and again_train.labels == train.labels
    bad = tmp_path / "bad.label"
    bad.write_bytes(b"NUM:date ok ?\nWHAT:x no\n")
    with pytest.raises(ValueError, match="line 2: expected 'COARSE:fine"):
        read_trec(bad)


# A TREC file (latin-1: one 0xF0 byte) where another task expects UTF-8; the byte sits on line 100,
# inside the first block the decoder reads, so it fails before line 1 is parsed.
TREC_LINES = [b"DESC:def What is word %d ?\n" % i for i in range(99)] + [b"LOC:city A sister\xf0city ?\n"]


@pytest.mark.parametrize(("read", "expected"), [
    (read_conll2003, "expected a CoNLL-2003 file: UTF-8, one 'token POS chunk NER' line per token"),
    (read_conllu, "expected a CoNLL-U file"),
    (read_sst, "expected SST trees"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_a_file_that_is_not_utf8_is_named_with_its_line_and_the_format_expected(tmp_path, read, expected, gz):
    raw = b"".join(TREC_LINES * 2)
    path = tmp_path / ("train.txt.gz" if gz else "train.txt")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(ValueError) as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 100: not UTF-8 text (byte 0xf0); {expected}"), message
    assert "\n" not in message


def test_cli_names_the_line_of_another_tasks_file(tmp_path, capsys):
    trec = tmp_path / "train_5500.label"
    trec.write_bytes(b"".join(TREC_LINES))
    argv = ["train-task", "ner", "--train", str(trec), "--dev", str(trec), "--no-contextual", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"contextvec: error: {trec}, line 100: not UTF-8 text (byte 0xf0); "
                          "expected a CoNLL-2003")
    assert err.count("\n") == 1


def test_real_files_read():
    assert len(read_conll2003(CONLL_TRAIN, max_sentences=50)) == 50
    assert set(read_sst(SST_DEV, "sst2", max_sentences=50).labels) == {"negative", "positive"}
    trec = read_trec(TREC_TRAIN)
    assert len(trec) == 5452 and "sister\u00f0city" in trec.sentences[65]


# ---------------------------------------------------------------- CRF


def _brute_force(crf: CRF, emissions: torch.Tensor, length: int) -> tuple[torch.Tensor, list[int], float]:
    """(log Z, best path, best score) of one sequence by enumerating every path."""
    start, trans, end = (s.detach() for s in crf.scores())
    scores, paths = [], []
    for path in itertools.product(range(crf.num_tags), repeat=length):
        s = start[path[0]] + end[path[-1]] + sum(emissions[t, path[t]] for t in range(length))
        s = s + sum(trans[path[t - 1], path[t]] for t in range(1, length))
        scores.append(s)
        paths.append(list(path))
    scores_t = torch.stack([torch.as_tensor(s) for s in scores])
    best = int(scores_t.argmax())
    return torch.logsumexp(scores_t, 0), paths[best], float(scores_t[best])


@pytest.mark.parametrize("scheme", [None, "bio", "bioul"])
def test_crf_matches_brute_force_with_masks(scheme):
    torch.manual_seed(1)
    labels = ["O", "B-X", "I-X"] + (["L-X", "U-X"] if scheme == "bioul" else [])
    crf = CRF(len(labels), *(allowed_transitions(labels, scheme) if scheme else ()))
    with torch.no_grad():
        crf.start.normal_()
        crf.end.normal_()
        crf.transitions.normal_()
    lengths = [4, 2, 1, 3]
    emissions = torch.randn(len(lengths), 4, len(labels), dtype=torch.float64)
    mask = torch.arange(4).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    emissions = emissions.masked_fill(~mask.unsqueeze(-1), 1e3)  # padding must not matter
    crf = crf.double()
    log_z = crf.log_partition(emissions, mask)
    with torch.no_grad():
        paths, best_scores = crf.viterbi(emissions, mask)
    tags = torch.zeros(len(lengths), 4, dtype=torch.long)
    for b, n in enumerate(lengths):
        want_z, want_path, want_best = _brute_force(crf, emissions[b], n)
        torch.testing.assert_close(log_z[b], want_z)
        assert paths[b] == want_path
        assert float(best_scores[b]) == pytest.approx(want_best)
        tags[b, :n] = torch.tensor(want_path)
    torch.testing.assert_close(crf.path_score(emissions, tags, mask), best_scores)
    assert (crf.neg_log_likelihood(emissions, tags, mask) >= 0).all()
    if scheme:  # every decoded path is a well-formed sequence of the scheme
        inside = {"bio": ("I-X",), "bioul": ("I-X", "L-X")}[scheme]
        for path in paths:
            tags = [labels[t] for t in path]
            assert tags[0] not in inside
            assert all(b not in inside or a in ("B-X", "I-X") for a, b in itertools.pairwise(tags))
            if scheme == "bioul":
                assert tags[-1] not in ("B-X", "I-X")
                assert all(a not in ("B-X", "I-X") or b in inside for a, b in itertools.pairwise(tags))


def test_allowed_transitions_iob1():
    labels = ["O", "I-X", "B-X", "I-Y"]
    allowed, start, end = allowed_transitions(labels, "iob1")
    assert start.tolist() == [True, True, False, True]
    assert allowed[:, 2].tolist() == [False, True, True, False]  # B-X only inside an X entity
    assert allowed[:, 1].all() and allowed[:, 3].all() and end.all()


def test_allowed_transitions_bioul():
    labels = ["O", "B-X", "I-X", "L-X", "U-X", "U-Y"]
    allowed, start, end = allowed_transitions(labels, "bioul")
    assert start.tolist() == [True, True, False, False, True, True]
    assert end.tolist() == [True, False, False, True, True, True]
    assert allowed[1].tolist() == [False, False, True, True, False, False]  # B-X: only I-X or L-X
    assert allowed[3].tolist() == allowed[0].tolist() == [True, True, False, False, True, True]


# ---------------------------------------------------------------- models


def test_precomputed_layers_equal_running_the_encoder():
    encoder = tiny_elmo()
    sentences = [["EU", "rejects", "German", "call"], ["Peter"], ["In", "Paris", "!"]]
    train = Split(sentences, [["I-ORG", "O", "I-MISC", "O"], ["I-PER"], ["O", "I-LOC", "O"]], "s")
    settings = ModelSettings(placement="input+output", layer_norm=True, hidden=8, char_filters=4)
    model, indexer = build_task_model("ner", train, [], settings, encoder)
    model.eval()
    features = [a for a in encoder.embed(sentences)]
    with torch.no_grad():
        on_the_fly = model.emissions(indexer.batch(sentences))
        precomputed = model.emissions(indexer.batch(sentences, layers=features))
    # ELMo in another batch, then the same tagger: the layer norm's statistics over the batch's
    # 8 tokens x 32 dims, the BiLSTM's steps (50 word + 4 char + 32 ELMo inputs, 8 states; then
    # 16 + 8), the output over 16 states and 32 ELMo dims.
    terms = elmo_terms(encoder.config) + 8 * 32 + (50 + 4 + 32 + 8) + (16 + 8) + (16 + 32)
    assert_reordered_close(on_the_fly, precomputed, terms=terms)


def test_last_layer_only_is_a_fixed_mix():
    encoder = tiny_elmo()
    embedder = contextual_embedder(encoder, ModelSettings(placement="input", layers="last")).eval()
    assert isinstance(embedder.encoder, FixedLayers) and embedder.encoder.num_layers == 1
    assert not any(p.requires_grad for p in embedder.mixes.parameters())
    out = embedder([["a", "b"]]).mixes[0]
    torch.testing.assert_close(out[0], encoder([["a", "b"]]).layers[-1, 0])


def test_word_vectors_fill_the_embeddings_lowercased():
    vectors = WordVectors(["German", "german", "paris", "zzz"], np.arange(12, dtype=np.float32).reshape(4, 3))
    train = [["EU", "rejects", "German", "call"]]
    words, chars, matrix = build_vocabularies(train, [["In", "Paris", "Rome"]], vectors)
    assert "german" in words.stoi and "paris" in words.stoi and "rome" not in words.stoi
    np.testing.assert_array_equal(matrix[words["german"]], [0, 1, 2])  # the first row wins
    np.testing.assert_array_equal(matrix[words["paris"]], [6, 7, 8])
    assert words.counts["eu"] == 1 and words["Rome"] == UNK and chars["E"] != UNK
    keep = wanted_words(train)
    assert "GERMAN" in keep and "Paris" not in keep


def test_ner_scores_convert_iob1():
    gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
    assert ner_scores(gold, [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]], "bio")["f1"] == 1.0
    assert ner_scores(gold, gold, "iob1")["f1_strict"] == 1.0
    assert ner_scores(gold, [["B-PER", "O", "O", "B-LOC", "I-LOC"]], "bio")["f1"] == 0.0
    assert ner_scores(gold, [["B-PER", "L-PER", "O", "U-LOC", "U-LOC"]], "bioul")["f1_strict"] == 1.0
    assert ner_scores(gold, [["U-PER", "U-PER", "O", "B-LOC", "L-LOC"]], "bioul")["f1"] == 0.0


def test_ner_scores_split_seen_and_unseen_mentions():
    seen = entity_mentions([["John", "lives", "in", "New", "York"]], [["I-PER", "O", "O", "I-LOC", "I-LOC"]])
    assert seen == {"John", "New York"}
    words = [["Mary", "met", "John", "in", "New", "York", "and", "Oslo"]]
    gold = [["I-PER", "O", "I-PER", "O", "I-LOC", "I-LOC", "O", "I-LOC"]]
    pred = [["B-PER", "O", "B-ORG", "O", "B-LOC", "I-LOC", "O", "O"]]  # John mistyped, Oslo missed
    groups = ner_scores(gold, pred, "bio", words, seen)["by_mention"]
    assert groups["seen"] == {"gold": 2, "predicted": 2, "correct": 1, "precision": 0.5, "recall": 0.5,
                              "f1": 0.5}
    assert groups["unseen"] == {"gold": 2, "predicted": 1, "correct": 1, "precision": 1.0, "recall": 0.5,
                                "f1": 2 / 3}
    assert "by_mention" not in ner_scores(gold, pred, "bio")
    none = ner_scores([["O", "O"]], [["O", "O"]], "bio", [["a", "b"]], seen)["by_mention"]  # no entity at all
    assert none["unseen"] == {"gold": 0, "predicted": 0, "correct": 0, "precision": 0.0, "recall": 0.0,
                              "f1": 0.0}


# ---------------------------------------------------------------- learnability

# Stops 3 epochs after the best dev score: the tests below reach it within a few epochs.
FAST = TrainSettings(epochs=20, patience=3, lr=0.02, batch_size=16, progress=False)
SMALL = dict(word_dim=16, char_filters=8, hidden=24, lstm_layers=1, dropout=0.0, word_unk_rate=0.0)


def _synthetic_ner(n: int, rng: random.Random) -> Split:
    people, places, other = ["ann", "bob", "eve"], ["rome", "oslo"], ["the", "met", "in", "today", "and"]
    sentences, tags = [], []
    for _ in range(n):
        words, labels = [], []
        for _ in range(rng.randint(3, 8)):
            kind = rng.random()
            if kind < 0.2:  # a two-word person: tests entity spans, not just tokens
                words += [rng.choice(people), rng.choice(people).title()]
                labels += ["I-PER", "I-PER"]
            elif kind < 0.35:
                words.append(rng.choice(places))
                labels.append("I-LOC")
            else:
                words.append(rng.choice(other))
                labels.append("O")
        sentences.append(words)
        tags.append(labels)
    return Split(sentences, tags, "synthetic")


@pytest.mark.parametrize("scheme", ["bio", "bioul"])
def test_ner_model_fits_learnable_data(scheme):
    rng = random.Random(0)
    train, dev = _synthetic_ner(120, rng), _synthetic_ner(40, rng)
    report, model = train_task("ner", train, dev, None, ModelSettings(**SMALL, tag_scheme=scheme), FAST)
    assert report.dev["f1"] > 0.95
    assert ("U-LOC" in model.labels) == (scheme == "bioul")


def test_classifier_uses_the_contextual_mix():
    """Words carry nothing (always "x"); the label is only in the precomputed top layer."""
    rng = np.random.default_rng(0)
    train, dev = top_layer_split(120, rng), top_layer_split(60, rng)
    settings = ModelSettings(**{**SMALL, "char_cnn": False}, placement="input", mix_dropout=0.0)
    report, model = train_task("sst2", train, dev, None, settings, FAST, tiny_elmo())
    assert report.dev["accuracy"] > 0.95
    assert len(report.mixes) == 1 and len(report.mixes[0]["weights"]) == 3


def test_classifier_fits_learnable_data():
    rng = random.Random(0)
    train, dev = sentiment_split(120, rng), sentiment_split(60, rng)
    settings = ModelSettings(**{**SMALL, "char_cnn": False})
    report, _ = train_task("sst2", train, dev, None, settings, FAST)
    assert report.dev["accuracy"] > 0.95
    # The same seed gives the same run (CPU): identical losses, epoch by epoch.
    again, _ = train_task("sst2", train, dev, None, settings, FAST)
    assert [c["train_loss"] for c in again.curve] == [c["train_loss"] for c in report.curve]


# ---------------------------------------------------------------- the command


def _run(tmp_path, *argv: str) -> dict:
    need_shared(*argv)
    out = tmp_path / "results.json"
    assert main(["train-task", *argv, "--output", str(out), "--overwrite", "--quiet", "--threads", "1",
                 "--cache-dir", str(tmp_path / "cache"), "--hidden", "16", "--lr", "0.01"]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_cli_ner_with_and_without_contextual_vectors(tmp_path, tiny_dir):
    data = ["--train", str(CONLL_TRAIN), "--dev", str(CONLL_DEV), "--max-sentences", "120", "--epochs", "2"]
    result = _run(tmp_path, "ner", *data, "--model", str(tiny_dir), "--placement", "input+output",
                  "--layer-norm", "--test", str(CONLL_DEV))
    assert 0.0 <= result["dev"]["f1"] <= 1.0 and result["test"]["f1"] == pytest.approx(result["dev"]["f1"])
    assert result["splits"]["train"]["sentences"] == 120 and len(result["curve"]) == 2
    assert [len(m["weights"]) for m in result["mixes"]] == [3, 3]
    assert result["extra"]["contextual"] is True and result["runtime_s"]["features"] > 0
    assert set(result["dev"]["per_type"]) == {"PER", "LOC", "ORG", "MISC"}
    groups = result["dev"]["by_mention"]  # every gold entity is either seen in train or not
    assert groups["seen"]["gold"] + groups["unseen"]["gold"] == sum(
        t["support"] for t in result["dev"]["per_type"].values())
    glove = save_word_vectors(tmp_path / "v.txt", ["the", "German", "of"], np.eye(3, 5), "glove")
    base = _run(tmp_path, "ner", *data, "--no-contextual", "--train-fraction", "0.5", "--epochs", "1",
                "--word-vectors", str(glove))
    assert base["mixes"] == [] and base["extra"]["contextual"] is False
    assert base["extra"]["word_vectors_loaded"] == 3
    assert base["splits"]["train"]["sentences"] == 60 and "f1" in base["dev"]


def test_cli_classifiers(tmp_path, tiny_dir):
    sst = _run(tmp_path, "sst2", "--train", str(SST_TRAIN), "--dev", str(SST_DEV), "--max-sentences", "50",
               "--epochs", "2", "--model", str(tiny_dir), "--last-layer-only")
    assert 0.0 <= sst["dev"]["accuracy"] <= 1.0 and sst["labels"] == ["negative", "positive"]
    assert sst["mixes"] == [{"weights": [1.0], "gamma": 1.0}]
    sst5 = _run(tmp_path, "sst5", "--train", str(SST_TRAIN), "--dev", str(SST_DEV), "--max-sentences", "50",
                "--epochs", "1", "--no-contextual")
    assert sst5["splits"]["dev"]["sentences"] == 50 and len(sst5["labels"]) == 5
    trec = _run(tmp_path, "trec", "--train", str(TREC_TRAIN), "--max-sentences", "60", "--epochs", "1",
                "--model", str(tiny_dir))
    assert trec["splits"]["dev"]["sentences"] == 6 and trec["splits"]["train"]["sentences"] == 54
    assert trec["extra"]["dev_carved_from_train"] is True


def test_cli_errors(tmp_path, capsys):
    assert main(["train-task", "sst2", "--train", str(SST_TRAIN), "--no-contextual", "--quiet"]) == 2
    assert "needs --dev" in capsys.readouterr().err
    assert main(["train-task", "sst2", "--train", str(SST_TRAIN), "--dev", str(SST_DEV),
                 "--no-contextual", "--model", str(tmp_path)]) == 2
    assert "--no-contextual uses no model" in capsys.readouterr().err
