"""Prometheus metrics of one app: requests, latencies, grades by outcome, cache, judge tokens
(the provider's prompt-cache part apart), queue depth.

Each app has its own registry, so several apps in one process (tests) never collide.
"""

from __future__ import annotations

import time
from typing import Any

from faithjudge_client.lines import ItemResult
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "MetricsMiddleware"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "faithjudge_http_requests_total",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "faithjudge_http_request_seconds",
            "Time to the end of the response, by method and route.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.grades = Counter(
            "faithjudge_judge_grades_total",
            "Metric grades by metric and outcome (valid, abstained, or the failure stage).",
            ["metric", "outcome"],
            registry=self.registry,
        )
        self.cache = Counter(
            "faithjudge_judge_cache_total",
            "Judge answers by whether they came from the response cache.",
            ["result"],
            registry=self.registry,
        )
        self.cache_ratio = Gauge(
            "faithjudge_judge_cache_hit_ratio",
            "Share of judge answers served from the cache since start.",
            registry=self.registry,
        )
        self.tokens = Counter(
            "faithjudge_judge_tokens_total",
            "Judge tokens of the scored lines, as their provenance records them: prompt, the "
            "part of it the provider served from its prompt cache (cached), and completion.",
            ["kind"],
            registry=self.registry,
        )
        self.lines = Counter(
            "faithjudge_lines_scored_total",
            "Lines scored, by source: score (the score endpoint) or job.",
            ["source"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "faithjudge_queue_depth",
            "Lines waiting or in progress in queued and running jobs.",
            registry=self.registry,
        )
        self._hits = 0
        self._lookups = 0

    def observe(self, result: ItemResult, *, source: str) -> None:
        self.lines.labels(source).inc()
        if result.provenance is not None:
            tokens = result.provenance.tokens
            self.tokens.labels("prompt").inc(tokens.prompt)
            self.tokens.labels("cached").inc(tokens.cached)
            self.tokens.labels("completion").inc(tokens.completion)
        for metric, graded in result.metrics.items():
            outcome = graded.failure.stage if graded.failure is not None else graded.status
            self.grades.labels(metric, outcome).inc()
            if graded.failure is None or graded.failure.stage != "kb":
                self._lookups += 1
                self._hits += int(graded.cache_hit)
                self.cache.labels("hit" if graded.cache_hit else "miss").inc()
        if self._lookups:
            self.cache_ratio.set(self._hits / self._lookups)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts every request under its route template (never its raw path: ids stay out)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route: Any = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method, name, str(status)).inc()
            self.metrics.latency.labels(method, name).observe(time.perf_counter() - start)
