"""Run every benchmark (default sizes) and print one Markdown table of the headline numbers.

Each benchmark runs as its own process (``python -m benchmarks.NAME``): ``verify_throughput``
pins itself to one core, which must not leak into the others. The table is also written to
``benchmarks/results/summary.md``. ``--from-results`` only rebuilds the table from the JSON
files already in ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks._common import REPO_ROOT, RESULTS_DIR, machine_facts
from benchmarks.audit_scale import summary_rows as audit_rows
from benchmarks.batch_route_scale import summary_rows as batch_route_rows
from benchmarks.cache_commits import summary_rows as cache_commit_rows
from benchmarks.perturbation_speed import summary_rows as perturbation_rows
from benchmarks.prompt_cache import summary_rows as prompt_cache_rows
from benchmarks.service_batch_route import summary_rows as service_batch_route_rows
from benchmarks.service_process import summary_rows as service_rows

BENCHMARKS = (
    "verify_throughput",
    "pipeline_efficiency",
    "cached_run_memory",
    "lexicon_speed",
    "report_scale",
    "generation_speed",
    "perturbation_speed",
    "service_score_latency",
    "service_batch_throughput",
    "service_batch_memory",
    "audit_scale",
    "cli_process",
    "batch_route_scale",
    "service_batch_route",
    "cache_commits",
    "prompt_cache",
)


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    return orjson.loads(path.read_bytes()) if path.exists() else None


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("pass" if ok else "**FAIL**")


def rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """(metric, value, target, pass/fail) rows of the headline numbers."""
    out: list[tuple[str, str, str, str]] = []
    verify = results.get("verify_throughput")
    if verify:
        head = verify["headline"]
        ra = verify["reference_a_jsonschema_only"]
        rb = verify["reference_b_quote_location"]
        out += [
            (
                "Verification throughput, 1 core (normalize + verify x3, ~3 KB CoT)",
                f"{head['items_per_s']:,.0f} items/s",
                f"≥ {head['target_items_per_s']:,.0f} items/s",
                _verdict(head["pass"]),
            ),
            (
                "  (a) stock (pydantic fast path) vs jsonschema-only validation",
                f"{ra['schema_path_ratio']}x ({ra['items_per_s']:,.0f} items/s jsonschema-only)",
                "reference",
                "—",
            ),
            (
                "  (b) locate_quote vs naive partial_ratio_alignment per quote",
                f"{rb['quote_location_ratio']}x ({rb['long_quotes_ratio']}x on quotes ≥ 100 chars)",
                "reference",
                "—",
            ),
        ]
        for label, variant in verify.get("variants", {}).items():
            out.append(
                (
                    f"  sensitivity: {label.replace('_', ' ')} CoTs",
                    f"{variant['items_per_s']:,.0f} items/s",
                    f"≥ {head['target_items_per_s']:,.0f} items/s",
                    _verdict(variant["items_per_s"] >= head["target_items_per_s"]),
                )
            )
    pipeline = results.get("pipeline_efficiency")
    if pipeline:
        part1 = pipeline.get("part1_efficiency")
        if part1:
            out += [
                (
                    f"Pipeline efficiency ({part1['items']:,} items, fake judge "
                    f"{pipeline['config']['latency_ms']:g} ms, concurrency "
                    f"{pipeline['config']['concurrency']})",
                    f"{part1['efficiency']:.3f} ({part1['calls_per_s']:.1f} of "
                    f"{part1['ideal_calls_per_s']:.0f} calls/s)",
                    f"≥ {part1['target_efficiency']}",
                    _verdict(part1["pass"]),
                ),
                (
                    "  client CPU per judge call at 500 ms latency (whole pipeline)",
                    f"{part1['client_cpu_ms_per_call']:.2f} ms "
                    f"(server {part1['server_cpu_ms_per_call']:.2f} ms)",
                    "—",
                    "—",
                ),
            ]
        ref = pipeline.get("part1_reference_no_http")
        if ref:
            out.append(
                (
                    "  same latency from an in-process judge (no HTTP)",
                    f"{ref['efficiency']:.3f} ({ref['client_cpu_ms_per_call']:.2f} ms CPU/call)",
                    "reference",
                    "—",
                )
            )
        bare = pipeline.get("part1_ceiling_bare_client")
        if bare:
            out.append(
                (
                    "  fake judge's own ceiling (bare aiohttp client, no pipeline)",
                    f"{bare['efficiency']:.3f} "
                    f"(round trip p50 {bare['round_trip_ms']['p50']:.0f} ms)",
                    "reference",
                    "—",
                )
            )
        if part1:
            out.append(
                (
                    "  CPU used by other processes during part 1",
                    f"{100 * part1['other_processes_cpu_utilisation']:.0f}% of a core",
                    "—",
                    "—",
                )
            )
        part2 = pipeline["part2_client_cpu"]
        for transport, numbers in part2["summary"].items():
            out.append(
                (
                    f"Max calls/s on one client core, latency 0, {transport}",
                    f"{numbers['calls_per_s']:,.0f} calls/s, "
                    f"{numbers['client_cpu_ms_per_call']:.2f} ms CPU/call "
                    f"(HTTP share {numbers['http_overhead_ms_per_call']:.2f} ms)",
                    "—",
                    "—",
                )
            )
        out.append(
            (
                "  faster transport",
                f"{part2['faster_transport']} ({part2['speedup']}x)",
                "—",
                "—",
            )
        )
        part3 = pipeline.get("part3_no_http_reference")
        if part3:
            out.append(
                (
                    "  pipeline alone (in-process judge, no HTTP)",
                    f"{part3['calls_per_s']:,.0f} calls/s, "
                    f"{part3['client_cpu_ms_per_call']:.2f} ms CPU/call",
                    "reference",
                    "—",
                )
            )
    memory = results.get("cached_run_memory")
    if memory:
        head = memory["headline"]
        items = memory["config"]["items"]
        out += [
            (
                f"Cached run peak RSS ({items:,} lines, pass 2, all cache hits)",
                f"{head['pass2_peak_rss_mb']:.0f} MB",
                f"≤ {head['target_peak_rss_mb']:.0f} MB",
                _verdict(head["pass"]),
            ),
            (
                "  pass 2 throughput (cached)",
                f"{head['pass2_items_per_s']:,.0f} items/s",
                "—",
                "—",
            ),
            (
                f"  pass 1 throughput (warm, {memory['config']['warm_mode']}, "
                f"{memory['config']['warm_workers']} processes)",
                f"{head['pass1_items_per_s']:,.0f} items/s, "
                f"peak {head['pass1_peak_rss_mb_per_child']:.0f} MB/process",
                "—",
                "—",
            ),
            (
                "  pass 2 judge calls",
                str(memory["pass2_cached"]["judge_calls"]),
                "0",
                _verdict(head["pass2_zero_judge_calls"]),
            ),
        ]
    generation = results.get("generation_speed")
    if generation:
        head = generation["headline"]
        out.append(
            (
                f"Tiny-VLM generation on {generation['config']['device']}, batch "
                f"{head['best_batch_size']} vs unbatched (transformers backend)",
                f"{head['best_items_per_s']:,.1f} vs {head['unbatched_items_per_s']:,.1f} items/s "
                f"({head['speedup']}x)",
                "reference",
                _verdict(head["outputs_equal_unbatched"]),
            )
        )
    lexicon = results.get("lexicon_speed")
    if lexicon:
        out.append(
            (
                "Offline lexicon judge, 1 core, full score path, 3 metrics, ~3 KB CoTs",
                f"{lexicon['items_per_s']:,.0f} items/s ({lexicon['items_per_cpu_s']:,.0f} per "
                "CPU-s)"
                + (
                    f"; {ref['ratio_cpu']:.2f}x {ref['rev']} in the same run (best repeats "
                    f"{ref['ratio_best_cpu']:.2f}x)"
                    if (ref := lexicon.get("reference"))
                    else ""
                ),
                f"≥ {lexicon['target_items_per_s']:,.0f} items/s",
                _verdict(lexicon["meets_target"]),
            )
        )
    report = results.get("report_scale")
    if report:
        out.append(
            (
                f"Reports of {report['lines']:,} result lines (JSON, Markdown, HTML, CSV)",
                f"{report['child_wall_s']:.1f} s, peak {report['peak_rss_gib']:.2f} GiB",
                f"≤ {report['target']['seconds']:.0f} s, ≤ 2 GiB",
                _verdict(report["pass"]["time"] and report["pass"]["memory"]),
            )
        )
    out += perturbation_rows(results)
    out += service_rows(results)
    out += audit_rows(results)
    out += batch_route_rows(results)
    out += service_batch_route_rows(results)
    out += cache_commit_rows(results)
    out += prompt_cache_rows(results)
    return out


def table(results: dict[str, dict[str, Any] | None]) -> str:
    lines = ["| metric | value | target | pass/fail |", "|---|---|---|---|"]
    lines += [f"| {m} | {v} | {t} | {p} |" for m, v, t, p in rows(results)]
    return "\n".join(lines)


def _machine_line(facts: dict[str, Any]) -> str:
    return (
        f"{facts.get('cpu_count')} CPUs ({facts.get('cpu_model')}), Python {facts.get('python')}, "
        f"{facts.get('platform')}"
    )


def summary_markdown(results: dict[str, dict[str, Any] | None], durations: dict[str, float]) -> str:
    machines = {name: _machine_line(r.get("machine") or {}) for name, r in results.items() if r}
    if len(set(machines.values())) > 1:
        # Results rerun one at a time come from whichever machine ran them; one header would
        # claim every figure for the first.
        header = "Machines: more than one; each benchmark's is in the second table."
    else:
        header = f"Machine: {next(iter(machines.values()), _machine_line(machine_facts()))}."
    parts = [
        "# Benchmark summary",
        "",
        header,
        "",
        table(results),
        "",
        "| benchmark | took | load average at start (1/5/15 min) | machine |",
        "|---|---|---|---|",
    ]
    for name in BENCHMARKS:
        result = results.get(name)
        if not result:
            continue
        took = durations.get(name, result.get("duration_s"))
        load = (result.get("machine") or {}).get("load_average", result.get("load_average"))
        parts.append(
            f"| {name} | {'–' if took is None else f'{took:.0f} s'} | {load} | {machines[name]} |"
        )
    parts += ["", "Numbers from `benchmarks/results/*.json`; see `benchmarks/README.md`.", ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated names")
    parser.add_argument("--from-results", action="store_true", help="only rebuild the table")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}")

    durations: dict[str, float] = {}
    if not args.from_results:
        for name in names:
            print(f"== {name}", flush=True)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}"], cwd=REPO_ROOT)
            durations[name] = time.perf_counter() - start
            if done.returncode != 0:
                print(f"{name} exited with {done.returncode}", flush=True)
    results = {name: _load(name) for name in BENCHMARKS}
    text = summary_markdown(results, durations)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = Path(RESULTS_DIR / "summary.md")
    path.write_text(text)
    print()
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
