"""Embedding a whole text file into an HDF5 file laid out like allennlp's former ``elmo`` command.

Output: one float32 dataset per input line, keyed by the 0-based line index (or by the sentence
with ``sentence_keys``), shaped ``(layers, tokens, dim)`` for ``"all"`` and ``(tokens, dim)``
for ``"top"`` / ``"average"`` (with ``pool``, the token axis is pooled away); plus
``sentence_to_index``, a one-element string dataset holding ``json.dumps({sentence: "index"})``,
unless ``forget_sentences`` or ``sentence_keys``. The file's ``contextvec_run`` attribute records
what made it (input hash, model fingerprint, settings), so a resume can check it.

How it stays safe on big inputs: the input is streamed in chunks of lines, each chunk sorted
into length batches; every finished chunk is written atomically as a shard in
``OUTPUT.parts/`` (:class:`~contextvec.io.shards.ShardDir`). A run that stops for any reason
keeps its finished shards, and ``resume`` computes only the missing ones (after checking that
the input, model and settings are the same). The shards are finally merged into ``OUTPUT`` by an
atomic rename, so ``OUTPUT`` is either complete or absent. Peak disk use is about twice the
output size during the merge.

What survives: shards and the output are flushed to the disk before they count, so a power loss
leaves whole shards; a resume opens every leftover shard and computes again, naming it, any that
does not open or holds the wrong number of datasets. A disk that refuses a write (full, quota,
I/O error) ends the run with one :class:`~contextvec.io.atomic.WriteFailed` naming the file, its
temporary file removed and the finished shards kept. Ctrl-C (SIGINT, in the main thread) says at
once what is kept, abandons the chunk in flight at its next length batch, keeps every finished
shard and raises ``KeyboardInterrupt``; a second Ctrl-C interrupts at once.

How it computes: through a :class:`~contextvec.engine.Engine` of its own (one per run, closed at
its end, also when it fails or is interrupted), so that every forward pass runs on the engine's
one torch thread. Each chunk is one call, cut into length batches on that thread as
``Encoder.embed_batches`` cuts them, from the chunk alone, so the bytes written do not depend on
timing, on earlier chunks, on a resume or on Ray (docs/engine.md says why the engine does not
form them). A finished chunk's shard is written while the engine runs the next chunk.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
from tqdm import tqdm

from contextvec.api import ModelSpec
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling, view_layers
from contextvec.engine import Engine, EngineSettings
from contextvec.engine.batcher import Job, Runner
from contextvec.io.atomic import (
    WriteFailed,
    atomic_file,
    output_lock,
    output_target,
    refuse_to_replace,
    remove_temporaries,
)
from contextvec.io.shards import ResumeError, ShardDir
from contextvec.io.text_lines import (
    EmptyLines,
    InvalidUtf8,
    Lines,
    as_policies,
    check_scan,
    input_file,
    read_lines,
    scan_lines,
)

SENTENCE_TO_INDEX = "sentence_to_index"
RUN_ATTRIBUTE = "contextvec_run"

MERGE_BAR_DELAY_S = 2.0
"""The merge's progress bar appears only once the merge has run this long."""

__all__ = [
    "BulkSettings", "ResumeError", "Stopped", "bulk_engine", "check_finished",
    "embed_chunk", "embed_chunks", "embed_to_hdf5", "merge_shards", "shard_problem", "write_shard",
]


@dataclass(frozen=True)
class BulkSettings:
    """How a corpus is embedded into HDF5 (``contextvec embed``'s options): by
    [`embed_to_hdf5`][contextvec.bulk.embed_to_hdf5] here and by
    ``contextvec.distributed.embed_ray`` on a Ray cluster alike. Strings are accepted for the
    modes and checked once, here.

    Attributes:
        layers: which layers each dataset holds (``--all``/``--top``/``--average``).
        pool: None for token vectors, else one vector per sentence (``--pool``).
        batch_size: sentences per forward pass.
        max_tokens: padded tokens per forward pass (None: no limit); a longer sentence runs alone.
        sentence_keys: key the datasets by sentence text instead of line index.
        forget_sentences: do not write the ``sentence_to_index`` dataset.
        empty_lines: refuse empty or whitespace-only lines, naming them, or keep them as
            zero-token datasets.
        invalid_utf8: refuse lines that are not UTF-8, naming them, or decode them with U+FFFD.
        chunk_lines: lines per resumable shard; a resumed run keeps the first run's value.
        resume: finish an interrupted run of the same input, model and settings.
        overwrite: replace an existing output (and discard an unfinished run's shards).
        progress: show progress bars.

    Raises:
        ValueError: a mode that is none of its choices, or a count below 1.
    """

    layers: Layers = Layers.ALL
    pool: Pooling | None = None
    batch_size: int = 64
    max_tokens: int | None = 4096
    sentence_keys: bool = False
    forget_sentences: bool = False
    empty_lines: EmptyLines = EmptyLines.ERROR
    invalid_utf8: InvalidUtf8 = InvalidUtf8.ERROR
    chunk_lines: int = 2048
    resume: bool = False
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        empty_lines, invalid_utf8 = as_policies(self.empty_lines, self.invalid_utf8)
        for name, value in (("layers", as_layers(self.layers)), ("pool", as_pooling(self.pool)),
                            ("empty_lines", empty_lines), ("invalid_utf8", invalid_utf8)):
            object.__setattr__(self, name, value)
        for name, value in (("batch_size", self.batch_size), ("chunk_lines", self.chunk_lines),
                            ("max_tokens", 1 if self.max_tokens is None else self.max_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {value!r}")

    def record(self) -> dict[str, str | int | bool | None]:
        """The settings a resume must find unchanged (``chunk_lines`` is kept from the first
        run), as plain JSON values: part of the ``contextvec_run`` attribute and of a Ray
        folder's manifest."""
        return {"layers": self.layers.value, "pool": None if self.pool is None else self.pool.value,
                "sentence_keys": self.sentence_keys, "forget_sentences": self.forget_sentences,
                "empty_lines": self.empty_lines.value, "invalid_utf8": self.invalid_utf8.value,
                "chunk_lines": self.chunk_lines}

    @property
    def index(self) -> bool:
        """Whether the output gets a ``sentence_to_index`` dataset."""
        return not (self.forget_sentences or self.sentence_keys)


def _chunks(path: Path, size: int) -> Iterator[list[tuple[int, str]]]:
    chunk: list[tuple[int, str]] = []
    for item in read_lines(path):
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


Datasets = list[tuple[str, np.ndarray]]
"""A shard's contents: ``(key, array)`` pairs."""


def bulk_engine(encoder: Encoder) -> Engine:
    """The engine a bulk run embeds through (one per run, one per Ray worker; close it when done).
    Each chunk is one call, run on the engine's torch thread by the chunk's own runner (see
    :func:`embed_chunk`): batching across calls and a token budget would cut other batches."""
    return Engine(encoder, EngineSettings(max_batch_tokens=None, batching=False, max_queue=2))


#: The argument of a ``KeyboardInterrupt`` whose line was already printed (the command line adds none).
REPORTED = "reported"


class Stopped(Exception):
    """A chunk abandoned at a length batch because its run was asked to stop."""


Progress = Callable[[int, int], None]
"""Called on the engine's torch thread as sentences are done, with (sentences, tokens)."""


def _chunk_runner(encoder: Encoder, settings: BulkSettings, stop: threading.Event | None,
                  progress: Progress | None) -> Runner:
    """What the engine's torch thread runs for one chunk: the chunk's length batches as
    ``Encoder.embed_batches`` cuts them, from empty caches, each sentence's layers in chunk order.
    The whole chunk is one call, so the thread that calls the engine never waits on a forward
    pass between batches, and the caches are cleared where no other forward pass runs. Between
    batches it reports each finished sentence to ``progress`` and raises :class:`Stopped` once
    ``stop`` is set (a batch's sentences come out together, after its forward pass)."""

    def run(sentences: list[Sequence]) -> list[np.ndarray]:
        encoder.clear_caches()
        arrays: list[np.ndarray] = [np.empty(0)] * len(sentences)
        if stop is not None and stop.is_set():
            raise Stopped
        for row, array in encoder.embed_batches(sentences, settings.batch_size, settings.max_tokens):
            arrays[row] = array
            if progress is not None:
                progress(1, len(sentences[row]))
            if stop is not None and stop.is_set():
                raise Stopped
        return arrays

    return run


def _datasets(job: Job, chunk: Lines, settings: BulkSettings) -> Datasets:
    """The chunk's ``(key, array)`` in chunk order, sliced to the run's layers and pooling here."""
    arrays = job.future.result()
    keys = [text.strip() if settings.sentence_keys else str(i) for i, text in chunk]
    return [(key, view_layers(array, settings.layers, settings.pool))
            for key, array in zip(keys, arrays, strict=True)]


def embed_chunk(engine: Engine, chunk: Lines, settings: BulkSettings) -> Datasets:
    """``(key, array)`` for each ``(line index, text)`` of a chunk, in chunk order: the datasets
    of one shard, embedded through ``engine`` (made by :func:`bulk_engine`). Any engine that
    writes this output (local, Ray) embeds through here: the chunk starts from empty caches, so
    its bytes do not depend on earlier chunks, and it is cut into the batches
    ``Encoder.embed_batches(sentences, batch_size, max_tokens)`` runs, so they do not depend on
    timing either."""
    job = engine.submit([text.split() for _, text in chunk], math.inf,
                        run=_chunk_runner(engine.encoder, settings, None, None))
    try:
        return _datasets(job, chunk, settings)
    except BaseException:
        job.cancel()
        raise


def embed_chunks(engine: Engine, chunks: Iterable[tuple[int, Lines]], settings: BulkSettings, *,
                 stop: threading.Event | None = None,
                 progress: Progress | None = None) -> Iterator[tuple[int, Lines, Datasets]]:
    """``(number, chunk, datasets)`` for each numbered chunk, in order, the datasets as
    :func:`embed_chunk` makes them; a chunk's are handed out once the next chunk is queued, so
    the engine computes while the caller writes the shard. Close the iterator
    (``contextlib.closing``) when giving up early: that drops the chunk still queued.

    ``progress`` is called on the engine's thread as each sentence's batch is done (sentences,
    tokens); once ``stop`` is set the chunk in flight is abandoned at its next length batch and
    :class:`Stopped` is raised (every chunk handed out before is whole)."""
    finished: tuple[int, Lines, Datasets] | None = None
    for number, chunk in chunks:
        job = engine.submit([text.split() for _, text in chunk], math.inf,
                            run=_chunk_runner(engine.encoder, settings, stop, progress))
        try:
            if finished is not None:
                yield finished
            finished = number, chunk, _datasets(job, chunk, settings)
        except BaseException:  # the caller gave up (or writing failed): drop the queued chunk
            job.cancel()
            raise
    if finished is not None:
        yield finished


def write_shard(path: Path, items: Datasets) -> None:
    """One shard, written atomically and flushed to the disk: complete under its name or absent.
    A disk that refuses the write raises :class:`~contextvec.io.atomic.WriteFailed` naming
    ``path`` (HDF5 writes through a Python file: on a path of its own it crashes the process)."""
    with atomic_file(path) as stream, h5py.File(stream, "w") as f:
        for key, array in items:
            f.create_dataset(key, data=array)


def shard_problem(path: Path, datasets: int) -> str | None:
    """Why the shard at ``path`` cannot be used (it does not open, or holds other than
    ``datasets`` datasets: torn by a crash the disk did not survive), or None."""
    try:
        with h5py.File(path, "r") as f:
            held = len(f)
    except OSError as e:
        return f"it cannot be read ({str(e).splitlines()[0]})"
    return None if held == datasets else f"it holds {held} datasets, not {datasets}"


def _notice(text: str) -> None:
    """One line on standard error, above any progress bar."""
    tqdm.write(f"contextvec: {text}", file=sys.stderr)


class _StopOnInterrupt:
    """While active in the main thread, Ctrl-C (SIGINT) sets :attr:`interrupted` and :attr:`stop`
    and prints one line (made by ``say`` when the signal comes); a second Ctrl-C interrupts at
    once. ``stop`` is also set by a run that gives up for another reason."""

    def __init__(self, say: Callable[[], str]) -> None:
        self.stop = threading.Event()
        self.interrupted = False
        self._say = say
        self._previous: object = None

    def _handle(self, signum: int, frame: object) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        self.stop.set()
        _notice(self._say())

    def __enter__(self) -> _StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _kept(error: WriteFailed, chunks: str, parts: ShardDir, need: str = "") -> WriteFailed:
    """``error`` saying which finished chunks are kept and how to go on."""
    return WriteFailed(error.errno, f"{error.strerror}; {chunks} are kept in {parts.path}: free some "
                                    f"space{need}, then rerun with --resume")


class _Bar:
    """The embed bar, moved from the engine's one torch thread (each finished sentence); the
    main thread only writes lines above it, under tqdm's own lock."""

    def __init__(self, bar: tqdm) -> None:
        self._bar = bar
        self._tokens = 0

    def __call__(self, sentences: int, tokens: int) -> None:
        self._tokens += tokens
        self._bar.set_postfix_str(
            f"{self._tokens / max(self._bar.format_dict['elapsed'], 1e-9):.0f} tok/s", refresh=False)
        self._bar.update(sentences)


def check_finished(output: Path, parts: ShardDir) -> None:
    """A complete output may be reused by ``resume`` only if the same run made it: else
    :class:`ResumeError`, naming what differs (the run is recorded in ``contextvec_run``)."""
    try:
        with h5py.File(output, "r") as f:
            recorded = f.attrs.get(RUN_ATTRIBUTE)
    except OSError as e:
        raise ResumeError(f"{output} exists but is not a readable HDF5 file ({e}); "
                          "pass --overwrite to replace it") from e
    if recorded is None:
        raise ResumeError(f"{output} exists and does not record how it was made; "
                          "pass --overwrite to replace it")
    differ = parts.explain(json.loads(recorded))
    if differ:
        raise ResumeError(f"{output} was made by another run: {differ}; pass --overwrite to replace it")


def embed_to_hdf5(
    model: Encoder | ModelSpec,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    settings: BulkSettings | None = None,
) -> Path:
    """Embed every line of ``input_path`` (plain or ``.gz``) into ``output_path``; returns it.

    ``model`` is a loaded encoder, or a [`ModelSpec`][contextvec.api.ModelSpec] loaded once the
    output and the input have passed their checks (so that a refused run does not wait for it).
    ``settings`` (default: [`BulkSettings`][contextvec.bulk.BulkSettings]'s defaults) say which
    vectors and how bad lines are treated: empty lines and invalid UTF-8 are checked on a first
    streaming pass, before any compute. An existing output is refused unless ``overwrite``
    (which also discards an unfinished run's ``OUTPUT.parts/``); with ``resume`` a finished
    output of the very same run is returned as it is, and one made otherwise is refused, naming
    what differs. An output that is a symbolic link is written through to its target; a FIFO,
    device or socket is never replaced. The output is held for the whole call: another process
    embedding into it meanwhile gets :class:`~contextvec.io.atomic.OutputInUseError`.
    """
    settings = settings or BulkSettings()
    input_path, given = input_file(input_path), output_path
    output_path = output_target(output_path)  # a symbolic link is written through
    with output_lock(output_path):
        refuse_to_replace(output_path, given, inputs=[input_path],
                          replace=settings.overwrite or settings.resume)
        scan = scan_lines(input_path, settings.sentence_keys)
        check_scan(scan, settings.empty_lines, settings.invalid_utf8)
        if scan.n_lines == 0:
            raise ValueError(f"{input_path} is empty: there is nothing to embed")
        encoder = model.load() if isinstance(model, ModelSpec) else model
        run = settings.record()
        parts = ShardDir(output_path.with_name(output_path.name + ".parts"), {
            "input_sha256": scan.sha256, "n_lines": scan.n_lines, "model": model_identity(encoder), **run,
        }, free={"chunk_lines"})
        if settings.resume and not parts.path.exists() and output_path.exists() and not settings.overwrite:
            check_finished(output_path, parts)
            return output_path  # finished earlier by the same run: nothing left to do
        # a run that died mid-write (a merge, a shard) leaves its temporary file behind
        remove_temporaries(output_path.parent, output_path.name)
        resumed = parts.start(settings.resume, restart=settings.overwrite)
        chunk_lines = parts.manifest["chunk_lines"]
        n_chunks = -(-scan.n_lines // chunk_lines)

        def lines_of(number: int) -> int:
            return min(chunk_lines, scan.n_lines - number * chunk_lines)

        done = _whole_shards(parts, n_chunks, lines_of)
        already = sum(lines_of(n) for n in done)
        if resumed:
            _notice(f"resuming {output_path}: {already:,} of {scan.n_lines:,} lines already embedded "
                    f"({len(done)} of {n_chunks} chunks)")
        _embed_missing(encoder, input_path, parts, n_chunks, done, already, scan.n_lines, settings)
        try:
            merge_shards(parts, n_chunks, output_path, input_path, index=settings.index,
                         progress=settings.progress)
        except WriteFailed as e:
            raise _kept(e, f"the {n_chunks} finished chunks", parts,
                        " (the merge needs about their size)") from None
        parts.remove()
        return output_path


def _whole_shards(parts: ShardDir, n_chunks: int, lines_of: Callable[[int], int]) -> set[int]:
    """The finished shards that open and hold their chunk's datasets; any other is removed,
    named on standard error, and computed again."""
    done = set()
    for number in sorted(parts.done(n_chunks)):
        problem = shard_problem(parts.shard(number), lines_of(number))
        if problem is None:
            done.add(number)
        else:
            parts.shard(number).unlink()
            _notice(f"{parts.shard(number)} is damaged: {problem}; computing its "
                    f"{lines_of(number):,} lines again")
    return done


def _embed_missing(encoder: Encoder, input_path: Path, parts: ShardDir, n_chunks: int, done: set[int],
                   already: int, n_lines: int, settings: BulkSettings) -> None:
    """Compute and write every shard not in ``done``; Ctrl-C stops after the shards finished
    (raising ``KeyboardInterrupt``), a disk that refuses a shard stops with one
    :class:`~contextvec.io.atomic.WriteFailed` saying what is kept."""
    written, writing = len(done), False  # a shard being written when Ctrl-C comes is kept

    def say() -> str:
        return (f"interrupted: keeping the {written + writing} finished chunk(s) of {n_chunks} in "
                f"{parts.path} and dropping the one in flight; rerun with --resume to finish")

    todo = ((n, chunk) for n, chunk in enumerate(_chunks(input_path, parts.manifest["chunk_lines"]))
            if n not in done)
    with _StopOnInterrupt(say) as interrupt, contextlib.ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=n_lines, initial=already, unit="sent", desc="embed",
                                       disable=not settings.progress))
        engine = stack.enter_context(bulk_engine(encoder))
        # closed first: a failed write does not wait for the chunk in flight, which is dropped
        stack.callback(interrupt.stop.set)
        embedded = stack.enter_context(closing(embed_chunks(
            engine, todo, settings, stop=interrupt.stop, progress=_Bar(bar) if settings.progress else None)))
        try:
            for number, _, items in embedded:
                writing = True
                write_shard(parts.shard(number), items)
                written, writing = written + 1, False
        except Stopped:
            pass
        except WriteFailed as e:
            raise _kept(e, f"the {written} finished chunk(s) of {n_chunks}", parts) from None
        if interrupt.interrupted:
            raise KeyboardInterrupt(REPORTED)


def merge_shards(
    parts: ShardDir, n_chunks: int, output: Path, input_path: Path, index: bool, progress: bool
) -> None:
    """Shards ``0..n_chunks-1`` -> ``output`` (atomically, flushed to the disk), with
    ``sentence_to_index`` if ``index`` and the run's manifest as the ``contextvec_run`` attribute.
    Its progress bar shows only on a merge longer than :data:`MERGE_BAR_DELAY_S`. A shard that
    cannot be read is named (``OSError``); a disk that refuses the output raises
    :class:`~contextvec.io.atomic.WriteFailed` naming it."""
    with atomic_file(output) as stream, h5py.File(stream, "w") as out:
        for number in tqdm(range(n_chunks), desc="merge", unit="shard", disable=not progress,
                           delay=MERGE_BAR_DELAY_S):
            path = parts.shard(number)
            try:
                shard = h5py.File(path, "r")
            except OSError as e:
                raise OSError(f"{path} cannot be read ({str(e).splitlines()[0]}); rerun with "
                              "--resume to compute it again") from None
            with shard:
                for name in shard:
                    shard.copy(shard[name], out, name=name)
        if index:
            sentence_to_index = {text.strip(): str(i) for i, text in read_lines(input_path)}
            data = out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
            data[0] = json.dumps(sentence_to_index)
        out.attrs[RUN_ATTRIBUTE] = json.dumps(parts.manifest, sort_keys=True)
