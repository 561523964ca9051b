"""Peak RSS of the service while it ingests, scores and serves a 100,000-line batch.

A real ``faithjudge serve`` (offline ``lexicon:v1`` judge, no cache, SQLite job store) gets
``--items`` (100,000) distinct request lines uploaded through the SDK (streamed from disk, about
``--cot-chars`` characters of CoT each). A thread samples the service process's resident set
every ``--sample-ms`` (20) milliseconds through every phase:

    idle -> upload+ingest -> scoring (SSE wait) -> results download (NDJSON stream of every line)
         -> report (json, then html) -> listing

and the benchmark records each phase's peak (and its own RSS during the upload, to show the SDK
streams the file). Target: overall peak <= 500 MB. To fit the run in a
few minutes on two cores, each line asks for ``--metrics`` (default ``confidence_tone``: one
judge verdict per line instead of three); ``--metrics all`` scores all three and takes about
three times as long to score. Memory is dominated by how lines move (ingest, results, report),
which the metric count does not change. Run: ``python -m benchmarks.service_batch_memory``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
from faithjudge_client import FaithJudgeClient
from faithjudge_client.metric_catalogue import BUILT_IN_METRICS

from benchmarks._common import kb_questions, load_average, machine_facts, make_request, write_result
from benchmarks.service_process import BENCH_KEY, RssSampler, ServiceProcess

NAME = "service_batch_memory"
TARGET_PEAK_MB = 500.0
ALL_METRICS = list(BUILT_IN_METRICS)


def write_lines(path: Path, count: int, seed: int, cot_chars: tuple[int, int], metrics: list[str]):
    rng = random.Random(seed)
    questions = kb_questions()
    with path.open("wb") as sink:
        for i in range(count):
            request = make_request(rng, i, questions, cot_chars=cot_chars)
            request["metrics"] = metrics
            sink.write(orjson.dumps(request) + b"\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--cot-chars", default="300,600", help="min,max CoT characters")
    parser.add_argument("--metrics", default="all", help="comma list, or 'all'")
    parser.add_argument("--sample-ms", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    low, high = (int(x) for x in args.cot_chars.split(","))
    metrics = ALL_METRICS if args.metrics == "all" else args.metrics.split(",")

    started = time.perf_counter()
    machine = machine_facts()
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="fj-bench-memory-") as tmp:
        work = Path(tmp)
        source = work / "items.jsonl"
        t = time.perf_counter()
        write_lines(source, args.items, args.seed, (low, high), metrics)
        timings["generate_s"] = time.perf_counter() - t
        upload_mb = source.stat().st_size / 2**20
        env = {"FAITHJUDGE_JUDGE": "lexicon:v1", "FAITHJUDGE_CACHE": "false"}
        with (
            ServiceProcess(work / "data", work, env) as service,
            RssSampler(service.ps, args.sample_ms / 1000) as rss,
            FaithJudgeClient(service.base_url, BENCH_KEY) as sdk,
        ):
            rss.phase("idle")
            time.sleep(1.0)
            load0 = load_average()
            cpu0 = service.cpu_seconds()

            # the client's own memory during the upload: the SDK streams the file from disk
            with RssSampler(psutil.Process(), args.sample_ms / 1000) as client_rss:
                client_rss.phase("upload")
                accepted = rss.timed(
                    "upload_ingest", timings, sdk.submit_job, source, name="memory"
                )
            final = rss.timed("scoring", timings, sdk.wait, accepted.id)
            lines = rss.timed(
                "results_download", timings, sdk.download_results, accepted.id, work / "r.jsonl"
            )
            report = rss.timed("report_json", timings, sdk.report, accepted.id)
            html = rss.timed("report_html", timings, sdk.report, accepted.id, "html")
            rss.timed("listing", timings, lambda: [sdk.job(accepted.id), sdk.jobs()])
            service_cpu = service.cpu_seconds() - cpu0
            db_mb = sum(p.stat().st_size for p in (work / "data").glob("jobs.sqlite3*")) / 2**20

    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": args.items,
            "cot_chars": [low, high],
            "metrics": metrics,
            "sample_ms": args.sample_ms,
            "seed": args.seed,
            "judge": "lexicon:v1 (no cache)",
            "service": "faithjudge serve (uvicorn, 1 process, SQLite job store)",
        },
        "machine": machine,
        "run": {
            "status": final.status,
            "accepted": accepted.accepted,
            "rejected": len(accepted.rejected),
            "result_lines": lines,
            "metric_counts": final.counts,
            "upload_mb": round(upload_mb, 1),
            "job_store_mb": round(db_mb, 1),
            "report_json_bytes": len(orjson.dumps(report)),
            "report_html_bytes": len(html.encode()),
            "timings_s": {k: round(v, 2) for k, v in timings.items()},
            "ingest_lines_per_s": round(accepted.accepted / timings["upload_ingest_s"], 1),
            "scoring_items_per_s": round(lines / timings["scoring_s"], 1),
            "service_cpu_s": round(service_cpu, 1),
            "rss_samples": rss.samples,
            "peak_rss_mb_by_phase": {k: round(v, 1) for k, v in rss.peaks_mb.items()},
            "client_rss_mb": {k: round(v, 1) for k, v in client_rss.peaks_mb.items()},
            "rss_timeline": rss.timeline,
            "load_average_before": load0,
            "load_average_after": load_average(),
        },
    }
    peak = rss.peak_mb
    result["headline"] = {
        "items": args.items,
        "peak_rss_mb": round(peak, 1),
        "idle_rss_mb": round(rss.peaks_mb.get("idle", 0.0), 1),
        "peak_phase": max(rss.peaks_mb, key=lambda k: rss.peaks_mb[k]),
        "target_peak_rss_mb": TARGET_PEAK_MB,
        "pass": peak <= TARGET_PEAK_MB and lines == args.items and final.status == "completed",
    }
    result["duration_s"] = round(time.perf_counter() - started, 1)
    shown = {k: v for k, v in result["run"].items() if k != "rss_timeline"}
    print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    print(orjson.dumps(result["headline"], option=orjson.OPT_INDENT_2).decode())
    if not args.no_write:
        print(f"wrote {write_result(NAME, result)}")
    return result


if __name__ == "__main__":
    main()
