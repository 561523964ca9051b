"""The judge canary in the gate and the reports: the ``[canary]`` table of ``faithjudge.toml``, the
gate's canary checks, and the sentence every report carries on when the canary last passed.

The gate never calls a judge: it reads the last check that ``faithjudge canary check`` (or the
service's timer) kept in the record file (``canary_checks.json`` in the data dir), found by
the pinned file's content hash. In CI, ``faithjudge canary check --config faithjudge.toml``
runs as the step before ``faithjudge gate``; the gate then re-reads that check's grades at the
table's tolerance. Two checks come of it, both of kind ``canary`` (a failure exits 1):

- ``canary_agreement [FILE]``: the share of canary grades that agree with the pinned ones, at
  least ``min_agreement``; it fails when no check of the file is on record, when a grade got
  no answer, or when the last check is older than ``max_age_hours`` (when set);
- ``canary_judge [FILE]``: the share of the run's lines graded by the judge the canary checked
  (its judge, settings, prompt set and knowledge base), at least 100 %: a canary that
  vouches for another judge says nothing of this run.

Config (every key optional but ``pinned``)::

    [canary]
    pinned = "canary.jsonl"   # the pinned file, relative to the TOML file
    score_tolerance = 0       # points a score may differ by
    min_agreement = 90.0      # % of grades that must agree
    max_age_hours = 24.0      # the last check may be at most this old
    record = "canary_checks.json"  # the record file; absent: the data dir's
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faithjudge.errors import ConfigError
from faithjudge.stats.canary import CanaryCheck, CanaryRecords, Tolerance, standing

__all__ = [
    "CANARY_KEYS",
    "RECORDS_FILE",
    "CanaryFinding",
    "CanaryTable",
    "canary_findings",
    "parse_canary_table",
    "pinned_sha256",
    "read_records",
    "records_path",
    "run_standing",
]

# The record of the last checks, in the data dir (``records_path``).
RECORDS_FILE = "canary_checks.json"
CANARY_KEYS = frozenset({"pinned", "score_tolerance", "min_agreement", "max_age_hours", "record"})
# Grades of a failing check named in its detail.
_LISTED = 5


@dataclass(frozen=True, slots=True)
class CanaryFinding:
    """One canary check of the gate (it makes a ``reports.gate.Check`` of kind ``canary``)."""

    name: str
    threshold: float
    value: float | None
    """The share in %, None when it cannot be measured (which fails the check)."""
    passed: bool | None
    detail: str


@dataclass(frozen=True, slots=True)
class CanaryTable:
    """The ``[canary]`` table, its paths resolved against the TOML file's folder."""

    pinned: Path
    tolerance: Tolerance
    max_age_hours: float | None = None
    record: Path | None = None


def parse_canary_table(table: Mapping[str, Any], folder: Path) -> CanaryTable:
    """Validate ``[canary]``; paths relative to ``folder``.

    Raises:
        ConfigError: naming the bad key.
    """
    if not isinstance(table, Mapping):
        raise ConfigError("[canary] must be a table")
    unknown = set(table) - CANARY_KEYS
    if unknown:
        raise ConfigError(
            f"[canary] unknown keys: {sorted(unknown)}; expected {sorted(CANARY_KEYS)}"
        )
    pinned = table.get("pinned")
    if not isinstance(pinned, str) or not pinned:
        raise ConfigError("[canary] pinned must name the pinned canary file (a path)")
    points = table.get("score_tolerance", Tolerance().score_tolerance)
    if isinstance(points, bool) or not isinstance(points, int) or not 0 <= points <= 4:
        raise ConfigError(f"[canary] score_tolerance must be a whole number of points in [0, 4], "
                          f"got {points!r}")  # fmt: skip
    least = _number("min_agreement", table.get("min_agreement", Tolerance().min_agreement), 100.0)
    age = table.get("max_age_hours")
    record = table.get("record")
    if record is not None and (not isinstance(record, str) or not record):
        raise ConfigError("[canary] record must be a path")
    return CanaryTable(
        pinned=folder / pinned,
        tolerance=Tolerance(score_tolerance=points, min_agreement=least),
        max_age_hours=None if age is None else _number("max_age_hours", age, 1e6),
        record=None if record is None else folder / record,
    )


def _number(key: str, value: Any, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
        raise ConfigError(f"[canary] {key} must be a number within [0, {high:g}], got {value!r}")
    return float(value)


def records_path(data_dir: Path) -> Path:
    """The record file of the data dir ``data_dir``."""
    return data_dir / RECORDS_FILE


def read_records(path: Path) -> CanaryRecords:
    """The record file at ``path``; none there: no records.

    Raises:
        ConfigError: it cannot be read or holds no records.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return CanaryRecords()
    except OSError as exc:
        raise ConfigError(f"cannot read the canary record {path}: {exc.strerror}") from None
    try:
        return CanaryRecords.parse(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def pinned_sha256(path: Path) -> str:
    """The content hash a pinned file's checks are kept under.

    Raises:
        ConfigError: it cannot be read.
    """
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"[canary] pinned: cannot read {path}: {exc.strerror}") from None


def canary_findings(
    table: CanaryTable,
    records: CanaryRecords,
    judges: Any | None,
    now: datetime | None = None,
) -> list[CanaryFinding]:
    """The gate's canary checks for ``table`` (see the module docstring).

    ``judges`` is the run's ``reports.judges.JudgeSummary`` (None: the run names no judge).

    Raises:
        ConfigError: the pinned file cannot be read.
    """
    name = table.pinned.name
    last = records.checks.get(pinned_sha256(table.pinned))
    least = table.tolerance.min_agreement
    if last is None:
        detail = (f"no check of {table.pinned} is on record: run `faithjudge canary check` "
                  "before the gate")  # fmt: skip
        return [CanaryFinding(f"canary_agreement [{name}]", least, None, None, detail)]
    comparison = last.comparison.at(table.tolerance)
    agreement = comparison.agreement
    passed = comparison.verdict == "pass"
    parts = [f"checked {last.checked_at} with {last.judge.judge}: {comparison.summary()}"]
    if comparison.differing:
        listed = "; ".join(p.describe() for p in comparison.differing[:_LISTED])
        more = len(comparison.differing) - _LISTED
        parts.append(listed + (f"; and {more} more" if more > 0 else ""))
    changes = last.pinned_judge.changes(last.judge)
    if changes:
        parts.append("judge changed since pinned: " + "; ".join(changes))
    age = _age_hours(last.checked_at, now)
    if table.max_age_hours is not None and (age is None or age > table.max_age_hours):
        passed = False
        shown = "of unknown age" if age is None else f"{age:.1f} h old"
        parts.append(f"the last check is {shown}, more than max_age_hours {table.max_age_hours:g}")
    parts.append(f"last passed {last.last_passed_at}" if last.last_passed_at else "never passed")
    checks = [CanaryFinding(f"canary_agreement [{name}]", least, agreement, passed,
                            "; ".join(parts))]  # fmt: skip
    checks.append(_judge_check(name, last, judges))
    return checks


def _judge_check(name: str, last: CanaryCheck, judges: Any | None) -> CanaryFinding:
    """Whether the run's lines were graded by the judge the canary checked."""
    judged = list(judges.judges) if judges is not None else []
    total = sum(lines for _, lines in judged)
    ours = sum(lines for judge, lines in judged if last.judge.same_configuration(
        judge.judge, judge.settings_sha256, judge.prompt_sha256, judge.kb_sha256))  # fmt: skip
    if total == 0:
        return CanaryFinding(f"canary_judge [{name}]", 100.0, None, None,
                     "the run's lines name no judge to match the canary's")  # fmt: skip
    share = 100.0 * ours / total
    others = sorted({judge.describe() for judge, _ in judged if not last.judge.same_configuration(
        judge.judge, judge.settings_sha256, judge.prompt_sha256, judge.kb_sha256)})  # fmt: skip
    detail = f"{ours} of {total} lines graded by the checked judge {last.judge.judge}"
    if others:
        detail += "; the others by " + "; ".join(others)
    return CanaryFinding(f"canary_judge [{name}]", 100.0, share, ours == total, detail)


def _age_hours(when: str, now: datetime | None) -> float | None:
    try:
        then = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return ((now or datetime.now(UTC)) - then).total_seconds() / 3600.0


def run_standing(records: CanaryRecords, judges: Any | None) -> list[str]:
    """The report's sentences on the canary: the checks on record of the run's judges
    (``reports.judges.JudgeSummary``), when it last passed; none when nothing is known."""
    if judges is None:
        return []
    run = [judge for judge, _ in judges.judges]
    mine = [check for check in records.checks.values() if any(
        check.judge.same_configuration(j.judge, j.settings_sha256, j.prompt_sha256,
                                       j.kb_sha256) for j in run)]  # fmt: skip
    return standing(mine)
