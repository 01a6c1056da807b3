"""BERT: parity with HF transformers on all-MiniLM-L6-v2 (reference/bert-minilm), word pooling,
sliding windows, checkpoint loading and its errors, layer combinations, ``contextvec embed``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from conftest import REFERENCE
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from tolerance import assert_reordered_close, bert_terms

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bert import (
    BertCheckpointError,
    BertConfig,
    BertEncoder,
    BertModel,
    WordPieceTokenizer,
    combine_layers,
    load_bert_encoder,
    load_bert_model,
    window_spans,
)

ATOL = 1e-4  # the parity goal against HF's BertModel (float32)


# ---------------------------------------------------------------- the real MiniLM checkpoint


@pytest.fixture(scope="module")
def reference() -> tuple[np.lib.npyio.NpzFile, list[str]]:
    path = REFERENCE / "bert-minilm"
    if not (path / "expected.npz").is_file():
        raise FileNotFoundError(f"reference fixture {path} is missing: tests need ../shared/data")
    lines = (path / "sentences.txt").read_text("utf-8").split("\n")
    expected = np.load(path / "expected.npz")
    return expected, lines[: len(expected["lengths"])]


@pytest.fixture(scope="module")
def minilm(minilm_dir) -> BertEncoder:
    encoder = contextvec.load(minilm_dir)
    assert isinstance(encoder, BertEncoder)
    return encoder


def test_wordpieces_match_reference(minilm, reference):
    expected, lines = reference
    assert len(lines) == 64
    for i, line in enumerate(lines):
        n = int(expected["lengths"][i])
        pieces = minilm.tokenizer.encode_text(line)
        assert pieces.ids == expected["input_ids"][i, :n].tolist(), line
        assert pieces.tokens == expected[f"wordpieces_{i:03d}"].tolist()
        assert expected["attention_mask"][i, :n].all() and not expected["attention_mask"][i, n:].any()
        # The word path (whitespace tokens, pre-tokenized input) gives the same pieces.
        words = minilm.tokenizer.encode_words(line.split())
        assert words.ids == pieces.ids
        assert words.word_index[0] == words.word_index[-1] == -1
        assert sorted(set(words.word_index[1:-1])) == list(range(len(line.split())))


def test_hidden_states_and_pooler_match_reference(minilm, reference):
    expected, lines = reference
    with torch.inference_mode():
        out = minilm.model(
            torch.from_numpy(expected["input_ids"]).long(),
            torch.from_numpy(expected["attention_mask"]).long(),
            torch.from_numpy(expected["token_type_ids"]).long(),
        )
    assert len(out.hidden_states) == 7
    hidden = torch.stack(out.hidden_states).numpy()
    for i in range(len(lines)):
        n = int(expected["lengths"][i])
        np.testing.assert_allclose(hidden[:, i, :n], expected[f"hidden_states_{i:03d}"], atol=ATOL, rtol=0)
        np.testing.assert_allclose(out.pooler_output[i].numpy(), expected[f"pooler_output_{i:03d}"],
                                   atol=ATOL, rtol=0)


def _first_piece_rows(tokenizer: WordPieceTokenizer, words: list[str]) -> list[int]:
    index = tokenizer.encode_words(words).word_index
    return [index.index(w) for w in range(len(words))]


def test_word_vectors_are_first_pieces(minilm, reference):
    expected, lines = reference
    sentences = [line.split() for line in lines]
    vectors = minilm.embed(lines, batch_size=16)
    assert minilm.num_layers == 7 and minilm.output_dim == 384
    for i, words in enumerate(sentences):
        assert vectors[i].shape == (7, len(words), 384)
        rows = _first_piece_rows(minilm.tokenizer, words)
        np.testing.assert_allclose(vectors[i], expected[f"hidden_states_{i:03d}"][:, rows], atol=ATOL, rtol=0)


def test_mean_pooling_averages_the_pieces(minilm, reference):
    expected, lines = reference
    encoder = BertEncoder(minilm.model, minilm.tokenizer, subword_pooling="mean")
    for i in (4, 12, 35):   # words split into several pieces (accents, a 60-letter compound, a file name)
        words = lines[i].split()
        index = np.array(encoder.tokenizer.encode_words(words).word_index)
        want = np.stack([expected[f"hidden_states_{i:03d}"][:, index == w].mean(1)
                         for w in range(len(words))], axis=1)
        assert (np.bincount(index[1:-1]) > 1).any()
        np.testing.assert_allclose(encoder.embed([words])[0], want, atol=ATOL, rtol=0)


def test_words_without_pieces_get_unk(minilm):
    words = ["a", "\x01", "", "x\x02y"]
    pieces = minilm.tokenizer.encode_words(words)
    assert pieces.tokens == ["[CLS]", "a", "[UNK]", "[UNK]", "x", "##y", "[SEP]"]
    assert pieces.word_index == [-1, 0, 1, 2, 3, 3, -1]
    assert minilm.embed([words])[0].shape == (7, 4, 384)


def _fresh(tokenizer: WordPieceTokenizer, remember_words: bool = True) -> WordPieceTokenizer:
    """Another ``tokenizer`` on the same pipeline, its word memory empty (or none)."""
    return WordPieceTokenizer(tokenizer.tokenizer, tokenizer.cls_token, tokenizer.sep_token,
                              tokenizer.unk_token, remember_words=remember_words)


def _sentence_by_sentence(tokenizer: WordPieceTokenizer, sentences: list[list[str]]) -> list:
    """``encode_batch`` without the word memory: the tokenizer on whole sentences."""
    whole = _fresh(tokenizer, remember_words=False)
    assert not whole.remembers_words
    return whole.encode_batch(sentences)


def test_remembered_words_give_the_sentence_pieces(minilm, reference):
    _, lines = reference
    sentences = [line.split() for line in lines] + [["a", "\x01", "", "x\x02y", "[CLS]", "1,200", "Straße",
                                                      "日本語", "e\u0301", "x" * 150, "can't"]]
    assert minilm.tokenizer.remembers_words
    tokenizer = _fresh(minilm.tokenizer)
    want = _sentence_by_sentence(tokenizer, sentences)
    assert tokenizer.encode_batch(sentences) == want          # words new to the memory
    assert tokenizer.encode_batch(sentences) == want          # all remembered
    assert tokenizer.encode_batch(sentences[::-1]) == want[::-1]


def test_vocab_txt_tokenizer_matches_tokenizer_json(minilm, minilm_dir, reference, tmp_path):
    _, lines = reference
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, tmp_path / name)
    from_vocab = WordPieceTokenizer.from_directory(tmp_path)
    for line in lines + ["[CLS] inside text , 日本語 and CAFÉ"]:
        assert from_vocab.encode_text(line) == minilm.tokenizer.encode_text(line)
        assert from_vocab.encode_words(line.split()) == minilm.tokenizer.encode_words(line.split())
    # Settings come from tokenizer_config.json: a cased tokenizer keeps case and accents.
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    cased = WordPieceTokenizer.from_directory(tmp_path)
    assert cased.encode_words(["Café"]).tokens != from_vocab.encode_words(["Café"]).tokens
    assert from_vocab.encode_words(["Café"]).tokens == ["[CLS]", "cafe", "[SEP]"]


def test_embed_command_writes_all_layers(minilm, minilm_dir, reference, tmp_path):
    _, lines = reference
    chosen = lines[:3] + [lines[12]]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    out = tmp_path / "out.h5"
    assert main(["embed", str(src), str(out), "--all", "--model", str(minilm_dir), "--quiet"]) == 0
    want = minilm.embed(chosen)
    longest = max(len(minilm.tokenizer.encode_text(line).ids) for line in chosen)
    terms = bert_terms(minilm.model.config, longest)
    with h5py.File(out, "r") as f:
        for i, line in enumerate(chosen):
            assert f[str(i)].shape == (7, len(line.split()), 384)
            # (Other batches: other row counts, other sum orders.)
            assert_reordered_close(f[str(i)][()], want[i], terms=terms)


# ---------------------------------------------------------------- tiny random models

LETTERS = "abcdefghijklmnopqrstuvwxyz"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *(f"##{c}" for c in LETTERS)]


def _tiny_config(**changes) -> BertConfig:
    fields = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=24, max_position_embeddings=16, hidden_act="gelu_new")
    return BertConfig(**{**fields, **changes})


def _write_dir(directory: Path, config: BertConfig, state: dict[str, torch.Tensor],
               weights: str = "model.safetensors") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_dict()))
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    state = {k: v.contiguous() for k, v in state.items()}
    if weights == "model.safetensors":
        save_file(state, str(directory / weights))
    else:
        torch.save(state, directory / weights)
    return directory


def _pieces(ids: torch.Tensor, model: BertModel) -> torch.Tensor:
    with torch.no_grad():
        return torch.stack(model(ids).hidden_states)


@pytest.fixture
def tiny() -> BertModel:
    return BertModel(_tiny_config()).eval()


def test_hf_layouts_load(tiny, tmp_path):
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    want = _pieces(ids, tiny)
    state = tiny.state_dict()
    # BertForPreTraining layout: bert. prefix, cls.* heads, legacy position_ids buffer, gamma/beta.
    renamed = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
    legacy = {}
    for key, value in state.items():
        for new, old in renamed.items():
            key = key.replace(new, old)
        legacy[f"bert.{key}"] = value
    legacy["bert.embeddings.position_ids"] = torch.arange(16)[None]
    legacy["cls.predictions.bias"] = torch.zeros(len(VOCAB))
    legacy["cls.seq_relationship.weight"] = torch.zeros(2, 16)
    assert any(k.endswith("LayerNorm.gamma") for k in legacy)
    for name, layout in (("plain", state), ("legacy", legacy)):
        for weights in ("model.safetensors", "pytorch_model.bin"):
            path = _write_dir(tmp_path / f"{name}-{weights}", tiny.config, layout, weights)
            loaded = load_bert_model(path)
            assert torch.equal(_pieces(ids, loaded), want)
            encoder = contextvec.load(path)
            assert isinstance(encoder, BertEncoder)
            assert encoder.embed(["abc de"])[0].shape == (3, 2, 16)


def test_pytorch_bin_is_read_with_weights_only(tiny, tmp_path):
    path = _write_dir(tmp_path / "m", tiny.config, tiny.state_dict(), "pytorch_model.bin")
    torch.save({"embeddings.word_embeddings.weight": Path("code")}, path / "pytorch_model.bin")
    with pytest.raises(BertCheckpointError, match="pytorch_model.bin: unreadable"):
        load_bert_model(path)


def test_missing_unexpected_and_misshapen_keys_are_named(tiny, tmp_path):
    state = tiny.state_dict()
    missing = {k: v for k, v in state.items() if k != "encoder.layer.1.output.dense.bias"}
    with pytest.raises(BertCheckpointError, match=r"missing keys: encoder\.layer\.1\.output\.dense\.bias"):
        load_bert_model(_write_dir(tmp_path / "missing", tiny.config, missing))
    extra = {**state, "encoder.layer.0.attention.self.rotary.weight": torch.zeros(2)}
    with pytest.raises(BertCheckpointError,
                       match=r"unexpected keys: encoder\.layer\.0\.attention\.self\.rotary"):
        load_bert_model(_write_dir(tmp_path / "extra", tiny.config, extra))
    wide = BertModel(_tiny_config(intermediate_size=32)).state_dict()
    with pytest.raises(BertCheckpointError, match=r"encoder\.layer\.0\.intermediate\.dense\.weight: "
                                                  r"checkpoint \(32, 16\), config\.json \(24, 16\)"):
        load_bert_model(_write_dir(tmp_path / "wide", tiny.config, wide))
    bad = {**state, "pooler.dense.bias": torch.full((16,), float("nan"))}
    with pytest.raises(BertCheckpointError, match="pooler.dense.bias has NaN"):
        load_bert_model(_write_dir(tmp_path / "nan", tiny.config, bad))
    (tmp_path / "missing" / "model.safetensors").unlink()
    with pytest.raises(contextvec.ModelNotFoundError):
        contextvec.load(tmp_path / "missing")


def test_checkpoint_without_pooler(tiny, tmp_path):
    state = {k: v for k, v in tiny.state_dict().items() if not k.startswith("pooler.")}
    model = load_bert_model(_write_dir(tmp_path / "m", tiny.config, state))
    assert model.pooler is None
    out = model(torch.tensor([[2, 5, 3]]))
    assert out.pooler_output is None and len(out.hidden_states) == 3


def test_config_reading():
    config = BertConfig.from_dict({"model_type": "bert", "hidden_size": 32, "num_attention_heads": 4,
                                   "hidden_act": "gelu_pytorch_tanh", "classifier_dropout": None})
    assert config.hidden_size == 32 and config.gelu_approximate == "tanh"
    assert BertConfig().gelu_approximate == "none"
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act="swish")
    with pytest.raises(ValueError, match="position_embedding_type"):
        BertConfig.from_dict({"position_embedding_type": "relative_key"})


# ---------------------------------------------------------------- sliding windows


@pytest.mark.parametrize("window", [1, 2, 3, 5, 14])
def test_window_spans_pick_the_most_central_window(window):
    stride = max(window // 2, 1)
    for n in range(0, 60):
        spans = window_spans(n, window)
        kept = [j for _, _, lo, hi in spans for j in range(lo, hi)]
        assert kept == list(range(n))
        if n <= window:
            assert spans == [(0, n, 0, n)]
            continue
        starts = [s for s, _, _, _ in spans]
        assert starts[0] == 0 and spans[-1][1] == n
        assert all(e - s == window for s, e, _, _ in spans)
        assert all(b - a <= stride for a, b in zip(starts, starts[1:], strict=False))
        for s, e, lo, hi in spans:
            assert s <= lo <= hi <= e
            for j in range(lo, hi):   # nearest centre, ties to the earlier window
                distances = [abs(j - (t + (window - 1) / 2)) for t in starts]
                assert starts[distances.index(min(distances))] == s


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> WordPieceTokenizer:
    path = tmp_path_factory.mktemp("bert-tiny-vocab")
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return WordPieceTokenizer.from_directory(path)


def _pair(
    tiny: BertModel, tokenizer: WordPieceTokenizer, positions: int = 64
) -> tuple[BertEncoder, BertEncoder]:
    """The same weights with 16 positions (window 14) and with ``positions`` (no window needed)."""
    big = BertModel(_tiny_config(max_position_embeddings=positions)).eval()
    state = tiny.state_dict()
    table = big.state_dict()["embeddings.position_embeddings.weight"].clone()
    table[:16] = state["embeddings.position_embeddings.weight"]
    big.load_state_dict({**state, "embeddings.position_embeddings.weight": table})
    return BertEncoder(tiny, tokenizer), BertEncoder(big, tokenizer)


ODD = st.text(st.sampled_from([*LETTERS, *LETTERS.upper(), "é", "ß", "日", "\x00", "\x01", " ", ",", "'",
                                "\u0301", "\u200b", "\ufeff", "[", "]", "#"]), max_size=12)


@given(st.lists(st.lists(ODD, max_size=8), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_word_memory_matches_whole_sentences(tiny_tokenizer, sentences):
    assert tiny_tokenizer.remembers_words
    assert tiny_tokenizer.encode_batch(sentences) == _sentence_by_sentence(tiny_tokenizer, sentences)


def _words(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(LETTERS), size=rng.integers(1, 4))) for _ in range(n)]


def test_short_sentences_need_no_window(tiny, tiny_tokenizer):
    small, big = _pair(tiny, tiny_tokenizer)
    words = _words(5)
    while len(small.tokenizer.encode_words(words).ids) > 16:   # [CLS] + 14 pieces + [SEP] at most
        words = words[:-1]
    assert len(words) >= 3
    np.testing.assert_array_equal(small.embed([words])[0], big.embed([words])[0])


def test_window_equals_full_attention_when_context_is_ignored(tiny, tiny_tokenizer):
    # No attention output and one shared position vector: each piece's vectors depend on the
    # piece alone, so stitched windows must give exactly the unwindowed vectors.
    with torch.no_grad():
        for layer in tiny.encoder.layer:
            layer.attention.output.dense.weight.zero_()
        tiny.embeddings.position_embeddings.weight[:] = tiny.embeddings.position_embeddings.weight[0]
        small, big = _pair(tiny, tiny_tokenizer)
        big.model.embeddings.position_embeddings.weight[:] = tiny.embeddings.position_embeddings.weight[0]
    for pooling in ("first", "mean"):
        small.subword_pooling = big.subword_pooling = pooling
        for n in (6, 11, 20):
            words = _words(n, seed=n)
            assert len(small.tokenizer.encode_words(words).ids) > 16
            got = small.embed([words, words[:2]])
            assert got[0].shape == (3, n, 16)
            # The same sums over other row counts (windows against one long row).
            pieces = len(big.tokenizer.encode_words(words).ids)
            assert_reordered_close(got[0], big.embed([words])[0], terms=bert_terms(big.model.config, pieces))


def test_each_piece_comes_from_its_most_central_window(tiny, tiny_tokenizer):
    small, big = _pair(tiny, tiny_tokenizer)
    words = _words(20, seed=1)
    pieces = small.tokenizer.encode_words(words)
    content, index = pieces.ids[1:-1], pieces.word_index[1:-1]
    n, window, stride = len(content), 14, 7
    assert n > 2 * window
    starts = [*range(0, n - window, stride), n - window]
    want = np.zeros((3, len(words), 16), dtype=np.float32)
    seen = set()
    for j, w in enumerate(index):
        if w in seen:
            continue
        seen.add(w)
        start = min(starts, key=lambda s: abs(j - (s + (window - 1) / 2)))
        ids = torch.tensor([[2, *content[start:start + window], 3]])
        want[:, w] = _pieces(ids, big.model)[:, 0, j - start + 1].numpy()
    batch = small.embed([words, _words(3), words[:9]], batch_size=3)
    assert [b.shape[1] for b in batch] == [20, 3, 9]
    # Windows of 16 pieces, batched in other ways: the same sums in other orders.
    terms = bert_terms(small.model.config, 16)
    assert_reordered_close(batch[0], want, terms=terms)
    assert not np.allclose(batch[0], big.embed([words])[0], atol=1e-3)
    assert_reordered_close(small.embed([words])[0], batch[0], terms=terms)
    small.max_pieces_per_call = 1   # one window per model call
    for got, full in zip(small.embed([words, _words(3), words[:9]], batch_size=3), batch, strict=True):
        assert_reordered_close(got, full, terms=terms)


def test_encoder_settings_are_checked(tiny, tiny_tokenizer):
    tokenizer = tiny_tokenizer
    with pytest.raises(ValueError, match="subword_pooling"):
        BertEncoder(tiny, tokenizer, subword_pooling="last")
    with pytest.raises(ValueError, match="window"):
        BertEncoder(tiny, tokenizer, window=15)
    encoder = BertEncoder(tiny, tokenizer, window=4)
    assert encoder.embed(["abc abc abc abc", ""])[1].shape == (3, 0, 16)


# ---------------------------------------------------------------- layer combinations


def test_layer_combinations():
    layers = np.arange(6 * 2 * 3, dtype=np.float32).reshape(6, 2, 3)
    np.testing.assert_array_equal(combine_layers(layers), layers[-1])
    np.testing.assert_array_equal(combine_layers(layers, "sum_last_4"), layers[2:].sum(0))
    concat = combine_layers(layers, "concat_last_4")
    assert concat.shape == (2, 12)
    np.testing.assert_array_equal(concat[:, :3], layers[2])
    np.testing.assert_array_equal(concat[:, 9:], layers[5])
    tensor = torch.from_numpy(layers)
    assert torch.equal(combine_layers(tensor, "concat_last_4"), torch.from_numpy(concat))
    with pytest.raises(ValueError, match="at least 4"):
        combine_layers(layers[:3], "sum_last_4")
    with pytest.raises(ValueError, match="how"):
        combine_layers(layers, "first")


def test_load_bert_encoder_options(tiny, tmp_path):
    path = _write_dir(tmp_path / "m", tiny.config, tiny.state_dict())
    encoder = load_bert_encoder(path, subword_pooling="mean", window=6)
    assert encoder.subword_pooling == "mean" and encoder.window == 6 and not encoder.training
