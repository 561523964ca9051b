"""The service as the benchmarks see it: a real ``faithjudge serve`` process, and its memory.

``ServiceProcess`` starts ``faithjudge serve`` (uvicorn, one process) on a free loopback port with
one API key and a fresh data directory, waits for ``/readyz`` and stops it on exit.
``RssSampler`` samples the resident set of that process from a thread and keeps the peak of each
phase the benchmark marks. Used by the ``service_*`` benchmarks; not a benchmark itself.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

from benchmarks._common import ChildProcess, free_port

__all__ = ["BENCH_KEY", "RssSampler", "ServiceProcess", "percentiles", "summary_rows"]

BENCH_KEY = "fj_bench_key"
MB = 1024 * 1024


def _serve_command() -> list[str]:
    """The installed ``faithjudge`` entry point beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("faithjudge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "faithjudge.cli.main"]


class ServiceProcess(ChildProcess):
    """``faithjudge serve`` on 127.0.0.1 with ``env`` (``FAITHJUDGE_*`` settings) on top."""

    def __init__(self, data_dir: Path, log_dir: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        clean = {
            k: v for k, v in os.environ.items() if not k.startswith(("FAITHJUDGE_", "OPENAI_"))
        }
        full_env = {
            **clean,
            "FAITHJUDGE_DATA_DIR": str(data_dir),
            "FAITHJUDGE_API_KEYS": orjson.dumps({BENCH_KEY: "bench"}).decode(),
            **env,
        }
        command = [*_serve_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        super().__init__(
            "the service",
            [*command, "--log-level", "warning"],
            log_dir / f"service_{self.port}.log",
            ready=self._ready_now,
            ready_timeout_s=90.0,
            stop_grace_s=20.0,
            env=full_env,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ready_now(self) -> bool:
        try:
            return httpx.get(self.base_url + "/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False


class RssSampler:
    """Samples a process's RSS every ``interval_s`` in a thread; ``phase()`` starts a new phase.

    ``peaks_mb`` holds each phase's peak; ``peak_mb`` the overall one. A phase shorter than the
    interval still gets one sample, taken when it starts.
    """

    def __init__(self, process: psutil.Process, interval_s: float = 0.02) -> None:
        self.process = process
        self.interval_s = interval_s
        self.samples = 0
        self.peaks_mb: dict[str, float] = {}
        self.timeline: list[tuple[float, str, float]] = []
        self._phase = "start"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def phase(self, name: str) -> None:
        with self._lock:
            self._phase = name
        self._sample()

    def timed(self, phase: str, timings: dict[str, float], func: Any, *a: Any, **kw: Any) -> Any:
        """Start ``phase``, run ``func`` and record its seconds as ``timings[phase + "_s"]``."""
        self.phase(phase)
        t0 = time.perf_counter()
        value = func(*a, **kw)
        timings[f"{phase}_s"] = time.perf_counter() - t0
        return value

    @property
    def peak_mb(self) -> float:
        return max(self.peaks_mb.values(), default=0.0)

    def _sample(self) -> None:
        try:
            rss = self.process.memory_info().rss / MB
        except psutil.Error:
            return
        with self._lock:
            phase = self._phase
            self.samples += 1
            self.peaks_mb[phase] = max(self.peaks_mb.get(phase, 0.0), rss)
            now = time.monotonic() - self._t0
            # a coarse timeline for the JSON: one point per half second is plenty to read
            if not self.timeline or now - self.timeline[-1][0] >= 0.5:
                self.timeline.append((round(now, 2), phase, round(rss, 1)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()


def percentiles(values: list[float], scale: float = 1000.0) -> dict[str, Any]:
    """p50/p90/p99/max/mean of ``values`` (seconds) in milliseconds, rounded."""
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(scale * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)

    return {
        "n": len(ordered),
        "p50": at(0.5),
        "p90": at(0.9),
        "p99": at(0.99),
        "max": round(scale * ordered[-1], 2),
        "mean": round(scale * sum(ordered) / len(ordered), 2),
    }


def summary_rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """(metric, value, target, pass/fail) rows of the ``service_*`` benchmarks for ``run_all``."""

    def verdict(ok: bool | None) -> str:
        return "—" if ok is None else ("pass" if ok else "**FAIL**")

    out: list[tuple[str, str, str, str]] = []
    latency = results.get("service_score_latency")
    if latency:
        head = latency["headline"]
        out += [
            (
                f"Service POST /v1/score sustained, fake judge {head['judge_latency_ms']:g} ms, "
                f"{head['at_concurrency']} in flight",
                f"{head['sustained_requests_per_s']:,.1f} req/s, overhead p50 "
                f"{head['overhead_p50_ms']:.1f} ms / p99 {head['overhead_p99_ms']:.1f} ms, "
                f"{head.get('service_cpu_ms_per_request', float('nan')):.1f} ms service CPU/req",
                "reference; 0 errors",
                verdict(head["errors"] == 0),
            ),
            (
                f"  overhead with {head['unloaded_concurrency']} in flight (unloaded)",
                f"p50 {head['unloaded_overhead_p50_ms']:.1f} ms / "
                f"p99 {head['unloaded_overhead_p99_ms']:.1f} ms",
                "reference",
                "—",
            ),
        ]
    batch = results.get("service_batch_throughput")
    if batch:
        head, config = batch["headline"], batch["config"]
        out.append(
            (
                f"Service batch throughput ({config['items']:,} items, fake judge "
                f"{config['latency_ms']:g} ms, concurrency {config['concurrency']})",
                f"{head['ratio']:.3f} ({head['achieved_calls_per_s']:.1f} of "
                f"{head['ideal_calls_per_s']:.0f} calls/s)",
                f"≥ {head['target_ratio']}",
                verdict(head["pass"]),
            )
        )
    memory = results.get("service_batch_memory")
    if memory:
        head = memory["headline"]
        out.append(
            (
                f"Service peak RSS, {head['items']:,}-line batch (ingest, score, results, report)",
                f"{head['peak_rss_mb']:.0f} MB (idle {head['idle_rss_mb']:.0f} MB, "
                f"peak in {head['peak_phase']})",
                f"≤ {head['target_peak_rss_mb']:.0f} MB",
                verdict(head["pass"]),
            )
        )
    return out
