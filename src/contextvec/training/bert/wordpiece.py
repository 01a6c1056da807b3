"""BERT WordPiece vocabularies: trained from a corpus, copied into model directories."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import WordPiece

from contextvec.encoders.bert.tokenizer import (
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    VOCAB_TXT,
)
from contextvec.io.atomic import atomic_path
from contextvec.io.text_lines import open_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""Special tokens of a trained vocabulary, ids 0-4 in this order ([PAD] = 0, as HF expects)."""


def _text_lines(paths: Sequence[Path]) -> Iterator[str]:
    for path in paths:
        with open_text(path, errors="replace") as f:
            for line in f:
                if line.strip():
                    yield line


def train_wordpiece(
    paths: Sequence[str | os.PathLike],
    vocab_size: int,
    output_dir: str | os.PathLike,
    lowercase: bool = True,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    max_seq_length: int = 512,
    progress: bool = False,
) -> Path:
    """Train a BERT WordPiece vocabulary (``tokenizers``' WordPiece trainer) and save it.

    BERT's normalizer (``lowercase`` also strips accents, as uncased BERT does) and
    pre-tokenizer; special tokens :data:`SPECIAL_TOKENS` first. Writes ``vocab.txt``,
    ``tokenizer.json`` (with BERT's ``[CLS] A [SEP] B [SEP]`` post-processor, for HF's fast
    tokenizer), ``tokenizer_config.json`` and ``special_tokens_map.json``, each atomically;
    :meth:`WordPieceTokenizer.from_directory` reads the directory. Returns it.
    """
    files = [Path(p) for p in paths]
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=None, lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, limit_alphabet=limit_alphabet,
        special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##", show_progress=progress,
    )
    tokenizer.train_from_iterator(_text_lines(files), trainer)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    if [i for _, i in vocab] != list(range(len(vocab))):
        raise RuntimeError("the trained vocabulary's ids are not 0..n-1")
    with atomic_path(output / VOCAB_TXT) as tmp:
        tmp.write_text("".join(f"{token}\n" for token, _ in vocab), encoding="utf-8")
    with atomic_path(output / TOKENIZER_JSON) as tmp:
        tokenizer.save(str(tmp))
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase,
              "strip_accents": None, "tokenize_chinese_chars": True,
              "model_max_length": max_seq_length}
    specials = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                "cls_token": "[CLS]", "mask_token": "[MASK]"}
    for name, content in ((TOKENIZER_CONFIG, {**config, **specials}), (SPECIAL_TOKENS_MAP, specials)):
        with atomic_path(output / name) as tmp:
            tmp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return output


def copy_tokenizer_files(source: str | os.PathLike, target: str | os.PathLike,
                         max_seq_length: int | None = None) -> None:
    """Copy a tokenizer directory's files (those present) into a model directory, atomically;
    ``max_seq_length`` sets ``model_max_length`` in ``tokenizer_config.json``."""
    source, target = Path(source), Path(target)
    for name in (VOCAB_TXT, TOKENIZER_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP):
        if not (source / name).is_file():
            continue
        data = (source / name).read_bytes()
        if name == TOKENIZER_CONFIG and max_seq_length is not None:
            data = json.dumps({**json.loads(data), "model_max_length": max_seq_length},
                              indent=2).encode() + b"\n"
        with atomic_path(target / name) as tmp:
            tmp.write_bytes(data)
