"""Sustained ``POST /v1/score`` rate, and the latency the service adds on top of its judge.

Three processes share the machine: the fake judge (``tests/fakes/judge_server.py``, every call
answered after ``--latency-ms``, 100), the service (a real ``faithjudge serve`` with the
``openai`` judge pointed at the fake, no cache) and this one, the load generator. For each
level of ``--levels`` (1, 8, 32 requests in flight) the generator keeps that many ``/v1/score``
requests going for ``--duration`` seconds after ``--warmup``, each a distinct ~2-3 KB CoT with
the three metrics (3 judge calls per item, made in parallel by the service).

Beside that load, one probe in the same event loop sends the judge, directly, what one item costs
it: three chat requests like the service's, in parallel, and times until all three answered. That
is the judge's latency for an item, measured in the same run under the same load, so

    overhead p50 = service latency p50 - judge item latency p50     (and the same for p99)

is what the service adds: HTTP in and out, validation, prompts, verification, serialisation, and
queueing for the CPU it shares with the two other processes. Both sides use the same client
(aiohttp), so client costs cancel. Run: ``python -m benchmarks.service_score_latency``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections import Counter
from itertools import cycle
from pathlib import Path
from typing import Any

import orjson
import psutil

from benchmarks._common import kb_questions, load_average, machine_facts, make_request, write_result
from benchmarks.pipeline_efficiency import FakeJudgeProcess, bare_bodies
from benchmarks.service_process import BENCH_KEY, ServiceProcess, percentiles

NAME = "service_score_latency"


async def run_level(
    service_url: str,
    judge_url: str,
    bodies: list[bytes],
    judge_bodies: list[bytes],
    concurrency: int,
    warmup_s: float,
    duration_s: float,
) -> dict[str, Any]:
    import aiohttp

    score_url = service_url + "/v1/score"
    chat_url = judge_url + "/chat/completions"
    score_headers = {"content-type": "application/json", "authorization": f"Bearer {BENCH_KEY}"}
    chat_headers = {"content-type": "application/json", "authorization": "Bearer x"}
    service_lat: list[float] = []
    judge_lat: list[float] = []
    completed_in_window = completed_total = 0
    errors: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    next_body = cycle(bodies).__next__
    next_chat = cycle(judge_bodies).__next__
    start = time.perf_counter()
    measure_from = start + warmup_s
    stop = measure_from + duration_s

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one_score() -> None:
            nonlocal completed_in_window, completed_total
            t0 = time.perf_counter()
            async with session.post(score_url, data=next_body(), headers=score_headers) as reply:
                raw = await reply.read()
            t1 = time.perf_counter()
            if reply.status != 200:
                errors[f"http_{reply.status}"] += 1
                return
            completed_total += 1
            for metric in orjson.loads(raw).get("metrics", {}).values():
                statuses[metric["status"]] += 1
            if measure_from <= t1 <= stop:
                completed_in_window += 1
            if t0 >= measure_from and t1 <= stop:
                service_lat.append(t1 - t0)

        async def worker() -> None:
            while time.perf_counter() < stop:
                try:
                    await one_score()
                except aiohttp.ClientError as exc:
                    errors[type(exc).__name__] += 1

        async def chat(body: bytes) -> None:
            async with session.post(chat_url, data=body, headers=chat_headers) as reply:
                await reply.read()
                if reply.status != 200:
                    errors[f"judge_http_{reply.status}"] += 1

        async def probe() -> None:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                await asyncio.gather(chat(next_chat()), chat(next_chat()), chat(next_chat()))
                t1 = time.perf_counter()
                if t0 >= measure_from and t1 <= stop:
                    judge_lat.append(t1 - t0)

        await asyncio.gather(probe(), *(worker() for _ in range(concurrency)))

    service = percentiles(service_lat)
    judge = percentiles(judge_lat)
    return {
        "concurrency": concurrency,
        "requests_in_window": completed_in_window,
        "requests_total": completed_total,
        "requests_per_s": round(completed_in_window / duration_s, 1),
        "service_latency_ms": service,
        "judge_item_latency_ms": judge,
        "overhead_ms": {
            q: round(service[q] - judge[q], 2) for q in ("p50", "p90", "p99") if service["n"]
        }
        if judge["n"]
        else {},
        "errors": dict(errors),
        "metric_statuses": dict(statuses),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=100.0, help="fake judge latency")
    parser.add_argument("--levels", default="1,8,32", help="requests in flight, per level")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per level")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds per level")
    parser.add_argument("--bodies", type=int, default=3000, help="distinct request bodies")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]

    started = time.perf_counter()
    machine = machine_facts()
    rng = random.Random(args.seed)
    questions = kb_questions()
    bodies = [orjson.dumps(make_request(rng, i, questions)) for i in range(args.bodies)]
    judge_bodies = bare_bodies(300, args.seed)

    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "latency_ms": args.latency_ms,
            "levels": levels,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "bodies": args.bodies,
            "mean_body_bytes": round(sum(map(len, bodies)) / len(bodies)),
            "metrics_per_item": 3,
            "judge": "openai:fake-judge (aiohttp transport, no cache)",
            "service": "faithjudge serve (uvicorn, 1 process)",
            "seed": args.seed,
        },
        "machine": machine,
        "levels": [],
    }
    with tempfile.TemporaryDirectory(prefix="fj-bench-score-") as tmp:
        work = Path(tmp)
        with FakeJudgeProcess(args.latency_ms, work) as judge:
            env = {
                "FAITHJUDGE_JUDGE": "openai:fake-judge",
                "FAITHJUDGE_OPENAI_BASE_URL": judge.base_url,
                "FAITHJUDGE_OPENAI_API_KEY": "x",
                "FAITHJUDGE_CACHE": "false",
            }
            with ServiceProcess(work / "data", work, env) as service:
                for concurrency in levels:
                    service_cpu0, judge_cpu0 = service.cpu_seconds(), judge.cpu_seconds()
                    machine0 = psutil.cpu_times()
                    load0 = load_average()
                    wall0, cpu0 = time.perf_counter(), time.process_time()
                    level = asyncio.run(
                        run_level(
                            service.base_url,
                            judge.base_url,
                            bodies,
                            judge_bodies,
                            concurrency,
                            args.warmup,
                            args.duration,
                        )
                    )
                    wall = time.perf_counter() - wall0
                    service_cpu = service.cpu_seconds() - service_cpu0
                    ours = service_cpu + judge.cpu_seconds() - judge_cpu0
                    ours += time.process_time() - cpu0
                    machine1 = psutil.cpu_times()
                    busy = sum(
                        getattr(machine1, f, 0.0) - getattr(machine0, f, 0.0)
                        for f in ("user", "nice", "system", "irq", "softirq")
                    )
                    level["cpu_utilisation"] = {
                        "service": round(service_cpu / wall, 3),
                        "fake_judge": round((judge.cpu_seconds() - judge_cpu0) / wall, 3),
                        "load_generator": round((time.process_time() - cpu0) / wall, 3),
                        # everything else on the machine, in cores
                        "other_processes": round(max(0.0, busy - ours) / wall, 3),
                    }
                    # CPU per request over the whole level: what the service costs, whatever
                    # else the machine is doing
                    level["service_cpu_ms_per_request"] = round(
                        1000 * service_cpu / max(1, level["requests_total"]), 2
                    )
                    level["load_average_before"] = load0
                    level["service_rss_mb"] = round(service.rss_bytes() / 2**20, 1)
                    result["levels"].append(level)
                    _print_level(level)

    top = max(result["levels"], key=lambda lv: lv["concurrency"])
    low = min(result["levels"], key=lambda lv: lv["concurrency"])
    result["headline"] = {
        "sustained_requests_per_s": top["requests_per_s"],
        "at_concurrency": top["concurrency"],
        "overhead_p50_ms": top["overhead_ms"].get("p50"),
        "overhead_p99_ms": top["overhead_ms"].get("p99"),
        "unloaded_concurrency": low["concurrency"],
        "unloaded_overhead_p50_ms": low["overhead_ms"].get("p50"),
        "unloaded_overhead_p99_ms": low["overhead_ms"].get("p99"),
        "judge_latency_ms": args.latency_ms,
        "service_cpu_ms_per_request": top["service_cpu_ms_per_request"],
        "other_processes_cpu_at_top": top["cpu_utilisation"]["other_processes"],
        "errors": sum(sum(lv["errors"].values()) for lv in result["levels"]),
    }
    result["duration_s"] = round(time.perf_counter() - started, 1)
    print(orjson.dumps(result["headline"], option=orjson.OPT_INDENT_2).decode())
    if not args.no_write:
        print(f"wrote {write_result(NAME, result)}")
    return result


def _print_level(level: dict[str, Any]) -> None:
    service, judge = level["service_latency_ms"], level["judge_item_latency_ms"]
    print(
        f"c={level['concurrency']:>3}: {level['requests_per_s']:7.1f} req/s  "
        f"service p50 {service.get('p50')} p99 {service.get('p99')} ms  "
        f"judge p50 {judge.get('p50')} p99 {judge.get('p99')} ms  "
        f"overhead {level['overhead_ms']}  errors {level['errors']}  "
        f"cpu {level.get('cpu_utilisation')}",
        flush=True,
    )


if __name__ == "__main__":
    main()
