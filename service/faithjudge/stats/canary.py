"""The judge canary's comparison: the grades a judge gives the canary items now, against the
grades pinned when the thresholds were set.

A hosted judge can change under the same model name. The canary is a small fixed set of request
lines graded once (``faithjudge canary record``) and graded again before a run is trusted
(``faithjudge canary check``, the service's timer); this module decides whether the two sets of
grades agree. Pure: values in, values out; the files are read and written by the runner
(``faithjudge.runners.canary``), the gate and the CLI.

The rule (``Tolerance``), per canary item and metric:

- a grade is its outcome (``valid``, or the failure stage: ``parse``, ``schema``, ``evidence``,
  ``abstain``, ``kb``, ``input``; the one outcome definition of ``faithjudge.scoring.outcomes``)
  and, when valid, its score;
- the grade now agrees with the pinned one when the outcome is the same and the scores differ
  by at most ``score_tolerance`` points (default 0: the same score);
- the check passes when at least ``min_agreement`` % of the grades agree (default 90 %: a judge
  at temperature 0 still turns a grade now and then; a judge that changed turns many). Every
  grade that does not agree is listed, passing or not;
- a grade that failed at the ``transport`` stage now was never answered: it is not compared,
  and the check could not run (``unreached``), since a canary cannot vouch for a judge it did
  not hear from.

The judge itself is compared too (``JudgeIdentity.changes``): the judge, the model the
server answered as, the configuration hash (``judge_sha256``) and the server's
``system_fingerprint``. A change is reported, never a failure by itself: the grades decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from faithjudge_client.metric_catalogue import label_of
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from faithjudge.scoring.outcomes import metric_outcome

__all__ = [
    "DEFAULT_MIN_AGREEMENT",
    "DEFAULT_SCORE_TOLERANCE",
    "CanaryCheck",
    "CanaryRecords",
    "Comparison",
    "Grade",
    "GradePair",
    "JudgeIdentity",
    "Tolerance",
    "compare",
    "grade_of",
    "standing",
]

# The defaults of ``Tolerance`` (the README's canary section states them).
DEFAULT_SCORE_TOLERANCE = 0
DEFAULT_MIN_AGREEMENT = 90.0

# The outcome of a grade the judge never answered: not compared.
_UNANSWERED = "transport"

Verdict = Literal["pass", "drift", "unreached"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Tolerance(_Frozen):
    """How far the grades now may stray from the pinned ones (see the module docstring)."""

    score_tolerance: int = Field(default=DEFAULT_SCORE_TOLERANCE, ge=0, le=4)
    """Points a valid score may differ by (scores run from 1 to 5)."""
    min_agreement: float = Field(default=DEFAULT_MIN_AGREEMENT, ge=0.0, le=100.0)
    """The share of grades (in %) that must agree."""


class Grade(_Frozen):
    """One metric's grade of one canary item: its outcome, and its score when valid."""

    outcome: str
    score: int | None = None

    def describe(self) -> str:
        if self.outcome == "valid" and self.score is not None:
            return f"score {self.score}"
        return self.outcome


def grade_of(graded: object | None, line_error_stage: str | None = None) -> Grade:
    """The ``Grade`` of one metric of a result line (``graded`` its ``MetricResult`` or None)."""
    outcome = metric_outcome(graded, line_error_stage)  # type: ignore[arg-type]
    score = getattr(graded, "score", None) if outcome == "valid" else None
    return Grade(outcome=outcome, score=score)


class GradePair(_Frozen):
    """A canary item's grade for one metric, pinned (``was``) and now."""

    item: str
    """The item's ``item_id``, or ``line N`` of the canary file when it has none."""
    metric: str
    was: Grade
    now: Grade

    def agrees(self, tolerance: Tolerance) -> bool:
        if self.was.outcome != self.now.outcome:
            return False
        if self.was.score is None or self.now.score is None:
            return self.was.score == self.now.score
        return abs(self.was.score - self.now.score) <= tolerance.score_tolerance

    def describe(self) -> str:
        """``item, CF: score 3 -> score 5``."""
        return (
            f"{self.item}, {label_of(self.metric)}: {self.was.describe()} -> {self.now.describe()}"
        )


class Comparison(_Frozen):
    """Every pinned grade beside the grade now, read at a tolerance."""

    pairs: tuple[GradePair, ...]
    tolerance: Tolerance = Field(default_factory=Tolerance)

    @property
    def unanswered(self) -> tuple[GradePair, ...]:
        """The grades the judge did not answer now (transport failures): not compared."""
        return tuple(p for p in self.pairs if p.now.outcome == _UNANSWERED)

    @property
    def compared(self) -> tuple[GradePair, ...]:
        return tuple(p for p in self.pairs if p.now.outcome != _UNANSWERED)

    @property
    def differing(self) -> tuple[GradePair, ...]:
        """The compared grades that do not agree (listed whether the check passes or not)."""
        return tuple(p for p in self.compared if not p.agrees(self.tolerance))

    @property
    def agreement(self) -> float | None:
        """The share of compared grades that agree, in % (None: none compared)."""
        compared = len(self.compared)
        if compared == 0:
            return None
        return 100.0 * (compared - len(self.differing)) / compared

    @property
    def verdict(self) -> Verdict:
        if self.unanswered or self.agreement is None:
            return "unreached"
        return "pass" if self.agreement >= self.tolerance.min_agreement else "drift"

    def at(self, tolerance: Tolerance) -> Comparison:
        """The same grades read at another tolerance (the gate's, from its TOML table)."""
        return Comparison(pairs=self.pairs, tolerance=tolerance)

    def summary(self) -> str:
        """One sentence: how many grades agree, at which tolerance."""
        compared, differing = len(self.compared), len(self.differing)
        points = self.tolerance.score_tolerance
        within = "the same score" if points == 0 else f"scores within {points} point(s)"
        rate = "n/a" if self.agreement is None else f"{self.agreement:.1f}%"
        text = (
            f"{compared - differing} of {compared} grades agree ({rate}; the same outcome and "
            f"{within}; at least {self.tolerance.min_agreement:g}% must)"
        )
        if self.unanswered:
            text += f"; {len(self.unanswered)} grade(s) got no answer from the judge"
        return text


def compare(
    pinned: Mapping[tuple[str, str], Grade],
    now: Mapping[tuple[str, str], Grade],
    tolerance: Tolerance | None = None,
) -> Comparison:
    """Pair the pinned grades with the grades now, by (item, metric), in the pinned order.

    A pinned grade without one now (the item or metric no longer graded) is compared as
    ``missing``, which never agrees.
    """
    pairs = tuple(
        GradePair(item=item, metric=metric, was=was,
                  now=now.get((item, metric), Grade(outcome="missing")))
        for (item, metric), was in pinned.items()
    )  # fmt: skip
    return Comparison(pairs=pairs, tolerance=tolerance or Tolerance())


class JudgeIdentity(_Frozen):
    """The judge as its result lines' provenance records it."""

    judge: str
    """Its spec (``openai:gpt-4o``)."""
    model: str | None = None
    """The model the server said it answered as (comma-separated when several)."""
    judge_sha256: str | None = None
    """Everything that decides a grade: the judge, its settings, prompts, KB and scoring."""
    settings_sha256: str | None = None
    prompt_set: str | None = None
    prompt_sha256: str | None = None
    kb_id: str | None = None
    kb_sha256: str | None = None
    fingerprints: tuple[str, ...] = ()
    """The servers' ``system_fingerprint`` values seen (none: the server sends none)."""

    def changes(self, now: JudgeIdentity) -> list[str]:
        """What differs between this (pinned) judge and ``now``, one sentence each."""
        out: list[str] = []
        if self.judge != now.judge:
            out.append(f"judge {self.judge} -> {now.judge}")
        if self.model != now.model:
            out.append(f"model {self.model or 'not recorded'} -> {now.model or 'not recorded'}")
        if self.judge_sha256 != now.judge_sha256:
            parts = [
                name
                for name, was, is_ in (
                    ("judge settings", self.settings_sha256, now.settings_sha256),
                    ("prompt set", self.prompt_sha256, now.prompt_sha256),
                    ("knowledge base", self.kb_sha256, now.kb_sha256),
                )
                if was != is_
            ]
            what = ", ".join(parts) if parts else "scoring settings"
            out.append(
                f"judge configuration {_short(self.judge_sha256)} -> {_short(now.judge_sha256)} "
                f"({what})"
            )
        if self.fingerprints != now.fingerprints:
            was = ", ".join(self.fingerprints) or "none"
            is_ = ", ".join(now.fingerprints) or "none"
            out.append(f"system_fingerprint {was} -> {is_}")
        return out

    def same_configuration(self, judge: str, settings_sha256: str | None,
                           prompt_sha256: str | None, kb_sha256: str | None) -> bool:  # fmt: skip
        """Whether a judge of a results file (``reports.judges.Judge``'s fields) is this one."""
        return (self.judge, self.settings_sha256, self.prompt_sha256, self.kb_sha256) == (
            judge, settings_sha256, prompt_sha256, kb_sha256
        )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _older_name(cls, data: Any) -> Any:
        # canary files pinned before the rename call the spec ``evaluator``
        if isinstance(data, dict) and "evaluator" in data:
            if "judge" in data:
                raise ValueError("both 'judge' and its older name 'evaluator' are given")
            data = {("judge" if k == "evaluator" else k): v for k, v in data.items()}
        return data


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


class CanaryCheck(_Frozen):
    """One check of a pinned canary file: what the record in the data dir keeps of it."""

    pinned_file: str
    pinned_sha256: str
    """The pinned file's content hash: the gate finds a file's last check by it."""
    recorded_at: str
    """When the grades were pinned (ISO 8601, UTC)."""
    pinned_judge: JudgeIdentity
    judge: JudgeIdentity
    checked_at: str
    comparison: Comparison
    last_passed_at: str | None = None
    """The last check of this file that passed (this one, when it did)."""

    @property
    def verdict(self) -> Verdict:
        return self.comparison.verdict


class CanaryRecords(_Frozen):
    """The record file: the last check of each pinned canary file, by its content hash."""

    checks: dict[str, CanaryCheck] = Field(default_factory=dict)

    def with_check(self, check: CanaryCheck) -> CanaryRecords:
        """The records with ``check`` in place of its file's last one; ``last_passed_at``
        carried over from it when this check did not pass."""
        earlier = self.checks.get(check.pinned_sha256)
        if check.verdict == "pass":
            check = check.model_copy(update={"last_passed_at": check.checked_at})
        elif earlier is not None:
            check = check.model_copy(update={"last_passed_at": earlier.last_passed_at})
        return CanaryRecords(checks={**self.checks, check.pinned_sha256: check})

    @classmethod
    def parse(cls, data: bytes) -> CanaryRecords:
        """The records in ``data`` (a record file's bytes; empty: none).

        Raises:
            ValueError: ``data`` holds no records, naming the first bad field.
        """
        if not data.strip():
            return cls()
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            where = ".".join(str(part) for part in exc.errors()[0]["loc"]) or "(file)"
            raise ValueError(f"not a canary record ({where}: {exc.errors()[0]['msg']})") from None


def standing(checks: Iterable[CanaryCheck]) -> list[str]:
    """One sentence per canary check: when it last passed, and how the last check went."""
    out: list[str] = []
    for check in sorted(checks, key=lambda c: c.checked_at, reverse=True):
        judge = check.judge.judge + (f" ({check.judge.model})" if check.judge.model else "")
        last = (f"last passed {check.last_passed_at}" if check.last_passed_at
                else "never passed")  # fmt: skip
        how = "passed" if check.verdict == "pass" else f"found {check.verdict}"
        out.append(
            f"judge canary {check.pinned_file}: {last}; the last check ({check.checked_at}, "
            f"{judge}) {how}: {check.comparison.summary()}"
        )
    return out
