"""A batch job of the service through the provider Batch API route, at scale.

A real ``faithjudge serve`` (``openai-batch:bench-judge``, SQLite job store or, with
``--database-url``, a fresh schema of that PostgreSQL database; response cache off so every
answer comes from the job store) and the fake Files + Batches API
(``tests/fakes/batch_server.py``, its own process, no simulated waiting) take one upload of
``--items`` (20,000) requests with all three metrics. A thread samples the service's resident
set through the phases:

    idle -> upload+ingest -> provider phase + scoring (until ``completed``) -> results download

The benchmark fails unless the job completed with one result per line, every judge request was
submitted exactly once, every file kept to the provider's limits, no chat-completion call was
made, every metric is valid and the peak stayed within the service's 500 MB. It also records
the job store's size before and after the request lines are dropped at the end of the phase.
Run: ``python -m benchmarks.service_batch_route [--items N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
from faithjudge_client import FaithJudgeClient

from benchmarks._common import load_average, machine_facts, write_result
from benchmarks.batch_route_scale import MAX_BYTES, MAX_LINES, fake_batch_api, generate
from benchmarks.service_process import BENCH_KEY, RssSampler, ServiceProcess

NAME = "service_batch_route"
TARGET_PEAK_MB = 500.0


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Headline row for ``run_all``'s table."""
    data = results.get(NAME)
    if not data:
        return []
    return [
        (
            f"Service batch job on the Batch API route, {data['config']['items']:,} items "
            f"({data['requests']:,} requests)",
            f"peak RSS {data['peak_rss_mb']:.0f} MB, {data['fake']['files']} file(s), "
            f"{data['timings_s']['judging_and_scoring_s']:.0f} s to completed",
            f"≤ {data['target_peak_rss_mb']:.0f} MB, each request once, 0 chat calls",
            "pass" if all(data["checks"].values()) else "FAIL",
        )
    ]


def _store_mb(data_dir: Path, database_url: str | None, schema: str) -> float:
    if database_url is None:
        return sum(p.stat().st_size for p in data_dir.glob("jobs.sqlite3*")) / 2**20
    size = anyio.run(
        _admin,
        database_url,
        "SELECT coalesce(sum(pg_total_relation_size(format('%I.%I', schemaname, tablename))), 0)"
        f" FROM pg_tables WHERE schemaname = '{schema}'",
    )
    return float(size) / 2**20


async def _admin(database_url: str, sql: str) -> Any:
    import asyncpg

    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        return await connection.fetchval(sql)
    finally:
        await connection.close()


@contextmanager
def _schema(database_url: str | None) -> Iterator[str]:
    """A fresh PostgreSQL schema for the run (dropped after), or nothing on SQLite."""
    name = f"fj_bench_{uuid.uuid4().hex[:10]}"
    if database_url is None:
        yield name
        return
    anyio.run(_admin, database_url, f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        anyio.run(_admin, database_url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--poll-s", type=float, default=1.0)
    parser.add_argument("--sample-ms", type=float, default=50.0)
    parser.add_argument(
        "--database-url", help="postgresql+asyncpg://... (default: SQLite in the data dir)"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="fj-bench-batch-route-") as tmp:
        work = Path(tmp)
        source = work / "items.jsonl"
        input_bytes = generate(source, args.items, args.seed)
        with fake_batch_api() as fake, _schema(args.database_url) as schema:
            env = {
                "FAITHJUDGE_JUDGE": "openai-batch:bench-judge",
                "FAITHJUDGE_OPENAI_BASE_URL": fake.base_url,
                "FAITHJUDGE_OPENAI_API_KEY": "bench-key",
                "FAITHJUDGE_BATCH_POLL_S": str(args.poll_s),
                "FAITHJUDGE_CACHE": "false",
            }
            if args.database_url:
                env["FAITHJUDGE_DATABASE_URL"] = args.database_url
                env["FAITHJUDGE_DATABASE_SCHEMA"] = schema
            data_dir = work / "data"
            with (
                ServiceProcess(data_dir, work, env) as service,
                RssSampler(service.ps, args.sample_ms / 1000) as rss,
                FaithJudgeClient(service.base_url, BENCH_KEY, timeout=600) as sdk,
            ):
                rss.phase("idle")
                time.sleep(1.0)
                cpu0 = service.cpu_seconds()
                fake_cpu0 = fake.cpu_seconds()
                accepted = rss.timed("upload_ingest", timings, sdk.submit_job, source, name="route")
                store_after_ingest = _store_mb(data_dir, args.database_url, schema)
                final = rss.timed(
                    "judging_and_scoring", timings, sdk.wait, accepted.id, timeout=3600
                )
                lines = rss.timed(
                    "results_download", timings, sdk.download_results, accepted.id, work / "r"
                )
                service_cpu = service.cpu_seconds() - cpu0
                fake_cpu = fake.cpu_seconds() - fake_cpu0
                store_at_end = _store_mb(data_dir, args.database_url, schema)
            fake_stats = fake.stats()

    requests = 3 * args.items
    counts = dict(final.counts)
    checks = {
        "completed": final.status == "completed" and lines == args.items,
        "submitted_once": fake_stats["max_submissions_per_request"] == 1
        and sum(fake_stats["file_lines"]) == requests,
        "files_within_limits": all(n <= MAX_LINES for n in fake_stats["file_lines"])
        and all(b <= MAX_BYTES for b in fake_stats["file_bytes"]),
        "zero_chat_calls": fake_stats["chat_calls"] == 0,
        "all_valid": counts.get("valid", 0) == requests and not counts.get("error"),
        "peak_rss_within_target": rss.peak_mb <= TARGET_PEAK_MB,
    }
    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": args.items,
            "seed": args.seed,
            "poll_s": args.poll_s,
            "job_store": "postgresql" if args.database_url else "sqlite",
        },
        "machine": machine_facts(),
        "input_mb": round(input_bytes / 2**20, 1),
        "requests": requests,
        "status": final.status,
        "detail": final.detail,
        "counts": counts,
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "service_cpu_s": round(service_cpu, 1),
        "fake_cpu_s": round(fake_cpu, 1),
        "fake": {
            "files": fake_stats["files"],
            "batches": fake_stats["batches"],
            "file_lines": fake_stats["file_lines"],
            "file_mb": [round(b / 2**20, 1) for b in fake_stats["file_bytes"]],
        },
        "peak_rss_mb_by_phase": {k: round(v, 1) for k, v in rss.peaks_mb.items()},
        "peak_rss_mb": round(rss.peak_mb, 1),
        "job_store_mb": {
            "after_ingest": round(store_after_ingest, 1),
            "at_end": round(store_at_end, 1),
        },
        "checks": checks,
        "target_peak_rss_mb": TARGET_PEAK_MB,
        "load_average": load_average(),
        "duration_s": round(time.perf_counter() - started, 1),
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    if not args.no_write:
        name = f"{NAME}_postgres" if args.database_url else NAME
        print(f"-> {write_result(name, result)}")
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        raise SystemExit(f"failed checks: {failed}")
    return result


if __name__ == "__main__":
    main()
