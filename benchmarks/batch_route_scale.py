"""The ``openai-batch`` route at scale: 100,000 items (300,000 judge requests) end to end.

1. Generate ``--items`` (100,000) ScoreRequest lines (seeded CoTs of 1.5-3 KB, KB questions).
2. Start the fake Files + Batches API (``tests/fakes/batch_server.py``) as its own process, so
   its CPU and memory are measured apart from the client's.
3. A fresh child process runs what ``faithjudge score --judge openai-batch:bench-judge``
   runs: stage every request into part files, upload, create the batches, poll, download and map
   the answers into the cache, then score the whole file from the cache. Its peak RSS is
   ``ru_maxrss`` of that child alone (``os.wait4``).

Checks: every request answered and submitted exactly once, no part file over 50,000 lines or
200 MB, zero chat-completion calls, every metric valid. Reported: peak RSS (target ≤ 300 MB),
the client's CPU per phase, the fake's CPU, and the share of the batch phase's wall time the
client spent on its own CPU (the rest is waiting on the fake's processing and I/O).

Run: ``python -m benchmarks.batch_route_scale [--items N] [--poll-s S]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil

from benchmarks._common import (
    REPO_ROOT,
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    write_result,
)

NAME = "batch_route_scale"
TARGET_PEAK_RSS_MB = 300.0
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024


def child_main(args: argparse.Namespace) -> None:
    import anyio
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.provider_batch.file_route import run_batches
    from faithjudge.runners.file_runner import score_file
    from faithjudge.settings import Settings

    settings = Settings(
        judge="openai-batch:bench-judge",
        openai_base_url=args.base_url,
        openai_api_key="bench-key",
        timeout_s=600,
        batch_poll_s=args.poll_s,
        data_dir=Path(args.data_dir),
    )
    me = psutil.Process()
    phases: dict[str, dict[str, float]] = {}

    def mark(name: str, wall0: float, cpu0: float) -> None:
        phases[name] = {
            "wall_s": round(time.perf_counter() - wall0, 2),
            "cpu_s": round(time.process_time() - cpu0, 2),
            "rss_mb": round(me.memory_info().rss / 2**20, 1),
        }

    async def run() -> dict[str, Any]:
        async with open_scorer(settings) as scorer:
            w0, c0 = time.perf_counter(), time.process_time()
            report = await run_batches(scorer, settings, Path(args.input))
            mark("batch_phase", w0, c0)
            w0, c0 = time.perf_counter(), time.process_time()
            summary = await score_file(scorer, Path(args.input), Path(args.output))
            mark("score_phase", w0, c0)
            stats = scorer.caller.stats
        return {
            "requests": report.requests,
            "staged": report.staged,
            "parts": report.parts,
            "files_uploaded": report.files_uploaded,
            "batches_created": report.batches_created,
            "answered": report.answered,
            "failed": report.failed,
            "prompt_tokens": report.prompt_tokens,
            "completion_tokens": report.completion_tokens,
            "staging": {
                "wall_s": round(report.staging_s, 2),
                "cpu_s": round(report.staging_cpu_s, 2),
            },
            "exchange": {
                "wall_s": round(report.exchange_s, 2),
                "cpu_s": round(report.exchange_cpu_s, 2),
            },
            "scored": summary.scored,
            "outcomes": summary.totals(),
            "cache_hits": stats.cache_hits,
            "judge_calls": stats.judge_calls,
        }

    out = anyio.run(run)
    out["phases"] = phases
    out["self_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.result_file).write_bytes(orjson.dumps(out))


@dataclass(frozen=True)
class FakeBatchProcess:
    """The fake Files + Batches API running as its own process."""

    base_url: str
    ps: psutil.Process

    def cpu_seconds(self) -> float:
        return float(sum(self.ps.cpu_times()[:2]))

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/fake/stats") as reply:
            stats: dict[str, Any] = orjson.loads(reply.read())
        return stats


@contextmanager
def fake_batch_api() -> Iterator[FakeBatchProcess]:
    """Start the fake (no simulated waiting: ``--step-s 0``), stop it on exit."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.batch_server", "--step-s", "0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        yield FakeBatchProcess(fake.stdout.readline().strip(), psutil.Process(fake.pid))
    finally:
        fake.terminate()
        fake.wait(10)


def generate(path: Path, count: int, seed: int) -> int:
    rng = random.Random(seed)
    questions = kb_questions()
    with path.open("wb") as sink:
        for i in range(count):
            sink.write(orjson.dumps(make_request(rng, i, questions)) + b"\n")
    return path.stat().st_size


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Headline rows for ``run_all``'s table."""
    data = results.get(NAME)
    if not data:
        return []
    checks = data["checks"]
    files = data["fake"]["file_lines"]
    return [
        (
            f"Batch API route, {data['config']['items']:,} items "
            f"({3 * data['config']['items']:,} requests) through the fake Files + Batches API",
            f"peak RSS {data['client_peak_rss_mb']:.0f} MB, {len(files)} files "
            f"(≤ {max(files):,} lines, ≤ {max(data['fake']['file_mb']):.0f} MB each)",
            f"≤ {data['target_peak_rss_mb']:.0f} MB, ≤ 50,000 lines and 200 MB per file",
            "pass" if all(checks.values()) else "FAIL",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--poll-s", type=float, default=1.0)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--input")
    parser.add_argument("--output")
    parser.add_argument("--data-dir")
    parser.add_argument("--base-url")
    parser.add_argument("--result-file")
    args = parser.parse_args(argv)
    if args.child:
        child_main(args)
        return

    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp_name:
        tmp = Path(tmp_name)
        source = tmp / "in.jsonl"
        input_bytes = generate(source, args.items, args.seed)
        print(f"{args.items} items, {input_bytes / 2**20:.1f} MB", flush=True)
        with fake_batch_api() as fake:
            base_url = fake.base_url
            fake_proc = fake.ps
            fake_cpu0 = fake.cpu_seconds()
            result_file = tmp / "child.json"
            command = [
                sys.executable, "-m", "benchmarks.batch_route_scale", "--child",
                "--input", str(source), "--output", str(tmp / "out.jsonl"),
                "--data-dir", str(tmp / "data"), "--base-url", base_url,
                "--poll-s", str(args.poll_s), "--result-file", str(result_file),
            ]  # fmt: skip
            w0 = time.perf_counter()
            child = subprocess.Popen(command, cwd=REPO_ROOT)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - w0
            if status != 0:
                raise SystemExit(f"the client child failed with status {status}")
            fake_cpu = fake.cpu_seconds() - fake_cpu0
            fake_rss = fake_proc.memory_info().rss / 2**20
            fake_stats = fake.stats()
        client = orjson.loads(result_file.read_bytes())

    peak = usage.ru_maxrss / 1024
    batch = client["phases"]["batch_phase"]
    checks = {
        "every_request_answered": client["answered"] == client["requests"] == 3 * args.items,
        "submitted_once": fake_stats["max_submissions_per_request"] == 1,
        "files_within_limits": all(n <= MAX_LINES for n in fake_stats["file_lines"])
        and all(b <= MAX_BYTES for b in fake_stats["file_bytes"]),
        # a file is closed only when the next line would break a limit
        "files_split": sum(fake_stats["file_lines"]) == 3 * args.items
        and len(fake_stats["file_lines"])
        <= max(-(-3 * args.items // MAX_LINES), -(-sum(fake_stats["file_bytes"]) // MAX_BYTES)) + 1,
        "zero_chat_calls": fake_stats["chat_calls"] == 0 and client["judge_calls"] == 0,
        "all_valid": set(client["outcomes"]) == {"valid"},
        "exchange_dominated_by_the_fake": fake_cpu > client["exchange"]["cpu_s"],
        "peak_rss_within_target": peak <= TARGET_PEAK_RSS_MB,
    }
    payload = {
        "config": {"items": args.items, "seed": args.seed, "poll_s": args.poll_s},
        "input_mb": round(input_bytes / 2**20, 1),
        "wall_s": round(wall, 1),
        "client_peak_rss_mb": round(peak, 1),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "client": client,
        "fake": {
            "cpu_s": round(fake_cpu, 1),
            "processing_cpu_s": round(fake_stats["processing_s"], 1),
            "rss_mb": round(fake_rss, 1),
            "files": fake_stats["files"],
            "file_lines": fake_stats["file_lines"],
            "file_mb": [round(b / 2**20, 1) for b in fake_stats["file_bytes"]],
            "batches": fake_stats["batches"],
        },
        # the exchange with the provider (upload, poll, download, map back), after staging:
        # how its wall time splits between the client's own CPU and the fake's processing
        "exchange_client_cpu_s": client["exchange"]["cpu_s"],
        "exchange_fake_cpu_s": round(fake_cpu, 1),
        "exchange_fake_share": round(
            fake_cpu / max(fake_cpu + client["exchange"]["cpu_s"], 1e-9), 2
        ),
        "batch_phase_wall_s": batch["wall_s"],
        "checks": checks,
        "target_peak_rss_mb": TARGET_PEAK_RSS_MB,
        "load_average": load_average(),
        "machine": machine_facts(),
    }
    path = write_result(NAME, payload)
    print(orjson.dumps({k: v for k, v in payload.items() if k != "machine"},
                       option=orjson.OPT_INDENT_2).decode())  # fmt: skip
    print(f"-> {path}")
    if not all(checks.values()):
        raise SystemExit(f"failed checks: {[k for k, v in checks.items() if not v]}")


if __name__ == "__main__":
    main()
