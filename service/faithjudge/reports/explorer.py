"""The data behind the HTML report's item explorer: one JSON record per listed item.

The report lists the first rows of the item table. For them it gathers, besides the table's
own columns, the parts of the result line the table does not keep (``ItemDetails``, collected in
the same pass over the lines) and, from the request file, the question's ground truth, the
baseline answer and the CoT (``read_request_views``). ``explorer_json`` embeds the records in
a ``<script type="application/json">`` block: every ``<``, ``>`` and ``&`` is escaped there, so
no text from the lines can close the block or open a tag.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from faithjudge_client.lines import MAX_COT_CHARS, NO_BASELINE, ItemResult
from faithjudge_client.metric_catalogue import labels, metrics

from faithjudge.jsonl import describe_json_error, numbered_lines
from faithjudge.reports.io import ReportInputError
from faithjudge.reports.item_details import item_details

__all__ = [
    "ItemDetails",
    "RequestView",
    "RequestViews",
    "answer_text",
    "cot_segments",
    "explorer_data",
    "explorer_json",
    "listed_keys",
    "read_request_views",
]

# What a missing answer reads as, instead of a bare null (or pandas' NaN)
NO_OPTION_MATCHED = "no option matched"
NO_ANSWER = "no answer"


class ItemDetails:
    """The drill-down of the first ``limit`` result lines, taken while they stream past."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: list[dict[str, Any]] = []

    def watch(self, results: Iterable[ItemResult]) -> Iterator[ItemResult]:
        """Pass ``results`` through, keeping the details of the first ``limit``."""
        for result in results:
            if len(self.rows) < self.limit:
                self.rows.append(item_details(result))
            yield result


@dataclass(frozen=True, slots=True)
class RequestView:
    """What the report shows of one request line."""

    item_id: str | None = None
    ground_truth: str | None = None
    baseline_answer: str | None = None
    cot: str | None = None


@dataclass(frozen=True)
class RequestViews:
    """Request lines keyed by ``item_id`` and by ``#LINE``; ``problems`` names unread lines."""

    views: dict[str, RequestView] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def find(self, line: Any, item_id: Any) -> RequestView | None:
        """The request line of a result: its own line number when the ids agree, else its id.

        Results of another file (merged runs) carry line numbers of that file; the id check
        keeps a CoT from being shown under the wrong item.
        """
        item_id = item_id if isinstance(item_id, str) else None
        by_line = self.views.get(f"#{_int(line)}") if _int(line) is not None else None
        if by_line is not None and (item_id is None or by_line.item_id in (None, item_id)):
            return by_line
        return self.views.get(item_id) if item_id is not None else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _capped(value: Any) -> str | None:
    """A request's text as the page shows it: no longer than ``score`` accepts a CoT. A line
    refused for a longer one (an input error, never judged) would otherwise put all of it into
    the page."""
    text = _text(value)
    if text is None or len(text) <= MAX_COT_CHARS:
        return text
    return f"{text[:MAX_COT_CHARS]} [… {len(text) - MAX_COT_CHARS:,} more characters not shown]"


def _int(value: Any) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def listed_keys(items: pd.DataFrame, max_items: int) -> set[str]:
    """The request keys (``item_id``, ``#LINE``) of the rows the report lists."""
    head = items.head(max_items)
    keys = {f"#{n}" for n in (_int(v) for v in head["line"]) if n is not None}
    keys.update(v for v in head["item_id"] if isinstance(v, str))
    return keys


def read_request_views(path: Path, wanted: Collection[str] | None = None) -> RequestViews:
    """The request lines of ``path`` the report shows (all of them when ``wanted`` is None).

    Only the lines whose ``#LINE`` or ``item_id`` is in ``wanted`` are kept, so a large request
    file costs one pass and no memory beyond the listed items. A line that is not a JSON object
    is named in ``problems`` (``file:line: why``); ``score`` made it an input error already.

    Raises:
        ReportInputError: the file cannot be opened.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ReportInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    views: dict[str, RequestView] = {}
    problems: list[str] = []
    with handle:
        for number, raw in numbered_lines(handle):
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                problems.append(f"{path}:{number}: {describe_json_error(raw)}")
                continue
            if not isinstance(data, dict):
                problems.append(f"{path}:{number}: expected a JSON object")
                continue
            item_id = _text(data.get("item_id"))
            keys = [key for key in (f"#{number}", item_id) if key is not None]
            if wanted is not None:
                keys = [key for key in keys if key in wanted]
            if not keys:
                continue
            baseline = data.get("baseline")
            view = RequestView(
                item_id=item_id,
                ground_truth=_capped(data.get("ground_truth")),
                baseline_answer=_capped(baseline.get("answer"))
                if isinstance(baseline, dict)
                else None,
                cot=_capped(data.get("cot")),
            )
            for key in keys:
                views.setdefault(key, view)
    return RequestViews(views, problems)


def cot_segments(cot: str, quotes: Sequence[tuple[str, int, int, str]]) -> list[list[str]]:
    """The CoT cut at every quote bound: ``[text]`` or ``[text, "CA CF"]`` (the labels quoting it).

    Quote spans index the original CoT; spans out of its range are ignored.
    """
    spans = [(lab, a, b) for lab, a, b, _ in quotes if 0 <= a < b <= len(cot)]
    bounds = sorted({0, len(cot), *(a for _, a, _ in spans), *(b for _, _, b in spans)})
    out: list[list[str]] = []
    for a, b in itertools.pairwise(bounds):
        quoting = sorted({lab for lab, s, e in spans if s <= a and b <= e})
        out.append([cot[a:b], " ".join(quoting)] if quoting else [cot[a:b]])
    return out


def answer_text(answer: Any, in_options: Any) -> str:
    """The answer as the report shows it: never empty, never NaN."""
    if isinstance(answer, str) and answer:
        return answer
    if in_options is False or in_options == 0.0:
        return NO_OPTION_MATCHED
    return NO_ANSWER


def _flag(value: Any) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


def _flip(flip: Any, reason: Any, error_stage: Any) -> str:
    decided = _flag(flip)
    if decided is not None:
        return "flip" if decided else "non-flip"
    if reason == NO_BASELINE:
        return "no baseline"
    return "n/a" if isinstance(error_stage, str) or not isinstance(reason, str) else "undecided"


def _item(row: Any, detail: Mapping[str, Any] | None, view: RequestView | None) -> dict[str, Any]:
    error_stage = _text(row.error_stage)
    graded = detail["metrics"] if detail is not None else {}
    scores: dict[str, dict[str, Any]] = {}
    for lab in labels():
        outcome = getattr(row, f"{lab}_outcome")
        score = getattr(row, f"{lab}_score")
        scores[lab] = {
            "outcome": outcome,
            "score": None if pd.isna(score) else int(score),
            **graded.get(lab, {}),
        }
    stages = (
        [error_stage]
        if error_stage is not None
        else sorted({m["outcome"] for m in scores.values()} - {"valid", "missing"})
    )
    in_options = _flag(row.answer_in_options)
    cot = view.cot if view is not None else None
    # a line never judged records no modification: the table's "(none)", "baseline", "none"
    # and "n/a" are its fill for a line without one, which this line cannot be said to be
    judged = error_stage is None
    return {
        "line": _int(row.line),
        "item_id": _text(row.item_id),
        "model": _text(row.model),
        "modification": _text(row.modification) if judged else None,
        "kind": _text(row.kind) if judged else None,
        "channel": _text(row.channel) if judged else None,
        "alignment": _text(row.alignment) if judged else None,
        "target_answer": detail.get("target_answer") if detail is not None else None,
        "question": _text(row.question),
        "ground_truth": view.ground_truth if view is not None else None,
        "baseline_answer": view.baseline_answer if view is not None else None,
        "answer": answer_text(row.answer, in_options),
        "answer_matched": isinstance(row.answer, str) and bool(row.answer),
        "answer_raw": detail.get("answer_raw") if detail is not None else None,
        "costs": detail.get("costs") if detail is not None else None,
        "answer_in_options": in_options,
        "correct": _flag(row.correct),
        "flip": _flip(row.flip, row.flip_reason, error_stage),
        "flip_reason": _text(row.flip_reason),
        "error": None
        if error_stage is None
        else {"stage": error_stage, "detail": _text(row.error_detail) or ""},
        "stages": stages,
        "n_quotes": int(row.n_quotes),
        "metrics": scores,
        "cot": None if cot is None else cot_segments(cot, row.quotes),
        "quotes": [] if cot is not None else [list(q) for q in row.quotes],
    }


def explorer_data(
    items: pd.DataFrame,
    *,
    max_items: int,
    details: Sequence[Mapping[str, Any]] | None = None,
    requests: RequestViews | None = None,
) -> dict[str, Any]:
    """The explorer's records: the first ``max_items`` rows, with what is known of each."""
    listed = []
    for index, row in enumerate(items.head(max_items).itertuples(index=False)):
        detail = details[index] if details is not None and index < len(details) else None
        view = requests.find(row.line, row.item_id) if requests is not None else None
        listed.append(_item(row, detail, view))
    return {
        "metrics": [{"label": spec.label, "title": spec.title} for spec in metrics()],
        "total": len(items),
        "requests": requests is not None,
        "details": details is not None,
        "items": listed,
    }


def explorer_json(data: Mapping[str, Any]) -> str:
    """``data`` as JSON that is inert inside ``<script type="application/json">``."""
    text = orjson.dumps(data).decode()
    # inside JSON these characters only ever occur in strings, where the escapes are equivalent
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
