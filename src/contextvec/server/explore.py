"""The explorer's endpoints apart from HTTP: the models it compares, the corpus it searches and the
reports it charts (the page at ``/`` calls them; :mod:`contextvec.server.explore_routes` routes).

Every forward pass goes through the server's engine, a second model's too (its own runner on the
same worker thread: one queue and one OpenMP team for all torch work). The numbers come from
:mod:`contextvec.explore.contexts` and :mod:`contextvec.explore.layer_report`, which work without HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import anyio
import numpy as np

from contextvec.encoders.base import Encoder
from contextvec.engine.worker import WorkerThread
from contextvec.explore.contexts import ContextIndex, sense_separation, word_across_contexts
from contextvec.explore.layer_report import read_layer_report
from contextvec.io.text_lines import read_lines, scan_lines
from contextvec.probes.neighbours import occurrences
from contextvec.server import explore_schemas as es
from contextvec.server.errors import APIError
from contextvec.server.service import Call, Service
from contextvec.text.tokenize import Tokenizer

SAMPLE_CORPUS = "explore_corpus.txt"
"""The bundled corpus searched when no ``--explore-corpus`` is given (``contextvec.data``)."""


@dataclass(frozen=True)
class ExploreSettings:
    """What the explorer is started with (``contextvec serve``'s options of these names).

    Attributes:
        corpus: a text file, one sentence a line, whose contexts the nearest-contexts view
            searches (None: the bundled sample); blank lines are skipped.
        reports: saved task model directories and report files to chart.
        cache_dir: where the corpus's vectors are cached (None: the feature cache's default).
        progress: show a progress bar while the corpus is embedded.
    """

    corpus: str | None = None
    reports: tuple[str, ...] = ()
    cache_dir: str | None = None
    progress: bool = True


def read_explore_corpus(path: str | None, tokenizer: str) -> tuple[str, list[list[str]]]:
    """``(source, sentences)`` of a corpus file (None: the bundled sample), split by ``tokenizer``.

    Raises:
        OSError: a file that cannot be read (FileNotFoundError: none there).
        ValueError: a file with invalid UTF-8, or without a sentence.
    """
    if path is None:
        source = f"bundled sample ({SAMPLE_CORPUS})"
        lines = resources.files("contextvec.data").joinpath(SAMPLE_CORPUS).read_text("utf-8").splitlines()
    else:
        source = Path(path).name
        bad = scan_lines(path).invalid_utf8
        if bad:
            raise ValueError(f"line {bad[0] + 1} is not valid UTF-8 ({len(bad)} such line(s)): "
                             "fix the file's encoding")
        lines = [text for _, text in read_lines(path)]
    split = str.split if tokenizer == "whitespace" else (lambda text: Tokenizer(tokenizer)(text)[0])
    sentences = [list(split(line)) for line in lines if line.strip()]
    if not sentences:
        raise ValueError("no sentence in it (every line is blank)")
    return source, sentences


Run = Callable[[Sequence[list[str]]], list[np.ndarray]]
"""A compared model's forward passes on the engine's thread: a batch of token lists -> each one's layers."""


def _runner(encoder: Encoder, max_batch_tokens: int | None) -> Run:
    """A batch of token lists -> each one's layers, on ``encoder`` (a model besides the engine's)."""
    def run(sentences: Sequence[list[str]]) -> list[np.ndarray]:
        arrays: list[np.ndarray] = [np.empty(0)] * len(sentences)
        for row, array in encoder.embed_batches(list(sentences), len(sentences), max_batch_tokens):
            arrays[row] = array
        return arrays

    return run


def _occurrences(found: list[tuple[int, int]], sentences: list[list[str]],
                 senses: list[str] | None = None) -> list[dict]:
    return [{"sentence": i, "position": j, "tokens": sentences[i], "sense": senses and senses[i]}
            for i, j in found]


@dataclass(frozen=True)
class ExploreModel:
    """A model the explorer compares: its id, encoder, corpus index and how the engine runs it
    (``run`` None: the engine's own model)."""

    id: str
    encoder: Encoder
    index: ContextIndex
    run: Run | None

    @property
    def kind(self) -> Hashable:
        """The engine's kind of its work: its calls share forward passes (None: the engine's own)."""
        return None if self.run is None else ("explore", self.id)


class Explorer:
    """The explorer's models (the served one first), corpus and reports."""

    def __init__(self, service: Service, models: list[ExploreModel], source: str,
                 reports: list[tuple[str, dict]]) -> None:
        self.service, self.models, self.source, self.reports = service, models, source, reports

    @classmethod
    def prepare(cls, service: Service, models: list[tuple[str, Encoder]], settings: ExploreSettings,
                worker: WorkerThread) -> Explorer:
        """Read the corpus and the reports, and index the corpus with every model on ``worker``
        (the first model is the one ``service`` serves).

        Raises:
            ValueError: a corpus or report that cannot be read (one line naming its option).
        """
        reports = []
        for path in settings.reports:
            try:
                reports.append((path, asdict(read_layer_report(path))))
            except (FileNotFoundError, ValueError) as error:
                raise ValueError(f"--explore-report {path}: {error}") from None
        try:
            source, sentences = read_explore_corpus(settings.corpus, service.settings.tokenizer)
        except (OSError, ValueError) as error:
            why = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise ValueError(f"--explore-corpus {settings.corpus}: {why}") from None
        built = []
        for k, (name, encoder) in enumerate(models):
            index = worker.run(lambda e=encoder, n=name: ContextIndex.build(
                e, sentences, settings.cache_dir, settings.progress, f"{source} ({n})"))
            run = None if k == 0 else _runner(encoder, service.settings.engine.max_batch_tokens)
            built.append(ExploreModel(name, encoder, index, run))
        return cls(service, built, source, reports)

    def info(self) -> dict:
        """``GET /v1/explore``."""
        index = self.models[0].index
        return {"models": [{"id": m.id, "num_layers": m.encoder.num_layers, "dim": m.encoder.output_dim,
                            "layer_names": m.encoder.layer_names()}
                           for m in self.models],
                "corpus": {"source": self.source, "sentences": len(index.sentences),
                           "tokens": index.num_tokens},
                "reports": [{"source": source, **report} for source, report in self.reports]}

    def model(self, name: str | None) -> ExploreModel:
        if name is None:
            return self.models[0]
        found = next((m for m in self.models if m.id == name), None)
        if found is None:
            ids = ", ".join(m.id for m in self.models)
            raise APIError(422, f"model: no model {name!r} here (the explorer has {ids})", "model")
        return found

    async def similarity(self, body: es.SimilarityRequest, call: Call) -> dict:
        """``POST /v1/explore/similarity``."""
        model = self.model(body.model)
        if body.senses is not None and len(body.senses) != len(body.sentences):
            raise APIError(422, f"senses: {len(body.senses)} for {len(body.sentences)} sentences: "
                                "give one sense per sentence", "senses")
        sentences = await self.service.atokenize(body.sentences, body.tokenizer, "sentences")
        arrays = await self.service.vectors(call, sentences, model.run, model.kind)
        out = {"model": model.id, "word": body.word, "separation": None, "summary": None}
        try:
            result = word_across_contexts(arrays, sentences, body.word, body.ignore_case,
                                          es.MAX_OCCURRENCES)
        except ValueError:  # fewer than two occurrences: nothing to compare, those found say so
            found = occurrences(sentences, body.word, body.ignore_case)
            return {**out, "total": len(found), "occurrences": _occurrences(found, sentences, body.senses),
                    "layers": []}
        names = model.encoder.layer_names()
        layers = [{"layer": k, "name": names[k], "matrix": np.round(matrix, 6).tolist(),
                   "closest": asdict(result.closest[k]), "farthest": asdict(result.farthest[k])}
                  for k, matrix in enumerate(result.similarity)]
        out |= {"total": result.total, "layers": layers,
                "occurrences": _occurrences(result.occurrences, sentences, body.senses)}
        if body.senses is not None:
            try:
                separation = sense_separation(result, body.senses, names)
            except ValueError as error:  # one sense only, or no two of one: said, not measured
                out["summary"] = f"Not measured: {error}."
            else:
                out["separation"] = {"best": separation.best, "layers": [
                    {**asdict(layer), "verdict": layer.verdict()} for layer in separation.layers]}
                out["summary"] = separation.summary()
        return out

    async def nearest(self, body: es.NearestRequest, call: Call) -> dict:
        """``POST /v1/explore/nearest``."""
        model = self.model(body.model)
        tokens = (await self.service.atokenize([body.sentence], body.tokenizer, "sentence"))[0]
        if not tokens:
            raise APIError(422, "sentence: empty or blank: give a sentence with the word", "sentence")
        if body.position >= len(tokens):
            raise APIError(422, f"position: {body.position} is past the sentence's {len(tokens)} "
                                f"tokens (0..{len(tokens) - 1})", "position")
        word = tokens[body.position]
        array = (await self.service.vectors(call, [tokens], model.run, model.kind))[0]
        out = {"model": model.id, "tokens": tokens, "position": body.position, "word": word,
               "occurrences": model.index.count(word, body.ignore_case), "layers": []}
        try:
            ranked = await anyio.to_thread.run_sync(
                lambda: model.index.nearest(array[:, body.position], word, body.top_k,
                                            body.ignore_case, skip=tokens))
        except ValueError:  # no occurrence in the corpus (but the query): nothing to rank
            return out
        sentences, names = model.index.sentences, model.encoder.layer_names()
        out["layers"] = [{"layer": k, "name": names[k], "contexts": [
            {"sentence": c.sentence, "position": c.position, "tokens": sentences[c.sentence],
             "similarity": round(c.similarity, 6)} for c in contexts]}
            for k, contexts in enumerate(ranked)]
        return out
