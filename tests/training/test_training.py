"""biLM training: vocabulary, LM windows, sampled softmax, exact resume, DDP, perplexity, export."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import shared_file
from safetensors.torch import load_file
from tolerance import BF16_EPS, assert_reordered_close

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bilm.config import ConfigError
from contextvec.encoders.bilm.loader import load_bilm_tf, read_options
from contextvec.text.chars import BOS_TOKEN, EOS_TOKEN
from contextvec.training import (
    PRESETS,
    BiLMTrainSettings,
    CorpusVocabulary,
    Trainer,
    evaluate_perplexity,
    load_model,
)
from contextvec.training.bilm.batcher import StreamBatcher
from contextvec.training.bilm.lm import (
    ChunkedSoftmaxNLL,
    LanguageModel,
    log_uniform_log_prob,
    sample_log_uniform,
)
from contextvec.training.bilm.model_files import Perplexity, init_weights
from contextvec.training.corpus import expand_paths, read_sentences

# The first lines of WikiText-2, whole articles: four for training, one held out. The readers
# stream a file from its start, so the excerpt in tests/data holding just these lines serves
# where ../shared is absent. Each line is a paragraph or a ` = Heading = `, between blank lines.
TRAIN_LINES, VALID_LINES = 287, 47


def _first_lines(relative: str, count: int) -> list[str]:
    with gzip.open(shared_file(relative), "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, count))
    assert len(lines) == count, f"{relative} has fewer than {count} lines"
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """WikiText-2's first training lines (train.txt.gz) and its first valid article (valid.txt)."""
    root = tmp_path_factory.mktemp("corpus")
    train = _first_lines("corpora/wikitext-2/wiki.train.tokens.gz", TRAIN_LINES)
    valid = _first_lines("corpora/wikitext-2/wiki.valid.tokens.gz", VALID_LINES)
    with gzip.open(root / "train.txt.gz", "wt", encoding="utf-8") as f:
        f.writelines(train)
    (root / "valid.txt").write_text("".join(valid), encoding="utf-8")
    return root


def _config(**changes):
    return dataclasses.replace(PRESETS["tiny"], **changes)


def test_vocabulary_order_and_limits(tmp_path):
    sentences = [["b", "a", "b"], ["c", "b", "a", "<S>"], ["d"]]
    vocab = CorpusVocabulary.build(sentences)
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "b", "a", "c", "d"]
    assert CorpusVocabulary.build(sentences, min_count=2).tokens[3:] == ["b", "a"]
    assert CorpusVocabulary.build(sentences, max_size=4).tokens == ["<S>", "</S>", "<UNK>", "b"]
    assert vocab.id("zzz") == vocab.unk == 2
    vocab.save(tmp_path / "vocab.txt")
    assert CorpusVocabulary.load(tmp_path / "vocab.txt").tokens == vocab.tokens
    with pytest.raises(ValueError, match="starts with"):
        CorpusVocabulary(["a", "b", "c"])


def test_corpus_reading(corpus, tmp_path):
    paths = expand_paths([str(corpus / "*.gz")])
    sentences = list(read_sentences(paths))
    with gzip.open(paths[0], "rt", encoding="utf-8") as f:
        lines = f.readlines()
    # Whitespace tokens of each line, in order; empty and blank (" ") lines are skipped.
    assert sentences == [line.split() for line in lines if line.strip()]
    assert len(sentences) < len(lines) and not lines[0].strip()
    assert sentences[0] == ["=", "Valkyria", "Chronicles", "III", "="]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        expand_paths([str(tmp_path / "*.txt")])


def test_interleaved_reading_takes_one_line_of_each_file_in_turn(tmp_path):
    books = tmp_path / "books.txt.gz"
    with gzip.open(books, "wt", encoding="utf-8") as f:
        f.write("b1 . Second sentence .\nb2\n\nb3\n")
    wiki = tmp_path / "wiki.txt"
    wiki.write_text("w1\nw2\n", encoding="utf-8")
    order = [" ".join(s) for s in read_sentences([books, wiki], "moses-sentences", interleave=True)]
    # A line's sentences stay together; the blank line counts as a line; wiki runs out first.
    assert order == ["b1 .", "Second sentence .", "w1", "b2", "w2", "b3"]
    in_order = [" ".join(s) for s in read_sentences([books, wiki], "moses-sentences")]
    assert sorted(in_order) == sorted(order) and in_order != order
    # skip_lines starts every file after its first N lines, in either reading order.
    skipped = [" ".join(s) for s in read_sentences([books, wiki], interleave=True, skip_lines=1)]
    assert skipped == ["b2", "w2", "b3"]
    assert [" ".join(s) for s in read_sentences([books, wiki], skip_lines=3)] == ["b3"]
    with pytest.raises(ConfigError, match="skip_lines"):
        BiLMTrainSettings(skip_lines=-1)


def test_windows_cover_every_prediction_once():
    sentences = [["a", "b", "c"], ["d"], ["e", "f"], ["g", "h", "i", "j", "k"]]
    vocab = CorpusVocabulary.build(sentences)
    batcher = StreamBatcher(lambda: iter(sentences), vocab, rows=2, unroll=3)
    windows = list(batcher)
    scored = sum(int(w.mask[0].sum()) for w in windows)
    assert scored == sum(len(s) + 1 for s in sentences) == 15
    assert sum(int(w.mask[1].sum()) for w in windows) == 15
    first = windows[0]
    # Row 0 starts with sentence 0 forward and reversed; targets are the next tokens.
    assert first.tokens[0][0] == [BOS_TOKEN, "a", "b"]
    assert first.tokens[1][0] == [EOS_TOKEN, "c", "b"]
    assert first.targets[0, 0].tolist() == [vocab.id("a"), vocab.id("b"), vocab.id("c")]
    assert first.targets[1, 0].tolist() == [vocab.id("c"), vocab.id("b"), vocab.id("a")]
    forward_targets = [vocab.tokens[i] for w in windows for i, m in
                       zip(w.targets[0, 0].tolist(), w.mask[0, 0].tolist(), strict=True) if m]
    assert BOS_TOKEN not in forward_targets and EOS_TOKEN in forward_targets


def test_batcher_state_resumes_exactly():
    sentences = [[f"w{i}", f"w{i + 1}"] * (1 + i % 4) for i in range(40)]
    vocab = CorpusVocabulary.build(sentences)
    straight = list(StreamBatcher(lambda: iter(sentences), vocab, rows=3, unroll=4))
    first = StreamBatcher(lambda: iter(sentences), vocab, rows=3, unroll=4)
    head = [next(first) for _ in range(5)]
    rest = list(StreamBatcher(lambda: iter(sentences), vocab, 3, 4, state=first.state()))
    assert len(head + rest) == len(straight)
    for a, b in zip(head + rest, straight, strict=True):
        assert a.tokens == b.tokens and torch.equal(a.targets, b.targets)


def test_log_uniform_sampler():
    vocab_size = 1000
    probs = log_uniform_log_prob(torch.arange(vocab_size), vocab_size).double().exp()
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-5)
    samples = sample_log_uniform(200_000, vocab_size, torch.Generator().manual_seed(0))
    observed = torch.bincount(samples, minlength=vocab_size)[:5].double() / 200_000
    np.testing.assert_allclose(observed.numpy(), probs[:5].numpy(), rtol=0.05)


@pytest.mark.parametrize("block", [1, 7, 64])
def test_blocked_softmax_nll_matches_autograd_cross_entropy(block):
    # Blocks of 1 and 7 rows split 23 rows unevenly (a ragged last block); 64 is one block.
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(23, 5, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 5, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(11, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (23,), generator=g)
    upstream = torch.rand(23, generator=g, dtype=torch.float64)
    ours = ChunkedSoftmaxNLL.apply(hidden, weight, bias, targets, block)
    grads = torch.autograd.grad((ours * upstream).sum(), (hidden, weight, bias))
    reference = torch.nn.functional.cross_entropy(
        hidden @ weight.T + bias, targets, reduction="none"
    )
    expected = torch.autograd.grad((reference * upstream).sum(), (hidden, weight, bias))
    torch.testing.assert_close(ours, reference)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_sampled_softmax_trains_and_full_softmax_scores(corpus):
    sentences = list(read_sentences(expand_paths([str(corpus / "train.txt.gz")])))[:50]
    vocab = CorpusVocabulary.build(sentences)
    model = LanguageModel(PRESETS["tiny"].model, len(vocab))
    window = next(StreamBatcher(lambda: iter(sentences), vocab, rows=4, unroll=8))
    sums, counts, _ = model(window, negatives=64, generator=torch.Generator().manual_seed(1))
    (sums / counts).sum().backward()
    assert torch.isfinite(sums).all() and model.softmax.weight.grad.abs().sum() > 0
    full, full_counts, _ = model(window)
    assert torch.equal(counts, full_counts)
    # An untrained model is about as uncertain as a uniform guess over the vocabulary.
    assert math.exp(full.sum().item() / full_counts.sum().item()) == pytest.approx(
        len(vocab), rel=0.5)


@pytest.mark.parametrize("mode", ["softmax", "all"])
def test_bf16_autocast_rounds_the_loss_and_keeps_float32_state_and_gradients(corpus, mode):
    sentences = list(read_sentences(expand_paths([str(corpus / "train.txt.gz")])))[:50]
    vocab = CorpusVocabulary.build(sentences)
    torch.manual_seed(0)
    model = LanguageModel(PRESETS["tiny"].model, len(vocab))
    window = next(StreamBatcher(lambda: iter(sentences), vocab, rows=4, unroll=8))
    full, counts, _ = model(window)
    half, half_counts, state = model(window, bf16=mode)
    # bfloat16 keeps 8 bits of mantissa: near the float32 loss, not equal to it. Each logit and
    # each loss is rounded to within BF16_EPS / 2 of itself; a row's loss sums positive terms
    # (no cancellation), so it moves by about one epsilon of itself; twice that allows the
    # LSTM's own bf16 products ("all").
    assert not torch.equal(half, full) and torch.equal(counts, half_counts)
    torch.testing.assert_close(half, full, rtol=2 * BF16_EPS, atol=0.0)
    assert half.dtype == torch.float32
    assert all(t.dtype == torch.float32 for layer in state for t in layer)
    (half / counts).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    with pytest.raises(ConfigError, match="bf16"):
        BiLMTrainSettings(bf16="fp16")


@pytest.mark.slow
def test_training_lowers_perplexity_and_cli_reports_it(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train-bilm", "--train", str(corpus / "train.txt.gz"), "--valid",
                 str(corpus / "valid.txt"), "--output-dir", str(out), "--preset", "tiny",
                 "--epochs", "2", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "perplexity valid: forward" in printed
    model, vocab = load_model(out / "model")
    ppl = evaluate_perplexity(model, lambda: read_sentences([corpus / "valid.txt"]), vocab)
    untrained = LanguageModel(model.config, len(vocab))
    init_weights(untrained, 0)
    baseline = evaluate_perplexity(untrained, lambda: read_sentences([corpus / "valid.txt"]), vocab)
    assert ppl.average < 0.7 * baseline.average
    assert main(["perplexity", str(corpus / "valid.txt"), "--model", str(out / "model"),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"average perplexity {ppl.average:.2f}" in printed

    # Fine-tuning continues from the model and reports perplexity before and after.
    code = main(["train-bilm", "--train", str(corpus / "valid.txt"), "--valid",
                 str(corpus / "valid.txt"), "--output-dir", str(tmp_path / "tuned"),
                 "--init", str(out / "model"), "--epochs", "1", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    before = float(printed.split("perplexity before fine-tuning: ")[1].split()[0])
    after = float(printed.split("average ")[1].split()[0])
    assert after < before
    # The tuned model's record keeps where it started: the base model and its own record.
    record = json.loads((tmp_path / "tuned" / "model" / "training.json").read_text())
    base = json.loads((out / "model" / "training.json").read_text())
    assert record["init"] == {"model": str(out / "model"), **base}

    # Export to bilm-tf: n_characters 262, same embeddings as the native model.
    assert main(["convert", str(tmp_path / "tf"), "--to", "bilm-tf", "--model",
                 str(out / "model")]) == 0
    assert read_options(tmp_path / "tf" / "options.json").n_characters == 262
    native = contextvec.load(out / "model").embed(["the bank was robbed ."])[0]
    exported = contextvec.load(tmp_path / "tf").embed(["the bank was robbed ."])[0]
    np.testing.assert_array_equal(native, exported)
    assert load_bilm_tf(tmp_path / "tf" / "options.json", tmp_path / "tf" / "weights.hdf5")


@pytest.mark.parametrize("regularization", [{}, {"locked_dropout": True, "weight_drop": 0.3}])
def test_resume_is_exact(corpus, tmp_path, regularization):
    config = _config(dropout=0.2, negatives=40, checkpoint_every=4, epochs=3, **regularization)
    train = [str(corpus / "train.txt.gz")]

    def run(out, max_steps, resume=False):
        trainer = Trainer(dataclasses.replace(config, max_steps=max_steps), train, out,
                          progress=False, log=lambda m: None)
        trainer.train(resume=resume)
        return trainer

    straight = run(tmp_path / "a", 30)
    run(tmp_path / "b", 13)
    with pytest.raises(FileExistsError, match="--resume"):
        run(tmp_path / "b", 30)
    resumed = run(tmp_path / "b", 30, resume=True)
    assert straight.step == resumed.step == 30
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.slow
def test_two_process_ddp_equals_one_process(corpus, tmp_path):
    args = ["train-bilm", "--train", str(corpus / "train.txt.gz"), "--preset", "tiny",
            "--rows", "4", "--max-steps", "5", "--dropout", "0", "--quiet", "--threads", "1"]
    single = tmp_path / "single"
    assert main([*args, "--output-dir", str(single)]) == 0
    ddp = tmp_path / "ddp"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "contextvec.cli.main", *args, "--output-dir", str(ddp)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    one = load_file(single / "model" / "model.safetensors")
    two = load_file(ddp / "model" / "model.safetensors")
    assert one.keys() == two.keys()
    initial = LanguageModel(PRESETS["tiny"].model, len(CorpusVocabulary.load(single / "vocab.txt")))
    init_weights(initial, PRESETS["tiny"].seed)
    assert not torch.equal(initial.softmax.weight, one["softmax.weight"])  # it did train
    for key in one:
        torch.testing.assert_close(two[key], one[key], atol=1e-5, rtol=1e-4, msg=key)


def test_sentence_boundaries_train_with_the_encoders_characters():
    from contextvec.text.chars import BOS_IDS, EOS_IDS
    from contextvec.text.chars import token_to_char_ids as training_char_ids  # one mapping for both

    assert (training_char_ids(BOS_TOKEN) == BOS_IDS).all() and (training_char_ids(EOS_TOKEN) == EOS_IDS).all()
    assert training_char_ids("<S>x")[1] == ord("<") + 1


def test_sentence_splitting_and_named_tokenizers(tmp_path):
    from contextvec.text.tokenize import Tokenizer, split_sentences

    assert split_sentences('He said "Stop." Then he left! Did he? (See above.) 3 cats ran.') == [
        'He said "Stop."', "Then he left!", "Did he?", "(See above.)", "3 cats ran."]
    assert split_sentences("no end mark") == ["no end mark"]
    assert split_sentences("   ") == []
    assert Tokenizer("moses")("It's $5, isn't it?") == [["It", "'s", "$", "5", ",", "isn", "'t",
                                                         "it", "?"]]
    assert Tokenizer("moses-sentences")("A b. C d.") == [["A", "b", "."], ["C", "d", "."]]
    with pytest.raises(ValueError, match="tokenizer must be one of whitespace, moses, moses-sentences, "
                                         "not 'spacy'"):
        Tokenizer("spacy")
    path = tmp_path / "raw.txt"
    path.write_text("First one. Second one!\n\nThird,here.\n", encoding="utf-8")
    assert list(read_sentences([path], "moses-sentences")) == [
        ["First", "one", "."], ["Second", "one", "!"], ["Third", ",", "here", "."]]
    assert list(read_sentences([path])) == [["First", "one.", "Second", "one!"], ["Third,here."]]


def test_sigint_saves_a_resumable_checkpoint_and_model(corpus, tmp_path):
    """A run stopped by SIGINT (between steps) resumes to the same parameters as a straight run;
    the saved model records how it was trained."""
    import signal

    config = _config(dropout=0.2, checkpoint_every=0, epochs=2, max_steps=20)
    train = [str(corpus / "train.txt.gz")]
    straight = Trainer(config, train, tmp_path / "a", progress=False, log=lambda m: None)
    straight.train()

    def interrupt_after_step_7(trainer):
        if trainer.step == 7:
            signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN under a shell's background job
    stopped = Trainer(config, train, tmp_path / "b", progress=False, log=lambda m: None,
                      on_step=interrupt_after_step_7)
    with pytest.raises(KeyboardInterrupt):
        stopped.train()
    record = json.loads((tmp_path / "b" / "model" / "training.json").read_text())
    assert record["steps"] == 7 and record["tokens_seen"] == stopped.tokens_seen > 0
    assert signal.getsignal(signal.SIGINT) == before  # handler restored

    resumed = Trainer(config, train, tmp_path / "b", progress=False, log=lambda m: None)
    resumed.train(resume=True)
    assert resumed.step == 20 and resumed.tokens_seen == straight.tokens_seen
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_new_highway_gates_start_mostly_closed():
    # bilm-tf initialises b_carry to -2 for training: sigmoid(-2) = 0.12 of the transform at first.
    model = LanguageModel(PRESETS["tiny"].model, vocab_size=10)
    for gate in model.bilm.token_encoder.highway.gate:
        assert torch.equal(gate.bias, torch.full_like(gate.bias, -2.0))


def test_contiguous_streams_read_consecutive_parts_and_resume_exactly():
    sentences = [[f"w{i}"] for i in range(12)]
    vocab = CorpusVocabulary.build(sentences)
    windows = list(StreamBatcher(lambda: iter(sentences), vocab, rows=3, unroll=2,
                                 bidirectional=False, contiguous=True))
    rows = [[t for w in windows for t in w.tokens[0][r] if t] for r in range(3)]
    # Row r holds sentences 4r .. 4r+3 in corpus order, each after its real predecessor.
    for r, row in enumerate(rows):
        words = [t for t in row if t.startswith("w")]
        assert words == [f"w{i}" for i in range(4 * r, 4 * r + 4)]
    assert sum(int(w.mask[0].sum()) for w in windows) == 12 * 2
    # Parts are cut by tokens, not sentences, so every row runs out at about the same step.
    uneven = [["x"] * 30] + [["y"]] * 30
    balanced = list(StreamBatcher(lambda: iter(uneven), CorpusVocabulary.build(uneven), rows=2,
                                  unroll=4, bidirectional=False, contiguous=True))
    per_row = [sum(int(w.mask[0, r].sum()) for w in balanced) for r in range(2)]
    assert per_row == [51, 40]  # sentence 0 (31 targets) + 10 short ones | 20 short ones
    assert all(bool(w.mask[0, r].any()) for w in balanced[:-1] for r in range(2))
    first = StreamBatcher(lambda: iter(sentences), vocab, 3, 2, False, contiguous=True)
    head = [next(first) for _ in range(3)]
    rest = list(StreamBatcher(lambda: iter(sentences), vocab, 3, 2, False, first.state(),
                              contiguous=True))
    for a, b in zip(head + rest, windows, strict=True):
        assert a.tokens == b.tokens and torch.equal(a.targets, b.targets)


@pytest.mark.parametrize("directions", [1, 2])
def test_plain_lstm_fused_kernel_equals_the_step_loop(directions):
    from contextvec.encoders.bilm.lstm import ProjectedLSTMLayer

    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(7, 5, 5, n_directions=directions, projection=False)
    assert layer.projection is None
    x = torch.randn(directions, 3, 4, 7)
    state = (torch.randn(directions, 3, 5), torch.randn(directions, 3, 5))
    full = torch.full((3,), 4)
    fused_out, fused_state = layer(x, full, state)
    grads = torch.autograd.grad(fused_out.sum() + fused_state[1].sum(), list(layer.parameters()))
    layer.cell_clip = 1e9  # a clip runs the step loop; cells of 4 steps never reach this one
    loop_out, loop_state = layer(x, full, state)
    loop_grads = torch.autograd.grad(loop_out.sum() + loop_state[1].sum(),
                                     list(layer.parameters()))
    # torch's fused LSTM kernel and the step loop sum in their own orders: per step 7 inputs and
    # 5 states; a weight's gradient sums 3 rows x 4 steps, each back through 4 steps.
    terms = 4 * (7 + 5) + 3 * 4
    assert_reordered_close(fused_out, loop_out, terms=terms)
    for a, b in zip(fused_state, loop_state, strict=True):
        assert_reordered_close(a, b, terms=terms)
    for a, b in zip(grads, loop_grads, strict=True):
        assert_reordered_close(a, b, terms=terms)


def test_char_cnn_trims_padding_without_changing_outputs():
    from contextvec.encoders.bilm.char_cnn import CharCNN
    from contextvec.encoders.bilm.config import PRESETS as MODEL_PRESETS
    from contextvec.text.chars import token_to_char_ids

    torch.manual_seed(0)
    cnn = CharCNN(MODEL_PRESETS["tiny"])
    for p in cnn.parameters():
        torch.nn.init.normal_(p)
    tokens = ["a", "hello", "über", "x" * 60, ""]
    ids = torch.from_numpy(np.stack([token_to_char_ids(t) for t in tokens] + [np.zeros(50, int)]))
    config = MODEL_PRESETS["tiny"]
    # Other widths give other row counts to the filters' matmul, which the CPU's kernels may
    # block and sum in another order: the same sums, not the same bits. Per output, products
    # summed: a filter (char dim x widest width), the highway's gate and transform, the projection.
    terms = config.char_embed_dim * cnn.max_width + 3 * config.n_filters
    widths = []
    cnn.char_embedding.register_forward_hook(lambda module, args, out: widths.append(args[0].shape[1]))
    long = ids[3:4]  # a token that fills all 50 columns: nothing to trim beside it
    for batch in (ids[:2], ids[:1], ids[-1:]):
        trimmed = cnn(batch)
        untrimmed = cnn(torch.cat([batch, long]))[: len(batch)]
        assert widths[-1] == 50
        assert_reordered_close(trimmed, untrimmed, terms=terms)
    cnn(ids[:2])
    assert widths[-1] == len("hello") + 2 + 3  # BOW, EOW, widest filter


def test_char_cnn_length_groups_keep_outputs():
    from contextvec.encoders.bilm.char_cnn import CharCNN
    from contextvec.encoders.bilm.config import PRESETS as MODEL_PRESETS
    from contextvec.text.chars import token_to_char_ids

    torch.manual_seed(0)
    config = MODEL_PRESETS["tiny"]
    cnn = CharCNN(config)
    for p in cnn.parameters():
        torch.nn.init.normal_(p)
    rng = np.random.default_rng(0)
    # Lengths from 0 to past 50 characters, in no order, and a padded (all-zero) row.
    tokens = ["".join(rng.choice(list("abcdé"), size=n)) for n in rng.integers(0, 60, size=40)]
    ids = torch.from_numpy(np.stack([token_to_char_ids(t) for t in tokens] + [np.zeros(50, int)]))
    terms = config.char_embed_dim * cnn.max_width + 3 * config.n_filters
    cnn.min_group = len(ids) + 1
    whole = cnn(ids)
    for min_group, max_groups in ((4, 8), (1, 41), (10, 3)):
        cnn.min_group, cnn.max_groups = min_group, max_groups
        assert_reordered_close(cnn(ids), whole, terms=terms)


def test_halving_schedule_can_be_set_when_resuming(corpus, tmp_path):
    # The article's first sections: a few dozen steps an epoch.
    lines = (corpus / "valid.txt").read_text(encoding="utf-8").splitlines()[:26]
    small = tmp_path / "small.txt"
    small.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sentences = list(read_sentences([small]))
    per_epoch = len(list(StreamBatcher(lambda: iter(sentences), CorpusVocabulary.build(sentences),
                                       _config().rows, _config().unroll)))

    def run(epochs, resume=False, **changes):
        config = _config(epochs=epochs, lr=0.01, **changes)
        trainer = Trainer(config, [str(small)], tmp_path / "run", [str(small)], progress=False,
                          log=lambda m: None)
        trainer.train(resume=resume)
        return trainer

    assert run(1).lr == 0.01
    # Halving after epoch 2 and 3 may be added to a run in progress (not other changes).
    assert run(3, resume=True, halve_from_epoch=2).lr == 0.01 / 4
    # So may a switch to the sampled softmax: the run goes on from where it stood.
    switched = run(4, resume=True, halve_from_epoch=2, negatives=5, bf16="softmax")
    assert switched.config.negatives == 5 and switched.epoch == 4 and switched.lr == 0.01 / 8
    # The run keeps from which step which setting changed (an epoch is one pass of the windows);
    # model/ holds the best epoch on valid, so its record lists the changes made before that epoch.
    assert switched.changes == [
        {"step": per_epoch, "changed": {"epochs": [1, 3], "halve_from_epoch": [None, 2]}},
        {"step": 3 * per_epoch,
         "changed": {"epochs": [3, 4], "negatives": [0, 5], "bf16": ["off", "softmax"]}},
    ]
    record = json.loads((tmp_path / "run" / "model" / "training.json").read_text(encoding="utf-8"))
    assert record["changes"] == switched.changes[:record["epochs_completed"] - 2]
    with pytest.raises(ValueError, match="another training config"):
        run(5, resume=True, halve_from_epoch=2, negatives=5, bf16="softmax", dropout=0.3)


def test_a_stopped_run_keeps_the_best_validated_model(corpus, tmp_path):
    import signal

    valid = [str(corpus / "valid.txt")]
    config = _config(epochs=3, checkpoint_every=0)
    def interrupt_in_epoch_2(trainer):
        if trainer.epoch == 1 and trainer.step % 5 == 0:  # inside the second epoch
            signal.raise_signal(signal.SIGINT)

    trainer = Trainer(config, valid, tmp_path, valid, progress=False, log=lambda m: None,
                      on_step=interrupt_in_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    record = json.loads((tmp_path / "model" / "training.json").read_text())
    assert record["epochs_completed"] == 1 and record["steps"] < trainer.step


def test_weight_drop_masks_the_recurrent_weights_in_training_only():
    from contextvec.encoders.bilm.lstm import ProjectedLSTMLayer

    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(7, 5, 5, n_directions=1, projection=False)
    x, full = torch.randn(1, 3, 4, 7), torch.full((3,), 4)
    plain = layer(x, full)[0]
    layer.state_weight_dropout = 0.5
    torch.manual_seed(1)
    fused = layer(x, full)[0]
    (grad,) = torch.autograd.grad(fused.sum(), [layer.state_weight])
    dropped = (grad == 0).float().mean().item()
    assert 0.35 < dropped < 0.65  # one mask for the whole window: those weights get no gradient
    assert not torch.allclose(fused, plain)
    layer.cell_clip = 1e9  # the step loop (a clip never reached) draws the same mask, same outputs
    torch.manual_seed(1)
    # (Summed in the step loop's order, not the fused kernel's: per step 7 inputs, 5 states.)
    assert_reordered_close(layer(x, full)[0], fused, terms=4 * (7 + 5))
    layer.eval()
    assert_reordered_close(layer(x, full)[0], plain, terms=4 * (7 + 5))


def test_locked_dropout_shares_one_mask_across_the_steps_of_a_row():
    from contextvec.training.bilm.lm import LockableDropout

    torch.manual_seed(0)
    x = torch.ones(2, 8, 30, 16)
    locked = LockableDropout(0.5, locked=True)(x)
    assert torch.equal(locked, locked[:, :, :1].expand_as(locked))
    assert set(locked.unique().tolist()) == {0.0, 2.0}
    free = LockableDropout(0.5)(x)
    assert not torch.equal(free, free[:, :, :1].expand_as(free))
    assert torch.equal(LockableDropout(0.5, locked=True).eval()(x), x)
    with pytest.raises(ConfigError, match="weight_drop"):
        _config(weight_drop=1.0)


def test_kim_lm_feeds_the_highway_output_straight_to_the_lstm(corpus, tmp_path):
    from contextvec.encoders.bilm.config import BiLMConfig, ConfigError

    kim = PRESETS["kim-small"].model
    assert not kim.token_projection and kim.token_dim == kim.n_filters == 525
    small = dataclasses.replace(kim, filters=((1, 5), (2, 6)), projection_dim=8, lstm_dim=8)
    model = LanguageModel(small, vocab_size=20)
    assert isinstance(model.bilm.token_encoder.projection, torch.nn.Identity)
    assert model.bilm.layers[0].input_weight.shape[-1] == 11
    assert model.bilm.layers[1].input_weight.shape[-1] == 8
    with pytest.raises(ConfigError, match="forward-only"):
        BiLMConfig(token_projection=False)
    config = _config(model=small, epochs=1, max_steps=3, checkpoint_every=0)
    train = [str(corpus / "valid.txt")]
    Trainer(config, train, tmp_path, progress=False, log=lambda m: None).train()
    loaded, _ = load_model(tmp_path / "model")
    assert loaded.config == small and loaded.bilm.layers[0].input_weight.shape[-1] == 11


def _record_iterates(trainer, epoch_ok):
    """Keep a copy of ``trainer``'s weights after each update of an epoch where
    ``epoch_ok(epoch index)`` holds; returns the (growing) list."""
    iterates = []

    def keep(optimizer, args, kwargs):
        if epoch_ok(trainer.epoch):
            iterates.append([p.detach().clone() for p in trainer.model.parameters()])

    trainer.optimizer.register_step_post_hook(keep)
    return iterates


@pytest.mark.slow
def test_weight_averaging_saves_the_mean_of_the_steps_and_resumes_exactly(corpus, tmp_path):
    train = [str(corpus / "valid.txt")]
    config = _config(epochs=2, average_from_epoch=1, checkpoint_every=0)

    trainer = Trainer(config, train, tmp_path / "a", progress=False, log=lambda m: None)
    iterates = _record_iterates(trainer, lambda epoch: epoch >= 1)
    trainer.train()
    assert len(iterates) > 3 and int(trainer.averaged.n_averaged) == len(iterates)
    saved, _ = load_model(tmp_path / "a" / "model")
    for p, *steps in zip(saved.parameters(), *iterates, strict=True):
        # A running mean (one rounding per step) against a sum of the steps: each within
        # len(steps) roundings of the mean.
        assert_reordered_close(p, torch.stack(steps).mean(0), terms=2 * len(steps))
    assert not torch.equal(next(saved.parameters()), next(trainer.model.parameters()))
    record = json.loads((tmp_path / "a" / "model" / "training.json").read_text())
    assert record["averaged_steps"] == len(iterates)

    # Interrupted inside the averaged epoch and resumed: the same average as straight through.
    stop_at = trainer.step - 2
    first = Trainer(dataclasses.replace(config, max_steps=stop_at), train, tmp_path / "b",
                    progress=False, log=lambda m: None)
    first.train()
    resumed = Trainer(config, train, tmp_path / "b", progress=False, log=lambda m: None)
    resumed.train(resume=True)
    for a, b in zip(trainer.averaged.parameters(), resumed.averaged.parameters(), strict=True):
        assert torch.equal(a, b)


def test_weight_averaging_restarts_when_the_lr_changes(corpus, tmp_path):
    # Averaging from epoch 1, the lr halved after epoch 2: the saved mean is epoch 3's alone.
    config = _config(epochs=3, average_from_epoch=1, halve_from_epoch=2, checkpoint_every=0)
    trainer = Trainer(config, [str(corpus / "valid.txt")], tmp_path, progress=False,
                      log=lambda m: None)
    iterates = _record_iterates(trainer, lambda epoch: epoch == 2)
    trainer.train()
    assert trainer.average_lr == config.lr / 2
    assert len(iterates) > 3 and int(trainer.averaged.n_averaged) == len(iterates)
    saved, _ = load_model(tmp_path / "model")
    for p, *steps in zip(saved.parameters(), *iterates, strict=True):
        # A running mean (one rounding per step) against a sum of the steps: each within
        # len(steps) roundings of the mean.
        assert_reordered_close(p, torch.stack(steps).mean(0), terms=2 * len(steps))


@pytest.mark.parametrize(("iterate_ppl", "mean_ppl", "halvings"),
                         [([50, 40, 30], [45, 44.5, 44.2], 0), ([50, 49.8, 49.7], [45, 40, 35], 2)])
def test_lr_halving_reads_the_iterate_not_the_mean(corpus, tmp_path, iterate_ppl, mean_ppl,
                                                   halvings):
    # Averaging from the start: the halving rule follows the iterate's perplexity (stalls by < 1
    # in the second case), model selection the mean's. Scripted perplexities stand in for both.
    config = _config(epochs=3, average_from_epoch=0, lr_halving=True, checkpoint_every=0)
    data = [str(corpus / "valid.txt")]
    trainer = Trainer(config, data, tmp_path, data, progress=False, log=lambda m: None)
    scripted = {"iterate": iter(iterate_ppl), "mean": iter(mean_ppl)}

    def scored(model=None):
        kind = "iterate" if model is trainer.model else "mean"
        return Perplexity(float(next(scripted[kind])), None, 1)

    trainer.valid_perplexity = scored
    trainer.train()
    assert trainer.lr == config.lr / 2**halvings
    assert trainer.best_valid == min(mean_ppl)
