"""``contextvec probe pos``, ``probe wsd`` and ``probe neighbours`` as one call each (and their
Python API): :func:`run_pos_probe` (:class:`PosProbeSettings` -> :class:`PosProbeResult`),
:func:`run_wsd` (:class:`WsdSettings` -> :class:`WsdResult`) and :func:`run_neighbours`
(:class:`NeighboursSettings` -> :class:`NeighboursResult`) read the data, load the encoder,
probe it and return the report with the lines the command prints."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contextvec.features import FeatureSettings
from contextvec.io.word_vectors import load_word_vectors
from contextvec.jobs.choice import EncoderChoice
from contextvec.probes.linear import ProbeReport, ProbeSettings, format_table, probe_tagging
from contextvec.probes.neighbours import (
    Context,
    ContextSearch,
    layer0_vectors,
    mark,
    nearest_contexts,
    nearest_words,
    read_corpus,
    resolve_layer,
    vocabulary,
)
from contextvec.probes.semcor import read_raganato, read_semcor
from contextvec.probes.wordnet import load_wordnet
from contextvec.probes.wsd import VectorSource, WsdReport, evaluate_wsd
from contextvec.probes.wsd import format_table as wsd_table
from contextvec.tasks.readers.conllu import TAG_COLUMNS, read_conllu


@dataclass(frozen=True)
class PosProbeSettings:
    """A POS probe of an encoder's layers: CoNLL-U ``train``, ``dev`` (selects each probe's
    epoch) and ``test`` (reported only) files, the ``tag`` column to predict, the first
    ``max_sentences`` of each file (None: all)."""

    train: str | os.PathLike
    dev: str | os.PathLike
    test: str | os.PathLike | None = None
    tag: str = "upos"
    max_sentences: int | None = None
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    training: ProbeSettings = field(default_factory=ProbeSettings)
    features: FeatureSettings = field(default_factory=FeatureSettings)
    progress: bool = True
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.tag not in TAG_COLUMNS:
            raise ValueError(f"tag must be one of {', '.join(TAG_COLUMNS)}, not {self.tag!r}")


@dataclass
class PosProbeResult:
    """What :func:`run_pos_probe` found: the report (``--output``'s JSON) and the encoder's shape."""

    report: ProbeReport
    num_layers: int
    dim: int

    def lines(self) -> list[str]:
        """What ``probe pos`` prints: the set-up, the table, the runtime."""
        report, rt = self.report, self.report.runtime_s
        sizes = ", ".join(f"{k} {v['sentences']} sent / {v['tokens']} tok" for k, v in report.splits.items())
        return [f"POS ({report.extra['tag']}) probe of {report.extra['model']}: {self.num_layers} layers x "
                f"{self.dim} dims, {len(report.labels)} tags; {sizes}", format_table(report),
                f"runtime: features {rt['features']:.1f} s, probes {rt['train']:.1f} s, "
                f"total {rt['including_loading']:.1f} s"]


def run_pos_probe(settings: PosProbeSettings) -> PosProbeResult:
    """Read the files, load the encoder, compute (or read cached) features, train every probe."""
    started = time.perf_counter()
    splits = {name: read_conllu(path, settings.tag, settings.max_sentences)
              for name, path in (("train", settings.train), ("dev", settings.dev), ("test", settings.test))
              if path}
    if settings.threads:
        torch.set_num_threads(settings.threads)
    encoder = settings.encoder.load()
    report = probe_tagging(encoder, splits["train"], splits["dev"], splits.get("test"), settings.training,
                           settings.features, settings.progress)
    report.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    report.extra.update({"task": "pos", "tag": settings.tag, "model": settings.encoder.name})
    return PosProbeResult(report, encoder.num_layers, encoder.output_dim)


@dataclass(frozen=True)
class WsdSettings:
    """1-NN word sense disambiguation (ELMo 5.3): sense centroids from SemCor (``train``: the
    tarball, its directory or one tag file; its first ``max_train_sentences``), scored on a
    Raganato-format ``eval`` file with its ``gold`` keys; ``wordnet``: WordNet 3.0's dict
    directory (None: ``$CONTEXTVEC_WORDNET`` or /usr/share/wordnet)."""

    train: str | os.PathLike
    eval: str | os.PathLike
    gold: str | os.PathLike
    max_train_sentences: int | None = None
    wordnet: str | os.PathLike | None = None
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    vectors: VectorSource = field(default_factory=VectorSource)
    threads: int | None = None


@dataclass
class WsdResult:
    """What :func:`run_wsd` found: the report (``--output``'s JSON; its ``predictions`` per layer)."""

    report: WsdReport

    def lines(self) -> list[str]:
        """What ``probe wsd`` prints before and after writing predictions: the set-up; the table
        and the runtime."""
        r = self.report
        t, e, x = r.train, r.eval, r.extra
        return [f"WSD 1-NN of {x['model']}: {x['num_layers']} layers x {x['dim']} dims; "
                f"train {t['sentences']} sent / {t['spans']} tagged words / {t['sense_keys']} senses; "
                f"eval {e['instances']} instances ({e['instances_with_a_trained_sense']} with a trained "
                "sense)"]

    def table_lines(self) -> list[str]:
        rt = self.report.runtime_s
        return [wsd_table(self.report), f"runtime: train features {rt['train_features']:.1f} s, eval "
                f"features {rt['eval_features']:.1f} s, predict {rt['predict']:.2f} s, "
                f"total {rt['including_loading']:.1f} s"]


def run_wsd(settings: WsdSettings) -> WsdResult:
    """Load WordNet (first: a missing one fails before any work), read SemCor and the evaluation
    set, load the encoder, build the centroids, predict and score every layer."""
    started = time.perf_counter()
    inventory = load_wordnet(settings.wordnet)
    train = read_semcor(settings.train, settings.max_train_sentences)
    data = read_raganato(settings.eval, settings.gold)
    loaded = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    encoder = settings.encoder.load()
    report = evaluate_wsd(encoder, train, data, inventory, settings.vectors)
    report.runtime_s["read_data_and_wordnet"] = round(loaded - started, 3)
    report.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    report.extra.update({"task": "wsd", "model": settings.encoder.name, "num_layers": encoder.num_layers,
                         "dim": encoder.output_dim, "wordnet": str(inventory.directory)})
    return WsdResult(report)


@dataclass(frozen=True)
class NeighboursSettings:
    """The nearest contexts of a word (``query``'s ``occurrence``-th ``word``; ``search.ignore_case``
    matches it in any case) in a one-sentence-per-line ``corpus`` (its first ``max_sentences``),
    beside its nearest words by layer 0 among the ``vocab_size`` most frequent corpus words and,
    given ``word_vectors`` (its first ``max_word_vectors``), by those static vectors."""

    query: tuple[str, ...]
    word: str
    corpus: str | os.PathLike
    occurrence: int = 1
    max_sentences: int | None = None
    search: ContextSearch = field(default_factory=ContextSearch)
    vocab_size: int = 20000
    word_vectors: str | os.PathLike | None = None
    max_word_vectors: int | None = None
    encoder: EncoderChoice = field(default_factory=EncoderChoice)
    threads: int | None = None

    def __post_init__(self) -> None:
        found = len(self.positions)
        if found < self.occurrence or self.occurrence < 1:
            raise ValueError(f"--sentence has {found} occurrence(s) of {self.word!r}, "
                             f"not an occurrence {self.occurrence}")

    @property
    def positions(self) -> list[int]:
        word = self.word.lower() if self.search.ignore_case else self.word
        return [i for i, t in enumerate(self.query) if (t.lower() if self.search.ignore_case else t) == word]

    @property
    def position(self) -> int:
        return self.positions[self.occurrence - 1]


@dataclass
class NeighboursResult:
    """What :func:`run_neighbours` found: the nearest contexts at ``layer`` and the nearest words
    by each context-free vector (None: the word is not among its words)."""

    settings: NeighboursSettings
    model: str
    layer: int
    corpus_lines: int
    vocabulary_size: int
    contexts: list[Context]
    nearest_words: dict[str, list[tuple[str, float]] | None]
    runtime_s: float

    def lines(self) -> list[str]:
        """What ``probe neighbours`` prints."""
        s = self.settings
        lines = [f"query: {mark(s.query, s.position)}",
                 f"nearest contexts by layer {self.layer} of {self.model} ({s.corpus}, "
                 f"{self.corpus_lines} lines):"]
        lines += [f"  {c.similarity:6.3f}  line {c.sentence + 1}: {c.marked()}" for c in self.contexts]
        for name, neighbours in self.nearest_words.items():
            where = (f"among the {self.vocabulary_size} most frequent corpus words" if name == "layer 0"
                     else "among its words")
            lines.append(f"nearest words by {name} (context-free, {where}):")
            lines.append("  " + (", ".join(f"{w} {v:.3f}" for w, v in neighbours) if neighbours is not None
                                 else f"({s.query[s.position]!r} is not in the vocabulary)"))
        return lines

    def to_dict(self) -> dict:
        """``--output``'s JSON."""
        s = self.settings
        return {"task": "neighbours", "model": self.model, "query": list(s.query), "position": s.position,
                "word": s.query[s.position], "layer": self.layer, "corpus": str(s.corpus),
                "corpus_lines": self.corpus_lines,
                "contexts": [{"line": c.sentence + 1, "position": c.position, "similarity": c.similarity,
                              "sentence": c.marked()} for c in self.contexts],
                "nearest_words": {name: None if n is None else [{"word": w, "similarity": v} for w, v in n]
                                  for name, n in self.nearest_words.items()},
                "runtime_s": self.runtime_s}


def run_neighbours(settings: NeighboursSettings) -> NeighboursResult:
    """Read the corpus, load the encoder, rank the word's occurrences, find the nearest words."""
    started = time.perf_counter()
    s, position = settings, settings.position
    corpus = read_corpus(s.corpus, s.max_sentences)
    if s.threads:
        torch.set_num_threads(s.threads)
    encoder = s.encoder.load()
    layer = resolve_layer(encoder, s.search.layer)
    contexts = nearest_contexts(encoder, s.query, position, corpus, s.search)
    word = s.query[position]
    words = vocabulary(corpus, s.vocab_size)
    if word not in words:
        words.append(word)
    layer0 = layer0_vectors(encoder, words, progress=s.search.progress)
    static = {"layer 0": nearest_words(word, words, layer0, s.search.top_k)}
    if s.word_vectors:
        vectors = load_word_vectors(s.word_vectors, max_words=s.max_word_vectors)
        key = word if word in vectors.index() or not s.search.ignore_case else word.lower()
        static[Path(s.word_vectors).name] = nearest_words(key, vectors.words, vectors.vectors, s.search.top_k)
    return NeighboursResult(s, s.encoder.name, layer, len(corpus), len(words), contexts, static,
                            round(time.perf_counter() - started, 3))
