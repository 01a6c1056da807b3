"""``contextvec serve``: serve a model's contextual vectors over HTTP (FastAPI on uvicorn);
the job is :func:`contextvec.server.serve.serve`."""

from __future__ import annotations

import argparse
import math
import os
import sys

from contextvec.cli.common import (
    add_model_arguments,
    model_spec,
    non_negative_float,
    port_number,
    positive_float,
    positive_int,
)
from contextvec.cli.qa_options import add_reading_arguments
from contextvec.encoders.outputs import POOL_MODES
from contextvec.logs import LOG_LEVELS, LogLevel
from contextvec.text.tokenize import LINE_TOKENIZERS

HELP = "serve contextual vectors over HTTP (/v1/embed, OpenAI-compatible /v1/embeddings)"
DESCRIPTION = HELP + (", and with --task-model a saved question-answering model's answers "
                      "(/v1/answer)")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help=HELP, description=DESCRIPTION)
    add_model_arguments(p)
    p.add_argument("--model-name", help="id in responses and /v1/models (default: the model's name)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_number, default=8080, help="port (0: any free port)")
    p.add_argument("--api-key", default=os.environ.get("CONTEXTVEC_API_KEY"),
                   help="require 'Authorization: Bearer KEY' (default: $CONTEXTVEC_API_KEY)")
    p.add_argument("--allowed-hosts", type=host_list, default=(), metavar="NAMES",
                   help="comma-separated Host names taken besides 127.0.0.1, localhost, [::1] and "
                        "--host, e.g. embed.example.com,*.example.org ('*': any); others get 400")
    p.add_argument("--cors-origin", dest="cors_origins", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (https://app.example.com) whose pages may call the API "
                        "(repeatable; default: none)")
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
                        help="sentences per request (more: 422)")
    limits.add_argument("--max-sentence-tokens", type=positive_int, default=512,
                        help="tokens per sentence (more: 413; a token list: 422)")
    limits.add_argument("--max-body-bytes", type=positive_int, default=4 * 1024 * 1024,
                        help="request body bytes (more: 413; default: 4 MiB)")
    limits.add_argument("--grace-period", type=non_negative_float, default=30.0,
                        help="seconds to finish in-flight work on SIGTERM/SIGINT")
    limits.add_argument("--start-timeout", type=positive_float, default=300.0,
                        help="seconds to load and warm up the model before giving up")
    limits.add_argument("--header-timeout", type=positive_float, default=10.0,
                        help="seconds a client has to send a request's line and headers")
    limits.add_argument("--idle-timeout", type=positive_float, default=5.0,
                        help="seconds a kept-alive connection may wait silent for its next request")
    p.add_argument("--tokenizer", choices=LINE_TOKENIZERS, default="whitespace",
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
    openai.add_argument("--openai-pool", choices=POOL_MODES, default=None,
                        help="pooling over the words (default: the model's own; with --openai-layers: mean)")
    openai.add_argument("--openai-normalize", action="store_true",
                        help="unit-length vectors (a sentence-transformers model that declares it is always)")
    openai.add_argument("--openai-max-inputs", type=positive_int, default=2048,
                        help="texts per request (as OpenAI; more: 422)")
    answer = p.add_argument_group(
        "/v1/answer (question answering)",
        "A model saved by train-task squad --save-model, served beside the model above: its "
        "questions share the worker thread and the batching of the other endpoints. It runs on "
        "--device; --precision is the served model's, --task-precision the task model's.")
    answer.add_argument("--task-model", metavar="DIR",
                        help="a saved question-answering model's directory (default: none; /v1/answer "
                             "then answers 404)")
    add_reading_arguments(answer, prefix="task-")
    answer.add_argument("--max-context-chars", type=positive_int, default=20_000, metavar="N",
                        help="characters of a /v1/answer context (more: 422)")
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
    p.add_argument("--log-level", default=LogLevel.INFO.value, choices=LOG_LEVELS,
                   help="the least severe server log messages shown")
    p.set_defaults(run=run)


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


def host_list(text: str) -> tuple[str, ...]:
    """Comma-separated host names (an argparse type; ``ServerSettings`` checks each)."""
    return tuple(name.strip() for name in text.split(","))


def run(args: argparse.Namespace) -> None:
    from contextvec.engine import EngineSettings
    from contextvec.server.explore import ExploreSettings
    from contextvec.server.serve import ServerProcessSettings, Started, default_model_name, serve
    from contextvec.server.settings import ServerSettings

    spec = model_spec(args)
    server = ServerSettings(
        model_name=args.model_name or default_model_name(spec), api_key=args.api_key or None,
        engine=EngineSettings(max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms,
                              max_queue=args.max_queue, batching=args.batching),
        request_timeout=args.request_timeout,
        max_sentences=args.max_sentences, max_sentence_tokens=args.max_sentence_tokens,
        max_body_bytes=args.max_body_bytes, tokenizer=args.tokenizer,
        openai_layers=args.openai_layers, openai_gamma=args.openai_gamma,
        openai_pool=args.openai_pool, openai_normalize=args.openai_normalize,
        openai_max_inputs=args.openai_max_inputs, allowed_hosts=args.allowed_hosts,
        cors_origins=args.cors_origins, max_context_chars=args.max_context_chars,
    )
    settings = ServerProcessSettings(
        model=spec, server=server, host=args.host, port=args.port, ui=not args.no_ui,
        explore=ExploreSettings(args.explore_corpus, tuple(args.explore_report)),
        explore_model=args.explore_model, task_model=args.task_model, task_max_length=args.task_max_length,
        task_precision=args.task_precision or "fp32", grace_period=args.grace_period,
        start_timeout=args.start_timeout, header_timeout=args.header_timeout,
        idle_timeout=args.idle_timeout, access_log=args.access_log, log_level=args.log_level,
    )
    if settings.unguarded:
        print(f"contextvec serve: warning: listening on {args.host} without --api-key", file=sys.stderr)

    def ready(started: Started) -> None:
        page = f" (explorer page: {started.url}/)" if started.explorer else ""
        task = f" and {started.task_model} (/v1/answer)" if started.task_model else ""
        print(f"contextvec serve: {started.model_name}{task} loaded and warmed in {started.seconds:.1f} s; "
              f"serving on {started.url}{page}", file=sys.stderr, flush=True)

    stopped = serve(settings, on_ready=ready)
    reason = f" ({stopped.signal})" if stopped.signal else ""
    print(f"contextvec serve: stopped{reason}", file=sys.stderr, flush=True)
