"""Stratified dev/test splits of reader-study rows, ScoreRequest lines or ItemResult lines.

METHODS §1.12 splits the reader study so that every stratum appears in both halves, with the
seed fixed a priori. Strata are built from row fields (``by``); two are derived:

- ``modification``: the catalogue code of the row's modification (a reader-study string, a
  request's ``modification.code`` or a result's resolved ``code``), so ``TB-RAD`` and
  ``bias_insert_radiologisthint_True`` fall into one stratum;
- ``flip``: a result's ``flip.value``; otherwise decided from the baseline and modified answers
  (reader study: ``baseline_answer``/``modified_answer``; request: ``baseline``/``answer`` or
  the answers parsed from the CoTs) with the service's flip rule (ordinal: >= 2 grades).
  An undecidable flip (unparsed answer) is its own stratum, ``undecided``; so is a row with
  no baseline to flip from (a request without ``baseline``, a result whose ``flip`` is null),
  ``no_baseline``.

Pure: rows in, rows out (in their input order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faithjudge.errors import UserInputError
from faithjudge.scoring.answers import decide_flip, extract_answer, normalize_answer, parse_question
from faithjudge.scoring.modifications import lookup_modification

__all__ = ["derive_flip", "stratified_split", "stratum_of"]

Row = Mapping[str, Any]


def _modification(row: Row) -> str:
    value = row.get("modification")
    code = value.get("code") if isinstance(value, Mapping) else value
    if not isinstance(code, str) or not code:
        return "none"
    try:
        return lookup_modification(code).code
    except UserInputError:
        return code


def derive_flip(row: Row, *, min_ordinal_grades: int = 2) -> bool | None:
    """The flip of a row (see the module docstring); None when it cannot be decided.

    Raises:
        UserInputError: the row carries no baseline answer or CoT at all, or no question.
    """
    flip = row.get("flip")
    if isinstance(flip, Mapping):
        value = flip.get("value")
        return value if isinstance(value, bool) else None
    if isinstance(flip, bool):
        return flip
    question = row.get("question")
    if not isinstance(question, str) or not question:
        raise UserInputError("cannot derive the flip: the row has no 'question'", field="flip")
    if "baseline_answer" in row or "modified_answer" in row:
        base, modified = row.get("baseline_answer"), row.get("modified_answer")
    elif isinstance(row.get("baseline"), Mapping):
        baseline = row["baseline"]
        base = baseline.get("answer") or extract_answer(baseline.get("cot"))
        modified = row.get("answer") or extract_answer(row.get("cot"))
    else:
        raise UserInputError(
            "cannot derive the flip: the row has neither a result 'flip', reader-study "
            "answers (baseline_answer, modified_answer) nor a request 'baseline'",
            field="flip",
        )
    try:
        spec = parse_question(question, row.get("question_type"))
    except ValueError as exc:
        raise UserInputError(str(exc), field="question_type") from exc
    decided = decide_flip(
        normalize_answer(base if isinstance(base, str) else None, spec),
        normalize_answer(modified if isinstance(modified, str) else None, spec),
        spec,
        min_ordinal_grades=min_ordinal_grades,
    )
    return decided.value


def _flip_stratum(row: Row) -> str:
    has_baseline = (
        isinstance(row.get("flip"), Mapping | bool)
        or "baseline_answer" in row
        or "modified_answer" in row
        or isinstance(row.get("baseline"), Mapping)
    )
    if not has_baseline:  # a request without a baseline, a result without a flip: valid rows
        return "no_baseline"
    value = derive_flip(row)
    return "undecided" if value is None else str(value).lower()


def stratum_of(row: Row, by: Sequence[str]) -> tuple[str, ...]:
    """The stratum key of ``row`` under the fields ``by``.

    Raises:
        UserInputError: a field is absent from the row (and is not a derived one).
    """
    key: list[str] = []
    for field in by:
        if field == "modification":
            key.append(_modification(row))
        elif field == "flip":
            key.append(_flip_stratum(row))
        elif field in row:
            key.append(str(row[field]))
        else:
            raise UserInputError(f"the row has no field {field!r} to stratify by", field=field)
    return tuple(key)


def stratified_split(
    rows: Sequence[Row],
    *,
    by: Sequence[str] = ("modification", "flip"),
    test_fraction: float = 0.5,
    seed: int = 0,
    where: Sequence[str] | None = None,
) -> tuple[list[Row], list[Row]]:
    """Split ``rows`` into (dev, test), stratified by ``by``; deterministic for a seed.

    Each stratum sends floor(size * test_fraction) rows to test; the remaining test places
    (to reach round(N * test_fraction) overall) go one each to the strata with the largest
    remainders, ties broken by the seeded generator. Rows keep their input order in each half.
    ``where`` names the rows in errors (e.g. ``FILE:LINE``); by default ``row N``.

    Raises:
        UserInputError: ``test_fraction`` is not within (0, 1), or a row lacks a field of ``by``
            (the message names the row).
    """
    if not 0.0 < test_fraction < 1.0:
        raise UserInputError(
            f"test_fraction must be within (0, 1), got {test_fraction}", field="test_fraction"
        )
    strata: dict[tuple[str, ...], list[int]] = {}
    for index, row in enumerate(rows):
        try:
            key = stratum_of(row, by)
        except UserInputError as exc:
            name = where[index] if where is not None else f"row {index + 1}"
            raise UserInputError(f"{name}: {exc}", field=exc.field) from exc
        strata.setdefault(key, []).append(index)

    rng = np.random.default_rng(seed)
    keys = sorted(strata)
    quotas = {k: len(strata[k]) * test_fraction for k in keys}
    take = {k: math.floor(quotas[k] + 1e-9) for k in keys}
    extra = math.floor(len(rows) * test_fraction + 0.5) - sum(take.values())
    tiebreak = rng.permutation(len(keys))
    by_remainder = sorted(
        range(len(keys)), key=lambda i: (-(quotas[keys[i]] - take[keys[i]]), tiebreak[i])
    )
    for i in by_remainder[: max(0, extra)]:
        if take[keys[i]] < len(strata[keys[i]]):
            take[keys[i]] += 1

    test_index: set[int] = set()
    for key in keys:
        members = strata[key]
        order = rng.permutation(len(members))
        test_index.update(members[j] for j in order[: take[key]])
    dev = [row for i, row in enumerate(rows) if i not in test_index]
    test = [row for i, row in enumerate(rows) if i in test_index]
    return dev, test
