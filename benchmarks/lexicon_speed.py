"""Lexicon-judge throughput on one core: full pipeline items/s for ~3 KB CoTs, all three metrics.

Each item is a seeded synthetic ScoreRequest (``benchmarks._common.make_request``, a tagged
~3 KB CoT on a starter-KB question, a third of them with a text hint, some with an image or sham
modification). One *item* is what ``faithjudge score`` does per line with ``lexicon:v1``: parse
the line, resolve the KB entry, render three prompts, run the three lexicon rules, verify the
three answers (parse, schema, evidence) and write the result line. The run goes through
``score_file`` in-process with the cache off.

The process pins itself to one CPU. The figures are medians over ``--repeats`` runs, each on a
fresh output file: ``items_per_s`` from wall-clock time, ``items_per_cpu_s`` from the process's
CPU time (the cost on one core; on a shared machine whose other processes compete for that core,
the wall-clock figure also counts the time spent waiting for it, so both are recorded with the
load average). Run: ``python -m benchmarks.lexicon_speed [--items N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import orjson

from benchmarks._common import (
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    median,
    write_result,
)
from service.runtime import open_scorer
from service.scorefile import score_file
from service.scoring.lexicon import clear_memos
from service.settings import Settings

__all__ = ["main"]

NAME = "lexicon_speed"
TARGET_ITEMS_PER_S = 500.0


def _pin_one_core() -> int | None:
    """Pin to the last usable CPU so the figure is per core; None where unsupported."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})
        return cpus[-1]
    except (AttributeError, OSError):
        return None


def _write_requests(path: Path, items: int, seed: int) -> float:
    rng = random.Random(seed)
    questions = kb_questions()
    lines = [
        orjson.dumps(make_request(rng, i, questions, cot_chars=(2800, 3200))) for i in range(items)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return sum(len(orjson.loads(line)["cot"]) for line in lines) / max(1, items)


async def _run(settings: Settings, source: Path, output: Path) -> tuple[float, float, Counter[str]]:
    async with open_scorer(settings) as scorer:
        start, cpu_start = time.perf_counter(), time.process_time()
        summary = await score_file(scorer, source, output, concurrency=32)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return (
        elapsed,
        cpu,
        Counter(summary.totals()),
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    core = _pin_one_core()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        source = tmp / "requests.jsonl"
        mean_chars = _write_requests(source, args.items, args.seed)
        settings = Settings(evaluator="lexicon:v1", data_dir=tmp / "data", cache=False)
        times: list[float] = []
        cpu_times: list[float] = []
        statuses: Counter[str] = Counter()
        for repeat in range(args.repeats):
            output = tmp / f"out-{repeat}.jsonl"
            clear_memos()  # every repeat starts cold (a fresh scorer, no sentence memos)
            elapsed, cpu, statuses = anyio.run(_run, settings, source, output)
            times.append(elapsed)
            cpu_times.append(cpu)
    seconds = median(times)
    cpu_seconds = median(cpu_times)
    items_per_s = args.items / seconds
    items_per_cpu_s = args.items / cpu_seconds
    payload = {
        "benchmark": NAME,
        "description": __doc__.splitlines()[0],
        "items": args.items,
        "repeats": args.repeats,
        "mean_cot_chars": round(mean_chars, 1),
        "metrics_per_item": 3,
        "pinned_cpu": core,
        "seconds_median": round(seconds, 4),
        "seconds_all": [round(t, 4) for t in times],
        "items_per_s": round(items_per_s, 1),
        "cpu_seconds_median": round(cpu_seconds, 4),
        "cpu_seconds_all": [round(t, 4) for t in cpu_times],
        "items_per_cpu_s": round(items_per_cpu_s, 1),
        "target_items_per_s": TARGET_ITEMS_PER_S,
        "meets_target": items_per_s >= TARGET_ITEMS_PER_S,
        "meets_target_cpu": items_per_cpu_s >= TARGET_ITEMS_PER_S,
        "metric_statuses_last_run": dict(sorted(statuses.items())),
        "load_average_after": load_average(),
        "machine": machine_facts(),
    }
    path = write_result(NAME, payload)
    print(
        f"{items_per_s:.1f} items/s wall, {items_per_cpu_s:.1f} items per CPU second "
        f"(target {TARGET_ITEMS_PER_S:.0f}; load {payload['load_average_after']}) -> {path}"
    )
    return payload


if __name__ == "__main__":
    main()
