"""Latency of ``POST /v1/answer``: one client asking one question at a time on a ~300-word context.

Run on an idle machine, from the repository root (the server and the client share it):

    PYTHONPATH=src python benchmarks/answer_latency.py --task-model PATH/TO/QA_MODEL
    PYTHONPATH=src python benchmarks/answer_latency.py --task-model DIR --threads 2 --requests 200
    PYTHONPATH=src python benchmarks/answer_latency.py --task-model DIR --max-length 512 --precision int8

Starts ``contextvec serve --task-model DIR`` on 127.0.0.1 (a free port), then sends
``--requests`` questions one after another over one kept-alive connection, after ``--warmup``
unmeasured ones, and measures each request's round trip (send to last byte). The contexts are
SQuAD v1.1 dev articles (``../shared/data/tasks/squad-v1.1``): consecutive paragraphs of one
article joined until they hold ``--words`` words, then cut to that many words, each asked a
question of its first paragraph; the requests cycle through them. For the floor, the same
questions are then answered in this process by the loaded model (``QAModel.answer``, same
torch threads): what the server adds is the difference. ``--max-length`` and ``--precision`` are
how the model reads, in both (``serve --task-max-length/--task-precision``, ``load_qa_model``'s
keywords); the served embedding model stays fp32.

Prints one JSON line: the CPU and its vector flags, torch threads, the row length (null: the
saved one) and precision, the contexts' words and characters, p50/p95/mean latency over HTTP and
p50 of the direct call, in milliseconds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import torch

from contextvec.cli.common import usable_cpus
from contextvec.encoders.cpu import cpu_flags
from contextvec.encoders.precision import PRECISIONS
from contextvec.server.process import ServerProcess
from contextvec.tasks.qa.saved import load_qa_model
from contextvec.tasks.qa.squad import SquadData, read_squad

SQUAD_DEV = (Path(__file__).resolve().parents[2] / "shared" / "data" / "tasks" / "squad-v1.1"
             / "dev-v1.1-even-articles.json.gz")
FLAGS_SHOWN = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown"


def contexts(data: SquadData, words: int, most: int) -> list[tuple[str, str]]:
    """(question, context): per article, its paragraphs from the first joined until they hold
    ``words`` words, cut to that many; the question is the first one asked on the first
    paragraph (its answer lies inside the context whatever the cut)."""
    by_article: dict[int, list] = {}
    for question, article in zip(data.questions, data.articles, strict=True):
        by_article.setdefault(article, []).append(question)
    asked = []
    for questions in by_article.values():
        paragraphs = list(dict.fromkeys(q.context for q in questions))
        joined = ""
        for k in range(1, len(paragraphs) + 1):
            joined = "\n\n".join(paragraphs[:k])
            if len(joined.split()) >= words:
                break
        if len(joined.split()) < words:
            continue  # too short an article
        context = re.match(rf"\s*(?:\S+\s+){{{words - 1}}}\S+", joined).group(0)
        first = questions[0]
        if first.answers and first.answers[0].end > len(context):
            continue  # the first paragraph alone is longer than the cut
        asked.append((first.question, context))
        if len(asked) == most:
            break
    if not asked:
        raise SystemExit(f"no article of {data.source} has {words} words")
    return asked


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task-model", required=True, help="a model saved by train-task squad --save-model")
    parser.add_argument("--model", help="the served embedding model (default: the bundled one)")
    parser.add_argument("--threads", type=int, default=usable_cpus(), help="torch threads of the server "
                        "and of the direct call (default: the usable CPUs)")
    parser.add_argument("--words", type=int, default=300, help="words per context")
    parser.add_argument("--contexts", type=int, default=20, help="distinct contexts asked in turn")
    parser.add_argument("--requests", type=int, default=200, help="measured requests")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured requests first")
    parser.add_argument("--squad", default=str(SQUAD_DEV), help="SQuAD v1.1 JSON (plain or .gz)")
    parser.add_argument("--max-length", type=int, help="pieces per row (default: the saved length)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="the model's weight precision")
    args = parser.parse_args()

    asked = contexts(read_squad(args.squad), args.words, args.contexts)
    bodies = [json.dumps({"question": q, "context": c}).encode() for q, c in asked]
    serve_args = ["--task-model", args.task_model, "--threads", str(args.threads), "--no-ui",
                  "--task-precision", args.precision]
    if args.max_length:
        serve_args += ["--task-max-length", str(args.max_length)]
    if args.model:
        serve_args += ["--model", args.model]
    latencies = []
    with ServerProcess(serve_args, env={"OMP_NUM_THREADS": str(args.threads)}, start_timeout=300) as server:
        url = urlsplit(server.url)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        headers = {"Content-Type": "application/json"}
        for i in range(args.warmup + args.requests):
            body = bodies[i % len(bodies)]
            started = time.perf_counter()
            connection.request("POST", "/v1/answer", body, headers)
            response = connection.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise SystemExit(f"/v1/answer answered {response.status}: {payload[:300]!r}")
            if i >= args.warmup:
                latencies.append(elapsed)
        connection.close()

    torch.set_num_threads(args.threads)
    model = load_qa_model(args.task_model, max_length=args.max_length, precision=args.precision)
    direct = []
    for i in range(args.warmup + args.requests):
        question, context = asked[i % len(asked)]
        started = time.perf_counter()
        model.answer(question, context)
        if i >= args.warmup:
            direct.append(time.perf_counter() - started)

    flags = cpu_flags()
    print(json.dumps({
        "cpu": cpu_name(), "flags": [f for f in FLAGS_SHOWN if f in flags], "threads": args.threads,
        "torch": torch.__version__, "task_model": args.task_model, "max_length": args.max_length,
        "precision": args.precision, "contexts": len(asked),
        "context_words": args.words, "context_chars_mean": round(statistics.mean(len(c) for _, c in asked)),
        "requests": args.requests, "warmup": args.warmup,
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p95_ms": round(1000 * percentile(latencies, 95), 2) if len(latencies) > 1 else None,
        "mean_ms": round(1000 * statistics.mean(latencies), 2),
        "direct_p50_ms": round(1000 * statistics.median(direct), 2),
    }))


if __name__ == "__main__":
    sys.exit(main())
