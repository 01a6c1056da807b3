"""BERT pretraining: WordPiece training, masking, NSP pairs, streaming resume, training, exact resume,
2-process DDP, HF-format output that ``contextvec.load`` reads."""

from __future__ import annotations

import dataclasses
import gzip
import io
import itertools
import json
import math
import multiprocessing
import random
import re
import signal
import socket
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import shared_file
from safetensors.torch import load_file
from tolerance import FP32_EPS, bert_terms

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bert import BertEncoder, WordPieceTokenizer
from contextvec.encoders.bert.heads import BertForPreTraining, load_pretraining_model
from contextvec.training.bert.config import PRESETS
from contextvec.training.bert.evaluate import EVAL_SEED, EvalSettings, evaluate_pretraining
from contextvec.training.bert.instances import (
    IGNORE_INDEX,
    IS_NEXT,
    NOT_NEXT,
    InstanceSettings,
    Masker,
    collate,
)
from contextvec.training.bert.stream import PretrainingStream
from contextvec.training.bert.trainer import BertTrainer
from contextvec.training.bert.wordpiece import SPECIAL_TOKENS

# Whole articles from the start of the shard (the excerpt in tests/data serves where ../shared is
# absent): Anarchism and Autism, then the short Albedo and A, a blank line between articles.
WIKI = "corpora/wikipedia-en-2015/part-000.txt.gz"
WIKI_LINES = 215


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models gain nothing from a second thread, and on a busy machine OpenMP's waiting
    # for it makes every step several times slower.
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Wikipedia articles (a blank line between them): train.txt.gz 2 long ones, valid.txt 2 short
    ones (also the small corpus of a few steps per epoch), and tokenizer/ (a 1,000-piece
    vocabulary made by ``contextvec train-wordpiece``)."""
    root = tmp_path_factory.mktemp("bert-corpus")
    with gzip.open(shared_file(WIKI), "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, WIKI_LINES))
    assert len(lines) == WIKI_LINES
    cut = [i for i, line in enumerate(lines) if not line.strip()][1] + 1  # after 2 articles
    with gzip.open(root / "train.txt.gz", "wt", encoding="utf-8") as f:
        f.writelines(lines[:cut])
    (root / "valid.txt").write_text("".join(lines[cut:]), encoding="utf-8")
    assert main(["train-wordpiece", "--train", str(root / "train.txt.gz"), "--vocab-size", "1000",
                 "--output", str(root / "tokenizer"), "--quiet"]) == 0
    return root


@pytest.fixture(scope="module")
def tokenizer(corpus) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_directory(corpus / "tokenizer")


def _config(**changes):
    return dataclasses.replace(PRESETS["bert-tiny"], **changes)


def _no_dropout(config):
    return dataclasses.replace(config, model=dataclasses.replace(
        config.model, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def _quiet_trainer(config, train, out, **kwargs) -> BertTrainer:
    return BertTrainer(config, train, out, log=lambda m: None, progress=False, **kwargs)


# ---------------------------------------------------------------- vocabulary


def test_trained_wordpiece_vocabulary_loads(corpus, tokenizer, tmp_path):
    vocab = (corpus / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 1000 and tuple(vocab[:5]) == SPECIAL_TOKENS
    assert any(piece.startswith("##") for piece in vocab)
    pieces = tokenizer.encode_words(["Anarchism", "holds", "the", "state"])
    assert pieces.tokens[0] == "[CLS]" and pieces.tokens[1] == "anarchism"  # lower-cased
    # vocab.txt alone (HF's slow-tokenizer files) gives the same pieces as tokenizer.json.
    for name in ("vocab.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((corpus / "tokenizer" / name).read_bytes())
    text = "The anarchist movement grew, in 1539, beyond Europe."
    assert WordPieceTokenizer.from_directory(tmp_path).encode_text(text) == tokenizer.encode_text(text)


# ---------------------------------------------------------------- masking


def _toy_masker(whole_word: bool) -> tuple[Masker, dict[str, int]]:
    tokens = [*SPECIAL_TOKENS, *(f"w{i}" for i in range(500)), *(f"##p{i}" for i in range(495))]
    vocab = {t: i for i, t in enumerate(tokens)}
    return Masker(vocab, vocab["[MASK]"], range(5), 0.15, whole_word), vocab


def test_masking_statistics():
    masker, vocab = _toy_masker(whole_word=False)
    rng, data = random.Random(0), random.Random(1)
    counts = Counter()
    for _ in range(1500):
        a = [data.randrange(5, 1000) for _ in range(data.randrange(20, 60))]
        b = [data.randrange(5, 1000) for _ in range(data.randrange(20, 60))]
        ids = [vocab["[CLS]"], *a, vocab["[SEP]"], *b, vocab["[SEP]"]]
        inputs, labels = masker(ids, rng)
        for original, given, label in zip(ids, inputs, labels, strict=True):
            if original < 5:
                assert label == IGNORE_INDEX and given == original  # specials: never touched
                continue
            counts["candidates"] += 1
            if label == IGNORE_INDEX:
                assert given == original
                continue
            assert label == original
            counts["predicted"] += 1
            kind = "mask" if given == vocab["[MASK]"] else "kept" if given == original else "random"
            counts[kind] += 1
            if kind == "random":
                assert given >= 5  # never a special token
    assert counts["candidates"] > 100_000
    assert counts["predicted"] / counts["candidates"] == pytest.approx(0.15, abs=0.003)
    for kind, share in (("mask", 0.8), ("random", 0.1), ("kept", 0.1)):
        assert counts[kind] / counts["predicted"] == pytest.approx(share, abs=0.01), kind


def test_whole_word_masking_masks_every_piece_of_a_word(corpus, tokenizer):
    masker, vocab = _toy_masker(whole_word=True)
    rng, data = random.Random(0), random.Random(1)
    predicted = candidates = 0
    for _ in range(400):
        ids = [vocab["[CLS]"]]
        for _ in range(40):  # words of 1-4 pieces
            ids += [data.randrange(5, 505), *(data.randrange(505, 1000) for _ in range(data.randrange(4)))]
        ids.append(vocab["[SEP]"])
        _, labels = masker(ids, rng)
        words = []
        for position, piece in enumerate(ids[1:-1], start=1):
            if piece < 505:
                words.append([])
            words[-1].append(labels[position] != IGNORE_INDEX)
        assert all(all(w) or not any(w) for w in words)
        assert any(len(w) > 1 and all(w) for w in words)
        predicted += sum(map(sum, words))
        candidates += len(ids) - 2
    assert 0.13 < predicted / candidates <= 0.15  # a word that would overshoot is skipped
    # The same on real text: a word's pieces (a piece and its ## pieces) go together.
    stream = PretrainingStream([corpus / "valid.txt"], tokenizer, InstanceSettings(64, whole_word_mask=True),
                               loop=False)
    continuation, special = stream.masker.continuation, stream.masker.special
    joined = 0
    for instance in stream:
        chosen = [label != IGNORE_INDEX for label in instance.mlm_labels]
        ids = instance.original_ids
        for position in range(1, len(ids)):
            if continuation[ids[position]] and ids[position - 1] not in special:  # same word
                assert chosen[position] == chosen[position - 1], tokenizer.tokenizer.decode(ids)
                joined += chosen[position]
    assert joined > 50


# ---------------------------------------------------------------- sentence pairs


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> tuple[list[Path], WordPieceTokenizer]:
    """Documents whose every word names its document and sentence (``d3s7``), in two files, with
    one and two blank lines between documents and paragraphs of 1-3 sentences. All sentences
    have 5 pieces, so truncation (at most 4 pieces over) never removes a whole one."""
    root = tmp_path_factory.mktemp("labelled")
    data = random.Random(5)
    files: list[list[str]] = [[], []]
    words = []
    for doc in range(30):
        target = files[doc // 15]
        if target:
            target.append("\n" * data.choice([1, 2]))
        sentence = 0
        for _ in range(data.randrange(10, 30)):
            paragraph = []
            for _ in range(data.randrange(1, 4)):
                word = f"d{doc}s{sentence}"
                words.append(word)
                paragraph.append(" ".join([word.upper()] * 4) + ".")  # split_sentences: A-Z
                sentence += 1
            target.append(" ".join(paragraph) + "\n")
    paths = []
    for i, lines in enumerate(files):
        paths.append(root / f"part-{i}.txt")
        paths[-1].write_text("".join(lines), encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, ".", *words]) + "\n", encoding="utf-8")
    return paths, WordPieceTokenizer.from_directory(root)


def _sentences(tokenizer: WordPieceTokenizer, ids: list[int]) -> list[tuple[int, int]]:
    """(document, sentence) of each word piece, in order, repeats merged."""
    out: list[tuple[int, int]] = []
    for token in tokenizer.tokenizer.decode(ids).split():
        if token != ".":
            doc, sentence = token[1:].split("s")
            if not out or out[-1] != (int(doc), int(sentence)):
                out.append((int(doc), int(sentence)))
    return out


def _contiguous(sentences: list[tuple[int, int]]) -> bool:
    return all(b == (a[0], a[1] + 1) for a, b in zip(sentences, sentences[1:], strict=False))


def test_sentence_pairs_follow_documents(labelled):
    paths, tokenizer = labelled
    stream = PretrainingStream(paths, tokenizer, InstanceSettings(max_seq_length=40, seed=3), loop=False)
    instances = list(stream)
    labels = Counter(i.nsp_label for i in instances)
    assert 0.4 < labels[NOT_NEXT] / len(instances) < 0.6, labels
    first_doc_random = 0
    for instance in instances:
        ids = instance.original_ids
        assert len(ids) <= 40 and ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
        sep = ids.index(tokenizer.sep_id)
        assert instance.token_type_ids == [0] * (sep + 1) + [1] * (len(ids) - sep - 1)
        a, b = _sentences(tokenizer, ids[1:sep]), _sentences(tokenizer, ids[sep + 1: -1])
        assert a and b
        assert len({doc for doc, _ in a}) == 1 and _contiguous(a), a  # one document, in order
        assert len({doc for doc, _ in b}) == 1 and _contiguous(b), b
        if instance.nsp_label == IS_NEXT:
            assert b[0] == (a[-1][0], a[-1][1] + 1), (a, b)  # B is what follows A
        else:
            assert b[0][0] != a[0][0], (a, b)  # B comes from another document
            first_doc_random += a[0][0] == 0
    assert first_doc_random > 0  # the first document is paired with others too
    # Every sentence is used as A or B of a real pair at least once.
    used = {s for i in instances for s in _sentences(tokenizer, i.original_ids)}
    assert len(used) > 0.95 * (len(tokenizer.tokenizer.get_vocab()) - 6)


def test_stream_state_resumes_exactly(corpus, tokenizer):
    settings = InstanceSettings(max_seq_length=64, seed=7, pool_size=20)
    straight = PretrainingStream([corpus / "valid.txt"], tokenizer, settings)
    expected = [next(straight) for _ in range(160)]
    assert straight.epoch >= 1  # the run crosses an epoch boundary
    first = PretrainingStream([corpus / "valid.txt"], tokenizer, settings)
    head = [next(first) for _ in range(50)]
    buffer = io.BytesIO()
    torch.save(first.state(), buffer)  # as checkpoints store it
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    rest = PretrainingStream([corpus / "valid.txt"], tokenizer, settings, state=state)
    assert head + [next(rest) for _ in range(110)] == expected
    batch = collate(expected[:4])
    assert batch.input_ids.shape[0] == 4 and batch.n_masked == sum(
        sum(label != IGNORE_INDEX for label in i.mlm_labels) for i in expected[:4])


# ---------------------------------------------------------------- training


def test_training_lowers_perplexity_and_saves_an_hf_bert(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train-bert", "--train", str(corpus / "train.txt.gz"), "--valid",
                 str(corpus / "valid.txt"), "--output-dir", str(out), "--preset", "bert-tiny",
                 "--vocab-size", "800", "--max-steps", "40", "--lr", "5e-3", "--quiet", "--threads", "1"])
    assert code == 0
    assert "valid: MLM accuracy" in capsys.readouterr().out
    model_dir = out / "model"
    record = json.loads((model_dir / "training.json").read_text())
    assert record["steps"] == 40 and record["tokens_seen"] > 40 * 8 * 30
    valid = record["valid"]

    # The vocabulary was trained on the corpus; the model is a BertForPreTraining checkpoint.
    assert len((model_dir / "vocab.txt").read_text().splitlines()) == 800
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "bert" and config["vocab_size"] == 800
    keys = set(load_file(model_dir / "model.safetensors"))
    assert {"bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight",
            "cls.predictions.bias", "cls.predictions.transform.dense.weight",
            "cls.predictions.transform.LayerNorm.weight", "cls.seq_relationship.weight"} <= keys
    assert "cls.predictions.decoder.weight" not in keys  # tied to the word embeddings

    # Held-out perplexity fell well below the untrained model's (about the vocabulary size).
    model = load_pretraining_model(model_dir)
    untrained = BertForPreTraining(model.config)
    untrained.init_weights(0)
    before = evaluate_pretraining(untrained, WordPieceTokenizer.from_directory(model_dir),
                                  [corpus / "valid.txt"],
                                  EvalSettings(InstanceSettings(64, seed=EVAL_SEED), max_pairs=24))
    assert before.perplexity > 700
    assert valid["perplexity"] < 0.6 * before.perplexity and valid["pairs"] > 50
    # eval-bert scores the same instances (fixed seed) with the saved model.
    assert main(["eval-bert", str(corpus / "valid.txt"), "--model", str(model_dir),
                 "--max-seq-length", "64", "--quiet"]) == 0
    # The same value up to float rounding: printed to 2 decimals (half a unit: 0.005), and the
    # loss, summed in another order (BERT's sums, then the softmax's over the 800 pieces), moves
    # the log-perplexity by up to terms * eps of itself.
    printed = re.search(r"MLM perplexity ([0-9.]+)", capsys.readouterr().out)
    perplexity = valid["perplexity"]
    terms = bert_terms(model.config, 64) + 800
    assert printed and abs(float(printed.group(1)) - perplexity) <= (
        0.005 + perplexity * terms * FP32_EPS * math.log(perplexity))

    # contextvec.load reads it as a BERT encoder: (layers, words, hidden).
    encoder = contextvec.load(model_dir)
    assert isinstance(encoder, BertEncoder)
    vectors = encoder.embed(["the anarchist movement grew ."])[0]
    assert vectors.shape == (3, 5, 32)


def test_sigint_and_resume_are_exact(corpus, tmp_path):
    """A run stopped by SIGINT (between steps) and resumed ends with the same parameters as an
    uninterrupted run: model, optimizer, schedule, dropout RNG and data position are restored
    (the run crosses an epoch boundary: its steps take more pairs than valid.txt makes)."""
    config = _config(max_steps=20, checkpoint_every=4, pool_size=20)
    train = [str(corpus / "valid.txt")]
    vocab = corpus / "tokenizer"
    straight = _quiet_trainer(config, train, tmp_path / "a", vocab=vocab)
    straight.train()

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN under a shell's background job
    stopped = _quiet_trainer(config, train, tmp_path / "b", vocab=vocab)
    sent = []

    def interrupt_in_update_6(optimizer, args, kwargs):
        if stopped.step == 5 and not sent:
            sent.append(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    stopped.optimizer.register_step_post_hook(interrupt_in_update_6)
    with pytest.raises(KeyboardInterrupt):
        stopped.train()
    assert signal.getsignal(signal.SIGINT) == before  # handler restored
    assert json.loads((tmp_path / "b" / "model" / "training.json").read_text())["steps"] == 6
    with pytest.raises(FileExistsError, match="--resume"):
        _quiet_trainer(config, train, tmp_path / "b", vocab=vocab).train()
    with pytest.raises(ValueError, match="another training config"):
        _quiet_trainer(dataclasses.replace(config, lr=0.5), train, tmp_path / "b", vocab=vocab).train(
            resume=True)

    resumed = _quiet_trainer(config, train, tmp_path / "b")  # the vocabulary is in the output
    resumed.train(resume=True)
    assert resumed.step == 20 and resumed.tokens_seen == straight.tokens_seen
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def _ddp_worker(rank: int, port: int, config, train: list[str], out: Path, vocab: Path) -> None:
    import os

    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    _quiet_trainer(config, train, out, vocab=vocab).train()
    dist.destroy_process_group()


def test_two_process_ddp_equals_one_process(corpus, tmp_path):
    config = _no_dropout(_config(max_steps=5, batch_size=8))
    train, vocab = [str(corpus / "train.txt.gz")], corpus / "tokenizer"
    single = _quiet_trainer(config, train, tmp_path / "single", vocab=vocab)
    initial = {k: v.clone() for k, v in single.model.state_dict().items()}
    single.train()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # fork: the workers start at once, without importing torch again.
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_ddp_worker, args=(rank, port, config, train, tmp_path / "ddp", vocab))
               for rank in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    one = load_file(tmp_path / "single" / "model" / "model.safetensors")
    two = load_file(tmp_path / "ddp" / "model" / "model.safetensors")
    assert one.keys() == two.keys()
    assert not torch.equal(initial["cls.seq_relationship.weight"], one["cls.seq_relationship.weight"])
    for key in one:
        torch.testing.assert_close(two[key], one[key], atol=1e-5, rtol=1e-4, msg=key)
