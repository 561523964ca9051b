"""Peak memory (RSS) and speed of a 100,000-line run whose every judge call is a cache hit.

1. Generate ``--items`` (100,000) ScoreRequest lines: distinct item ids, seeded CoTs of
   1.5-3 KB (half of them with smart quotes, a ligature and a no-break space), questions from
   the starter KB (``knowledge_base/cxr_vqa.json``) so that clinical fidelity has a KB entry.
2. Pass 1 (warm): fill the response cache with ``score_file`` run in child processes using an
   in-process instant judge (``benchmarks/_judge.py``, registered as ``bench``; no
   HTTP). To fit the time budget the lines are split over ``--warm-workers`` children (one per
   core by default) that share one cache file.
3. Pass 2 (measured): a FRESH child (``python -m benchmarks.cached_run_memory --child ...``)
   scores the whole file again with the same judge spec and cache; every call must be a
   cache hit. Its peak RSS comes from ``os.wait4`` (``ru_maxrss`` of that child alone), with
   psutil polling as a cross-check. The script fails unless pass 2 made zero judge calls.

Target: pass 2 peak RSS <= 300 MB. Run: ``python -m benchmarks.cached_run_memory [--items N]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from benchmarks._common import (
    REPO_ROOT,
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    write_result,
)

NAME = "cached_run_memory"
TARGET_PEAK_RSS_MB = 300.0
JUDGE_SPEC = "bench:fast-judge"


# ---------------------------------------------------------------- child: one score_file run


async def fill_cache(scorer: Any, source: Path) -> int:
    """Warm the cache without ``score_file``: build each item's three judge requests exactly as
    ``Scorer._grade`` does, ask the judge, and store the answers under the request's key.

    About 3x faster than a full ``score_file`` pass (no retry wrapper, no verification, no
    result lines). It uses the Scorer's private request-building steps; should they change, the
    keys stop matching and pass 2's zero-judge-calls check fails loudly.
    """
    from faithjudge.judges.base import JudgeRequest
    from faithjudge.transport.cache import cache_key
    from faithjudge_client.lines import ScoreRequest

    caller = scorer._caller
    judge, cache = caller.judge, caller.cache
    items = 0
    with source.open("rb") as handle:
        for raw in handle:
            request = ScoreRequest.model_validate_json(raw)
            prepared = scorer._prepare(request)
            for metric in request.metrics:
                inputs = scorer._inputs(metric, request, prepared)
                judge_request = JudgeRequest(
                    metric=metric,
                    messages=scorer._prompts.render(metric, **inputs),
                    response_schema=scorer._schemas[metric],
                    schema_name=metric,
                    inputs=inputs,
                    item_id=request.item_id,
                )
                material = judge.cache_key_material(judge_request)
                cache.put(cache_key(material), await judge.judge(judge_request))
            items += 1
    return items


def child_main(args: argparse.Namespace) -> None:
    """Score ``--input`` into ``--output`` with the bench judge and the cache in ``--data``."""
    import tracemalloc

    import anyio
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.runners.file_runner import score_file
    from faithjudge.settings import Settings

    from benchmarks import _judge

    if args.trace_memory:
        tracemalloc.start(25)
    _judge.register()
    settings = Settings(
        judge=JUDGE_SPEC,
        cache=True,
        concurrency=args.concurrency,
        data_dir=Path(args.data_dir),
    )
    me = psutil.Process()

    async def run() -> dict[str, Any]:
        async with open_scorer(settings) as scorer:
            rss_ready = me.memory_info().rss
            c0, w0 = time.process_time(), time.perf_counter()
            if args.mode == "direct":
                items = await fill_cache(scorer, Path(args.input))
                extra: dict[str, Any] = {}
            else:
                summary = await score_file(
                    scorer, Path(args.input), Path(args.output), concurrency=args.concurrency
                )
                items = summary.scored
                extra = {
                    "input_errors": summary.input_errors,
                    "outcomes": summary.totals(),
                }
            wall = time.perf_counter() - w0
            cpu = time.process_time() - c0
            caller = getattr(scorer, "_caller", None)
            stats = getattr(caller, "stats", None)
        return {
            "mode": args.mode,
            "items": items,
            **extra,
            "wall_s": wall,
            "cpu_s": cpu,
            "rss_ready_mb": rss_ready / 2**20,
            "cache_hits": getattr(stats, "cache_hits", None),
            "caller_judge_calls": getattr(stats, "judge_calls", None),
        }

    out = anyio.run(run)
    out["judge_calls"] = _judge.total_calls()
    out["self_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.trace_memory:
        snapshot = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        out["tracemalloc"] = {
            "current_mb": current / 2**20,
            "peak_mb": peak / 2**20,
            "top": [
                f"{stat.size / 2**20:.1f} MB in {stat.count} blocks: {stat.traceback[0]}"
                for stat in snapshot.statistics("lineno")[:15]
            ],
        }
    Path(args.result_file).write_bytes(orjson.dumps(out))
    print(f"child: {out['items']} items, {out['judge_calls']} judge calls", flush=True)


# ---------------------------------------------------------------- parent


def generate(
    path: Path, shards: list[Path], count: int, seed: int, cot_chars: tuple[int, int]
) -> dict[str, Any]:
    """Write the input file and its round-robin shards (for the parallel warm pass)."""
    rng = random.Random(seed)
    questions = kb_questions()
    total_cot = 0
    sinks = [shard.open("wb") for shard in shards]
    try:
        with path.open("wb") as sink:
            for i in range(count):
                request = make_request(rng, i, questions, cot_chars=cot_chars)
                total_cot += len(request["cot"])
                line = orjson.dumps(request) + b"\n"
                sink.write(line)
                sinks[i % len(sinks)].write(line)
    finally:
        for handle in sinks:
            handle.close()
    return {"mean_cot_chars": round(total_cot / max(1, count)), "bytes": path.stat().st_size}


def spawn_child(
    input_path: Path,
    output: Path,
    data_dir: Path,
    result_file: Path,
    args: argparse.Namespace,
    mode: str,
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.cached_run_memory",
        "--child",
        "--input",
        str(input_path),
        "--output",
        str(output),
        "--data-dir",
        str(data_dir),
        "--result-file",
        str(result_file),
        "--concurrency",
        str(args.concurrency),
        "--mode",
        mode,
    ]
    if args.trace_memory:
        command.append("--trace-memory")
    return subprocess.Popen(command, cwd=REPO_ROOT)


def wait_children(procs: list[subprocess.Popen[bytes]]) -> list[dict[str, Any]]:
    """Wait for every child with ``os.wait4``; per child: exit code, ru_maxrss, polled RSS."""
    pending = {proc.pid: proc for proc in procs}
    watched = {proc.pid: psutil.Process(proc.pid) for proc in procs}
    polled_max = dict.fromkeys(pending, 0)
    timeline: dict[int, list[tuple[float, float]]] = {pid: [] for pid in pending}
    out: dict[int, dict[str, Any]] = {}
    start = time.perf_counter()
    last_sample = -10.0
    while pending:
        for pid in list(pending):
            done_pid, status, usage = os.wait4(pid, os.WNOHANG)
            if done_pid == 0:
                try:
                    rss = watched[pid].memory_info().rss
                except psutil.Error:
                    continue
                polled_max[pid] = max(polled_max[pid], rss)
                now = time.perf_counter() - start
                if now - last_sample >= 10:
                    timeline[pid].append((round(now, 1), round(rss / 2**20, 1)))
                continue
            proc = pending.pop(pid)
            proc.returncode = os.waitstatus_to_exitcode(status)
            out[pid] = {
                "exit_code": proc.returncode,
                "wall_s": round(time.perf_counter() - start, 2),
                "peak_rss_mb_wait4": round(usage.ru_maxrss / 1024, 1),
                "peak_rss_mb_polled": round(polled_max[pid] / 2**20, 1),
                "rss_timeline_mb": timeline[pid],
            }
        if time.perf_counter() - start - last_sample >= 10:
            last_sample = time.perf_counter() - start
        time.sleep(0.2)
    return [out[proc.pid] for proc in procs]


def run_pass(
    label: str,
    inputs: list[Path],
    outputs: list[Path],
    data_dir: Path,
    workdir: Path,
    args: argparse.Namespace,
    mode: str,
) -> dict[str, Any]:
    load0 = load_average()
    results = [workdir / f"{label}.{i}.result.json" for i in range(len(inputs))]
    start = time.perf_counter()
    procs = [
        spawn_child(src, out, data_dir, res, args, mode)
        for src, out, res in zip(inputs, outputs, results, strict=True)
    ]
    waited = wait_children(procs)
    wall = time.perf_counter() - start
    children = []
    for waited_info, result_file in zip(waited, results, strict=True):
        if waited_info["exit_code"] != 0:
            raise SystemExit(f"{label}: a child failed with exit code {waited_info['exit_code']}")
        child = orjson.loads(result_file.read_bytes())
        children.append({**waited_info, **child})
    items = sum(child["items"] for child in children)
    return {
        "mode": mode,
        "children": len(children),
        "items": items,
        "wall_s": round(wall, 2),
        "items_per_s": round(items / wall, 1),
        "score_file_items_per_s": round(items / max(c["wall_s"] for c in children), 1),
        "judge_calls": sum(c["judge_calls"] for c in children),
        "cache_hits": sum(c["cache_hits"] or 0 for c in children),
        "peak_rss_mb": max(c["peak_rss_mb_wait4"] for c in children),
        "load_average_before": load0,
        "load_average_after": load_average(),
        "per_child": [
            {
                key: (round(value, 3) if isinstance(value, float) else value)
                for key, value in child.items()
            }
            for child in children
        ],
    }


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="lines (default 100000)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--cot-min", type=int, default=1500)
    parser.add_argument("--cot-max", type=int, default=3000)
    parser.add_argument(
        "--warm-workers",
        type=int,
        default=max(1, min(4, len(os.sched_getaffinity(0)))),
        help="parallel children of the warm pass (default: one per core)",
    )
    parser.add_argument(
        "--warm-mode",
        choices=("direct", "score_file"),
        default="direct",
        help="pass 1: fill the cache directly (fast, default) or through score_file",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep files here")
    parser.add_argument("--trace-memory", action="store_true", help="tracemalloc in children")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    # child mode
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="score_file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args)
        return None

    started = time.perf_counter()
    machine = machine_facts()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fj-cached-run-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        source = workdir / "input.jsonl"
        shards = [workdir / f"input.shard{i}.jsonl" for i in range(args.warm_workers)]
        t0 = time.perf_counter()
        data = generate(source, shards, args.items, args.seed, (args.cot_min, args.cot_max))
        data["generate_s"] = round(time.perf_counter() - t0, 1)
        print(
            f"generated {args.items} lines ({data['bytes'] / 2**20:.0f} MB, CoT mean "
            f"{data['mean_cot_chars']} chars) in {data['generate_s']} s"
        )
        data_dir = workdir / "data"

        warm = run_pass(
            "pass1",
            shards,
            [workdir / f"pass1.shard{i}.out.jsonl" for i in range(len(shards))],
            data_dir,
            workdir,
            args,
            args.warm_mode,
        )
        print(
            f"pass 1 (warm, {args.warm_mode}, {warm['children']} children): {warm['items']} "
            f"items in {warm['wall_s']} s -> {warm['items_per_s']} items/s; "
            f"{warm['judge_calls']} judge calls; peak RSS {warm['peak_rss_mb']} MB/child"
        )
        cache_bytes = sum(p.stat().st_size for p in data_dir.glob("cache.sqlite3*"))

        cached = run_pass(
            "pass2", [source], [workdir / "pass2.out.jsonl"], data_dir, workdir, args, "score_file"
        )
        zero_calls = cached["judge_calls"] == 0
        all_hits = cached["cache_hits"] == 3 * args.items
        print(
            f"pass 2 (cached, fresh child): {cached['items']} items in {cached['wall_s']} s -> "
            f"{cached['items_per_s']} items/s; judge calls {cached['judge_calls']}, "
            f"cache hits {cached['cache_hits']}; peak RSS {cached['peak_rss_mb']} MB "
            f"(target <= {TARGET_PEAK_RSS_MB:.0f}): "
            f"{'PASS' if cached['peak_rss_mb'] <= TARGET_PEAK_RSS_MB else 'FAIL'}"
        )
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": args.items,
            "seed": args.seed,
            "concurrency": args.concurrency,
            "cot_chars": [args.cot_min, args.cot_max],
            "warm_workers": args.warm_workers,
            "warm_mode": args.warm_mode,
            "judge": JUDGE_SPEC,
            "trace_memory": args.trace_memory,
        },
        "data": {**data, "cache_file_mb": round(cache_bytes / 2**20, 1)},
        "pass1_warm": warm,
        "pass2_cached": cached,
        "headline": {
            "pass2_peak_rss_mb": cached["peak_rss_mb"],
            "target_peak_rss_mb": TARGET_PEAK_RSS_MB,
            "pass": cached["peak_rss_mb"] <= TARGET_PEAK_RSS_MB,
            "pass2_items_per_s": cached["items_per_s"],
            "pass1_items_per_s": warm["items_per_s"],
            "pass1_peak_rss_mb_per_child": warm["peak_rss_mb"],
            "pass2_zero_judge_calls": zero_calls,
            "pass2_all_cache_hits": all_hits,
        },
        "machine": machine,
        "duration_s": round(time.perf_counter() - started, 1),
    }
    print(f"took {result['duration_s']} s; load average now {load_average()}")
    if not args.no_write:
        print(f"wrote {write_result(NAME, result)}")
    if not zero_calls:
        raise SystemExit(f"pass 2 made {cached['judge_calls']} judge calls, expected 0")
    if not all_hits:
        raise SystemExit(f"pass 2 had {cached['cache_hits']} cache hits, expected {3 * args.items}")
    return result


if __name__ == "__main__":
    main()
