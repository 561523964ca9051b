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
load average).

Items/s from different machines do not compare (one revision has measured 570 items/s on one of
this project's 2-vCPU machines and under 420 on another). ``--reference REV`` measures the code
of another git revision too, with the same interpreter, packages and items, alternating with
this tree for ``--rounds`` rounds, and reports the ratio of the medians: a figure that holds
across machines.

Run: ``python -m benchmarks.lexicon_speed [--items N] [--repeats R] [--reference REV]``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import orjson
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.scoring.lexicon import clear_memos
from faithjudge.settings import Settings

from benchmarks._common import (
    REPO_ROOT,
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    median,
    write_result,
)

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
        # as the CLI passes it (the scorer then takes one item at a time for this judge)
        summary = await score_file(scorer, source, output, concurrency=settings.concurrency)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return (
        elapsed,
        cpu,
        Counter(summary.totals()),
    )


class _Run(NamedTuple):
    seconds: list[float]
    cpu_seconds: list[float]
    statuses: Counter[str]


def _measure(source: Path, tmp: Path, repeats: int) -> _Run:
    settings = Settings(judge="lexicon:v1", data_dir=tmp / "data", cache=False)
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    statuses: Counter[str] = Counter()
    for repeat in range(repeats):
        output = tmp / f"out-{repeat}.jsonl"
        clear_memos()  # every repeat starts cold (a fresh scorer, no sentence memos)
        elapsed, cpu, statuses = anyio.run(_run, settings, source, output)
        seconds.append(elapsed)
        cpu_seconds.append(cpu)
        output.unlink()
    return _Run(seconds, cpu_seconds, statuses)  # the statuses of the last repeat


def _measure_reference(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The same benchmark run by the code of another revision (checked out at ``tree``), with
    this interpreter and these packages; its result file, read back."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.lexicon_speed",
            "--items",
            str(args.items),
            "--repeats",
            str(args.repeats),
            "--seed",
            str(args.seed),
        ],
        cwd=tree,  # ``-m`` puts the tree first on sys.path: its packages are the ones measured
        env=_tree_env(tree),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    result: dict[str, Any] = orjson.loads(
        (tree / "benchmarks/results/lexicon_speed.json").read_bytes()
    )
    return result


def _tree_env(tree: Path) -> dict[str, str]:
    """The environment that imports the tree's own packages: a src-layout tree's ``faithjudge``
    and ``faithjudge_client`` come before the installed (editable) ones; an older tree's
    top-level packages are found through the working directory."""
    roots = (
        [tree / "service", tree / "clients"] if (tree / "service" / "faithjudge").is_dir() else []
    )
    path = os.pathsep.join([*map(str, roots), str(tree)])
    return {**os.environ, "PYTHONPATH": path}


@contextmanager
def _checkout(rev: str, into: Path) -> Iterator[Path]:
    git = ["git", "-C", str(REPO_ROOT)]
    added = subprocess.run(
        [*git, "worktree", "add", "--detach", "--quiet", str(into), rev],
        capture_output=True,
        text=True,
        check=False,
    )
    if added.returncode != 0:
        sys.exit(f"--reference {rev}: git could not check it out: {added.stderr.strip()}")
    try:
        yield into
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(into)], check=False)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reference",
        metavar="REV",
        help="also measure the code of git revision REV, alternating with this tree, and "
        "report the ratio (figures from different machines do not compare; a ratio does)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --reference")
    args = parser.parse_args(argv)

    core = _pin_one_core()
    reference_runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_dir, ExitStack() as stack:
        tmp = Path(tmp_dir)
        source = tmp / "requests.jsonl"
        mean_chars = _write_requests(source, args.items, args.seed)
        tree = (
            stack.enter_context(_checkout(args.reference, tmp / "ref")) if args.reference else None
        )
        runs: list[_Run] = []
        for _ in range(args.rounds if tree is not None else 1):
            runs.append(_measure(source, tmp, args.repeats))
            if tree is not None:
                reference_runs.append(_measure_reference(tree, args))
    times = [t for run in runs for t in run.seconds]
    cpu_times = [t for run in runs for t in run.cpu_seconds]
    seconds = median(times)
    cpu_seconds = median(cpu_times)
    items_per_s = args.items / seconds
    items_per_cpu_s = args.items / cpu_seconds
    payload = {
        "benchmark": NAME,
        "description": __doc__.splitlines()[0],
        "items": args.items,
        "repeats": args.repeats * len(runs),
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
        "metric_statuses_last_run": dict(sorted(runs[-1].statuses.items())),
        "reference": _reference_summary(args.reference, runs, reference_runs, args.items),
        "load_average_after": load_average(),
        "machine": machine_facts(),
    }
    path = write_result(NAME, payload)
    print(
        f"{items_per_s:.1f} items/s wall, {items_per_cpu_s:.1f} items per CPU second "
        f"(target {TARGET_ITEMS_PER_S:.0f}; load {payload['load_average_after']}) -> {path}"
    )
    if payload["reference"] is not None:
        ref = payload["reference"]
        print(
            f"{ref['ratio_cpu']:.2f}x the items per CPU second of {args.reference} "
            f"({ref['items_per_cpu_s']:.1f}), alternating {len(runs)} rounds; best repeats "
            f"{ref['this_tree_best_items_per_cpu_s']:.1f} vs {ref['best_items_per_cpu_s']:.1f} "
            f"({ref['ratio_best_cpu']:.2f}x)"
        )
    return payload


def _reference_summary(
    rev: str | None, runs: list[_Run], reference_runs: list[dict[str, Any]], items: int
) -> dict[str, Any] | None:
    """Per round, this tree's median beside the reference's; the ratio of the medians, and
    of the best repeats (other processes only ever slow a repeat down, so the fastest one of
    each side is the figure least disturbed by them)."""
    if rev is None:
        return None
    ours = [items / median(run.cpu_seconds) for run in runs]
    theirs = [float(r["items_per_cpu_s"]) for r in reference_runs]
    ours_wall = [items / median(run.seconds) for run in runs]
    theirs_wall = [float(r["items_per_s"]) for r in reference_runs]
    ours_best = items / min(t for run in runs for t in run.cpu_seconds)
    theirs_best = items / min(t for r in reference_runs for t in r["cpu_seconds_all"])
    return {
        "rev": rev,
        "commit": reference_runs[0]["machine"].get("git_commit"),
        "rounds": len(runs),
        "items_per_cpu_s_rounds": [round(x, 1) for x in theirs],
        "this_tree_items_per_cpu_s_rounds": [round(x, 1) for x in ours],
        "items_per_cpu_s": round(median(theirs), 1),
        "ratio_cpu": round(median(ours) / median(theirs), 3),
        "ratio_wall": round(median(ours_wall) / median(theirs_wall), 3),
        "best_items_per_cpu_s": round(theirs_best, 1),
        "this_tree_best_items_per_cpu_s": round(ours_best, 1),
        "ratio_best_cpu": round(ours_best / theirs_best, 3),
    }


if __name__ == "__main__":
    main()
