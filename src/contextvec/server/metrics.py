"""Prometheus metrics of one server (its own registry, so several apps in one process do not clash)."""

from __future__ import annotations

import gc
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, GCCollector, Histogram, generate_latest

ENDPOINTS = ("/v1/embed", "/v1/embeddings", "/v1/models", "/health", "/ready", "/metrics",
             "/openapi.json", "/docs")
"""Label values of ``endpoint``; any other path counts as "other" (bounded label cardinality)."""

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """Requests by endpoint and status, latency, queue depth, batch sizes and token throughput."""

    def __init__(self, queue_depth: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("contextvec_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.latency = Histogram("contextvec_request_seconds", "request latency by endpoint",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue = Gauge("contextvec_queue_sentences", "sentences waiting for the encoder",
                           registry=r)
        self.queue.set_function(queue_depth)
        self.batch_sentences = Histogram(
            "contextvec_batch_sentences", "sentences per forward pass",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=r)
        self.batch_tokens = Histogram(
            "contextvec_batch_padded_tokens", "padded tokens (longest x sentences) per forward pass",
            buckets=(16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384), registry=r)
        self.batch_seconds = Histogram("contextvec_batch_seconds", "encoder time per forward pass",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.tokens = Counter("contextvec_tokens", "tokens embedded (rate() gives tokens/s)",
                              registry=r)
        self.tokens_per_second = Gauge("contextvec_last_batch_tokens_per_second",
                                       "padded tokens per second of the last forward pass",
                                       registry=r)
        # The collector's work (python_gc_*): a full collection stalls every request at once.
        GCCollector(registry=r)
        self.frozen = Gauge("contextvec_gc_frozen_objects", "objects kept out of the garbage "
                            "collector's view since start-up (gc.freeze)", registry=r)
        self.frozen.set_function(gc.get_freeze_count)
        self._series: dict[tuple[str, int], tuple[Counter, Histogram]] = {}

    @staticmethod
    def endpoint(path: str) -> str:
        return path if path in ENDPOINTS else "other"

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        # The labelled series are looked up once per (endpoint, status): labels() costs more
        # than the update itself, on every request.
        key = (self.endpoint(path), status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(key[0], str(status)),
                                          self.latency.labels(key[0]))
        series[0].inc()
        series[1].observe(seconds)

    def observe_batch(self, sentences: int, padded_tokens: int, seconds: float) -> None:
        self.batch_sentences.observe(sentences)
        self.batch_tokens.observe(padded_tokens)
        self.batch_seconds.observe(seconds)
        if seconds > 0:
            self.tokens_per_second.set(padded_tokens / seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
