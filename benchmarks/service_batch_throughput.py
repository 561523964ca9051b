"""Batch throughput of the service as achieved/ideal judge calls per second.

The fake judge (``tests/fakes/judge_server.py``, ``quote_mode first_sentence``) answers every
call after ``--latency-ms`` (500) of non-blocking delay; the service (a real ``faithjudge
serve``, ``openai`` judge pointed at the fake, no cache, ``--concurrency`` 100 calls in
flight) scores a batch of ``--items`` (3000) distinct items uploaded through the SDK. With 3
judge calls per item:

    ideal    = concurrency / latency                   (100 / 0.5 s = 200 calls/s)
    achieved = judge calls / (completion - acceptance)
    ratio    = achieved / ideal                        (target >= 0.85)

The clock starts when the upload was accepted (every line stored) and stops when the SDK sees the
batch completed, polling its status every ``--poll`` seconds (so the ratio is at most that much
pessimistic). Judge calls are counted from the result lines (attempts per metric). The upload
itself is reported apart, and a warm-up batch first opens the judge connections.
Run: ``python -m benchmarks.service_batch_throughput``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from faithjudge_client import FaithJudgeClient

from benchmarks._common import load_average, machine_facts, write_result
from benchmarks.pipeline_efficiency import FakeJudgeProcess, read_outcome, write_items
from benchmarks.service_process import BENCH_KEY, ServiceProcess

NAME = "service_batch_throughput"
TARGET_RATIO = 0.85


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--warmup-items", type=int, default=100)
    parser.add_argument("--poll", type=float, default=0.25, help="status poll interval (s)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    machine = machine_facts()
    ideal = args.concurrency / (args.latency_ms / 1000.0)
    with tempfile.TemporaryDirectory(prefix="fj-bench-batch-") as tmp:
        work = Path(tmp)
        warmup, source = work / "warmup.jsonl", work / "items.jsonl"
        write_items(warmup, args.warmup_items, args.seed + 1, first_index=10_000_000)
        write_items(source, args.items, args.seed)
        with FakeJudgeProcess(args.latency_ms, work) as judge:
            env = {
                "FAITHJUDGE_JUDGE": "openai:fake-judge",
                "FAITHJUDGE_OPENAI_BASE_URL": judge.base_url,
                "FAITHJUDGE_OPENAI_API_KEY": "x",
                "FAITHJUDGE_CACHE": "false",
                "FAITHJUDGE_CONCURRENCY": str(args.concurrency),
            }
            with (
                ServiceProcess(work / "data", work, env) as service,
                FaithJudgeClient(service.base_url, BENCH_KEY) as sdk,
            ):
                warm = sdk.submit_job(warmup, name="warm-up")
                sdk.wait(warm.id, events=False, poll_interval=args.poll)

                load0 = load_average()
                service_cpu0, judge_cpu0 = service.cpu_seconds(), judge.cpu_seconds()
                t0 = time.perf_counter()
                accepted = sdk.submit_job(source, name="throughput")
                t_accepted = time.perf_counter()
                final = sdk.wait(accepted.id, events=False, poll_interval=args.poll)
                t_done = time.perf_counter()
                service_cpu = service.cpu_seconds() - service_cpu0
                judge_cpu = judge.cpu_seconds() - judge_cpu0
                results = work / "results.jsonl"
                lines = sdk.download_results(accepted.id, results)
                rss_mb = service.rss_bytes() / 2**20
        outcome = read_outcome(results)

    calls = outcome["judge_calls"]
    scoring_wall = t_done - t_accepted
    achieved = calls / scoring_wall
    server_side_s = (final.updated_at - accepted.created_at).total_seconds()
    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": args.items,
            "latency_ms": args.latency_ms,
            "concurrency": args.concurrency,
            "warmup_items": args.warmup_items,
            "poll_s": args.poll,
            "seed": args.seed,
            "metrics_per_item": 3,
            "judge": "openai:fake-judge (aiohttp transport, no cache)",
            "service": "faithjudge serve (uvicorn, 1 process, SQLite job store)",
        },
        "machine": machine,
        "run": {
            "status": final.status,
            "accepted": accepted.accepted,
            "result_lines": lines,
            "judge_calls": calls,
            "upload_s": round(t_accepted - t0, 3),
            "scoring_wall_s": round(scoring_wall, 3),
            "server_side_s": round(server_side_s, 3),
            "achieved_calls_per_s": round(achieved, 1),
            "items_per_s": round(lines / scoring_wall, 1),
            "end_to_end_calls_per_s": round(calls / (t_done - t0), 1),
            "metric_statuses": outcome["statuses"],
            "failure_stages": outcome["stages"],
            "service_cpu_utilisation": round(service_cpu / (t_done - t0), 3),
            "fake_judge_cpu_utilisation": round(judge_cpu / (t_done - t0), 3),
            "service_rss_mb_after": round(rss_mb, 1),
            "load_average_before": load0,
            "load_average_after": load_average(),
        },
    }
    ratio = achieved / ideal
    result["headline"] = {
        "ideal_calls_per_s": ideal,
        "achieved_calls_per_s": round(achieved, 1),
        "ratio": round(ratio, 3),
        "end_to_end_ratio": round(calls / (t_done - t0) / ideal, 3),
        "target_ratio": TARGET_RATIO,
        "pass": ratio >= TARGET_RATIO and final.status == "completed" and lines == args.items,
    }
    result["duration_s"] = round(time.perf_counter() - started, 1)
    print(orjson.dumps(result["run"], option=orjson.OPT_INDENT_2).decode())
    print(orjson.dumps(result["headline"], option=orjson.OPT_INDENT_2).decode())
    if not args.no_write:
        print(f"wrote {write_result(NAME, result)}")
    return result


if __name__ == "__main__":
    main()
