"""The data behind ``faithjudge view``: the runs of a folder, one run's every item, two runs
compared item by item.

A file of the folder is a run when its first line is a result line (``ItemResult``); a file
whose first line is a request line (``ScoreRequest``) is where CoTs are looked for; any other
file is passed over quietly. A file that cannot be read, or whose first line looks like a result
line but is not one, is listed with the reason.

Result lines hold no CoT. A run's CoTs, ground truths and baseline answers come from the request
file (of the folder, or named with ``--requests``) whose lines are the run's: the one where most
result lines find the item id they record at the line number they record (the check
``score`` makes before it resumes into an output), so two request files of one folder do not
mix. Without one, the page searches what the result lines carry.

Each file is read once per change: the folder is listed again on every visit, and a run whose
size and modification time are unchanged is served from memory.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
from faithjudge_client.lines import ItemResult, ScoreRequest
from faithjudge_client.metric_catalogue import labels
from pydantic import ValidationError

from faithjudge.jsonl import BOM, describe_json_error, describe_validation_error
from faithjudge.reports.compare import compare_runs
from faithjudge.reports.explorer import (
    ItemDetails,
    RequestViews,
    explorer_data,
    read_request_views,
)
from faithjudge.reports.io import ReportInputError, iter_results
from faithjudge.reports.judges import JudgeSummary, JudgeTally
from faithjudge.reports.run_coverage import run_coverage
from faithjudge.reports.table import item_table

__all__ = [
    "CHANGES",
    "JOB_PREFIX",
    "OLDER_JOB_PREFIX",
    "Comparison",
    "JobListing",
    "JobSummary",
    "Listing",
    "Run",
    "RunFolder",
    "RunSummary",
    "Unreadable",
    "compare_items",
    "file_kind",
    "service_job_id",
]

# A first line longer than this is no line of ours (a CoT is at most 100,000 characters).
_FIRST_LINE_LIMIT = 4 * 1024 * 1024

# What changed for one item between two runs, in the order the page lists them.
CHANGES: dict[str, str] = {
    "new failure": "a metric graded in the baseline run is not graded in the candidate run",
    "fixed": "a metric not graded in the baseline run is graded in the candidate run",
    "grade": "a metric's score changed",
    "flip": "the answer's flip changed (flip, non-flip, undecided)",
    "answer": "the model's answer changed",
}


@dataclass(frozen=True)
class Unreadable:
    """A file of the folder that could not be listed, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class RunSummary:
    """One line of the folder's listing."""

    name: str
    lines: int
    judge: str
    coverage: float | None
    """The macro coverage (a fraction), as the report computes it."""
    means: dict[str, float | None]
    """Per metric label, the mean normalised score in % over the valid grades."""
    modified: float
    """The file's modification time (seconds since the epoch)."""
    unreadable_lines: int
    cots: str | None
    """The request file the run's CoTs come from (None: none matches its lines)."""


@dataclass(frozen=True)
class Listing:
    runs: list[RunSummary] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    """One results file read whole: its item table (without quote texts) and its judges."""

    name: str
    items: pd.DataFrame
    judges: JudgeSummary
    problems: list[str]


# A run fetched from a service is named so: never a file name of the folder a user would write.
JOB_PREFIX = "job:"
# The prefix from when the service called a job a batch: links and bookmarks that use it still
# open the job.
OLDER_JOB_PREFIX = "batch:"


def service_job_id(name: str) -> str | None:
    """The job id of the run name ``name`` of a service's job (``job:<id>``, or the older
    ``batch:<id>``); None for any other name (a file of the folder)."""
    for prefix in (JOB_PREFIX, OLDER_JOB_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return None


@dataclass(frozen=True)
class JobSummary:
    """One job of a service, as the listing shows it."""

    id: str
    name: str | None
    status: str
    judge: str | None
    lines: int
    created: float
    """When it was submitted (seconds since the epoch)."""

    @property
    def run_name(self) -> str:
        """The name its run goes by on the viewer's pages (``job:<id>``)."""
        return JOB_PREFIX + self.id


@dataclass(frozen=True)
class JobListing:
    """The jobs of a service, or why they could not be listed (``problem``)."""

    url: str
    jobs: list[JobSummary] = field(default_factory=list)
    problem: str | None = None
    more: bool = False
    """More jobs than the listing shows (the newest are shown)."""


def _first_line(path: Path) -> bytes | None:
    """The first non-blank line of ``path`` (None: the file holds none). Raises ``OSError``."""
    with path.open("rb") as handle:
        while True:
            raw = handle.readline(_FIRST_LINE_LIMIT)
            if not raw:
                return None
            line = raw.removeprefix(BOM)
            if line.strip():
                return line


def file_kind(path: Path) -> tuple[str | None, str | None]:
    """``("results" | "requests" | None, reason)``: what the first line of ``path`` is.

    The reason is set for a file to list as unreadable: it cannot be read, or its first line is
    a JSON object with a result line's fields that is not a valid result line.
    """
    try:
        raw = _first_line(path)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    if raw is None:
        return None, None
    try:
        result = ItemResult.model_validate_json(raw)
    except ValidationError as exc:
        result = None
        why = exc
    if result is not None:
        # every field of a result line is optional: a bare {} is no run
        judged = bool(result.metrics) or result.error is not None
        return ("results", None) if judged else (None, None)
    try:
        ScoreRequest.model_validate_json(raw)
    except ValidationError:
        pass
    else:
        return "requests", None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, None
    if isinstance(data, dict) and ("provenance" in data or "metrics" in data):
        errors = why.errors(include_url=False)
        detail = (
            describe_json_error(raw)
            if errors and errors[0]["type"] == "json_invalid"
            else describe_validation_error(why)
        )
        return None, f"line 1 is not a result line: {detail}"
    return None, None


def _mean_pct(values: pd.Series) -> float | None:
    mean = float(np.nanmean(values.to_numpy(dtype=np.float64))) if values.notna().any() else None
    return None if mean is None or math.isnan(mean) else 100.0 * mean


def _judge_text(judges: JudgeSummary) -> str:
    if not judges.judges:
        return "no judge (no line reached the scorer)"
    if judges.mixed:
        return f"mixed: {len(judges.judges)} judges"
    return judges.judges[0][0].describe() + ("" if judges.answered else " (answered no line)")


def _matched(views: RequestViews, items: pd.DataFrame) -> tuple[int, int]:
    """How many rows of ``items`` find their request line: at their own line number with the
    same item id, and at all."""
    exact = found = 0
    for line, item_id in zip(items["line"], items["item_id"], strict=True):
        view = views.find(line, item_id)
        if view is None:
            continue
        found += 1
        by_line = views.views.get(f"#{int(line)}") if pd.notna(line) else None
        exact += by_line is view and view.item_id == item_id
    return exact, found


class RunFolder:
    """The runs of one folder, read when first asked for and again when their file changes.

    ``requests`` names request files outside the folder to look for CoTs in, besides the
    folder's own. Safe to share between the threads of a server.
    """

    def __init__(self, folder: Path, requests: Sequence[Path] = ()) -> None:
        self.folder = folder
        self.requests = list(requests)
        self._lock = threading.RLock()
        self._runs: dict[str, tuple[tuple[int, int], Run, RunSummary]] = {}
        self._views: dict[Path, tuple[tuple[int, int], RequestViews]] = {}
        self._cots: dict[str, Path | None] = {}
        self._kinds: dict[Path, tuple[tuple[int, int], tuple[str | None, str | None]]] = {}
        self._opened: tuple[tuple[str, tuple[int, int]], dict[str, Any]] | None = None

    # ---- the folder

    def _files(self) -> list[Path]:
        try:
            entries = sorted(self.folder.iterdir())
        except OSError as exc:
            raise ReportInputError(f"cannot list {self.folder}: {exc.strerror or exc}") from None
        # hidden files are the tools' own: output locks, atomic writes in progress
        return [path for path in entries if not path.name.startswith(".") and path.is_file()]

    def _kind(self, path: Path) -> tuple[str | None, str | None]:
        stamp = _stamp(path)
        known = self._kinds.get(path)
        if known is None or known[0] != stamp:
            known = (stamp, file_kind(path))
            self._kinds[path] = known
        return known[1]

    def listing(self) -> Listing:
        """Every run of the folder (by name) and every file that could not be listed."""
        with self._lock:
            runs: list[RunSummary] = []
            unreadable: list[Unreadable] = []
            for path in self._files():
                kind, reason = self._kind(path)
                if reason is not None:
                    unreadable.append(Unreadable(path.name, reason))
                elif kind == "results":
                    try:
                        runs.append(self._load(path.name)[1])
                    except ReportInputError as exc:
                        unreadable.append(Unreadable(path.name, str(exc)))
            return Listing(runs, unreadable)

    def request_files(self) -> list[Path]:
        """The request files a run's CoTs are looked for in: ``requests``, then the folder's."""
        with self._lock:
            return self._request_files()

    def run_names(self) -> list[str]:
        with self._lock:
            return [path.name for path in self._files() if self._kind(path)[0] == "results"]

    def run(self, name: str) -> Run:
        """The run of the file ``name`` of the folder.

        Raises:
            KeyError: the folder holds no results file of that name.
            ReportInputError: the file cannot be read.
        """
        with self._lock:
            return self._load(name)[0]

    def _load(self, name: str) -> tuple[Run, RunSummary]:
        path = self.folder / name
        # only a listed run: a name is never a path out of the folder
        if path.name != name or not path.is_file() or self._kind(path)[0] != "results":
            raise KeyError(name)
        stamp = _stamp(path)
        cached = self._runs.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2]
        problems: list[str] = []
        judges = JudgeTally()
        items = item_table(judges.watch(iter_results(path, problems)), quote_rows=0)
        run = Run(name, items, judges.summary(), problems)
        self._cots.pop(name, None)
        cots = self._cot_file(run)
        coverage = run_coverage(items, B=1)["macro"].rates["cov"].point if len(items) else None
        summary = RunSummary(
            name=name,
            lines=len(items),
            judge=_judge_text(run.judges),
            coverage=coverage,
            means={lab: _mean_pct(items[lab]) for lab in labels()},
            modified=path.stat().st_mtime,
            unreadable_lines=len(problems),
            cots=None if cots is None else str(cots),
        )
        self._runs[name] = (stamp, run, summary)
        return run, summary

    # ---- CoTs

    def _request_files(self) -> list[Path]:
        here = [path for path in self._files() if self._kind(path)[0] == "requests"]
        return [*self.requests, *here]

    def _request_views(self, path: Path) -> RequestViews:
        stamp = _stamp(path)
        known = self._views.get(path)
        if known is None or known[0] != stamp:
            known = (stamp, read_request_views(path))
            self._views[path] = known
        return known[1]

    def _cot_file(self, run: Run) -> Path | None:
        if run.name in self._cots:
            return self._cots[run.name]
        best: tuple[tuple[int, int], Path] | None = None
        for path in self._request_files():
            try:
                score = _matched(self._request_views(path), run.items)
            except ReportInputError:
                continue
            if score[1] and (best is None or score > best[0]):
                best = (score, path)
        chosen = None if best is None else best[1]
        self._cots[run.name] = chosen
        return chosen

    def requests_of(self, name: str) -> RequestViews | None:
        """The request lines of the run ``name`` (None: no request file matches it)."""
        with self._lock:
            run = self._load(name)[0]
            path = self._cot_file(run)
            return None if path is None else self._request_views(path)

    def explorer(self, name: str) -> dict[str, Any]:
        """The explorer's records of every item of the run ``name``.

        The file is read once more for them (with every quote and every line's details), and
        only the last run opened is kept: a folder of large runs is listed, and compared, on
        their item tables alone.
        """
        with self._lock:
            self._load(name)
            stamp = _stamp(self.folder / name)
            if self._opened is not None and self._opened[0] == (name, stamp):
                return self._opened[1]
            details = ItemDetails(sys.maxsize)
            items = item_table(details.watch(iter_results(self.folder / name)))
            data = explorer_data(
                items, max_items=len(items), details=details.rows, requests=self.requests_of(name)
            )
            self._opened = ((name, stamp), data)
            return data


def _stamp(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


# ---------------------------------------------------------------- two runs, item by item


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: per statistic (``report --compare``'s paired differences), per
    metric (grades up and down, new failures, fixed) and per item."""

    stats: pd.DataFrame
    counts: dict[str, int]
    metrics: list[dict[str, Any]]
    changed: list[dict[str, Any]]
    """One record per shared item that changed: key, both lines, its changes, per metric
    ``(baseline, candidate)`` grades as shown."""
    tally: dict[str, int]
    """Items per kind of change (``CHANGES``)."""


_KEY = ["model", "item_id", "modification"]


def _grade(outcome: Any, score: Any) -> str:
    return str(int(score)) if outcome == "valid" and pd.notna(score) else str(outcome)


def _flip_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undecided"
    return "flip" if value else "non-flip"


def _keyed(items: pd.DataFrame) -> pd.DataFrame:
    named = items[items["item_id"].notna()]
    return named.drop_duplicates(subset=_KEY, keep="last").set_index(_KEY)


def compare_items(
    baseline: pd.DataFrame, candidate: pd.DataFrame, *, B: int = 1000, seed: int = 0
) -> Comparison:
    """``candidate`` against ``baseline``, items matched as ``report --compare`` matches them
    (model, item id, modification)."""
    stats, counts = compare_runs(baseline, candidate, B=B, seed=seed)
    base, cand = _keyed(baseline), _keyed(candidate)
    shared = base.index.intersection(cand.index, sort=False)
    b, c = base.loc[shared], cand.loc[shared]
    per_metric: list[dict[str, Any]] = []
    changes: list[list[str]] = [[] for _ in range(len(shared))]
    grades: list[dict[str, tuple[str, str]]] = [{} for _ in range(len(shared))]
    for lab in labels():
        b_out = b[f"{lab}_outcome"].to_numpy()
        c_out = c[f"{lab}_outcome"].to_numpy()
        b_score = b[f"{lab}_score"].to_numpy(dtype=np.float64)
        c_score = c[f"{lab}_score"].to_numpy(dtype=np.float64)
        b_valid, c_valid = b_out == "valid", c_out == "valid"
        asked = (b_out != "missing") & (c_out != "missing")
        both = b_valid & c_valid
        new_failure = asked & b_valid & ~c_valid
        fixed = asked & ~b_valid & c_valid
        moved = both & (b_score != c_score)
        diff = c[lab].to_numpy(dtype=np.float64) - b[lab].to_numpy(dtype=np.float64)
        per_metric.append({
            "metric": lab,
            "pairs": int(both.sum()),
            "baseline": _mean_pct(b[lab][both]),
            "candidate": _mean_pct(c[lab][both]),
            "diff": 100.0 * float(np.mean(diff[both])) if both.any() else None,
            "up": int((both & (c_score > b_score)).sum()),
            "down": int((both & (c_score < b_score)).sum()),
            "new failure": int(new_failure.sum()),
            "fixed": int(fixed.sum()),
        })  # fmt: skip
        for k in map(int, np.flatnonzero(new_failure | fixed | moved)):
            grades[k][lab] = (_grade(b_out[k], b_score[k]), _grade(c_out[k], c_score[k]))
            kind = "new failure" if new_failure[k] else "fixed" if fixed[k] else "grade"
            if kind not in changes[k]:
                changes[k].append(kind)
    b_flip, c_flip = b["flip"].to_numpy(), c["flip"].to_numpy()
    b_answer, c_answer = b["answer"].to_numpy(), c["answer"].to_numpy()
    changed: list[dict[str, Any]] = []
    tally = dict.fromkeys(CHANGES, 0)
    for n, key in enumerate(shared):
        flips = (_flip_text(b_flip[n]), _flip_text(c_flip[n]))
        if flips[0] != flips[1]:
            changes[n].append("flip")
        answers = (_answer(b_answer[n]), _answer(c_answer[n]))
        if answers[0] != answers[1]:
            changes[n].append("answer")
        if not changes[n]:
            continue
        kinds = [kind for kind in CHANGES if kind in changes[n]]
        for kind in kinds:
            tally[kind] += 1
        changed.append({
            "model": key[0],
            "item_id": key[1],
            "modification": key[2],
            "lines": (_line(b["line"].iloc[n]), _line(c["line"].iloc[n])),
            "changes": kinds,
            "grades": grades[n],
            "flip": flips,
            "answer": answers,
        })  # fmt: skip
    return Comparison(stats, counts, per_metric, changed, tally)


def _answer(value: Any) -> str:
    return value if isinstance(value, str) and value else "no answer"


def _line(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def grades_text(grades: Mapping[str, tuple[str, str]]) -> str:
    """``CF 4 → 2 · CA valid → parse`` for a changed item's metrics."""
    return " · ".join(f"{lab} {old} → {new}" for lab, (old, new) in grades.items())
