"""The item table: one row per result line, flat columns, the input of every report.

Per metric the table keeps the normalised score (NaN unless the grade is valid, so unevaluable
items drop out of that metric's mean only) and the outcome used by the coverage diagnostics:
``valid``, the metric's failure stage (``parse``, ``schema``, ``evidence``, ``abstain``,
``transport``, ``kb``), the line's error stage when the metric never ran, or ``missing`` when it
was not requested. A line without a model (one that could not be read) is attributed to the
run's only model, or to no model when the run holds several. Flips are taken as the result
line decided them (``flip.value``); ordinal questions therefore already follow the two-grade
rule of METHODS §1.6.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from faithjudge_client.lines import NO_BASELINE, ItemResult
from faithjudge_client.metric_catalogue import CC_LABEL, calibration_pair, labels, metrics

from faithjudge.scoring.answers import parse_question
from faithjudge.scoring.outcomes import metric_outcome

__all__ = ["item_table"]

# Gathered as C doubles: a Python float per cell would cost four times the memory.
_FLOAT_FLAGS = ("correct", "answer_in_options", "flip", "flipped", "flip_undecided", CC_LABEL)


@lru_cache(maxsize=4096)
def _question_type(question: str | None) -> str:
    if not question:
        return "unknown"
    try:
        kind = parse_question(question).kind
    except ValueError:
        return "unknown"
    return kind or "unknown"


def _alignment(aligned: bool | None) -> str:
    return {True: "aligned", False: "misleading"}.get(aligned, "n/a")  # type: ignore[arg-type]


def item_table(results: Iterable[ItemResult], *, quote_rows: int | None = None) -> pd.DataFrame:
    """Flatten result lines into the item table (one row per line, in input order).

    Verified quotes are kept per row as ``(label, start, end, text)`` for the HTML report, which
    shows the first rows only: ``quote_rows`` keeps the quote texts of that many rows and just
    their count (``n_quotes``) for the rest, so a large run's table stays small.
    """
    specs = metrics()
    labs = labels()
    float_columns = frozenset((*_FLOAT_FLAGS, *labs, *(f"{lab}_score" for lab in labs)))
    calibrated = frozenset(spec.label for spec in calibration_pair())
    cols: dict[str, Any] = {
        name: array("d") if name in float_columns else []
        for name in (
            "line", "item_id", "model", "question", "question_type", "modification", "kind",
            "channel", "alignment", "answer", "answer_in_options", "correct", "flip", "flipped",
            "flip_undecided",
            "flip_reason", CC_LABEL,
            "error_stage", "error_detail", "n_quotes", "quotes",
            *(f"{lab}_score" for lab in labs), *labs, *(f"{lab}_outcome" for lab in labs),
        )
    }  # fmt: skip
    # Every parsed line brings its own copy of strings that repeat across lines (the question,
    # the model, the reason of a flip): one shared copy each keeps a large table small.
    shared: dict[str | None, str | None] = {}

    def one(text: str | None) -> str | None:
        return shared.setdefault(text, text)

    for result in results:
        mod = result.modification
        error_stage = result.error.stage if result.error is not None else None
        cols["line"].append(result.line)
        cols["item_id"].append(result.item_id)
        cols["model"].append(one(result.model))
        cols["question"].append(one(result.question))
        cols["question_type"].append(_question_type(result.question))
        cols["modification"].append(one(mod.code) if mod is not None else "(none)")
        cols["kind"].append(one(mod.kind) if mod is not None else "baseline")
        cols["channel"].append(one(mod.channel) if mod is not None else "none")
        cols["alignment"].append(_alignment(mod.aligned if mod is not None else None))
        cols["answer"].append(one(result.answer))
        cols["correct"].append(np.nan if result.correct is None else float(result.correct))
        in_options = result.answer_in_options
        cols["answer_in_options"].append(np.nan if in_options is None else float(in_options))
        flip = result.flip.value if result.flip is not None else None
        cols["flip"].append(np.nan if flip is None else float(flip))
        # the paper's flip rate counts flipped pairs over all pairs; an undecided pair is a pair
        paired = result.flip is not None and result.flip.reason != NO_BASELINE
        cols["flipped"].append(float(flip is True) if paired else np.nan)
        cols["flip_undecided"].append(float(flip is None) if paired else np.nan)
        cols["flip_reason"].append(one(result.flip.reason) if result.flip is not None else None)
        cols["error_stage"].append(error_stage)
        cols["error_detail"].append(result.error.detail if result.error is not None else None)
        quotes: list[tuple[str, int, int, str]] = []
        valid_cf_ct = True
        for spec in specs:
            label = spec.label
            graded = result.metrics.get(spec.name)
            outcome = metric_outcome(graded, error_stage)
            valid = outcome == "valid" and graded is not None
            cols[f"{label}_outcome"].append(outcome)
            score = graded.score if valid and graded is not None else None
            cols[f"{label}_score"].append(np.nan if score is None else float(score))
            norm = graded.normalized if valid and graded is not None else None
            if norm is None and score is not None:
                norm = (score - 1) / 4
            cols[label].append(np.nan if norm is None else float(norm))
            if label in calibrated and not valid:
                valid_cf_ct = False
            if graded is not None and valid:
                quotes.extend((label, q.span[0], q.span[1], q.text) for q in graded.quotes)
        cc = result.confidence_calibration
        # CC exists only where both of its inputs were graded (METHODS §1.7)
        cols[CC_LABEL].append(float(cc) if cc is not None and valid_cf_ct else np.nan)
        cols["n_quotes"].append(len(quotes))
        keep = quote_rows is None or len(cols["quotes"]) < quote_rows
        cols["quotes"].append(tuple(quotes) if keep else ())
    table = pd.DataFrame(
        {
            name: np.frombuffer(values, dtype=np.float64) if name in float_columns else values
            for name, values in cols.items()
        }
    )
    return _attribute_unnamed(table)


def _attribute_unnamed(table: pd.DataFrame) -> pd.DataFrame:
    """Lines without a model (an unreadable line) belong to the run's model when it has one.

    With several models such a line belongs to none: it stays in the run's counts (coverage,
    input errors) and out of every per-model table, never a model of its own.
    """
    named = table["model"].dropna().unique()
    if len(named) == 1 and table["model"].isna().any():
        table["model"] = table["model"].fillna(named[0])
    return table
