"""Answer records from the VLM sidecar's output (ScoreRequest lines with ``metadata.sidecar``).

The sidecar writes one ScoreRequest per (item, condition) run; the fields an audit needs map
one to one: ``modification.code`` is the condition (``baseline`` = the original), ``answer``
the parsed answer (empty = unparsed), ``ground_truth`` the gold, ``cot`` the rationale,
``metadata.sidecar.output.raw`` the raw reply and ``metadata.item`` the item metadata (keys the
answer record knows are kept, others dropped). A bias cue's polarity becomes the ``variant``.
A line that is not such a request is passed on unchanged, so validation names what is wrong.

Pure: one JSON object in, one out.
"""

from __future__ import annotations

from typing import Any

from faithjudge.audits.records import ItemMeta

__all__ = ["record_from_request"]

_META_KEYS = frozenset(ItemMeta.model_fields)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def record_from_request(request: Any) -> Any:
    """The answer record of one sidecar ScoreRequest line (a dict), or the line unchanged."""
    if not isinstance(request, dict) or "cot" not in request or "ground_truth" not in request:
        return request
    answer = request.get("answer")
    record: dict[str, Any] = {
        "model": request.get("model"),
        "item_id": request.get("item_id"),
        "condition": _get(request, "modification", "code") or "baseline",
        "variant": _get(request, "metadata", "sidecar", "polarity"),
        "raw_output": _get(request, "metadata", "sidecar", "output", "raw"),
        "answer": answer if isinstance(answer, str) and answer.strip() else None,
        "gold": request.get("ground_truth"),
        "question": _get(request, "metadata", "sidecar", "question_shown")
        or request.get("question"),
        "rationale": request.get("cot") or None,
    }
    item = _get(request, "metadata", "item")
    if isinstance(item, dict):
        meta = {k: v for k, v in item.items() if k in _META_KEYS}
        if meta:
            record["metadata"] = meta
    return {k: v for k, v in record.items() if v is not None}
