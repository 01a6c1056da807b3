"""Embedding a whole text file into an HDF5 file laid out like allennlp's former ``elmo`` command.

Output: one dataset per input line, the layout and storage (dtype, compression) of
:mod:`contextvec.io.hdf5_vectors`; its ``contextvec_run`` attribute records what made it.

How it stays safe on big inputs: the input is streamed in chunks of lines; each finished chunk
is written atomically as a shard in ``OUTPUT.parts/`` (:class:`~contextvec.io.shards.ShardDir`).
A run that stops keeps its finished shards, and ``resume`` computes only the missing ones (after
checking that the input, model and settings are the same). The shards are merged into ``OUTPUT``
by an atomic rename: complete or absent (peak disk use: about twice the output's size).

What survives: shards and the output are flushed to the disk before they count; a resume
computes again, naming it, any leftover shard that does not open or is short. A disk that
refuses a write ends the run with one :class:`~contextvec.io.atomic.WriteFailed` naming the file,
the finished shards kept. Ctrl-C (SIGINT, main thread) says at once what is kept, abandons the
chunk in flight at its next length batch and raises ``KeyboardInterrupt``; a second Ctrl-C
interrupts at once.

How it computes: on a torch thread of its own (:class:`BulkEngine`, one per run, closed at its
end, also when it fails or is interrupted; the engine's ``WorkerThread``): every forward pass runs
there. Each chunk is one call, cut into length batches as ``Encoder.embed_batches`` cuts them,
from the chunk alone, so the bytes written do not depend on timing, earlier chunks, a resume or
Ray (docs/engine.md). A finished chunk's shard is written while the thread runs the next chunk.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from contextvec.api import ModelSpec
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling, view_layers
from contextvec.engine.worker import WorkerThread
from contextvec.io import hdf5_vectors, vector_storage
from contextvec.io.atomic import (
    WriteFailed,
    output_lock,
    output_target,
    refuse_to_replace,
    remove_temporaries,
)
from contextvec.io.hdf5_vectors import check_finished, merge_shards, write_shard
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
from contextvec.progress import SentenceBar

__all__ = [
    "BulkEngine", "BulkSettings", "ResumeError", "Stopped", "bulk_engine", "check_finished",
    "embed_chunk", "embed_chunks", "embed_to_hdf5", "merge_shards", "write_shard",
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
        dtype, compression, gzip_level: how each dataset is stored (``--dtype``,
            ``--compression``, ``--gzip-level``): :class:`~contextvec.io.hdf5_vector_storage.VectorStorage`.

    Raises:
        ValueError: a mode that is none of its choices, a count below 1, a gzip level not in 1-9.
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
    dtype: vector_storage.VectorDtype = vector_storage.VectorDtype.FLOAT32
    compression: vector_storage.Compression = vector_storage.Compression.NONE
    gzip_level: int | None = None

    def __post_init__(self) -> None:
        storage = vector_storage.VectorStorage(self.dtype, self.compression, self.gzip_level)
        empty_lines, invalid_utf8 = as_policies(self.empty_lines, self.invalid_utf8)
        for name, value in (("layers", as_layers(self.layers)), ("pool", as_pooling(self.pool)),
                            ("empty_lines", empty_lines), ("invalid_utf8", invalid_utf8),
                            ("dtype", storage.dtype), ("compression", storage.compression)):
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
                "chunk_lines": self.chunk_lines, **self.storage.record()}

    @property
    def storage(self) -> vector_storage.VectorStorage:
        """How each dataset is written (dtype, compression)."""
        return vector_storage.VectorStorage(self.dtype, self.compression, self.gzip_level)

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


#: The argument of a ``KeyboardInterrupt`` whose line was already printed (the command line adds none).
REPORTED = "reported"


class Stopped(Exception):
    """A chunk abandoned at a length batch because its run was asked to stop."""


Progress = Callable[[int, int], None]
"""Called on the engine's torch thread as sentences are done, with (sentences, tokens)."""


class BulkEngine(WorkerThread):
    """The torch thread a bulk run embeds on (one per run, one per Ray worker; leave its ``with``
    block when done): each chunk is one call (:func:`embed_chunk`), never batched with another,
    so the engine's batching would only cut other batches."""

    def __init__(self, encoder: Encoder) -> None:
        super().__init__("contextvec-batcher")
        self.encoder = encoder

    def embed(self, chunk: Lines, settings: BulkSettings, stop: threading.Event | None = None,
              progress: Progress | None = None) -> Future[list[np.ndarray]]:
        """Queue a chunk; its future gets each line's layers in chunk order (cancelled: a chunk
        not yet started is dropped)."""
        sentences = [text.split() for _, text in chunk]
        return self.submit(lambda: self._run(sentences, settings, stop, progress))

    def _run(self, sentences: list[Sequence], settings: BulkSettings, stop: threading.Event | None,
             progress: Progress | None) -> list[np.ndarray]:
        """On the thread: the chunk's length batches as ``Encoder.embed_batches`` cuts them, from
        empty caches, each sentence's layers in chunk order. The whole chunk is one call, so the
        caller never waits on a forward pass between batches, and the caches are cleared where no
        other forward pass runs. Between batches it reports each finished sentence to
        ``progress`` and raises :class:`Stopped` once ``stop`` is set (a batch's sentences come
        out together, after its forward pass)."""
        self.encoder.clear_caches()
        arrays: list[np.ndarray] = [np.empty(0)] * len(sentences)
        if stop is not None and stop.is_set():
            raise Stopped
        for row, array in self.encoder.embed_batches(sentences, settings.batch_size, settings.max_tokens):
            arrays[row] = array
            if progress is not None:
                progress(1, len(sentences[row]))
            if stop is not None and stop.is_set():
                raise Stopped
        return arrays


bulk_engine = BulkEngine  # the name Ray workers and callers of earlier releases use


def _datasets(future: Future, chunk: Lines, settings: BulkSettings) -> hdf5_vectors.Shard:
    """The chunk's ``(key, array)`` in chunk order, sliced to the run's layers and pooling and
    put in their stored form here."""
    arrays = future.result()
    keys = [text.strip() if settings.sentence_keys else str(i) for i, text in chunk]
    storage = settings.storage
    return hdf5_vectors.Shard([(key, storage.encode(view_layers(array, settings.layers, settings.pool)))
                  for key, array in zip(keys, arrays, strict=True)], storage)


def embed_chunk(engine: BulkEngine, chunk: Lines, settings: BulkSettings) -> hdf5_vectors.Shard:
    """``(key, array)`` for each ``(line index, text)`` of a chunk, in chunk order: the datasets
    of one shard, embedded on ``engine``'s thread. Any engine that writes this output (local,
    Ray) embeds through here: the chunk starts from empty caches, so its bytes do not depend on
    earlier chunks, and it is cut into the batches
    ``Encoder.embed_batches(sentences, batch_size, max_tokens)`` runs, so they do not depend on
    timing either."""
    [(_, _, shard)] = embed_chunks(engine, [(0, chunk)], settings)
    return shard


def embed_chunks(engine: BulkEngine, chunks: Iterable[tuple[int, Lines]], settings: BulkSettings, *,
                 stop: threading.Event | None = None,
                 progress: Progress | None = None) -> Iterator[tuple[int, Lines, hdf5_vectors.Shard]]:
    """``(number, chunk, datasets)`` for each numbered chunk, in order, the datasets as
    :func:`embed_chunk` makes them; a chunk's are handed out once the next chunk is queued, so
    the engine computes while the caller writes the shard. Close the iterator
    (``contextlib.closing``) when giving up early: that drops the chunk still queued.

    ``progress`` is called on the engine's thread as each sentence's batch is done (sentences,
    tokens); once ``stop`` is set the chunk in flight is abandoned at its next length batch and
    :class:`Stopped` is raised (every chunk handed out before is whole)."""
    finished: tuple[int, Lines, hdf5_vectors.Shard] | None = None
    for number, chunk in chunks:
        future = engine.embed(chunk, settings, stop, progress)
        try:
            if finished is not None:
                yield finished
            finished = number, chunk, _datasets(future, chunk, settings)
        except BaseException:  # the caller gave up (or writing failed): drop the queued chunk
            future.cancel()
            raise
    if finished is not None:
        yield finished


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

        done = hdf5_vectors.whole_shards(parts, n_chunks, lines_of, _notice)
        already = sum(lines_of(n) for n in done)
        if resumed:
            _notice(f"resuming {output_path}: {already:,} of {scan.n_lines:,} lines already embedded "
                    f"({len(done)} of {n_chunks} chunks)")
        _embed_missing(encoder, input_path, parts, n_chunks, done, already, scan.n_lines, settings)
        try:
            merge_shards(parts, n_chunks, output_path, input_path, index=settings.index,
                         progress=settings.progress)
        except WriteFailed as e:
            raise hdf5_vectors.kept(e, f"the {n_chunks} finished chunks", parts,
                        " (the merge needs about their size)") from None
        parts.remove()
        return output_path


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
        engine = stack.enter_context(BulkEngine(encoder))
        # closed first: a failed write does not wait for the chunk in flight, which is dropped
        stack.callback(interrupt.stop.set)
        tick = SentenceBar(bar) if settings.progress else None
        embedded = stack.enter_context(closing(embed_chunks(engine, todo, settings, stop=interrupt.stop,
                                                            progress=tick)))
        try:
            for number, _, items in embedded:
                writing = True
                write_shard(parts.shard(number), items)
                written, writing = written + 1, False
        except Stopped:
            pass
        except WriteFailed as e:
            raise hdf5_vectors.kept(e, f"the {written} finished chunk(s) of {n_chunks}", parts) from None
        if interrupt.interrupted:
            raise KeyboardInterrupt(REPORTED)
