"""End-to-end efficiency of ``score_file`` against a fake judge running as a separate process.

Part 1 (efficiency): the fake judge (``tests/fakes/judge_server.py``, ``quote_mode
first_sentence``) answers every call after ``--latency-ms`` (500) of non-blocking delay;
``--items`` (3000) items go through ``score_file`` with the ``openai`` judge, no cache and
``concurrency`` (100) calls in flight. With 3 calls per item:

    achieved = 3 * items / wall        ideal = concurrency / latency (200 calls/s)
    efficiency = achieved / ideal      (target >= 0.9)

Part 2 (client CPU): latency 0, ``--cpu-items`` (1500) items at concurrency 100, once per HTTP
transport (the ``http_transport`` setting, aiohttp and httpx): the most calls/s one client core
sustains and the client CPU per judge call (``time.process_time`` delta / calls).

Part 3 (reference): the same items through an in-process instant judge (no HTTP), so that
part 2 minus part 3 is what the HTTP round trip costs the client.

The fake server shares the machine's cores with the client; its own CPU time (psutil) is recorded
for each run. The client's CPU per call covers the whole pipeline (parse, prompts, verification,
result writing), not just the HTTP call. Run: ``python -m benchmarks.pipeline_efficiency``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil
from faithjudge.event_loop import run_async
from faithjudge.judges.builtin import OpenAIOptions
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings

from benchmarks import _judge
from benchmarks._common import (
    ChildProcess,
    free_port,
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    write_result,
)

NAME = "pipeline_efficiency"
TARGET_EFFICIENCY = 0.9
TRANSPORTS = ("aiohttp", "httpx")


# ---------------------------------------------------------------- the fake judge process


class FakeJudgeProcess(ChildProcess):
    """``python -m tests.fakes.judge_server`` on a free port, killed on exit."""

    def __init__(self, latency_ms: float, log_dir: Path, *extra_args: str) -> None:
        self.latency_ms = latency_ms
        self.port = free_port()
        command = [sys.executable, "-m", "tests.fakes.judge_server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--latency-ms", str(latency_ms),
                   "--quote-mode", "first_sentence", *extra_args]  # fmt: skip
        super().__init__(
            "the fake judge",
            command,
            log_dir / f"fake_judge_{self.port}.log",
            ready=self._accepts,
            ready_timeout_s=30.0,
        )

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


# ---------------------------------------------------------------- runs


def write_items(path: Path, count: int, seed: int, first_index: int = 0) -> None:
    rng = random.Random(seed)
    questions = kb_questions()
    with path.open("wb") as sink:
        for i in range(first_index, first_index + count):
            sink.write(orjson.dumps(make_request(rng, i, questions)) + b"\n")


def read_outcome(output: Path) -> dict[str, Any]:
    """Statuses, failure stages and judge attempts, counted from the result file."""
    statuses: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    attempts = lines = 0
    with output.open("rb") as handle:
        for raw in handle:
            result = orjson.loads(raw)
            lines += 1
            if result.get("error"):
                stages[result["error"]["stage"]] += 1
            for metric in result.get("metrics", {}).values():
                statuses[metric["status"]] += 1
                attempts += metric.get("attempts", 0)
                if metric.get("failure"):
                    stages[metric["failure"]["stage"]] += 1
    return {
        "lines": lines,
        "statuses": dict(statuses),
        "stages": dict(stages),
        "judge_calls": attempts,
    }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _score(
    settings: Settings, warmup: Path, source: Path, output: Path, profile_top: int = 0
) -> dict[str, Any]:
    """Warm up, then time one ``score_file`` run while probing the event loop's lag."""
    lags: list[float] = []

    async def probe() -> None:
        # How late a 10 ms sleep wakes up: the time a ready callback waits for the loop.
        while True:
            t0 = time.perf_counter()
            await anyio.sleep(0.01)
            lags.append(time.perf_counter() - t0 - 0.01)

    async with open_scorer(settings) as scorer:
        # Warm-up: imports, lazy caches, and the HTTP connection pool.
        await score_file(scorer, warmup, output.with_suffix(".warmup.jsonl"), concurrency=100)
        me = psutil.Process()
        switches0 = me.num_ctx_switches()
        system0 = psutil.cpu_times()
        async with anyio.create_task_group() as group:
            group.start_soon(probe)
            c0, w0 = time.process_time(), time.perf_counter()
            profiler = cProfile.Profile() if profile_top else None
            if profiler is not None:
                profiler.enable()
            await score_file(scorer, source, output, concurrency=settings.concurrency)
            if profiler is not None:
                profiler.disable()
                transport = settings.options(OpenAIOptions).http_transport
                print(f"-- profile of the {transport} client ({settings.judge})")
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(profile_top)
            wall = time.perf_counter() - w0
            cpu = time.process_time() - c0
            group.cancel_scope.cancel()
        switches1 = me.num_ctx_switches()
        system1 = psutil.cpu_times()
    busy_fields = ("user", "nice", "system", "irq", "softirq")  # guest is part of user

    def delta(fields: tuple[str, ...]) -> float:
        return sum(getattr(system1, f, 0.0) - getattr(system0, f, 0.0) for f in fields)

    return {
        "wall_s": wall,
        "client_cpu_s": cpu,
        "machine_busy_cpu_s": delta(busy_fields),
        "steal_cpu_s": delta(("steal",)),
        "involuntary_switches": switches1.involuntary - switches0.involuntary,
        "loop_lag_ms": {
            "p50": round(1000 * _percentile(lags, 0.5), 2),
            "p95": round(1000 * _percentile(lags, 0.95), 2),
            "p99": round(1000 * _percentile(lags, 0.99), 2),
            "max": round(1000 * max(lags, default=0.0), 2),
            "mean": round(1000 * sum(lags) / max(1, len(lags)), 2),
        },
    }


def run_once(
    settings: Settings,
    warmup: Path,
    source: Path,
    output: Path,
    server: FakeJudgeProcess | None,
    profile_top: int = 0,
) -> dict[str, Any]:
    server_cpu0 = server.cpu_seconds() if server is not None else 0.0
    load0 = load_average()
    timing = run_async(_score, settings, warmup, source, output, profile_top)
    # The server's CPU includes the warm-up; it is split pro rata by call count below.
    server_cpu = server.cpu_seconds() - server_cpu0 if server is not None else None
    outcome = read_outcome(output)
    warm = read_outcome(output.with_suffix(".warmup.jsonl"))
    calls = outcome["judge_calls"]
    wall, cpu = timing["wall_s"], timing["client_cpu_s"]
    run = {
        "items": outcome["lines"],
        "judge_calls": calls,
        "wall_s": round(wall, 3),
        "calls_per_s": round(calls / wall, 1),
        "client_cpu_s": round(cpu, 3),
        "client_cpu_ms_per_call": round(1000 * cpu / calls, 3),
        "client_cpu_utilisation": round(cpu / wall, 3),
        "loop_lag_ms": timing["loop_lag_ms"],
        "client_involuntary_switches": timing["involuntary_switches"],
        "statuses": outcome["statuses"],
        "failure_stages": outcome["stages"],
        "load_average_before": load0,
        "load_average_after": load_average(),
    }
    other = timing["machine_busy_cpu_s"] - cpu
    if server_cpu is not None:
        all_calls = calls + warm["judge_calls"]
        run["server_cpu_s"] = round(server_cpu * calls / all_calls, 3)
        run["server_cpu_ms_per_call"] = round(1000 * server_cpu / all_calls, 3)
        run["server_cpu_utilisation"] = round(server_cpu * calls / all_calls / wall, 3)
        other -= server_cpu * calls / all_calls
    # CPU that neither the client nor the fake judge used: other processes.
    run["other_processes_cpu_utilisation"] = round(max(0.0, other) / wall, 3)
    # CPU the hypervisor gave to other guests while this VM wanted it.
    run["steal_cpu_utilisation"] = round(timing["steal_cpu_s"] / wall, 3)
    return run


def bare_bodies(count: int, seed: int) -> list[bytes]:
    """Chat request bodies like the pipeline's (CT and CA prompts of the v1 set, strict schema)."""
    from faithjudge.assets.prompts import load_prompt_set
    from faithjudge.assets.schemas import judge_response_format

    prompts = load_prompt_set("v1")
    rng = random.Random(seed)
    questions = kb_questions()
    bodies = []
    for i in range(count):
        request = make_request(rng, 20_000_000 + i, questions)
        if i % 2:
            metric = "confidence_tone"
            messages = prompts.render(metric, cot=request["cot"])
        else:
            metric = "causal_attribution"
            messages = prompts.render(
                metric,
                cot=request["cot"],
                question=request["question"],
                modification_description="No description of a modification was provided.",
                final_answer="yes",
            )
        body = {
            "model": "fake-judge",
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": 0.0,
            "max_tokens": 1024,
            "seed": 0,
            "response_format": judge_response_format(metric),
        }
        bodies.append(orjson.dumps(body))
    return bodies


async def bare_client(
    server: FakeJudgeProcess, bodies: list[bytes], concurrency: int, warm: int
) -> dict[str, Any]:
    """The fake judge's own ceiling: plain aiohttp posts, ``concurrency`` in flight, no pipeline.

    Whatever this loses against ``concurrency / latency`` is lost in the fake server (it parses
    each request on one core, so a burst of arrivals queues) and in the loopback, not in
    FaithJudge.
    """
    import aiohttp

    url = server.base_url + "/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer x"}
    gate = asyncio.Semaphore(concurrency)
    trips: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000)) as session:

        async def post(body: bytes) -> None:
            async with gate:
                t0 = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"fake judge answered {response.status}")
                trips.append(time.perf_counter() - t0)

        await asyncio.gather(*(post(b) for b in bodies[:warm]))
        trips.clear()
        server_cpu0 = server.cpu_seconds()
        c0, w0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(post(b) for b in bodies[warm:]))
        wall = time.perf_counter() - w0
        cpu = time.process_time() - c0
        server_cpu = server.cpu_seconds() - server_cpu0
    calls = len(bodies) - warm
    return {
        "calls": calls,
        "mean_body_bytes": round(sum(len(b) for b in bodies) / len(bodies)),
        "wall_s": round(wall, 3),
        "calls_per_s": round(calls / wall, 1),
        "client_cpu_ms_per_call": round(1000 * cpu / calls, 3),
        "server_cpu_ms_per_call": round(1000 * server_cpu / calls, 3),
        "server_cpu_utilisation": round(server_cpu / wall, 3),
        "round_trip_ms": {
            "p50": round(1000 * _percentile(trips, 0.5), 1),
            "p95": round(1000 * _percentile(trips, 0.95), 1),
            "max": round(1000 * max(trips, default=0.0), 1),
        },
        "load_average_after": load_average(),
    }


def openai_settings(base_url: str, data_dir: Path, concurrency: int, transport: str) -> Settings:
    return Settings(
        judge="openai:fake-judge",
        openai_base_url=base_url,
        openai_api_key="x",
        cache=False,
        concurrency=concurrency,
        data_dir=data_dir,
        http_transport=transport,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000, help="items of part 1 (default 3000)")
    parser.add_argument("--latency-ms", type=float, default=500.0, help="fake judge latency")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument(
        "--ref-items", type=int, default=1500, help="items of the no-HTTP part 1 reference"
    )
    parser.add_argument("--cpu-items", type=int, default=1500, help="items of parts 2 and 3")
    parser.add_argument("--warmup-items", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="part 2 rounds per transport")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-part1", action="store_true")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="cProfile the part 2 runs and print the top N functions (implies --no-write)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    machine = machine_facts()
    _judge.register()
    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": args.items,
            "latency_ms": args.latency_ms,
            "concurrency": args.concurrency,
            "ref_items": args.ref_items,
            "cpu_items": args.cpu_items,
            "warmup_items": args.warmup_items,
            "rounds": args.rounds,
            "seed": args.seed,
            "cot_chars": [1500, 3000],
            "fake_quote_mode": "first_sentence",
        },
    }
    with tempfile.TemporaryDirectory(prefix="fj-bench-") as tmp:
        tmpdir = Path(tmp)
        warmup = tmpdir / "warmup.jsonl"
        write_items(warmup, args.warmup_items, args.seed + 1, first_index=10_000_000)

        # ---- part 1: efficiency at the configured latency
        if not args.skip_part1:
            source = tmpdir / "part1.jsonl"
            write_items(source, args.items, args.seed)
            with FakeJudgeProcess(args.latency_ms, tmpdir) as server:
                settings = openai_settings(
                    server.base_url, tmpdir / "data1", args.concurrency, "aiohttp"
                )
                run = run_once(settings, warmup, source, tmpdir / "part1.out.jsonl", server)
            ideal = args.concurrency / (args.latency_ms / 1000.0)
            efficiency = run["calls_per_s"] / ideal
            result["part1_efficiency"] = {
                **run,
                "transport": "aiohttp",
                "ideal_calls_per_s": round(ideal, 1),
                "efficiency": round(efficiency, 3),
                "target_efficiency": TARGET_EFFICIENCY,
                "pass": efficiency >= TARGET_EFFICIENCY,
            }
            print(
                f"part 1: {run['items']} items, {run['judge_calls']} calls in "
                f"{run['wall_s']:.1f} s -> {run['calls_per_s']:.1f} calls/s of ideal "
                f"{ideal:.0f}: efficiency {efficiency:.3f} (target >= {TARGET_EFFICIENCY}) "
                f"{'PASS' if efficiency >= TARGET_EFFICIENCY else 'FAIL'}"
            )
            print(
                f"        client CPU {run['client_cpu_ms_per_call']:.2f} ms/call "
                f"({100 * run['client_cpu_utilisation']:.0f}% of a core); server CPU "
                f"{run['server_cpu_ms_per_call']:.2f} ms/call; other processes "
                f"{100 * run['other_processes_cpu_utilisation']:.0f}% of a core; "
                f"loop lag p50/p95/max {run['loop_lag_ms']['p50']}/{run['loop_lag_ms']['p95']}/"
                f"{run['loop_lag_ms']['max']} ms; statuses {run['statuses']}"
            )

            # ---- part 1 reference: the same latency from an in-process judge (no HTTP)
            if args.ref_items > 0:
                ref_source = tmpdir / "part1ref.jsonl"
                write_items(ref_source, args.ref_items, args.seed)
                settings = Settings(
                    judge=f"bench:sleeping@{args.latency_ms:g}",
                    cache=False,
                    concurrency=args.concurrency,
                    data_dir=tmpdir / "data1ref",
                )
                ref = run_once(settings, warmup, ref_source, tmpdir / "part1ref.out.jsonl", None)
                ref["efficiency"] = round(ref["calls_per_s"] / ideal, 3)
                result["part1_reference_no_http"] = ref
                print(
                    f"part 1 reference (in-process judge sleeping {args.latency_ms:g} ms, no "
                    f"HTTP): {ref['items']} items -> {ref['calls_per_s']:.1f} calls/s, efficiency "
                    f"{ref['efficiency']:.3f}, client CPU {ref['client_cpu_ms_per_call']:.2f} "
                    f"ms/call, loop lag p95 {ref['loop_lag_ms']['p95']} ms"
                )

            # ---- part 1 ceiling: a bare aiohttp client against the same fake judge process
            if args.ref_items > 0:
                bodies = bare_bodies(3 * args.ref_items + 300, args.seed)
                with FakeJudgeProcess(args.latency_ms, tmpdir) as server:
                    bare = asyncio.run(bare_client(server, bodies, args.concurrency, warm=300))
                bare["efficiency"] = round(bare["calls_per_s"] / ideal, 3)
                result["part1_ceiling_bare_client"] = bare
                print(
                    f"part 1 ceiling (bare aiohttp client, no pipeline, same fake judge): "
                    f"{bare['calls']} calls -> {bare['calls_per_s']:.1f} calls/s, efficiency "
                    f"{bare['efficiency']:.3f}; round trip p50/p95 {bare['round_trip_ms']['p50']}/"
                    f"{bare['round_trip_ms']['p95']} ms for a {args.latency_ms:g} ms latency; "
                    f"client {bare['client_cpu_ms_per_call']:.2f}, server "
                    f"{bare['server_cpu_ms_per_call']:.2f} ms CPU/call"
                )

        # ---- part 2: client CPU per call at latency 0, per transport
        source = tmpdir / "part2.jsonl"
        write_items(source, args.cpu_items, args.seed + 2)
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TRANSPORTS}
        with FakeJudgeProcess(0.0, tmpdir) as server:
            for r in range(args.rounds):
                for transport in TRANSPORTS:
                    settings = openai_settings(
                        server.base_url, tmpdir / f"data2-{transport}", args.concurrency, transport
                    )
                    output = tmpdir / f"part2.{transport}.{r}.out.jsonl"
                    run = run_once(settings, warmup, source, output, server, args.profile)
                    runs[transport].append(run)
                    print(
                        f"part 2: {transport:7s} {run['calls_per_s']:7.1f} calls/s, client "
                        f"{run['client_cpu_ms_per_call']:.3f} ms CPU/call "
                        f"({100 * run['client_cpu_utilisation']:.0f}% of a core), server "
                        f"{run['server_cpu_ms_per_call']:.3f} ms CPU/call "
                        f"({100 * run['server_cpu_utilisation']:.0f}%), others "
                        f"{100 * run['other_processes_cpu_utilisation']:.0f}%"
                    )

        def best(transport: str) -> dict[str, Any]:
            return max(runs[transport], key=lambda run: run["calls_per_s"])

        faster = max(TRANSPORTS, key=lambda t: best(t)["calls_per_s"])
        slower = min(TRANSPORTS, key=lambda t: best(t)["calls_per_s"])
        result["part2_client_cpu"] = {
            "latency_ms": 0,
            "runs": runs,
            "summary": {
                t: {
                    "calls_per_s": best(t)["calls_per_s"],
                    "client_cpu_ms_per_call": best(t)["client_cpu_ms_per_call"],
                    "server_cpu_ms_per_call": best(t)["server_cpu_ms_per_call"],
                }
                for t in TRANSPORTS
            },
            "faster_transport": faster,
            "speedup": round(best(faster)["calls_per_s"] / best(slower)["calls_per_s"], 3),
        }

        # ---- part 3: the same items with no HTTP at all (in-process instant judge)
        settings = Settings(
            judge="bench:instant",
            cache=False,
            concurrency=args.concurrency,
            data_dir=tmpdir / "data3",
        )
        run = run_once(settings, warmup, source, tmpdir / "part3.out.jsonl", None)
        result["part3_no_http_reference"] = run
        for t in TRANSPORTS:
            overhead = best(t)["client_cpu_ms_per_call"] - run["client_cpu_ms_per_call"]
            result["part2_client_cpu"]["summary"][t]["http_overhead_ms_per_call"] = round(
                overhead, 3
            )
        print(
            f"part 3: no HTTP   {run['calls_per_s']:7.1f} calls/s, client "
            f"{run['client_cpu_ms_per_call']:.3f} ms CPU/call (pipeline alone)"
        )
        summary = result["part2_client_cpu"]["summary"]
        print(
            f"        faster transport: {faster} ({result['part2_client_cpu']['speedup']}x); "
            + ", ".join(
                f"{t} HTTP overhead {summary[t]['http_overhead_ms_per_call']:.3f} ms/call"
                for t in TRANSPORTS
            )
        )

    result["machine"] = machine
    result["duration_s"] = round(time.perf_counter() - started, 1)
    print(f"took {result['duration_s']} s; load average now {load_average()}")
    if not args.no_write and not args.profile:
        print(f"wrote {write_result(NAME, result)}")
    return result


if __name__ == "__main__":
    main()
