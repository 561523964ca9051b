"""Lexicon judge vs radiologists on the two halves of the seeded reader-study split.

Not a speed benchmark but the record behind the lexicon's agreement figures: the 66 reader-study
items (``../shared/data``, never part of the repository) are split by ``faithjudge split``'s rule
(seed 0, stratified by modification x flip; half A is the split's first output, half B its
second), scored with ``lexicon:v1`` (or any judge given) and, for comparison, replayed from
the recorded LLM judges, all through the real ``faithjudge score`` path. Each half gets its own
consensus; tau-b per axis with a 95 % percentile bootstrap CI, and the mean of the halves with
the CI of the mean (``faithjudge.agreement.halves``). The lexicon rules are developed on one half
and confirmed on the other, so the table shows each half beside the mean. The strict figures
score each half only with the rules it did not shape: ``DEVELOPED_ON`` records every rule change
by the half it was developed on, as the edit that takes it back out of the shipped lexicons.

Run: ``python -m benchmarks.lexicon_agreement [--shared DIR] [--bootstrap B] [--judge SPEC]``.
Writes ``benchmarks/results/lexicon_agreement.json`` and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import orjson
import pandas as pd
from faithjudge.agreement import (
    load_judge_results,
    load_reader_study,
    reader_study_requests,
    stratified_split,
)
from faithjudge.agreement.halves import HalfAxis, SplitHalfReport, split_half_agreement
from faithjudge.judges.lexicon import DEFAULT_LEXICON_DIR
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings

from benchmarks._common import REPO_ROOT, machine_facts, write_result

__all__ = [
    "DEVELOPED_ON",
    "lexicon_without",
    "main",
    "meets_targets",
    "render_strict_table",
    "render_table",
    "score_reader_study",
    "split_halves",
    "strict_results",
]

NAME = "lexicon_agreement"
DEFAULT_SHARED = REPO_ROOT.parent / "shared" / "data"
RECORDED = (
    "llama-3.3-70b-instruct-awq/run2",
    "llama-3.3-70b-instruct-awq/run1",
    "qwen3-30b-a3b-instruct",
)
TARGETS = {"CA": 0.55, "CF": 0.25, "CT": 0.10}
STRICT = "lexicon:v1, strict"


class Undo(NamedTuple):
    """Takes one rule change out of a lexicon file: puts ``add`` back into the list at ``key``,
    or, without ``add``, gives ``key`` the ``value`` it had before the change."""

    file: str
    key: str
    add: str | None = None
    value: Any = None


# Every rule change since the split, by the half it was developed on (README table "What
# changed, and on which half"). Bug fixes and rule-driven changes count on both halves and are
# not listed.
DEVELOPED_ON: dict[str, tuple[Undo, ...]] = {
    "A": (
        Undo("cues", "image", add="marking"),  # "markings" is not an image cue
        Undo("cues", "allusions", add="as indicated"),  # nor "as indicated" an allusion
    ),
    "B": (
        Undo("tone", "elaboration_sentences", value=10**6),  # CT up for a long argument
        Undo("influence", "weighing", value=[]),  # a cue weighed: partial influence
        Undo("influence", "sign", value=[]),  # an image cue read as a sign: the same
    ),
}


def split_halves(reader_study: Path, *, seed: int = 0) -> dict[str, list[str]]:
    """Item ids of half A and half B of the seeded stratified split."""
    rows = [orjson.loads(x) for x in reader_study.read_bytes().splitlines() if x.strip()]
    first, second = stratified_split(rows, seed=seed)
    return {"A": [r["item_id"] for r in first], "B": [r["item_id"] for r in second]}


def score_reader_study(reader_study: Path, judge: str, tmp: Path) -> Path:
    """Score every reader-study item with ``judge`` (cache off); the results file."""
    tmp.mkdir(parents=True, exist_ok=True)
    source, output = tmp / "requests.jsonl", tmp / "results.jsonl"
    lines = (orjson.dumps(r) + b"\n" for r in reader_study_requests(reader_study))
    source.write_bytes(b"".join(lines))

    async def run() -> None:
        settings = Settings(judge=judge, data_dir=tmp / "data", cache=False)
        async with open_scorer(settings) as scorer:
            await score_file(scorer, source, output, concurrency=8)

    anyio.run(run)
    return output


def lexicon_without(half: str, into: Path) -> Path:
    """A copy of the shipped lexicons with the changes developed on ``half`` taken out."""
    shutil.copytree(DEFAULT_LEXICON_DIR, into)
    for undo in DEVELOPED_ON[half]:
        path = into / f"{undo.file}.json"
        data = orjson.loads(path.read_bytes())
        if undo.key not in data:
            raise KeyError(f"{path.name} has no {undo.key!r}: update DEVELOPED_ON")
        if undo.add is None:
            data[undo.key] = undo.value
        elif undo.add in data[undo.key]:
            raise ValueError(f"{path.name} {undo.key} already holds {undo.add!r}")
        else:
            data[undo.key].append(undo.add)
        path.write_bytes(orjson.dumps(data))
    return into


def strict_results(reader_study: Path, halves: dict[str, list[str]], tmp: Path) -> pd.DataFrame:
    """The lexicon judge's results with each half scored only by the rules it did not shape.

    Half B's items are scored with the changes developed on B taken out of the shipped lexicons
    (the direction "developed on A, judged on B"), half A's with those developed on A taken out.
    The frame goes through ``split_half_agreement`` like any judge, so its halves and their mean
    carry the same bootstrap CIs as the other rows.
    """
    frames = []
    for half, items in halves.items():
        lexicon = lexicon_without(half, tmp / f"without_{half}")
        output = score_reader_study(reader_study, f"lexicon:{lexicon}", tmp / f"strict_{half}")
        results = load_judge_results(output)
        frames.append(results[results["item_id"].isin(set(items))])
    return pd.concat(frames, ignore_index=True)


def render_strict_table(axes: dict[str, HalfAxis]) -> str:
    """The strict judge's axes as directions: each half is the one the other half's rules were
    developed on, then their mean; cells with their CIs."""
    lines = ["| direction | " + " | ".join(TARGETS) + " |", "|---|" + "---|" * len(TARGETS)]
    for developed, judged in (("A", "B"), ("B", "A")):
        halves = (axes[a].halves[judged] for a in TARGETS)
        cells = " | ".join(_cell(t.tau, t.low, t.high) for t in halves)
        lines.append(f"| developed on {developed}, judged on {judged} | {cells} |")
    cells = " | ".join(_cell(axes[a].mean, axes[a].low, axes[a].high) for a in TARGETS)
    lines.append(f"| mean | {cells} |")
    return "\n".join(lines)


def meets_targets(axes: dict[str, HalfAxis]) -> dict[str, bool]:
    """Per targeted axis: is the mean of the halves at or above its target?"""
    return {
        axis: (mean := axes[axis].mean) is not None and mean >= target
        for axis, target in TARGETS.items()
    }


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
        for axis, a in judge.axes.items():
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
    parser.add_argument("--judge", default="lexicon:v1")
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    reader_study = args.shared / "reader_study" / "dev.jsonl"
    recorded = args.shared / "judge_outputs" / "dev.jsonl"
    if not reader_study.is_file():
        sys.exit(f"needs the reader study at {reader_study} (see ../shared/data/README.md)")
    halves = split_halves(reader_study, seed=args.seed)
    specs = {args.judge: args.judge}
    if recorded.is_file():
        specs.update({name: f"replay:{recorded}#{name}" for name in RECORDED})
    with tempfile.TemporaryDirectory() as tmp_dir:
        judges = {
            name: load_judge_results(score_reader_study(reader_study, spec, Path(tmp_dir) / str(i)))
            for i, (name, spec) in enumerate(specs.items())
        }
        if args.judge in ("lexicon:v1", "lexicon:default"):
            judges[STRICT] = strict_results(reader_study, halves, Path(tmp_dir) / "strict")
    report = split_half_agreement(
        load_reader_study(reader_study), judges, halves, B=args.bootstrap, seed=args.seed
    )
    # The strict judge is reported in its own table, not among the judges.
    strict = next((j for j in report.judges if j.name == STRICT), None)
    report = report.model_copy(update={"judges": [j for j in report.judges if j.name != STRICT]})
    table = render_table(report)
    print(table)
    if strict is not None:
        print("\nEach half judged only by the rules it did not shape:\n")
        print(render_strict_table(strict.axes))
    lexicon = report.judges[0].axes
    payload = {
        "benchmark": NAME,
        "description": __doc__.splitlines()[0],
        "judge": args.judge,
        "targets_mean_of_halves": TARGETS,
        "meets_targets": meets_targets(lexicon),
        "report": report.model_dump(mode="json", exclude={"halves"}),
        "strict": None if strict is None else strict.model_dump(mode="json"),
        "meets_targets_strict": None if strict is None else meets_targets(strict.axes),
        "items_per_half": {h: len(items) for h, items in report.halves.items()},
        "table_md": table,
        "machine": machine_facts(),
    }
    if not args.no_write:
        print(f"-> {write_result(NAME, payload)}")
    return payload


if __name__ == "__main__":
    main()
