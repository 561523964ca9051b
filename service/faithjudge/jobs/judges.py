"""The judges of a service as jobs record them, and why a job waits for another one.

A job is stored with the judge it was uploaded under (``JobJudge``): its name and the hash of
everything that decides a grade (the judge and its frozen settings, the prompt set, the
knowledge base, the scoring settings). A worker scores a job only with a judge of the same hash,
so a service restarted with another judge or configuration leaves the job waiting, its
status saying for what, until a process that offers that judge takes it up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from faithjudge.jobs.interface import WAITING_PREFIX, JobJudge, JobRow
from faithjudge.pipeline.scorer import Scorer, canonical_json

__all__ = ["job_judge", "job_judge_spec", "waiting_detail"]

# what each part of a configuration is called in a waiting job's status; the keys are the
# scorer's ``judge_config`` ones, older than the word "judge" and kept: they are hashed
_PARTS = {
    "evaluator": "judge",
    "evaluator_settings_sha256": "judge settings",
    "prompt_set": "prompt set",
    "prompt_sha256": "prompts",
    "kb_id": "knowledge base",
    "kb_version": "knowledge base version",
    "kb_sha256": "knowledge base content",
    "scoring": "scoring settings",
}


def job_judge(name: str, scorer: Scorer) -> JobJudge:
    """The judge ``name`` as a job records it, from the scorer built for it: the scorer's
    ``judge_config`` (whose hash every result's provenance carries) under the judge's name."""
    text = canonical_json({"judge": name, **scorer.judge_config})
    return JobJudge(name=name, key=hashlib.sha256(text).hexdigest(), config=text.decode())


def job_judge_spec(row: JobRow) -> str | None:
    """The spec of the judge ``row`` was uploaded under (None: a job stored before
    judges were recorded)."""
    judge = _config(row.judge_config).get("evaluator")
    return judge if isinstance(judge, str) else None


def waiting_detail(row: JobRow, offered: Sequence[JobJudge]) -> str:
    """Why ``row`` waits: the judge it needs and what this service offers instead."""
    names = ", ".join(judge.name for judge in offered) or "no judge"
    wanted = row.judge or "(unnamed)"
    same_name = next((judge for judge in offered if judge.name == row.judge), None)
    if same_name is None:
        return f"{WAITING_PREFIX}{wanted}; this service offers {names}"
    changed = _changes(_config(row.judge_config), _config(same_name.config))
    return (
        f"{WAITING_PREFIX}{wanted} as it was at upload; this service offers {names}, "
        f"whose {wanted} differs in {changed}"
    )


def _config(text: str | None) -> Mapping[str, Any]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    parts = []
    for key, label in _PARTS.items():
        if then.get(key) != now.get(key):
            was, is_ = then.get(key), now.get(key)
            if isinstance(was, str) and isinstance(is_, str) and not key.endswith("sha256"):
                parts.append(f"{label} ({is_}, not {was})")
            else:
                parts.append(label)
    return ", ".join(parts) or "configuration"
