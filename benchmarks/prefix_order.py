"""Prefix order against a single-slot server that keeps only its last prompt.

The same ``--items`` (60) lines are scored twice through ``score_file`` (default settings, cache
off): in the order the lines come (each line's CF, CA, CT, then the next line's: the calls are
keyed by nothing, so they go oldest first) and in prefix order (the waiting call sharing the
longest prompt prefix with the one sent last goes first: ``faithjudge.transport.pacing``).

Against the fake judge (``tests/fakes/judge_server.py``, ``last_prompt``: one call at a time,
each prompt read from the first whitespace token that differs from the previous one, reading
costing ``--read-ms-per-token`` (0.2) ms a token): prompt tokens read, the share reused, and the
wall time of each order. With ``--server URL --model NAME`` the same runs go to a real server
(llama-cpp-python, one slot): wall time per grade in each order, and the prompt tokens its
usage reported. Run: ``python -m benchmarks.prefix_order``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from faithjudge.event_loop import run_async
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge.transport import resilience
from faithjudge.transport.judge_servers import forget_servers

from benchmarks._common import load_average, machine_facts, write_result
from benchmarks.pipeline_efficiency import write_items
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge

NAME = "prefix_order"
ORDERS = ("arrival", "prefix")


@contextlib.contextmanager
def _order(order: str) -> Iterator[None]:
    """Calls keyed by nothing go oldest first: the order they arrived in."""
    kept = resilience.prompt_key
    if order == "arrival":
        resilience.prompt_key = lambda request: None  # type: ignore[assignment]
    try:
        yield
    finally:
        resilience.prompt_key = kept


def _run(source: Path, out: Path, base_url: str, model: str, timeout_s: float) -> dict[str, Any]:
    forget_servers()  # each order learns the server afresh, as a new process would
    settings = Settings(judge=f"openai:{model}", cache=False, data_dir=out.parent,
                        openai_base_url=base_url, openai_api_key="sk-bench",
                        timeout_s=timeout_s)  # fmt: skip

    async def go() -> float:
        async with open_scorer(settings, fail_fast=True) as scorer:
            began = time.perf_counter()
            await score_file(scorer, source, out)
            return time.perf_counter() - began

    wall = run_async(go)
    rows = [orjson.loads(raw) for raw in out.read_bytes().splitlines()]
    grades = [m for row in rows for m in row["metrics"].values()]
    return {
        "wall_s": round(wall, 2),
        "grades": len(grades),
        "valid": sum(1 for m in grades if m["status"] == "valid"),
        "s_per_grade": round(wall / max(1, len(grades)), 3),
        "usage_prompt_tokens": sum(row["provenance"]["tokens"]["prompt"] for row in rows),
        "lines_in_order": [row["line"] for row in rows] == sorted(row["line"] for row in rows),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--read-ms-per-token", type=float, default=0.2)
    parser.add_argument("--server", default=None, help="a real server's base URL (…/v1)")
    parser.add_argument("--model", default="fake-judge")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--rounds", type=int, default=1, help="arrival/prefix pairs")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"items": args.items, "machine": machine_facts(), "runs": []}
    load0 = load_average()
    with tempfile.TemporaryDirectory(prefix="fj-prefix-") as tmp:
        work = Path(tmp)
        source = work / "in.jsonl"
        write_items(source, args.items, seed=11)
        for round_ in range(args.rounds):
            for order in ORDERS:
                out = work / f"out-{order}-{round_}.jsonl"
                with _order(order):
                    if args.server is not None:
                        run = _run(source, out, args.server, args.model, args.timeout_s)
                    else:
                        config = FakeJudgeConfig(
                            last_prompt=True, read_s_per_token=args.read_ms_per_token / 1000
                        )
                        with run_fake_judge(config) as fake:
                            run = _run(source, out, fake.base_url, args.model, args.timeout_s)
                            counters = fake.counters
                            run["prompt_tokens_read"] = counters.prompt_tokens_read
                            run["prompt_tokens_reused"] = counters.prompt_tokens_reused
                            run["reused_share"] = round(counters.reused_share, 4)
                run["order"] = order
                result["runs"].append(run)
                print(order, run, flush=True)
    result["load_average_before_after"] = [load0, load_average()]
    by_order = {o: [r for r in result["runs"] if r["order"] == o] for o in ORDERS}
    walls = {o: sum(r["wall_s"] for r in runs) for o, runs in by_order.items()}
    result["prefix_vs_arrival_wall"] = round(walls["prefix"] / walls["arrival"], 3)
    result["server"] = args.server or "fake judge, last_prompt"
    result["model"] = args.model
    path = write_result(NAME if args.server is None else f"{NAME}_real", result)
    print(orjson.dumps({k: v for k, v in result.items() if k != "machine"},
                       option=orjson.OPT_INDENT_2).decode())  # fmt: skip
    print(f"written to {path}")


if __name__ == "__main__":
    main()
