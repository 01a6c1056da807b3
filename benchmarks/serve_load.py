"""Load test of ``contextvec serve`` on loopback: batching on vs off, a lone request, a soak.

Run on an idle machine (the server and the load generator share it):

    python benchmarks/serve_load.py                                # everything, bundled model
    python benchmarks/serve_load.py --only throughput --requests 100 --clients 1 16
    python benchmarks/serve_load.py --only soak --precision bf16   # the server's weights in bf16
    python benchmarks/serve_load.py --only compare --model PATH/TO/MiniLM \
        --compare-url http://127.0.0.1:7997/embeddings

Parts (``--only``):

- ``lone``: one client, one sentence at a time: median latency over HTTP vs a direct
  ``Encoder.embed`` of the same sentence in this process (same torch threads), with the
  ``/health`` round trip (client + HTTP floor; also after the server idled as long as a forward)
  and the server's own forward time beside them.
- ``overhead``: CPU time per request of the server process and of this client (``/health``,
  an empty sentence, the lone sentence) beside a direct ``Encoder.embed``'s: robust to other load.
- ``stack``: a lone request to the server with its forward replaced by a busy wait as long as
  the direct call (``serve_stub.py``): the server's own cost at a forward's duration.
- ``throughput``: closed-loop clients (each sends its next request when the last one is
  answered) at 1, 4, 16, 64 concurrent clients, with dynamic batching on and off
  (``--no-batching``: one request = one forward), both servers up at once and run in turn
  ``--rounds`` times per level (medians). Sentences/s, tokens/s, p50/p99 latency.
- ``soak``: ``--soak-requests`` (10,000) requests at 16 clients, 5% malformed (bad JSON, wrong
  types, unknown layers, over-long sentences): crashes, hung requests (no answer within 30 s),
  5xx count and the server's RSS over time (growth after the first 10% = warm-up).
- ``compare``: ``/v1/embeddings`` at 16 clients against this server (``--model``, e.g. the
  MiniLM checkpoint) and against another OpenAI-compatible server at ``--compare-url`` (e.g.
  Infinity serving the same checkpoint), same requests. This server answers with the mean of
  its top layer over the words (``--openai-layers top``), or with ``--compare-own-pooling`` the
  checkpoint's own sentence vector, which is what Infinity computes.

Sentences: WikiText-2 valid sentences of 3-64 tokens (``../shared/data``), else the bundled
demo sentences; one sentence per request unless ``--sentences-per-request``. Every level runs
at most ``--requests`` requests and ``--seconds`` seconds. Results: a table, and JSON with
``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import torch

import contextvec
from contextvec.encoders.precision import PRECISIONS
from contextvec.io.atomic import atomic_path
from contextvec.server.process import ServerProcess
from contextvec.text.tokenize import split_sentences

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora"
WIKITEXT = CORPORA / "wikitext-2" / "wiki.valid.tokens.gz"
MALFORMED = [b'{"sentences": ["unterminated', b'{"sentences": [1, 2]}', b'{"sentences": []}',
             b'{"sentences": ["a"], "layers": [7]}', b'{"sentences": ["' + b"w " * 600 + b'"]}']


def load_sentences(limit: int = 4000, seed: int = 0) -> list[str]:
    if WIKITEXT.is_file():
        with gzip.open(WIKITEXT, "rt", encoding="utf-8") as f:
            lines = [s for line in f if line.strip() and not line.startswith(" =")
                     for s in split_sentences(line)]
        sentences = [s for s in lines if 3 <= len(s.split()) <= 64]
    else:
        text = (resources.files("contextvec") / "data" / "demo_contexts.txt").read_text(encoding="utf-8")
        sentences = [s for s in text.splitlines() if s.strip()]
    random.Random(seed).shuffle(sentences)
    return sentences[:limit]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Load:
    """Closed-loop clients, one keep-alive connection each, sharing a request counter."""

    def __init__(self, url: str, path: str, bodies: list[tuple[bytes, int, int]], headers: dict,
                 timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, path
        self.bodies, self.headers, self.timeout = bodies, headers, timeout
        self.lock = threading.Lock()

    def run(self, clients: int, requests: int, seconds: float) -> dict:
        self.next, self.stop_at = 0, time.monotonic() + seconds
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.sentences = self.tokens = self.hung = 0
        start = time.perf_counter()
        threads = [threading.Thread(target=self._client, args=(requests,)) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        return {"clients": clients, "requests": len(self.latencies), "seconds": round(wall, 3),
                "sentences_per_s": round(self.sentences / wall, 1),
                "tokens_per_s": round(self.tokens / wall, 1),
                "p50_ms": round(1000 * percentile(self.latencies, 0.5), 2),
                "p99_ms": round(1000 * percentile(self.latencies, 0.99), 2),
                "statuses": dict(self.statuses), "hung": self.hung}

    def _client(self, requests: int) -> None:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        while True:
            with self.lock:
                if self.next >= requests or time.monotonic() > self.stop_at:
                    break
                body, n_sentences, tokens = self.bodies[self.next % len(self.bodies)]
                self.next += 1
            sent = time.perf_counter()
            try:
                connection.request("POST", self.path, body, self.headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            except TimeoutError:
                status = "hung"
            except (OSError, http.client.HTTPException):
                status = "connection error"
            elapsed = time.perf_counter() - sent
            if status in ("hung", "connection error"):
                connection.close()
                connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            with self.lock:
                self.latencies.append(elapsed)
                self.statuses[status] += 1
                self.hung += status == "hung"
                if status == 200:
                    self.sentences += n_sentences
                    self.tokens += tokens
        connection.close()


def embed_bodies(sentences: list[str], per_request: int, layers: str = "all") -> list[tuple[bytes, int, int]]:
    out = []
    for i in range(0, len(sentences) - per_request + 1, per_request):
        group = sentences[i:i + per_request]
        body = json.dumps({"sentences": group, "layers": layers, "encoding": "base64"}).encode()
        out.append((body, len(group), sum(len(s.split()) for s in group)))
    return out


def openai_bodies(sentences: list[str], model: str) -> list[tuple[bytes, int, int]]:
    return [(json.dumps({"input": [s], "model": model}).encode(), 1, len(s.split())) for s in sentences]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_args(args: argparse.Namespace, *extra: str) -> list[str]:
    model = ["--model", args.model] if args.model else []
    threads = ["--threads", str(args.threads)] if args.threads else []
    return [*model, *threads, "--precision", args.precision, "--max-queue", "4096", *extra]


HEADERS = {"Content-Type": "application/json"}


def lone_sentence(sentences: list[str], tokens: int) -> str:
    """The sentence nearest ``tokens`` tokens among the first 200 (25: a typical length)."""
    return min(sentences[:200], key=lambda s: abs(len(s.split()) - tokens))


def round_trip(connection: http.client.HTTPConnection, method: str, path: str,
               body: bytes | None = None) -> float:
    """Seconds for one request and its whole answer (which must be a 200)."""
    start = time.perf_counter()
    connection.request(method, path, body, HEADERS)
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    return time.perf_counter() - start


def direct_call(encoder: contextvec.Encoder, sentence: str) -> float:
    """Seconds for one ``encoder.embed([sentence])``."""
    start = time.perf_counter()
    encoder.embed([sentence])
    return time.perf_counter() - start


def lone(args, sentences) -> dict:
    """Direct ``Encoder.embed`` and a request to an idle server, interleaved (same noise):
    one of each in turn, or ``--lone-block`` of each in turn (each side then runs with its own
    model's weights in the CPU caches, as a client repeatedly asking an idle server does).

    Also, to tell where a served request's extra time goes: a ``GET /health`` round trip (the
    client, HTTP on loopback and the server's framework: the floor of any request), the same
    round trip after the server has been idle for the direct call's median time (what a request
    costs beyond its forward when it wakes an idle server), the same two for a bare ASGI app on
    uvicorn (:func:`asgi_floor`: the machine's floor for any Python server), and the server's
    own forward time (mean of ``contextvec_batch_seconds`` over the measured requests).
    """
    sentence = lone_sentence(sentences, args.lone_tokens)
    if args.threads:
        torch.set_num_threads(args.threads)
    encoder = contextvec.load(args.model, precision=args.precision)
    body = embed_bodies([sentence], 1)[0][0]
    direct, served, health = [], [], []
    with ServerProcess(server_args(args)) as server:
        parts = urlsplit(server.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        block = args.lone_block
        for _ in range(5):  # warm-up
            direct_call(encoder, sentence)
            round_trip(connection, "POST", "/v1/embed", body)
            round_trip(connection, "GET", "/health")
        forwards = batch_seconds(connection)
        for _ in range(-(-args.lone_repeats // block)):
            direct += [direct_call(encoder, sentence) for _ in range(block)]
            served += [round_trip(connection, "POST", "/v1/embed", body) for _ in range(block)]
            health += [round_trip(connection, "GET", "/health") for _ in range(block)]
        total, count = (a - b for a, b in zip(batch_seconds(connection), forwards, strict=True))
        idle = statistics.median(direct)
        after_idle = timed_after_idle(lambda: round_trip(connection, "GET", "/health"), idle,
                                      args.lone_repeats)
        connection.close()
    d, s = statistics.median(direct) * 1000, statistics.median(served) * 1000
    floor = asgi_floor(idle, args.lone_repeats)
    return {"part": "lone", "tokens": len(sentence.split()), "block": block, "direct_ms": round(d, 2),
            "server_ms": round(s, 2), "ratio": round(s / d, 3),
            "server_forward_ms": round(1000 * total / count, 2),
            "health_ms": round(statistics.median(health) * 1000, 3),
            "health_after_idle_ms": round(statistics.median(after_idle) * 1000, 3), **floor}


def timed_after_idle(timed: Callable[[], float], idle_s: float, repeats: int) -> list[float]:
    """``timed()`` ``repeats`` times, each after ``idle_s`` seconds of leaving the server idle."""
    times = []
    for _ in range(repeats):
        time.sleep(idle_s)
        times.append(timed())
    return times


def stack(args, sentences) -> dict:
    """A lone request to a server whose forward is a busy wait as long as a direct
    ``Encoder.embed`` of the sentence (``serve_stub.py``): what the server itself costs a request
    that waits a forward's time, with no model work, beside the direct call's median."""
    sentence = lone_sentence(sentences, args.lone_tokens)
    if args.threads:
        torch.set_num_threads(args.threads)
    encoder = contextvec.load(args.model, precision=args.precision)
    for _ in range(5):
        direct_call(encoder, sentence)
    forward_s = statistics.median(direct_call(encoder, sentence) for _ in range(args.lone_repeats))
    del encoder
    body = embed_bodies([sentence], 1)[0][0]
    server = ServerProcess(server_args(args))
    server.command = [sys.executable, str(Path(__file__).with_name("serve_stub.py")), str(forward_s),
                      "serve", *server.args]
    with server:
        parts = urlsplit(server.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        for _ in range(5):
            round_trip(connection, "POST", "/v1/embed", body)
        served = [round_trip(connection, "POST", "/v1/embed", body) for _ in range(args.lone_repeats)]
        connection.close()
    s = statistics.median(served)
    return {"part": "stack", "tokens": len(sentence.split()), "direct_ms": round(forward_s * 1000, 2),
            "stub_server_ms": round(s * 1000, 2), "server_cost_ms": round((s - forward_s) * 1000, 3),
            "server_cost_fraction": round(s / forward_s - 1, 3)}


HELLO_ASGI = """
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"status": "ok"}'})
"""


def asgi_floor(idle_s: float, repeats: int) -> dict:
    """Median round trip to a bare ASGI app on uvicorn (the same stack, no contextvec) sent
    back to back and after ``idle_s`` of idleness: what any Python server on this machine pays
    for waking up, beside which the lone request's extra time is read."""
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as probe:
        Path(tmp, "hello_asgi.py").write_text(HELLO_ASGI, encoding="utf-8")
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "hello_asgi:app", "--app-dir", tmp,
                                   "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"])
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    connection.request("GET", "/")
                    connection.getresponse().read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

            back_to_back = [round_trip(connection, "GET", "/") for _ in range(repeats)]
            after_idle = timed_after_idle(lambda: round_trip(connection, "GET", "/"), idle_s, repeats)
            connection.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return {"asgi_hello_ms": round(statistics.median(back_to_back) * 1000, 3),
            "asgi_hello_after_idle_ms": round(statistics.median(after_idle) * 1000, 3)}


def overhead(args, sentences) -> dict:
    """CPU time per request (less sensitive than wall time to other load on the machine): the
    server process's (all its threads, from /proc/PID/task/*/schedstat) and this client's, for
    ``GET /health``, ``POST /v1/embed`` of one empty sentence (all but the forward) and of the
    lone benchmark's sentence; and a direct ``Encoder.embed`` of it in this process, one before
    each request of it."""
    sentence = lone_sentence(sentences, args.lone_tokens)
    if args.threads:
        torch.set_num_threads(args.threads)
    encoder = contextvec.load(args.model, precision=args.precision)
    cases = [("health", "GET", "/health", None, 10 * args.lone_repeats),
             ("empty_embed", "POST", "/v1/embed", embed_bodies([""], 1)[0][0], 10 * args.lone_repeats),
             ("embed", "POST", "/v1/embed", embed_bodies([sentence], 1)[0][0], args.lone_repeats)]
    row: dict = {"part": "overhead", "tokens": len(sentence.split())}
    direct_ns = 0
    with ServerProcess(server_args(args)) as server:
        pid, parts = server.process.pid, urlsplit(server.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        for name, method, path, body, n in cases:
            server_ns = client_ns = 0
            for i in range(n + 20):  # 20 to warm up
                if name == "embed":  # a direct call before each request: the same load on both
                    start = time.process_time_ns()
                    encoder.embed([sentence])
                    direct_ns += (time.process_time_ns() - start) * (i >= 20)
                server_start = cpu_ns(pid)
                client_start = time.process_time_ns()  # not counting the reads of /proc
                connection.request(method, path, body, HEADERS)
                connection.getresponse().read()
                client_end = time.process_time_ns()
                if i >= 20:
                    server_ns += cpu_ns(pid) - server_start
                    client_ns += client_end - client_start
            row[f"{name}_server_cpu_us"] = round(server_ns / n / 1000, 1)
            row[f"{name}_client_cpu_us"] = round(client_ns / n / 1000, 1)
        connection.close()
    row["direct_cpu_us"] = round(direct_ns / args.lone_repeats / 1000, 1)
    return row


def cpu_ns(pid: int) -> int:
    """CPU time of all of a process's threads so far (ns), from the scheduler's statistics."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total


def batch_seconds(connection: http.client.HTTPConnection) -> tuple[float, float]:
    """(sum, count) of the server's ``contextvec_batch_seconds`` histogram."""
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines()
                  if line.startswith("contextvec_batch_seconds_"))
    return float(values["contextvec_batch_seconds_sum"]), float(values["contextvec_batch_seconds_count"])


def throughput(args, sentences) -> list[dict]:
    """Both servers (batching on and off) up at once; at each client count, ``--rounds`` runs
    of each, alternating, so that drift in the machine's speed falls on both alike. A row per
    server and level: medians over the rounds (``rounds``: each run's sentences/s)."""
    rows = []
    bodies = embed_bodies(sentences, args.sentences_per_request)
    with ServerProcess(server_args(args)) as on, ServerProcess(server_args(args, "--no-batching")) as off:
        loads = {True: Load(on.url, "/v1/embed", bodies, HEADERS),
                 False: Load(off.url, "/v1/embed", bodies, HEADERS)}
        for load in loads.values():
            load.run(4, 40, 10)  # warm-up
        for clients in args.clients:
            runs: dict[bool, list[dict]] = {True: [], False: []}
            for r in range(args.rounds):
                for batching in ((True, False) if r % 2 == 0 else (False, True)):
                    runs[batching].append(loads[batching].run(clients, args.requests, args.seconds))
            for batching, results in runs.items():
                statuses: Counter = Counter()
                for result in results:
                    statuses.update(result["statuses"])
                row = {"part": "throughput", "batching": batching, "clients": clients,
                       **{key: statistics.median(result[key] for result in results)
                          for key in ("requests", "seconds", "sentences_per_s", "tokens_per_s",
                                      "p50_ms", "p99_ms")},
                       "statuses": dict(statuses), "hung": sum(result["hung"] for result in results),
                       "rounds": [result["sentences_per_s"] for result in results]}
                rows.append(row)
                print(json.dumps(row), flush=True)
            print(f"{clients} clients: batching on / off = "
                  f"{rows[-2]['sentences_per_s'] / rows[-1]['sentences_per_s']:.2f}x", flush=True)
    return rows


def soak(args, sentences) -> dict:
    rng = random.Random(1)
    good = embed_bodies(sentences, args.sentences_per_request)
    bodies = [(rng.choice(MALFORMED), 0, 0) if rng.random() < 0.05 else good[i % len(good)]
              for i in range(args.soak_requests)]
    with ServerProcess(server_args(args)) as server:
        pid = server.process.pid
        load = Load(server.url, "/v1/embed", bodies, HEADERS)
        samples: list[tuple[float, float]] = []
        done = threading.Event()

        def sample() -> None:
            start = time.monotonic()
            while not done.wait(1.0):
                samples.append((round(time.monotonic() - start, 1), round(rss_mib(pid), 1)))

        sampler = threading.Thread(target=sample)
        sampler.start()
        result = load.run(16, args.soak_requests, args.soak_seconds)
        done.set()
        sampler.join()
        crashed = server.process.poll() is not None
    warm = samples[max(0, len(samples) // 10 - 1)][1] if samples else float("nan")
    final = samples[-1][1] if samples else float("nan")
    five_xx = sum(n for s, n in result["statuses"].items() if isinstance(s, int) and s >= 500)
    return {"part": "soak", **result, "crashed": crashed, "5xx": five_xx,
            "rss_after_warmup_mib": warm, "rss_final_mib": final,
            "rss_growth": round(final / warm - 1, 4) if samples else None, "rss_samples": samples}


def compare(args, sentences) -> list[dict]:
    rows = []
    bodies = openai_bodies(sentences, args.compare_model)
    targets = [("contextvec", None)] + ([("other", args.compare_url)] if args.compare_url else [])
    for name, url in targets:
        if url is None:
            pooling = () if args.compare_own_pooling else ("--openai-layers", "top")
            with ServerProcess(server_args(args, *pooling)) as server:
                load = Load(server.url, "/v1/embeddings", bodies, HEADERS)
                load.run(4, 40, 10)
                row = load.run(16, args.requests, args.seconds)
        else:
            load = Load(url, urlsplit(url).path or "/v1/embeddings", bodies, HEADERS)
            load.run(4, 40, 10)
            row = load.run(16, args.requests, args.seconds)
        rows.append({"part": "compare", "server": name, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="model path (default: the bundled model)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="the server's and the direct calls' weight precision (docs/precision.md)")
    p.add_argument("--threads", type=int,
                   help="torch threads of the server and of the direct calls (default: torch's, as "
                        "contextvec serve and a script get them)")
    p.add_argument("--only", nargs="+",
                   choices=("lone", "overhead", "stack", "throughput", "soak", "compare"),
                   default=["lone", "throughput", "soak"])
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--requests", type=int, default=1000, help="requests per level at most (1000)")
    p.add_argument("--seconds", type=float, default=60.0, help="seconds per level at most (60)")
    p.add_argument("--sentences-per-request", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1,
                   help="throughput: runs per server and level, alternating on and off (1)")
    p.add_argument("--lone-repeats", type=int, default=100)
    p.add_argument("--lone-block", type=int, default=1,
                   help="lone: direct calls and requests alternate in blocks of this many (1)")
    p.add_argument("--lone-tokens", type=int, default=25,
                   help="lone, overhead, stack: the sentence nearest this many tokens (25)")
    p.add_argument("--soak-requests", type=int, default=10_000)
    p.add_argument("--soak-seconds", type=float, default=1800.0)
    p.add_argument("--compare-url", help="the embeddings URL of another OpenAI-compatible server, e.g. "
                   "Infinity's http://127.0.0.1:7997/embeddings")
    p.add_argument("--compare-model", default="all-MiniLM-L6-v2", help="model field sent to it")
    p.add_argument("--compare-own-pooling", action="store_true",
                   help="compare: serve the checkpoint's own sentence vector (sentence-transformers' "
                        "pooling over the pieces, the work Infinity does) instead of --openai-layers top")
    p.add_argument("--out", help="write all results as JSON here")
    args = p.parse_args()
    sentences = load_sentences()
    print(f"{len(sentences)} sentences, mean {statistics.mean(len(s.split()) for s in sentences):.1f} tokens",
          flush=True)
    results: list[dict] = []
    if "lone" in args.only:
        results.append(lone(args, sentences))
        print(json.dumps(results[-1]), flush=True)
    if "overhead" in args.only:
        results.append(overhead(args, sentences))
        print(json.dumps(results[-1]), flush=True)
    if "stack" in args.only:
        results.append(stack(args, sentences))
        print(json.dumps(results[-1]), flush=True)
    if "throughput" in args.only:
        results += throughput(args, sentences)
    if "soak" in args.only:
        results.append(soak(args, sentences))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "rss_samples"}), flush=True)
    if "compare" in args.only:
        results += compare(args, sentences)
    print_table(results)
    if args.out:
        with atomic_path(args.out) as tmp:
            tmp.write_text(json.dumps(results, indent=1), encoding="utf-8")


def print_table(results: list[dict]) -> None:
    rows = [r for r in results if r["part"] in ("throughput", "compare")]
    if rows:
        print("\n| server | batching | clients | sentences/s | tokens/s | p50 ms | p99 ms | statuses |")
        print("|---|---|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r.get('server', 'contextvec')} | {'on' if r.get('batching', True) else 'off'} | "
                  f"{r['clients']} | {r['sentences_per_s']} | {r['tokens_per_s']} | {r['p50_ms']} | "
                  f"{r['p99_ms']} | {r['statuses']} |")


if __name__ == "__main__":
    main()
