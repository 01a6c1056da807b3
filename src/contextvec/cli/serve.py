"""``contextvec serve``: serve a model's contextual vectors over HTTP (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import gc
import ipaddress
import logging
import math
import os
import signal
import socket
import sys
import time
from pathlib import Path

from contextvec.api import DEFAULT_MODEL
from contextvec.cli.common import (
    add_model_arguments,
    load_model,
    non_negative_float,
    positive_float,
    positive_int,
)
from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.encoder import BertEncoder
from contextvec.engine.worker import WorkerThread
from contextvec.extras import needs
from contextvec.io.sentence_transformers import (
    SentencePipelineError,
    SentencePooling,
    read_sentence_pooling,
)

HELP = "serve contextual vectors over HTTP (/v1/embed, OpenAI-compatible /v1/embeddings)"
WARMUP = ["The", "quick brown fox jumps over the lazy dog .",
          " ".join(["Contextual representations of every layer for every word ."] * 4)]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help=HELP, description=HELP)
    add_model_arguments(p)
    p.add_argument("--model-name", help="id in responses and /v1/models (default: the model's name)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_number, default=8080, help="port (0: any free port)")
    p.add_argument("--api-key", default=os.environ.get("CONTEXTVEC_API_KEY"),
                   help="require 'Authorization: Bearer KEY' (default: $CONTEXTVEC_API_KEY)")
    batching = p.add_argument_group("batching")
    batching.add_argument("--max-batch-tokens", type=positive_int, default=4096,
                          help="padded tokens (longest x sentences) per forward pass")
    batching.add_argument("--max-wait-ms", type=non_negative_float, default=5.0,
                          help="under load, the milliseconds the oldest request waits for partners at most")
    batching.add_argument("--no-batching", dest="batching", action="store_false",
                          help="one request per forward pass, for comparison (default: requests are batched)")
    batching.add_argument("--max-queue", type=positive_int, default=512,
                          help="queued requests before answering 429")
    limits = p.add_argument_group("limits")
    limits.add_argument("--request-timeout", type=positive_float, default=30.0,
                        help="seconds a request may take, queue included, before a 504")
    limits.add_argument("--max-sentences", type=positive_int, default=256,
                        help="sentences per request (more: 413)")
    limits.add_argument("--max-sentence-tokens", type=positive_int, default=512,
                        help="tokens per sentence (more: 413)")
    limits.add_argument("--max-body-bytes", type=positive_int, default=4 * 1024 * 1024,
                        help="request body bytes (more: 413; default: 4 MiB)")
    limits.add_argument("--grace-period", type=non_negative_float, default=30.0,
                        help="seconds to finish in-flight work on SIGTERM/SIGINT")
    limits.add_argument("--start-timeout", type=positive_float, default=300.0,
                        help="seconds to load and warm up the model before giving up")
    p.add_argument("--tokenizer", choices=("whitespace", "moses"), default="whitespace",
                   help="how string sentences are split unless a request says")
    openai = p.add_argument_group(
        "/v1/embeddings (sentence vectors)",
        "By default the model's own sentence vector: a sentence-transformers checkpoint's declared "
        "pooling and normalisation; another BERT: the mean of its top layer over the word pieces; "
        "ELMo and CoVe: the mean over the words of the average of all layers. --openai-layers or "
        "--openai-pool pool the words' vectors of /v1/embed instead.")
    openai.add_argument("--openai-layers", type=openai_layers, default=None,
                        help="top, average or comma-separated scalar-mix weights, one per layer "
                             "(default: the model's own; with --openai-pool: top for BERT, else average)")
    openai.add_argument("--openai-gamma", type=positive_float, default=1.0, help="scalar-mix gamma")
    openai.add_argument("--openai-pool", choices=("mean", "max", "first"), default=None,
                        help="pooling over the words (default: the model's own; with --openai-layers: mean)")
    openai.add_argument("--openai-normalize", action="store_true",
                        help="unit-length vectors (a sentence-transformers model that declares it is always)")
    openai.add_argument("--openai-max-inputs", type=positive_int, default=2048,
                        help="texts per request (as OpenAI; more: 413)")
    explore = p.add_argument_group(
        "explorer page (at /)",
        "A page that shows what the layers make of a word: its occurrences compared layer by "
        "layer, its nearest contexts in a corpus, two models side by side, learned mixes and probe "
        "scores (docs/explorer.md).")
    explore.add_argument("--no-ui", action="store_true",
                         help="no page and no /v1/explore endpoints (the API alone)")
    explore.add_argument("--explore-corpus", metavar="FILE",
                         help="text file, one sentence a line, whose contexts the page searches "
                              "(embedded at start-up and cached; default: a bundled sample)")
    explore.add_argument("--explore-model", metavar="MODEL",
                         help="a second model (bundled name or directory) shown beside the served one")
    explore.add_argument("--explore-report", metavar="PATH", action="append", default=[],
                         help="a saved task model directory, or a train-task, probe pos, probe wsd or "
                              "experiment results file, to chart (repeatable)")
    p.add_argument("--access-log", action="store_true",
                   help="log each request's method, path and status (never its text)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="the least severe server log messages shown")
    p.set_defaults(run=run)


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {value}")
    return value


MIX_BOUND = 1e30
"""The largest scalar-mix weight or gamma the server takes (mixed vectors stay finite in float32)."""


def openai_layers(text: str) -> str | tuple[float, ...]:
    """``top``, ``average`` or comma-separated finite numbers (an argparse type)."""
    if text in ("top", "average"):
        return text
    wanted = "top, average or comma-separated finite numbers (one scalar-mix weight per layer)"
    try:
        weights = tuple(float(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
    if not all(math.isfinite(w) for w in weights):
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
    if not all(abs(w) <= MIX_BOUND for w in weights):
        raise argparse.ArgumentTypeError(f"expected weights from -1e30 to 1e30, got {text!r}")
    return weights


def sentence_pooling(args: argparse.Namespace, encoder: Encoder) -> SentencePooling | None:
    """A BERT model directory's declared sentence-transformers pooling, when /v1/embeddings uses
    the model's own sentence vector (neither --openai-layers nor --openai-pool given)."""
    if args.openai_layers is not None or args.openai_pool is not None:
        return None
    if not isinstance(encoder, BertEncoder) or not args.model or not Path(args.model).is_dir():
        return None
    try:
        return read_sentence_pooling(args.model)
    except SentencePipelineError as e:
        raise ValueError(f"{e}; pass --openai-layers top --openai-pool mean to serve the mean of "
                         "the top layer's word vectors instead") from None


def _model_name(args: argparse.Namespace) -> str:
    if args.model_name:
        return args.model_name
    if args.model:
        return Path(args.model).name or str(args.model)
    if args.options_file:
        return Path(args.options_file).parent.name or "bilm-tf"
    return DEFAULT_MODEL


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


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _load_within(worker: WorkerThread, args: argparse.Namespace) -> tuple[Encoder, list[tuple[str, Encoder]]]:
    """The model (and ``--explore-model``'s), loaded and warmed up on ``worker`` within
    ``--start-timeout`` seconds (a load that hangs, on a stalled network disk say, ends the
    command instead of hanging it; the worker is a daemon thread, so the process can exit while
    it is stuck)."""

    def load() -> tuple[Encoder, list[tuple[str, Encoder]]]:
        import contextvec

        encoder = load_model(args)
        warm_up(encoder)
        compare = []
        if args.explore_model:
            other = contextvec.load(args.explore_model, device=args.device)
            warm_up(other)
            compare.append((Path(args.explore_model).name or args.explore_model, other))
        return encoder, compare

    try:
        return worker.submit(load).result(timeout=args.start_timeout)
    except concurrent.futures.TimeoutError:
        raise RuntimeError(f"the model was not loaded and warmed up within {args.start_timeout:g} s "
                           "(--start-timeout)") from None


def run(args: argparse.Namespace) -> None:
    with needs("server"):
        import uvicorn

    from contextvec.server.app import create_app
    from contextvec.server.explore import ExploreSettings
    from contextvec.server.settings import ServerSettings
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ServerSettings(
        model_name=_model_name(args), api_key=args.api_key or None,
        max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms,
        batching=args.batching, max_queue=args.max_queue, request_timeout=args.request_timeout,
        max_sentences=args.max_sentences, max_sentence_tokens=args.max_sentence_tokens,
        max_body_bytes=args.max_body_bytes, tokenizer=args.tokenizer,
        openai_layers=args.openai_layers, openai_gamma=args.openai_gamma,
        openai_pool=args.openai_pool, openai_normalize=args.openai_normalize,
        openai_max_inputs=args.openai_max_inputs,
    )
    explored = [o for o, v in (("--explore-corpus", args.explore_corpus),
                               ("--explore-model", args.explore_model),
                               ("--explore-report", args.explore_report)) if v]
    if args.no_ui and explored:
        raise ValueError(f"{explored[0]} is for the explorer page, which --no-ui turns off")
    explore = None if args.no_ui else ExploreSettings(args.explore_corpus, tuple(args.explore_report))
    if not _is_loopback(args.host) and not settings.api_key:
        print(f"contextvec serve: warning: listening on {args.host} without --api-key",
              file=sys.stderr)
    start = time.perf_counter()
    # Loading, warm-up and every forward on one thread: one OpenMP team (engine/worker.py).
    worker = WorkerThread()
    encoder, compare = _load_within(worker, args)
    settings = dataclasses.replace(settings, openai_sentence=sentence_pooling(args, encoder))
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    server: uvicorn.Server | None = None
    app = create_app(encoder, settings, is_stopping=lambda: bool(server and server.should_exit),
                     grace_period=args.grace_period, worker=worker, explore=explore, compare=compare)
    config = uvicorn.Config(app, log_level=args.log_level, access_log=args.access_log,
                            timeout_graceful_shutdown=int(args.grace_period), lifespan="on")
    server = uvicorn.Server(config)
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    page = "" if explore is None else f" (explorer page: {url}/)"
    print(f"contextvec serve: {settings.model_name} loaded and warmed in "
          f"{time.perf_counter() - start:.1f} s; serving on {url}{page}", file=sys.stderr, flush=True)
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
    reason = f" ({signal.Signals(stopped_by[0]).name})" if stopped_by else ""
    print(f"contextvec serve: stopped{reason}", file=sys.stderr, flush=True)

