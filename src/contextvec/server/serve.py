"""Running a server as one call (``contextvec serve``'s job, and its Python API): :func:`serve`
takes one :class:`ServerProcessSettings`, loads and warms the model (and the explorer's second model)
within the start timeout, builds the app and runs it under uvicorn until SIGTERM or SIGINT.
Importing this module without the ``server`` extra (uvicorn included) raises
`contextvec.extras.MissingExtra` saying so.

>>> from contextvec.api import ModelSpec                                # doctest: +SKIP
>>> serve(ServerProcessSettings(model=ModelSpec("path/to/model"), port=8081))   # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import gc
import ipaddress
import logging
import math
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from contextvec.api import DEFAULT_MODEL, ModelSpec, load
from contextvec.encoders.base import Encoder
from contextvec.encoders.precision import Precision
from contextvec.encoders.registry import sentence_vectors
from contextvec.engine.worker import WorkerThread
from contextvec.extras import needs
from contextvec.io.sentence_transformers import SentencePipelineError, SentencePooling, read_sentence_pooling
from contextvec.logs import LogLevel
from contextvec.server.app import create_app
from contextvec.server.explore import ExploreSettings
from contextvec.server.protocol import header_deadline
from contextvec.server.settings import ServerSettings, host_name

if TYPE_CHECKING:  # /v1/answer's module needs the tasks extra: imported only with --task-model
    from contextvec.server.answer import ServedTask

with needs("server"):  # the package checks the app's packages; serving needs uvicorn too
    import uvicorn

WARMUP = ["The", "quick brown fox jumps over the lazy dog .",
          " ".join(["Contextual representations of every layer for every word ."] * 4)]


@dataclass(frozen=True)
class ServerProcessSettings:
    """One server process: what :func:`serve` binds, loads and runs (``contextvec serve``'s
    options of the same names; the app's own limits are ``server``).

    Attributes:
        model: the model to serve.
        server: the app's limits and defaults; its ``openai_sentence`` is read by :func:`serve`
            from a sentence-transformers checkpoint (see :func:`sentence_pooling`).
        host: the address to bind (``127.0.0.1``: this machine only).
        port: the port (0: any free port).
        ui: the explorer page at ``/`` and its ``/v1/explore`` endpoints.
        explore: the explorer's corpus and reports (with ``ui`` only).
        explore_model: a second model (bundled name or directory) the explorer shows beside
            the served one (with ``ui`` only).
        task_model: a question-answering model's directory (``train-task squad
            --save-model``) that ``/v1/answer`` answers with, beside the served model; its id
            in responses is the directory's name.
        task_max_length: the task model's pieces per row instead of its saved length (a
            fine-tuned BERT's; None: the saved one); ``load_qa_model``'s ``max_length``.
        task_precision: the task model's weight precision (``load_qa_model``'s ``precision``),
            apart from ``model.precision``: a lower precision changes the answers, a cost to
            weigh for the task model on its own.
        grace_period: seconds to finish in-flight work on SIGTERM or SIGINT.
        start_timeout: seconds to load and warm up the model(s) before giving up.
        header_timeout: seconds a client has to send a request's line and headers, from the
            connection's opening or the previous response's end (else the connection is closed).
        idle_timeout: seconds a kept-alive connection may wait, silent, for its next request.
        access_log: log each request's method, path and status (never its text).
        log_level: the least severe log messages shown.

    Raises:
        ValueError: an explorer setting without ``ui``, a task model setting without
            ``task_model``, a port outside 0..65535, a time that is not a positive number
            (``grace_period``: negative), an unknown log level.

    The server answers requests whose ``Host`` is a loopback name, ``host`` or one of
    ``server.allowed_hosts``.
    """

    model: ModelSpec = field(default_factory=lambda: ModelSpec(threads=None))
    server: ServerSettings = field(default_factory=ServerSettings)
    host: str = "127.0.0.1"
    port: int = 8080
    ui: bool = True
    explore: ExploreSettings = field(default_factory=ExploreSettings)
    explore_model: str | None = None
    task_model: str | None = None
    task_max_length: int | None = None
    task_precision: Precision = Precision.FP32
    grace_period: float = 30.0
    start_timeout: float = 300.0
    header_timeout: float = 10.0
    idle_timeout: float = 5.0
    access_log: bool = False
    log_level: LogLevel = LogLevel.INFO

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_level", LogLevel(self.log_level))
        explored = [option for option, value in (("--explore-corpus", self.explore.corpus),
                                                 ("--explore-model", self.explore_model),
                                                 ("--explore-report", self.explore.reports)) if value]
        if not self.ui and explored:
            raise ValueError(f"{explored[0]} is for the explorer page, which --no-ui turns off")
        if self.task_model:
            from contextvec.tasks.qa.saved import check_reading  # the tasks extra: with a task model only

            precision = check_reading(self.task_max_length, self.task_precision)
            object.__setattr__(self, "task_precision", precision)
        elif self.task_max_length is not None or self.task_precision != Precision.FP32:
            raise ValueError("--task-max-length and --task-precision are for --task-model, which is not "
                             "given")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, not {self.port}")
        if not self.start_timeout > 0 or not self.grace_period >= 0:
            raise ValueError(f"start_timeout must be > 0 and grace_period >= 0, not "
                             f"{self.start_timeout} and {self.grace_period}")
        for name in ("header_timeout", "idle_timeout"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite number of seconds above 0, not "
                                 f"{getattr(self, name)}")

    @property
    def unguarded(self) -> bool:
        """Listening beyond this machine without an API key."""
        return not _is_loopback(self.host) and not self.server.api_key


@dataclass(frozen=True)
class Started:
    """What :func:`serve` tells ``on_ready`` once it listens: the served model's id, the seconds
    loading and warming took, the base URL, whether the explorer page is at ``url/``, and the
    id of the question-answering model of ``/v1/answer`` (None: none)."""

    model_name: str
    seconds: float
    url: str
    explorer: bool
    task_model: str | None = None


@dataclass(frozen=True)
class Stopped:
    """How :func:`serve` ended: ``signal``, the name of the signal that stopped it (None: none)."""

    signal: str | None


def default_model_name(model: ModelSpec) -> str:
    """The id a served ``model`` gets in responses and ``/v1/models`` unless one is given: its
    directory's name (bilm-tf files: their folder's), else the bundled model's name."""
    if model.model:
        return Path(model.model).name or str(model.model)
    if model.options_file:
        return Path(model.options_file).parent.name or "bilm-tf"
    return DEFAULT_MODEL


def sentence_pooling(settings: ServerProcessSettings, encoder: Encoder) -> SentencePooling | None:
    """The model directory's declared sentence-transformers pooling, when ``/v1/embeddings``
    uses the model's own sentence vector (neither ``openai_layers`` nor ``openai_pool`` set) and
    the model has one (a BERT)."""
    server, model = settings.server, settings.model.model
    if server.openai_layers is not None or server.openai_pool is not None:
        return None
    if sentence_vectors(encoder) is None or not model or not Path(model).is_dir():
        return None
    try:
        return read_sentence_pooling(model)
    except SentencePipelineError as e:
        raise ValueError(f"{e}; pass --openai-layers top --openai-pool mean to serve the mean of "
                         "the top layer's word vectors instead") from None


def warm_up(encoder: Encoder) -> None:
    """Run a few batches so the first request is not slow (allocator, kernels, caches)."""
    sentences = [s.split() for s in WARMUP]
    for _ in range(2):
        for _ in encoder.embed_batches(sentences, len(sentences), None):
            pass


def bind(host: str, port: int) -> socket.socket:
    """A bound socket (listening starts when the app is ready, so early clients are refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot bind {host}:{port}: {e.strerror}") from None
    return sock


def serve(settings: ServerProcessSettings,
          on_ready: Callable[[Started], None] = lambda started: None) -> Stopped:
    """Serve ``settings.model`` over HTTP until SIGTERM or SIGINT, then finish the work in flight
    within the grace period. A process-wide call: it sets up ``logging`` at
    ``settings.log_level``, handles both signals and freezes the garbage collector's view of
    what was made before serving.

    Args:
        settings: what to serve, where, with which limits.
        on_ready: called once the model is loaded and warmed and the socket is bound, before
            the server accepts connections.

    Returns:
        The signal that stopped the server.

    Raises:
        RuntimeError: the model(s) not loaded and warmed within ``start_timeout``.
        ValueError: the address cannot be bound; a checkpoint's sentence pooling that cannot
            be served; ``openai_layers`` weights that do not fit the model.
    """
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    start = time.perf_counter()
    # Loading, warm-up and every forward on one thread: one OpenMP team (engine/worker.py).
    worker = WorkerThread()
    encoder, compare, task = _load_within(worker, settings)
    server_settings = dataclasses.replace(
        settings.server, openai_sentence=sentence_pooling(settings, encoder),
        allowed_hosts=(*settings.server.allowed_hosts, host_name(settings.host)))
    sock = bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    server: uvicorn.Server | None = None
    explore = settings.explore if settings.ui else None
    app = create_app(encoder, server_settings, is_stopping=lambda: bool(server and server.should_exit),
                     grace_period=settings.grace_period, worker=worker, explore=explore, compare=compare,
                     task=task)
    config = uvicorn.Config(app, log_level=settings.log_level.value, access_log=settings.access_log,
                            timeout_graceful_shutdown=int(settings.grace_period), lifespan="on",
                            http=header_deadline(settings.header_timeout),
                            timeout_keep_alive=settings.idle_timeout)
    server = uvicorn.Server(config)
    url = f"http://{host_name(host)}:{port}"
    on_ready(Started(server_settings.model_name, time.perf_counter() - start, url, explore is not None,
                     None if task is None else task.name))
    stopped_by: list[int] = []
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully; these
    # handlers receive it, so a SIGTERM ends the process with status 0, not -15.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stopped_by.append(signum))
    # Everything made so far (model, libraries, app) lives as long as the server: out of the
    # collector's view, a full collection no longer walks it (a walk stalls every request in
    # flight, which shows in the tail latency under load).
    gc.collect()
    gc.freeze()
    server.run(sockets=[sock])
    return Stopped(signal.Signals(stopped_by[0]).name if stopped_by else None)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _load_within(worker: WorkerThread, settings: ServerProcessSettings
                 ) -> tuple[Encoder, list[tuple[str, Encoder]], ServedTask | None]:
    """The model (and ``explore_model``, and ``task_model``), loaded and warmed up on ``worker``
    within ``start_timeout`` seconds (a load that hangs, on a stalled network disk say, ends the
    call instead of hanging it; the worker is a daemon thread, so the process can exit while
    it is stuck)."""

    def load_all() -> tuple[Encoder, list[tuple[str, Encoder]], ServedTask | None]:
        encoder = settings.model.load()
        warm_up(encoder)
        compare = []
        if settings.explore_model:
            other = load(settings.explore_model, device=settings.model.device)
            warm_up(other)
            compare.append((Path(settings.explore_model).name or settings.explore_model, other))
        task = None
        if settings.task_model:
            from contextvec.server.answer import ServedTask
            from contextvec.server.answer import warm_up as warm_up_task
            from contextvec.tasks.qa.saved import load_qa_model

            model = load_qa_model(settings.task_model, settings.model.device,
                                  max_length=settings.task_max_length, precision=settings.task_precision)
            warm_up_task(model)
            task = ServedTask(Path(settings.task_model).resolve().name, model)
        return encoder, compare, task

    try:
        return worker.submit(load_all).result(timeout=settings.start_timeout)
    except concurrent.futures.TimeoutError:
        raise RuntimeError(f"the model was not loaded and warmed up within {settings.start_timeout:g} s "
                           "(--start-timeout)") from None

