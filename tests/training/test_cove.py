"""CoVe: word-vector files, gensim vectors, the attentional seq2seq (training, decoding, exact
resume), the CoVe encoder and the Salesforce MT-LSTM conversion."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close
from torch import nn

from contextvec.cli.main import main
from contextvec.encoders.cove import (
    CoveEncoder,
    convert_salesforce_mt_lstm,
    load_cove_encoder,
    save_cove_encoder,
)
from contextvec.io.native import load_native
from contextvec.io.word_vectors import (
    WordVectors,
    WordVectorsError,
    detect_format,
    load_word_vectors,
    save_word_vectors,
)
from contextvec.training.loop import CHECKPOINT
from contextvec.training.mt.config import MTTrainSettings
from contextvec.training.mt.data import MTFiles, read_parallel
from contextvec.training.mt.trainer import MTTrainer
from contextvec.training.mt.translator import load_translator, perplexity, translate

WORDS = [f"w{i}" for i in range(10)]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models: threads only add overhead


# ---------------------------------------------------------------------- word vectors
def _vectors(n: int = 6, dim: int = 5, seed: int = 0) -> WordVectors:
    words = ["the", "über", "<unk>", "x-y", "3.5", "Zoë"][:n]
    return WordVectors(words, np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32))


@pytest.mark.parametrize("fmt", ["glove", "word2vec", "word2vec-binary"])
@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_word_vector_formats_round_trip(tmp_path, fmt, suffix):
    wv = _vectors()
    path = save_word_vectors(tmp_path / f"v{suffix}", wv.words, wv.vectors, fmt)
    assert detect_format(path) == fmt
    for given in ("auto", fmt):
        loaded = load_word_vectors(path, given)
        assert loaded.words == wv.words
        assert loaded.vectors.dtype == np.float32
        np.testing.assert_array_equal(loaded.vectors, wv.vectors)  # exact, text formats too


def test_word_vectors_other_writers_and_options(tmp_path):
    wv = _vectors()
    # word2vec.c text: a trailing space on each line; gensim binary: no newline after vectors.
    text = f"{len(wv.words)} 5\n" + "".join(
        w + " " + " ".join(f"{x:.9g}" for x in v) + " \n" for w, v in zip(wv.words, wv.vectors, strict=True)
    )
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    np.testing.assert_array_equal(load_word_vectors(tmp_path / "c.txt").vectors, wv.vectors)
    blob = f"{len(wv.words)} 5\n".encode() + b"".join(
        w.encode() + b" " + v.astype("<f4").tobytes() for w, v in zip(wv.words, wv.vectors, strict=True)
    )
    (tmp_path / "g.bin").write_bytes(blob)
    loaded = load_word_vectors(tmp_path / "g.bin")
    assert loaded.words == wv.words
    np.testing.assert_array_equal(loaded.vectors, wv.vectors)
    # GloVe 840B has words with spaces: everything before the last dim fields.
    (tmp_path / "s.txt").write_text("c 3 4\na b 1 2\n", encoding="utf-8")
    assert load_word_vectors(tmp_path / "s.txt", "glove").words == ["c", "a b"]
    assert load_word_vectors(tmp_path / "s.txt", "glove").dim == 2
    # max_words / keep
    path = save_word_vectors(tmp_path / "v.txt", wv.words, wv.vectors)
    assert load_word_vectors(path, max_words=2).words == wv.words[:2]
    kept = load_word_vectors(path, keep={"über", "Zoë"})
    assert kept.words == ["über", "Zoë"]
    np.testing.assert_array_equal(kept.vectors, wv.vectors[[1, 5]])
    with pytest.raises(ValueError, match="whitespace"):
        save_word_vectors(tmp_path / "bad.txt", ["a b"], np.zeros((1, 2)))


def test_word_vector_errors_name_the_line(tmp_path):
    wv = _vectors()
    glove = save_word_vectors(tmp_path / "g.txt", wv.words, wv.vectors, "glove").read_bytes()
    w2v = save_word_vectors(tmp_path / "w.txt", wv.words, wv.vectors, "word2vec").read_bytes()
    binary = save_word_vectors(tmp_path / "b.bin", wv.words, wv.vectors, "word2vec-binary").read_bytes()

    def write(name: str, data: bytes):
        (tmp_path / name).write_bytes(data)
        return tmp_path / name

    lines = glove.split(b"\n")
    cut = write("cut.txt", glove[: len(lines[0]) + len(lines[1]) + 2 + 20])  # inside line 3
    with pytest.raises(WordVectorsError, match="line 3"):
        load_word_vectors(cut, "glove")
    ragged = write("ragged.txt", b"\n".join([lines[0], b"foo 1 2", *lines[2:]]))
    with pytest.raises(WordVectorsError, match=r"line 2: expected a word and 5 numbers, found 2"):
        load_word_vectors(ragged)
    nan = write("nan.txt", b"\n".join([lines[0], b"foo 1 2 x 4 5", *lines[2:]]))
    with pytest.raises(WordVectorsError, match="line 2: not a number"):
        load_word_vectors(nan)
    w2v_lines = w2v.split(b"\n")
    short = write("short.txt", b"\n".join(w2v_lines[:4]) + b"\n")  # header + 3 of 6 vectors
    with pytest.raises(WordVectorsError, match=r"header says 6 vectors but the file ends after 3 \(line 5"):
        load_word_vectors(short)
    with pytest.raises(WordVectorsError, match="record 6 of 6"):
        load_word_vectors(write("b-cut.bin", binary[:-9]))
    three = sum(len(w.encode()) + 22 for w in wv.words[:3])  # word, space, 20 bytes, newline
    body = binary[binary.index(b"\n") + 1:]
    with pytest.raises(WordVectorsError, match="record 4 of 4: the file ends before the word"):
        load_word_vectors(write("b-cut2.bin", b"4 5\n" + body[:three]))
    # A header declaring terabyte vectors over a few bytes: refused as truncated, no read sized by it.
    with pytest.raises(WordVectorsError, match=r"record 1 of 1 \('a'\): the file ends after 4 of the "
                                               r"vector's 4000000000000 bytes"):
        load_word_vectors(write("huge.bin", b"1 1000000000000\na \x00\x00\x80\x3f"))
    dup = write("dup.txt", glove + lines[0] + b"\n")
    with pytest.raises(WordVectorsError, match="line 7: repeated word 'the' \\(first at line 1\\)"):
        load_word_vectors(dup)
    assert load_word_vectors(dup, duplicates="first").words == wv.words
    with pytest.raises(WordVectorsError, match="line 2: invalid UTF-8"):
        load_word_vectors(write("utf.txt", lines[0] + b"\n\xff\xfe 1 2 3 4 5\n"))


# ---------------------------------------------------------------------- gensim
def test_train_word_vectors_cli(tmp_path):
    rng = random.Random(0)
    animals, foods = ["cat", "dog", "horse", "cow"], ["bread", "cheese", "apple", "rice"]
    lines = []
    for _ in range(300):  # paragraph lines of two sentences: moses-sentences splits them
        lines.append(f"The {rng.choice(animals)} runs fast. I eat {rng.choice(foods)} today.")
    with gzip.open(tmp_path / "corpus.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    out = tmp_path / "vectors.txt"
    assert main(["train-word-vectors", "--train", str(tmp_path / "*.gz"), "--output", str(out),
                 "--dim", "12", "--epochs", "2", "--min-count", "2", "--lowercase", "--quiet"]) == 0
    wv = load_word_vectors(out)
    assert wv.vectors.shape == (len(wv.words), 12)
    assert {"the", "cat", "bread", ".", "runs"} <= set(wv.words)
    assert "The" not in wv.words  # --lowercase
    assert np.isfinite(wv.vectors).all() and np.abs(wv.vectors).sum() > 0
    assert not list(tmp_path.glob(".tokenized-*"))  # the temporary corpus is removed


# ---------------------------------------------------------------------- seq2seq
def _write_copy_task(root, n: int = 200, seed: int = 0):
    """Source: random words of WORDS; target: the same words upper-cased (a copy task)."""
    rng = random.Random(seed)
    sources = [[rng.choice(WORDS) for _ in range(rng.randint(3, 6))] for _ in range(n)]
    (root / "train.src").write_text("".join(" ".join(s) + "\n" for s in sources), encoding="utf-8")
    (root / "train.tgt").write_text("".join(" ".join(s).upper() + "\n" for s in sources), encoding="utf-8")
    vectors = np.random.default_rng(seed).normal(size=(len(WORDS) - 1, 16)).astype(np.float32)
    save_word_vectors(root / "vectors.txt", WORDS[:-1], vectors)  # w9 has no vector: UNK
    return sources


@pytest.fixture(scope="module")
def copy_model(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("copy")
    sources = _write_copy_task(root)
    for side in ("src", "tgt"):
        lines = (root / f"train.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (root / f"valid.{side}").write_text("".join(lines[:30]), encoding="utf-8")
    config = MTTrainSettings(hidden_size=48, target_dim=16, dropout=0.0, batch_size=8, epochs=5,
                           lr=0.01, min_count=1, checkpoint_every=0, seed=0)
    files = MTFiles(root / "train.src", root / "train.tgt", root / "vectors.txt", root / "valid.src",
                    root / "valid.tgt")
    trainer = MTTrainer(config, files, root / "out", progress=False, log=lambda message: None)
    history = trainer.train()
    return root, trainer, history, sources


def test_seq2seq_learns_copy_task(copy_model):
    root, trainer, history, sources = copy_model
    assert history[0]["train_loss"] > 1.5 and history[-1]["train_loss"] < 0.35
    assert all(h["valid_bleu"] >= 0 and h["valid_perplexity"] > 1 for h in history)
    model, vocab = trainer.model, trainer.vocab
    hyps = translate(model, vocab, sources[:60])
    correct = sum(h == [w.upper() for w in s] for h, s in zip(hyps, sources[:60], strict=True))
    assert correct >= 30
    pairs = read_parallel(root / "train.src", root / "train.tgt")[:60]
    assert perplexity(model, vocab, pairs) < 1.6
    # The best-on-valid model was saved: it reloads with the same outputs.
    best = max(history, key=lambda h: h["valid_bleu"])
    assert [h["epoch"] for h in history if h.get("best")][-1] == best["epoch"]
    record = json.loads((root / "out" / "model" / "training.json").read_text())
    assert record["history"][best["epoch"] - 1]["best"]


def test_beam_one_is_greedy_and_beam_search_batches(copy_model):
    root, trainer, _, sources = copy_model
    model, vocab = trainer.model.eval(), trainer.vocab
    sentences = sources[:40] + [["w9", "w1"], ["w3"]]
    src, lengths = model.encoder.batch_ids(sentences)
    greedy = model.greedy(src, lengths, vocab.bos, vocab.eos)
    assert model.beam_search(src, lengths, vocab.bos, vocab.eos, beam=1) == greedy
    # Batched beam search = one sentence at a time.
    beams = model.beam_search(src, lengths, vocab.bos, vocab.eos, beam=4, length_penalty=0.6)
    for i in (0, 17, 41):
        alone = model.beam_search(src[i:i + 1, : int(lengths[i])], lengths[i:i + 1], vocab.bos,
                                  vocab.eos, beam=4, length_penalty=0.6)
        assert alone[0] == beams[i]
    # A hypothesis stops at its length cap (2 * source length + 10).
    assert all(len(h) <= 2 * len(s) + 10 for h, s in zip(beams, sentences, strict=True))
    assert translate(model, vocab, [[], ["w1"]], beam=3)[0] == []


def test_translate_and_bleu_commands(copy_model, capsys):
    root, trainer, _, _ = copy_model
    model, vocab = load_translator(root / "out")
    sources = [line.split() for line in (root / "valid.src").read_text().splitlines()]
    reference = translate(trainer.model, trainer.vocab, sources)
    assert main(["translate", "--model", str(root / "out"), str(root / "valid.src"), "--beam", "1",
                 "--output", str(root / "hyp.txt"), "--quiet"]) == 0
    assert [line.split() for line in (root / "hyp.txt").read_text().splitlines()] == reference
    assert main(["bleu", "--model", str(root / "out" / "model"), "--src", str(root / "valid.src"),
                 "--ref", str(root / "valid.tgt"), "--beam", "2", "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["bleu"] > 20 and "tok:none" in result["signature"] and "case:lc" in result["signature"]
    assert len(vocab) == len(trainer.vocab)


def test_resume_is_exact(tmp_path):
    _write_copy_task(tmp_path, n=60)
    config = MTTrainSettings(hidden_size=8, target_dim=8, dropout=0.3, batch_size=10, epochs=2,
                           lr=0.01, min_count=1, checkpoint_every=4, seed=3, trainable_unk=True)
    files = MTFiles(tmp_path / "train.src", tmp_path / "train.tgt", tmp_path / "vectors.txt",
                    tmp_path / "train.src", tmp_path / "train.tgt")

    def trainer(out, on_step=None):
        return MTTrainer(config, files, tmp_path / out, progress=False, log=lambda message: None,
                         on_step=on_step)

    straight = trainer("straight")
    straight.train()

    def interrupt(t: MTTrainer) -> None:
        if t.step == 8:  # mid epoch 2 (6 batches per epoch), not at a checkpoint step
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        trainer("resumed", interrupt).train()
    assert torch.load(tmp_path / "resumed" / CHECKPOINT, weights_only=True)["step"] in (8, 9)
    with pytest.raises(FileExistsError, match="--resume"):
        trainer("resumed").train()
    resumed = trainer("resumed")
    resumed.train(resume=True)
    assert resumed.step == straight.step == 12
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.model.encoder.unk.abs().sum() > 0  # trainable UNK was trained
    keys = ("train_loss", "valid_perplexity", "valid_bleu", "lr")
    assert [[h[k] for k in keys] for h in resumed.history] == [[h[k] for k in keys] for h in straight.history]
    changed = MTTrainSettings(**{**config.to_dict(), "lr": 0.5})
    with pytest.raises(ValueError, match="another training config \\(lr differ"):
        MTTrainer(changed, files, tmp_path / "resumed", progress=False,
                  log=lambda message: None).train(resume=True)


# ---------------------------------------------------------------------- CoVe encoder
# Per step, the MT-LSTM's gates sum 16 GloVe inputs and 48 states (first layer), 96 outputs and
# 48 states (second): a batch of another size may run them in other orders (oneDNN's LSTM).
COPY_TERMS = (16 + 48) + (96 + 48)


def test_cove_encoder_from_translation_model(copy_model):
    root, trainer, _, _ = copy_model
    encoder = load_cove_encoder(root / "out" / "model")
    assert isinstance(encoder, CoveEncoder)
    assert (encoder.num_layers, encoder.output_dim) == (3, 16 + 96)
    sentences = [["w1", "w9", "zzz", "w2"], ["w3"], [], "w4 w5"]
    out = encoder([["w1", "w9", "zzz", "w2"], ["w3"]])
    assert out.layers.shape == (3, 2, 4, 112)
    assert out.mask.tolist() == [[True] * 4, [True, False, False, False]]
    assert (out.layers[:, 1, 1:] == 0).all()
    vectors = encoder.embed(sentences, batch_size=3)
    assert [v.shape for v in vectors] == [(3, 4, 112), (3, 1, 112), (3, 0, 112), (3, 2, 112)]
    alone = [encoder.embed([s], batch_size=1)[0] for s in sentences]
    for v, w in zip(vectors, alone, strict=True):
        assert_reordered_close(v, w, terms=COPY_TERMS)  # no dependence on the batch
    v = vectors[0]
    wv = load_word_vectors(root / "vectors.txt")
    np.testing.assert_array_equal(v[:, 0, :16], np.stack([wv.vectors[1]] * 3))  # [GloVe; ...]
    assert (v[0, :, 16:] == 0).all() and (v[:, 1:3, :16] == 0).all()  # layer 0 / OOV: zeros
    # The context parts are the translation encoder's layer outputs.
    mt = trainer.model.encoder.eval()
    ids, lengths = mt.batch_ids([sentences[0]])
    with torch.no_grad():
        layers = mt(ids, lengths).layers
    for k in (1, 2):
        assert_reordered_close(v[k, :, 16:], layers[k - 1][0].numpy(), terms=COPY_TERMS)
    # save -> "cove" directory -> load
    save_cove_encoder(encoder, root / "cove")
    assert load_native(root / "cove")[0] == "cove"
    again = load_cove_encoder(root / "cove").embed(sentences)
    for x, y in zip(again, vectors, strict=True):
        np.testing.assert_array_equal(x, y)


def test_salesforce_conversion_matches_nn_lstm(tmp_path):
    torch.manual_seed(0)
    lstm = nn.LSTM(12, 6, num_layers=2, bidirectional=True, batch_first=True).eval()
    torch.save(lstm.state_dict(), tmp_path / "wmtlstm.pth")
    wv = WordVectors([f"v{i}" for i in range(8)],
                     np.random.default_rng(0).normal(size=(8, 12)).astype(np.float32))
    save_word_vectors(tmp_path / "glove.txt", wv.words, wv.vectors, "glove")
    convert_salesforce_mt_lstm(tmp_path / "wmtlstm.pth", tmp_path / "lstm-only")
    with pytest.raises(ValueError, match="holds no word vectors"):
        load_cove_encoder(tmp_path / "lstm-only")
    encoders = [load_cove_encoder(tmp_path / "lstm-only", word_vectors=tmp_path / "glove.txt"),
                load_cove_encoder(convert_salesforce_mt_lstm(tmp_path / "wmtlstm.pth", tmp_path / "full",
                                                             word_vectors=wv))]
    sentences = [["v1", "v2", "oov", "v7", "v0"], ["v3", "v4"]]
    first = nn.LSTM(12, 6, bidirectional=True, batch_first=True).eval()
    first.load_state_dict({k: v for k, v in lstm.state_dict().items() if "_l0" in k})
    index = wv.index()
    for encoder in encoders:
        out = encoder.embed(sentences)
        for sentence, v in zip(sentences, out, strict=True):
            x = torch.stack([torch.from_numpy(wv.vectors[index[w]]) if w in index else torch.zeros(12)
                             for w in sentence]).unsqueeze(0)
            with torch.no_grad():
                top, _ = lstm(x)
                bottom, _ = first(x)
            assert v.shape == (3, len(sentence), 24)
            np.testing.assert_array_equal(v[:, :, :12], np.stack([x[0].numpy()] * 3))
            np.testing.assert_array_equal(v[0, :, 12:], 0)
            # Other batches than nn.LSTM's here: per step 12 inputs and 6 states, twice.
            assert_reordered_close(v[1, :, 12:], bottom[0].numpy(), terms=12 + 6)
            assert_reordered_close(v[2, :, 12:], top[0].numpy(), terms=2 * (12 + 6))
    state = {f"rnn.{k}": v for k, v in lstm.state_dict().items()}
    torch.save(state, tmp_path / "prefixed.pth")
    convert_salesforce_mt_lstm(tmp_path / "prefixed.pth", tmp_path / "prefixed")
    bad = dict(lstm.state_dict())
    bad["embedding.weight"] = torch.zeros(3, 12)
    torch.save(bad, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="unexpected tensor 'embedding.weight'"):
        convert_salesforce_mt_lstm(tmp_path / "bad.pth", tmp_path / "bad")
    del bad["embedding.weight"], bad["bias_hh_l1_reverse"]
    torch.save(bad, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="lacks \\['layers.1.bias_hh_l0_reverse'\\]"):
        convert_salesforce_mt_lstm(tmp_path / "bad.pth", tmp_path / "bad")


def test_cove_through_load_embed_and_probe(copy_model, tmp_path):
    """CoVe is one more encoder behind contextvec.load: `embed` and `probe pos` take it as is."""
    import h5py

    import contextvec

    root, _, _, _ = copy_model
    encoder = contextvec.load(root / "out" / "model")
    assert isinstance(encoder, CoveEncoder)
    contextvec.save(encoder, tmp_path / "cove")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 w3\nw4\n", encoding="utf-8")
    assert main(["embed", str(src), str(tmp_path / "o.h5"), "--all", "--quiet",
                 "--model", str(tmp_path / "cove")]) == 0
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert_reordered_close(f["0"][()], encoder.embed([["w1", "w2", "w3"]])[0], terms=COPY_TERMS)
    conllu = "".join(
        f"# sent_id = s{i}\n" + "".join(f"{j + 1}\tw{(i + j) % 9}\t_\t{'NOUN' if (i + j) % 2 else 'VERB'}"
                                         "\t_\t_\t_\t_\t_\t_\n" for j in range(4)) + "\n"
        for i in range(30)
    )
    (tmp_path / "t.conllu").write_text(conllu, encoding="utf-8")
    out = tmp_path / "pos.json"
    assert main(["probe", "pos", "--train", str(tmp_path / "t.conllu"), "--dev",
                 str(tmp_path / "t.conllu"), "--model", str(tmp_path / "cove"), "--epochs", "3",
                 "--cache-dir", str(tmp_path / "cache"), "--output", str(out), "--quiet"]) == 0
    layers = [p["name"] for p in json.loads(out.read_text())["probes"]]
    assert len(layers) == 4  # 3 layers + the mix
