"""The ``faithjudge`` command as a user runs it: start-up, and a whole scoring process.

Part 1 (start-up): ``faithjudge --help`` and ``faithjudge version`` as fresh processes, median of
``--repeats`` (15) runs each, wall time from spawn to exit. Reference in the same run: the bare
interpreter (``python -c pass``), so the figure minus the reference is what FaithJudge adds.

Part 2 (whole-process efficiency): ``faithjudge score`` on ``--items`` (2000) items against the
fake judge as its own process (``--latency-ms`` 500, the ``openai`` judge, no cache unless
``--cache``, ``--concurrency`` 100), and in the same run, alternating with it, the raw SDK floor:
a bare ``AsyncOpenAI`` loop as its own process (``benchmarks/_bare_sdk_loop.py``) posting as
many chat bodies at the same concurrency; ``--pairs`` (3) of each, a fresh fake judge for every
process. The wall time includes interpreter start-up, imports, building the scorer, reading and
writing the files, and shut-down. From the times the fake saw each call arrive: start-up (spawn
to first call), ramp-up (calls in the first second after it) and the steady rate (the middle
60 % of the calls), for both processes:

    speed vs bare = bare wall / score wall (median of the pairs)   target >= 0.95
    efficiency = (3 * items / wall) / (concurrency / latency)      target >= 0.9

Run: ``python -m benchmarks.cli_process``; with ``--cache`` the figures go to
``results/cli_process_cache.json``, beside the uncached ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks._common import load_average, machine_facts, write_result
from benchmarks.pipeline_efficiency import FakeJudgeProcess, bare_bodies, write_items

NAME = "cli_process"
TARGET_STARTUP_S = 0.5
TARGET_EFFICIENCY = 0.9
TARGET_VS_BARE = 0.95
FAITHJUDGE = str(Path(sys.executable).with_name("faithjudge"))


def _timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    return time.perf_counter() - began, done.returncode


def startup(repeats: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for label, command in (
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("faithjudge --help", [FAITHJUDGE, "--help"]),
        ("faithjudge version", [FAITHJUDGE, "version"]),
    ):
        _timed(command)  # page cache warm-up
        times = []
        for _ in range(repeats):
            wall, code = _timed(command)
            if code != 0:
                raise RuntimeError(f"{label} exited with {code}")
            times.append(wall)
        rows[label] = {"median_s": round(statistics.median(times), 4),
                       "min_s": round(min(times), 4), "max_s": round(max(times), 4)}  # fmt: skip
    return rows


def _arrival_profile(log: Path, spawned: float, calls: int) -> dict[str, Any]:
    """When the calls of a process reached the fake judge: start-up (spawn to first call),
    calls in the first second after it, and the steady rate (the middle 60 % of the calls)."""
    times = sorted(float(x) for x in log.read_text().split())
    if len(times) < calls:
        raise RuntimeError(f"the fake judge saw {len(times)} of {calls} calls")
    first = times[0]
    low, high = times[calls // 5], times[(4 * calls) // 5]
    return {
        "startup_s": round(first - spawned, 3),
        "calls_in_first_second": sum(1 for t in times if t < first + 1.0),
        "steady_calls_per_s": round(((4 * calls) // 5 - calls // 5) / (high - low), 1),
        "last_call_s": round(times[-1] - spawned, 3),
    }


def _one_process(
    label: str, command: list[str], work: Path, latency_ms: float, calls: int, env: dict[str, str]
) -> dict[str, Any]:
    log = work / f"arrivals-{label}.log"
    log.unlink(missing_ok=True)
    with FakeJudgeProcess(latency_ms, work, "--arrival-log", str(log)) as judge:
        environment = {**env, "OPENAI_BASE_URL": judge.base_url}
        full = [part.replace("{base_url}", judge.base_url) for part in command]
        spawned = time.time()
        wall, code = _timed(full, env=environment)
    if code != 0:
        raise RuntimeError(f"{label} exited with {code}")
    return {"wall_s": round(wall, 3), **_arrival_profile(log, spawned, calls)}


def whole_process(
    items: int, latency_ms: float, concurrency: int, pairs: int, cache: bool
) -> dict[str, Any]:
    """``pairs`` runs each of ``faithjudge score`` and the bare SDK loop, alternating, against a
    fresh fake judge each."""
    calls = 3 * items
    ideal = concurrency / (latency_ms / 1000.0)
    with tempfile.TemporaryDirectory(prefix="fj-cli-") as tmp:
        work = Path(tmp)
        source = work / "in.jsonl"
        write_items(source, items, seed=7)
        bodies = work / "bodies.jsonl"
        bodies.write_bytes(b"\n".join(bare_bodies(calls, seed=7)) + b"\n")
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
        bare_command = [sys.executable, "-m", "benchmarks._bare_sdk_loop", "{base_url}",
                        str(bodies), str(concurrency)]  # fmt: skip
        rows = []
        load0 = load_average()
        for n in range(pairs):
            out = work / f"out-{n}.jsonl"
            score_command = [FAITHJUDGE, "score", str(source), "-o", str(out), "--judge",
                             "openai:fake-judge", "--no-progress", "--concurrency",
                             str(concurrency), "--data-dir", str(work / f"data-{n}"),
                             "--cache" if cache else "--no-cache"]  # fmt: skip
            bare = _one_process("bare", bare_command, work, latency_ms, calls, env)
            score = _one_process("score", score_command, work, latency_ms, calls, env)
            lines = out.read_bytes().splitlines()
            valid = sum(
                1
                for raw in lines
                for metric in orjson.loads(raw).get("metrics", {}).values()
                if metric["status"] == "valid"
            )
            if len(lines) != items or valid != calls:
                raise RuntimeError(f"faithjudge score wrote {len(lines)} lines, {valid} valid")
            rows.append({"bare_sdk_loop": bare, "faithjudge_score": score,
                         "speed_vs_bare": round(bare["wall_s"] / score["wall_s"], 4)})  # fmt: skip
        load1 = load_average()
    median_ratio = statistics.median(row["speed_vs_bare"] for row in rows)
    median_wall = statistics.median(row["faithjudge_score"]["wall_s"] for row in rows)
    return {
        "items": items,
        "calls": calls,
        "latency_ms": latency_ms,
        "concurrency": concurrency,
        "cache": cache,
        "ideal_wall_s": round(calls / ideal, 3),
        "pairs": rows,
        "median_speed_vs_bare": median_ratio,
        "target_speed_vs_bare": TARGET_VS_BARE,
        "median_wall_s": median_wall,
        "efficiency": round(calls / median_wall / ideal, 4),
        "target": TARGET_EFFICIENCY,
        "load_average_before_after": [load0, load1],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--cache", action="store_true", help="score with the response cache on")
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args(argv)
    result = {
        "machine": machine_facts(),
        "startup": None if args.skip_startup else startup(args.repeats),
        "startup_target_s": TARGET_STARTUP_S,
        "score_process": whole_process(
            args.items, args.latency_ms, args.concurrency, args.pairs, args.cache
        ),
    }
    # the cached run is kept beside the uncached one, not over it
    path = write_result(f"{NAME}_cache" if args.cache else NAME, result)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    print(f"written to {path}")


if __name__ == "__main__":
    main()
