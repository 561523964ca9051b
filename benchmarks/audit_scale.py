"""Grounding audit of 1,000,000 answer records: target ≤ 30 s for the audit itself.

Synthetic records (seeded; ``faithjudge.audits.synthetic``) for all three audits are written to a
temporary JSONL file: Lotfinia (8 models, Yes/No cases, 40% with target/irrelevant masks),
Zafar (4 models x 4 benchmarks, six conditions, rationales on three) and MedVIGIL (10 models,
ten probes per case). A child process then does what ``faithjudge audit --json --md --html``
does, timing each stage: loading (orjson + column-wise checks, pydantic only for lines that
fail them), the cross-record checks, the three audits at the papers' resampling settings
(B = 10,000 / 10,000 / 500) and rendering. Load and compute are reported separately; peak RSS
is the child's ``ru_maxrss``. Wall and CPU seconds are both recorded (the machine may be shared).
As a reference measured in the same run, the child also loads a 100,000-line slice with every
line validated by the pydantic model (CPU seconds of both paths).

    python -m benchmarks.audit_scale [--records N]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from benchmarks._common import load_average, machine_facts, run_measured_child, write_result

__all__ = ["generate", "main", "run_audit_stages", "summary_rows"]

TARGET_AUDIT_SECONDS = 30.0
REFERENCE_LINES = 100_000


def generate(path: Path, records: int, seed: int = 0) -> dict[str, int]:
    """Write about ``records`` synthetic answer records; returns records per audit."""
    from faithjudge.audits.synthetic import lotfinia_records, medvigil_records, zafar_records

    scale = records / 1_000_000
    parts = {
        "lotfinia": lotfinia_records(models=8, cases=int(20_200 * scale), seed=seed),
        "zafar": zafar_records(models=4, items=int(3_000 * scale), benchmarks=4, seed=seed + 1),
        "medvigil": medvigil_records(models=10, cases=int(2_600 * scale), seed=seed + 2),
    }
    counts = dict.fromkeys(parts, 0)
    with path.open("wb") as out:
        for name, stream in parts.items():
            for record in stream:
                out.write(orjson.dumps({k: v for k, v in record.items() if v is not None}) + b"\n")
                counts[name] += 1
    return counts


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def run_audit_stages(path: Path, out_dir: Path) -> dict[str, Any]:
    """What ``faithjudge audit`` does, with per-stage timings (runs in the child process)."""
    from faithjudge.audits import load_records, parse_lines, prepare, run_audit
    from faithjudge.audits.render import audit_html, audit_markdown

    times: dict[str, Any] = {}
    start, cpu_start = time.perf_counter(), time.process_time()

    def stage(name: str, began: tuple[float, float]) -> tuple[float, float]:
        now = (time.perf_counter(), time.process_time())
        times[f"{name}_s"] = now[0] - began[0]
        times[f"{name}_cpu_s"] = now[1] - began[1]
        return now

    mark = (start, cpu_start)
    table = load_records(path)
    mark = stage("load", mark)
    times["rss_after_load_bytes"] = _rss_bytes()
    prepared = prepare(table, source=str(path))
    mark = stage("consistency", mark)
    report = run_audit(prepared)
    mark = stage("audits", mark)
    (out_dir / "audit.json").write_text(json.dumps(report, allow_nan=False))
    (out_dir / "audit.md").write_text(audit_markdown(report))
    (out_dir / "audit.html").write_text(audit_html(report))
    stage("render", mark)
    for suffix in ("_s", "_cpu_s"):
        times[f"compute{suffix}"] = sum(
            times[f"{name}{suffix}"] for name in ("consistency", "audits", "render")
        )
    times["total_s"] = time.perf_counter() - start
    times["total_cpu_s"] = time.process_time() - cpu_start
    times["records"] = len(table)
    times["records_per_audit"] = report["summary"]["records_per_audit"]
    del table, prepared

    with path.open("rb") as handle:
        head = list(islice(enumerate(handle, start=1), REFERENCE_LINES))
    mark = time.process_time()
    parse_lines(head)
    times["reference_fast_load_100k_cpu_s"] = time.process_time() - mark
    mark = time.process_time()
    parse_lines(head, fast=False)
    times["reference_pydantic_load_100k_cpu_s"] = time.process_time() - mark
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, metavar=("RECORDS", "OUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_audit_stages(Path(args.child[0]), Path(args.child[1]))))
        return 0
    with tempfile.TemporaryDirectory(prefix="faithjudge-audit-scale-") as tmp:
        records = Path(tmp) / "records.jsonl"
        began = time.perf_counter()
        counts = generate(records, args.records)
        generated_s = time.perf_counter() - began
        stages, wall_s, peak = run_measured_child(
            "benchmarks.audit_scale", "--child", str(records), tmp
        )
        sizes = {p.name: p.stat().st_size for p in Path(tmp).iterdir() if p.is_file()}
    fast_ref = stages["reference_fast_load_100k_cpu_s"]
    slow_ref = stages["reference_pydantic_load_100k_cpu_s"]
    payload = {
        "benchmark": "audit_scale",
        "records": stages["records"],
        "records_generated_per_audit": counts,
        "input_bytes": sizes.get("records.jsonl"),
        "generate_input_s": round(generated_s, 2),
        "child_wall_s": round(wall_s, 2),
        "duration_s": round(generated_s + wall_s, 2),
        "stages_s": {k: round(v, 2) for k, v in stages.items() if k.endswith("_s")},
        "records_per_s": {
            "load": round(stages["records"] / stages["load_s"]),
            "compute": round(stages["records"] / stages["compute_s"]),
        },
        "reference_100k_lines_cpu": {
            "fast_path_s": round(fast_ref, 2),
            "pydantic_every_line_s": round(slow_ref, 2),
            "speedup": round(slow_ref / fast_ref, 2),
        },
        "rss_after_load_gib": round(stages["rss_after_load_bytes"] / 1024**3, 3),
        "peak_rss_bytes": peak,
        "peak_rss_gib": round(peak / 1024**3, 3),
        "resampling": {
            "lotfinia_B": 10_000,
            "zafar_B": 10_000,
            "medvigil_B": 500,
            "lotfinia_permutations": 1_000,
        },
        "target": {"audit_compute_seconds": TARGET_AUDIT_SECONDS},
        "load_average_after": load_average(),
        "pass": {
            "compute": stages["compute_s"] <= TARGET_AUDIT_SECONDS,
            "compute_cpu": stages["compute_cpu_s"] <= TARGET_AUDIT_SECONDS,
        },
        "machine": machine_facts(),
    }
    path = write_result("audit_scale", payload)
    summary = ("child_wall_s", "stages_s", "reference_100k_lines_cpu", "peak_rss_gib", "pass")
    print(json.dumps({k: payload[k] for k in summary}))
    print(f"-> {path}")
    return 0


def summary_rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """Headline rows of ``benchmarks.run_all``'s table."""
    audit = results.get("audit_scale")
    if not audit:
        return []
    stages = audit["stages_s"]
    ref = audit["reference_100k_lines_cpu"]
    verdict = "pass" if audit["pass"]["compute"] else "**FAIL**"
    return [
        (
            f"Grounding audit of {audit['records']:,} answer records (3 audits, papers' B)",
            f"{stages['compute_s']:.1f} s ({stages['compute_cpu_s']:.1f} s CPU), "
            f"peak {audit['peak_rss_gib']:.2f} GiB",
            f"≤ {audit['target']['audit_compute_seconds']:.0f} s",
            verdict,
        ),
        (
            "  loading + per-line validation (separate from the audit)",
            f"{stages['load_s']:.1f} s ({stages['load_cpu_s']:.1f} s CPU); fast path "
            f"{ref['speedup']}x pydantic-every-line",
            "—",
            "—",
        ),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
