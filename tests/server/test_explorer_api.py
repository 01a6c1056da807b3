"""The explorer's endpoints (``/v1/explore``) of a real ``contextvec serve`` with two models (the
bundled ELMo and CoVe), a corpus file and a probe report, checked against ``Encoder.embed``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from tolerance import FP16_EPS, assert_reordered_close, elmo_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")

from test_server import call  # noqa: E402

import contextvec  # noqa: E402
from contextvec.server.process import ServerProcess  # noqa: E402

SECOND = "cove-en-multi30k"
SENTENCES = ["We had a picnic on the bank of the river .",
             "She deposited the cheque at the bank before noon .",
             "The bank on the other end of the street was robbed ."]
CORPUS = ["We walked along the bank of the river at sunset .", "",
          "Thieves broke into the bank and emptied the safe .",
          "She opened a savings account at the bank near her office .", "The match ended in a draw ."]
PROBE = {"labels": ["a", "b"], "majority_baseline": {"dev": 0.5}, "probes": [
    {"name": "layer 0", "layer": 0, "dev_accuracy": 0.6, "test_accuracy": None},
    {"name": "mix", "layer": None, "dev_accuracy": 0.7, "test_accuracy": None,
     "mix_weights": [0.2, 0.3, 0.5], "mix_gamma": 1.25}]}


def env(tmp_path, key: str = "") -> dict:
    return {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": key, "CONTEXTVEC_CACHE": str(tmp_path / "cache")}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("explore")
    (root / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    (root / "probe.json").write_text(json.dumps(PROBE), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server(files):
    args = ["--threads", "1", "--explore-model", SECOND, "--explore-corpus", str(files / "corpus.txt"),
            "--explore-report", str(files / "probe.json")]
    with ServerProcess(args, env=env(files)) as process:
        yield process.url


@pytest.fixture(scope="module")
def encoders():
    torch.set_num_threads(1)
    return {"elmo-en-small": contextvec.load(), SECOND: contextvec.load(SECOND)}


def cosines(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    return unit @ unit.transpose(0, 2, 1)


def test_the_explorer_says_what_it_holds(server, files):
    status, _, info = call(server, "/v1/explore")
    assert status == 200
    assert [(m["id"], m["num_layers"], m["layer_names"][0]) for m in info["models"]] == [
        ("elmo-en-small", 3, "0 char-CNN"), (SECOND, 3, "0 word vectors")]
    assert info["corpus"] == {"source": "corpus.txt", "sentences": 4, "tokens": 40}  # the blank line skipped
    [report] = info["reports"]
    assert report["source"] == str(files / "probe.json") and report["kind"] == "probe"
    assert report["mixes"] == [{"name": "mix", "weights": [0.2, 0.3, 0.5], "gamma": 1.25}]


@pytest.mark.parametrize("model", ["elmo-en-small", SECOND])
def test_similarity_is_the_cosine_of_the_models_vectors(server, encoders, model):
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank",
                                                               "model": model})
    assert status == 200 and body["model"] == model and body["total"] == 3
    assert [(o["sentence"], o["position"]) for o in body["occurrences"]] == [(0, 6), (1, 6), (2, 1)]
    encoder = encoders[model]
    arrays = encoder.embed([s.split() for s in SENTENCES])
    expected = cosines(np.stack([arrays[0][:, 6], arrays[1][:, 6], arrays[2][:, 1]], axis=1))
    got = np.array([layer["matrix"] for layer in body["layers"]])
    # batched with the server's other work (another summation order), then a cosine of dim terms
    terms = (elmo_terms(encoder.config) if model == "elmo-en-small" else 4096) + 3 * encoder.output_dim
    assert_reordered_close(got, expected, terms=terms)
    assert got[-1, 0, 1] < got[0, 0, 1]  # river vs money: the top layer below the context-free one
    top = body["layers"][-1]
    assert top["name"] == "2 biLSTM-2" if model == "elmo-en-small" else "2 MT-LSTM-2"
    assert top["farthest"]["similarity"] == pytest.approx(got[-1][np.triu_indices(3, k=1)].min(), abs=1e-6)


def test_nearest_contexts_per_layer(server, encoders):
    encoder = encoders["elmo-en-small"]
    status, _, body = call(server, "/v1/explore/nearest", {"sentence": SENTENCES[0], "position": 6,
                                                            "top_k": 2})
    assert status == 200 and body["word"] == "bank" and body["occurrences"] == 3
    corpus = [s.split() for s in CORPUS if s]
    arrays = encoder.embed([SENTENCES[0].split()] + corpus)
    for k, layer in enumerate(body["layers"]):
        pairs = [np.stack([arrays[0][k:k + 1, 6], arrays[1 + i][k:k + 1, s.index("bank")]], axis=1)
                 for i, s in enumerate(corpus) if "bank" in s]
        scores = sorted((float(cosines(pair)[0, 0, 1]), i) for i, pair in enumerate(pairs))[::-1]
        assert len(layer["contexts"]) == 2
        # the corpus's vectors are cached as float16: each element rounds once
        assert_reordered_close(np.array([c["similarity"] for c in layer["contexts"]]),
                               np.array([s for s, _ in scores[:2]]), terms=2, eps=FP16_EPS)
    assert body["layers"][-1]["contexts"][0]["tokens"] == corpus[0]  # the river, not the money


PLAY = {"game": ["The match was stopped twice for foul play .",
                 "The goalkeeper was sent off for dangerous play ."],
        "drama": ["They went to see a play at the theatre .",
                  "The actors rehearsed the play for six weeks ."]}
"""Two senses of "play" the bundled model separates (the margins here come from its vectors)."""
BANK = {"money": ["The bank on the other end of the street was robbed .",
                  "She deposited the cheque at the bank before noon ."],
        "river": ["We had a picnic on the bank of the river .",
                  "The boat drifted slowly towards the muddy bank ."]}
"""Two senses of "bank" the bundled model does not separate: its different-sense pairs are on
average closer than its same-sense pairs, in every layer."""


def sense_margins(encoder, senses: dict[str, list[str]], word: str) -> np.ndarray:
    """Per layer: the mean cosine of same-sense pairs minus that of different-sense pairs."""
    marks = [m for m, texts in senses.items() for _ in texts]
    sentences = [t.split() for texts in senses.values() for t in texts]
    arrays = encoder.embed(sentences)
    sims = cosines(np.stack([a[:, s.index(word)] for a, s in zip(arrays, sentences, strict=True)], axis=1))
    upper = np.triu_indices(len(marks), k=1)
    alike = np.array([marks[i] == marks[j] for i, j in zip(*upper, strict=True)])
    return np.array([m[upper][alike].mean() - m[upper][~alike].mean() for m in sims])


@pytest.mark.parametrize("senses, word", [(PLAY, "play"), (BANK, "bank")])
def test_the_summary_says_which_layer_separates_the_senses_or_that_none_does(server, encoders, senses, word):
    marks = [m for m, texts in senses.items() for _ in texts]
    sentences = [t for texts in senses.values() for t in texts]
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": sentences, "word": word,
                                                               "senses": marks})
    assert status == 200 and [o["sense"] for o in body["occurrences"]] == marks
    expected = sense_margins(encoders["elmo-en-small"], senses, word)
    layers = body["separation"]["layers"]
    got = np.array([layer["margin"] for layer in layers])
    assert_reordered_close(got, expected, terms=elmo_terms(encoders["elmo-en-small"].config) + 3 * 256)
    assert [layer["separates"] for layer in layers] == [bool(m >= 0.0005) for m in expected]
    if word == "bank":
        assert body["separation"]["best"] is None
        assert body["summary"].startswith("No layer separates the senses: ")
        assert all(layer["verdict"].endswith("does not separate the senses") for layer in layers)
    else:
        best = int(np.argmax(expected))
        assert body["separation"]["best"] == best and expected[best] > 0.0005
        name = layers[best]["name"].split()[1]
        assert body["summary"].startswith(f"{name} separates the senses best, by a margin of "
                                          f"{layers[best]['margin']:.3f} (")


def test_senses_that_cannot_be_compared_are_said_or_refused(server):
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank"})
    assert status == 200 and body["separation"] is None and body["summary"] is None  # not marked
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank",
                                                               "senses": ["river", "money", "vault"]})
    assert status == 200 and body["separation"] is None
    assert body["summary"] == ("Not measured: no two occurrences of the same sense: give at least two "
                               "sentences of one sense and one of another.")
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank",
                                                               "senses": ["river", "money"]})
    assert status == 422 and body["error"]["param"] == "senses"
    assert body["error"]["message"] == "senses: 2 for 3 sentences: give one sense per sentence"


def test_what_cannot_be_compared_is_said(server):
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES[:1], "word": "bank"})
    assert status == 200 and body["total"] == 1 and body["layers"] == []
    status, _, body = call(server, "/v1/explore/nearest", {"sentence": "a robbed bank", "position": 1})
    assert status == 200 and body["occurrences"] == 0 and body["layers"] == []
    status, _, body = call(server, "/v1/explore/nearest", {"sentence": "the bank", "position": 2})
    assert status == 422 and body["error"]["param"] == "position"
    assert body["error"]["message"] == "position: 2 is past the sentence's 2 tokens (0..1)"
    status, _, body = call(server, "/v1/explore/nearest", {"sentence": " ", "position": 0})
    assert status == 422 and body["error"]["message"] == (
        "sentence: empty or blank: give a sentence with the word")
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank",
                                                               "model": "bert"})
    assert status == 422 and body["error"]["message"] == (
        f"model: no model 'bert' here (the explorer has elmo-en-small, {SECOND})")
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "the bank"})
    assert status == 422 and body["error"]["param"] == "word"


def test_the_schema_bounds_the_explorers_requests(server):
    _, _, schema = call(server, "/openapi.json")
    models = schema["components"]["schemas"]
    for name in ("SimilarityRequest", "NearestRequest"):
        text = next(b for b in models[name]["properties"]["model"]["anyOf"] if b.get("type") == "string")
        assert text["enum"] == ["elmo-en-small", SECOND]
    assert models["SimilarityRequest"]["properties"]["sentences"]["maxItems"] == 256
    assert "/" not in schema["paths"] and "/v1/explore/nearest" in schema["paths"]
    # position: bounded by --max-sentence-tokens as far as a schema can; the rest said in words.
    position = models["NearestRequest"]["properties"]["position"]
    assert (position["minimum"], position["maximum"]) == (0, 511)
    assert "below the sentence's token count" in position["description"]
    assert "422" in schema["paths"]["/v1/explore/nearest"]["post"]["responses"]
    # Over the schema's maxItems: a 422, as the schema's other bounds.
    status, _, body = call(server, "/v1/explore/similarity", {"sentences": ["a bank"] * 257, "word": "bank"})
    assert status == 422 and body["error"]["param"] == "sentences", body


def test_the_page_is_open_and_its_calls_need_the_key(tmp_path):
    with ServerProcess(["--threads", "1"], env=env(tmp_path, "sesame")) as server:
        for path in ("/", "/static/explorer.js", "/static/vendor/echarts/echarts.min.js"):
            status, headers, _ = call(server.url, path)
            assert status == 200, path
        status, _, body = call(server.url, "/v1/explore")
        assert status == 401
        assert call(server.url, "/v1/explore", headers={"Authorization": "Bearer sesame"})[0] == 200


def test_no_ui_serves_the_api_alone(tmp_path):
    with ServerProcess(["--threads", "1", "--no-ui"], env=env(tmp_path)) as server:
        assert call(server.url, "/")[0] == 404
        assert call(server.url, "/v1/explore")[0] == 404
        assert not any(p.startswith("/v1/explore") for p in call(server.url, "/openapi.json")[2]["paths"])
        assert call(server.url, "/v1/embed", {"sentences": ["a b"]})[0] == 200
    assert not (tmp_path / "cache").exists()  # nothing was indexed


@pytest.mark.parametrize("args, message", [
    (["--no-ui", "--explore-model", SECOND],
     "--explore-model is for the explorer page, which --no-ui turns off"),
    (["--explore-corpus", "{tmp}/absent.txt"], "--explore-corpus {tmp}/absent.txt: No such file"),
    (["--explore-corpus", "{tmp}/blank.txt"], "blank.txt: no sentence in it (every line is blank)"),
    (["--explore-corpus", "{tmp}/latin1.txt"], "latin1.txt: line 2 is not valid UTF-8 (1 such line(s))"),
    (["--explore-report", "{tmp}/bad.json"],
     "--explore-report {tmp}/bad.json: not a report contextvec writes"),
])
def test_explorer_option_errors_are_one_line(tmp_path, args, message):
    (tmp_path / "bad.json").write_text('{"hello": 1}')
    (tmp_path / "blank.txt").write_text("\n  \n")
    (tmp_path / "latin1.txt").write_bytes("a bank\nune rivi\u00e8re\n".encode("latin-1"))
    command = [sys.executable, "-m", "contextvec.cli.main", "serve", "--threads", "1", "--port", "0",
               *(a.format(tmp=tmp_path) for a in args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120,
                            env={**os.environ, **env(tmp_path)})
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert message.format(tmp=tmp_path) in result.stderr



def test_the_explorer_needs_the_server_extra_alone(files):
    # the tasks extra's packages missing: the page, its corpus and a report still work
    blocked = ("seqeval", "conllu", "nltk", "matplotlib")
    server = ServerProcess(["--threads", "1", "--explore-report", str(files / "probe.json")], env=env(files))
    script = (f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
              "from contextvec.cli.main import main\nsys.exit(main(sys.argv[1:]))")
    server.command = [sys.executable, "-c", script, "serve", *server.args]
    with server:
        status, _, info = call(server.url, "/v1/explore")
        assert status == 200 and info["reports"][0]["kind"] == "probe"
        status, _, body = call(server.url, "/v1/explore/similarity", {"sentences": SENTENCES, "word": "bank"})
        assert status == 200 and len(body["layers"]) == 3
