"""The CI gate: thresholds from a TOML file, checked against one run (and a baseline).

Config (percentages in %): every key is optional, but a config must set at least one check
(a key of [quality], [coverage] or [regression]); one that sets none is a configuration error,
because a gate that checks nothing must not pass. Only the keys present are checked::

    [gate]
    bootstrap = 1000     # resamples of the percentile bootstrap
    seed = 0
    flip_rate = "pairs"  # or "decided": flipped over the pairs whose flip was decided
    [quality]            # on the whole run, point estimates (each model separately)
    min_accuracy = 30.0
    min_cf = 30.0
    min_ca = 1.0
    min_cc = 25.0
    max_flip_rate = 50.0
    [coverage]           # METHODS §1.11: judged on the exact one-sided 95% upper bound
    max_invalid = 2.0
    max_abstain = 2.0
    max_parse = 0.0      # 0 means: no parse failure at all
    max_schema = 1.0
    max_evidence = 1.0
    max_not_judged = 2.0 # items that never reached the judge (kb, transport, input);
                         # absent: 0, no item may miss the judge (a run that lost lines fails)
    max_fpr_sham = 5.0
    scopes = ["CF", "CA", "CC", "macro"]
    [regression]         # against --baseline: tolerated worsening in % points
    max_drop_cf = 2.0
    max_drop_ca = 2.0
    max_drop_cc = 2.0
    max_drop_accuracy = 2.0
    max_rise_flip_rate = 2.0
    [canary]             # the judge canary (reports/canary.py): its last check must pass
    pinned = "canary.jsonl"
    min_agreement = 90.0

A coverage gate is judged on the Clopper-Pearson upper bound of its failure count, never on a
bootstrap of it: 0 failures in 5 items bound the rate at 45%, so a handful of items cannot pass
a 2% gate. A zero threshold (``max_parse = 0``) is judged on the failure count itself.

Too few items is a state of its own, apart from a failure: a coverage check whose rate is within
its threshold but whose bound is not (or that has no item at all) is short of items, not of
quality. Such checks of one scope are shown as one check, ``too few items [CF]``: the items of
the one furthest short against those it needs, each check it stands for, and the cause when
items never reached the judge in that scope (lines lost, KB misses), so one cause is named once
per scope instead of as failures of schema, evidence and the rest. It fails the gate (a gate
must not pass what it cannot show) once, as its own reason whatever the number of scopes: the
verdict reads ``FAILED (too few items)`` and exits 2, like a coverage failure, since it is the
coverage that could not be shown.

Every output prints a value and its threshold with the decimals that tell them apart
(``compared``: a bound of 1.0028% against 1% is ``1.003`` and ``1.000``), and the value beside a
threshold is the one compared with it.

The not-judged check is the one check that runs without its key: items that never reached the
judge (a lost line, a transport error, a KB gap) are bounded at ``DEFAULT_MAX_NOT_JUDGED`` (0:
none at all) on the configured scopes unless ``max_not_judged`` says otherwise, so that a run
that lost half its lines never passes. A regression is checked only for the statistics whose
``max_drop_``/``max_rise_`` key is present, at that key's tolerance.

Exit codes (``faithjudge.cli.common.ExitCode``): 0 pass; 1 a quality or regression check failed;
2 a coverage check failed or had too few items (it wins over 1, because quality numbers on a
badly covered run mean little); 3 the run could not be evaluated (raised as ``GateConfigError``
or by the reader, and handled by the CLI; a baseline that shares no item with the run, a config
that sets no check); 4 the run holds no result line or not one valid grade.
``unevaluable_reason`` and ``unshared_reason`` are the rules for 4 and 3 that
``faithjudge report`` applies as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes, higher_is_better, labels

from faithjudge.errors import ConfigError, FaithJudgeError
from faithjudge.exit_codes import ExitCode
from faithjudge.reports.canary import CANARY_KEYS, CanaryTable, canary_findings, parse_canary_table
from faithjudge.reports.report import Report
from faithjudge.reports.run_coverage import run_gates
from faithjudge.scoring.outcomes import NOT_JUDGED, outcome_name
from faithjudge.stats.canary import CanaryRecords
from faithjudge.stats.judge_coverage import GateResult, GateThresholds, gated_scopes
from faithjudge.toml_file import read_toml, unknown_keys

__all__ = [
    "DEFAULT_MAX_NOT_JUDGED",
    "TOO_FEW",
    "Check",
    "GateConfig",
    "GateConfigError",
    "Verdict",
    "check_status",
    "compared",
    "configured_kinds",
    "evaluate",
    "load_config",
    "parse_config",
    "regression_tolerance",
    "unevaluable_reason",
    "unshared_reason",
    "verdict",
]

# The not-judged limit (in %) when [coverage] has no max_not_judged: no item may miss the judge.
DEFAULT_MAX_NOT_JUDGED = 0.0

# The table of `faithjudge score --config` in the same file; its own reader checks it.
_SCORE_TABLE = "score"

# The state, and the verdict's reason, of checks that lack items rather than fail on failures.
TOO_FEW = "too few items"

# The order in which a verdict names its reasons: coverage decides the exit code first.
_KINDS = ("coverage", TOO_FEW, "quality", "regression", "canary")

# The fewest decimals a value and its threshold print with; more where they would read alike.
_MIN_DECIMALS = 2
_MAX_DECIMALS = 6


def _quality_keys() -> dict[str, str]:
    # one bound per headline scope: min_cf for a higher-is-better score, max_ otherwise
    return {
        "min_accuracy": "accuracy",
        **{f"{'min' if higher_is_better(s) else 'max'}_{s.lower()}": s for s in headline_scopes()},
        "max_flip_rate": "flip_rate",
    }


_COVERAGE = {
    "max_invalid": "invalid", "max_abstain": "abstain", "max_parse": "parse",
    "max_schema": "schema", "max_evidence": "evidence", "max_not_judged": "not_judged",
    "max_fpr_sham": "fpr_sham",
}  # fmt: skip


def _regression_keys() -> dict[str, str]:
    return {
        "max_drop_accuracy": "accuracy",
        **{
            f"{'max_drop' if higher_is_better(s) else 'max_rise'}_{s.lower()}": s
            for s in headline_scopes()
        },
        "max_rise_flip_rate": "flip_rate",
    }


def _sections() -> dict[str, set[str]]:
    return {
        "gate": {"bootstrap", "seed", "flip_rate"},
        "quality": set(_quality_keys()),
        "coverage": {*_COVERAGE, "scopes"},
        "regression": set(_regression_keys()),
        "canary": set(CANARY_KEYS),
    }


class GateConfigError(FaithJudgeError):
    """The gate configuration is unreadable or invalid."""


@dataclass(frozen=True)
class GateConfig:
    """Parsed thresholds; a None or missing threshold is not checked (except not-judged items,
    bounded at ``DEFAULT_MAX_NOT_JUDGED`` without ``max_not_judged``)."""

    bootstrap: int = 1000
    seed: int = 0
    flip_rate: str = "pairs"
    quality: dict[str, float] | None = None
    coverage: dict[str, float] | None = None
    scopes: tuple[str, ...] = field(default_factory=gated_scopes)
    regression: dict[str, float] | None = None
    canary: CanaryTable | None = None
    """The ``[canary]`` table (its paths resolved by ``load_config``)."""


def compared(value: float | None, threshold: float) -> tuple[str, str]:
    """``value`` and ``threshold`` printed alike, with as many decimals as it takes to tell them
    apart (the threshold's own, at least two): 1.0028 against 1 is ``1.003`` and ``1.000``,
    never ``1.00`` and ``1.00``. Rounding keeps their order, so the printed pair never
    contradicts the comparison made. ``n/a`` for a missing value."""
    decimals = max(_MIN_DECIMALS, _decimals(threshold))
    if value is not None and math.isfinite(value):
        while (decimals < _MAX_DECIMALS and value != threshold
               and f"{value:.{decimals}f}" == f"{threshold:.{decimals}f}"):  # fmt: skip
            decimals += 1
    shown = "n/a" if value is None or not math.isfinite(value) else f"{value:.{decimals}f}"
    return shown, f"{threshold:.{decimals}f}"


def _decimals(number: float) -> int:
    """The decimals ``number`` is written with (2.5 -> 1, 0.125 -> 3, 2 -> 0)."""
    text = f"{number:.{_MAX_DECIMALS}f}".rstrip("0")
    return len(text.partition(".")[2])


@dataclass(frozen=True)
class Check:
    """One checked threshold; ``passed`` None means it could not be evaluated.

    A check of too few items (``needed`` set) stands for the coverage checks of one scope that
    lack items (``parts``): its ``threshold`` is the items the one furthest short of them needs,
    its ``value`` the items that one has.
    """

    kind: str  # quality, coverage or regression
    name: str
    threshold: float
    value: float | None
    """The quantity compared with the threshold. Quality: the rate; coverage: its exact upper
    bound (its rate where the threshold is zero: no failure at all); regression: the
    difference; too few items: the items."""
    passed: bool | None
    detail: str
    rate: float | None = None
    """Coverage: the observed rate."""
    needed: int | None = None
    """Too few items: how many a pass needs."""
    parts: tuple[Check, ...] = ()
    """Too few items: the checks it stands for."""

    @property
    def scope(self) -> str:
        """The scope or model in the name's brackets (``CF`` of ``schema [CF]``)."""
        return self.name.rpartition(" [")[2].removesuffix("]")

    def shown(self) -> tuple[str, str]:
        """Threshold and value as every output prints them (``compared``, or items)."""
        if self.needed is not None:
            return f"{self.needed} items", f"{_items(self.value)} items"
        value, threshold = compared(self.value, self.threshold)
        return threshold, value

    def short_of(self) -> str:
        """Too few items: the items against those needed (``286 of 299 needed``)."""
        return f"{_items(self.value)} of {self.needed} needed"

    def measured(self) -> str:
        """Rate, bound and threshold in words (the JUnit failure message starts with it), at
        the precision of the table's row."""
        if self.needed is not None:
            return f"{TOO_FEW}: {self.short_of()}"
        if self.kind == "regression":
            return f"difference {_pp(self.value)} pp, tolerance {self.threshold:g} pp"
        threshold, value = f"{self.shown()[0]}%", _against(self.value, self.threshold)
        if self.kind == "coverage":
            if self.threshold == 0.0:
                return f"rate {value}, threshold {threshold} (no failure at all)"
            rate = _against(self.rate, self.threshold)
            return f"rate {rate}, upper bound {value}, threshold {threshold}"
        bound = "at least" if self.name.startswith(("min_", "canary_")) else "at most"
        return f"value {value}, threshold {bound} {threshold}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _items(value: float | None) -> str:
    return "0" if value is None else f"{int(value)}"


def _number(section: str, key: str, value: Any, *, low: float = 0.0, high: float = 100.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GateConfigError(f"[{section}] {key} must be a number, got {value!r}")
    if not low <= float(value) <= high:
        raise GateConfigError(f"[{section}] {key} must be within [{low}, {high}], got {value}")
    return float(value)


def parse_config(data: dict[str, Any], folder: Path | None = None) -> GateConfig:
    """Validate a decoded TOML document (``folder``: where its relative paths start; the
    working directory by default). Raises GateConfigError naming the bad key."""
    sections = _sections()
    for name, value in data.items():
        if name == _SCORE_TABLE:
            continue
        if name not in sections:
            problem = unknown_keys(None, [name], [*sections, _SCORE_TABLE])
            raise GateConfigError(problem or f"unknown section [{name}]")
        if not isinstance(value, dict):
            raise GateConfigError(f"[{name}] must be a table")
        problem = unknown_keys(name, value, sections[name])
        if problem is not None:
            raise GateConfigError(problem)
    gate = data.get("gate", {})
    bootstrap = int(_number("gate", "bootstrap", gate.get("bootstrap", 1000), low=1, high=1e6))
    seed = int(_number("gate", "seed", gate.get("seed", 0), low=0, high=2**32 - 1))
    flip_rate = gate.get("flip_rate", "pairs")
    if flip_rate not in ("pairs", "decided"):
        raise GateConfigError(f"[gate] flip_rate must be 'pairs' or 'decided', got {flip_rate!r}")
    coverage = data.get("coverage")
    gated = gated_scopes()
    scopes = tuple(coverage.get("scopes", gated)) if coverage else gated
    if not scopes or any(s not in gated for s in scopes):
        raise GateConfigError(f"[coverage] scopes must be a subset of {list(gated)}")

    def section(name: str, keys: dict[str, str]) -> dict[str, float] | None:
        table = data.get(name)
        if table is None:
            return None
        return {k: _number(name, k, v) for k, v in table.items() if k in keys}

    config = GateConfig(
        bootstrap=bootstrap,
        seed=seed,
        flip_rate=flip_rate,
        quality=section("quality", _quality_keys()),
        coverage=section("coverage", _COVERAGE),
        scopes=scopes,
        regression=section("regression", _regression_keys()),
        canary=_canary(data, folder or Path()),
    )
    if not configured_kinds(config):
        raise GateConfigError(
            "the config sets no check: a gate that checks nothing cannot pass; set at least one "
            f"key of [quality] {sorted(_quality_keys())}, [coverage] {sorted(_COVERAGE)} or "
            f"[regression] {sorted(_regression_keys())}"
        )
    return config


def _canary(data: dict[str, Any], folder: Path) -> CanaryTable | None:
    if "canary" not in data:
        return None
    try:
        return parse_canary_table(data["canary"], folder)
    except ConfigError as exc:
        raise GateConfigError(str(exc)) from None


def configured_kinds(config: GateConfig) -> set[str]:
    """The kinds of check (quality, coverage, regression, canary) that ``config`` sets a key
    of."""
    tables = {"quality": config.quality, "coverage": config.coverage,
              "regression": config.regression, "canary": config.canary}  # fmt: skip
    return {kind for kind, table in tables.items() if table}


def load_config(path: Path) -> GateConfig:
    """Read and validate a TOML gate configuration. Raises GateConfigError."""
    try:
        data = read_toml(path)
    except ConfigError as exc:
        raise GateConfigError(str(exc)) from None
    try:
        return parse_config(data, path.parent)
    except GateConfigError as exc:
        raise GateConfigError(f"{path}: {exc}") from None


def regression_tolerance(config: GateConfig) -> dict[str, float]:
    """Tolerated worsening per statistic for ``compare_runs``."""
    return {stat: config.regression[key] for key, stat in _regression_keys().items()
            if config.regression and key in config.regression}  # fmt: skip


def _quality(report: Report, limits: dict[str, float]) -> list[Check]:
    overall = report.aggregates[
        (report.aggregates["dimension"] == "all") & (report.aggregates["split"] == "all")
    ]
    checks: list[Check] = []
    for key, limit in limits.items():
        stat = _quality_keys()[key]
        for _, row in overall[overall["stat"] == stat].iterrows():
            value = None if pd.isna(row["value"]) else float(row["value"])
            ok = (
                None
                if value is None
                else (value >= limit if key.startswith("min") else value <= limit)
            )
            detail = f"{stat} = {_pct(value)} over {row['n_eval']} items"
            if value is None:
                detail += ": no item to judge it on, which fails the check"
            checks.append(Check("quality", f"{key} [{row['model']}]", limit, value, ok, detail))
    return checks


def _pp(value: Any) -> str:
    """A difference in % points, two decimals (n/a when missing)."""
    return "n/a" if value is None or pd.isna(value) else f"{float(value):+.2f}"


def _against(value: float | None, threshold: float) -> str:
    """A % value at the precision that tells it from ``threshold`` (``compared``)."""
    return "n/a" if value is None else f"{compared(value, threshold)[0]}%"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _coverage(report: Report, config: GateConfig) -> list[Check]:
    limits = dict(config.coverage or {})
    default_not_judged = "max_not_judged" not in limits
    if default_not_judged:
        limits["max_not_judged"] = DEFAULT_MAX_NOT_JUDGED
    wanted = {_COVERAGE[k]: v / 100.0 for k, v in limits.items()}
    thresholds = GateThresholds(**{g: wanted.get(g, 1.0) for g in _COVERAGE.values()})
    level = 100 * thresholds.level
    rows: list[Check | str] = []  # a scope's name holds the place of its one too-few check
    short: dict[str, list[tuple[GateResult, Check]]] = {}
    for gate in run_gates(report.coverage, report.fpr, thresholds):
        if gate.gate not in wanted or (gate.gate != "fpr_sham" and gate.scope not in config.scopes):
            continue
        up = None if gate.upper is None else 100 * gate.upper
        point = None if gate.point is None else 100 * gate.point
        threshold = 100 * gate.threshold
        if threshold == 0.0:
            # judged on the count: the bound of 0 failures is never 0, and it is not compared
            detail = f"{gate.events or 0} of {gate.trials or 0}: no failure at all allowed"
        else:
            detail = (f"point {_against(point, threshold)}, exact {level:g}% upper bound "
                      f"{_against(up, threshold)}")  # fmt: skip
            if gate.trials:
                detail += f" ({gate.events} of {gate.trials})"
            if gate.note:
                detail = f"{detail}; {gate.note}" if gate.trials else gate.note
        if gate.gate == "not_judged" and default_not_judged:
            detail += (f"; default limit {DEFAULT_MAX_NOT_JUDGED:g}% (no line may miss the judge):"
                       " set [coverage] max_not_judged to tolerate some")  # fmt: skip
        value = point if threshold == 0.0 else up
        check = Check("coverage", f"{gate.gate} [{gate.scope}]", threshold, value, gate.passed,
                      detail, rate=point)  # fmt: skip
        if gate.needed is None:
            rows.append(check)
            continue
        if gate.scope not in short:
            short[gate.scope] = []
            rows.append(gate.scope)
        short[gate.scope].append((gate, check))
    return [_too_few(report, row, short[row]) if isinstance(row, str) else row for row in rows]


def _too_few(report: Report, scope: str, parts: list[tuple[GateResult, Check]]) -> Check:
    """The one check of a scope's coverage checks that lack items: the items of the one furthest
    short against what it needs, each part, and the items that never reached the judge."""
    worst, _ = max(parts, key=lambda part: (part[0].needed or 0) - (part[0].trials or 0))
    needed = worst.needed or 0
    said = []
    for gate, check in parts:
        failures = _count(gate.events or 0, "failure") if gate.events else "no failure"
        bound, threshold = compared(check.value, check.threshold)
        have = f"{failures} in {_count(gate.trials or 0, 'item')}"
        if check.value is not None:
            have += f", bound {bound}% > {threshold}%"
        said.append(f"{gate.gate} ({have}; a pass needs {gate.needed})")
    detail = "; ".join(said)
    coverage = report.coverage.get(scope)
    if scope != "macro" and coverage is not None and coverage.n_not_judged:
        # the macro view pools three scopes' items: each lost line would count thrice there
        why = ", ".join(f"{outcome_name(stage)} {coverage.counts[stage]}" for stage in NOT_JUDGED
                        if coverage.counts.get(stage))  # fmt: skip
        detail += (f"; {coverage.n_not_judged} of {coverage.n_items} items in {scope} never "
                   f"reached the judge ({why})")  # fmt: skip
    return Check("coverage", f"{TOO_FEW} [{scope}]", float(needed), float(worst.trials or 0),
                 False, detail, needed=needed, parts=tuple(c for _, c in parts))  # fmt: skip


def _regression(report: Report, config: GateConfig) -> list[Check]:
    """One check per configured regression key; a statistic without its key is not checked.

    The report was built with these tolerances (``regression_tolerance``), so its comparison
    flags each statistic at its key's tolerance.
    """
    tolerance = regression_tolerance(config)
    if report.comparison is None or not tolerance:
        return []
    checks: list[Check] = []
    for _, row in report.comparison.iterrows():
        if row["stat"] not in tolerance:
            continue
        diff = None if pd.isna(row["diff"]) else float(row["diff"])
        ok = None if diff is None else not bool(row["regression"])
        detail = (f"{row['stat']}: {_pct(row['baseline'])} -> {_pct(row['candidate'])}, "
                  f"diff {_pp(diff)} pp [{_pp(row['low'])}, {_pp(row['high'])}] "
                  f"over {row['n_pairs']} pairs")  # fmt: skip
        checks.append(Check("regression", f"{row['stat']} vs baseline", float(row["tolerance"]),
                            diff, ok, detail))  # fmt: skip
    return checks


def evaluate(
    report: Report, config: GateConfig, canary: CanaryRecords | None = None
) -> list[Check]:
    """Every configured check on ``report`` (regressions only when it holds a comparison),
    plus the default not-judged bound when ``max_not_judged`` is absent; with ``[canary]``,
    the canary checks read from ``canary``, the record file's checks (None: none kept)."""
    checks = _quality(report, config.quality or {})
    checks += _coverage(report, config)
    checks += _regression(report, config)
    if config.canary is not None:
        try:
            found = canary_findings(config.canary, canary or CanaryRecords(), report.judges)
        except ConfigError as exc:
            raise GateConfigError(str(exc)) from None
        checks += [Check("canary", f.name, f.threshold, f.value, f.passed, f.detail)
                   for f in found]  # fmt: skip
    return checks


def check_status(check: Check) -> str:
    """``pass``, ``fail``, ``too few items`` or ``skip``: the one reading of a check every
    output shows.

    A quality check that could not be evaluated (no items for it) fails: a gate must not pass on
    an empty run. A coverage check short of items reads ``too few items``, which fails the gate
    as well. The one exception is the placebo FPR of a run without SHAM items, skipped.
    """
    if check.passed is True:
        return "pass"
    if check.needed is not None:
        return TOO_FEW
    return "skip" if _skippable(check) else "fail"


@dataclass(frozen=True)
class Verdict:
    """The gate's verdict, computed once from its checks; every renderer and the exit code
    read it, so they name the same failed checks."""

    checks: tuple[Check, ...]
    failed: tuple[Check, ...]
    """The checks that failed on their failures."""
    kinds: tuple[str, ...]
    """Why the gate failed: the kinds of the failed checks, and ``too few items``, coverage
    first (the order that decides the exit code)."""
    code: ExitCode
    too_few: tuple[Check, ...] = ()
    """The checks of too few items, one per scope at most."""

    @property
    def label(self) -> str:
        """PASSED, or FAILED naming every reason the gate failed."""
        return f"FAILED ({', '.join(self.kinds)})" if self.kinds else "PASSED"


def verdict(checks: Sequence[Check]) -> Verdict:
    """The verdict of ``checks``: exit 2 if a coverage check failed or had too few items, else
    1 if a quality or regression check failed, else 0. Too few items is one reason, however
    many scopes lack items."""
    failed = tuple(c for c in checks if check_status(c) == "fail")
    too_few = tuple(c for c in checks if check_status(c) == TOO_FEW)
    kinds = tuple(
        kind
        for kind in _KINDS
        if (too_few if kind == TOO_FEW else any(c.kind == kind for c in failed))
    )
    if "coverage" in kinds or too_few:
        code = ExitCode.COVERAGE_FAILED
    elif kinds:
        code = ExitCode.CHECK_FAILED
    else:
        code = ExitCode.OK
    return Verdict(checks=tuple(checks), failed=failed, kinds=kinds, code=code, too_few=too_few)


def _skippable(check: Check) -> bool:
    # a run without SHAM items has no placebo FPR to bound: that is not a failure of the run
    return check.passed is None and check.name.startswith("fpr_sham")


def unevaluable_reason(items: pd.DataFrame) -> str | None:
    """Why the run cannot be gated at all (no lines, or not one valid grade), else None.

    Grades are counted, not lines: a run whose every reply failed verification (a judge that
    never answers in the schema) has judged lines and still nothing to stand on.
    """
    if items.empty:
        return "the result file holds no result lines"
    grades: dict[str, int] = {}
    for label in labels():
        for outcome, count in items[f"{label}_outcome"].value_counts().items():
            if outcome != "missing":
                grades[str(outcome)] = grades.get(str(outcome), 0) + int(count)
    if not grades.get("valid"):
        listed = ", ".join(f"{outcome} {count}" for outcome, count in sorted(grades.items()))
        return f"not one of the {sum(grades.values())} grades is valid ({listed})"
    return None


def unshared_reason(counts: dict[str, int]) -> str | None:
    """Why a comparison with a baseline cannot be made (it shares no item), else None.

    ``counts`` are ``Report.comparison_counts``; the caller names the baseline file.
    """
    if counts.get("shared", 0) > 0:
        return None
    return (
        "shares no item (model, item_id, modification) with the results: baseline only "
        f"{counts.get('baseline_only', 0)}, results only {counts.get('candidate_only', 0)}, "
        f"lines without item_id {counts.get('unmatched', 0)}"
    )
