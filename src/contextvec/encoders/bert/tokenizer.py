"""BERT's WordPiece tokenizer (the ``tokenizers`` package) on whitespace-tokenized words.

The tokenizer comes from the model directory: ``tokenizer.json`` if present (its truncation
and padding settings are switched off: contextvec never truncates, and pads itself), else
``vocab.txt`` with the settings of HF's ``BertTokenizer`` taken from ``tokenizer_config.json``
(``do_lower_case``, default true; ``strip_accents``, default: strip when lower-casing;
``tokenize_chinese_chars``, default true; the special token names).

Words are fed as pre-tokenized input, so every piece knows its word; BERT's own
pre-tokenizer still splits a word at punctuation (``"1,200"`` -> ``1 , 200``), and all those
pieces belong to that word. A word that yields no pieces at all (an empty string, a lone
control character, which BERT's text cleaning deletes) is given one ``[UNK]`` piece, so
that every word gets a vector. ``[CLS]`` and ``[SEP]`` are added here, not by the
tokenizer's post-processor.

With BERT's own pipeline (WordPiece under BERT's normalizer and pre-tokenizer, which act within
a word) a word's pieces do not depend on its neighbours, so each distinct word is tokenized once
and remembered (up to :data:`WORD_CACHE_SIZE` words): a repeated word costs a dictionary
lookup instead of a pass through the tokenizer's pipeline, and gets the same pieces.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tokenizers import Encoding, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

WORD_CACHE_SIZE = 200_000
"""Distinct words whose pieces a tokenizer remembers; past it the memory starts afresh."""

TOKENIZER_JSON = "tokenizer.json"
VOCAB_TXT = "vocab.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"


class WordPieces(NamedTuple):
    """One sentence as word pieces: ``ids`` and ``tokens`` start with [CLS] and end with [SEP];
    ``word_index`` gives each piece's word (-1 at [CLS] and [SEP])."""

    ids: list[int]
    tokens: list[str]
    word_index: list[int]


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _token_name(value: Any, default: str) -> str:
    """A special token as written in HF configs: a string, or ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else default


class WordPieceTokenizer:
    """Words -> BERT word pieces with their word indices (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer, cls_token: str = "[CLS]", sep_token: str = "[SEP]",
                 unk_token: str = "[UNK]", remember_words: bool = True) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        ids = {}
        for name in (cls_token, sep_token, unk_token):
            ids[name] = tokenizer.token_to_id(name)
            if ids[name] is None:
                raise ValueError(f"the vocabulary has no {name} token")
        self.cls_token, self.sep_token, self.unk_token = cls_token, sep_token, unk_token
        self.cls_id, self.sep_id, self.unk_id = ids[cls_token], ids[sep_token], ids[unk_token]
        # word -> (piece ids, piece tokens), for pipelines that tokenize words independently.
        self._words: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] | None = (
            {} if remember_words and _word_by_word(tokenizer) else None)

    @property
    def remembers_words(self) -> bool:
        """Whether :meth:`encode_batch` tokenizes each new word alone and remembers its pieces:
        where ``remember_words`` (the default) and the pipeline gives a word in a sentence the
        pieces it gives that word alone (BERT's); otherwise it tokenizes whole sentences."""
        return self._words is not None

    @classmethod
    def from_directory(cls, directory: str | os.PathLike) -> WordPieceTokenizer:
        directory = Path(directory)
        config = {**_read_json(directory / SPECIAL_TOKENS_MAP), **_read_json(directory / TOKENIZER_CONFIG)}
        names = {
            "cls_token": _token_name(config.get("cls_token"), "[CLS]"),
            "sep_token": _token_name(config.get("sep_token"), "[SEP]"),
            "unk_token": _token_name(config.get("unk_token"), "[UNK]"),
        }
        if (directory / TOKENIZER_JSON).is_file():
            return cls(Tokenizer.from_file(str(directory / TOKENIZER_JSON)), **names)
        if not (directory / VOCAB_TXT).is_file():
            raise FileNotFoundError(f"{directory}: needs {TOKENIZER_JSON} or {VOCAB_TXT}")
        vocab = WordPiece.read_file(str(directory / VOCAB_TXT))
        tokenizer = Tokenizer(WordPiece(vocab, unk_token=names["unk_token"], max_input_chars_per_word=100))
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
            strip_accents=config.get("strip_accents"),
            lowercase=bool(config.get("do_lower_case", True)),
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        specials = [names["cls_token"], names["sep_token"], names["unk_token"],
                    _token_name(config.get("pad_token"), "[PAD]"),
                    _token_name(config.get("mask_token"), "[MASK]")]
        tokenizer.add_special_tokens([t for t in dict.fromkeys(specials) if t in vocab])
        return cls(tokenizer, **names)

    def _with_specials(self, encoding: Encoding, n_words: int | None) -> WordPieces:
        """[CLS] + pieces + [SEP]; with ``n_words``, words without pieces get [UNK]."""
        word_ids = encoding.word_ids
        if n_words is None:
            ids, tokens = encoding.ids, encoding.tokens
            index = [-1 if w is None else w for w in word_ids]
        elif len(set(word_ids)) == n_words:
            # Every word has pieces (the usual case): they already come in word order.
            ids, tokens, index = encoding.ids, encoding.tokens, word_ids
        else:
            per_word: list[list[tuple[int, str]]] = [[] for _ in range(n_words)]
            for piece, token, word in zip(encoding.ids, encoding.tokens, word_ids, strict=True):
                per_word[word].append((piece, token))
            ids, tokens, index = [], [], []
            for word, pieces in enumerate(per_word):
                for piece, token in pieces or [(self.unk_id, self.unk_token)]:
                    ids.append(piece)
                    tokens.append(token)
                    index.append(word)
        return WordPieces([self.cls_id, *ids, self.sep_id], [self.cls_token, *tokens, self.sep_token],
                          [-1, *index, -1])

    def encode_words(self, words: Sequence[str]) -> WordPieces:
        """Pieces of one whitespace-tokenized sentence; every word has at least one piece."""
        return self.encode_batch([words])[0]

    def encode_batch(self, sentences: Sequence[Sequence[str]]) -> list[WordPieces]:
        if self._words is not None:
            return self._encode_by_word(sentences, self._words)
        encodings = self.tokenizer.encode_batch(
            [list(words) for words in sentences], is_pretokenized=True, add_special_tokens=False
        )
        return [self._with_specials(e, len(words)) for e, words in zip(encodings, sentences, strict=True)]

    def _encode_by_word(self, sentences: Sequence[Sequence[str]],
                        memory: dict[str, tuple[tuple[int, ...], tuple[str, ...]]]) -> list[WordPieces]:
        """:meth:`encode_batch` from remembered words; the new ones tokenized in one call."""
        lookup = {word: memory.get(word) for words in sentences for word in words}
        new = [word for word, pieces in lookup.items() if pieces is None]
        if new:
            encodings = self.tokenizer.encode_batch([[word] for word in new], is_pretokenized=True,
                                                    add_special_tokens=False)
            unk = ((self.unk_id,), (self.unk_token,))
            found = {word: (tuple(e.ids), tuple(e.tokens)) if e.ids else unk
                     for word, e in zip(new, encodings, strict=True)}
            lookup.update(found)
            if len(memory) + len(found) > WORD_CACHE_SIZE:
                memory.clear()
            memory.update(found)
        out = []
        for words in sentences:
            ids, tokens, index = [self.cls_id], [self.cls_token], [-1]
            for position, word in enumerate(words):
                piece_ids, piece_tokens = lookup[word]
                ids += piece_ids
                tokens += piece_tokens
                index += [position] * len(piece_ids)
            ids.append(self.sep_id)
            tokens.append(self.sep_token)
            index.append(-1)
            out.append(WordPieces(ids, tokens, index))
        return out

    def encode_text(self, text: str) -> WordPieces:
        """Pieces of raw text as BERT tokenizes it (``word_index`` counts the pre-tokenizer's
        words, punctuation split off)."""
        return self._with_specials(self.tokenizer.encode(text, add_special_tokens=False), None)


def _word_by_word(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer`` gives each pre-tokenized word the pieces it gives that word alone:
    BERT's pipeline (WordPiece, BERT's normalizer and pre-tokenizer, or none). Others (a
    byte-level BPE marks a word by its position) are not assumed to."""
    return (isinstance(tokenizer.model, WordPiece)
            and isinstance(tokenizer.normalizer, (normalizers.BertNormalizer, type(None)))
            and isinstance(tokenizer.pre_tokenizer, (pre_tokenizers.BertPreTokenizer, type(None))))
