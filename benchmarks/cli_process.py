"""The ``faithjudge`` command as a user runs it: start-up, and a whole scoring process.

Part 1 (start-up): ``faithjudge --help`` and ``faithjudge version`` as fresh processes, median of
``--repeats`` (15) runs each, wall time from spawn to exit. Reference in the same run: the bare
interpreter (``python -c pass``), so the figure minus the reference is what FaithJudge adds.

Part 2 (whole-process efficiency): ``faithjudge score`` on ``--items`` (2000) items against the
fake judge as its own process (``--latency-ms`` 500, the ``openai`` evaluator, no cache,
``--concurrency`` 100). The wall time includes interpreter start-up, imports, building the
scorer, reading and writing the files, and shut-down:

    efficiency = (3 * items / wall) / (concurrency / latency)      target >= 0.9

Run: ``python -m benchmarks.cli_process``.
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
from benchmarks.pipeline_efficiency import FakeJudgeProcess, write_items

NAME = "cli_process"
TARGET_STARTUP_S = 0.5
TARGET_EFFICIENCY = 0.9
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


def whole_process(items: int, latency_ms: float, concurrency: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fj-cli-") as tmp:
        work = Path(tmp)
        source = work / "in.jsonl"
        write_items(source, items, seed=7)
        with FakeJudgeProcess(latency_ms, work) as judge:
            env = {
                **os.environ,
                "OPENAI_BASE_URL": judge.base_url,
                "OPENAI_API_KEY": "sk-bench",
                "FAITHJUDGE_DATA_DIR": str(work / "data"),
            }
            load0 = load_average()
            wall, code = _timed(
                [FAITHJUDGE, "score", str(source), "-o", str(work / "out.jsonl"), "--evaluator",
                 "openai:fake-judge", "--no-cache", "--no-progress", "--concurrency",
                 str(concurrency)],
                env=env,
            )  # fmt: skip
            load1 = load_average()
        lines = (work / "out.jsonl").read_bytes().splitlines()
        valid = sum(
            1
            for raw in lines
            for metric in orjson.loads(raw).get("metrics", {}).values()
            if metric["status"] == "valid"
        )
    calls = 3 * items
    ideal = concurrency / (latency_ms / 1000.0)
    achieved = calls / wall
    return {
        "items": items,
        "calls": calls,
        "exit_code": code,
        "result_lines": len(lines),
        "valid_grades": valid,
        "latency_ms": latency_ms,
        "concurrency": concurrency,
        "wall_s": round(wall, 3),
        "ideal_wall_s": round(calls / ideal, 3),
        "calls_per_s": round(achieved, 1),
        "efficiency": round(achieved / ideal, 4),
        "target": TARGET_EFFICIENCY,
        "load_average_before_after": [load0, load1],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=100)
    args = parser.parse_args(argv)
    result = {
        "machine": machine_facts(),
        "startup": startup(args.repeats),
        "startup_target_s": TARGET_STARTUP_S,
        "score_process": whole_process(args.items, args.latency_ms, args.concurrency),
    }
    path = write_result(NAME, result)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    print(f"written to {path}")


if __name__ == "__main__":
    main()
