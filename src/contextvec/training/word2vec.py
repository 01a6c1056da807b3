"""Static word vectors trained with gensim (word2vec or fastText): the stand-in for GloVe.

CoVe's MT-LSTM reads fixed GloVe vectors, which cannot be downloaded here; vectors trained on
a local corpus take their place. The corpus is tokenized once (any
:class:`~contextvec.text.tokenize.Tokenizer`, streamed by
:func:`~contextvec.training.corpus.read_sentences`) into a temporary whitespace-tokenized file
beside the output, which gensim then reads in its ``corpus_file`` mode: no re-tokenization per
epoch, and its worker threads scale without Python's GIL in the way.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from tqdm import tqdm

from contextvec.choices import checked_choice, spellings
from contextvec.extras import needs
from contextvec.io.word_vectors import WordVectorFormat, WordVectors, save_word_vectors
from contextvec.renamed import renamed_names
from contextvec.text.tokenize import TokenizerName, as_tokenizer_name
from contextvec.training.corpus import expand_paths, read_sentences

with needs("word-vectors"):
    from gensim.models import FastText, Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec



class Algorithm(StrEnum):
    """gensim's model (``WordVectorSettings.algorithm``, ``--algorithm``)."""

    WORD2VEC = "word2vec"
    FASTTEXT = "fasttext"
    """Vectors of words and of their character n-grams."""


ALGORITHMS = spellings(Algorithm)


@dataclass(frozen=True)
class WordVectorSettings:
    """gensim settings. ``sg``: skip-gram (else CBOW); ``negative``: negative samples;
    ``sample``: down-sampling threshold of frequent words; ``lowercase``: lower-case tokens
    first (needed when the vectors serve lower-cased data such as Multi30k's ``.lc`` files)."""

    dim: int = 300
    algorithm: Algorithm = Algorithm.WORD2VEC
    window: int = 5
    min_count: int = 5
    epochs: int = 5
    sg: bool = False
    negative: int = 5
    sample: float = 1e-3
    lowercase: bool = False
    tokenizer: TokenizerName = TokenizerName.MOSES_SENTENCES
    max_vocab: int | None = None
    seed: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "algorithm", checked_choice(Algorithm, self.algorithm, "algorithm"))
        object.__setattr__(self, "tokenizer", as_tokenizer_name(self.tokenizer))
        if self.dim < 1 or self.epochs < 1 or self.min_count < 1:
            raise ValueError("dim, epochs and min_count must be >= 1")


def write_tokenized(sentences: Iterable[list[str]], path: Path, lowercase: bool,
                    progress: bool = False) -> tuple[int, int]:
    """One whitespace-tokenized sentence per line (gensim's ``LineSentence`` format);
    returns ``(sentences, tokens)``."""
    n_sentences = n_tokens = 0
    with open(path, "w", encoding="utf-8") as f:
        for tokens in tqdm(sentences, desc="tokenizing", unit="sent", disable=not progress,
                           unit_scale=True, mininterval=1.0):
            if lowercase:
                tokens = [t.lower() for t in tokens]
            # Moses keeps no whitespace inside tokens, but other tokenizers' odd characters
            # (e.g. U+00A0 inside a token) must not change the tokenization gensim sees.
            tokens = [t for token in tokens for t in token.split()]
            if tokens:
                f.write(" ".join(tokens) + "\n")
                n_sentences += 1
                n_tokens += len(tokens)
    return n_sentences, n_tokens


def train_word_vectors(
    train_files: list[str],
    output: str | os.PathLike | None,
    config: WordVectorSettings = WordVectorSettings(),
    threads: int = 1,
    output_format: WordVectorFormat | str = WordVectorFormat.WORD2VEC,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> WordVectors:
    """Train vectors on ``train_files`` (paths or globs, plain or ``.gz``) and, if ``output``
    is given, write them there (atomically, word2vec text format by default).

    Deterministic for a given ``seed`` with ``threads=1`` (more threads change the order of
    updates). Words are in gensim's order: descending frequency.
    """
    paths = expand_paths(train_files)
    out_dir = Path(output).parent if output is not None else Path(tempfile.gettempdir())
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tokenized-", suffix=".txt", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        n_sentences, n_tokens = write_tokenized(read_sentences(paths, config.tokenizer), tmp,
                                                config.lowercase, progress)
        if n_sentences == 0:
            raise ValueError(f"no tokens in {', '.join(map(str, paths))}")
        log(f"{n_sentences:,} sentences, {n_tokens:,} tokens; training {config.algorithm} "
            f"({config.dim} dims, {config.epochs} epochs, {threads} threads)")

        class _EpochBar(CallbackAny2Vec):  # gensim's own progress goes to logging
            def __init__(self) -> None:
                self.bar = tqdm(total=config.epochs, desc="epochs", unit="epoch",
                                disable=not progress)

            def on_epoch_end(self, model: Any) -> None:
                self.bar.update(1)

        bar = _EpochBar()
        common: dict[str, Any] = dict(
            corpus_file=str(tmp), vector_size=config.dim, window=config.window,
            min_count=config.min_count, epochs=config.epochs, sg=int(config.sg),
            negative=config.negative, sample=config.sample, seed=config.seed, workers=threads,
            max_final_vocab=config.max_vocab, callbacks=[bar],
        )
        gensim_logger = logging.getLogger("gensim")
        level = gensim_logger.level
        gensim_logger.setLevel(logging.WARNING)  # its INFO lines would bury the progress bar
        try:
            model = (FastText if config.algorithm is Algorithm.FASTTEXT else Word2Vec)(**common)
        finally:
            gensim_logger.setLevel(level)
            bar.bar.close()
    finally:
        tmp.unlink(missing_ok=True)
    words = list(model.wv.index_to_key)
    if not words:
        raise ValueError(f"no word occurs min_count={config.min_count} times")
    vectors = WordVectors(words, model.wv.vectors[: len(words)].astype("float32"))
    log(f"{len(words):,} word vectors of {config.dim} dims")
    if output is not None:
        save_word_vectors(output, vectors.words, vectors.vectors, output_format)
        log(f"wrote {output}")
    return vectors


# Names renamed in 0.2.0, importable (with a DeprecationWarning) until 0.3.0.
__getattr__ = renamed_names(__name__, globals(), {"WordVectorConfig": "WordVectorSettings"})
