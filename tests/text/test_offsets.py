"""Character offsets of every tokenizer (contextvec.text.offsets): each token's [start, end) in the
original string, lines as sentences, tokens moses alters or invents, code points."""

from __future__ import annotations

import bisect
import gzip
import re

import pytest
from conftest import shared_file
from sacremoses import MosesTokenizer

from contextvec.text.offsets import align_sentences, align_tokens, tokenize_with_offsets
from contextvec.text.tokenize import Tokenizer

TOKENIZERS = Tokenizer.NAMES
CONTROL = re.compile(r"[\x00-\x1f]")  # what moses drops
WIKIPEDIA = "corpora/wikipedia-en-2015/part-000.txt.gz"
LINES = 215  # what tests/data's excerpt holds


def _found(result) -> list[list[str]]:
    return [[result.text[s:e] for s, e in spans] for spans in result.sentence_spans]


@pytest.mark.parametrize("name", TOKENIZERS)
def test_each_token_is_its_characters_in_the_original(name):
    text = "  The cat\u00a0sat\ton the mat  "
    result = tokenize_with_offsets(text, name)
    assert _found(result) == [list(s) for s in result.sentences]
    assert result.sentences == (("The", "cat", "sat", "on", "the", "mat"),)
    assert result.sentence_spans == (((2, 5), (6, 9), (10, 13), (14, 16), (17, 20), (21, 24)),)


@pytest.mark.parametrize("name", ["whitespace", "moses"])
def test_each_line_is_one_sentence_and_blank_lines_give_none(name):
    text = "\r\n a b\r\n\r\n   \n\t\nc\u2028d\re f\n"  # a Unicode line separator is no line break
    result = tokenize_with_offsets(text, name)
    assert result.sentences == (("a", "b"), ("c", "d"), ("e", "f"))
    assert _found(result) == [list(s) for s in result.sentences]
    starts = [spans[0][0] for spans in result.sentence_spans]
    assert starts == [text.index("a"), text.index("c"), text.index("e")]


def test_moses_sentences_splits_each_line_into_sentences():
    text = "It rained. Then it stopped!\nNo more."
    result = tokenize_with_offsets(text, "moses-sentences")
    assert result.sentences == (("It", "rained", "."), ("Then", "it", "stopped", "!"), ("No", "more", "."))
    assert result.sentence_spans[1] == ((11, 15), (16, 18), (19, 26), (26, 27))
    assert result.sentence_spans[2][0] == (28, 30)
    assert tokenize_with_offsets(text, "moses").sentences[0][-4:] == ("Then", "it", "stopped", "!")


def test_a_character_moses_drops_stays_inside_its_tokens_span():
    text = 'He said "hi" & left... a\x01b \x02 c'
    result = tokenize_with_offsets(text, "moses")
    assert result.tokens == ("He", "said", '"', "hi", '"', "&", "left", "...", "ab", "c")
    found = [text[s:e] for s, e in result.spans]
    assert found[8] == "a\x01b" and found[9] == "c"
    assert found[:8] == list(result.tokens[:8])  # quotes, & and ... are moses' tokens unaltered


def test_tokens_moses_escapes_or_rewrites_span_their_source_characters():
    moses = MosesTokenizer(lang="en")
    text = "It's \"hi\" & <b> [x] | y"
    tokens = moses.tokenize(text)  # moses' default: XML escapes
    assert tokens[1] == "&apos;s" and "&quot;" in tokens and "&amp;" in tokens
    assert [text[s:e] for s, e in align_tokens(text, tokens)] == [
        "It", "'s", '"', "hi", '"', "&", "<", "b", ">", "[", "x", "]", "|", "y"]
    # a control character elsewhere takes the alignment off the exact path: escapes still map
    text = 'a\x01b "hi" & well-known'
    tokens = moses.tokenize(text, aggressive_dash_splits=True)
    assert tokens[-3:] == ["well", "@-@", "known"]
    assert [text[s:e] for s, e in align_tokens(text, tokens)] == [
        "a\x01b", '"', "hi", '"', "&", "well", "-", "known"]


def test_a_dropped_character_does_not_pair_a_word_with_a_later_one():
    text = "th\x01e anarchist society and anarchists"
    result = tokenize_with_offsets(text, "moses")
    assert [text[s:e] for s, e in result.spans] == [
        "th\x01e", "anarchist", "society", "and", "anarchists"]


def test_a_long_line_with_many_altered_tokens_maps_every_token():
    with gzip.open(shared_file(WIKIPEDIA), "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(LINES)]
    # one line of real text with an altered token every few words and long runs of dropped characters
    text = " ".join(lines)[:20_000].replace(" the ", " th\x01e ").replace(" of ", " of " + "\x02" * 200 + " ")
    result = tokenize_with_offsets(text, "moses")
    assert len(result.sentences) == 1 and len(result) > 3000
    assert [CONTROL.sub("", text[s:e]) for s, e in result.spans] == list(result.tokens)


def test_a_literal_escape_in_the_text_stays_itself():
    assert align_tokens("a &amp; b", ["a", "&amp;", "b"]) == [(0, 1), (2, 7), (8, 9)]
    assert align_tokens("a\x01 &amp; b", ["a", "&amp;", "b"]) == [(0, 1), (3, 8), (9, 10)]


def test_an_invented_token_gets_a_zero_width_span_where_it_belongs():
    assert align_tokens("a  b", ["<s>", "a", "<x>", "b", "</s>"]) == [(0, 0), (0, 1), (3, 3), (3, 4), (4, 4)]
    assert align_tokens("ab", ["a", "<x>", "b"]) == [(0, 1), (1, 1), (1, 2)]


def test_offsets_are_code_points():
    text = "I \U0001f600 caf\u00e9 e\u0301t\u00e9"  # an emoji beyond the BMP; a combining accent
    spaces = tokenize_with_offsets(text)
    assert spaces.spans == ((0, 1), (2, 3), (4, 8), (9, 13))
    moses = tokenize_with_offsets(text, "moses")
    assert moses.tokens[-3:] == ("e", "\u0301", "t\u00e9")  # moses splits the accent off
    assert moses.spans == ((0, 1), (2, 3), (4, 8), (9, 10), (10, 11), (11, 13))


@pytest.mark.parametrize("text", ["", "\n", " \r\n\t", "\x01\n\x02"])
@pytest.mark.parametrize("name", TOKENIZERS)
def test_text_without_tokens_has_no_sentences(text, name):
    result = tokenize_with_offsets(text, name)
    if name == "whitespace" and text.strip():  # control characters are tokens here; moses drops them
        assert result.sentences == (("\x01",), ("\x02",)) and result.spans == ((0, 1), (2, 3))
        return
    assert result.sentences == result.sentence_spans == () and len(result) == 0
    assert result.text == text


def test_bad_arguments_are_one_line():
    with pytest.raises(ValueError, match="tokenizer.*whitespace.*moses"):
        tokenize_with_offsets("a b", "spacy")
    with pytest.raises(TypeError, match="text must be str, not bytes"):
        tokenize_with_offsets(b"a b")


def test_given_sentences_align_as_one_token_sequence_without_empty_ones():
    text = "Hi there. Bye\n now"
    result = align_sentences(text, [["Hi", "there", "."], [], ["Bye", "now"]])
    assert result.sentences == (("Hi", "there", "."), ("Bye", "now"))
    assert result.sentence_spans == (((0, 2), (3, 8), (8, 9)), ((10, 13), (15, 18)))


def test_the_flat_view_counts_tokens_across_sentences():
    result = tokenize_with_offsets("a bb\nccc", "whitespace")
    assert result.tokens == ("a", "bb", "ccc") and len(result) == 3
    assert result.spans == ((0, 1), (2, 4), (5, 8))
    assert result.characters(1, 2) == (2, 8)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_offsets_of_real_text_increase_and_hold_their_tokens(name):
    with gzip.open(shared_file(WIKIPEDIA), "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(LINES)]
    text = "\n".join(lines)
    result = tokenize_with_offsets(text, name)
    breaks = [i for i, c in enumerate(text) if c == "\n"]
    last_end = 0
    for tokens, spans in zip(result.sentences, result.sentence_spans, strict=True):
        assert len(tokens) == len(spans) > 0
        line = bisect.bisect(breaks, spans[0][0])
        for token, (start, end) in zip(tokens, spans, strict=True):
            assert last_end <= start < end <= len(text)
            assert bisect.bisect(breaks, end - 1) == line  # inside one line
            assert CONTROL.sub("", text[start:end]) == token
            last_end = end
    if name != "moses-sentences":
        assert len(result.sentences) == sum(bool(line.strip()) for line in lines)
    else:
        assert len(result.sentences) > sum(bool(line.strip()) for line in lines)
