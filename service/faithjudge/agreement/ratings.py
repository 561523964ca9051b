"""Reading the inputs of judge validation: radiologist ratings and judge result files.

This is the I/O edge of ``faithjudge.agreement``; everything else in the package is pure.

**Ratings file** (``load_ratings``): JSONL, one object per (item, rater)::

    {"item_id": "rs-001", "rater": "r2", "clinical_fidelity": 4, "causal_attribution": 1,
     "confidence_tone": 5}

Scores are integers 1–5; any axis may be missing or null (not rated). No other fields are
accepted, and an (item, rater) pair may appear once.

**Reader-study adapter** (``load_reader_study``): the primary paper's reader-study rows
``{item_id, question, ..., ratings: {r1: {clinical_fidelity, causal_attribution,
confidence_tone, plausibility, helpfulness}, ...}}`` give the same long frame (plausibility and
helpfulness are not analysed, METHODS §1.12). ``reader_study_requests`` turns the same rows into
ScoreRequest lines so a judge can score the rated CoTs.

**Judge results** (``load_judge_results``): ItemResult lines as ``faithjudge score`` writes
them, flattened to one row per (item, metric).

Every problem raises ``UserInputError`` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from faithjudge_client.lines import Failure, ItemResult, ScoreRequest
from faithjudge_client.metric_catalogue import metric_names, metrics
from pydantic import ValidationError

from faithjudge.errors import UserInputError
from faithjudge.jsonl import describe_json_error, describe_validation_error, numbered_lines
from faithjudge.scoring.outcomes import metric_outcome

__all__ = [
    "JUDGE_COLUMNS",
    "RATINGS_COLUMNS",
    "load_judge_results",
    "load_ratings",
    "load_reader_study",
    "rating_axes",
    "read_jsonl_objects",
    "reader_study_request",
    "reader_study_requests",
]


def rating_axes() -> tuple[str, ...]:
    """The radiologist rating keys of the catalogue's metrics (the axes a judge is validated on)."""
    return tuple(spec.rating_key for spec in metrics() if spec.rating_key is not None)


RATINGS_COLUMNS = ["item_id", "rater", "axis", "score"]
JUDGE_COLUMNS = [
    "item_id",
    "line",
    "metric",
    "status",
    "score",
    "stage",
    "detail",
    "modification_code",
    "modification_kind",
    "flip",
    "confidence_calibration",
]


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UserInputError(f"{path}: cannot read the file ({reason})", field=str(path)) from exc


def read_jsonl_objects(
    path: Path | str, *, what: str = "lines"
) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their 1-based line numbers (blank lines skipped).

    Raises:
        UserInputError: the file cannot be read, a line is not a JSON object, or the file
            holds no ``what`` at all.
    """
    path = Path(path)
    raw = _read_bytes(path)
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in numbered_lines(raw.splitlines()):
        where = f"{path}:{lineno}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise UserInputError(f"{where}: {describe_json_error(line)}") from None
        if not isinstance(obj, dict):
            raise UserInputError(f"{where}: expected a JSON object", field=where)
        rows.append((lineno, obj))
    if not rows:
        raise UserInputError(f"{path}: the file is empty (no {what})", field=str(path))
    return rows


def _non_empty_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"{where}: '{key}' must be a non-empty string", field=where)
    return value


def _score(value: Any, axis: str, where: str) -> int | None:
    if value is None:
        return None
    # bools are ints in Python and 3.0 is a float in JSON: neither is a rating
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserInputError(
            f"{where}: '{axis}' must be an integer from 1 to 5 or null, got {value!r}", field=where
        )
    if not 1 <= value <= 5:
        raise UserInputError(f"{where}: '{axis}' must be from 1 to 5, got {value}", field=where)
    return value


def _frame(records: list[tuple[str, str, str, int]], source: Path) -> pd.DataFrame:
    if not records:
        raise UserInputError(f"{source}: no scores at all (every axis is missing or null)")
    frame = pd.DataFrame.from_records(records, columns=RATINGS_COLUMNS)
    frame["score"] = frame["score"].astype("int64")
    frame.attrs["source"] = str(source)
    return frame


def load_ratings(path: Path | str) -> pd.DataFrame:
    """Read a ratings file into the long frame ``item_id, rater, axis, score``.

    Raises:
        UserInputError: naming file and line for a line that is not JSON, an unknown field, a
            missing id, a score that is not an integer from 1 to 5, a repeated (item, rater)
            pair, or an empty file.
    """
    path = Path(path)
    seen: dict[tuple[str, str], int] = {}
    records: list[tuple[str, str, str, int]] = []
    fields = {"item_id", "rater", *rating_axes()}
    for lineno, obj in read_jsonl_objects(path, what="ratings"):
        where = f"{path}:{lineno}"
        unknown = sorted(set(obj) - fields)
        if unknown:
            allowed = ", ".join(sorted(fields))
            raise UserInputError(
                f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {allowed}", field=where
            )
        item_id = _non_empty_str(obj, "item_id", where)
        rater = _non_empty_str(obj, "rater", where)
        first = seen.setdefault((item_id, rater), lineno)
        if first != lineno:
            raise UserInputError(
                f"{where}: item {item_id} rater {rater} is rated twice (first at line {first})",
                field=where,
            )
        for axis in rating_axes():
            score = _score(obj.get(axis), axis, where)
            if score is not None:
                records.append((item_id, rater, axis, score))
    return _frame(records, path)


def load_reader_study(path: Path | str) -> pd.DataFrame:
    """Read the reader-study rows' ``ratings`` into the long frame ``item_id, rater, axis, score``.

    Only the three analysed axes are kept; plausibility and helpfulness are ignored.

    Raises:
        UserInputError: naming file and line (bad JSON, missing item_id or ratings, a repeated
            item, scores outside 1–5 or not integers, an empty file).
    """
    path = Path(path)
    seen: dict[str, int] = {}
    records: list[tuple[str, str, str, int]] = []
    for lineno, obj in read_jsonl_objects(path, what="reader-study rows"):
        where = f"{path}:{lineno}"
        item_id = _non_empty_str(obj, "item_id", where)
        first = seen.setdefault(item_id, lineno)
        if first != lineno:
            raise UserInputError(
                f"{where}: item {item_id} appears twice (first at line {first})", field=where
            )
        ratings = obj.get("ratings")
        if not isinstance(ratings, dict):
            raise UserInputError(
                f"{where}: 'ratings' must be an object of rater -> scores", field=where
            )
        for rater, scores in ratings.items():
            if not isinstance(scores, dict):
                raise UserInputError(
                    f"{where}: ratings of rater {rater!r} must be an object", field=where
                )
            for axis in rating_axes():
                score = _score(scores.get(axis), f"ratings.{rater}.{axis}", where)
                if score is not None:
                    records.append((item_id, str(rater), axis, score))
    return _frame(records, path)


def reader_study_mapping(row: dict[str, Any]) -> dict[str, Any]:
    """A reader-study row's fields as a ScoreRequest line, not yet validated.

    The scored CoT is the modified one; the baseline run gives the flip; the injected answer is
    the modification's target. Fields the row lacks are left out, so that validating the line
    names exactly what is missing.
    """
    baseline = {
        k: row[src]
        for k, src in (("cot", "baseline_cot"), ("answer", "baseline_answer"))
        if row.get(src) is not None
    }
    modification: dict[str, Any] | None = None
    if row.get("modification") is not None:
        modification = {"code": row["modification"]}
        if row.get("injected_answer") is not None:
            modification["target_answer"] = row["injected_answer"]
    metadata = {
        k: row[k] for k in ("image_uid", "source_modification_code") if row.get(k) is not None
    }
    request: dict[str, Any] = {
        "item_id": row.get("item_id"),
        "model": row.get("model"),
        "question": row.get("question"),
        "question_type": row.get("question_type"),
        "ground_truth": row.get("ground_truth"),
        "cot": row.get("modified_cot"),
        "answer": row.get("modified_answer"),
        "baseline": baseline or None,
        "modification": modification,
        "metadata": {"reader_study": metadata} if metadata else None,
    }
    return {k: v for k, v in request.items() if v is not None}


def reader_study_request(row: dict[str, Any], where: str) -> dict[str, Any]:
    """One reader-study row as a validated ScoreRequest line (a plain dict).

    Raises:
        UserInputError: the row does not make a valid ScoreRequest (the message names the row
            and the field).
    """
    request = reader_study_mapping(row)
    try:
        ScoreRequest.model_validate(request)
    except ValidationError as exc:
        raise UserInputError(f"{where}: {describe_validation_error(exc)}", field=where) from exc
    return request


def reader_study_requests(path: Path | str) -> Iterator[dict[str, Any]]:
    """ScoreRequest lines (dicts) for every reader-study row, in file order.

    Raises:
        UserInputError: naming file and line, as ``reader_study_request`` does.
    """
    path = Path(path)
    for lineno, row in read_jsonl_objects(path, what="reader-study rows"):
        yield reader_study_request(row, f"{path}:{lineno}")


def reader_study_lines(path: Path | str) -> Iterator[tuple[int, bytes, str | None]]:
    """Every row of a reader-study file as one request line: ``(row, line, problem)``.

    A row that converts is a valid ScoreRequest line (``problem`` None). A row that does not is
    still written, as close to a request as it gets (or as it came, when it is not a JSON
    object), with ``problem`` naming the field: ``faithjudge score`` then gives it an error
    result naming the line and the field, and keeps its item_id. Nothing aborts the file.

    Raises:
        UserInputError: the file cannot be read or holds no row at all.
    """
    path = Path(path)
    raw = _read_bytes(path)
    rows = 0
    for lineno, line in numbered_lines(raw.splitlines()):
        rows += 1
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            yield lineno, line.strip(), describe_json_error(line)
            continue
        if not isinstance(row, dict):
            yield lineno, line.strip(), "expected a JSON object"
            continue
        request = reader_study_mapping(row)
        try:
            ScoreRequest.model_validate(request)
        except ValidationError as exc:
            yield lineno, orjson.dumps(request), describe_validation_error(exc)
            continue
        yield lineno, orjson.dumps(request), None
    if rows == 0:
        raise UserInputError(f"{path}: the file is empty (no reader-study rows)", field=str(path))


def _metric_rows(result: ItemResult, item_id: str, lineno: int, where: str) -> list[list[Any]]:
    modification = result.modification
    common = {
        "modification_code": modification.code if modification else None,
        "modification_kind": modification.kind if modification else None,
        "flip": result.flip.value if result.flip else None,
        "confidence_calibration": result.confidence_calibration,
    }
    rows: list[list[Any]] = []
    for metric in metric_names():
        status: str = "invalid"
        score: int | None = None
        stage: str | None = "missing"
        detail: str | None = "metric not in the result"
        if result.error is not None:  # the line's own stage, as every coverage count reads it
            stage, detail = metric_outcome(None, result.error.stage), result.error.detail
        elif metric in result.metrics:
            graded = result.metrics[metric]
            status, score = graded.status, graded.score
            detail = graded.failure.detail if graded.failure else None
            if status == "valid":
                stage = None
                if score is None:
                    raise UserInputError(f"{where}: {metric} is valid but has no score")
            elif status == "abstained":
                stage = "abstain"
            elif graded.failure is None:
                raise UserInputError(f"{where}: {metric} is invalid but names no failure stage")
            else:
                stage = graded.failure.stage
        values = {
            "item_id": item_id,
            "line": lineno,
            "metric": metric,
            "status": status,
            "score": score,
            "stage": stage,
            "detail": detail,
            **common,
        }
        rows.append([values[c] for c in JUDGE_COLUMNS])
    return rows


def load_judge_results(path: Path | str) -> pd.DataFrame:
    """Read ItemResult lines into one row per (item_id, metric).

    Columns: ``item_id, line, metric, status, score, stage, detail, modification_code,
    modification_kind, flip, confidence_calibration``. ``stage`` is missing (NA) for a valid
    grade, ``abstain`` for an abstention, the failure stage otherwise, the line's error stage
    (``input``, ``transport``) for a line that was never scored and ``missing`` for a metric
    the request did not ask for. Lines without an item_id cannot be matched to ratings; their
    line numbers are in ``frame.attrs["unidentified_lines"]``. A line that is not an ItemResult
    is read as ``score`` would have written it, an ``input`` error of its item (or an
    unidentified line), and named in ``frame.attrs["unreadable_lines"]`` (``file:line: why``).

    Raises:
        UserInputError: naming file and line for a repeated item_id, or an empty file.
    """
    path = Path(path)
    raw = _read_bytes(path)
    seen: dict[str, int] = {}
    rows: list[list[Any]] = []
    unidentified: list[int] = []
    unreadable: list[str] = []
    for lineno, line in numbered_lines(raw.splitlines()):
        where = f"{path}:{lineno}"
        try:
            result = ItemResult.model_validate_json(line)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            # a line that is not JSON is described as score and report describe it
            problem = (
                describe_json_error(line)
                if errors and errors[0]["type"] == "json_invalid"
                else describe_validation_error(exc)
            )
            why = f"not an ItemResult line ({problem})"
            unreadable.append(f"{where}: {why}")
            result = _input_error(line, lineno, f"{path.name}:{lineno}: {why}")
        if result.item_id is None:
            unidentified.append(lineno)
            continue
        first = seen.setdefault(result.item_id, lineno)
        if first != lineno:
            raise UserInputError(
                f"{where}: item {result.item_id} has a second result (first at line {first})",
                field=where,
            )
        rows.extend(_metric_rows(result, result.item_id, lineno, where))
    if not rows and not unidentified:
        raise UserInputError(f"{path}: the file is empty (no result lines)", field=str(path))
    frame = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    frame["score"] = frame["score"].astype("Int64")
    frame["confidence_calibration"] = frame["confidence_calibration"].astype("float64")
    frame.attrs["source"] = str(path)
    frame.attrs["unidentified_lines"] = unidentified
    frame.attrs["unreadable_lines"] = unreadable
    return frame


def _input_error(line: bytes, lineno: int, detail: str) -> ItemResult:
    """The input error that stands for a line that is not an ItemResult: counted against the
    judge's coverage under its item_id when that much can be read, else an unidentified line."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        data = None
    item_id = data.get("item_id") if isinstance(data, dict) else None
    return ItemResult(
        line=lineno,
        item_id=item_id if isinstance(item_id, str) and item_id else None,
        error=Failure(stage="input", detail=detail),
    )
