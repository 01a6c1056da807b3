"""Probes: the CoNLL-U reader, the feature cache, the linear probes and `contextvec probe pos`."""

from __future__ import annotations

import gzip
import json
import random

import h5py
import numpy as np
import pytest
import torch
from conftest import need_shared, shared_file
from tolerance import FP16_EPS, assert_reordered_close, elmo_terms

from contextvec import features
from contextvec.cli.main import main
from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureFile, FeatureSettings, cached_features
from contextvec.probes.linear import (
    ProbeSettings,
    SplitData,
    encode_tags,
    probe_tagging,
    tag_vocabulary,
    train_probes,
)
from contextvec.tasks.readers.conllu import parse_conllu, read_conllu
from contextvec.tasks.split import TaggedCorpus

EWT_TRAIN = shared_file("tasks/ud-english-ewt/en_ewt-ud-train.conllu.gz")
EWT_DEV = shared_file("tasks/ud-english-ewt/en_ewt-ud-dev.conllu.gz")
EWT_SENTENCES = 16  # the committed excerpts (tests/data) hold the first 16 sentences of each file


@pytest.fixture(autouse=True)
def _one_thread(_seed_and_threads):
    # These tensors are tiny: a second thread only adds OpenMP waits on a busy machine.
    torch.set_num_threads(1)


def _conllu(*sentences: list[tuple]) -> str:
    """CoNLL-U text from rows (id, form, upos, xpos); the other columns are filled in."""
    blocks = []
    for number, rows in enumerate(sentences, 1):
        lines = [f"# sent_id = s{number}"]
        for token_id, form, upos, xpos in rows:
            lines.append("\t".join([token_id, form, "_", upos, xpos, "_", "_", "_", "_", "_"]))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


SAMPLE = _conllu(
    [("1-2", "Don't", "_", "_"), ("1", "Do", "AUX", "VBP"), ("2", "n't", "PART", "RB"),
     ("3", "go", "VERB", "VB"), ("3.1", "go", "VERB", "VB"), ("4", ".", "PUNCT", ".")],
    [("1", "Dogs", "NOUN", "NNS"), ("2", "bark", "VERB", "VBP")],
)


def _tiny_encoder(seed: int = 0) -> ElmoEncoder:
    torch.manual_seed(seed)
    return ElmoEncoder(ElmoBiLM(PRESETS["tiny"])).eval()


SENTENCES = [["The", "bank", "was", "robbed", "."], ["a"], ["We", "sat", "by", "the", "river"],
             ["Zürich", "naïve"], ["x"] * 7, ["one", "more"], ["last", "one", "."]]


# --- CoNLL-U reader --------------------------------------------------------------------------

def test_reader_keeps_syntactic_words_and_skips_ranges_and_empty_nodes(tmp_path):
    corpus = parse_conllu(SAMPLE, "upos")
    assert corpus.sentences == [["Do", "n't", "go", "."], ["Dogs", "bark"]]
    assert corpus.tags == [["AUX", "PART", "VERB", "PUNCT"], ["NOUN", "VERB"]]
    assert corpus.num_tokens == 6
    assert parse_conllu(SAMPLE, "xpos").tags[0] == ["VBP", "RB", "VB", "."]
    path = tmp_path / "sample.conllu.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(SAMPLE)
    first = read_conllu(path, "upos", max_sentences=1)
    assert first.sentences == [["Do", "n't", "go", "."]] and first.source == str(path)


def test_reader_errors_name_the_sentence_and_word():
    missing = _conllu([("1", "Hi", "INTJ", "UH")], [("1", "Dogs", "NOUN", "_"), ("2", "bark", "VERB", "VBP")])
    with pytest.raises(ValueError, match=r"sentence 2 \(s2\), word 1 \('Dogs'\): no xpos"):
        parse_conllu(missing, "xpos")
    with pytest.raises(ValueError, match="tag must be one of"):
        parse_conllu(SAMPLE, "lemma")


def test_reader_on_ewt_counts_words_not_multiword_tokens():
    corpus = read_conllu(EWT_DEV, "upos", max_sentences=EWT_SENTENCES)
    assert len(corpus) == EWT_SENTENCES
    assert all(len(w) == len(t) > 0 for w, t in zip(corpus.sentences, corpus.tags, strict=True))
    assert set(tag_vocabulary(corpus.tags)) <= {
        "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
        "PUNCT", "SCONJ", "SYM", "VERB", "X"}
    # "didn't" (a 29-30 range in the seventh sentence of this dev file) arrives as its two words
    words = [w for s in corpus.sentences for w in s]
    assert "didn't" not in words and "n't" in words


# --- feature cache ---------------------------------------------------------------------------

def test_cache_matches_embed_and_second_call_is_a_hit(tmp_path, monkeypatch):
    encoder = _tiny_encoder()
    path = cached_features(encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path, chunk_sentences=3),
                           progress=False)
    expected = encoder.embed(SENTENCES)
    with FeatureFile.open(path) as f:
        assert (len(f), f.num_layers, f.dim) == (len(SENTENCES), 3, encoder.output_dim)
        assert f.file["layers"].dtype == np.float32
        assert f.num_tokens == sum(map(len, SENTENCES))
        # Batches differ (chunks of 3 vs all at once): equal up to float summation order.
        terms = elmo_terms(encoder.config)
        for i, want in enumerate(expected):
            assert_reordered_close(f.sentence(i), want, terms=terms)
        assert_reordered_close(f.layer(2), np.concatenate(expected, axis=1)[2], terms=terms)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # shards merged and removed

    def fail(*args, **kwargs):
        raise AssertionError("a cache hit must not run the encoder")

    monkeypatch.setattr(encoder, "embed_batches", fail)
    assert cached_features(encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path), progress=False) == path


def test_two_callers_of_one_entry_compute_it_once(tmp_path):
    """Two commands sharing a cache that ask for the same entry at once: one computes it, the
    other waits and reads it (unlocked, the second merged shards the first had removed)."""
    import threading

    encoder, runs, results = _tiny_encoder(), [], []
    embed_batches = encoder.embed_batches

    def counted(*args, **kwargs):
        runs.append(1)
        yield from embed_batches(*args, **kwargs)

    encoder.embed_batches = counted
    threads = [threading.Thread(target=lambda: results.append(cached_features(
        encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path, chunk_sentences=3), progress=False)))
        for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 2 and results[0] == results[1] and len(runs) == 3  # 3 chunks, once
    assert sorted(p.name for p in tmp_path.iterdir()) == [results[0].name]


def test_cache_key_depends_on_model_data_and_dtype(tmp_path):
    encoder = _tiny_encoder()
    path = cached_features(encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path), progress=False)
    other_data = [*SENTENCES[:-1], ["last", "one", "!"]]
    assert cached_features(encoder, other_data, FeatureSettings(cache_dir=tmp_path), progress=False) != path
    cache = FeatureSettings(cache_dir=tmp_path)
    assert cached_features(_tiny_encoder(seed=1), SENTENCES, cache, progress=False) != path
    # Token boundaries count: ["a b"] and ["a", "b"] are different data.
    assert features.data_identity([["a b"]]) != features.data_identity([["a", "b"]])
    before = model_identity(encoder)
    with torch.no_grad():
        encoder.bilm.token_encoder.char_embedding.weight[5, 0] += 1e-3
    assert model_identity(encoder) != before
    half = cached_features(_tiny_encoder(), SENTENCES, FeatureSettings(cache_dir=tmp_path, dtype="float16"),
                           progress=False)
    assert half != path
    with FeatureFile.open(half) as f16, FeatureFile.open(path) as f32:
        assert f16.file["layers"].dtype == np.float16 and f16.all_layers().dtype == np.float32
        # One rounding to float16, within half its epsilon of each value (the same on every CPU).
        assert_reordered_close(f16.all_layers(), f32.all_layers(), terms=1, eps=FP16_EPS)


def test_cache_directory_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTVEC_CACHE", str(tmp_path / "env-cache"))
    assert features.default_cache_dir() == tmp_path / "env-cache"
    path = cached_features(_tiny_encoder(), SENTENCES[:2], progress=False)
    assert path.parent == tmp_path / "env-cache" and path.is_file()


def test_interrupted_run_leaves_no_final_file_and_resumes_from_finished_chunks(tmp_path, monkeypatch):
    encoder = _tiny_encoder()
    original = encoder.embed_batches
    computed: list[int] = []

    def crash_in_third_chunk(sentences, *args, **kwargs):
        for index, array in original(sentences, *args, **kwargs):
            if len(computed) == 5:
                raise KeyboardInterrupt
            computed.append(index)
            yield index, array

    monkeypatch.setattr(encoder, "embed_batches", crash_in_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        cached_features(encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path, chunk_sentences=2),
                        progress=False)
    key = features.cache_key(model_identity(encoder), features.data_identity(SENTENCES))
    parts = tmp_path / f"{key}.parts"
    assert not (tmp_path / f"{key}.h5").exists()
    names = sorted(p.name for p in parts.iterdir())  # the two finished chunks and the manifest
    assert "manifest.json" in names and len([n for n in names if n.endswith(".h5")]) == 2, names

    computed.clear()

    def count(sentences, *args, **kwargs):
        for index, array in original(sentences, *args, **kwargs):
            computed.append(index)
            yield index, array

    monkeypatch.setattr(encoder, "embed_batches", count)
    # A different chunk size on resume keeps the one the shards were written with.
    path = cached_features(encoder, SENTENCES, FeatureSettings(cache_dir=tmp_path, chunk_sentences=5),
                           progress=False)
    assert len(computed) == len(SENTENCES) - 4  # chunks 0 and 1 were not recomputed
    assert not parts.exists()
    with h5py.File(path, "r") as f:
        assert f["lengths"][()].tolist() == [len(s) for s in SENTENCES]
        # (Chunks of 3, then of 5: other batches, other summation orders.)
        assert_reordered_close(f["layers"][()], np.concatenate(original_embed(encoder), axis=1),
                               terms=elmo_terms(encoder.config))


def original_embed(encoder: ElmoEncoder) -> list[np.ndarray]:
    return [a for _, a in sorted(type(encoder).embed_batches(encoder, SENTENCES), key=lambda x: x[0])]


# --- probes ----------------------------------------------------------------------------------

def _synthetic(n: int, rng: random.Random, lexicon: dict[str, str]) -> TaggedCorpus:
    words = sorted(lexicon)
    sentences = [[rng.choice(words) for _ in range(rng.randint(3, 10))] for _ in range(n)]
    return TaggedCorpus(sentences, [[lexicon[w] for w in s] for s in sentences], "synthetic")


def test_probe_learns_a_tag_that_is_a_function_of_the_word(tmp_path):
    rng = random.Random(0)
    words = ["cat", "dog", "runs", "quickly", "the", "a", "blue", "sky", "eats", "under", "tree", "jumps"]
    lexicon = {w: "ABC"[i % 3] for i, w in enumerate(words)}  # 4 words per tag
    train, dev = _synthetic(120, rng, lexicon), _synthetic(40, rng, lexicon)
    report = probe_tagging(_tiny_encoder(), train, dev, settings=ProbeSettings(epochs=15, batch_size=128),
                           features=FeatureSettings(cache_dir=str(tmp_path)), progress=False)
    by_name = {r.name: r for r in report.results}
    assert list(by_name) == ["layer 0", "layer 1", "layer 2", "mix"]
    assert report.majority["dev"] < 0.5
    # Layer 0 is the char-CNN: a distinct vector per word, so the tag is linearly readable.
    assert by_name["layer 0"].dev_accuracy > 0.98
    assert by_name["mix"].dev_accuracy > report.majority["dev"] + 0.4
    assert sum(by_name["mix"].mix_weights) == pytest.approx(1.0)


def test_joint_training_equals_training_each_layer_alone():
    torch.manual_seed(0)
    layers = torch.randn(3, 600, 8)
    labels = (layers[1, :, 0] > 0).long() + (layers[2, :, 1] > 0).long()
    train = SplitData(layers[:, :400], labels[:400])
    dev = SplitData(layers[:, 400:], labels[400:])
    settings = ProbeSettings(epochs=4, batch_size=64)
    joint = train_probes(train, dev, 3, settings, progress=False)
    alone = train_probes(SplitData(train.layers[1:2], train.labels), SplitData(dev.layers[1:2], dev.labels),
                         3, settings, progress=False)
    np.testing.assert_allclose(joint[1].dev_curve, alone[0].dev_curve, atol=1e-6)
    assert joint[1].dev_accuracy > joint[0].dev_accuracy  # layer 1 holds part of the answer


def test_unseen_tags_count_as_errors():
    labels = encode_tags([["A", "B"], ["Z"]], ["A", "B"])
    assert labels.tolist() == [0, 1, -1]


# --- command line ----------------------------------------------------------------------------

def test_probe_pos_command_end_to_end(tmp_path, tiny_dir, capsys):
    need_shared(EWT_TRAIN, EWT_DEV)
    test_file = tmp_path / "test.conllu"
    test_file.write_text(SAMPLE, encoding="utf-8")
    out = tmp_path / "results.json"
    args = ["probe", "pos", "--train", str(EWT_TRAIN), "--dev", str(EWT_DEV), "--test", str(test_file),
            "--model", str(tiny_dir), "--max-sentences", str(EWT_SENTENCES), "--epochs", "3", "--seed", "1",
            "--cache-dir", str(tmp_path / "cache"), "--output", str(out), "--quiet", "--threads", "1"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    results = json.loads(out.read_text(encoding="utf-8"))
    names = [p["name"] for p in results["probes"]]
    assert names == ["layer 0", "layer 1", "layer 2", "mix"]
    for name in names:
        assert f"\n{name} " in printed
    for probe in results["probes"]:
        assert 0.0 <= probe["dev_accuracy"] <= 1.0 and probe["test_accuracy"] is not None
        assert len(probe["dev_curve"]) == 3 and 1 <= probe["best_epoch"] <= 3
    assert results["tag"] == "upos" and "runtime: features" in printed
    assert results["splits"]["train"]["sentences"] == EWT_SENTENCES
    assert results["splits"]["test"]["tokens"] == 6
    cache = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(cache) == 3 and all(name.endswith(".h5") for name in cache)

    # Rerun: features come from the cache, and the seeded results are identical.
    assert main(args) == 2  # an existing output is refused...
    assert main([*args, "--overwrite"]) == 0  # ...unless replacing it is asked for
    again = json.loads(out.read_text(encoding="utf-8"))
    assert again["probes"] == results["probes"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == cache


def test_probe_pos_command_reports_a_missing_file(tmp_path, tiny_dir, capsys):
    code = main(["probe", "pos", "--train", str(tmp_path / "nope.conllu"), "--dev", str(tmp_path / "x"),
                 "--model", str(tiny_dir), "--quiet"])
    assert code == 2
    assert "nope.conllu" in capsys.readouterr().err
