"""Lexicon judge vs radiologists on the two halves of the seeded reader-study split.

Not a speed benchmark but the record behind the lexicon's agreement figures: the 66 reader-study
items (``../shared/data``, never part of the repository) are split by ``faithjudge split``'s rule
(seed 0, stratified by modification x flip; half A is the split's first output, half B its
second), scored with ``lexicon:v1`` (or any evaluator given) and, for comparison, replayed from
the recorded LLM judges, all through the real ``faithjudge score`` path. Each half gets its own
consensus; tau-b per axis with a 95 % percentile bootstrap CI, and the mean of the halves with
the CI of the mean (``service.agreement.halves``). The lexicon rules are developed on one half
and confirmed on the other, so the table shows each half beside the mean.

Run: ``python -m benchmarks.lexicon_agreement [--shared DIR] [--bootstrap B] [--evaluator SPEC]``.
Writes ``benchmarks/results/lexicon_agreement.json`` and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson

from benchmarks._common import REPO_ROOT, machine_facts, write_result
from service.agreement import (
    load_judge_results,
    load_reader_study,
    reader_study_requests,
    stratified_split,
)
from service.agreement.halves import HALF_AXES, SplitHalfReport, split_half_agreement
from service.runtime import open_scorer
from service.scorefile import score_file
from service.settings import Settings

__all__ = ["main", "render_table", "score_reader_study", "split_halves"]

NAME = "lexicon_agreement"
DEFAULT_SHARED = REPO_ROOT.parent / "shared" / "data"
RECORDED = (
    "llama-3.3-70b-instruct-awq/run2",
    "llama-3.3-70b-instruct-awq/run1",
    "qwen3-30b-a3b-instruct",
)
TARGETS = {"CA": 0.55, "CF": 0.25, "CT": 0.10}


def split_halves(reader_study: Path, *, seed: int = 0) -> dict[str, list[str]]:
    """Item ids of half A and half B of the seeded stratified split."""
    rows = [orjson.loads(x) for x in reader_study.read_bytes().splitlines() if x.strip()]
    first, second = stratified_split(rows, seed=seed)
    return {"A": [r["item_id"] for r in first], "B": [r["item_id"] for r in second]}


def score_reader_study(reader_study: Path, evaluator: str, tmp: Path) -> Path:
    """Score every reader-study item with ``evaluator`` (cache off); the results file."""
    tmp.mkdir(parents=True, exist_ok=True)
    source, output = tmp / "requests.jsonl", tmp / "results.jsonl"
    lines = (orjson.dumps(r) + b"\n" for r in reader_study_requests(reader_study))
    source.write_bytes(b"".join(lines))

    async def run() -> None:
        settings = Settings(evaluator=evaluator, data_dir=tmp / "data", cache=False)
        async with open_scorer(settings) as scorer:
            await score_file(scorer, source, output, concurrency=8)

    anyio.run(run)
    return output


def _cell(value: float | None, low: float | None = None, high: float | None = None) -> str:
    if value is None:
        return "–"
    text = f"{value:.3f}".replace("-", "−")
    if low is not None and high is not None:
        text += f" [{low:.2f}, {high:.2f}]".replace("-", "−")
    return text


def render_table(report: SplitHalfReport) -> str:
    """One row per judge and axis: half A, half B (items used / rated), mean with its CI."""
    lines = [
        "| judge | axis | half A | half B | mean of the halves |",
        "|---|---|---|---|---|",
    ]
    for judge in report.judges:
        for axis in HALF_AXES:
            a = judge.axes[axis]
            cells = []
            for half in ("A", "B"):
                t = a.halves[half]
                cells.append(f"{_cell(t.tau, t.low, t.high)} ({a.used[half]}/{a.rated[half]})")
            lines.append(
                f"| {judge.name} | {axis} | {cells[0]} | {cells[1]} | "
                f"{_cell(a.mean, a.low, a.high)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--evaluator", default="lexicon:v1")
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    reader_study = args.shared / "reader_study" / "dev.jsonl"
    recorded = args.shared / "judge_outputs" / "dev.jsonl"
    if not reader_study.is_file():
        sys.exit(f"needs the reader study at {reader_study} (see ../shared/data/README.md)")
    halves = split_halves(reader_study, seed=args.seed)
    specs = {args.evaluator: args.evaluator}
    if recorded.is_file():
        specs.update({name: f"replay:{recorded}#{name}" for name in RECORDED})
    with tempfile.TemporaryDirectory() as tmp_dir:
        judges = {
            name: load_judge_results(score_reader_study(reader_study, spec, Path(tmp_dir) / str(i)))
            for i, (name, spec) in enumerate(specs.items())
        }
    report = split_half_agreement(
        load_reader_study(reader_study), judges, halves, B=args.bootstrap, seed=args.seed
    )
    table = render_table(report)
    print(table)
    lexicon = report.judges[0].axes
    payload = {
        "benchmark": NAME,
        "description": __doc__.splitlines()[0],
        "evaluator": args.evaluator,
        "targets_mean_of_halves": TARGETS,
        "meets_targets": {
            axis: (lexicon[axis].mean is not None and lexicon[axis].mean >= target)
            for axis, target in TARGETS.items()
        },
        "report": report.model_dump(mode="json", exclude={"halves"}),
        "items_per_half": {h: len(items) for h, items in report.halves.items()},
        "table_md": table,
        "machine": machine_facts(),
    }
    if not args.no_write:
        print(f"-> {write_result(NAME, payload)}")
    return payload


if __name__ == "__main__":
    main()
