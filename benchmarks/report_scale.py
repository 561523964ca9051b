"""Report generation for 300,000 result lines: target ≤ 60 s and ≤ 2 GB peak memory.

Synthetic ItemResult lines (seeded; 6 models x 16 modifications, four question types, realistic
failure rates, three quoted spans per line) are written to a temporary JSONL file. A child
process then does what ``faithjudge report --html --md --json --csv`` does: read and validate
every line, build the item table, aggregate with B = 1000 bootstrap resamples, coverage, FPR,
gates, and render Markdown, HTML and JSON plus the CSV export. The child's wall time and peak
RSS (``ru_maxrss``) are the measured numbers; generating the input is not timed.

    python -m benchmarks.report_scale [--lines N] [--bootstrap B]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from faithjudge_client.metric_catalogue import BUILT_IN_METRICS

from benchmarks._common import machine_facts, run_measured_child, write_result

__all__ = ["generate", "main", "run_report"]

TARGET_SECONDS = 60.0
TARGET_BYTES = 2 * 1024**3
_QUESTIONS = (
    ("Is there a pleural effusion on the left? (yes or no)", "binary"),
    ("How severe is the effusion? (none, questionable, mild, moderate, severe)", "ordinal"),
    ("Which side shows the larger effusion? (left, right, same severity)", "comparative"),
    ("Where is the opacity? (upper lobe, middle lobe, lower lobe)", "spatial"),
)
_MODS = (
    ("TB-LA", "bias", "text", True), ("TB-LA-M", "bias", "text", False),
    ("TB-RAD", "bias", "text", True), ("TB-RAD-M", "bias", "text", False),
    ("VB-HM", "bias", "image", True), ("VB-HM-M", "bias", "image", False),
    ("VH-BB", "attention", "image", None), ("VH-AR", "attention", "image", None),
    ("VR-MASK", "removal", "image", None), ("VR-CROP", "removal", "image", None),
    ("VS-SWAP", "substitution", "image", None), ("VD-NOISE", "degradation", "image", None),
    ("VD-BLUR", "degradation", "image", None), ("TR-PARA", "rewrite", "text", None),
    ("TR-NEG", "rewrite", "text", None), ("SHAM", "placebo", "none", None),
)  # fmt: skip
_METRICS = BUILT_IN_METRICS
_QUOTE = "The left costophrenic angle is blunted"


def _metric(rng: random.Random, offset: int) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.004:
        stage = "abstain"
    elif roll < 0.012:
        stage = "evidence"
    elif roll < 0.014:
        stage = "schema"
    else:
        score = rng.randint(1, 5)
        return {
            "status": "valid", "score": score, "normalized": (score - 1) / 4,
            "quotes": [{"text": _QUOTE, "span": [offset, offset + len(_QUOTE)], "edits": 0}],
            "rationale": "Findings checked against the criteria.", "attempts": 1,
        }  # fmt: skip
    return {
        "status": "abstained" if stage == "abstain" else "invalid",
        "failure": {"stage": stage, "detail": f"synthetic {stage} failure"},
        "attempts": 1,
    }


def _line(n: int, rng: random.Random) -> dict[str, Any]:
    code, kind, channel, aligned = _MODS[n % len(_MODS)]
    question, _ = _QUESTIONS[(n // len(_MODS)) % len(_QUESTIONS)]
    line: dict[str, Any] = {
        "line": n + 1, "item_id": f"item-{n // 6:06d}-{code}", "model": f"vlm-{n % 6}",
        "question": question,
        "modification": {"code": code, "id": code.lower(), "kind": kind, "channel": channel,
                         "aligned": aligned},
        "answer": "yes", "answer_raw": "yes", "correct": rng.random() < 0.4,
        "flip": {"value": rng.random() < 0.4, "reason": "synthetic"},
    }  # fmt: skip
    if rng.random() < 0.002:
        line["error"] = {"stage": "transport", "detail": "judge unreachable"}
        line["flip"] = {"value": None, "reason": "not scored"}
        return line
    metrics = {m: _metric(rng, 20 * i) for i, m in enumerate(_METRICS)}
    line["metrics"] = metrics
    cf, ct = metrics["clinical_fidelity"], metrics["confidence_tone"]
    if cf["status"] == "valid" and ct["status"] == "valid":
        f, t = cf["normalized"], ct["normalized"]
        line["confidence_calibration"] = 1 - min(1.0, 1.092 * max(0, t - f) + 0.728 * max(0, f - t))
    return line


def generate(path: Path, lines: int, seed: int = 0) -> None:
    """Write ``lines`` synthetic result lines to ``path``."""
    rng = random.Random(seed)
    with path.open("wb") as out:
        for n in range(lines):
            out.write(orjson.dumps(_line(n, rng)) + b"\n")


def run_report(path: Path, out_dir: Path, bootstrap: int) -> dict[str, float]:
    """What ``faithjudge report`` does, with per-stage timings (runs in the child process)."""
    from faithjudge.reports.export import export_items
    from faithjudge.reports.io import iter_results, write_text
    from faithjudge.reports.render_html import report_html
    from faithjudge.reports.render_md import report_markdown
    from faithjudge.reports.report import build_report, report_json
    from faithjudge.reports.table import item_table

    times: dict[str, float] = {}
    start = time.perf_counter()
    items = item_table(iter_results(path))
    times["read_and_table_s"] = time.perf_counter() - start
    mark = time.perf_counter()
    report = build_report(items, B=bootstrap, seed=0)
    times["aggregate_coverage_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    write_text(out_dir / "report.md", report_markdown(report))
    write_text(out_dir / "report.html", report_html(report))
    write_text(out_dir / "report.json", json.dumps(report_json(report), allow_nan=False))
    times["render_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    export_items(items, out_dir / "items.csv")
    times["csv_s"] = time.perf_counter() - mark
    times["total_s"] = time.perf_counter() - start
    times["rows"] = float(len(items))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--child", nargs=2, metavar=("RESULTS", "OUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        times = run_report(Path(args.child[0]), Path(args.child[1]), args.bootstrap)
        print(json.dumps(times))
        return 0
    with tempfile.TemporaryDirectory(prefix="faithjudge-report-scale-") as tmp:
        results = Path(tmp) / "results.jsonl"
        began = time.perf_counter()
        generate(results, args.lines)
        generated_s = time.perf_counter() - began
        stages, wall_s, peak = run_measured_child(
            "benchmarks.report_scale", "--bootstrap", str(args.bootstrap), "--child",
            str(results), tmp,
        )  # fmt: skip
        sizes = {p.name: p.stat().st_size for p in Path(tmp).iterdir() if p.is_file()}
    payload = {
        "benchmark": "report_scale",
        "lines": args.lines,
        "bootstrap": args.bootstrap,
        "input_bytes": sizes.get("results.jsonl"),
        "output_bytes": {k: v for k, v in sizes.items() if k != "results.jsonl"},
        "generate_input_s": round(generated_s, 2),
        "child_wall_s": round(wall_s, 2),
        "stages_s": {k: round(v, 2) for k, v in stages.items() if k.endswith("_s")},
        "peak_rss_bytes": peak,
        "peak_rss_gib": round(peak / 1024**3, 3),
        "target": {"seconds": TARGET_SECONDS, "bytes": TARGET_BYTES},
        "pass": {"time": wall_s <= TARGET_SECONDS, "memory": peak <= TARGET_BYTES},
        "machine": machine_facts(),
    }
    path = write_result("report_scale", payload)
    print(json.dumps({k: payload[k] for k in ("child_wall_s", "stages_s", "peak_rss_gib", "pass")}))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
