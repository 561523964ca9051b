"""The judge canary: a few request lines whose grades are pinned, graded again to show that the
judge did not change under its name.

``record_canary`` grades the canary items (request lines) with real calls and writes the pinned
file: a first line naming the judge (spec, model, ``judge_sha256``, ``system_fingerprint``)
and the time, then one line per item with its request and its grades. ``check_canary`` grades
the pinned requests again and compares (``faithjudge.stats.canary``: the rule and its
tolerance); ``save_check`` keeps the outcome in the data dir's record file
(``canary_checks.json``), where the gate, the reports and ``/readyz`` read when the canary last
passed. ``CanaryWatch`` is the service's timer.

Every grade is a real call: the response cache is off for these calls whatever the settings
say (a cached answer would only repeat the judge of the day it was cached), and a Batch API
spec is graded on its live route (the same server and model, answering at once).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
from faithjudge_client.lines import ItemResult, ScoreRequest
from pydantic import BaseModel, Field, ValidationError

from faithjudge.errors import ConfigError, FaithJudgeError, UserInputError
from faithjudge.jsonl import describe_validation_error, numbered_lines
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.pipeline.scorer import Scorer
from faithjudge.private_files import private_dir
from faithjudge.reports.canary import read_records, records_path
from faithjudge.runners.judge_check import _first_error, _probe_settings
from faithjudge.settings import Settings
from faithjudge.stats.canary import (
    CanaryCheck,
    Comparison,
    Grade,
    JudgeIdentity,
    Tolerance,
    compare,
    grade_of,
)

__all__ = [
    "CANARY_FORMAT",
    "CanaryItem",
    "CanaryOptions",
    "CanaryUnanswered",
    "CanaryWatch",
    "PinnedCanary",
    "canary_watch",
    "check_canary",
    "check_json",
    "read_canary_items",
    "read_pinned",
    "record_canary",
    "save_check",
    "write_pinned",
]

log = logging.getLogger("faithjudge.canary")

# The pinned file's first line says what it is, and in which layout.
CANARY_FORMAT = 1
_HEADER_KEY = "faithjudge_canary"


class CanaryUnanswered(FaithJudgeError):
    """Canary grades the judge did not answer (transport failures): nothing to compare."""


@dataclass(frozen=True, slots=True)
class CanaryItem:
    """One canary request line, and its grades once graded."""

    name: str
    """Its ``item_id``, or ``line N`` of the file it came from."""
    line: int
    request: ScoreRequest
    grades: dict[str, Grade] | None = None


@dataclass(frozen=True, slots=True)
class PinnedCanary:
    """A pinned canary file."""

    path: Path
    sha256: str
    recorded_at: str
    judge: JudgeIdentity
    items: tuple[CanaryItem, ...]

    def grades(self) -> dict[tuple[str, str], Grade]:
        return {(item.name, metric): grade for item in self.items
                for metric, grade in (item.grades or {}).items()}  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_canary_items(path: Path) -> list[CanaryItem]:
    """The request lines of a canary items file.

    Raises:
        UserInputError: the file cannot be read, a line is not a request (naming the line and
            field), two lines share an ``item_id``, or it holds no line.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UserInputError(f"cannot read the canary items {path}: {exc.strerror}") from None
    items: list[CanaryItem] = []
    seen: dict[str, int] = {}
    with handle:
        for number, raw in numbered_lines(handle):
            parsed = parse_line(raw, number)
            if not isinstance(parsed, ScoreRequest):
                detail = parsed.error.detail if parsed.error is not None else "not a request"
                raise UserInputError(f"{path}: {detail}")
            name = parsed.item_id or f"line {number}"
            if name in seen:
                raise UserInputError(
                    f"{path}:{number}: item_id {name!r} is also line {seen[name]}: a canary "
                    "names each item once (drift is reported by item)",
                    field="item_id",
                )
            seen[name] = number
            items.append(CanaryItem(name=name, line=number, request=parsed))
    if not items:
        raise UserInputError(f"{path}: holds no request line: a canary needs items to grade")
    return items


def _identity(scorer: Scorer, results: Sequence[ItemResult]) -> JudgeIdentity:
    provenances = [r.provenance for r in results if r.provenance is not None]
    models = {m for p in provenances if p.judge_model for m in p.judge_model.split(",")}
    prints = {f for p in provenances if p.fingerprint for f in p.fingerprint.split(",")}
    first = provenances[0] if provenances else None
    return JudgeIdentity(
        judge=scorer.judge_id,
        model=",".join(sorted(models)) or None,
        judge_sha256=scorer.judge_sha256,
        settings_sha256=first.judge_settings_sha256 if first else None,
        prompt_set=scorer.prompts.id,
        prompt_sha256=scorer.prompts.sha256,
        kb_id=first.kb_id if first else None,
        kb_sha256=first.kb_sha256 if first else None,
        fingerprints=tuple(sorted(prints)),
    )


def _grades(result: ItemResult, request: ScoreRequest) -> dict[str, Grade]:
    stage = result.error.stage if result.error is not None else None
    return {metric: grade_of(result.metrics.get(metric), stage) for metric in request.metrics}


async def _grade(
    settings: Settings, items: Sequence[CanaryItem]
) -> tuple[list[CanaryItem], JudgeIdentity]:
    """``items`` graded by the judge of ``settings``, every grade a real call.

    Raises:
        FaithJudgeError: the judge cannot be built or reached (``JudgeUnreachable``).
    """
    results: list[ItemResult | None] = [None] * len(items)
    async with open_scorer(_probe_settings(settings), fail_fast=True) as scorer:
        limiter = anyio.CapacityLimiter(scorer.items_at_once(settings.concurrency))

        async def grade(index: int) -> None:
            async with limiter:
                item = items[index]
                results[index] = await scorer.score(item.request, line=item.line)

        try:
            async with anyio.create_task_group() as group:
                for index in range(len(items)):
                    group.start_soon(grade, index)
        except BaseExceptionGroup as group_error:
            stopped = _first_error(group_error)
            if stopped is None:
                raise
            raise stopped from None
        done = [r for r in results if r is not None]
        identity = _identity(scorer, done)
    graded = [
        CanaryItem(item.name, item.line, item.request, _grades(result, item.request))
        for item, result in zip(items, done, strict=True)
    ]
    return graded, identity


async def record_canary(
    settings: Settings, items_path: Path
) -> tuple[list[CanaryItem], JudgeIdentity, str]:
    """Grade the canary items of ``items_path``: the items with their grades, the judge and
    the time, for ``write_pinned``.

    Raises:
        UserInputError: the items file (as ``read_canary_items``).
        CanaryUnanswered: the judge answered some grades but not others: a grade it never
            gave cannot be pinned.
        FaithJudgeError: the judge cannot be built or reached.
    """
    items = read_canary_items(items_path)
    graded, judge = await _grade(settings, items)
    lost = [
        f"{item.name} {metric}"
        for item in graded
        for metric, grade in (item.grades or {}).items()
        if grade.outcome == "transport"
    ]
    if lost:
        raise CanaryUnanswered(
            f"the judge {judge.judge} did not answer {len(lost)} canary grade(s) "
            f"({', '.join(lost[:5])}{', ...' if len(lost) > 5 else ''}): nothing was pinned; "
            "record again once it answers"
        )
    return graded, judge, _now()


def write_pinned(
    path: Path, items: Sequence[CanaryItem], judge: JudgeIdentity, recorded_at: str
) -> None:
    """Write the pinned file at ``path`` in one piece (a crash leaves the old file or none)."""
    header = {_HEADER_KEY: CANARY_FORMAT, "recorded_at": recorded_at,
              "judge": judge.model_dump(mode="json")}  # fmt: skip
    lines = [orjson.dumps(header)]
    for item in items:
        lines.append(
            orjson.dumps(
                {
                    "item": item.name,
                    "line": item.line,
                    "grades": {
                        m: g.model_dump(mode="json") for m, g in (item.grades or {}).items()
                    },
                    "request": item.request.model_dump(mode="json", exclude_defaults=True),
                }
            )
        )
    _replace(path, b"\n".join(lines) + b"\n")


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as sink:
            sink.write(data)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class _PinnedLine(BaseModel):
    item: str
    line: int
    grades: dict[str, Grade] = Field(min_length=1)
    request: ScoreRequest


class _PinnedHeader(BaseModel):
    recorded_at: str
    judge: JudgeIdentity


def read_pinned(path: Path) -> PinnedCanary:
    """A pinned canary file (``faithjudge canary record``'s output).

    Raises:
        UserInputError: it cannot be read, is not a pinned canary (its first line says), or a
            line does not hold what it should (naming the line and field).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read the pinned canary {path}: {exc.strerror}") from None
    lines = list(numbered_lines(data.splitlines()))
    if not lines:
        raise UserInputError(f"{path}: empty; write it with `faithjudge canary record`")
    number, raw = lines[0]
    try:
        first = json.loads(raw)
    except ValueError:
        first = None
    if not isinstance(first, dict) or first.get(_HEADER_KEY) != CANARY_FORMAT:
        raise UserInputError(
            f"{path}:{number}: not a pinned canary (its first line names no "
            f"{_HEADER_KEY} {CANARY_FORMAT}); pin request lines with `faithjudge canary record "
            "ITEMS -o PINNED`"
        )
    try:
        header = _PinnedHeader.model_validate({k: v for k, v in first.items() if k != _HEADER_KEY})
    except ValidationError as exc:
        raise UserInputError(f"{path}:{number}: {describe_validation_error(exc)}") from None
    items: list[CanaryItem] = []
    for number, raw in lines[1:]:
        try:
            pinned = _PinnedLine.model_validate_json(raw)
        except ValidationError as exc:
            raise UserInputError(f"{path}:{number}: {describe_validation_error(exc)}") from None
        items.append(CanaryItem(pinned.item, pinned.line, pinned.request, dict(pinned.grades)))
    if not items:
        raise UserInputError(f"{path}: pins no item")
    return PinnedCanary(path=path, sha256=hashlib.sha256(data).hexdigest(),
                        recorded_at=header.recorded_at, judge=header.judge,
                        items=tuple(items))  # fmt: skip


async def check_canary(
    settings: Settings, pinned: PinnedCanary, tolerance: Tolerance | None = None
) -> CanaryCheck:
    """Grade the pinned requests again with the judge of ``settings`` and compare.

    Raises:
        FaithJudgeError: the judge cannot be built or reached (``JudgeUnreachable``).
    """
    graded, judge = await _grade(settings, pinned.items)
    now = {(item.name, metric): grade for item in graded
           for metric, grade in (item.grades or {}).items()}  # fmt: skip
    comparison = compare(pinned.grades(), now, tolerance)
    return CanaryCheck(
        pinned_file=str(pinned.path),
        pinned_sha256=pinned.sha256,
        recorded_at=pinned.recorded_at,
        pinned_judge=pinned.judge,
        judge=judge,
        checked_at=_now(),
        comparison=comparison,
    )


def save_check(path: Path, check: CanaryCheck) -> CanaryCheck:
    """Keep ``check`` in the record file at ``path`` (only a check that compared grades: one
    the judge did not answer says nothing of it); returns it with ``last_passed_at`` set."""
    records = read_records(path).with_check(check)
    private_dir(path.parent)
    _replace(path, records.model_dump_json(indent=2).encode() + b"\n")
    return records.checks[check.pinned_sha256]


class CanaryOptions(BaseModel):
    """The service's canary (``FAITHJUDGE_CANARY_*``; off unless ``canary_file`` is set)."""

    canary_file: Path | None = None
    """A pinned canary file: checked when the service starts, then every
    ``canary_interval_s``; ``/readyz`` fails while it finds drift."""
    canary_interval_s: float = Field(default=3600.0, ge=0)
    """Seconds between checks (0: at start only)."""
    canary_score_tolerance: int = Field(default=Tolerance().score_tolerance, ge=0, le=4)
    canary_min_agreement: float = Field(default=Tolerance().min_agreement, ge=0, le=100)

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(score_tolerance=self.canary_score_tolerance,
                         min_agreement=self.canary_min_agreement)  # fmt: skip


class CanaryWatch:
    """The service's canary: checked at start and on a timer; ``problem`` is what ``/readyz``
    reports (None: the last check passed)."""

    def __init__(self, settings: Settings, options: CanaryOptions) -> None:
        if options.canary_file is None:
            raise ConfigError("CanaryWatch needs FAITHJUDGE_CANARY_FILE")
        self.pinned = read_pinned_setting(options.canary_file)
        offered = settings.offered_judges
        if self.pinned.judge.judge not in offered:
            raise ConfigError(
                f"FAITHJUDGE_CANARY_FILE {options.canary_file} pins the judge "
                f"{self.pinned.judge.judge}, which this service does not offer "
                f"({', '.join(offered)})"
            )
        self._settings = settings.model_copy(update={"judge": self.pinned.judge.judge})
        self._options = options
        self.last: CanaryCheck | None = None
        self.error: str | None = None
        """Why the last attempt compared nothing (the judge unreachable), else None."""

    @property
    def problem(self) -> str | None:
        """None when the last check passed; else why the canary does not vouch for the judge."""
        last = self.last
        if last is None:
            why = f" (last attempt: {self.error})" if self.error else ""
            return f"not checked yet{why}"
        if last.verdict == "pass":
            return None
        drifted = "; ".join(p.describe() for p in last.comparison.differing[:5])
        return (f"drift at {last.checked_at}: {last.comparison.summary()}: {drifted}")[:500]

    async def check_once(self) -> CanaryCheck | None:
        """One check; its record kept in the data dir. Never raises for the judge."""
        try:
            check = await check_canary(self._settings, self.pinned, self._options.tolerance)
        except FaithJudgeError as exc:
            self.error = str(exc)
            log.warning("canary check could not run: %s", exc)
            return None
        if check.verdict == "unreached":
            self.error = check.comparison.summary()
            log.warning("canary check got no answer: %s", self.error)
            return None
        self.error = None
        try:
            check = save_check(records_path(self._settings.data_dir), check)
        except (OSError, FaithJudgeError) as exc:  # the check still counts for /readyz
            log.warning("canary record not kept: %s", exc)
        self.last = check
        if check.verdict == "pass":
            log.info("canary passed: %s", check.comparison.summary())
        else:
            log.error("canary found drift: %s", self.problem)
        return check

    async def run(self) -> None:
        """Check now, then every ``canary_interval_s`` (0: never again)."""
        while True:
            await self.check_once()
            if self._options.canary_interval_s <= 0:
                return
            await anyio.sleep(self._options.canary_interval_s)


def canary_watch(settings: Settings) -> CanaryWatch | None:
    """The service's canary for ``settings`` (None: ``FAITHJUDGE_CANARY_FILE`` unset).

    Raises:
        ConfigError: a bad canary setting, an unreadable pinned file, or a pinned judge the
            service does not offer.
    """
    options = settings.options(CanaryOptions)
    return None if options.canary_file is None else CanaryWatch(settings, options)


def read_pinned_setting(path: Path) -> PinnedCanary:
    """``read_pinned`` for a setting: its errors are configuration errors naming it."""
    try:
        return read_pinned(path)
    except UserInputError as exc:
        raise ConfigError(f"FAITHJUDGE_CANARY_FILE: {exc}") from None


def check_json(check: CanaryCheck) -> dict[str, Any]:
    """A check as plain JSON data (``faithjudge canary check --json``)."""
    comparison: Comparison = check.comparison
    return {
        **check.model_dump(mode="json", exclude={"comparison"}),
        "verdict": check.verdict,
        "agreement": comparison.agreement,
        "tolerance": comparison.tolerance.model_dump(mode="json"),
        "judge_changes": check.pinned_judge.changes(check.judge),
        "differing": [p.model_dump(mode="json") for p in comparison.differing],
        "unanswered": [p.model_dump(mode="json") for p in comparison.unanswered],
    }
