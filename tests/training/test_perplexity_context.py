"""``perplexity --context``: each sentence alone or each document in order, and WikiText's articles."""

from __future__ import annotations

import gzip
import math

import pytest
import torch
from tolerance import assert_reordered_close

from contextvec.cli.main import main
from contextvec.encoders.bilm.config import PRESETS
from contextvec.io.document_formats import is_wikitext_title, iter_wikitext_articles
from contextvec.text.chars import BOS_TOKEN, EOS_TOKEN
from contextvec.training import CorpusVocabulary
from contextvec.training.bilm.batcher import Window
from contextvec.training.bilm.context import evaluate_context_perplexity
from contextvec.training.bilm.lm import LanguageModel
from contextvec.training.bilm.model_files import init_weights, save_model

DOCUMENTS = [
    [["the", "cat", "sat", "on", "the", "mat", "."], ["it", "was", "happy", "."]],
    [["rome", "is", "in", "italy", "."]],
    [["a", "dog", "ran", "."], ["the", "cat", "saw", "it", "."], ["then", "it", "slept"]],
]
CONFIG = PRESETS["tiny"]
# Products summed on the way to one target's NLL (char CNN, highway and projection, two LSTM
# layers' inputs, states and cells, the softmax); the targets' NLLs are then summed.
CHAIN = 3 * CONFIG.char_embed_dim + 2 * CONFIG.n_filters + 2 * (2 * CONFIG.projection_dim + CONFIG.lstm_dim) \
    + CONFIG.projection_dim


@pytest.fixture(scope="module")
def tiny():
    vocab = CorpusVocabulary.build([s for d in DOCUMENTS for s in d])
    model = LanguageModel(CONFIG, len(vocab))
    init_weights(model, seed=0)
    with torch.no_grad():  # larger recurrent weights, so that the carried state visibly matters
        for layer in model.bilm.layers:
            for name, p in layer.named_parameters():
                if "weight" in name:
                    p.mul_(3.0)
    return model.eval(), vocab


def _direct_nll(model: LanguageModel, vocab: CorpusVocabulary, sentences: list[list[str]]) -> torch.Tensor:
    """Forward and backward NLL sums of ``<S> s1 </S> <S> s2 </S> ..`` read as one window from
    the zero state, the backward LM over the same sequence reversed."""
    forward = [t for s in sentences for t in (BOS_TOKEN, *s, EOS_TOKEN)]
    streams = [forward, forward[::-1]]
    skip = [BOS_TOKEN, EOS_TOKEN]
    n = len(forward) - 1
    targets = torch.tensor([[[vocab.id(w) for w in stream[1:]]] for stream in streams])
    mask = torch.tensor([[[w != skip[d] for w in stream[1:]]] for d, stream in enumerate(streams)])
    window = Window([[stream[:n]] for stream in streams], targets, mask)
    with torch.no_grad():
        sums, counts, _ = model(window)
    return sums.double()


def _nll(ppl, direction: str) -> float:
    return math.log(getattr(ppl, direction)) * ppl.tokens


@pytest.mark.parametrize("rows", [1, 2])
def test_document_context_reads_each_document_as_one_sequence_and_sentence_context_each_sentence(tiny, rows):
    model, vocab = tiny
    tokens = sum(len(s) + 1 for d in DOCUMENTS for s in d)
    # Windows of 3 steps cut through sentences and documents; with one row each document follows
    # the one before in the same row, whose state must start again from zero.
    document = evaluate_context_perplexity(model, DOCUMENTS, vocab, "document", rows=rows, unroll=3)
    sentence = evaluate_context_perplexity(model, DOCUMENTS, vocab, "sentence", rows=rows, unroll=3)
    assert document.tokens == sentence.tokens == tokens
    expected = {
        "document": sum(_direct_nll(model, vocab, d) for d in DOCUMENTS),
        "sentence": sum(_direct_nll(model, vocab, [s]) for d in DOCUMENTS for s in d),
    }
    for name, ppl in (("document", document), ("sentence", sentence)):
        got = torch.tensor([_nll(ppl, "forward"), _nll(ppl, "backward")])
        assert_reordered_close(got, expected[name], terms=tokens + CHAIN, msg=name)
    # The carried state changes what later sentences' targets cost, by far more than rounding.
    gap = (expected["document"] - expected["sentence"]).abs()
    assert bool((gap > 10 * (tokens + CHAIN) * 2**-23 * expected["sentence"].abs()).all()), gap


def test_document_context_carries_the_forward_state_from_the_first_sentence_into_the_second(tiny):
    model, vocab = tiny
    first, second = DOCUMENTS[0]
    # Document-mode forward NLL of sentence 2 = that of the whole document less sentence 1's.
    ppl = evaluate_context_perplexity(model, [[first, second]], vocab, "document", rows=1, unroll=4)
    alone = evaluate_context_perplexity(model, [[first]], vocab, "document", rows=1, unroll=4)
    second_in_context = _nll(ppl, "forward") - _nll(alone, "forward")
    # Directly: the LSTMs read sentence 1 and their state is carried into sentence 2's window.
    seq1 = [BOS_TOKEN, *first, EOS_TOKEN]
    seq2 = [EOS_TOKEN, BOS_TOKEN, *second, EOS_TOKEN]  # sentence 1's </S> is the window's first input
    no_targets = torch.zeros(1, 1, len(seq1) - 1, dtype=torch.long)
    _, _, state = _forward_direction(model, Window([[seq1[:-1]]], no_targets, no_targets.bool()))
    targets = torch.tensor([[[vocab.id(w) for w in seq2[1:]]]])
    mask = torch.tensor([[[w != BOS_TOKEN for w in seq2[1:]]]])
    sums, counts, _ = _forward_direction(model, Window([[seq2[:-1]]], targets, mask), state)
    assert int(counts[0]) == len(second) + 1
    assert_reordered_close(torch.tensor([second_in_context]), sums.double(),
                           terms=len(seq1) + len(seq2) + CHAIN)


@torch.no_grad()
def _forward_direction(model: LanguageModel, window: Window, state=None):
    """The model's forward direction alone (the backward one reads padding, scores nothing):
    its NLL sum (1,), count (1,) and the states to carry."""
    pad = [[None] * len(window.tokens[0][0])]
    both = Window([window.tokens[0], pad], torch.cat([window.targets, torch.zeros_like(window.targets)]),
                  torch.cat([window.mask, torch.zeros_like(window.mask)]))
    sums, counts, new_state = model(both, state)
    return sums[:1], counts[:1], new_state


WIKITEXT = (" \n = Homarus gammarus = \n \n Homarus gammarus is a lobster . It lives in the sea ? Yes \n"
            " \n = = Description = = \n \n It is 1 @.@ 5 m long ! \n \n = Frank Lloyd = \n \n He sang . \n")


def test_wikitext_articles_start_at_title_lines_and_paragraphs_are_cut_after_sentence_ends(tmp_path):
    path = tmp_path / "wiki.valid.tokens.gz"
    path.write_bytes(gzip.compress(WIKITEXT.encode()))
    assert list(iter_wikitext_articles(path)) == [
        ["= Homarus gammarus =", "Homarus gammarus is a lobster .", "It lives in the sea ?", "Yes",
         "= = Description = =", "It is 1 @.@ 5 m long !"],
        ["= Frank Lloyd =", "He sang ."],
    ]
    assert is_wikitext_title(" = A = ") and not is_wikitext_title(" = = A = = ")
    assert not is_wikitext_title(" a = b = ")


@pytest.fixture(scope="module")
def model_dir(tiny, tmp_path_factory):
    model, vocab = tiny
    return save_model(model, vocab, tmp_path_factory.mktemp("tiny") / "model")


def test_cli_scores_the_documents_of_the_file_as_the_library_does(tiny, model_dir, tmp_path, capsys):
    model, vocab = tiny
    text = tmp_path / "docs.txt"
    documents = ("\n".join(" ".join(s) for s in d) for d in DOCUMENTS)
    text.write_text("-DOCSTART-\n\n" + "\n\n".join(documents) + "\n", encoding="utf-8")
    for context in ("sentence", "document"):
        ppl = evaluate_context_perplexity(model, DOCUMENTS, vocab, context, rows=2, unroll=5)
        assert main(["perplexity", str(text), "--model", str(model_dir), "--context", context, "--rows", "2",
                     "--unroll", "5", "--quiet"]) == 0
        assert capsys.readouterr().out == (f"tokens {ppl.tokens:,}\nforward perplexity {ppl.forward:.2f}\n"
                                           f"backward perplexity {ppl.backward:.2f}\n"
                                           f"average perplexity {ppl.average:.2f}\n")


@pytest.mark.parametrize(("text", "options", "message"), [
    ("\n \n-DOCSTART- -X- O\n\n", ["--context", "document"], "holds no document"),
    (" \n\n \n", ["--context", "sentence", "--documents", "wikitext"], "holds no WikiText article"),
    ("a b .\n = T = \nc d .\n", ["--context", "document", "--documents", "wikitext"],
     "line 1: text before the first ' = Title = ' line"),
    ("a b .\n", ["--documents", "wikitext"], "--documents needs --context"),
    ("a b .\n", ["--context", "document", "--contiguous"], "--contiguous: not with --context"),
])
def test_bad_document_input_is_a_one_line_error(model_dir, tmp_path, capsys, text, options, message):
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    assert main(["perplexity", str(path), "--model", str(model_dir), "--quiet", *options]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
