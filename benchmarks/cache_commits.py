"""What keeping every paid answer costs: the response cache committing at the end of each loop turn.

A judge answer put in the cache on a running event loop is committed at the end of that loop
turn, so a process killed mid-run loses only the requests still unanswered. The worst case for
that rule is one answer per turn, one SQLite transaction per answer. This benchmark puts
``--answers`` answers (``--chars`` of text each, the size of a judge reply) that way, and, as the
reference in the same run, the same answers committed 256 at a time (the cache's batches, what
a put outside an event loop still gets). It reports the client CPU per answer of both, their
ratio, and the difference against the pipeline's CPU per judge call quoted in the README.

Run: ``python -m benchmarks.cache_commits``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.cache import ResponseCache

from benchmarks._common import load_average, machine_facts, median, write_result

NAME = "cache_commits"
PIPELINE_CPU_PER_CALL_MS = 2.5
"""Client CPU per judge call of the whole pipeline (README, performance section)."""


def _answers(count: int, chars: int) -> list[tuple[str, JudgeResponse]]:
    text = ('{"score": 4, "rationale": "' + "x" * chars)[:chars] + '"}'
    return [
        (f"{i:064x}", JudgeResponse(text=text, model="m", usage=Usage(900, 120)))
        for i in range(count)
    ]


async def _per_turn(cache: ResponseCache, answers: list[tuple[str, JudgeResponse]]) -> None:
    for key, response in answers:
        cache.put(key, response)
        await asyncio.sleep(0)  # the next turn: this answer's commit runs first
    cache.flush()


def _batched(cache: ResponseCache, answers: list[tuple[str, JudgeResponse]]) -> None:
    for key, response in answers:
        cache.put(key, response)
    cache.flush()


def _measure(mode: str, answers: list[tuple[str, JudgeResponse]], folder: Path) -> float:
    """CPU seconds to store ``answers`` into a fresh cache file, by ``mode``."""
    path = folder / f"{mode}-{time.monotonic_ns()}.sqlite3"
    with ResponseCache(path) as cache:
        started = time.process_time()
        if mode == "per_turn":
            asyncio.run(_per_turn(cache, answers))
        else:
            _batched(cache, answers)
        spent = time.process_time() - started
        assert len(cache) == len(answers)
    return spent


def summary_rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """The headline row for ``benchmarks.run_all``."""
    found = results.get(NAME)
    if not found:
        return []
    us = found["cpu_us_per_answer"]
    return [
        (
            "Response cache: every answer committed at the end of its loop turn (worst case, "
            "one per turn) vs in batches of 256",
            f"{us['per_turn']:.1f} vs {us['batched']:.1f} µs CPU per answer "
            f"({found['share_of_pipeline_cpu_per_call']:.1%} of the pipeline's CPU per call)",
            "reference",
            "—",
        )
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20_000)
    parser.add_argument("--chars", type=int, default=1_500, help="characters of each answer")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each mode")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)

    answers = _answers(args.answers, args.chars)
    seconds: dict[str, list[float]] = {"per_turn": [], "batched": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for mode in ("per_turn", "batched"):  # alternating: drift hits both alike
                seconds[mode].append(_measure(mode, answers, Path(tmp)))
    us = {mode: median(v) / args.answers * 1e6 for mode, v in seconds.items()}
    extra_ms = (us["per_turn"] - us["batched"]) / 1000
    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": vars(args) | {"reference": "the same answers committed 256 at a time"},
        "cpu_s": seconds,
        "cpu_us_per_answer": us,
        "ratio_per_turn_over_batched": us["per_turn"] / us["batched"],
        "extra_ms_per_answer": extra_ms,
        "share_of_pipeline_cpu_per_call": extra_ms / PIPELINE_CPU_PER_CALL_MS,
        "machine": machine_facts(),
        "load_average": load_average(),
    }
    print(
        f"response cache, {args.answers:,} answers of {args.chars:,} chars, median of "
        f"{args.rounds} rounds: committed at the end of each loop turn "
        f"{us['per_turn']:.1f} µs CPU per answer, in batches of 256 {us['batched']:.1f} µs "
        f"({result['ratio_per_turn_over_batched']:.2f}×); the difference is "
        f"{result['share_of_pipeline_cpu_per_call']:.1%} of the pipeline's "
        f"{PIPELINE_CPU_PER_CALL_MS} ms per call"
    )
    if not args.no_write:
        write_result(NAME, result)
    return result


if __name__ == "__main__":
    main()
